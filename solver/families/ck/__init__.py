"""The `ck` family (Composable Kernel's tile FMHA forward on AMD Instinct, a `rocm` device):
the block tile, warp layout, MFMA shape and pipeline with CK's template legality (`shape.py`),
the LDS and VGPR use per pipeline with AMD's occupancy (`resources.py`), the cost model
(`cost.py`) and the forward registration (`forward.py`). docs/model.md section 19."""

from .forward import CkFmhaForward

REGISTRATIONS = (CkFmhaForward(),)
