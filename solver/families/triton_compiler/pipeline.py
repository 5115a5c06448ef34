"""What a stage of Triton's software pipeliner buys: how long an iteration of a `tl.dot` loop waits
for its streamed tile (docs/model.md 16.8).

With `s = num_stages` the pipeliner issues the copy of the tile iteration i + s - 1 reads while
iteration i computes (`ttg.async_copy_global_to_local` into s - 1 or s buffers,
`lib/Dialect/TritonGPU/Transforms/Pipeliner/`), so a load has s - 1 iterations of the block's
own rounds to arrive; with one stage the loop is not pipelined and the block waits for every
load, hidden only by the other resident blocks' compute. A round of `W` cycles (every resident
block one iteration) then waits `exposed_load_cycles(slack)` with slack (s - 1) W: solving
W = W0 + exposed((s - 1) W), with W0 the round without waits, gives W = (W0 + Lt + spread) / s
while the slack is below the load (the deterministic pipeline's (compute + load) / s, the mean
delay added), and a wait that decays exponentially once the slack exceeds it.

A tile's load takes its unloaded time Lt (the access latency plus the transfer at the SM's
share of the bandwidth) plus a queueing delay that under load is not constant: the model takes
it exponential with mean `LOAD_LATENCY_SPREAD` x Lt, so each stage beyond the one that covers
the mean hides a little more of the tail, and stages stop mattering (in whole nanoseconds of
the kernel) once the slack is a few spreads past the load. What a stage costs (its buffers in
shared memory, hence blocks per SM, and the opt-in limit) is the allocation rules'
(`shared_memory`).
"""

from __future__ import annotations

import numpy as np

from ...space import FloatArray, IntArray

# Mean queueing delay of a tile load on a loaded machine, as a share of its unloaded time
# (latency + transfer). An estimate (no measurement on this machine): the catalog's latencies are
# unloaded figures, and loaded latencies of GPU memory systems are known to exceed them by a
# similar share.
LOAD_LATENCY_SPREAD = 0.5
# The share of a loop that each stage past the first keeps an AMD loop's load in flight, where
# the loop keeps the lead at all (`amd_load_stages`): the median, over the 20 gfx950 pipelined
# loops of benchmarks/data/compiler/amd_load_cover.csv that touch no scratch, of the shortest
# lead (MFMAs between a load and its wait) over the loop's MFMAs and num_stages - 1 (0.33 to
# 0.88; docs/model.md 19.10). The loads of the next tile go out after part of this one's work.
AMD_STAGE_LEAD = 2.0 / 3.0
NEWTON_STEPS = 12  # from below the root; converged to rounding long before
# exp(-x) for x beyond this is below 1e-304 cycles: taken as that, not as an underflow to 0.
EXP_ARGUMENT_CAP = 700.0


def decay(excess: FloatArray, spread: FloatArray) -> FloatArray:
    """exp(-max(excess, 0) / spread), the share of the exponential delay still late."""
    return np.asarray(np.exp(-np.minimum(np.maximum(excess, 0.0) / spread, EXP_ARGUMENT_CAP)))


def exposed_load_cycles(slack: FloatArray, load: FloatArray) -> FloatArray:
    """Expected cycles an iteration waits for a tile requested `slack` cycles before it is read,
    whose load takes `load` cycles plus an exponential delay of mean LOAD_LATENCY_SPREAD x load:
    the wait E[max(0, load + delay - slack)]."""
    spread = np.maximum(LOAD_LATENCY_SPREAD * load, 1e-9)
    late = load - slack + spread
    tail = spread * decay(slack - load, spread)
    return np.asarray(np.where(slack < load, late, tail))


def pipelined_round(
    work: FloatArray, compute: FloatArray, load: FloatArray, stages: IntArray, lead: float = 1.0
) -> tuple[FloatArray, FloatArray]:
    """The round W of a loop whose resident blocks need `work` cycles without waiting (their
    compute or the bandwidth), one block's `compute` cycles per iteration, `load` cycles per
    tile, and `stages` pipeline stages; and the wait per round.

    s >= 2: W = work + exposed(a W), a = lead (s - 1): each stage past the first keeps the
    load in flight for `lead` of a round (1: the whole iteration, as Triton's pipeliner
    states it; AMD loops keep less, `AMD_STAGE_LEAD`). While the slack a W is below the load
    the wait is linear and W = (work + load + spread) / (1 + a) exactly; past it W solves
    W = work + spread exp(-(a W - load) / spread), found by Newton's method from max(work,
    load / a), which lies below the root: the left side minus the right is increasing and
    concave in W, so the steps rise to the root without passing it.
    s = 1: the other blocks' compute (work - compute) is the only slack. The wait is counted
    in whole cycles."""
    s = stages.astype(np.float64)
    ahead = lead * np.maximum(s - 1.0, 1.0)
    unpipelined = work + exposed_load_cycles(np.maximum(work - compute, 0.0), load)
    spread = np.maximum(LOAD_LATENCY_SPREAD * load, 1e-9)
    linear = (work + load + spread) / (1.0 + np.where(stages > 1, ahead, 0.0))
    # Newton's method only where its root is the answer (pipelined, past the linear part);
    # each candidate's steps are its own, so the others need none.
    solve = np.flatnonzero((stages > 1) & ~(ahead * linear < load))
    pipelined = linear.copy()
    pipelined[solve] = _newton_round(work[solve], load[solve], spread[solve], ahead[solve])
    # A wait of less than a cycle per round is none: whole cycles keep stage counts that hide
    # the load equally well at exactly the same time (no sub-nanosecond ranking noise).
    wait = np.floor(np.where(stages > 1, pipelined, unpipelined) - work)
    return np.asarray(work + wait), np.asarray(wait)


def _newton_round(
    work: FloatArray, load: FloatArray, spread: FloatArray, ahead: FloatArray
) -> FloatArray:
    """The root W of W = work + spread exp(-(ahead W - load) / spread) (`pipelined_round`),
    by NEWTON_STEPS of Newton's method from max(work, load / ahead)."""
    w = np.maximum(work, load / ahead)
    for _ in range(NEWTON_STEPS):
        delay = spread * decay(ahead * w - load, spread)
        step = w - (w - work - delay) / (1.0 + ahead * delay / spread)
        if np.array_equal(step, w):  # a fixed point: the remaining steps would repeat it
            break
        w = step
    return np.asarray(w)


def amd_load_stages(loads_to_lds: bool, stages: IntArray, spilled: IntArray) -> IntArray:
    """The stages whose lead an AMD loop's loads keep, per candidate (docs/model.md 19.10):
    `stages` where the stream pipeliner copies straight into LDS and nothing spills, else 1.

    A load's lead ends at the first `s_waitcnt vmcnt` that covers it, and vmcnt counts global,
    direct-to-LDS and scratch accesses in issue order. Where the tile passes through VGPRs
    (gfx942), the next tile's V is permuted in registers for its LDS layout as soon as it is
    loaded, and that wait covers every load before it: the loop's loads are in flight for a few
    of its MFMAs, as at one stage. Where the loop spills, its first reload's wait does the same.
    Measured on the compiled loops of `benchmarks/data/compiler/amd_load_cover.csv`."""
    keeps = np.asarray(spilled <= 0) & loads_to_lds
    return np.asarray(np.where(keeps, stages, 1), dtype=np.int64)


def stage_round(
    compute: FloatArray,
    tile_load: FloatArray,
    l2_bytes: FloatArray,
    blocks: FloatArray,
    stages: IntArray,
    l2_bytes_per_clk: float,
) -> tuple[FloatArray, FloatArray]:
    """`W`, the cycles for each of `blocks` resident blocks to finish one iteration, and the
    share of each tile's load hidden: the blocks' compute or their L2 traffic at the SM's
    share of the bandwidth (`l2_bytes_per_clk`, bytes per cycle), plus the wait the pipeline
    leaves (`pipelined_round`)."""
    work = np.maximum(blocks * compute, blocks * l2_bytes / l2_bytes_per_clk)
    cycles, wait = pipelined_round(work, compute, tile_load, stages)
    hidden = np.clip(1.0 - wait / np.maximum(tile_load, 1e-9), 0.0, 1.0)
    return cycles, np.asarray(hidden)
