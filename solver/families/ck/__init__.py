"""The `ck` family (Composable Kernel's tile FMHA forward on AMD Instinct, a `rocm` device):
the block tile, warp layout, MFMA shape and pipeline with CK's template legality (`shape.py`),
the LDS and VGPR use per pipeline with AMD's occupancy (`resources.py`), the cost model
(`cost.py`) and the forward registration (`forward.py`). docs/model.md section 19."""

# (phase, module, class): the registry imports a module when a family of its phase is
# first asked for, so a forward question loads no backward or decode model (registry.py).
REGISTRATIONS = (("forward", "forward", "CkFmhaForward"),)
