"""The cost model of FlashAttention-4's sm_100 forward kernel (the `fa4` family on compute
capability 10.x): predicted time of every candidate, with its parts. Formulas, constants and
sources: docs/model.md section 17.3.

One period of one CTA is one K/V tile for its q Q tiles (q = q_stage, block_m = 128 rows each),
in SM cycles:

    T1 = 2 bm bn (d + dv) / R_tc            tcgen05 QK^T and P.V of one Q tile (fp8 at its rate)
    f  = the share of exponentials emulated on the FMA pipe, balancing it against the MUFU
    X1 = max((1 - f) bm bn / R_sfu, bm bn (c_s + f c_e) / R_fp32)      one Q tile's softmax
    h  = the share of X1 hidden under MMAs: 0.28 with two Q tiles, 0.28 d / (d + dv) with one
    core = max(q (T1 + (1 - h) X1) + F, q X1, smem bytes / B_smem)
    period = max(core, (core + Lt) / (kv_stage / 2), K/V bytes / L2 share)     the TMA ring

F is the period's fixed synchronisation. Per CTA tile: the first S and softmax
(fill), the last P.V and the epilogue (drain), the next tile's Q and this tile's O through
DRAM (switch) and a fixed cost. Non-causal runs use the static persistent scheduler over the
SMs (2-CTA clusters: pairs of SMs), causal ones the longest-first single-tile scheduler; the
shared helpers of `solver/cost.py` give the causal iterations, the waves, the K/V reuse in L2,
the HBM floor and the padding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import (
    LSE_BYTES_PER_ROW,
    Perf,
    causal_iterations,
    forward_hbm_bytes,
    kv_reuse,
    wave_schedule,
)
from ...family import kib
from ...model_constants import model_constants
from ...space import FloatArray, ceil_div
from ..cuda.resources import cuda_device
from ..cuda.timing import MASK_OPS_PER_SCORE, bottleneck_words, sm_perf
from .resources import OUTPUT_BYTES, fa4_resources
from .shape import kernel_head_dims

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# ---- model constants (docs/model.md 17.3) ---------------------------------------------------
# FP32-pipe operations per score of the softmax with packed f32x2 instructions (softmax.py:
# scale_subtract_rowmax is one fma_packed_f32x2 per two scores; the row max, the row sum and
# the conversion to 16 bits likewise take half an instruction per score): 0.5 x 4.
SOFTMAX_FP32_OPS_PER_SCORE = 2.0
# Extra FP32-pipe operations of one emulated exp2 (utils.ex2_emulation_2, packed in pairs: the
# clamp, the round-down add, two subtracts, a degree-3 Horner polynomial in three FMAs; the
# exponent's integer shift and add run on the integer pipe).
EMULATED_EXP2_OPS = 4.0
# The softmax converts P in 32-column fragments and always computes the last one with the
# hardware exp2 (softmax.py apply_exp2_convert: `j >= frg_cnt - 1`).
FRAGMENT_COLUMNS = 32
# The share of a Q tile's softmax that runs under the MMAs; the rest the tensor pipe waits for
# (the MMA's commit to an mbarrier, the softmax's tcgen05.ld of S, its tcgen05.st of P, the
# fence and the mbarrier before the P.V is issued). With two Q tiles a tile's softmax can run
# under the other tile's QK^T and P.V; with one, only under its own next QK^T (the share scaled
# by d / (d + dv)). Calibrated on FA4's measured B200 forward (bf16, two Q tiles of 128 rows,
# block_n 128, 8k-16k keys: head dim 64 at about 1230 TFLOP/s, Dao-AILab/flash-attention PR
# #2605; head dim 128 at 1535, PR #2280): both take T1 + about 0.72 X1 per Q tile and K/V tile
# beyond the fixed cost below (docs/model.md 17.3).
SOFTMAX_HIDDEN_FRACTION = 0.28
# Per period: the MMA warp's and the softmax warpgroups' mbarrier waits and arrivals that no
# other work covers (about four round trips of a block barrier; estimate).
PERIOD_FIXED_CYCLES = 100.0
# The correction warpgroup rescales O only when a row's maximum grew by more than FA4's
# threshold (conditional rescaling, Zadouri et al. 2026 sec. 3); the share of K/V tiles that
# rescale (estimate), and the FP32 operations per O element when it does (load, multiply, store).
RESCALE_FRACTION = 0.1
RESCALE_OPS_PER_OUTPUT = 1.0
EPILOGUE_OPS_PER_OUTPUT = 2.0  # O / l and the conversion to 16 bits
# Fixed cycles between two tiles of a CTA (the scheduler's next tile, the ring's restart, the
# barriers' re-arm). Calibrated with MMA_HANDOFF_CYCLES: FA4's head-dim-64 B200 times from 1k
# to 16k keys (PR #2605) are about 1930 cycles per period and 7.3k per tile.
TILE_FIXED_CYCLES = 2200.0


# What binds a period, in words: the tensor pipe with the softmax it waits for, the softmax's own
# pipes, the shared-memory bandwidth.
BOTTLENECK_NAMES = (
    "tensor cores (tcgen05) and the softmax they wait for",
    "softmax exponentials (MUFU and the FMA pipe)",
    "shared-memory bandwidth",
)


def _figures(names: tuple[str, ...], arrays: tuple[FloatArray, ...]) -> dict[str, FloatArray]:
    return {n: np.asarray(a, dtype=np.float64) for n, a in zip(names, arrays, strict=True)}


def emulated_fraction(
    scores: FloatArray, bn: FloatArray, sfu_rate: float, fp32_rate: float
) -> FloatArray:
    """The share of a tile's exponentials emulated on the FMA pipe: the one that balances the
    MUFU's time against the FP32 pipe's, 0 where the MUFU is not the busier, at most all but
    the last 32-column fragment."""
    mufu = scores / sfu_rate
    base = scores * SOFTMAX_FP32_OPS_PER_SCORE / fp32_rate
    emulation = scores * EMULATED_EXP2_OPS / fp32_rate
    cap = np.maximum(0.0, 1.0 - FRAGMENT_COLUMNS / bn)
    return np.asarray(np.clip((mufu - base) / (mufu + emulation), 0.0, cap))


def evaluate(ev: Evaluation) -> Perf:
    """Predicted time and its parts for every fa4 sm_100 configuration."""
    res = fa4_resources(ev)
    device = cuda_device(ev.hardware)
    tp, memory = device.throughput, device.memory
    k = model_constants(device)
    problem, cfg = ev.problem, ev.cfg
    d, dv = kernel_head_dims(problem)
    e = problem.dtype.bytes
    n_sm = tp.sm_count
    clock_hz = tp.boost_clock_mhz * 1e6
    fp32_rate = tp.fp32_ops_per_clk_per_sm

    bm = cfg["block_m"].astype(np.float64)
    bn = cfg["block_n"].astype(np.float64)
    q = cfg["q_stage"].astype(np.float64)
    cg = cfg["cta_group"].astype(np.float64)
    stages = res.kv_stages.astype(np.float64)

    # ---- one Q tile and one K/V tile ------------------------------------------------------
    scores = bm * bn
    rate = tp.tensor_flops_per_clk_per_sm(e)
    t_qk = 2.0 * scores * d / rate
    t_pv = 2.0 * scores * dv / rate
    t1 = t_qk + t_pv
    f = emulated_fraction(scores, bn, tp.sfu_ops_per_clk_per_sm, fp32_rate)
    mufu = (1.0 - f) * scores / tp.sfu_ops_per_clk_per_sm
    rescale = RESCALE_FRACTION * bm * dv * RESCALE_OPS_PER_OUTPUT
    fp32 = (scores * (SOFTMAX_FP32_OPS_PER_SCORE + f * EMULATED_EXP2_OPS) + rescale) / fp32_rate
    x1 = np.maximum(mufu, fp32)

    # ---- one period: a K/V tile for the CTA's q Q tiles -----------------------------------
    hidden = np.where(q == 2, SOFTMAX_HIDDEN_FRACTION, SOFTMAX_HIDDEN_FRACTION * d / (d + dv))
    tensor = q * (t1 + (1.0 - hidden) * x1) + PERIOD_FIXED_CYCLES
    pipes = q * x1
    kv_bytes = bn * (d + dv) * e / cg  # each CTA of a cluster holds half of every K/V tile
    # SS QK^T reads Q and K, TS P.V reads V (P is in TMEM); TMA writes the K and V tiles
    smem_bytes = q * (bm * d * e + kv_bytes) + kv_bytes
    smem = smem_bytes / tp.smem_bandwidth_bytes_per_clk_per_sm
    core = np.maximum.reduce([tensor, pipes, smem])
    mask_extra = q * scores * MASK_OPS_PER_SCORE / fp32_rate

    # ---- tiles, iterations, K/V reuse -----------------------------------------------------
    # A cluster (one CTA, or two sharing each MMA) walks the keys of cta_group x q_stage x 128
    # query rows in step: that is the unit of the schedule, over the SMs or pairs of them.
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    heads_total = problem.batch * problem.heads
    cta_rows = cfg["q_stage"] * cfg["block_m"]
    cluster_rows = cta_rows * cfg["cta_group"]
    n_m = ceil_div(sq, cluster_rows)  # cluster tiles per head
    n_kv = ceil_div(sk, cfg["block_n"])
    # At least one slot: a cluster wider than the part cannot launch (Fa4Shape refuses it),
    # and its figures stay finite.
    slots = np.asarray(np.maximum(n_sm // cfg["cta_group"], 1), dtype=np.int64)
    if problem.causal:
        total_iters, diag_iters = causal_iterations(n_m, q * cg * bm, bn, n_kv, sk - sq)
    else:
        total_iters = (n_m * n_kv).astype(np.float64)
        diag_iters = np.zeros_like(total_iters)

    kv_head_bytes = float(sk) * (d + dv) * e
    tile_bytes = bn * (d + dv) * e
    reuse = kv_reuse(
        problem,
        kv_head_bytes,
        tile_bytes,
        n_m,
        total_iters / n_kv,
        slots,
        memory.l2_bytes,
    )
    miss = reuse.dram_fraction
    hbm_bytes = forward_hbm_bytes(problem, d, dv, reuse.dram_reads_per_kv_head)

    l2_share = memory.l2_achievable_fraction * memory.l2_bandwidth_bytes_per_clk / n_sm
    dram_per_clk = memory.achievable_dram_bytes_per_s / clock_hz
    dram_share = dram_per_clk / n_sm
    tile_load = (
        (1.0 - miss) * tp.l2_hit_latency_cycles
        + miss * tp.dram_latency_cycles
        + kv_bytes * ((1.0 - miss) / l2_share + miss / dram_share)
    )
    # The ring holds kv_stage tiles, K and V each one: kv_stage / 2 K/V tiles in flight.
    period = np.maximum.reduce([core, (core + tile_load) / (stages / 2.0), kv_bytes / l2_share])
    idle = np.maximum(0.0, period - core)
    load_overlap = np.clip(1.0 - idle / tile_load, 0.0, 1.0)

    # ---- one CTA tile: fill, drain, the switch to the next ---------------------------------
    fill = t_qk + x1
    outputs = q * bm * dv
    epilogue = outputs * EPILOGUE_OPS_PER_OUTPUT / fp32_rate + (
        outputs * OUTPUT_BYTES / tp.smem_bandwidth_bytes_per_clk_per_sm
    )
    drain = t_pv + epilogue + 2 * tp.barrier_cycles
    q_o_bytes = q * bm * (d * e + dv * OUTPUT_BYTES + LSE_BYTES_PER_ROW)
    switch = tp.dram_latency_cycles + q_o_bytes / dram_share
    per_tile = fill + drain + switch + TILE_FIXED_CYCLES
    prologue = k.block_start_cycles + tile_load

    if problem.causal:
        # the longest-first single-tile scheduler: one CTA per tile, each starting anew
        per_tile = per_tile + k.block_start_cycles
        waves = wave_schedule(heads_total * n_m, slots)
        per_head = total_iters * period + n_m * per_tile + diag_iters * mask_extra
        work = heads_total * per_head
        diag_per_tile = np.minimum(np.ceil(q * cg * bm / bn) + 1.0, n_kv.astype(np.float64))
        longest = n_kv * period + per_tile + diag_per_tile * mask_extra
        first = np.clip(np.ceil((q * cg * bm + (sk - sq)) / bn), 1.0, n_kv.astype(np.float64))
        shortest = first * period + per_tile
        cycles = prologue + np.maximum(longest, work / slots + 0.5 * shortest)
    else:
        # the static persistent scheduler deals the cluster tiles to the SMs (pairs)
        waves = wave_schedule(heads_total * n_m, slots)
        cycles = prologue + waves.count * (n_kv * period + per_tile)

    dram_bound = hbm_bytes / dram_per_clk
    cycles = np.maximum(cycles, dram_bound)
    time_us = cycles / clock_hz * 1e6 + k.kernel_launch_us

    computed_pairs = (n_m * cluster_rows).astype(np.float64) * (n_kv * cfg["block_n"])
    if problem.causal:
        computed_pairs = total_iters * cg * q * scores
    per_sm = heads_total * total_iters / slots
    bottleneck = bottleneck_words(
        (tensor, pipes, smem),
        BOTTLENECK_NAMES,
        "K/V load latency",
        period > core * 1.0001,
        cycles,
        dram_bound,
        waves.exact,
    )
    return sm_perf(
        problem,
        flops=problem.flops,
        time_us=time_us,
        clock_hz=clock_hz,
        hbm_bytes=hbm_bytes,
        waves=waves,
        computed_pairs=computed_pairs,
        compute_cycles=per_sm * core,
        load_cycles=per_sm * tile_load,
        tensor_cycles=per_sm * q * t1,
        overlap=load_overlap,
        bottleneck=bottleneck,
        figures=_figures(
            (
                "tensor_cycles_per_tile",
                "softmax_cycles_per_tile",
                "exp2_emulated_fraction",
                "period_cycles",
                "kv_stages",
                "tmem_columns",
                "smem_q_o_bytes",
                "smem_kv_ring_bytes",
            ),
            (
                t1,
                x1,
                f,
                period,
                stages,
                res.tmem_columns.astype(np.float64),
                res.smem_q_o.astype(np.float64),
                res.smem_ring.astype(np.float64),
            ),
        ),
    )


def reason_lines(table: CandidateTable, i: int) -> list[str]:
    """The fa4 sm_100 lines of configuration i's reasons."""
    res = fa4_resources(table)
    cfg, perf = table.cfg, table.perf
    sm = cuda_device(table.hardware).sm
    figures = perf.figures
    q, cg = int(cfg["q_stage"][i]), int(cfg["cta_group"][i])
    cluster = "a 2-CTA cluster (M = 256 across two SMs)" if cg == 2 else "one CTA"
    return [
        f"{q} Q tile(s) of {cfg['block_m'][i]} rows per CTA, {cluster}, one CTA per SM; "
        f"setmaxnreg: softmax {res.regs_cap[i]} (wants about {res.regs_demand[i]}), "
        f"correction {res.correction_regs[i]}, other {res.other_regs[i]} registers",
        f"tensor memory {res.tmem_columns[i]} of {res.tmem_capacity} columns; shared memory "
        f"{kib(res.smem_bytes[i])} of {kib(sm.smem_per_block_optin_bytes)}: Q and O "
        f"{kib(res.smem_q_o[i])}, K/V ring of {res.kv_stages[i]} stages {kib(res.smem_ring[i])}",
        f"per K/V tile and Q tile: tcgen05 {figures['tensor_cycles_per_tile'][i]:.0f} cycles, "
        f"softmax {figures['softmax_cycles_per_tile'][i]:.0f} with "
        f"{figures['exp2_emulated_fraction'][i]:.0%} of the exponentials emulated on the FMA "
        "pipe",
        f"{perf.overlap[i]:.0%} of each K/V tile load hidden by the TMA ring; tensor cores busy "
        f"{perf.mma_utilization[i]:.0%}",
    ]
