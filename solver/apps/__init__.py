"""The applications built on the solver core: the memory model (`memory`), the numerical
simulator (`simulate`), the block_m x block_n grid of `solve --explain` (`heatmap`), kernel
portfolios (`portfolio`), dispatch tables (`dispatch_table`), the model against measurements
(`measured`) and calibration (`calibrate`). They import the core; the core imports none of
them (docs/architecture.md)."""
