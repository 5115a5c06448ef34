"""The cost model of FlashAttention-3's backward kernel (`fa3`, backward): one iteration of a
key block's loop over the query blocks on wgmma and the shared-memory pipe, the exposed
elementwise work, the Q/dO ring, the dQ reduce-adds' L2 traffic, the CTAs over the SMs
(waves; longest first under a causal mask), and the preprocess and postprocess kernels.
Formulas, constants and sources: docs/model.md section 17.

Per iteration of one CTA (block_m query rows against the CTA's block_n keys), SM cycles:

    T = 10 bm bn d / R_tc                 the five GEMMs (S, dP, dV, dK, dQ) on wgmma
    S = smem bytes / R_smem               operand reads of the SS wgmmas (A once per warpgroup
                                          column, B once per warpgroup row), P and dS stored,
                                          Q and dO arriving, dQ staged for the reduce-add
    G = T + S - 2 psi T S / (T + S)       the tensor and shared-memory pipes, partly overlapped
    X = exp not hidden by the dP GEMM + FP32 elementwise (+ the mask)
    C = G + X + F                         F: wgmma waits, named barriers, pipeline waits
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import Perf, wave_schedule
from ...hardware import CudaDevice
from ...model_constants import model_constants
from ...problem import AttentionProblem
from ...space import ConfigArrays, FloatArray, ceil_div
from ..cuda.backward import (
    ATOMIC_L2_BYTES_PER_BYTE,
    BWD_ALU_OPS_PER_SCORE,
    LSE_D_BYTES_PER_ROW,
    backward_flops,
    bandwidth_kernel_us,
    dq_accumulator_dram_bytes,
    key_block_iterations,
    preprocess_bytes,
    query_stream_reuse,
    resident_kv_bytes,
)
from ..cuda.timing import (
    MASK_OPS_PER_SCORE,
    bottleneck_words,
    dram_bytes_per_clk,
    l2_bytes_per_clk_per_sm,
    makespan_cycles,
    sm_perf,
    tile_load_cycles,
)
from .backward_shape import SEPARATE_MASKING_MAX_HEAD_DIM, BackwardStructure

if TYPE_CHECKING:
    from ...candidates import CandidateTable

# ---- model constants (docs/model.md 18.4) --------------------------------------------------
GEMMS = 5  # S = QK^T, dP = dO V^T, dV = P^T dO, dK = dS^T Q, dQ = dS K
# How much of the shared-memory pipe's time overlaps the tensor pipe's: G = T + S - 2 psi T S /
# (T + S), psi = 1 perfect (the larger of the two, where they are equal), 0 none. The wgmma
# operands of the SS GEMMs, P and dS, and the dQ staging all go through the same 128 B/clk.
# Calibrated with BWD_ITERATION_FIXED_CYCLES on the FA3 paper's backward throughput (head
# dims 64 and 128 at 16k tokens; docs/model.md 18.5).
PSI_TENSOR_SMEM = 0.6
# Per iteration: the four wgmma waits, the pipeline waits for Q and dO, the named-barrier
# arrivals (calibrated with PSI_TENSOR_SMEM).
BWD_ITERATION_FIXED_CYCLES = 500.0
FP32_BYTES = 4
# The share of an iteration after dO is released (the dK GEMM): with one dO stage the next dO
# load starts there.
GEMMS_AFTER_DO_RELEASE = 1
# The pipes of an iteration, in the words of the bottleneck.
PIPE_WORDS = (
    "tensor cores (wgmma)",
    "shared-memory bandwidth (wgmma operands, P/dS, dQ staging)",
    "exp and elementwise math between the GEMMs",
    "per-iteration overhead (wgmma waits, barriers)",
)
FIGURE_NAMES = (
    "iteration_tensor_cycles",
    "iteration_smem_cycles",
    "iteration_elementwise_cycles",
    "iteration_cycles",
    "tile_load_cycles",
    "q_dram_fraction",
    "dq_reduce_l2_share",
    "dq_atomic_bytes",
    "main_kernel_us",
    "helper_kernels_us",
)


def gemm_reads(
    a: FloatArray, b: FloatArray, wg_m: FloatArray, wg_n: FloatArray, a_in_regs: FloatArray
) -> FloatArray:
    """Shared-memory elements one GEMM reads on a warpgroup grid: its A operand once per
    warpgroup along N (unless A comes from registers), B once per warpgroup along M."""
    return np.asarray(wg_n * a * (1.0 - a_in_regs) + wg_m * b)


def smem_elements(cfg: ConfigArrays, d: float, structure: BackwardStructure) -> FloatArray:
    """Elements of one iteration's wgmma operand reads and P/dS stores (docs/model.md 18.3)."""
    bm = cfg["block_m"].astype(np.float64)
    bn = cfg["block_n"].astype(np.float64)
    sdp_swap = cfg["sdp_swap_ab"] == 1
    dkv_swap = cfg["dkv_swap_ab"] == 1
    dq_swap = cfg["dq_swap_ab"] == 1
    v_regs = cfg["v_in_regs"].astype(np.float64)
    dkv_rs = structure.mma_dkv_rs.astype(np.float64)
    dq_rs = structure.mma_dq_rs.astype(np.float64)
    none = np.zeros(len(cfg))
    sm, sn = structure.sdp.wg_m.astype(np.float64), structure.sdp.wg_n.astype(np.float64)
    km, kn = structure.dkv.wg_m.astype(np.float64), structure.dkv.wg_n.astype(np.float64)
    qm, qn = structure.dq.wg_m.astype(np.float64), structure.dq.wg_n.astype(np.float64)
    q_tile, kv_tile, scores = bm * d, bn * d, bm * bn
    # S = Q K^T (swapped: K Q^T) and dP = dO V^T (swapped: V dO^T, V from registers if held)
    s = np.where(
        sdp_swap,
        gemm_reads(kv_tile, q_tile, sm, sn, none),
        gemm_reads(q_tile, kv_tile, sm, sn, none),
    )
    dp = np.where(
        sdp_swap,
        gemm_reads(kv_tile, q_tile, sm, sn, v_regs),
        gemm_reads(q_tile, kv_tile, sm, sn, none),
    )
    # dV = P^T dO and dK = dS^T Q (swapped: dO^T P and Q^T dS); P^T and dS^T from registers
    # when RS
    dkv = 2.0 * np.where(
        dkv_swap,
        gemm_reads(q_tile, scores, km, kn, none),
        gemm_reads(scores, q_tile, km, kn, dkv_rs),
    )
    # dQ = dS K (swapped: K^T dS^T); dS from registers when RS
    dq = np.where(
        dq_swap,
        gemm_reads(kv_tile, scores, qm, qn, none),
        gemm_reads(scores, kv_tile, qm, qn, dq_rs),
    )
    stores = scores * (2.0 - dkv_rs)  # dS always (dQ reads it), P unless dK/dV are RS
    return np.asarray(s + dp + dkv + dq + stores)


def named_barriers(cfg: ConfigArrays, structure: BackwardStructure) -> FloatArray:
    """Named-barrier syncs of the consumers per iteration (mainloop lines 903-937): after dS
    is stored; before P is stored unless dK/dV are RS with two dS stages; one more before P
    with one dS stage; the dQ buffer's handshake with the storing warp."""
    one_ds = cfg["stages_ds"] == 1
    rs = structure.mma_dkv_rs
    before_p = (~rs) | one_ds
    extra = one_ds & ~rs
    handshake = 1.0 if structure.dq_through_smem else 0.0
    return np.asarray(1.0 + before_p + extra + handshake, dtype=np.float64)


def backward_perf(
    device: CudaDevice,
    problem: AttentionProblem,
    cfg: ConfigArrays,
    structure: BackwardStructure,
    head_dim: int,
) -> Perf:
    """Predicted time and its parts of every configuration (docs/model.md 18.3-18.4)."""
    tp = device.throughput
    k = model_constants(device)
    elem = problem.dtype.bytes
    d = float(head_dim)
    n_sm = tp.sm_count
    clock_hz = tp.boost_clock_mhz * 1e6
    bm = cfg["block_m"].astype(np.float64)
    bn = cfg["block_n"].astype(np.float64)
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    heads_total = problem.batch * problem.heads
    n_m = ceil_div(sq, cfg["block_m"])
    n_kv = ceil_div(sk, cfg["block_n"])
    ctas = n_kv * heads_total
    slots = np.full(len(cfg), n_sm, dtype=np.int64)  # one CTA per SM

    # ---- iterations: the (query block, key block) pairs with unmasked scores ----------------
    total_iters, diag_iters, max_iters = key_block_iterations(problem, n_m, bm, bn, n_kv)
    masked = diag_iters  # zero without a mask; above head dim 64 every iteration masks
    if problem.causal and head_dim > SEPARATE_MASKING_MAX_HEAD_DIM:
        masked = total_iters

    # ---- the streamed Q, dO, LSE and dPsum: L2 reuse across the key blocks of a head ----------
    row_bytes = 2.0 * d * elem + LSE_D_BYTES_PER_ROW
    tile_bytes = bm * row_bytes
    reuse = query_stream_reuse(
        problem, device, row_bytes, tile_bytes, n_kv, total_iters / n_m, slots
    )
    tile_load = tile_load_cycles(device, tile_bytes, reuse.dram_fraction)

    # ---- one iteration -----------------------------------------------------------------------
    rate = tp.tensor_flops_per_clk_per_sm(elem)
    gemm = 2.0 * bm * bn * d / rate
    tensor = GEMMS * gemm
    dq_bytes = bm * d * FP32_BYTES
    # dQ staged in shared memory and read back by the TMA reduce-add; at head dim 256 the
    # consumers' fp32 atomics pass through the same L1/shared-memory data path once
    dq_smem = (2.0 if structure.dq_through_smem else 1.0) * dq_bytes
    smem_bytes = smem_elements(cfg, d, structure) * elem + tile_bytes + dq_smem
    smem = smem_bytes / tp.smem_bandwidth_bytes_per_clk_per_sm
    pipes = tensor + smem - 2.0 * PSI_TENSOR_SMEM * tensor * smem / (tensor + smem)
    scores = bm * bn
    sfu = scores / tp.sfu_ops_per_clk_per_sm
    alu = scores * BWD_ALU_OPS_PER_SCORE / tp.fp32_ops_per_clk_per_sm
    elementwise = np.maximum(sfu - gemm, 0.0) + alu  # the exp runs under the dP GEMM
    fixed = BWD_ITERATION_FIXED_CYCLES + named_barriers(cfg, structure) * tp.barrier_cycles
    compute = pipes + elementwise + fixed
    mask_extra = scores * MASK_OPS_PER_SCORE / tp.fp32_ops_per_clk_per_sm
    # The ring: two dO stages load the next dO during this iteration; with one, the next dO
    # starts when this one is released, before the dK GEMM.
    two_do = cfg["stages_do"] == 2
    tail = GEMMS_AFTER_DO_RELEASE * pipes / GEMMS
    ring = np.where(two_do, (compute + tile_load) / 2.0, compute - tail + tile_load)
    l2_bytes = tile_bytes + ATOMIC_L2_BYTES_PER_BYTE * dq_bytes
    l2_share = l2_bytes_per_clk_per_sm(device)
    per_iteration = np.maximum.reduce([compute, ring, l2_bytes / l2_share])
    idle = np.maximum(0.0, per_iteration - compute)
    overlap = np.clip(1.0 - idle / tile_load, 0.0, 1.0)

    # ---- one CTA: K and V in, the loop, dK and dV out ----------------------------------------
    dram_share = dram_bytes_per_clk(device) / n_sm
    kv_block_bytes = 2.0 * bn * d * elem
    v_copy = cfg["v_in_regs"] * bn * d * elem / tp.smem_bandwidth_bytes_per_clk_per_sm
    prologue = (
        k.block_start_cycles
        + tp.dram_latency_cycles
        + kv_block_bytes / dram_share
        + tile_load
        + v_copy
    )
    gqa = problem.kv_heads_eff != problem.heads
    if gqa:  # fp32 dK and dV added into the KV head's accumulators through L2
        epilogue = ATOMIC_L2_BYTES_PER_BYTE * 2.0 * bn * d * FP32_BYTES / l2_share
    else:  # converted, staged in shared memory, stored by TMA
        epilogue = kv_block_bytes / tp.smem_bandwidth_bytes_per_clk_per_sm + (
            kv_block_bytes / dram_share
        )

    def duration(iters: FloatArray, masked_iters: FloatArray) -> FloatArray:
        return np.asarray(prologue + epilogue + iters * per_iteration + masked_iters * mask_extra)

    waves = wave_schedule(ctas, slots)
    if problem.causal:
        work = heads_total * (
            n_kv * (prologue + epilogue) + total_iters * per_iteration + masked * mask_extra
        )
        longest_masked = np.minimum(masked / n_kv * 2.0, max_iters)
        if head_dim > SEPARATE_MASKING_MAX_HEAD_DIM:
            longest_masked = max_iters
        longest = duration(max_iters, longest_masked)
        cycles = makespan_cycles(True, ctas, slots, waves, work, longest, longest, longest)
    else:
        full = duration(max_iters, masked)
        cycles = makespan_cycles(False, ctas, slots, waves, full * ctas, full, full, full)

    # ---- DRAM traffic of the main kernel -------------------------------------------------------
    kv_bytes = resident_kv_bytes(problem, d, d, n_kv, slots)
    q_bytes = float(heads_total) * sq * row_bytes * reuse.dram_reads_per_kv_head
    if gqa:  # the fp32 accumulators, read and written
        dkdv_bytes = 2.0 * problem.batch * problem.kv_heads_eff * float(sk) * 2.0 * d * FP32_BYTES
    else:
        dkdv_bytes = float(heads_total) * sk * 2.0 * d * elem
    dq_dram, atomic_total = dq_accumulator_dram_bytes(
        problem, d, total_iters, dq_bytes, n_kv, slots, device.memory.l2_bytes
    )
    main_bytes = kv_bytes + q_bytes + dkdv_bytes + dq_dram
    dram_bound = main_bytes / dram_bytes_per_clk(device)
    cycles = np.maximum(cycles, dram_bound)
    main_us = cycles / clock_hz * 1e6 + k.kernel_launch_us

    # ---- preprocess (dPsum, LSE in log2, zeroed accumulator) and postprocess (dQ; GQA dK/dV)
    rows = float(heads_total) * sq
    pre_bytes = preprocess_bytes(problem, head_dim, head_dim, clear_dq_accum=True) + (
        LSE_D_BYTES_PER_ROW * rows
    )
    post_bytes = rows * d * (FP32_BYTES + elem)
    pre_us = bandwidth_kernel_us(device, pre_bytes)
    helper_us = pre_us + bandwidth_kernel_us(device, post_bytes)
    kv_post_bytes = 0.0
    if gqa:
        kv_post_bytes = (
            2.0 * problem.batch * problem.kv_heads_eff * float(sk) * d * (FP32_BYTES + elem)
        )
        helper_us += 2.0 * bandwidth_kernel_us(device, kv_post_bytes / 2.0)
    time_us = main_us + helper_us
    hbm_bytes = main_bytes + pre_bytes + post_bytes + kv_post_bytes

    bottleneck = bottleneck_words(
        [tensor, smem, elementwise, fixed],
        PIPE_WORDS,
        "Q/dO load latency or L2 bandwidth",
        per_iteration > compute * 1.0001,
        cycles,
        dram_bound,
        waves.exact,
    )
    tensor_total = heads_total * total_iters * tensor / n_sm
    return sm_perf(
        problem,
        flops=backward_flops(problem),
        time_us=time_us,
        clock_hz=clock_hz,
        hbm_bytes=hbm_bytes,
        waves=waves,
        computed_pairs=total_iters * scores,
        compute_cycles=heads_total * total_iters * compute / n_sm,
        load_cycles=heads_total * total_iters * tile_load / n_sm,
        tensor_cycles=tensor_total,
        overlap=overlap,
        bottleneck=bottleneck,
        figures=dict(
            zip(
                FIGURE_NAMES,
                (
                    tensor,
                    smem,
                    elementwise,
                    per_iteration,
                    tile_load,
                    reuse.dram_fraction,
                    1.0 - tile_bytes / l2_bytes,
                    np.asarray(atomic_total, dtype=np.float64),
                    main_us,
                    np.full(len(cfg), helper_us),
                ),
                strict=True,
            )
        ),
    )


def structure_words(table: CandidateTable, i: int) -> str:
    """The GEMM layouts of configuration i in words."""
    cfg = table.cfg

    def group(name: str, swap: str, split: str, along: str) -> str:
        swapped = "swapAB" if cfg[swap][i] else "not swapped"
        side = along if cfg[split][i] else "the other side"
        return f"{name} {swapped}, warpgroups split {side}"

    return "; ".join(
        (
            group("S/dP", "sdp_swap_ab", "sdp_split_m", "block_m"),
            group("dK/dV", "dkv_swap_ab", "dkv_split_n", "block_n"),
            group("dQ", "dq_swap_ab", "dq_split_m", "block_m"),
        )
    )
