"""The cost model of FlashAttention-3's forward kernel (the `fa3` family): predicted time of
every candidate, with its parts. Formulas, constants and sources: docs/model.md section 11.

Per iteration of one CTA (one K/V tile of block_n keys for block_m query rows), in SM cycles:

    T = 2 bm bn (d + dv) / R_tc            wgmma at the dense tensor rate (fp8 at its own)
    E = bm bn / R_sfu                      one exp2 per score on the SFU
    A = (4 bm bn + bm dv) / R_alu          FP32 softmax math and the O rescale
    X = E + A                              the softmax of all consumer warpgroups
    hidden = 2 phi T X / (T + X)           the softmax that runs under the GEMMs; phi grows
                                           with intra-warpgroup overlap and ping-pong
    C = max(T + X - hidden + F, S)         F: per-iteration fixed cost; S: shared-memory pipe
    R = max(C, (C + Lt) / num_stages, K/V bytes / L2 share)    with the TMA ring

The CTA is persistent (one per SM): query tiles are dealt to the SMs in rounds (static order
without a mask, longest first with one), each tile paying the pipeline's fill and the epilogue.
The shared helpers of `solver/cost.py` give the causal iterations, the waves, the K/V reuse in
L2, the HBM floor and the padding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import (
    LSE_BYTES_PER_ROW,
    Perf,
    causal_iterations,
    first_rule_words,
    forward_hbm_bytes,
    kv_reuse,
    wave_schedule,
)
from ...family import kib
from ...model_constants import model_constants
from ...problem import DType
from ...space import FloatArray, ceil_div
from ..cuda.resources import cuda_device
from ..cuda.timing import ALU_OPS_PER_SCORE, MASK_OPS_PER_SCORE, sm_perf
from .resources import fa3_resources
from .shape import kernel_head_dims
from .split import paged_tile_load_cycles

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# ---- model constants (docs/model.md 11.4) ---------------------------------------------------
RESCALE_OPS_PER_OUTPUT = 1.0  # O *= exp(m_old - m_new) every iteration
EPILOGUE_OPS_PER_OUTPUT = 2.0  # O / l and the conversion to 16 bits
# Softmax hidden under the GEMMs: hidden = 2 phi T X / (T + X). phi is calibrated on the
# FA3 paper's H100 throughput (d 64, 128, 256 at 16k tokens) and its ablation (d 128, 8k):
# removing intra-warpgroup pipelining costs 12% (661 -> 582 TFLOP/s), ping-pong about 9%
# (570 -> 620). See docs/model.md 11.3.
PHI_BASE = 0.205  # warpgroups that run free, without either technique
PHI_INTRA_WG_OVERLAP = 0.229  # two-stage pipelining within a warpgroup
PHI_PINGPONG = 0.168  # consumers take turns on the tensor cores (two or more warpgroups)
# Per-iteration fixed cost: the K/V pipeline's full/empty barrier waits and arrivals, wgmma
# fence/commit/wait, the row max and row sum shuffles' latency (calibrated with phi, 11.3).
ITERATION_FIXED_CYCLES = 544.0
# P staged in shared memory: fence.proxy.async so that wgmma sees the generic-proxy writes,
# then a warpgroup barrier before the SS wgmma (estimate: one barrier plus ~30 cycles).
P_SMEM_FENCE_CYCLES = 30.0
OUTPUT_BYTES_PER_ELEMENT = 2.0  # O is written as fp16/bf16 (fp8 kernels write bf16)


def _figures(names: tuple[str, ...], arrays: tuple[FloatArray, ...]) -> dict[str, FloatArray]:
    return {n: np.asarray(a, dtype=np.float64) for n, a in zip(names, arrays, strict=True)}


def evaluate(ev: Evaluation) -> Perf:
    """Predicted time and its parts for every fa3 configuration."""
    res = fa3_resources(ev)
    device = cuda_device(ev.hardware)
    tp = device.throughput
    k = model_constants(device)
    problem, cfg = ev.problem, ev.cfg
    d, dv = kernel_head_dims(problem)
    e = problem.dtype.bytes
    fp8 = problem.dtype is DType.FP8
    n_sm = tp.sm_count
    clock_hz = tp.boost_clock_mhz * 1e6

    bm = cfg["block_m"].astype(np.float64)
    bn = cfg["block_n"].astype(np.float64)
    w = res.warpgroups.astype(np.float64)
    stages = cfg["num_stages"].astype(np.float64)
    overlap = cfg["intra_wg_overlap"].astype(np.float64)
    pingpong = cfg["pingpong"].astype(np.float64)
    p_smem = cfg["p_in_smem"].astype(np.float64)

    # ---- one iteration of one CTA ---------------------------------------------------------
    scores = bm * bn
    tensor = 2.0 * scores * (d + dv) / tp.tensor_flops_per_clk_per_sm(e)
    sfu = scores / tp.sfu_ops_per_clk_per_sm
    alu = (scores * ALU_OPS_PER_SCORE + bm * dv * RESCALE_OPS_PER_OUTPUT) / (
        tp.fp32_ops_per_clk_per_sm
    )
    softmax = sfu + alu
    phi = PHI_BASE + overlap * PHI_INTRA_WG_OVERLAP + pingpong * PHI_PINGPONG
    hidden = 2.0 * phi * tensor * softmax / (tensor + softmax)
    fixed = ITERATION_FIXED_CYCLES + p_smem * (P_SMEM_FENCE_CYCLES + tp.barrier_cycles)
    core = tensor + softmax - hidden + fixed

    smem_traffic = (
        bm * d * e  # Q, the A operand of the SS QK^T (each warpgroup reads its 64 rows)
        + w * bn * d * e  # K, the B operand, read by every consumer warpgroup
        + p_smem * 2.0 * scores * e  # P written, then read as the A operand of an SS P.V
        + w * bn * dv * e  # V, the B operand of P.V
        + bn * (d + dv) * e  # the TMA writes of the K and V tiles
        + (2.0 * bn * dv if fp8 else 0.0)  # fp8: the producer transposes V (LDSM.T + STSM)
    )
    smem_pipe = smem_traffic / tp.smem_bandwidth_bytes_per_clk_per_sm
    compute = np.maximum(core, smem_pipe)
    mask_extra = scores * MASK_OPS_PER_SCORE / tp.fp32_ops_per_clk_per_sm

    # ---- tiles, iterations, K/V reuse -----------------------------------------------------
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    heads_total = problem.batch * problem.heads
    n_m = ceil_div(sq, cfg["block_m"])
    n_kv = ceil_div(sk, cfg["block_n"])
    tiles = n_m * heads_total
    slots = np.full(len(cfg), n_sm, dtype=np.int64)  # one persistent CTA per SM
    if problem.causal:
        total_iters, diag_iters = causal_iterations(n_m, bm, bn, n_kv, sk - sq)
    else:
        total_iters = (n_m * n_kv).astype(np.float64)
        diag_iters = np.zeros_like(total_iters)

    kv_head_bytes = float(sk) * (d + dv) * e
    tile_bytes = bn * (d + dv) * e
    reuse = kv_reuse(
        problem, kv_head_bytes, tile_bytes, n_m, total_iters / n_kv, slots, device.memory.l2_bytes
    )
    miss = reuse.dram_fraction
    hbm_bytes = forward_hbm_bytes(problem, d, dv, reuse.dram_reads_per_kv_head)

    memory = device.memory
    l2_share = memory.l2_achievable_fraction * memory.l2_bandwidth_bytes_per_clk / n_sm
    dram_per_clk = memory.achievable_dram_bytes_per_s / clock_hz
    dram_share = dram_per_clk / n_sm
    tile_load = (
        (1.0 - miss) * tp.l2_hit_latency_cycles
        + miss * tp.dram_latency_cycles
        + tile_bytes * ((1.0 - miss) / l2_share + miss / dram_share)
    )
    # the page-table lookups of a paged cache (0.0 for a contiguous one: the forward model
    # is unchanged; split.py and docs/model.md 13.9)
    tile_load = tile_load + paged_tile_load_cycles(cfg, device)
    # The producer runs num_stages - 1 tiles ahead: a load has that many iterations (plus its
    # own) to arrive. One stage: the next tile waits for the consumers to release the buffer.
    round_cycles = np.maximum.reduce(
        [compute, (compute + tile_load) / stages, tile_bytes / l2_share]
    )
    idle = np.maximum(0.0, round_cycles - compute)
    load_overlap = np.clip(1.0 - idle / tile_load, 0.0, 1.0)

    # ---- one query tile: its iterations, the pipeline's fill, the epilogue ------------------
    fill = hidden  # the first softmax and the last P.V have no neighbour to overlap
    epilogue = bm * dv * (OUTPUT_BYTES_PER_ELEMENT / tp.smem_bandwidth_bytes_per_clk_per_sm) + (
        bm * dv * EPILOGUE_OPS_PER_OUTPUT / tp.fp32_ops_per_clk_per_sm + 2 * tp.barrier_cycles
    )
    # Between two tiles of a CTA, the next Q comes from DRAM (no other tile reads it) and the
    # O tile, staged over the V ring, must leave before the next V lands there; the SMs of a
    # round switch tiles together, so each gets its share of the DRAM bandwidth. Only a tile's
    # real rows move (Q's rows past the sequence are not read, O's not written): Sq / n_m on
    # average, which a decode step's few packed rows in a 128- or 192-row tile make small.
    real_rows = np.minimum(bm, sq / n_m.astype(np.float64))
    q_o_bytes = real_rows * (d * e + dv * OUTPUT_BYTES_PER_ELEMENT + LSE_BYTES_PER_ROW)
    switch = tp.dram_latency_cycles + q_o_bytes / dram_share
    per_tile = fill + epilogue + switch
    prologue = k.block_start_cycles + tile_load

    waves = wave_schedule(tiles, slots)
    if problem.causal:
        per_head = total_iters * round_cycles + n_m * per_tile + diag_iters * mask_extra
        work = heads_total * per_head
        diag_per_tile = np.minimum(np.ceil(bm / bn) + 1.0, n_kv.astype(np.float64))
        longest = n_kv * round_cycles + per_tile + diag_per_tile * mask_extra
        first = np.clip(np.ceil((bm + (sk - sq)) / bn), 1.0, n_kv.astype(np.float64))
        shortest = first * round_cycles + per_tile
        # Longest-processing-time-first (FA3's dynamic scheduler starts with the query tiles
        # that see the most keys): the ragged end is about half the shortest tile.
        cycles = prologue + np.maximum(longest, work / slots + 0.5 * shortest)
    else:
        per_tile_full = n_kv * round_cycles + per_tile
        cycles = prologue + waves.count * per_tile_full

    dram_bound = hbm_bytes / dram_per_clk
    cycles = np.maximum(cycles, dram_bound)
    time_us = cycles / clock_hz * 1e6 + k.kernel_launch_us

    computed_pairs = (n_m * cfg["block_m"]).astype(np.float64) * (n_kv * cfg["block_n"])
    if problem.causal:
        computed_pairs = total_iters * scores
    tensor_total = heads_total * total_iters * tensor / n_sm
    bottleneck = _bottlenecks(
        tensor,
        softmax - hidden,
        fixed,
        smem_pipe,
        core,
        round_cycles,
        compute,
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
        compute_cycles=heads_total * total_iters * compute / n_sm,
        load_cycles=heads_total * total_iters * tile_load / n_sm,
        tensor_cycles=tensor_total,
        overlap=load_overlap,
        bottleneck=bottleneck,
        figures=_figures(
            (
                "tensor_cycles_per_iteration",
                "softmax_cycles_per_iteration",
                "softmax_hidden_cycles_per_iteration",
                "iteration_cycles",
                "smem_q_bytes",
                "smem_kv_ring_bytes",
                "smem_p_bytes",
                "smem_o_pad_bytes",
                "producer_regs",
            ),
            (
                tensor,
                softmax,
                hidden,
                round_cycles,
                res.smem_q.astype(np.float64),
                res.smem_kv.astype(np.float64),
                res.smem_p.astype(np.float64),
                res.smem_o_pad.astype(np.float64),
                res.producer_regs.astype(np.float64),
            ),
        ),
    )


def _bottlenecks(
    tensor: FloatArray,
    exposed_softmax: FloatArray,
    fixed: FloatArray,
    smem_pipe: FloatArray,
    core: FloatArray,
    round_cycles: FloatArray,
    compute: FloatArray,
    cycles: FloatArray,
    dram_bound: FloatArray,
    waves: FloatArray,
) -> list[str]:
    names = (
        "tensor cores (wgmma)",
        "softmax exp (SFU) not hidden by the GEMMs",
        "per-iteration overhead",
    )
    rules = [
        (dram_bound >= cycles * 0.999, "HBM bandwidth"),
        (waves < 0.5, "too few query tiles to fill the SMs"),
        (round_cycles > compute * 1.0001, "K/V load latency"),
        (smem_pipe > core, "shared-memory bandwidth"),
    ]
    largest = np.stack([tensor, exposed_softmax, fixed]).argmax(axis=0)
    return first_rule_words(rules, names, largest)


def reason_lines(table: CandidateTable, i: int) -> list[str]:
    """The fa3 lines of configuration i's reasons."""
    res = fa3_resources(table)
    cfg, perf = table.cfg, table.perf
    sm = cuda_device(table.hardware).sm
    figures = perf.figures
    w = int(res.warpgroups[i])
    structure = [
        "intra-warpgroup overlap" if cfg["intra_wg_overlap"][i] else "no intra-warpgroup overlap",
        "ping-pong" if cfg["pingpong"][i] else "no ping-pong",
        "P in shared memory (SS P.V)" if cfg["p_in_smem"][i] else "P in registers (RS P.V)",
    ]
    tensor = figures["tensor_cycles_per_iteration"][i]
    softmax = figures["softmax_cycles_per_iteration"][i]
    hidden = figures["softmax_hidden_cycles_per_iteration"][i]
    parts = [f"Q {kib(res.smem_q[i])}", f"K/V ring {kib(res.smem_kv[i])}"]
    if res.smem_p[i]:
        parts.append(f"P {kib(res.smem_p[i])}")
    if res.smem_o_pad[i]:
        parts.append(f"O beyond V {kib(res.smem_o_pad[i])}")
    parts.append(f"barriers {res.smem_barriers[i]} B")
    return [
        f"{w} consumer warpgroup(s) + 1 producer ({4 * (w + 1)} warps), one CTA per SM; "
        f"setmaxnreg: consumers {res.regs_cap[i]}, producer {res.producer_regs[i]} registers; "
        f"consumers need about {res.regs_demand[i]}",
        f"shared memory {kib(res.smem_bytes[i])} of {kib(sm.smem_per_block_optin_bytes)}: "
        + ", ".join(parts),
        f"per K/V tile: wgmma {tensor:.0f} cycles, softmax {softmax:.0f} of which "
        f"{hidden / max(softmax, 1e-9):.0%} hidden under the GEMMs ({', '.join(structure)})",
        f"{perf.overlap[i]:.0%} of each K/V tile load hidden by the {cfg['num_stages'][i]}-stage "
        f"TMA ring; tensor cores busy {perf.mma_utilization[i]:.0%}",
    ]
