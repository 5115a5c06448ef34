"""The versions an answer names (`model_version`, `catalog_version`), in a module that imports
nothing: the CLI's answer cache keys its entries by them without loading the solver.
`hardware.CATALOG_VERSION` and `solve.MODEL_VERSION` are these."""

# .2: Ascend core record; .3: achievable DRAM and L2 fractions; .4: fa3 is the cc 9.0 default;
# .5: 910A and 310P3 vector and transfer rates (assumptions, marked unconfirmed)
CATALOG_VERSION = "2026.11.5"

# 0.2.0: family interface; achievable bandwidth, launch, iteration and window-L2 terms.
# 0.3.0: the ascend family (CUDA answers unchanged).
# 0.4.0: the fa3 family, the default on compute capability 9.0.
# 0.5.0: the backward pass (fa2 and triton backward families); forward answers unchanged.
# 0.6.0: decode and split-KV (num_splits, pack_gqa, page_size), the flashinfer family.
# 0.7.0: fa3 decode and split-KV (Hopper's decode default), ascend decode (IncreFlashAttention);
#        forward answers without a longer cache unchanged.
MODEL_VERSION = "0.7.0"
