"""FlashAttention-2's backward kernel (sequence-parallel over key blocks; sm80 and later).

One thread block holds a K/V block of `block_n` keys (K and V in shared memory, or V in
registers) and walks the query blocks that see it, `block_m` rows at a time: it loads Q and dO
(Q double-buffered unless `No_double_buffer`), recomputes S = QK^T and P = exp(S - LSE) from the
saved log-sum-exp, computes dP = dO V^T and dS = P o (dP - D), writes P and dS to shared memory,
accumulates dV += P^T dO and dK += dS^T Q in registers, and adds its dQ = dS K into an fp32
global accumulator with atomics. Three warp layouts tile the GEMMs (`AtomLayoutMSdP` for S and
dP, `AtomLayoutNdKV` for dK and dV, `AtomLayoutMdQ` for dQ; the other warps split the other
dimension). A preprocessing kernel computes D = rowsum(dO o O) and zeroes the accumulator; a
conversion kernel turns it into dQ. Source: Dao, "FlashAttention-2" (2023) Algorithm 2;
`csrc/flash_attn/src/kernel_traits.h` (Flash_bwd_kernel_traits), `flash_bwd_kernel.h`
(compute_dq_dk_dv_1colblock) and `flash_bwd_launch_template.h` (run_flash_bwd_seqk_parallel).
Formulas: docs/model.md section 12.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..cost import (
    BLOCK_START_CYCLES,
    KERNEL_LAUNCH_US,
    L2_USABLE_FRACTION,
    Perf,
    causal_iterations,
    padding_waste,
    wave_schedule,
)
from ..errors import FieldViolation
from ..hardware import CudaDevice, HardwareSpec
from ..problem import AttentionProblem
from ..space import BoolArray, Config, ConfigArrays, FloatArray, IntArray, Param, ceil_div
from .cuda import CudaResources
from .cuda_backward import (
    BWD_ALU_OPS_PER_SCORE,
    BWD_DROPOUT_PERSISTENT_REGS,
    BWD_DROPOUT_TRANSIENT_REGS,
    BWD_ELEMENTWISE_CHAIN_CYCLES,
    BWD_FIXED_OVERHEAD_REGS,
    BWD_INSTRUCTION_LEVEL_PARALLELISM,
    DROPOUT_OPS_PER_SCORE,
    LSE_D_BYTES_PER_ROW,
    MMA_K,
    CudaBackwardFamily,
    backward_flops,
    bandwidth_kernel_us,
    chain,
    gqa_reduce_bytes,
    loop_iteration,
    mma_stage_regs,
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
from .fa2 import GMEM_LOAD_ELEMENTS, FlashAttention2

if TYPE_CHECKING:
    from ..candidates import CandidateTable, Evaluation

# The dQ accumulator's atomic-add copy (GmemTiledCopydQaccumAtomicAdd: 8 x 32 threads) and its
# conversion copy (GmemLayoutAtomdQaccum: 32 x 8 or 16 x 16 threads) are laid out for 256
# threads, and the atomic loop requires the dQ fragment to match them element for element
# (kernel_traits.h, flash_bwd_kernel.h): the backward kernel runs with 8 warps.
FA2_BACKWARD_WARPS = 8
ATOM_LAYOUTS = (1, 2, 4, 8)
FP32_BYTES = 4


class FlashAttention2Backward(CudaBackwardFamily):
    name = "fa2"
    summary = (
        "FlashAttention-2 backward (K/V block resident, Q/dO streamed, dQ by fp32 atomics; "
        "mma.sync, 8 warps in three GEMM layouts)"
    )
    alignment_rule = (
        "each GEMM's warp layout tiles it: block_m a multiple of 16 x atom_layout_m_sdp and of "
        "16 x atom_layout_m_dq, block_n a multiple of 16 x num_warps / atom_layout_m_sdp and of "
        "16 x atom_layout_n_dkv, the head dim a multiple of 16 x num_warps / atom_layout_n_dkv "
        "and of 16 x num_warps / atom_layout_m_dq; block_n a multiple of block_m / num_warps "
        "(the K/V shared-memory atom); block_m and block_n multiples of the rows one "
        "16-byte-per-thread copy pass covers; with dropout, block_n / (16 x num_warps / "
        "atom_layout_m_sdp) even (dropout is generated in 16 x 32 blocks)"
    )
    pipeline_note = (
        "Q double-buffered (two Q tiles): the next Q and dO loads overlap the dQ and dK GEMMs; "
        "no_double_buffer = 1 keeps one Q tile and exposes its load"
    )
    helper_words = "preprocess D = rowsum(dO o O) and zero the dQ accumulator; convert it to dQ"
    inner_params = ("atom_layout_m_sdp", "atom_layout_n_dkv", "atom_layout_m_dq")
    inner_constraint = "warp_layout"
    inner_short = "layout"
    _forward = FlashAttention2()

    # ---- the problem -----------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return self._forward._family_violations(problem, hardware)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return self._forward.kernel_head_dims(problem)

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return (
            Param(
                "block_m",
                (32, 64, 128, 256),
                "query rows streamed per iteration (kBlockM; 8 warps copy at least 32 rows a pass)",
            ),
            Param(
                "block_n",
                (32, 64, 128, 256),
                "key/value rows the block holds (kBlockN; kernel_traits.h: kBlockN >= 32)",
            ),
            Param(
                "num_warps",
                (FA2_BACKWARD_WARPS,),
                "warps per block (the dQ accumulator's copies are laid out for 256 threads)",
            ),
            Param(
                "atom_layout_m_sdp",
                ATOM_LAYOUTS,
                "warps along the query rows of S = QK^T and dP = dO V^T (AtomLayoutMSdP); the "
                "others split block_n",
            ),
            Param(
                "atom_layout_n_dkv",
                ATOM_LAYOUTS,
                "warps along the key rows of dV = P^T dO and dK = dS^T Q (AtomLayoutNdKV); the "
                "others split the head dim",
            ),
            Param(
                "atom_layout_m_dq",
                ATOM_LAYOUTS,
                "warps along the query rows of dQ = dS K (AtomLayoutMdQ); the others split the "
                "head dim",
            ),
            Param(
                "is_v_in_regs",
                (0, 1),
                "1: V held in registers for dP, its shared memory reused for P and dS "
                "(Is_V_in_regs)",
            ),
            Param(
                "no_double_buffer",
                (0, 1),
                "1: one Q tile instead of two (No_double_buffer): less shared memory, the next "
                "Q load waits for the end of the iteration",
            ),
        )

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        """num_stages is the Q tiles in shared memory: 2 double-buffered, 1 without."""
        return {
            "block_m": cfg["block_m"],
            "block_n": cfg["block_n"],
            "num_warps": cfg["num_warps"],
            "num_stages": np.asarray(2 - cfg["no_double_buffer"], dtype=np.int64),
        }

    def label(self, config: Config) -> str:
        """'64x128 w8 s2 layout 2/4/2', then 'v_in_regs' with Is_V_in_regs (s1 is
        No_double_buffer): the three warp layouts are S/dP, dK/dV, dQ."""
        c = config.as_dict()
        layout = f"{c['atom_layout_m_sdp']}/{c['atom_layout_n_dkv']}/{c['atom_layout_m_dq']}"
        stages = 2 - c["no_double_buffer"]
        text = f"{c['block_m']}x{c['block_n']} w{c['num_warps']} s{stages} layout {layout}"
        return text + (" v_in_regs" if c["is_v_in_regs"] else "")

    # ---- shapes and resources ------------------------------------------------------------------
    def _rows_per_copy_pass(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        d, _ = self.kernel_head_dims(problem)
        block_k_smem = 64 if d % 64 == 0 else 32
        threads_per_row = block_k_smem // GMEM_LOAD_ELEMENTS
        return np.asarray(cfg["num_warps"] * 32 // threads_per_row, dtype=np.int64)

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        d, dv = self.kernel_head_dims(problem)
        bm, bn, w = cfg["block_m"], cfg["block_n"], cfg["num_warps"]
        am, an, amq = cfg["atom_layout_m_sdp"], cfg["atom_layout_n_dkv"], cfg["atom_layout_m_dq"]
        ok = (w % am == 0) & (w % an == 0) & (w % amq == 0)
        sdp_n = 16 * w // am
        ok &= (bm % (16 * am) == 0) & (bn % sdp_n == 0)  # S, dP: block_m x block_n
        dkv_n = 16 * w // an
        ok &= (bn % (16 * an) == 0) & (d % dkv_n == 0) & (dv % dkv_n == 0)  # dK, dV
        dq_n = 16 * w // amq
        ok &= (bm % (16 * amq) == 0) & (d % dq_n == 0)  # dQ: block_m x d
        atom_rows = np.maximum(bm // w, 1)
        ok &= (bm % w == 0) & (bn % atom_rows == 0)  # SmemLayoutAtomKV: block_m / warps rows
        rows = self._rows_per_copy_pass(cfg, problem)
        ok &= (bm % rows == 0) & (bn % rows == 0)
        if problem.dropout > 0:
            ok &= (bn // np.maximum(sdp_n, 1)) % 2 == 0  # static_assert(MMA_N_SdP % 2 == 0)
        return np.asarray(ok, dtype=np.bool_)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """kSmemSize1colblock: Q (2 tiles, or 1 without double buffering) and dO, then K and
        V, dS and P; with V in registers, V's space is reused for dS and P."""
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        bm, bn = cfg["block_m"], cfg["block_n"]
        q_tiles = 2 - cfg["no_double_buffer"]
        q_do = bm * (q_tiles * d + dv)
        kv = bn * (d + dv)
        p_ds = 2 * bm * bn
        rest = np.where(cfg["is_v_in_regs"] == 1, np.maximum(kv, bn * d + p_ds), kv + p_ds)
        return np.asarray((q_do + rest) * elem, dtype=np.int64)

    def q_in_registers(self) -> bool:
        return False

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """dK and dV accumulators (+ V with Is_V_in_regs) live through the loop; on top, the
        largest of the three phases of an iteration: S and dP accumulators with the LSE and D
        rows (and Philox state with dropout), the dK/dV GEMMs' operand staging, or the dQ
        accumulator; each with one k-step of its GEMM's A and B fragments."""
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        bm = cfg["block_m"].astype(np.float64)
        bn = cfg["block_n"].astype(np.float64)
        w = cfg["num_warps"].astype(np.float64)
        am = cfg["atom_layout_m_sdp"].astype(np.float64)
        an = cfg["atom_layout_n_dkv"].astype(np.float64)
        amq = cfg["atom_layout_m_dq"].astype(np.float64)
        dkdv = per_thread(bn * (d + dv), w)
        v_regs = cfg["is_v_in_regs"] * per_thread(bn * dv * am, w, elem)
        slabs = np.maximum(bm / (16.0 * am), 1.0)
        dropout = problem.dropout > 0
        sdp = (
            per_thread(2.0 * bm * bn, w)
            + 2.0 * 2.0 * slabs  # LSE and D: 2 rows per thread per 16-row slab
            + mma_stage_regs(bm / am, bn * am / w)
            + (BWD_DROPOUT_TRANSIENT_REGS if dropout else 0)
        )
        dkv = mma_stage_regs(bn / an, max(d, dv) * an / w)
        dq = per_thread(bm * d, w) + mma_stage_regs(bm / amq, d * amq / w)
        phase = np.maximum.reduce([sdp, dkv, dq])
        fixed = BWD_FIXED_OVERHEAD_REGS + (BWD_DROPOUT_PERSISTENT_REGS if dropout else 0)
        return np.asarray(dkdv + v_regs + phase + fixed, dtype=np.int64)

    # ---- tie-break and cost -----------------------------------------------------------------
    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Fewer iterations (tiles per head), less shared memory, double buffering, V in
        shared memory, larger block_m; then the enumeration order (the layouts)."""
        cfg, res = ev.cfg, ev.res
        assert isinstance(res, CudaResources)
        problem = ev.problem
        tiles = ceil_div(problem.seq_len, cfg["block_m"]) * ceil_div(
            problem.seq_len_kv_eff, cfg["block_n"]
        )
        return [
            tiles,
            res.smem_bytes,
            cfg["no_double_buffer"],
            cfg["is_v_in_regs"],
            -cfg["block_m"],
        ]

    def backward_cost(
        self, device: CudaDevice, problem: AttentionProblem, cfg: ConfigArrays, res: CudaResources
    ) -> Perf:
        return _evaluate(self, device, problem, cfg, res)

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        lines = super().reason_lines(table, i)
        share = table.perf.figures["atomic_l2_share"][i]
        lines.append(f"dQ fp32 atomics take {share:.0%} of the L2 traffic of an iteration")
        return lines


def _evaluate(
    family: FlashAttention2Backward,
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
    bm = cfg["block_m"].astype(np.float64)
    bn = cfg["block_n"].astype(np.float64)
    w = cfg["num_warps"].astype(np.float64)
    am = cfg["atom_layout_m_sdp"].astype(np.float64)
    an = cfg["atom_layout_n_dkv"].astype(np.float64)
    amq = cfg["atom_layout_m_dq"].astype(np.float64)
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
    if problem.causal:
        total_iters, diag_iters = causal_iterations(n_m, bm, bn, n_kv, sk - sq)
        first = np.clip(np.floor(-(sk - sq) / bm), 0, n_m)  # key block 0's first query block
        max_iters = n_m - first
    else:
        total_iters = (n_m * n_kv).astype(np.float64)
        diag_iters = np.zeros_like(total_iters)
        max_iters = n_m.astype(np.float64)
    diag_mean = diag_iters / n_kv

    # ---- the streamed Q, dO, LSE and D: L2 reuse across the key blocks of a head ------------
    row_bytes = (d + dv) * elem + LSE_D_BYTES_PER_ROW
    tile_bytes = bm * row_bytes
    reuse = streamed_reuse(
        problem,
        True,
        float(sq) * row_bytes,
        tile_bytes,
        n_kv,
        total_iters / n_m,
        slots,
        device.memory.l2_bytes,
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
    k_steps = (max(d, dv) + bm + np.maximum(bm, bn)) / MMA_K  # S|dP, then dV, then dQ|dK
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
    dram_share = _dram_bytes_per_clk(device) / n_sm
    kv_block_bytes = bn * (d + dv) * elem
    prologue = BLOCK_START_CYCLES + tp.dram_latency_cycles + kv_block_bytes / dram_share
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
    group = problem.heads // problem.kv_heads_eff
    kv_reads = np.where(group * n_kv <= slots, 1.0, float(group))  # GQA heads together in L2
    kv_bytes = problem.batch * problem.kv_heads_eff * float(sk) * (d + dv) * elem * kv_reads
    q_bytes = problem.batch * problem.heads * float(sq) * row_bytes * reuse.dram_reads_per_kv_head
    dkdv_bytes = float(heads_total) * sk * (d + dv) * elem
    dq_head_bytes = float(sq) * d * FP32_BYTES
    atomic_total = heads_total * total_iters * atomic_bytes
    heads_in_flight = np.minimum(heads_total, ceil_div(slots, n_kv) + 1).astype(np.float64)
    dq_miss = np.clip(
        1.0 - L2_USABLE_FRACTION * device.memory.l2_bytes / (heads_in_flight * dq_head_bytes),
        0.0,
        1.0,
    )
    # first touch and final write-back of each accumulator line, plus the round trips of
    # atomics whose line was evicted between two key blocks' visits
    dq_bytes = 2.0 * heads_total * dq_head_bytes + 2.0 * dq_miss * np.maximum(
        atomic_total - heads_total * dq_head_bytes, 0.0
    )
    main_bytes = kv_bytes + q_bytes + dkdv_bytes + dq_bytes
    dram_bound = main_bytes / _dram_bytes_per_clk(device)
    cycles = np.maximum(cycles, dram_bound)
    main_us = cycles / clock_hz * 1e6 + KERNEL_LAUNCH_US

    # ---- the helper kernels -----------------------------------------------------------------
    pre_bytes = preprocess_bytes(problem, d, dv, clear_dq_accum=True)
    convert_bytes = float(heads_total) * sq * d * (FP32_BYTES + elem)
    reduce_bytes = gqa_reduce_bytes(problem, d, dv)
    pre_us = bandwidth_kernel_us(device, pre_bytes)
    convert_us = bandwidth_kernel_us(device, convert_bytes)
    helper_us = pre_us + convert_us + bandwidth_kernel_us(device, reduce_bytes)
    time_us = main_us + helper_us
    hbm_bytes = main_bytes + pre_bytes + convert_bytes + reduce_bytes

    flops = backward_flops(problem)
    computed_pairs = total_iters * bm * bn
    busy_cycles = time_us * 1e-6 * clock_hz
    tensor_total = heads_total * total_iters * it.tensor / n_sm
    compute_total = heads_total * total_iters * it.compute / blocks_f / n_sm
    load_total = heads_total * total_iters * it.tile_load / blocks_f / n_sm
    bottleneck = bottleneck_words(
        [it.tensor, it.smem, it.sfu, it.alu, it.issue],
        (
            "tensor cores",
            "shared-memory bandwidth",
            "exp recomputation (SFU)",
            "FP32 elementwise math",
            "per-iteration overhead",
        ),
        "Q/dO load latency",
        round_full > blocks_f * it.compute * 1.0001,
        cycles,
        dram_bound,
        waves.exact,
    )
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


__all__ = ["FA2_BACKWARD_WARPS", "FlashAttention2Backward"]
