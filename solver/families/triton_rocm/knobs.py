"""Triton's AMD knobs as the AMD backend reads them (triton-lang/triton 3.9.0,
`third_party/amd/backend/compiler.py`, installed as `triton/backends/amd/compiler.py`):

- `waves_per_eu` (`HIPOptions.waves_per_eu`, default 0, line 263): when non-zero, the kernel
  gets the LLVM attribute `amdgpu-waves-per-eu` = "n,n" (lines 674-675), which makes the
  compiler cap a wave's VGPR+AGPR at alignDown(512 / n, 8) (`occupancy_rocm.register_cap`). It
  changes the register allocation, not the launch. Domain here: 0 (no request), 2, 3, 4 (1 asks
  for what every kernel gets; above 4 the cap is below every tile's accumulators here).
- `matrix_instr_nonkdim` (line 280, default 0: the compiler chooses) is handed to the
  accelerate-matmul pass with `kpack` (line 473): 16 selects the 16x16 MFMA, 32 the 32x32.
  Domain here: 16, 32 (the model names the instruction). Rule: block_m and block_n are whole
  MFMA tiles (Inductor's ROCm heuristics drop the configurations that are not,
  shared/reference/blackwell_amd.md 3.6).
- `kpack` (line 281, default 1): the K-packing of the MFMA operands, 1 or 2 (a lane's operand
  element run is kpack x 8 bytes on gfx942; the compiled loop reads the same bytes with the same
  instructions either way, docs/model.md 19.10). On gfx950 Triton overrides any other value
  with 1 and warns "kpack is deprecated starting from gfx950" (lines 312-316): the domain there
  is 1.
"""

from __future__ import annotations

from ...space import Param

WAVES_PER_EU = (0, 2, 3, 4)
MATRIX_INSTR_NONKDIM = (16, 32)
KPACK = {"gfx942": (1, 2), "gfx950": (1,)}


def knob_params(gfx: str) -> tuple[Param, ...]:
    """The three knobs as declared parameters on a target."""
    return (
        Param(
            "waves_per_eu",
            WAVES_PER_EU,
            "amdgpu-waves-per-eu: 0 none, else the waves per SIMD the VGPRs are capped for",
        ),
        Param(
            "matrix_instr_nonkdim",
            MATRIX_INSTR_NONKDIM,
            "MFMA instruction edge: 16 (16x16) or 32 (32x32)",
        ),
        Param(
            "kpack",
            KPACK[gfx],
            "K-packing of the MFMA operands (gfx950: 1 only, Triton overrides others)",
        ),
    )
