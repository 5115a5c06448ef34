"""What every family's cost model shares: the `Perf` record, and the helpers for work that
does not depend on the kernel's inner loop — causal block skipping, waves and tails over the
compute units, L2 reuse of K/V across query blocks, the HBM floor, padding waste.

Units: times in microseconds, bytes in bytes, FLOPs in FLOPs. Formulas and sources are in
`docs/model.md`; each family's iteration cost lives in its own module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .families.base import FloatArray
from .problem import AttentionProblem
from .space import IntArray, ceil_div

LSE_BYTES_PER_ROW = 4  # the FP32 log-sum-exp the forward kernel writes per query row
L2_USABLE_FRACTION = 0.5  # share of L2 that holds K/V of the concurrently running heads


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


def wave_schedule(ctas: IntArray, slots: IntArray) -> Waves:
    exact = ctas / slots
    count = np.ceil(exact)
    return Waves(exact, count, ctas - (count - 1) * slots, exact / count)


def kv_dram_miss(
    problem: AttentionProblem,
    kv_head_bytes: float,
    n_m: IntArray,
    slots: IntArray,
    l2_bytes: int,
) -> FloatArray:
    """Fraction of K/V tile reads that miss L2 and go to DRAM.

    The blocks in flight cover ceil(slots / n_m) + 1 heads at once, i.e. that many over the
    GQA group of KV heads; their K/V must share the usable part of L2."""
    heads_total = problem.batch * problem.heads
    group = problem.heads // problem.kv_heads_eff
    heads_in_flight = np.minimum(heads_total, ceil_div(slots, n_m) + 1)
    kv_heads_in_flight = np.asarray(ceil_div(heads_in_flight, group), dtype=np.float64)
    footprint = kv_heads_in_flight * kv_head_bytes
    l2_usable = L2_USABLE_FRACTION * l2_bytes
    return np.asarray(np.clip(1.0 - l2_usable / np.maximum(footprint, 1.0), 0.0, 1.0))


def forward_hbm_bytes(
    problem: AttentionProblem, d: int, dv: int, n_m: IntArray, dram_miss: FloatArray
) -> FloatArray:
    """DRAM traffic of a forward pass: Q read and O (+ LSE) written once, K/V once per KV
    head plus one re-read per further query block for the share that misses L2 (bytes)."""
    elem = problem.dtype.bytes
    heads_total = problem.batch * problem.heads
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    kv_unique = float(problem.batch * problem.kv_heads_eff) * float(sk) * (d + dv) * elem
    rereads = 1.0 + (n_m - 1) * dram_miss
    q_bytes = float(heads_total) * sq * d * elem
    o_bytes = float(heads_total) * sq * (dv * elem + LSE_BYTES_PER_ROW)
    return np.asarray(q_bytes + o_bytes + kv_unique * rereads, dtype=np.float64)


def padding_waste(problem: AttentionProblem, computed_pairs_per_head: FloatArray) -> FloatArray:
    """Fraction of computed (query, key) score entries the problem does not need."""
    heads_total = problem.batch * problem.heads
    useful_pairs = problem.flops / (2.0 * (problem.head_dim + problem.head_dim_v_eff))
    return np.asarray(
        np.clip(1.0 - useful_pairs / (computed_pairs_per_head * heads_total), 0.0, 1.0)
    )
