"""What Triton (3.9, the version pinned in the dev extra) lowers a `tl.dot` to on each target, and
the register file it allocates from.

- below compute capability 8.0: FP32 FMAs (`BlockedToMMA` falls back to the FMA path; the
  operands are promoted to fp32, `decomposeMixedModeDotOp`), and no software pipelining (Triton
  schedules its pipeliner from cc 8.0): `DotPath.FMA`;
- cc 8.x and 12.x: warp-level `mma.sync` (MMAv2): `DotPath.MMA_SYNC`;
- cc 9.0: warpgroup `wgmma` (MMAv3) when the block has a multiple of 4 warps and the dot's
  result rows are a multiple of 64 (`supportMMA`, lib/Analysis/Utility.cpp), else mma.sync:
  `DotPath.WGMMA`;
- cc 10.x: `tcgen05` (MMAv5) with 4 or 8 warps and at least 64 result rows (MMAv5 loads and
  stores tensor memory with 4 or 8 warps only, `supportMMA`), else mma.sync: `DotPath.TCGEN05`;
- AMD CDNA (gfx942, gfx950): MFMA, wave size 64, the stream pipeliner: `DotPath.MFMA`.

Sources: triton-lang/triton `lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp`
(`getMMAVersionSafe`, `BlockedToMMA`), `lib/Analysis/Utility.cpp` (`supportMMA`),
`third_party/nvidia/backend/compiler.py` (the pipeliner from cc 8.0); checked against the
compiled data set (docs/model.md 16).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ...space import BoolArray, IntArray

WARPGROUP_WARPS = 4  # wgmma and tcgen05 issue per warpgroup of 4 warps
WARPGROUP_MIN_ROWS = 64  # the M of one wgmma / tcgen05 instruction
TCGEN05_WARPS = (4, 8)  # the warp counts Triton 3.9 lowers tensor-memory loads and stores for
MAX_REGS_PER_THREAD = 255  # ptxas's per-thread limit on every CUDA target here
CUDA_REGISTER_FILE = 65_536  # 32-bit registers per SM (and per block) on sm75-sm120
CUDA_REG_ALLOC_STEP = 8  # ptxas allocates registers per thread in steps of 8 under a bound
AMD_VGPRS_PER_LANE = 512  # architectural VGPRs plus AGPRs one lane may use (CDNA3, CDNA4)


class DotPath(IntEnum):
    """How a loop's dots are lowered (docs/model.md 16.2)."""

    FMA = 0
    MMA_SYNC = 1
    WGMMA = 2
    TCGEN05 = 3
    MFMA = 4


@dataclass(frozen=True)
class CompilerTarget:
    """A compile target as Triton's `GPUTarget` names it: CUDA by compute capability, AMD by
    its gfx name."""

    name: str  # "sm80", "gfx942"
    cc_major: int  # 0 on AMD
    cc_minor: int
    warp_size: int

    @classmethod
    def cuda(cls, cc_major: int, cc_minor: int) -> CompilerTarget:
        return cls(f"sm{cc_major}{cc_minor}", cc_major, cc_minor, 32)

    @classmethod
    def amd(cls, gfx: str) -> CompilerTarget:
        if gfx not in ("gfx942", "gfx950"):
            raise ValueError(f"AMD target must be gfx942 or gfx950; got {gfx!r}")
        return cls(gfx, 0, 0, 64)

    @property
    def is_amd(self) -> bool:
        return self.name.startswith("gfx")

    @property
    def pipelines(self) -> bool:
        """Whether Triton's software pipeliner runs (cc >= 8.0, and AMD's stream pipeliner)."""
        return self.is_amd or self.cc_major >= 8

    @property
    def loads_to_lds(self) -> bool:
        """Whether AMD's stream pipeliner copies a tile from global memory straight into LDS
        (`global_load_lds_dwordx4`, `ttg.async_copy_global_to_local`): Triton 3.9 enables its
        async copy on gfx950 only (`is_async_copy_enabled`, triton/backends/amd/compiler.py);
        on gfx942 the tile passes through VGPRs and is written to LDS by `ds_write`."""
        return self.name == "gfx950"

    def dot_path(self, rows: IntArray, warps: IntArray, fma: bool = False) -> IntArray:
        """The lowering of a loop whose dots have `rows` result rows, per candidate (`fma`: the
        loop's dots are fp32 at IEEE precision, FMAs on every target: `DotLoop.fma_dots`)."""
        n = len(warps)
        if fma and not self.is_amd:
            return np.full(n, DotPath.FMA, dtype=np.int64)
        if self.is_amd:
            return np.full(n, DotPath.MFMA, dtype=np.int64)
        if self.cc_major < 8:
            return np.full(n, DotPath.FMA, dtype=np.int64)
        path = np.full(n, DotPath.MMA_SYNC, dtype=np.int64)
        rows_ok = (rows >= WARPGROUP_MIN_ROWS) & (rows % WARPGROUP_MIN_ROWS == 0)
        if self.cc_major == 9:
            path[(warps % WARPGROUP_WARPS == 0) & rows_ok] = DotPath.WGMMA
        elif self.cc_major == 10:
            path[np.isin(warps, TCGEN05_WARPS) & rows_ok] = DotPath.TCGEN05
        return path

    def register_cap(self, threads: IntArray) -> IntArray:
        """Registers per thread ptxas may use: 255, or what the register file leaves each of the
        block's threads (Triton's `.maxntid` launch bound), in allocation steps of 8: 128 at
        16 warps. VGPRs and AGPRs per lane on AMD."""
        if self.is_amd:
            return np.full(len(threads), AMD_VGPRS_PER_LANE, dtype=np.int64)
        share = CUDA_REGISTER_FILE // np.maximum(threads, 1)
        share = share // CUDA_REG_ALLOC_STEP * CUDA_REG_ALLOC_STEP
        return np.asarray(np.minimum(MAX_REGS_PER_THREAD, share), dtype=np.int64)


def warpgroup_path(path: IntArray) -> BoolArray:
    """Whether the lowering reads both operands of a GEMM from shared memory while it runs
    (wgmma, tcgen05): the pipeliner then keeps one more buffer of each streamed tile."""
    return np.asarray((path == DotPath.WGMMA) | (path == DotPath.TCGEN05))
