"""The cost model of the Triton tutorial's backward kernel (`triton`, backward): each program's
dK/dV loop and dQ loop on the SM's pipes, their streamed operands' L2 reuse, the longest
program and the makespan over the SMs, and the helper kernels (preprocess, the K scaling, GQA
reduction). Formulas, units and sources: docs/model.md section 12.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import (
    Perf,
    causal_iterations,
    wave_schedule,
)
from ...hardware import CudaDevice
from ...model_constants import model_constants
from ...problem import AttentionProblem
from ...space import ConfigArrays, FloatArray, IntArray, ceil_div
from ..cuda.backward import (
    BACKWARD_PIPE_WORDS,
    LSE_D_BYTES_PER_ROW,
    LoopIteration,
    backward_flops,
    bandwidth_kernel_us,
    gqa_reduce_bytes,
    preprocess_bytes,
    streamed_reuse,
)
from ..cuda.resources import CudaResources
from ..cuda.timing import (
    bottleneck_words,
    dram_bytes_per_clk,
    makespan_cycles,
    sm_perf,
)
from ..triton_cuda.backward import loop_iterations
from ..triton_cuda.forward import (
    device_stage_round,
    triton_matrix_unit,
)

if TYPE_CHECKING:
    from .backward import TritonFlashAttentionBackward

BLK_SLICE_FACTOR = 2  # the tutorial's diagonal steps: BLOCK_M1 / 2 and BLOCK_N2 / 2 rows
TL_DOT_MIN = 16  # tl.dot needs every dimension >= 16


def _loop_iterations(
    n_m: IntArray, bm: FloatArray, bn: FloatArray, n_kv: IntArray, offset: int, causal: bool
) -> tuple[FloatArray, FloatArray]:
    """(query block, key block) tile pairs with unmasked scores, and diagonal ones, per head."""
    if causal:
        return causal_iterations(n_m, bm, bn, n_kv, offset)
    total = (n_m * n_kv).astype(np.float64)
    return total, np.zeros_like(total)


def _rounds(
    it1: LoopIteration,
    it2: LoopIteration,
    blocks: IntArray,
    last_blocks: IntArray,
    stages: IntArray,
    device: CudaDevice,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Each loop's round and the share of its tile loads hidden with `blocks` resident blocks,
    then its round in the last wave with `last_blocks`
    (`triton_cuda.forward.device_stage_round`): one call over all of them, the last wave's
    evaluated only where it has fewer blocks (the rule is elementwise over the candidates, so
    a last wave of as many blocks has the same round)."""
    n = len(stages)
    fewer = np.flatnonzero(last_blocks != blocks)
    every = np.arange(n)
    parts = [(it1, every, blocks), (it2, every, blocks), (it1, fewer, last_blocks)]
    parts.append((it2, fewer, last_blocks))
    cycles, hidden = device_stage_round(
        np.concatenate([it.compute[rows] for it, rows, _ in parts]),
        np.concatenate([it.tile_load[rows] for it, rows, _ in parts]),
        np.concatenate([it.l2_bytes[rows] for it, rows, _ in parts]),
        np.concatenate([b[rows] for _, rows, b in parts]).astype(np.float64),
        np.concatenate([stages[rows] for _, rows, _ in parts]),
        device,
    )
    round1, round2 = cycles[:n], cycles[n : 2 * n]
    last1, last2 = round1.copy(), round2.copy()
    last1[fewer] = cycles[2 * n : 2 * n + len(fewer)]
    last2[fewer] = cycles[2 * n + len(fewer) :]
    return round1, hidden[:n], round2, hidden[n : 2 * n], last1, last2


def backward_perf(
    family: TritonFlashAttentionBackward,
    device: CudaDevice,
    problem: AttentionProblem,
    cfg: ConfigArrays,
    res: CudaResources,
) -> Perf:
    """Predicted time and its parts of every configuration (docs/model.md 12.3-12.4)."""
    tp = device.throughput
    k = model_constants(device)
    d, dv = family.kernel_head_dims(problem)
    elem = problem.dtype.bytes
    n_sm = tp.sm_count
    clock_hz = tp.boost_clock_mhz * 1e6
    m1 = cfg["block_m"].astype(np.float64)
    n1 = cfg["block_n"].astype(np.float64)
    m2 = cfg["dq_block_m"].astype(np.float64)
    n2 = cfg["dq_block_n"].astype(np.float64)
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    offset = sk - sq
    heads_total = problem.batch * problem.heads
    blocks = np.maximum(res.occupancy.blocks_per_sm, 1)
    blocks_f = blocks.astype(np.float64)
    slots = blocks * n_sm

    # ---- the two loops' blocks and iterations per head ------------------------------------
    n_kv1 = ceil_div(sk, cfg["block_n"])  # dK/dV loop: key blocks (programs), query steps
    n_m1 = ceil_div(sq, cfg["block_m"])
    n_m2 = ceil_div(sq, cfg["dq_block_m"])  # dQ loop: query blocks (programs), key steps
    n_kv2 = ceil_div(sk, cfg["dq_block_n"])
    programs = np.maximum(n_kv1, n_m2)
    ctas = programs * heads_total
    total1, diag1 = _loop_iterations(n_m1, m1, n1, n_kv1, offset, problem.causal)
    total2, diag2 = _loop_iterations(n_m2, m2, n2, n_kv2, offset, problem.causal)

    # ---- streamed operands and their L2 reuse ------------------------------------------------
    row_q = (d + dv) * elem + LSE_D_BYTES_PER_ROW  # Q, dO, M and D of one query row
    row_kv = (d + dv) * elem
    l2 = device.memory.l2_bytes
    reuse1 = streamed_reuse(
        problem, True, float(sq) * row_q, m1 * row_q, n_kv1, total1 / n_m1, slots, l2
    )
    reuse2 = streamed_reuse(
        problem, False, float(sk) * row_kv, n2 * row_kv, n_m2, total2 / n_kv2, slots, l2
    )

    # ---- one iteration of each loop ----------------------------------------------------------
    it1, it2 = loop_iterations(
        device,
        cfg,
        res,
        family.loop_tiles,
        (d, dv),
        elem,
        (reuse1.dram_fraction, reuse2.dram_fraction),
    )

    waves = wave_schedule(ctas, slots)
    last_blocks = np.minimum(blocks, ceil_div(waves.last_wave_ctas.astype(np.int64), n_sm))
    round1, overlap1, round2, overlap2, last1, last2 = _rounds(
        it1, it2, blocks, last_blocks, cfg["num_stages"], device
    )

    dram_share = dram_bytes_per_clk(device) / n_sm
    latency = tp.dram_latency_cycles
    pro1 = latency + n1 * row_kv / dram_share + it1.tile_load  # K and V, the first Q^T/dO
    epi1 = n1 * row_kv / dram_share  # dK and dV written
    pro2 = latency + m2 * row_q / dram_share + it2.tile_load  # Q, dO, M, D, the first K^T/V^T
    epi2 = m2 * d * elem / dram_share  # dQ written
    work = heads_total * (
        programs * k.block_start_cycles
        + n_kv1 * (pro1 + epi1)
        + total1 * round1
        + diag1 * it1.mask_extra
        + n_m2 * (pro2 + epi2)
        + total2 * round2
        + diag2 * it2.mask_extra
    )

    def program(p: FloatArray, r1: FloatArray, r2: FloatArray) -> FloatArray:
        """Cycles of program p: key block p's dK/dV loop and query block p's dQ loop."""
        has1 = p < n_kv1
        has2 = p < n_m2
        if problem.causal:
            first = np.clip(np.floor((p * n1 - offset) / m1), 0, n_m1)
            steps1 = n_m1 - first
            steps2 = np.clip(np.ceil(((p + 1) * m2 + offset) / n2), 0, n_kv2)
        else:
            steps1, steps2 = n_m1.astype(np.float64), n_kv2.astype(np.float64)
        loop1 = np.where(has1, pro1 + epi1 + steps1 * r1, 0.0)
        loop2 = np.where(has2, pro2 + epi2 + steps2 * r2, 0.0)
        return np.asarray(k.block_start_cycles + loop1 + loop2)

    # The program's length is piecewise linear in p: its maximum is at an end or a breakpoint.
    last_p = (programs - 1).astype(np.float64)
    points = [
        np.zeros_like(last_p),
        last_p,
        (n_kv1 - 1).astype(np.float64),
        (n_m2 - 1).astype(np.float64),
        np.ceil(offset / n1),
        np.floor((n_m1 * m1 + offset) / n1),
        np.floor(-offset / m2) - 1.0,
        np.ceil((n_kv2 * n2 - offset) / m2) - 1.0,
    ]
    # All the points at once: the rules are elementwise, a row per point.
    longest = np.max(program(np.clip(np.stack(points), 0.0, last_p), last1, last2), axis=0)
    full = program(np.zeros_like(last_p), round1, round2)
    last = program(np.zeros_like(last_p), last1, last2)
    equal = (not problem.causal) & (n_kv1 == n_m2)
    unequal_cycles = makespan_cycles(True, ctas, slots, waves, work, longest, full, last)
    equal_cycles = makespan_cycles(False, ctas, slots, waves, work, longest, full, last)
    cycles = np.where(equal, equal_cycles, unequal_cycles)

    # ---- DRAM traffic ------------------------------------------------------------------------
    group = problem.heads // problem.kv_heads_eff
    kv_reads = np.where(group * n_kv1 <= slots, 1.0, float(group))
    kv_head = float(sk) * row_kv
    q_head = float(sq) * row_q
    main_bytes = (
        problem.batch * problem.kv_heads_eff * kv_head * kv_reads  # K, V (dK/dV loop)
        + problem.batch * problem.kv_heads_eff * kv_head * reuse2.dram_reads_per_kv_head
        + heads_total * q_head * (1.0 + reuse1.dram_reads_per_kv_head)  # Q, dO, M, D
        + heads_total * (float(sk) * row_kv + float(sq) * d * elem)  # dK, dV, dQ written
    )
    dram_bound = main_bytes / dram_bytes_per_clk(device)
    cycles = np.maximum(cycles, dram_bound)
    main_us = cycles / clock_hz * 1e6 + k.kernel_launch_us

    pre_bytes = preprocess_bytes(problem, d, dv, clear_dq_accum=False)
    scale_bytes = 2.0 * problem.batch * problem.kv_heads_eff * float(sk) * d * elem
    reduce_bytes = gqa_reduce_bytes(problem, d, dv)
    helper_us = (
        bandwidth_kernel_us(device, pre_bytes)
        + bandwidth_kernel_us(device, scale_bytes)
        + bandwidth_kernel_us(device, reduce_bytes)
    )
    time_us = main_us + helper_us
    hbm_bytes = main_bytes + pre_bytes + scale_bytes + reduce_bytes

    flops = backward_flops(problem)
    weight1 = heads_total * total1 / n_sm
    weight2 = heads_total * total2 / n_sm
    tensor_total = weight1 * it1.tensor + weight2 * it2.tensor
    compute_total = (weight1 * it1.compute + weight2 * it2.compute) / blocks_f
    load_total = (weight1 * it1.tile_load + weight2 * it2.tile_load) / blocks_f
    overlap = (total1 * overlap1 + total2 * overlap2) / (total1 + total2)
    pipes = [
        total1 * getattr(it1, name) + total2 * getattr(it2, name)
        for name in ("tensor", "smem", "sfu", "alu", "issue")
    ]
    unit = triton_matrix_unit(device)
    load_bound = (round1 > blocks_f * it1.compute * 1.0001) | (
        round2 > blocks_f * it2.compute * 1.0001
    )
    bottleneck = bottleneck_words(
        pipes,
        (unit, *BACKWARD_PIPE_WORDS),
        "tile load latency",
        load_bound,
        cycles,
        dram_bound,
        waves.exact,
    )
    computed_pairs = total2 * m2 * n2  # the dQ loop covers each kept pair once, as the dK/dV
    return sm_perf(
        problem,
        flops=flops,
        time_us=time_us,
        clock_hz=clock_hz,
        hbm_bytes=hbm_bytes,
        waves=waves,
        computed_pairs=computed_pairs,
        compute_cycles=compute_total,
        load_cycles=load_total,
        tensor_cycles=tensor_total,
        overlap=overlap,
        bottleneck=bottleneck,
        figures={
            "dkdv_iteration_compute_cycles": it1.compute,
            "dkdv_iteration_tensor_cycles": it1.tensor,
            "dkdv_iteration_smem_cycles": it1.smem,
            "dkdv_tile_load_cycles": it1.tile_load,
            "dq_iteration_compute_cycles": it2.compute,
            "dq_iteration_tensor_cycles": it2.tensor,
            "dq_iteration_smem_cycles": it2.smem,
            "dq_tile_load_cycles": it2.tile_load,
            "q_dram_fraction": reuse1.dram_fraction,
            "kv_dram_fraction": reuse2.dram_fraction,
            "main_kernel_us": main_us,
            "helper_kernels_us": np.full(len(cfg), helper_us),
        },
    )
