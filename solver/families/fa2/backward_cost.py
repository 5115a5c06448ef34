"""The cost model of FlashAttention-2's backward kernel (`fa2`, backward): one iteration of the
K/V block's loop over the query blocks on the SM's pipes, the Q/dO stream's L2 reuse, the dQ
accumulator's fp32 atomics, the waves of key blocks over the SMs, and the helper kernels
(preprocess, dQ conversion, GQA reduction). Formulas, units and sources: docs/model.md
section 12.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import (
    Perf,
    wave_schedule,
)
from ...hardware import CudaDevice
from ...model_constants import model_constants
from ...problem import AttentionProblem
from ...space import ConfigArrays, FloatArray, ceil_div
from ..cuda.backward import (
    BACKWARD_PIPE_WORDS,
    BWD_ALU_OPS_PER_SCORE,
    BWD_ELEMENTWISE_CHAIN_CYCLES,
    BWD_INSTRUCTION_LEVEL_PARALLELISM,
    LSE_D_BYTES_PER_ROW,
    backward_flops,
    bandwidth_kernel_us,
    chain,
    dq_accumulator_dram_bytes,
    gqa_reduce_bytes,
    key_block_iterations,
    loop_iteration,
    preprocess_bytes,
    query_stream_reuse,
    resident_kv_bytes,
)
from ..cuda.resources import CudaResources
from ..cuda.timing import (
    DROPOUT_OPS_PER_SCORE,
    MMA_K,
    bottleneck_words,
    dram_bytes_per_clk,
    makespan_cycles,
    round_cycles,
    sm_perf,
)
from .release import kernel_head_dim_column

if TYPE_CHECKING:
    from .backward import FlashAttention2Backward

FP32_BYTES = 4


def tile_columns(cfg: ConfigArrays) -> tuple[FloatArray, ...]:
    """block_m, block_n, num_warps and the three warp layouts (S/dP, dK/dV, dQ) as floats."""
    tile = ("block_m", "block_n", "num_warps")
    layouts = ("atom_layout_m_sdp", "atom_layout_n_dkv", "atom_layout_m_dq")
    return tuple(cfg[name].astype(np.float64) for name in (*tile, *layouts))


def backward_perf(
    family: FlashAttention2Backward,
    device: CudaDevice,
    problem: AttentionProblem,
    cfg: ConfigArrays,
    res: CudaResources,
) -> Perf:
    """Predicted time and its parts of every configuration (docs/model.md 12.3-12.4)."""
    tp = device.throughput
    k = model_constants(device)
    # each configuration's kernel head dim (release.py) for the tile's work; the current
    # release's for the stored rows and the helper kernels
    d = dv = kernel_head_dim_column(cfg, problem).astype(np.float64)
    helper_d, helper_dv = family.kernel_head_dims(problem)
    elem = problem.dtype.bytes
    n_sm = tp.sm_count
    clock_hz = tp.boost_clock_mhz * 1e6
    bm, bn, w, am, an, amq = tile_columns(cfg)
    v_in_regs = cfg["is_v_in_regs"].astype(np.float64)
    single_q = cfg["no_double_buffer"].astype(np.float64)
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    heads_total = problem.batch * problem.heads
    blocks = np.maximum(res.occupancy.blocks_per_sm, 1)
    blocks_f = blocks.astype(np.float64)

    n_m = ceil_div(sq, cfg["block_m"])
    n_kv = ceil_div(sk, cfg["block_n"])
    ctas = n_kv * heads_total
    slots = blocks * n_sm

    # ---- iterations: the (query block, key block) pairs with unmasked scores ----------------
    total_iters, diag_iters, max_iters = key_block_iterations(problem, n_m, bm, bn, n_kv)
    diag_mean = diag_iters / n_kv

    # ---- the streamed Q, dO, LSE and D: L2 reuse across the key blocks of a head ------------
    # (bytes of the stored rows: the problem's, whichever kernel loads them)
    row_bytes = (helper_d + helper_dv) * elem + LSE_D_BYTES_PER_ROW
    tile_bytes = bm * row_bytes
    reuse = query_stream_reuse(
        problem, device, row_bytes, tile_bytes, n_kv, total_iters / n_m, slots
    )

    # ---- one iteration ---------------------------------------------------------------------
    rate = tp.tensor_flops_per_clk_per_sm(elem) * tp.mma_sync_efficiency
    sdp_cols = w / am  # warps splitting block_n in S and dP
    dkv_cols = w / an
    dq_cols = w / amq
    operand_reads = (
        sdp_cols * bm * d
        + am * bn * d  # S = Q K^T: Q per warp column, K per warp row
        + sdp_cols * bm * dv
        + (1.0 - v_in_regs) * am * bn * dv  # dP = dO V^T
        + dkv_cols * bn * bm
        + an * bm * dv  # dV = P^T dO
        + dkv_cols * bn * bm
        + an * bm * d  # dK = dS^T Q
        + dq_cols * bm * bn
        + amq * bn * d  # dQ = dS K
    )
    tile_writes = bm * (d + dv) + 2.0 * bm * bn  # Q and dO arrive; P and dS are stored
    scores = bm * bn
    alu_ops = scores * (
        BWD_ALU_OPS_PER_SCORE + (DROPOUT_OPS_PER_SCORE if problem.dropout > 0 else 0.0)
    )
    atomic_bytes = bm * d * FP32_BYTES
    k_steps = (np.maximum(d, dv) + bm + np.maximum(bm, bn)) / MMA_K  # S|dP, then dV, then dQ|dK
    it = loop_iteration(
        device,
        w,
        blocks_f,
        np.full(len(cfg), BWD_INSTRUCTION_LEVEL_PARALLELISM),
        matrix_flops=2.0 * bm * bn * (3.0 * d + 2.0 * dv),
        matrix_rate=np.full(len(cfg), rate),
        smem_bytes=(operand_reads + tile_writes) * elem,
        spill_regs=res.spill_regs,
        scores=scores,
        alu_ops=alu_ops,
        extra_issue=atomic_bytes / FP32_BYTES / 32.0,  # one RED per warp per 32 floats
        chain_cycles=chain(k_steps, BWD_ELEMENTWISE_CHAIN_CYCLES, 3.0 + single_q, device),
        tile_bytes=tile_bytes,
        atomic_bytes=atomic_bytes,
        dram_miss=reuse.dram_fraction,
    )
    # The next dO load is issued after the dV GEMM, so the dQ and dK GEMMs hide it; without
    # double buffering the next Q load is issued after the dK GEMM and nothing hides it.
    hidden = (1.0 - single_q) * 2.0 * d / (3.0 * d + 2.0 * dv)
    serial = np.maximum(it.compute, (1.0 - hidden) * it.compute + it.tile_load)

    def rounds(resident: FloatArray) -> tuple[FloatArray, FloatArray]:
        return round_cycles(it.compute, serial, it.l2_bytes, it.tile_load, resident, device)

    round_full, overlap = rounds(blocks_f)
    dram_share = dram_bytes_per_clk(device) / n_sm
    kv_block_bytes = bn * (d + dv) * elem
    prologue = k.block_start_cycles + tp.dram_latency_cycles + kv_block_bytes / dram_share
    prologue = prologue + it.tile_load
    epilogue = kv_block_bytes / dram_share  # dK and dV written once

    def duration(iters: FloatArray, diag: FloatArray, per_round: FloatArray) -> FloatArray:
        return prologue + epilogue + iters * per_round + diag * it.mask_extra

    waves = wave_schedule(ctas, slots)
    last_blocks = np.minimum(blocks, ceil_div(waves.last_wave_ctas.astype(np.int64), n_sm))
    round_last, _ = rounds(last_blocks.astype(np.float64))
    if problem.causal:
        work = heads_total * (
            n_kv * (prologue + epilogue) + total_iters * round_full + diag_iters * it.mask_extra
        )
        longest = duration(max_iters, np.minimum(diag_mean * 2, max_iters), round_last)
        cycles = makespan_cycles(True, ctas, slots, waves, work, longest, longest, longest)
    else:
        full = duration(max_iters, diag_mean, round_full)
        last = duration(max_iters, diag_mean, round_last)
        cycles = makespan_cycles(False, ctas, slots, waves, full * ctas, last, full, last)

    # ---- DRAM traffic of the main kernel ------------------------------------------------------
    kv_bytes = resident_kv_bytes(problem, d, dv, n_kv, slots)
    q_bytes = problem.batch * problem.heads * float(sq) * row_bytes * reuse.dram_reads_per_kv_head
    dkdv_bytes = float(heads_total) * sk * (d + dv) * elem
    dq_bytes, atomic_total = dq_accumulator_dram_bytes(
        problem, d, total_iters, atomic_bytes, n_kv, slots, device.memory.l2_bytes
    )
    main_bytes = kv_bytes + q_bytes + dkdv_bytes + dq_bytes
    dram_bound = main_bytes / dram_bytes_per_clk(device)
    cycles = np.maximum(cycles, dram_bound)
    main_us = cycles / clock_hz * 1e6 + k.kernel_launch_us

    # ---- the helper kernels -----------------------------------------------------------------
    pre_bytes = preprocess_bytes(problem, helper_d, helper_dv, clear_dq_accum=True)
    convert_bytes = float(heads_total) * sq * helper_d * (FP32_BYTES + elem)
    reduce_bytes = gqa_reduce_bytes(problem, helper_d, helper_dv)
    pre_us = bandwidth_kernel_us(device, pre_bytes)
    convert_us = bandwidth_kernel_us(device, convert_bytes)
    helper_us = pre_us + convert_us + bandwidth_kernel_us(device, reduce_bytes)
    time_us = main_us + helper_us
    hbm_bytes = main_bytes + pre_bytes + convert_bytes + reduce_bytes

    flops = backward_flops(problem)
    computed_pairs = total_iters * bm * bn
    tensor_total = heads_total * total_iters * it.tensor / n_sm
    compute_total = heads_total * total_iters * it.compute / blocks_f / n_sm
    load_total = heads_total * total_iters * it.tile_load / blocks_f / n_sm
    bottleneck = bottleneck_words(
        [it.tensor, it.smem, it.sfu, it.alu, it.issue],
        ("tensor cores", *BACKWARD_PIPE_WORDS),
        "Q/dO load latency",
        round_full > blocks_f * it.compute * 1.0001,
        cycles,
        dram_bound,
        waves.exact,
    )
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
            "iteration_compute_cycles": it.compute,
            "iteration_tensor_cycles": it.tensor,
            "iteration_smem_cycles": it.smem,
            "iteration_sfu_cycles": it.sfu,
            "iteration_alu_cycles": it.alu,
            "iteration_issue_cycles": it.issue,
            "tile_load_cycles": it.tile_load,
            "q_dram_fraction": reuse.dram_fraction,
            "atomic_l2_share": 1.0 - it.tile_bytes / it.l2_bytes,
            "dq_atomic_bytes": np.asarray(atomic_total, dtype=np.float64),
            "main_kernel_us": main_us,
            "helper_kernels_us": np.full(len(cfg), helper_us),
        },
    )
