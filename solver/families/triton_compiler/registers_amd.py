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

**How the cap splits** (`GCNSubtarget::getMaxNumVectorRegs`, llvm/lib/Target/AMDGPU/
GCNSubtarget.cpp): a kernel LLVM's attributor marks `amdgpu-agpr-alloc="0"` (no AGPR use
required) may take the whole cap as architectural VGPRs, up to 256, and AGPRs only above 256;
one without the mark gets half the cap of each. Triton's gfx950 kernels with asynchronous copies
(num_stages >= 2) come without the mark (seen in the LLVM IR Triton emits; the gfx942 kernels
and gfx950's at one stage carry it), so there 8 waves get 128 + 128 and 16 waves 64 + 64, as the
compiled rows show. The total, and so the occupancy, is the same either way; LLVM spills VGPRs
into free AGPRs before scratch, so spills are counted against the total.

**The wave layout** (AccelerateAMDMatmul.cpp, `warpsPerTile` for chained dots, read off the
compiled TTGIR): the first dot of the chain (S = Q K^T) puts all w waves along its rows, so a
wave holds max(bm / w, m) rows of S and of Q (m the MFMA edge: waves beyond bm / m hold copies);
the second (O += P V) puts w_m = min(w, ceil(bm / m)) waves along the rows and w / w_m along
dv, a wave holding bm / w_m rows and max(dv / (w / w_m), m) columns of O and its rows of P. The
MFMA edge is `matrix_instr_nonkdim` where set, else Triton's default for the dot
(`lds_amd.default_nonkdim`).

**The live state** (registers per lane; e bytes an element, 4 / e elements a register):

    x = base + O + S + Q + P + b_s (K + V) + t_s G + a G_p / 2 + c S [causal]
    live = x + h max(x - 256, 0)

- O: the fp32 accumulator tile of the second dot, a wave's share;
- S: the fp32 score tile of the first dot, a wave's share;
- Q: the resident operand (loaded once, kept in registers as the first dot's A operand);
- P: the chained tile in the input dtype, the second dot's A operand;
- K + V: the streamed B operands as a wave reads them from LDS (all of K^T, its columns of V);
  LLVM interleaves the `ds_read`s with the MFMAs that use them, so only a window is live: b_1
  at one stage, b_2 with the stream pipeliner, whose local loads of a dot's operand are issued
  together ahead of the dot (read off the compiled code: `benchmarks/compiler/amd_peak.py`);
- G: the wave's share of one K and one V tile in registers between the global load and the LDS
  store, at the head dims the kernel loads (`loaded`: the problem's head dims over the padded
  ones of the tiles; the padded columns are masked, and the compiled d 96 kernels hold fewer
  staged registers than their d 128 twins: docs/model.md 19.10), t_1 of it live at the peak
  at one stage and t_2 when the stream pipeliner loads a stage ahead through registers
  (gfx942, where Triton also transposes V in registers before its LDS store:
  `amdg.in_thread_transpose`); gfx950's asynchronous copies (`global_load_lds_dwordx4`,
  Triton's `is_async_copy_enabled`) write LDS directly and hold none. t_1 and t_2 are
  measured at the register peak of the compiled fit rows, not fitted;
- G_p / 2: the loads' addresses (G_p: G at the padded head dims), one 64-bit per-lane pointer
  (2 registers) per 16-byte load (`global_load_dwordx4 ..., v[n:n+1], off` and
  `v_lshl_add_u64` from a kept pair, in the assembly of both targets), a of them live;
- c S: the causal kernel's masked diagonal loop, which compares every score's row and column
  (the row and column indices of each score, hoisted out of the loop). The kernel's other
  loop, over the blocks below the diagonal, holds none of them: the allocation is the masked
  loop's, and a spill by c S alone sits in the masked loop and outside the loops, none in the
  unmasked one (`unmasked_spilled`; `benchmarks/compiler/amd_schedule.py --causal`);
- h: above the 256 architectural VGPRs the excess lives in AGPRs, which no VALU instruction
  reads: each use is a `v_accvgpr_read` into an architectural register, and the allocator
  takes AGPR tuples whole, so each register of state there costs 1 + h.

The weights b_1, b_2, a, c, h and the base are free constants fitted per target on the compiled
data set's `fit` split (`benchmarks/compiler/fit_registers_amd.py`: the smallest mean miss over
the forward rows the compiler did not cap, with spills agreeing on at least 90% of the rows) and
checked on `validation`; the other terms count each register once. The count is the live state
as the code object's `.vgpr_count` states it (not rounded: the occupancy rounds it to LLVM's
granule, `occupancy_rocm.wave_registers`), or the cap where it spills.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...space import BoolArray, FloatArray, IntArray
from .lds_amd import default_nonkdim
from .loops import AttentionKernel, DotLoop, as_array
from .target import AMD_VGPRS_PER_LANE, CompilerTarget
from .wave_layout_amd import ChainedDotLayout

AMD_LANES = 64
SIMDS_PER_CU = 4  # the waves of a workgroup spread over a CU's four SIMDs
VGPR_GRANULE = 8  # LLVM getVGPRAllocGranule on gfx90a and later
ARCH_VGPRS = 256  # architectural VGPRs one wave addresses; the rest of the 512 are AGPRs
REGISTER_BYTES = 4
LOAD_BYTES = 16  # a lane's global load of a streamed tile moves 16 bytes (dwordx4)
POINTER_REGS = 2  # from the address in a 64-bit per-lane pointer
ASYNC_COPY_TARGETS = ("gfx950",)  # Triton 3.9's is_async_copy_enabled (compiler.py:203-204)


@dataclass(frozen=True)
class AmdWeights:
    """The fitted constants of the live-state estimate (the module docstring's b_1, b_2, t_1,
    t_2, a, c, h and the base)."""

    base: float  # registers per lane the loop keeps whatever the tile
    streamed_one_stage: float  # b_1: the live window of the streamed B operands, 1 stage
    streamed_pipelined: float  # b_2: the same with the stream pipeliner's local loads
    staged_one_stage: float  # t_1: K and V tiles held between load and LDS store, 1 stage
    staged_pipelined: float  # t_2: the same, loaded a stage ahead through registers
    causal_mask: float  # c: per score element in the causal kernel's masked loop
    addresses: float  # a: the share of the loads' 64-bit pointers kept live
    agpr_growth: float  # h: per register of the live state above the 256 architectural VGPRs


# Fitted on the fit split (benchmarks/compiler/fit_registers_amd.py; docs/model.md 19.10).
AMD_REGISTER_CONSTANTS: dict[str, AmdWeights] = {
    "gfx942": AmdWeights(
        base=40.0,
        streamed_one_stage=0.25,
        streamed_pipelined=0.375,
        staged_one_stage=0.0,
        staged_pipelined=1.0,
        causal_mask=1.0,
        addresses=1.5,
        agpr_growth=0.1,
    ),
    "gfx950": AmdWeights(
        base=46.0,
        streamed_one_stage=0.0,
        streamed_pipelined=0.25,
        staged_one_stage=0.5,
        staged_pipelined=0.0,
        causal_mask=0.25,
        addresses=1.0,
        agpr_growth=0.4,
    ),
}


@dataclass(frozen=True)
class AmdRegisterEstimate:
    """VGPR+AGPR per lane of a kernel (arrays over the candidates)."""

    live: IntArray  # the live state the estimate puts against the cap
    cap: IntArray  # what the compiler may allocate
    allocated: IntArray  # VGPR+AGPR as allocated (the cap when it spills)
    spilled: IntArray  # live - cap when positive: registers per lane in scratch
    arch_cap: IntArray  # architectural VGPRs the cap allows (half of it where it splits)
    # what the causal kernel's unmasked loop (the blocks below the diagonal, which hold no mask
    # indices) puts over the cap; `spilled` where the kernel has no masked loop
    unmasked_spilled: IntArray

    @property
    def arch(self) -> IntArray:
        """Architectural VGPRs of the allocation."""
        return np.asarray(np.minimum(self.allocated, self.arch_cap), dtype=np.int64)

    @property
    def agpr(self) -> IntArray:
        """AGPRs of the allocation (what exceeds the architectural VGPRs)."""
        return np.asarray(self.allocated - self.arch, dtype=np.int64)


def launch_cap(warps: IntArray, waves_per_eu: IntArray) -> IntArray:
    """VGPR+AGPR per lane the compiler may allocate: what lets all of a workgroup's waves be
    resident, lowered by a `waves_per_eu` request (0: none)."""
    per_simd = -(-np.asarray(warps, dtype=np.int64) // SIMDS_PER_CU)
    wanted = np.maximum(per_simd, np.asarray(waves_per_eu, dtype=np.int64))
    share = AMD_VGPRS_PER_LANE // np.maximum(wanted, 1) // VGPR_GRANULE * VGPR_GRANULE
    return np.asarray(np.minimum(share, AMD_VGPRS_PER_LANE), dtype=np.int64)


def async_copies(target: CompilerTarget, stages: IntArray) -> BoolArray:
    """Whether the stream pipeliner copies K and V to LDS asynchronously (no registers)."""
    pipelined = np.asarray(stages, dtype=np.int64) > 1
    return np.asarray(pipelined & (target.name in ASYNC_COPY_TARGETS))


def arch_vgpr_cap(target: CompilerTarget, stages: IntArray, cap: IntArray) -> IntArray:
    """Architectural VGPRs of the cap: all of it up to 256, or half where LLVM splits it (the
    module docstring, "How the cap splits")."""
    half = cap // 2
    return np.asarray(
        np.where(async_copies(target, stages), half, np.minimum(cap, ARCH_VGPRS)), dtype=np.int64
    )


def loop_terms(
    loop: DotLoop,
    target: CompilerTarget,
    warps: IntArray,
    stages: IntArray,
    nonkdim: IntArray,
    loaded: float = 1.0,
) -> dict[str, FloatArray]:
    """The loop's terms of the estimate (the module docstring's), registers per lane: `O`, `S`,
    `Q`, `P`, `KV` (the streamed B operands as read), `G` (one K and V tile staged), `staged`
    (G where the tiles pass through registers, 0 with asynchronous copies; the weights t_1, t_2
    apply in `live_estimate`) and `addresses` (the loads' 64-bit pointers, G_p / 2). `loaded`: the
    head dims the loads read over the padded ones of the tiles (G, not G_p, scales with it)."""
    n = len(warps)
    w = np.asarray(warps, dtype=np.float64)
    per_register = REGISTER_BYTES / loop.elem_bytes
    lane_regs = AMD_LANES * per_register  # elements of the input dtype per register per wave
    rows = as_array(loop.chain.rows, n).astype(np.float64)
    cols = as_array(loop.chain.cols, n).astype(np.float64)
    out_cols = as_array(loop.chain.out_cols, n).astype(np.float64)
    k = np.asarray(nonkdim, dtype=np.int64)
    m_first = np.where(k > 0, k, default_nonkdim(rows.astype(np.int64), cols.astype(np.int64)))
    m_second = np.where(k > 0, k, default_nonkdim(rows.astype(np.int64), out_cols.astype(np.int64)))
    layout = ChainedDotLayout.of(rows, out_cols, w, m_first, m_second)
    rows_first, rows_second, cols_second = (
        layout.rows_first,
        layout.rows_second,
        layout.cols_second,
    )

    zero = np.zeros(n)
    accumulators = zero.copy()
    for _, c in loop.accumulators:  # the second dot's results: rows x dv
        accumulators += rows_second * cols_second * (as_array(c, n) / out_cols) / AMD_LANES
    scores = sum((rows_first * as_array(c, n) for _, c in loop.scores), zero) / AMD_LANES
    resident = sum((rows_first * as_array(o.cols, n) for o in loop.resident()), zero) / lane_regs
    chain = rows_second * cols / lane_regs
    streamed = loop.streamed()
    read = zero.copy()
    for o in streamed:
        o_rows = as_array(o.rows, n).astype(np.float64)
        o_cols = as_array(o.cols, n).astype(np.float64)
        # the first dot's B operand whole in every wave; the second's, a wave's columns
        width = o_cols if 0 in o.plain_uses else np.minimum(o_cols, cols_second)
        read += o_rows * width / lane_regs
    tile = sum((as_array(o.rows, n) * as_array(o.cols, n) for o in streamed), zero)
    staged_tile = loaded * tile / (w * lane_regs)
    held = np.where(async_copies(target, stages), 0.0, 1.0)
    pointers = POINTER_REGS * tile / (w * lane_regs) * REGISTER_BYTES / LOAD_BYTES
    return {
        "O": np.asarray(accumulators),
        "S": np.asarray(scores),
        "Q": np.asarray(resident),
        "P": np.asarray(chain),
        "KV": np.asarray(read),
        "G": np.asarray(staged_tile),
        "staged": np.asarray(staged_tile * held),
        "addresses": np.asarray(pointers),
    }


def live_estimate(
    terms: dict[str, FloatArray], stages: IntArray, causal: bool, weights: AmdWeights
) -> FloatArray:
    """The live state of a loop from its terms (`loop_terms`), registers per lane."""
    one_stage = np.asarray(stages, dtype=np.int64) <= 1
    staging = np.where(one_stage, weights.staged_one_stage, weights.staged_pipelined)
    window = np.where(one_stage, weights.streamed_one_stage, weights.streamed_pipelined)
    mask = weights.causal_mask if causal else 0.0
    state = (
        weights.base
        + terms["O"]
        + terms["S"]
        + terms["Q"]
        + terms["P"]
        + window * terms["KV"]
        + staging * terms["staged"]
        + weights.addresses * terms["addresses"]
        + mask * terms["S"]
    )
    return np.asarray(state + weights.agpr_growth * np.maximum(state - ARCH_VGPRS, 0.0))


def allocation(live: IntArray, cap: IntArray) -> tuple[IntArray, IntArray]:
    """(allocated, spilled) of a live state against the cap, registers per lane. The count is
    the registers the kernel uses, as the code object's `.vgpr_count` states it (not rounded to
    the granule: the occupancy rounds it, `occupancy_rocm.wave_registers`)."""
    spilled = np.maximum(live - cap, 0)
    allocated = np.minimum(live, cap)
    return np.asarray(allocated, dtype=np.int64), np.asarray(spilled, dtype=np.int64)


def amd_register_estimate(
    kernel: AttentionKernel,
    target: CompilerTarget,
    warps: IntArray,
    stages: IntArray,
    waves_per_eu: IntArray,
    nonkdim: IntArray,
    causal: bool,
    constants: dict[str, AmdWeights] | None = None,
    loaded: float = 1.0,
) -> AmdRegisterEstimate:
    """VGPR+AGPR per lane, the cap and the spill of every candidate (the largest loop's).
    `nonkdim`: each candidate's matrix_instr_nonkdim (0: Triton's default MFMA); `causal`: the
    kernel runs the masked diagonal loop; `loaded`: the problem's head dims over the padded ones
    of the kernel's tiles (`loop_terms`)."""
    if not target.is_amd:
        raise ValueError(f"{target.name} is not an AMD target")
    weights = (AMD_REGISTER_CONSTANTS if constants is None else constants)[target.name]
    terms = [loop_terms(loop, target, warps, stages, nonkdim, loaded) for loop in kernel.loops]

    def live_over_loops(masked: bool) -> IntArray:
        per_loop = [live_estimate(t, stages, masked, weights) for t in terms]
        return np.asarray(np.ceil(np.maximum(np.max(per_loop, axis=0), 1.0)), dtype=np.int64)

    live = live_over_loops(causal)
    cap = launch_cap(warps, waves_per_eu)
    allocated, spilled = allocation(live, cap)
    unmasked_spilled = allocation(live_over_loops(False), cap)[1] if causal else spilled
    return AmdRegisterEstimate(
        live=np.asarray(live, dtype=np.int64),
        cap=cap,
        allocated=allocated,
        spilled=spilled,
        arch_cap=arch_vgpr_cap(target, np.asarray(stages, dtype=np.int64), cap),
        unmasked_spilled=unmasked_spilled,
    )
