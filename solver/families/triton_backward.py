"""The Triton tutorial's fused-attention backward (06-fused-attention.py, `_attn_bwd`).

Each program runs two loops. The dK/dV loop holds `block_n` keys (BLOCK_N1: K and V loaded once)
and walks the query blocks that see them `block_m` rows at a time (BLOCK_M1: Q^T, dO, the
log-sum-exp M and D pipelined `num_stages` deep), recomputing P^T = exp2(K Q^T - M) and
accumulating dV += P^T dO and dK += dS^T Q. The dQ loop then holds `dq_block_m` queries
(BLOCK_M2: Q, dO, M and D loaded once) and walks the key blocks they see `dq_block_n` keys at a
time (BLOCK_N2: K^T and V^T pipelined), recomputing P and dP and accumulating dQ += dS K. S and
dP are computed in both loops (seven GEMMs for five useful ones) and no atomics are needed. A
preprocessing kernel computes D = rowsum(O o dO); the tutorial scales K by sm_scale / ln 2
before the launch. The tutorial's grid gives program p key block p and query block p; here the
grid is the larger of the two block counts, so the two tile pairs are free (the tutorial's
BLOCK_M2 = BLOCK_N1 is one choice). Requirements from the tutorial: BLOCK_N1 a multiple of
BLOCK_M1, BLOCK_M2 a multiple of BLOCK_N2 (tl.static_assert), and with the causal mask the
diagonal steps of BLOCK_M1 / 2 and BLOCK_N2 / 2 rows (BLK_SLICE_FACTOR = 2). There is no
dropout. Source: Triton tutorial 06 "Fused Attention" (triton-lang/triton, python/tutorials/
06-fused-attention.py). Formulas: docs/model.md section 12.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..cost import (
    BLOCK_START_CYCLES,
    KERNEL_LAUNCH_US,
    Perf,
    causal_iterations,
    padding_waste,
    wave_schedule,
)
from ..errors import FieldViolation
from ..family import pow2_range
from ..hardware import CudaDevice, HardwareSpec
from ..problem import AttentionProblem, DType
from ..space import BoolArray, Config, ConfigArrays, FloatArray, IntArray, Param, ceil_div
from .cuda import FIXED_OVERHEAD_REGS, CudaResources, cuda_device
from .cuda_backward import (
    BWD_ALU_OPS_PER_SCORE,
    BWD_ELEMENTWISE_CHAIN_CYCLES,
    BWD_INSTRUCTION_LEVEL_PARALLELISM,
    LSE_D_BYTES_PER_ROW,
    MMA_K,
    CudaBackwardFamily,
    LoopIteration,
    backward_flops,
    bandwidth_kernel_us,
    chain,
    gqa_reduce_bytes,
    loop_iteration,
    per_thread,
    preprocess_bytes,
    streamed_reuse,
)
from .cuda_forward import (
    _dram_bytes_per_clk,
    bottleneck_words,
    makespan_cycles,
    round_cycles,
)
from .triton import TENSOR_CORE_MIN_CC_MAJOR, WGMMA_ROWS_PER_WARPGROUP, TritonFlashAttention

if TYPE_CHECKING:
    pass

BLK_SLICE_FACTOR = 2  # the tutorial's diagonal steps: BLOCK_M1 / 2 and BLOCK_N2 / 2 rows
TL_DOT_MIN = 16  # tl.dot needs every dimension >= 16
WARPS = pow2_range(2, 8)


class TritonFlashAttentionBackward(CudaBackwardFamily):
    name = "triton"
    summary = (
        "Triton fused-attention backward (the tutorial's dK/dV loop and dQ loop in one "
        "program, software-pipelined, no atomics)"
    )
    alignment_rule = (
        "block_n a multiple of block_m and dq_block_m a multiple of dq_block_n (the tutorial's "
        "static asserts); the warps each own at least one 16x8 MMA tile of both loops' score "
        "tiles; with the causal mask block_m and dq_block_n at least 32 (diagonal steps of "
        "half a block)"
    )
    pipeline_note = "num_stages buffers of each loop's streamed tiles; loads issued ahead"
    streamed_words = "tile (Q/dO in the dK/dV loop, K/V in the dQ loop)"
    helper_words = "preprocess D = rowsum(O o dO), scale K"
    inner_params = ("dq_block_m", "dq_block_n")
    inner_constraint = "dq_tile"
    inner_short = "dqtile"
    _forward = TritonFlashAttention()

    # ---- the problem -------------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        violations = [
            v for v in self._forward._family_violations(problem, hardware) if v.field != "dtype"
        ]
        sm = cuda_device(hardware).sm
        if problem.dtype is DType.FP8:
            violations.append(
                FieldViolation(
                    "dtype",
                    "the triton backward computes in fp16/bf16 (the tutorial's fp8 path is "
                    "forward-only); allowed: fp16" + (", bf16" if sm.cc_major >= 8 else ""),
                )
            )
        elif problem.dtype is DType.BF16 and sm.cc_major < 8:
            violations.append(
                FieldViolation(
                    "dtype",
                    f"bf16 needs compute capability >= 8.0; {hardware.name} is "
                    f"{sm.compute_capability} (allowed: fp16)",
                )
            )
        if problem.dropout > 0:
            violations.append(
                FieldViolation(
                    "dropout",
                    "the triton backward (the tutorial's design) has no dropout; the fa2 "
                    "backward regenerates dropout (--kernel fa2), or set dropout 0",
                )
            )
        return violations

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return self._forward.kernel_head_dims(problem)

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        if cuda_device(hardware).sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
            stages = Param("num_stages", (1,), "no software pipelining below cc 8.0")
        else:
            stages = Param("num_stages", (1, 2, 3, 4, 5), "buffers of each loop's streamed tiles")
        resident = pow2_range(16, 256)
        # A streamed step of 256 rows needs a resident block of 256 (the static asserts), and
        # P and dP of a 256 x 256 score tile (512 KiB in FP32) exceed any SM's register file.
        step = pow2_range(16, 128)
        return (
            Param("block_m", step, "query rows per iteration of the dK/dV loop (BLOCK_M1)"),
            Param(
                "block_n", resident, "key/value rows a program holds in the dK/dV loop (BLOCK_N1)"
            ),
            Param("dq_block_m", resident, "query rows a program holds in the dQ loop (BLOCK_M2)"),
            Param("dq_block_n", step, "key/value rows per iteration of the dQ loop (BLOCK_N2)"),
            Param("num_warps", WARPS, "warps per program"),
            stages,
        )

    def label(self, config: Config) -> str:
        """'32x128 w4 s5 dq 128x32': the dK/dV loop's tile, then the dQ loop's."""
        c = config.as_dict()
        return (
            f"{c['block_m']}x{c['block_n']} w{c['num_warps']} s{c['num_stages']} "
            f"dq {c['dq_block_m']}x{c['dq_block_n']}"
        )

    # ---- shapes and resources ------------------------------------------------------------------
    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        m1, n1 = cfg["block_m"], cfg["block_n"]
        m2, n2 = cfg["dq_block_m"], cfg["dq_block_n"]
        w = cfg["num_warps"]
        ok = (n1 % m1 == 0) & (m2 % n2 == 0)
        ok &= ((n1 // 16) * (m1 // 8) >= w) & ((m2 // 16) * (n2 // 8) >= w)
        if problem.causal:
            step = TL_DOT_MIN * BLK_SLICE_FACTOR
            ok &= (m1 >= step) & (n2 >= step)
        return np.asarray(ok, dtype=np.bool_)

    def _wgmma(self, rows: IntArray, cfg: ConfigArrays, device: CudaDevice) -> BoolArray:
        """tl.dot lowers to wgmma on cc >= 9 when whole warpgroups own >= 64 output rows."""
        warpgroups = np.maximum(cfg["num_warps"] // 4, 1)
        ok = (cfg["num_warps"] % 4 == 0) & (rows >= WGMMA_ROWS_PER_WARPGROUP * warpgroups)
        return np.asarray(ok & (device.sm.cc_major >= 9), dtype=np.bool_)

    def _loop_smem(self, cfg: ConfigArrays, problem: AttentionProblem) -> tuple[IntArray, IntArray]:
        """Shared memory of each loop, bytes: `num_stages` buffers of its streamed tiles (Q^T
        and dO of block_m rows; K^T and V^T of dq_block_n rows) and its resident operands (K
        and V of block_n rows; Q and dO of dq_block_m rows), which stay in shared memory as dot
        operands and are read from there every iteration."""
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        s = cfg["num_stages"]
        loop1 = (s * cfg["block_m"] + cfg["block_n"]) * (d + dv) * elem
        loop2 = (s * cfg["dq_block_n"] + cfg["dq_block_m"]) * (d + dv) * elem
        return np.asarray(loop1, dtype=np.int64), np.asarray(loop2, dtype=np.int64)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """The larger loop's (the loops run one after the other and Triton allocates the
        kernel's shared memory for the buffers live at the same time)."""
        loop1, loop2 = self._loop_smem(cfg, problem)
        return np.asarray(np.maximum(loop1, loop2), dtype=np.int64)

    def q_in_registers(self) -> bool:
        return False

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """The larger loop's registers. dK/dV loop: the dK and dV accumulators (block_n x d
        and x dv, FP32), P^T and dP^T (block_n x block_m, FP32) and the M and D values of the
        thread's columns; dQ loop: the dQ accumulator (dq_block_m x d), P and dP
        (dq_block_m x dq_block_n) and M and D of the thread's rows; each plus the forward's
        fixed overhead (pointers, loop state, operand staging)."""
        d, dv = self.kernel_head_dims(problem)
        w = cfg["num_warps"].astype(np.float64)
        m1 = cfg["block_m"].astype(np.float64)
        n1 = cfg["block_n"].astype(np.float64)
        m2 = cfg["dq_block_m"].astype(np.float64)
        n2 = cfg["dq_block_n"].astype(np.float64)
        loop1 = (
            per_thread(n1 * (d + dv), w)
            + per_thread(2.0 * n1 * m1, w)
            + 2.0 * np.ceil(m1 / 4.0)  # M and D: the thread's columns (2 per n8 tile)
        )
        loop2 = (
            per_thread(m2 * d, w)
            + per_thread(2.0 * m2 * n2, w)
            + 2.0 * 2.0 * np.maximum(m2 / (16.0 * w), 1.0)  # M and D: 2 rows per 16-row slab
        )
        return np.asarray(np.maximum(loop1, loop2) + FIXED_OVERHEAD_REGS, dtype=np.int64)

    # ---- cost ---------------------------------------------------------------------------------
    def backward_cost(
        self, device: CudaDevice, problem: AttentionProblem, cfg: ConfigArrays, res: CudaResources
    ) -> Perf:
        return _evaluate(self, device, problem, cfg, res)


def _matrix(
    family: TritonFlashAttentionBackward,
    rows: IntArray,
    cfg: ConfigArrays,
    device: CudaDevice,
    elem: int,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The matrix rate (FLOP/cycle/SM), the B-operand readers per iteration, and the ILP of a
    loop whose GEMMs have `rows` output rows: wgmma (peak; read once per warpgroup; the
    tutorial's dots serialise with the elementwise work, ILP 1), mma.sync (peak x efficiency;
    read by every warp), or FP32 FMAs below cc 8.0."""
    tp = device.throughput
    warps = cfg["num_warps"].astype(np.float64)
    n = len(cfg)
    ilp = np.full(n, BWD_INSTRUCTION_LEVEL_PARALLELISM)
    if device.sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
        return np.full(n, 2.0 * tp.fp32_ops_per_clk_per_sm), warps, ilp
    wg = family._wgmma(rows, cfg, device)
    peak = tp.tensor_flops_per_clk_per_sm(elem)
    rate = np.where(wg, peak, peak * tp.mma_sync_efficiency)
    readers = np.where(wg, warps / 4.0, warps)
    return np.asarray(rate), np.asarray(readers), np.asarray(np.where(wg, 1.0, ilp))


def _loop_iterations(
    n_m: IntArray, bm: FloatArray, bn: FloatArray, n_kv: IntArray, offset: int, causal: bool
) -> tuple[FloatArray, FloatArray]:
    """(query block, key block) tile pairs with unmasked scores, and diagonal ones, per head."""
    if causal:
        return causal_iterations(n_m, bm, bn, n_kv, offset)
    total = (n_m * n_kv).astype(np.float64)
    return total, np.zeros_like(total)


def _evaluate(
    family: TritonFlashAttentionBackward,
    device: CudaDevice,
    problem: AttentionProblem,
    cfg: ConfigArrays,
    res: CudaResources,
) -> Perf:
    tp = device.throughput
    d, dv = family.kernel_head_dims(problem)
    elem = problem.dtype.bytes
    n_sm = tp.sm_count
    clock_hz = tp.boost_clock_mhz * 1e6
    m1 = cfg["block_m"].astype(np.float64)
    n1 = cfg["block_n"].astype(np.float64)
    m2 = cfg["dq_block_m"].astype(np.float64)
    n2 = cfg["dq_block_n"].astype(np.float64)
    w = cfg["num_warps"].astype(np.float64)
    prefetch = (cfg["num_stages"] - 1).astype(np.float64)
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
    rate1, readers1, ilp1 = _matrix(family, cfg["block_n"], cfg, device, elem)
    rate2, readers2, ilp2 = _matrix(family, cfg["dq_block_m"], cfg, device, elem)
    scores1 = n1 * m1
    scores2 = m2 * n2
    it1 = loop_iteration(
        device,
        w,
        blocks_f,
        ilp1,
        matrix_flops=2.0 * n1 * m1 * (2.0 * d + 2.0 * dv),  # K Q^T, P^T dO, V dO^T, dS^T Q
        matrix_rate=rate1,
        smem_bytes=(readers1 * m1 * (2.0 * d + 2.0 * dv) + n1 * (d + dv) + m1 * (d + dv)) * elem,
        spill_regs=res.spill_regs,
        scores=scores1,
        alu_ops=scores1 * BWD_ALU_OPS_PER_SCORE,
        extra_issue=np.zeros(len(cfg)),
        chain_cycles=chain((max(d, dv) + m1) / MMA_K, BWD_ELEMENTWISE_CHAIN_CYCLES, 2.0, device),
        tile_bytes=m1 * row_q,
        atomic_bytes=np.zeros(len(cfg)),
        dram_miss=reuse1.dram_fraction,
    )
    it2 = loop_iteration(
        device,
        w,
        blocks_f,
        ilp2,
        matrix_flops=2.0 * m2 * n2 * (2.0 * d + dv),  # Q K^T, dO V^T, dS K
        matrix_rate=rate2,
        smem_bytes=(readers2 * n2 * (2.0 * d + dv) + m2 * (d + dv) + n2 * (d + dv)) * elem,
        spill_regs=res.spill_regs,
        scores=scores2,
        alu_ops=scores2 * BWD_ALU_OPS_PER_SCORE,
        extra_issue=np.zeros(len(cfg)),
        chain_cycles=chain((max(d, dv) + n2) / MMA_K, BWD_ELEMENTWISE_CHAIN_CYCLES, 2.0, device),
        tile_bytes=n2 * row_kv,
        atomic_bytes=np.zeros(len(cfg)),
        dram_miss=reuse2.dram_fraction,
    )

    def rounds(it: LoopIteration, resident: FloatArray) -> tuple[FloatArray, FloatArray]:
        serial = (it.compute + it.tile_load) / (1.0 + prefetch)
        return round_cycles(it.compute, serial, it.l2_bytes, it.tile_load, resident, device)

    round1, overlap1 = rounds(it1, blocks_f)
    round2, overlap2 = rounds(it2, blocks_f)
    waves = wave_schedule(ctas, slots)
    last_blocks = np.minimum(blocks, ceil_div(waves.last_wave_ctas.astype(np.int64), n_sm))
    last1, _ = rounds(it1, last_blocks.astype(np.float64))
    last2, _ = rounds(it2, last_blocks.astype(np.float64))

    dram_share = _dram_bytes_per_clk(device) / n_sm
    latency = tp.dram_latency_cycles
    pro1 = latency + n1 * row_kv / dram_share + it1.tile_load  # K and V, the first Q^T/dO
    epi1 = n1 * row_kv / dram_share  # dK and dV written
    pro2 = latency + m2 * row_q / dram_share + it2.tile_load  # Q, dO, M, D, the first K^T/V^T
    epi2 = m2 * d * elem / dram_share  # dQ written
    work = heads_total * (
        programs * BLOCK_START_CYCLES
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
        return np.asarray(BLOCK_START_CYCLES + loop1 + loop2)

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
    longest = np.max([program(np.clip(p, 0.0, last_p), last1, last2) for p in points], axis=0)
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
    dram_bound = main_bytes / _dram_bytes_per_clk(device)
    cycles = np.maximum(cycles, dram_bound)
    main_us = cycles / clock_hz * 1e6 + KERNEL_LAUNCH_US

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
    busy_cycles = time_us * 1e-6 * clock_hz
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
    unit = family._forward.matrix_unit(device)
    load_bound = (round1 > blocks_f * it1.compute * 1.0001) | (
        round2 > blocks_f * it2.compute * 1.0001
    )
    bottleneck = bottleneck_words(
        pipes,
        (
            unit,
            "shared-memory bandwidth",
            "exp recomputation (SFU)",
            "FP32 elementwise math",
            "per-iteration overhead",
        ),
        "tile load latency",
        load_bound,
        cycles,
        dram_bound,
        waves.exact,
    )
    computed_pairs = total2 * m2 * n2  # the dQ loop covers each kept pair once, as the dK/dV
    return Perf(
        time_us=time_us,
        tflops=flops / (time_us * 1e-6) / 1e12,
        compute_us=compute_total / clock_hz * 1e6,
        load_us=load_total / clock_hz * 1e6,
        overlap=overlap,
        arithmetic_intensity=flops / hbm_bytes,
        hbm_bytes=hbm_bytes,
        waves=waves.exact,
        tail_efficiency=waves.tail_efficiency,
        padding_waste=padding_waste(problem, computed_pairs),
        mma_utilization=np.clip(tensor_total / busy_cycles, 0.0, 1.0),
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


__all__ = ["TritonFlashAttentionBackward"]
