"""The cost of FlexAttention's backward template (`flex_attention_backward`): one launch whose
programs play one of two roles (reference/flex_attention.md section 6). A dK/dV program holds
BLOCK_N1 keys of one KV head and walks, for each query head of the GQA group, the query blocks
the block mask's transposed indices list, BLOCK_M1 rows per iteration; a dQ program holds
BLOCK_M2 query rows of one query head and walks the listed K/V blocks, BLOCK_N2 keys per
iteration. Each role's iteration is costed on the SM's pipes as the other CUDA backward models
cost theirs (`cuda.backward.loop_iteration`), its round with Triton's pipeline
(`triton_compiler.pipeline.stage_round`), and the programs are scheduled over the SMs as blocks
of unequal length. No atomics: each role writes its own gradients (dK, dV per query head of the
group summed inside the program; dQ per query head). A preprocessing kernel computes Delta =
rowsum(O o dO). Formulas: docs/model.md section 20.
"""

from __future__ import annotations

import numpy as np

from ...cost import Perf, wave_schedule
from ...hardware import CudaDevice
from ...model_constants import model_constants
from ...problem import AttentionProblem, SolveOptions
from ...space import ConfigArrays, FloatArray, ceil_div
from ..cuda.backward import (
    BACKWARD_PIPE_WORDS,
    LSE_D_BYTES_PER_ROW,
    LoopIteration,
    backward_flops,
    bandwidth_kernel_us,
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
from ..triton_cuda.forward import device_stage_round
from .mask import block_counts, has_mask
from .precision import dots_on_fma
from .template import flex_head_dims

BACKWARD_TILES = ("block_m1", "block_n1", "block_m2", "block_n2")


def _pairs(problem: AttentionProblem, options: SolveOptions) -> tuple[float, float, float, int]:
    """(query block, K/V block) pairs the block mask lists, those partial, the most one block
    lists (per query head), and the block size; without a mask every pair, none partial."""
    counts = block_counts(problem, options)
    listed = counts.nonempty + counts.last_nonempty
    partial = counts.partial + counts.last_partial
    if not has_mask(problem, options):
        partial = 0.0
    return listed, partial * counts.mask_weight, counts.most, counts.size


def flex_backward_perf(
    device: CudaDevice,
    problem: AttentionProblem,
    options: SolveOptions,
    cfg: ConfigArrays,
    res: CudaResources,
) -> Perf:
    """Predicted time and its parts of every configuration (docs/model.md 20.4)."""
    tp = device.throughput
    k = model_constants(device)
    d, dv = flex_head_dims(problem)
    elem = problem.dtype.bytes
    n_sm = tp.sm_count
    clock_hz = tp.boost_clock_mhz * 1e6
    m1 = cfg["block_m1"].astype(np.float64)
    n1 = cfg["block_n1"].astype(np.float64)
    m2 = cfg["block_m2"].astype(np.float64)
    n2 = cfg["block_n2"].astype(np.float64)
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    group = problem.heads // problem.kv_heads_eff
    heads_total = problem.batch * problem.heads
    kv_heads_total = problem.batch * problem.kv_heads_eff
    blocks = np.maximum(res.occupancy.blocks_per_sm, 1)
    blocks_f = blocks.astype(np.float64)
    slots = blocks * n_sm
    mod_ops = options.score_mod_ops or 0.0

    # ---- programs and iterations per query head ------------------------------------------
    n_kv1 = ceil_div(sk, cfg["block_n1"])  # dK/dV programs per KV head
    n_m2 = ceil_div(sq, cfg["block_m2"])  # dQ programs per query head
    listed, partial, most, size = _pairs(problem, options)
    total1 = listed * (size / n1) * (size / m1)  # per query head
    total2 = listed * (size / m2) * (size / n2)
    diag1 = partial * (size / n1) * (size / m1)
    diag2 = partial * (size / m2) * (size / n2)
    if not has_mask(problem, options):
        total1 = (n_kv1 * ceil_div(sq, cfg["block_m1"])).astype(np.float64)
        total2 = (n_m2 * ceil_div(sk, cfg["block_n2"])).astype(np.float64)
    steps1 = np.minimum(most * size / m1, ceil_div(sq, cfg["block_m1"]))  # one program, one head
    steps2 = np.minimum(most * size / n2, ceil_div(sk, cfg["block_n2"]))
    ctas = n_kv1 * kv_heads_total + n_m2 * heads_total

    # ---- streamed operands and their L2 reuse --------------------------------------------
    row_q = (d + dv) * elem + LSE_D_BYTES_PER_ROW  # Q, dO, LSE and Delta of one query row
    row_kv = (d + dv) * elem
    l2 = device.memory.l2_bytes
    reuse1 = streamed_reuse(
        problem,
        True,
        float(sq) * row_q,
        m1 * row_q,
        n_kv1,
        total1 / np.maximum(n_kv1, 1),
        slots,
        l2,
    )
    reuse2 = streamed_reuse(
        problem,
        False,
        float(sk) * row_kv,
        n2 * row_kv,
        n_m2,
        total2 / np.maximum(n_m2, 1),
        slots,
        l2,
    )

    # ---- one iteration of each role (the mod and its gradient: twice its ops) ---------------
    it1, it2 = loop_iterations(
        device,
        cfg,
        res,
        BACKWARD_TILES,
        (d, dv),
        elem,
        (reuse1.dram_fraction, reuse2.dram_fraction),
        extra_alu_per_score=2.0 * mod_ops,
        fma=dots_on_fma(cfg),
    )

    def rounds(it: LoopIteration, resident: FloatArray) -> tuple[FloatArray, FloatArray]:
        return device_stage_round(
            it.compute, it.tile_load, it.l2_bytes, resident, cfg["num_stages"], device
        )

    round1, overlap1 = rounds(it1, blocks_f)
    round2, overlap2 = rounds(it2, blocks_f)

    dram_share = dram_bytes_per_clk(device) / n_sm
    latency = tp.dram_latency_cycles
    pro1 = latency + n1 * row_kv / dram_share + it1.tile_load  # K, V, the first Q^T/dO
    epi1 = n1 * row_kv / dram_share  # dK, dV written
    pro2 = latency + m2 * row_q / dram_share + it2.tile_load  # Q, dO, LSE, Delta, first K^T/V^T
    epi2 = m2 * d * elem / dram_share  # dQ written
    work = (
        ctas * k.block_start_cycles
        + kv_heads_total * n_kv1 * (pro1 + epi1)
        + heads_total * (total1 * round1 + diag1 * it1.mask_extra)
        + heads_total * (n_m2 * (pro2 + epi2) + total2 * round2 + diag2 * it2.mask_extra)
    )
    longest = k.block_start_cycles + np.maximum(
        pro1 + epi1 + group * steps1 * round1, pro2 + epi2 + steps2 * round2
    )
    waves = wave_schedule(ctas, slots)
    cycles = makespan_cycles(True, ctas, slots, waves, work, longest, longest, longest)

    # ---- DRAM traffic --------------------------------------------------------------------
    kv_head = float(sk) * row_kv
    q_head = float(sq) * row_q
    main_bytes = (
        kv_heads_total * kv_head  # K, V (dK/dV role, once per KV head)
        + kv_heads_total * kv_head * reuse2.dram_reads_per_kv_head  # K, V (dQ role)
        + heads_total * q_head * (1.0 + reuse1.dram_reads_per_kv_head)  # Q, dO, LSE, Delta
        + kv_heads_total * kv_head
        + heads_total * float(sq) * d * elem  # dK, dV, dQ written
    )
    dram_bound = main_bytes / dram_bytes_per_clk(device)
    cycles = np.maximum(cycles, dram_bound)
    main_us = cycles / clock_hz * 1e6 + k.kernel_launch_us
    pre_bytes = preprocess_bytes(problem, d, dv, clear_dq_accum=False)
    helper_us = bandwidth_kernel_us(device, pre_bytes)
    time_us = main_us + helper_us

    weight1 = heads_total * total1 / n_sm
    weight2 = heads_total * total2 / n_sm
    pipes = [
        total1 * getattr(it1, name) + total2 * getattr(it2, name)
        for name in ("tensor", "smem", "sfu", "alu", "issue")
    ]
    load_bound = (round1 > blocks_f * it1.compute * 1.0001) | (
        round2 > blocks_f * it2.compute * 1.0001
    )
    bottleneck = bottleneck_words(
        pipes,
        ("tensor cores", *BACKWARD_PIPE_WORDS),
        "tile load latency",
        load_bound,
        cycles,
        dram_bound,
        waves.exact,
    )
    return sm_perf(
        problem,
        flops=backward_flops(problem),
        time_us=time_us,
        clock_hz=clock_hz,
        hbm_bytes=main_bytes + pre_bytes,
        waves=waves,
        computed_pairs=total2 * m2 * n2,
        compute_cycles=(weight1 * it1.compute + weight2 * it2.compute) / blocks_f,
        load_cycles=(weight1 * it1.tile_load + weight2 * it2.tile_load) / blocks_f,
        tensor_cycles=weight1 * it1.tensor + weight2 * it2.tensor,
        overlap=(total1 * overlap1 + total2 * overlap2) / (total1 + total2),
        bottleneck=bottleneck,
        figures={
            "dkdv_iteration_compute_cycles": it1.compute,
            "dkdv_tile_load_cycles": it1.tile_load,
            "dq_iteration_compute_cycles": it2.compute,
            "dq_tile_load_cycles": it2.tile_load,
            "main_kernel_us": main_us,
            "helper_kernels_us": np.full(len(cfg), helper_us),
        },
    )
