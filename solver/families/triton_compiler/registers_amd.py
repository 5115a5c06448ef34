"""VGPRs and AGPRs per lane, and spills, of a kernel of `tl.dot` loops as Triton's AMD backend
(LLVM's AMDGPU backend under it) allocates them on gfx942 and gfx950: the `.vgpr_count`,
`.agpr_count` and `.vgpr_spill_count` of the code object's metadata (docs/model.md 19.10).

**The cap.** A wave may use the unified file's 512 entries per lane (256 architectural VGPRs and
256 AGPRs) as long as every wave of its workgroup can be resident: Triton sets
`amdgpu-flat-work-group-size` to num_warps x 64 (third_party/amd/backend/compiler.py), so the
w waves of a workgroup sit ceil(w / 4) to a SIMD and each gets alignDown(512 / ceil(w / 4), 8):
512 up to 4 waves, 256 at 8, 128 at 16 (the compiled data set shows exactly these ceilings).
`waves_per_eu = n` (`amdgpu-waves-per-eu` n,n; compiler.py:674-675) lowers it to
alignDown(512 / n, 8) (`occupancy_rocm.register_cap`). A kernel whose live state exceeds the cap
spills to scratch memory; it still compiles and launches.

**The estimate** (per lane, 64 lanes a wave, w waves laid along the rows of the dots):

    base + a_w x accumulators + s_w x scores + chain + q_w x resident + g_w x staging

- accumulators: the fp32 tiles carried across iterations (O), elements / (64 w);
- scores: the fp32 score tiles of an iteration (S);
- chain: the chained tile in the input dtype (P), 4 / e elements a register;
- resident: the operands loaded once (Q), which on AMD live in registers as MFMA operands;
- staging: the streamed tiles (K, V) in registers between their global load and their LDS
  store (the stream pipeliner loads the next stage's tiles into registers).

The weights are free constants fitted per target on the compiled data set's `fit` split
(`benchmarks/compiler/fit_registers_amd.py`: the smallest median miss over the forward rows
the launch and the family accept, with spills agreeing on at least 90% of them) and checked on
`validation`. Above 256 the
allocation is architectural VGPRs plus AGPRs (the unified file).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...space import FloatArray, IntArray
from .loops import AttentionKernel, DotLoop, as_array
from .target import AMD_VGPRS_PER_LANE, CompilerTarget

AMD_LANES = 64
SIMDS_PER_CU = 4  # the waves of a workgroup spread over a CU's four SIMDs
VGPR_GRANULE = 8  # LLVM getVGPRAllocGranule on gfx90a and later
ARCH_VGPRS = 256  # architectural VGPRs one wave addresses; the rest of the 512 are AGPRs
REGISTER_BYTES = 4


@dataclass(frozen=True)
class AmdWeights:
    """One linear estimate of VGPR+AGPR per lane (the module docstring's terms)."""

    base: float
    accumulators: float
    scores: float
    resident: float
    staging: float


# Fitted on the fit split (benchmarks/compiler/fit_registers_amd.py; docs/model.md 19.10).
AMD_REGISTER_CONSTANTS: dict[str, AmdWeights] = {
    "gfx942": AmdWeights(base=96.0, accumulators=0.5, scores=1.5, resident=1.0, staging=2.0),
    "gfx950": AmdWeights(base=104.0, accumulators=0.5, scores=1.0, resident=0.0, staging=1.25),
}


@dataclass(frozen=True)
class AmdRegisterEstimate:
    """VGPR+AGPR per lane of a kernel (arrays over the candidates)."""

    live: IntArray  # the live state the estimate puts against the cap
    cap: IntArray  # what the compiler may allocate
    allocated: IntArray  # VGPR+AGPR as allocated (the cap when it spills)
    spilled: IntArray  # live - cap when positive: registers per lane in scratch

    @property
    def arch(self) -> IntArray:
        """Architectural VGPRs of the allocation."""
        return np.asarray(np.minimum(self.allocated, ARCH_VGPRS), dtype=np.int64)

    @property
    def agpr(self) -> IntArray:
        """AGPRs of the allocation (what exceeds the architectural file)."""
        return np.asarray(np.maximum(self.allocated - ARCH_VGPRS, 0), dtype=np.int64)


def launch_cap(warps: IntArray, waves_per_eu: IntArray) -> IntArray:
    """VGPR+AGPR per lane the compiler may allocate: what lets all of a workgroup's waves be
    resident, lowered by a `waves_per_eu` request (0: none)."""
    per_simd = -(-np.asarray(warps, dtype=np.int64) // SIMDS_PER_CU)
    wanted = np.maximum(per_simd, np.asarray(waves_per_eu, dtype=np.int64))
    share = AMD_VGPRS_PER_LANE // np.maximum(wanted, 1) // VGPR_GRANULE * VGPR_GRANULE
    return np.asarray(np.minimum(share, AMD_VGPRS_PER_LANE), dtype=np.int64)


def loop_terms(loop: DotLoop, warps: IntArray) -> dict[str, FloatArray]:
    """The loop's terms of the estimate, registers per lane."""
    n = len(warps)
    lanes = np.asarray(warps, dtype=np.float64) * AMD_LANES
    per_register = REGISTER_BYTES / loop.elem_bytes

    def elements(rows: object, cols: object) -> FloatArray:
        r = as_array(rows, n).astype(np.float64)  # type: ignore[arg-type]
        c = as_array(cols, n).astype(np.float64)  # type: ignore[arg-type]
        return np.asarray(r * c)

    zero = np.zeros(n)
    accumulators = sum((elements(r, c) for r, c in loop.accumulators), zero) / lanes
    scores = sum((elements(r, c) for r, c in loop.scores), zero) / lanes
    chain = elements(loop.chain.rows, loop.chain.cols) / (lanes * per_register)
    resident = sum((elements(o.rows, o.cols) for o in loop.resident()), zero)
    staging = sum((elements(o.rows, o.cols) for o in loop.streamed()), zero)
    return {
        "accumulators": np.asarray(accumulators),
        "scores": np.asarray(scores),
        "chain": np.asarray(chain),
        "resident": np.asarray(resident / (lanes * per_register)),
        "staging": np.asarray(staging / (lanes * per_register)),
    }


def live_estimate(terms: dict[str, FloatArray], weights: AmdWeights) -> FloatArray:
    """The weighted sum of a loop's terms (`loop_terms`), registers per lane."""
    return np.asarray(
        weights.base
        + weights.accumulators * terms["accumulators"]
        + weights.scores * terms["scores"]
        + terms["chain"]
        + weights.resident * terms["resident"]
        + weights.staging * terms["staging"]
    )


def amd_register_estimate(
    kernel: AttentionKernel,
    target: CompilerTarget,
    warps: IntArray,
    waves_per_eu: IntArray,
    constants: dict[str, AmdWeights] | None = None,
) -> AmdRegisterEstimate:
    """VGPR+AGPR per lane, the cap and the spill of every candidate (the largest loop's)."""
    if not target.is_amd:
        raise ValueError(f"{target.name} is not an AMD target")
    weights = (AMD_REGISTER_CONSTANTS if constants is None else constants)[target.name]
    per_loop = [live_estimate(loop_terms(loop, warps), weights) for loop in kernel.loops]
    live = np.ceil(np.maximum(np.max(per_loop, axis=0), 1.0)).astype(np.int64)
    cap = launch_cap(warps, waves_per_eu)
    spilled = np.maximum(live - cap, 0)
    rounded = -(-live // VGPR_GRANULE) * VGPR_GRANULE
    allocated = np.where(spilled > 0, cap, np.minimum(cap, rounded))
    return AmdRegisterEstimate(
        live=np.asarray(live, dtype=np.int64),
        cap=cap,
        allocated=np.asarray(allocated, dtype=np.int64),
        spilled=np.asarray(spilled, dtype=np.int64),
    )
