"""Registers per thread and spills of a kernel of `tl.dot` loops as ptxas reports them
(`Used N registers`, `N bytes spill stores`), per candidate.

ptxas allocates at most `CompilerTarget.register_cap` registers per thread (255, or what the
register file leaves each thread of the block: Triton bounds the block with `.maxntid`). A
configuration whose live state exceeds that **spills** to local memory; it does not fail to
compile or to launch (docs/model.md 16.3). The estimate has two parts, both sums over one loop
of what a thread holds, the kernel's figure being its largest loop's:

- the **live state** decides whether ptxas spills: `spills = live > cap`, and the spilled
  registers are `live - cap`;
- the **count** is what ptxas settles at when it does not spill: `min(cap, count)`; when it
  spills it reports the cap (past the limit ptxas sometimes settles much lower and spills
  kilobytes, which is not modelled: the spill, not the count, is the signal there).

Each is `base + accumulators + g x scores + chain + a x A fragments + b x B fragments +
s x staging + p x addresses`, 32-bit registers per thread, where, on the warp layout Triton
gives each tile (`warps_along_rows` for the scores and the chain, `accumulator_row_warps` for
the accumulators: they differ on wgmma, docs/model.md 16.9; a warp's tile has at least 16 rows
and 8 columns, replicated where the block has fewer):

- accumulators: the fp32 tiles carried across iterations (O; dK and dV; dQ);
- scores: the fp32 tiles of an iteration (S; P^T and dP^T; P and dP);
- chain: the chained tile converted to 16 bits (P, dS), two elements a register;
- A and B fragments (mma.sync and FMA only; wgmma and tcgen05 read both operands from shared
  memory, and the chained tile from registers): the operand fragments of the loop's heaviest
  dot, A (a resident operand or the chained tile: the warp's rows x k) and B (a streamed
  operand: all of it per warp along the rows, a column slice along the columns), two 16-bit
  elements a register;
- staging: with num_stages = 1 the streamed tiles are loaded into registers before they are
  written to shared memory (16-bit, two a register);
- addresses: the pointer tensors of the streamed tiles (`k_ptrs`, `v_ptrs`: one 64-bit address,
  two registers, per 16-byte vector of 8 elements a thread loads). In the count only: ptxas
  recomputes an address from the base pointer and the offsets rather than spill it, so the
  addresses do not decide the spill (their live-state weight is 0).

The weights and bases are free constants, fitted per target family (`REGISTER_CONSTANTS`) on
the `fit` split of the compiled data set with `benchmarks/compiler/fit_registers.py` and checked
on its `validation` split (docs/model.md 16.7, 16.9); ptxas's register allocation is not stated
exactly by any rule, so these are the only fitted numbers of the shared-memory and register
model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ...space import BoolArray, FloatArray, IntArray
from .loops import AttentionKernel, DotLoop, as_array
from .shared_memory import warps_along_rows as mma_sync_warps_along_rows
from .target import WARPGROUP_WARPS, CompilerTarget, DotPath, warpgroup_path

MMA_ROWS_PER_WARP = 16  # a warp's mma tile has at least 16 rows
MMA_COLS_PER_WARP = 8  # and at least 8 columns
ELEMENTS_PER_REGISTER = 2  # 16-bit operand elements in one 32-bit register
LANES = 32
ELEMENTS_PER_VECTOR = 8  # 16-bit elements in one 16-byte load of a streamed tile
REGISTERS_PER_ADDRESS = 2  # a 64-bit global address


@dataclass(frozen=True)
class Weights:
    """One linear estimate of registers per thread (the module docstring's terms)."""

    base: float
    scores: float
    a_fragments: float
    b_fragments: float
    staging: float
    addresses: float


@dataclass(frozen=True)
class PathConstants:
    """The live-state (spill) and count estimates of one lowering on one target family."""

    live: Weights
    count: Weights


# Fitted on the fit split (benchmarks/compiler/fit_registers.py; docs/model.md 16.7), keyed by
# target family and lowering ("mma": mma.sync, "warpgroup": wgmma/tcgen05, "fma": FMA).
REGISTER_CONSTANTS: dict[str, dict[str, PathConstants]] = {
    "sm100": {
        "mma": PathConstants(
            live=Weights(
                base=-12, scores=2, a_fragments=0.5, b_fragments=1.25, staging=0.5, addresses=0
            ),
            count=Weights(
                base=54.667, scores=1.667, a_fragments=0, b_fragments=1, staging=0, addresses=0
            ),
        ),
        "warpgroup": PathConstants(
            live=Weights(
                base=-36, scores=1.25, a_fragments=0, b_fragments=0, staging=1, addresses=0
            ),
            count=Weights(
                base=19.571, scores=0.259, a_fragments=0, b_fragments=0, staging=0, addresses=1.768
            ),
        ),
    },
    "sm120": {
        "mma": PathConstants(
            live=Weights(
                base=76, scores=0.5, a_fragments=0, b_fragments=0.5, staging=0.5, addresses=0
            ),
            count=Weights(
                base=59.5,
                scores=0.916,
                a_fragments=0.096,
                b_fragments=0.409,
                staging=0.25,
                addresses=0.778,
            ),
        ),
    },
    "sm75": {
        "fma": PathConstants(
            live=Weights(
                base=188, scores=3, a_fragments=0, b_fragments=0.625, staging=0, addresses=0
            ),
            count=Weights(
                base=32, scores=3, a_fragments=1.938, b_fragments=1.25, staging=2, addresses=3
            ),
        ),
    },
    "sm80": {
        "mma": PathConstants(
            live=Weights(
                base=32, scores=1, a_fragments=0.25, b_fragments=0.75, staging=0, addresses=0
            ),
            count=Weights(
                base=74.875,
                scores=1.047,
                a_fragments=0,
                b_fragments=0.008,
                staging=0.396,
                addresses=1.039,
            ),
        ),
    },
    "sm86": {
        "mma": PathConstants(
            live=Weights(
                base=24, scores=1, a_fragments=0.125, b_fragments=1.25, staging=0.5, addresses=0
            ),
            count=Weights(
                base=51.667,
                scores=1.042,
                a_fragments=0.021,
                b_fragments=0.518,
                staging=0.083,
                addresses=1.274,
            ),
        ),
    },
    "sm90": {
        "mma": PathConstants(
            live=Weights(
                base=44, scores=1.5, a_fragments=0, b_fragments=1, staging=0.25, addresses=0
            ),
            count=Weights(
                base=60,
                scores=1.146,
                a_fragments=0.055,
                b_fragments=1.042,
                staging=0.242,
                addresses=0,
            ),
        ),
        "warpgroup": PathConstants(
            live=Weights(
                base=20, scores=2, a_fragments=0, b_fragments=0, staging=0.25, addresses=0
            ),
            count=Weights(
                base=36, scores=1.187, a_fragments=0, b_fragments=0, staging=0.156, addresses=1.688
            ),
        ),
    },
}


# How ptxas's spill code grows with the registers it must spill: the spill stores it emits, in
# bytes per thread, are about 4 s + (4 s)^2 / SPILL_GROWTH_BYTES for s registers spilled (past a
# few hundred bytes it spills hot values, accumulators and scores, more than once), fitted on
# the fit split's spilling rows (sm80-sm120; median actual/estimate 0.95 there, 0.88 on
# validation, a factor of about 2 either way: docs/model.md 16.7).
SPILL_GROWTH_BYTES = 1000.0
SPILL_WORD_BYTES = 4


def spill_traffic_regs(spilled: IntArray) -> IntArray:
    """The registers whose store and reload per iteration carry the spill code's traffic: the
    spill stores ptxas emits for `spilled` registers per thread, in 4-byte words (the loop
    body's spill stores run once per iteration, each with a reload)."""
    words = spilled.astype(np.float64) * SPILL_WORD_BYTES
    stores = words + words * words / SPILL_GROWTH_BYTES
    return np.asarray(np.ceil(stores / SPILL_WORD_BYTES), dtype=np.int64)


@dataclass(frozen=True)
class LoopRegisters:
    """The terms of one loop, registers per thread (arrays over the candidates)."""

    accumulators: FloatArray
    scores: FloatArray
    chain: FloatArray
    a_fragments: FloatArray
    b_fragments: FloatArray
    staging: FloatArray
    addresses: FloatArray
    path: IntArray

    def estimate(self, weights: Weights) -> FloatArray:
        return np.asarray(
            weights.base
            + self.accumulators
            + weights.scores * self.scores
            + self.chain
            + weights.a_fragments * self.a_fragments
            + weights.b_fragments * self.b_fragments
            + weights.staging * self.staging
            + weights.addresses * self.addresses
        )


@dataclass(frozen=True)
class RegisterEstimate:
    """Registers per thread of a kernel (arrays over the candidates)."""

    live: IntArray  # the live state the estimate puts against the cap
    cap: IntArray  # what ptxas may use
    allocated: IntArray  # what ptxas reports (the cap when it spills)
    spilled: IntArray  # live - cap when positive: registers per thread in local memory

    @property
    def spills(self) -> BoolArray:
        return np.asarray(self.spilled > 0)


def target_family(target: CompilerTarget) -> str:
    """The register constants' key for a target: its compute capability's family."""
    if target.is_amd:
        raise ValueError(f"no register rules for {target.name} (AMD VGPRs are not modelled)")
    if target.cc_major < 8:
        return "sm75"
    if target.cc_major == 8:
        return "sm80" if target.cc_minor == 0 else "sm86"
    return {9: "sm90", 10: "sm100"}.get(target.cc_major, "sm120")


def path_keys(path: IntArray) -> npt.NDArray[np.str_]:
    """The constants' lowering key of each candidate ("mma", "warpgroup" or "fma")."""
    fma = path == DotPath.FMA
    return np.where(warpgroup_path(path), "warpgroup", np.where(fma, "fma", "mma"))


def warps_along_rows(loop: DotLoop, path: IntArray, warps: IntArray) -> BoolArray:
    """Whether each candidate lays the warps of the loop's score tiles (the dots whose result
    feeds a later dot: S; P^T and dP^T; P and dP) along their rows:

    - mma.sync and tcgen05: `warpsPerTileV2`'s chained rule (`shared_memory.warps_along_rows`);
    - wgmma: always. `warpsPerTileV3` gives a dot whose result feeds another dot
      `[num_warps, 1]` (lib/Dialect/TritonGPU/Transforms/AccelerateMatmul.cpp in
      triton-lang/triton, lines 115-117 at commit 0047907; 3.9's TTGIR shows it). A warp covers
      16 rows, so with 8 warps and 64 rows both warpgroups hold the whole tile;
    - FMA: the rows (the blocked layout's warps).
    """
    fma = path == DotPath.FMA
    wgmma = path == DotPath.WGMMA
    return np.asarray(mma_sync_warps_along_rows(loop, warps) | fma | wgmma)


def accumulator_row_warps(loop: DotLoop, path: IntArray, warps: IntArray) -> FloatArray:
    """The warps along the rows of the loop's accumulator tiles (O; dK, dV; dQ), per candidate.

    On wgmma an accumulator's dot feeds no later dot, so `warpsPerTileV3` lays it out by its
    unchained rule: one warpgroup (4 warps) along the rows, doubled while the tile has more
    rows than the warps cover (16 a warp), the rest along the columns (same file, lines
    119-131 at 0047907): with 8 warps and 64 rows the accumulator is split [4, 2], not held
    twice like the scores. Elsewhere the accumulators share the scores' layout (mma.sync's
    chained rule gives every dot of the chain the same warps)."""
    w = warps.astype(np.float64)
    rows = as_array(loop.rows, len(warps)).astype(np.float64)
    unchained = np.clip(rows / MMA_ROWS_PER_WARP, WARPGROUP_WARPS, w)
    along = warps_along_rows(loop, path, warps)
    return np.asarray(np.where(path == DotPath.WGMMA, unchained, np.where(along, w, 1.0)))


def loop_registers(
    loop: DotLoop, target: CompilerTarget, warps: IntArray, stages: IntArray
) -> LoopRegisters:
    """The terms of one loop (the module docstring)."""
    n = len(warps)
    w = warps.astype(np.float64)
    threads = w * LANES
    path = target.dot_path(as_array(loop.rows, n), warps, loop.fma_dots)
    fma = path == DotPath.FMA
    operands_in_smem = warpgroup_path(path)
    along = warps_along_rows(loop, path, warps)
    score_row_warps = np.where(along, w, 1.0)
    acc_row_warps = accumulator_row_warps(loop, path, warps)

    def tile(rows: object, cols: object, row_warps: FloatArray) -> FloatArray:
        """fp32 elements a thread holds of a rows x cols tile whose warps are laid out
        [row_warps, warps / row_warps] (a warp's tile at least 16 x 8, replicated where the
        block is smaller; FMA: the tile spread over the threads)."""
        r = as_array(rows, n).astype(np.float64)  # type: ignore[arg-type]
        c = as_array(cols, n).astype(np.float64)  # type: ignore[arg-type]
        rows_held = np.where(fma, r, np.maximum(r, MMA_ROWS_PER_WARP * row_warps))
        cols_held = np.where(fma, c, np.maximum(c, MMA_COLS_PER_WARP * w / row_warps))
        return np.asarray(rows_held * cols_held / threads)

    accumulators = sum((tile(r, c, acc_row_warps) for r, c in loop.accumulators), np.zeros(n))
    scores = sum((tile(r, c, score_row_warps) for r, c in loop.scores), np.zeros(n))
    chain = tile(loop.chain.rows, loop.chain.cols, score_row_warps) / ELEMENTS_PER_REGISTER

    rows = as_array(loop.rows, n).astype(np.float64)
    rows_per_warp = np.where(along, np.maximum(MMA_ROWS_PER_WARP, rows / w), rows)
    per_register = LANES * ELEMENTS_PER_REGISTER
    a_best = np.zeros(n)
    b_best = np.zeros(n)
    for dot in range(loop.dots):
        a = np.zeros(n)
        b = np.zeros(n)
        for o in loop.operands:
            if dot not in o.plain_uses and dot not in o.transposed_uses:
                continue
            cols = as_array(o.cols, n).astype(np.float64)
            if o.resident:
                a = a + rows_per_warp * cols / per_register
            else:
                elements = as_array(o.rows, n).astype(np.float64) * cols
                b = b + np.where(along, elements / per_register, elements / (per_register * w))
        if dot in loop.chain.consumers:
            a = a + rows_per_warp * as_array(loop.chain.cols, n) / per_register
        heavier = a + b > a_best + b_best
        a_best = np.where(heavier, a, a_best)
        b_best = np.where(heavier, b, b_best)
    a_best = np.where(operands_in_smem, 0.0, a_best)
    b_best = np.where(operands_in_smem, 0.0, b_best)

    streamed = sum(
        (as_array(o.rows, n).astype(np.float64) * as_array(o.cols, n) for o in loop.streamed()),
        np.zeros(n),
    )
    staging = np.where(stages == 1, streamed / (ELEMENTS_PER_REGISTER * threads), 0.0)
    addresses = streamed / (ELEMENTS_PER_VECTOR * threads) * REGISTERS_PER_ADDRESS
    return LoopRegisters(
        accumulators=np.asarray(accumulators),
        scores=np.asarray(scores),
        chain=np.asarray(chain),
        a_fragments=np.asarray(a_best),
        b_fragments=np.asarray(b_best),
        staging=np.asarray(staging),
        addresses=np.asarray(addresses),
        path=path,
    )


def _weighted(
    terms: LoopRegisters,
    constants: dict[str, PathConstants],
    part: str,
    keys: npt.NDArray[np.str_],
) -> FloatArray:
    """The `part` ("live" or "count") estimate of each candidate with the weights of its
    lowering (`keys`: the candidates' `path_keys`)."""
    out = np.zeros(len(terms.path))
    for key, chosen in constants.items():
        mask = keys == key
        if mask.any():
            weights = chosen.live if part == "live" else chosen.count
            out = np.where(mask, terms.estimate(weights), out)
    return out


def register_estimate(
    kernel: AttentionKernel,
    target: CompilerTarget,
    warps: IntArray,
    stages: IntArray,
    constants: dict[str, dict[str, PathConstants]] | None = None,
) -> RegisterEstimate:
    """Registers per thread, the cap and the spill of every candidate (the largest loop's)."""
    constants = REGISTER_CONSTANTS if constants is None else constants
    table = constants[target_family(target)]
    if any(loop.fma_dots for loop in kernel.loops) and "fma" not in table:
        # fp32 dots at IEEE precision on cc >= 8.0: the FMA lowering's constants (fitted on
        # sm75, the only FMA target of the data set; not fitted on these targets)
        table = {**table, "fma": constants["sm75"]["fma"]}
    per_loop = []
    for loop in kernel.loops:
        terms = loop_registers(loop, target, warps, stages)
        keys = path_keys(terms.path)
        per_loop.append(
            (_weighted(terms, table, "live", keys), _weighted(terms, table, "count", keys))
        )
    live = np.max([live for live, _ in per_loop], axis=0)
    count = np.max([count for _, count in per_loop], axis=0)
    cap = target.register_cap(warps * LANES)
    live_regs = np.ceil(np.maximum(live, 1.0)).astype(np.int64)
    spilled = np.maximum(live_regs - cap, 0)
    allocated = np.where(spilled > 0, cap, np.minimum(cap, np.ceil(np.maximum(count, 1.0))))
    return RegisterEstimate(
        live=live_regs,
        cap=cap,
        allocated=np.asarray(allocated, dtype=np.int64),
        spilled=np.asarray(spilled, dtype=np.int64),
    )
