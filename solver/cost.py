"""What every family's cost model shares: the `Perf` record, and the helpers for work that
does not depend on the kernel's inner loop — causal block skipping, waves and tails over the
compute units, L2 reuse of K/V across query blocks, the HBM floor, padding waste.

Units: times in microseconds, bytes in bytes, FLOPs in FLOPs. Formulas and sources are in
`docs/model.md`; each family's iteration cost lives in its own module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from .problem import AttentionProblem
from .space import BoolArray, FloatArray, IntArray, ceil_div

LSE_BYTES_PER_ROW = 4  # the FP32 log-sum-exp the forward kernel writes per query row
L2_USABLE_FRACTION = 0.5  # share of L2 that holds K/V of the concurrently running heads
KV_WINDOW_TILES = 8  # K/V tiles a cohort of in-step query blocks spreads over (estimate)
# Two configurations whose modelled times differ by less than this share are equivalent within
# the model's resolution (the answer says so; the tie-break orders them).
EQUIVALENT_TIME_FRACTION = 5e-4


@dataclass(frozen=True)
class Perf:
    """A cost model's output, one entry per configuration.

    The common figures every family reports, and `figures`: the family's own named figures
    (arrays over the candidates), reported per candidate in the answer."""

    time_us: FloatArray  # predicted kernel time
    tflops: FloatArray  # useful FLOPs / time
    compute_us: FloatArray  # compute time summed over blocks, per compute unit
    load_us: FloatArray  # tile load time summed over blocks, per compute unit
    overlap: FloatArray  # fraction of each tile load hidden by compute, 0..1
    arithmetic_intensity: FloatArray  # useful FLOPs per HBM byte
    hbm_bytes: FloatArray  # modelled DRAM traffic
    waves: FloatArray  # blocks / (compute units x resident blocks per unit)
    tail_efficiency: FloatArray  # waves / ceil(waves)
    padding_waste: FloatArray  # fraction of computed score entries not needed
    mma_utilization: FloatArray  # matrix unit (tensor core, cube) busy fraction, 0..1
    bottleneck: list[str]  # the dominant cost, in words
    figures: dict[str, FloatArray] = field(default_factory=dict)


def perf(
    problem: AttentionProblem,
    *,
    flops: float,
    time_us: FloatArray,
    hbm_bytes: FloatArray,
    waves: Waves,
    computed_pairs: FloatArray,
    compute_us: FloatArray,
    load_us: FloatArray,
    overlap: FloatArray,
    matrix_busy: FloatArray,
    bottleneck: list[str],
    figures: dict[str, FloatArray],
) -> Perf:
    """A cost model's `Perf`, with the figures every model derives alike: TFLOP/s (`flops` of
    useful work over the time), the arithmetic intensity (`flops` per HBM byte), the waves and
    their tail, the padding waste of the computed (query, key) pairs per head, and the matrix
    unit's busy fraction (`matrix_busy`) clipped to [0, 1]."""
    return Perf(
        time_us=time_us,
        tflops=flops / (time_us * 1e-6) / 1e12,
        compute_us=compute_us,
        load_us=load_us,
        overlap=overlap,
        arithmetic_intensity=flops / hbm_bytes,
        hbm_bytes=hbm_bytes,
        waves=waves.exact,
        tail_efficiency=waves.tail_efficiency,
        padding_waste=padding_waste(problem, computed_pairs),
        mma_utilization=np.clip(matrix_busy, 0.0, 1.0),
        bottleneck=bottleneck,
        figures=figures,
    )


def gather_perf(parts: list[tuple[IntArray, Perf]], n: int) -> Perf:
    """One Perf over all n configurations from the Perfs of disjoint index groups (a model
    evaluated group by group: split-KV's (num_splits, pack_gqa) groups, a kernel head dim);
    a configuration in no group gets zeros."""
    first = parts[0][1]
    arrays: dict[str, FloatArray] = {}
    for f in fields(first):
        if f.name in ("bottleneck", "figures"):
            continue
        column = np.zeros(n, dtype=np.float64)
        for indices, perf in parts:
            column[indices] = getattr(perf, f.name)
        arrays[f.name] = column
    bottleneck = [""] * n
    figures = {name: np.zeros(n, dtype=np.float64) for name in first.figures}
    for indices, perf in parts:
        for i, word in zip(indices.tolist(), perf.bottleneck, strict=True):
            bottleneck[i] = word
        for name, values in perf.figures.items():
            figures[name][indices] = values
    return Perf(**arrays, bottleneck=bottleneck, figures=figures)


def first_rule_words(
    rules: Sequence[tuple[BoolArray, str]], names: Sequence[str], busiest: IntArray
) -> list[str]:
    """Each candidate's bottleneck in words: the word of the first of `rules` (a condition over
    the candidates and its word) that holds for it, in their order; where none holds, the name
    of its busiest unit (`names[busiest]`)."""
    k = len(names)
    words = np.array([*names, *(word for _, word in rules)])
    code = np.select([holds for holds, _ in rules], list(range(k, k + len(rules))), default=busiest)
    return list(words[code].tolist())


def causal_iterations(
    n_m: IntArray, bm: FloatArray, bn: FloatArray, n_kv: IntArray, offset: int
) -> tuple[FloatArray, FloatArray]:
    """Total K/V iterations over all query blocks of one head, and diagonal tiles among them.

    Query block i (rows i*bm .. (i+1)*bm - 1) needs keys up to (i+1)*bm + offset - 1, i.e.
    ceil(((i+1)*bm + offset) / bn) tiles, clipped to [0, n_kv]. The sum of a clipped linear
    function is taken in closed form; the ceiling adds half a tile on average where the line
    is strictly inside (0, n_kv). Diagonal tiles per partially visible block: ceil(bm/bn)+1.
    """
    # f(i) = a*i + c, a = bm/bn, c = (bm + offset)/bn
    a = bm / bn
    c = (bm + offset) / bn
    n = n_m.astype(np.float64)
    top = n_kv.astype(np.float64)
    i_start = np.clip(np.ceil((0.0 - c) / a + 1e-12), 0, n)  # first i with f(i) > 0
    i_full = np.clip(np.ceil((top - c) / a - 1e-12), 0, n)  # first i with f(i) >= n_kv
    i_full = np.maximum(i_full, i_start)
    count = i_full - i_start
    partial_sum = a * (i_start + i_full - 1.0) * count / 2.0 + c * count + 0.5 * count
    total = partial_sum + (n - i_full) * top
    diagonal_per_block = np.minimum(np.ceil(bm / bn) + 1.0, top)
    diagonal = diagonal_per_block * (count + np.minimum(n - i_full, 1.0))
    return total, np.minimum(diagonal, total)


@dataclass(frozen=True)
class Waves:
    """How `ctas` blocks fill `slots` concurrent places (compute units x resident blocks)."""

    exact: FloatArray  # ctas / slots
    count: FloatArray  # ceil(exact): rounds of the schedule
    last_wave_ctas: FloatArray  # blocks in the last round
    tail_efficiency: FloatArray  # exact / count: how full the rounds are on average


def tiles_per_head(problem: AttentionProblem, block_m: IntArray, block_n: IntArray) -> IntArray:
    """(query block, key block) tiles of one head: the loop iterations a tile size costs, the
    first key of most families' tie-break order."""
    return np.asarray(
        ceil_div(problem.seq_len, block_m) * ceil_div(problem.seq_len_kv_eff, block_n),
        dtype=np.int64,
    )


def wave_schedule(ctas: IntArray, slots: IntArray) -> Waves:
    exact = ctas / slots
    count = np.ceil(exact)
    return Waves(exact, count, ctas - (count - 1) * slots, exact / count)


@dataclass(frozen=True)
class KvReuse:
    """How often K/V come from DRAM rather than L2 (arrays over the candidates)."""

    dram_reads_per_kv_head: FloatArray  # DRAM reads of one KV head's K/V, in whole heads
    dram_fraction: FloatArray  # share of all K/V tile loads that go to DRAM, 0..1


def kv_reuse(
    problem: AttentionProblem,
    kv_head_bytes: float,
    tile_bytes: FloatArray,
    n_m: IntArray,
    passes_per_query_head: FloatArray,
    slots: IntArray,
    l2_bytes: int,
) -> KvReuse:
    """The K/V traffic of a forward pass with the L2 reuse of blocks that walk K/V in step.

    The query blocks of one head that run at the same time (a cohort of min(n_m, slots)
    blocks: a wave holds consecutive block indices, and the grid's fastest index is the query
    block) start together and walk K/V at the same pace, so they share only a window of
    `KV_WINDOW_TILES` tiles, not the whole head: the first block's read comes from DRAM and
    the others hit L2 while the windows of all heads in flight fit in the usable L2. Later
    cohorts of the same head (more query blocks than slots) and GQA heads that do not run
    together re-read K/V from DRAM unless the whole head stays in L2.
    `passes_per_query_head` is the K/V read by one query head, in whole heads (n_m, or less
    when causal); `slots` the blocks that run at once."""
    heads_total = problem.batch * problem.heads
    group = problem.heads // problem.kv_heads_eff
    cohort = np.minimum(n_m, slots).astype(np.float64)
    cohorts = np.ceil(n_m / cohort)
    heads_in_flight = np.minimum(heads_total, ceil_div(slots, n_m) + 1)
    kv_heads_in_flight = np.asarray(ceil_div(heads_in_flight, group), dtype=np.float64)
    l2_usable = L2_USABLE_FRACTION * l2_bytes
    window = np.minimum(kv_head_bytes, KV_WINDOW_TILES * tile_bytes)
    window_miss = np.clip(1.0 - l2_usable / np.maximum(kv_heads_in_flight * window, 1.0), 0, 1)
    whole_miss = np.clip(1.0 - l2_usable / max(kv_head_bytes, 1.0) / kv_heads_in_flight, 0, 1)
    per_query_head = (1.0 + (cohort - 1.0) * window_miss) * (1.0 + (cohorts - 1.0) * whole_miss)
    group_together = group * n_m <= slots
    group_miss = np.where(group_together, window_miss, whole_miss)
    per_kv_head = per_query_head * (1.0 + (group - 1.0) * group_miss)
    reads = np.maximum(group * passes_per_query_head, 1.0)
    return KvReuse(per_kv_head, np.clip(per_kv_head / reads, 0.0, 1.0))


def forward_hbm_bytes(
    problem: AttentionProblem, d: int, dv: int, kv_dram_reads_per_kv_head: FloatArray
) -> FloatArray:
    """DRAM traffic of a forward pass: Q read and O (+ LSE) written once, each KV head's K/V
    read `kv_dram_reads_per_kv_head` times (bytes)."""
    elem = problem.dtype.bytes
    heads_total = problem.batch * problem.heads
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    kv_unique = float(problem.batch * problem.kv_heads_eff) * float(sk) * (d + dv) * elem
    q_bytes = float(heads_total) * sq * d * elem
    o_bytes = float(heads_total) * sq * (dv * elem + LSE_BYTES_PER_ROW)
    return np.asarray(q_bytes + o_bytes + kv_unique * kv_dram_reads_per_kv_head)


def padding_waste(problem: AttentionProblem, computed_pairs_per_head: FloatArray) -> FloatArray:
    """Fraction of computed (query, key) score entries the problem does not need."""
    heads_total = problem.batch * problem.heads
    useful_pairs = problem.flops / (2.0 * (problem.head_dim + problem.head_dim_v_eff))
    return np.asarray(
        np.clip(1.0 - useful_pairs / (computed_pairs_per_head * heads_total), 0.0, 1.0)
    )
