"""The cost model of the `ascend` family: predicted kernel time of every candidate, with its
parts (docs/model.md section 10.3, where every formula and constant has its source).

Units: times in nanoseconds inside this module (microseconds in the result); bytes; rates in
bytes or operations per nanosecond = per-cycle rate x clock in GHz. In short, for one round
(one S2 tile of one S1 block) on one cube core and its vector cores:

    cube pipe  C    = bm * c * (d + dv) / R_mac                      QK^T and PV
    AIC pipes       = MTE2 (K, V, P -> L1), MTE1 (L1 -> L0A/L0B), cube, FIXPIPE (S, O' out of L0C)
    AIV pipes       = load (S, O' -> UB), vector (softmax, O update), store (P out of UB)
    T_aic, T_aiv    = max of the pipes when double-buffered (num_stages >= 2), else their sum
    chain           = T_aic + T_aiv + 2 * L_x                        one round, start to end
    round           = max(T_aic, T_aiv, chain / num_stages, L2 share)

and a block is its Q load, the first round's chain, one `round` per further round and the
output store; blocks run in waves over the cube cores (or are balanced over them, causal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...cost import (
    LSE_BYTES_PER_ROW,
    Perf,
    causal_iterations,
    first_rule_words,
    forward_hbm_bytes,
    kv_reuse,
    perf,
    wave_schedule,
)
from ...family import kib
from ...hardware import AscendDevice
from ...space import FloatArray, IntArray, ceil_div
from .buffers import CUBE_BASE_COLUMNS, FP32_BYTES, AscendResources, Geometry, geometry
from .device import MODEL_INPUTS, ascend_device, kernel_name, rate, required_rates

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# ---- constants (docs/model.md 10.4) ------------------------------------------------------------
# Vector passes over each fp32 score element in one round: scale, row max, subtract the max,
# exp, row sum, cast to fp16/bf16 (the online softmax's steps, FA design note; pto-isa's
# flash_atten README steps 1-6).
SOFTMAX_PASSES = 6.0
# Passes over the output accumulator per round: rescale by exp(m_old - m_new), add P V.
OUTPUT_UPDATE_PASSES = 2.0
# Passes over the output at the end of a block: divide by the row sum, cast.
OUTPUT_FINAL_PASSES = 2.0
# Extra passes on a round that crosses the causal diagonal: select with the mask.
MASK_PASSES = 1.0
MASK_BYTES_PER_SCORE = 1.0  # the uint8 attention mask, read from GM (compressed 2048 x 2048)
# Dependent latency of one vector pass over a slice (row max -> subtract -> exp -> row sum ->
# cast: each waits on the previous instruction's result), vector cycles (estimate).
VECTOR_SLICE_CYCLES = 200.0
# Latency of one hand-off between cube and vector: on split parts a GM/L2 write becoming
# visible, CrossCoreSetFlag/CrossCoreWaitFlag and the reader's first load; on coupled parts an
# intra-core set_flag/wait_flag between pipes (cube cycles; estimates).
HANDOFF_CYCLES_SPLIT = 1000.0
HANDOFF_CYCLES_COUPLED = 100.0
HANDOFFS_PER_ROUND = 2.0  # S to the vector, P back to the cube
# What one kernel call costs beyond its work on an Ascend NPU, in place of the CUDA launch floor
# (ModelConstants.kernel_launch_us, 2.5 us): the torch_npu/CANN launch path of one
# custom-kernel call on a 910B2 measured 16-18 us from the host over three repeats
# (LMCache-Ascend PR #280: CANN 8.5.1, torch_npu 2.9.0, "Three repeats measured ... 16-18 us
# after"). Assumed for 910A and 310P3.
ASCEND_LAUNCH_US = 18.0
# A paged cache (the decode kernel, docs/model.md 13.10): each page of the S2 tile is a copy of
# its own (IncreFlashAttention's MatMul callback copies K and V GM -> L1 page by page, with the
# page's address from the block table), and each copy costs the issuing queue this much beyond
# its bytes: the scalar unit's block-table read and address arithmetic and the DMA descriptor's
# set-up (cube cycles; estimate).
PAGE_COPY_CYCLES = 64.0


@dataclass(frozen=True)
class DecodeWork:
    """What the decode kernel (IncreFlashAttention) changes in the forward evaluation of its
    transformed problem (docs/model.md 13.10): the rows a block really holds (the packed
    group; the cube pads them to the fractal, not to the S1 tile), the columns of one vector
    pass, and the page size of a paged cache (None: contiguous)."""

    rows: int
    vec_cols: IntArray
    page: IntArray | None = None


@dataclass(frozen=True)
class Rates:
    """Per-core rates of one device, per nanosecond (docs/model.md 10.3)."""

    mac: float  # cube MACs
    vec: float  # vector fp32 elements per pass
    l2_read: float  # GM/L2 -> L1 or UB (an L2 hit)
    gm_read: float  # GM (DRAM) -> L1 or UB (an L2 miss)
    l0a: float
    l0b: float
    fix: float  # L0C -> the workspace (split) or UB (coupled)
    store: float  # UB -> the workspace (split) or L1 (coupled)
    out: float  # UB -> GM (the output)
    l2_total: float  # the device's L2, all cores together
    dram: float  # the device's DRAM
    handoff_ns: float
    slice_ns: float
    cube_efficiency: float  # sustained / peak cube rate
    page_copy_ns: float  # the fixed cost of one page copy (paged decode)


def rates(device: AscendDevice) -> Rates:
    """The device's per-core rates per nanosecond (docs/model.md 10.3)."""
    core = device.ascend
    fc = core.cube_clock_mhz * 1e-3  # GHz
    fv = core.vector_clock_mhz * 1e-3
    split = core.core_layout == "split"
    efficiency = 1.0
    if core.cube_fp16_gemm_measured_tflops is not None:
        efficiency = min(1.0, core.cube_fp16_gemm_measured_tflops / core.cube_fp16_tflops)
    memory = device.memory
    return Rates(
        mac=core.cube_fp16_macs_per_cycle * fc * efficiency,
        vec=rate(core, "vector_fp16_elements_per_cycle") / 2.0 * fv,
        l2_read=rate(core, "l2_read_bytes_per_cycle") * fc,
        gm_read=rate(core, "gm_read_bytes_per_cycle") * fc,
        l0a=rate(core, "l1_to_l0a_bytes_per_cycle") * fc,
        l0b=rate(core, "l1_to_l0b_bytes_per_cycle") * fc,
        fix=rate(core, "l2_write_bytes_per_cycle" if split else "l0c_to_ub_bytes_per_cycle") * fc,
        store=rate(core, "ub_to_l2_bytes_per_cycle" if split else "ub_to_l1_bytes_per_cycle") * fv,
        out=rate(core, "ub_to_gm_bytes_per_cycle") * fv,
        l2_total=memory.l2_bandwidth_bytes_per_clk * memory.l2_achievable_fraction * fc,
        dram=memory.achievable_dram_bytes_per_s * 1e-9,
        handoff_ns=(HANDOFF_CYCLES_SPLIT if split else HANDOFF_CYCLES_COUPLED) / fc,
        slice_ns=VECTOR_SLICE_CYCLES / fv,
        cube_efficiency=efficiency,
        page_copy_ns=PAGE_COPY_CYCLES / fc,
    )


@dataclass(frozen=True)
class Round:
    """Pipe times of one round of `cols` key columns on one cube core, ns (arrays)."""

    cube: FloatArray
    mte2: FloatArray  # K, V (and P on split parts) into L1
    mte1: FloatArray  # L1 -> L0A / L0B
    fix: FloatArray  # S and the partial output out of L0C
    vload: FloatArray  # S and the partial output into UB (split parts)
    vec: FloatArray  # the vector unit: softmax, output update, per-slice latency
    vstore: FloatArray  # P out of UB
    aic: FloatArray  # T_aic
    aiv: FloatArray  # T_aiv
    chain: FloatArray
    l2_bytes: FloatArray  # L2 traffic of the round (all of it passes through the L2)


def _round(
    g: Geometry,
    r: Rates,
    bm: FloatArray,
    cols: FloatArray,
    stages: FloatArray,
    vec_rows: FloatArray,
    d_split: FloatArray,
    dram_fraction: FloatArray,
    vec_cols: FloatArray | None = None,
    page: FloatArray | None = None,
) -> Round:
    d, dv, e = float(g.d), float(g.dv), float(g.elem)
    rows_v = bm / g.vector_per_cube
    scores = bm * cols
    kv = cols * (d + dv) * e
    cube = scores * (d + dv) / r.mac
    p_in = scores * e if g.split else 0.0 * scores
    mte2 = kv * ((1.0 - dram_fraction) / r.l2_read + dram_fraction / r.gm_read) + p_in / r.l2_read
    if page is not None:  # a copy of K and one of V per page of the round
        mte2 = mte2 + 2.0 * np.ceil(cols / page) * r.page_copy_ns
    base_blocks = np.ceil(cols / CUBE_BASE_COLUMNS)
    q_loads = np.where(d_split > 1, base_blocks, 1.0)
    mte1 = (bm * d * e * q_loads + scores * e * d_split) / r.l0a + kv / r.l0b
    partial = bm * dv * FP32_BYTES
    fix = (scores * FP32_BYTES + partial) / r.fix
    if g.split:
        vload = (rows_v * cols * FP32_BYTES + rows_v * dv * FP32_BYTES) / r.l2_read
    else:
        vload = 0.0 * scores
    passes = np.ceil(rows_v / vec_rows)
    if vec_cols is not None:  # the decode kernel's passes of at most vec_cols columns
        passes = passes * np.ceil(cols / vec_cols)
    vec = (
        rows_v * cols * SOFTMAX_PASSES + rows_v * dv * OUTPUT_UPDATE_PASSES
    ) / r.vec + passes * r.slice_ns
    vstore = rows_v * cols * e / r.store
    aic_pipes = np.stack([mte2, mte1, cube, fix])
    aiv_pipes = np.stack([vload, vec, vstore])
    pipelined = stages >= 2
    aic = np.where(pipelined, aic_pipes.max(axis=0), aic_pipes.sum(axis=0))
    aiv = np.where(pipelined, aiv_pipes.max(axis=0), aiv_pipes.sum(axis=0))
    chain = aic + aiv + HANDOFFS_PER_ROUND * r.handoff_ns
    exchange = 2.0 * (scores * (FP32_BYTES + e) + partial) if g.split else 0.0 * scores
    return Round(
        cube, mte2, mte1, fix, vload, vec, vstore, aic, aiv, chain, np.asarray(kv + exchange)
    )


def _period(rd: Round, stages: FloatArray, active: FloatArray, r: Rates) -> FloatArray:
    """Steady-state time of one round when `active` cube cores run at once, ns."""
    terms = [rd.aic, rd.aiv, rd.chain / stages, rd.l2_bytes * active / r.l2_total]
    return np.asarray(np.maximum.reduce(terms), dtype=np.float64)


def evaluate(ev: Evaluation, decode: DecodeWork | None = None) -> Perf:
    """Predicted time and its parts of every configuration; `decode` for the decode kernel's
    transformed problem (None: the forward kernels, 10.3)."""
    device = ascend_device(ev.hardware)
    core = device.ascend
    problem = ev.problem
    assert isinstance(ev.res, AscendResources)
    g = geometry(device, problem)
    r = rates(device)
    cfg = ev.cfg
    n = len(cfg)
    bm_i, bn_i = cfg["block_m"], cfg["block_n"]
    bm = bm_i.astype(np.float64)
    bn = bn_i.astype(np.float64)
    stages = cfg["num_stages"].astype(np.float64)
    vec_rows = cfg["vec_rows"].astype(np.float64)
    d_split = cfg["d_split"].astype(np.float64)
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    heads_total = problem.batch * problem.heads
    units = core.aic_count
    frac = core.cube_fractal_elements

    n_m = ceil_div(sq, bm_i)
    n_kv = ceil_div(sk, bn_i)
    blocks = n_m * heads_total
    if problem.causal:
        total_rounds, diag_rounds = causal_iterations(n_m, bm, bn, n_kv, sk - sq)
    else:
        total_rounds = (n_m * n_kv).astype(np.float64)
        diag_rounds = np.zeros(n)

    # ---- K/V from L2 or DRAM (the shared windowed-reuse helper), DRAM traffic -------------
    kv_head_bytes = float(sk) * (problem.head_dim + problem.head_dim_v_eff) * g.elem
    slots = np.full(n, units, dtype=np.int64)
    reuse = kv_reuse(
        problem,
        kv_head_bytes,
        bn * (g.d + g.dv) * g.elem,
        n_m,
        total_rounds / n_kv,
        slots,
        device.memory.l2_bytes,
    )
    hbm_bytes = forward_hbm_bytes(
        problem, problem.head_dim, problem.head_dim_v_eff, reuse.dram_reads_per_kv_head
    )

    # ---- one round, full and tail ---------------------------------------------------------
    # The rows a block computes: its S1 tile, or in the decode kernel the packed rows it
    # really holds, padded to the cube's fractal.
    bm_w = bm
    vec_cols = page = None
    if decode is not None:
        bm_w = np.minimum(bm, float(ceil_div(decode.rows, frac) * frac))
        vec_cols = decode.vec_cols.astype(np.float64)
        page = None if decode.page is None else decode.page.astype(np.float64)

    def one_round(cols: FloatArray) -> Round:
        return _round(
            g, r, bm_w, cols, stages, vec_rows, d_split, reuse.dram_fraction, vec_cols, page
        )

    full = one_round(bn)
    tail_cols = np.ceil((sk - (n_kv - 1) * bn_i) / frac) * frac
    tail = one_round(np.asarray(tail_cols, dtype=np.float64))

    rows_v = bm_w / g.vector_per_cube
    prologue = bm_w * g.d * g.elem / r.gm_read + r.handoff_ns
    epilogue = (
        rows_v * g.dv * OUTPUT_FINAL_PASSES / r.vec
        + rows_v * (g.dv * g.elem + LSE_BYTES_PER_ROW) / r.out
    )
    mask_ns = rows_v * bn * MASK_PASSES / r.vec + rows_v * bn * MASK_BYTES_PER_SCORE / r.l2_read

    def block_ns(active: FloatArray) -> FloatArray:
        """One block of a non-causal problem, with `active` cube cores sharing the L2."""
        first = np.where(n_kv > 1, full.chain, tail.chain)
        first = np.maximum(
            first, np.where(n_kv > 1, full.l2_bytes, tail.l2_bytes) * active / r.l2_total
        )
        middle = np.maximum(n_kv - 2, 0) * _period(full, stages, active, r)
        last = np.where(n_kv > 1, _period(tail, stages, active, r), 0.0)
        return prologue + first + middle + last + epilogue

    full_active = np.minimum(blocks, units).astype(np.float64)
    if problem.causal:
        period = _period(full, stages, full_active, r)
        fixed = prologue + epilogue + np.maximum(full.chain - period, 0.0)
        work = heads_total * (n_m * fixed + total_rounds * period + diag_rounds * mask_ns)
        longest = fixed + n_kv * period + np.minimum(np.ceil(bm / bn) + 1, n_kv) * mask_ns
        # FlashAttentionScore balances causal work over the cores by counting valid blocks.
        kernel_ns = np.maximum(work / units, longest)
        waves = wave_schedule(blocks, slots)
    else:
        waves = wave_schedule(blocks, slots)
        last_active = np.asarray(waves.last_wave_ctas, dtype=np.float64)
        kernel_ns = (waves.count - 1) * block_ns(full_active) + block_ns(last_active)
        period = _period(full, stages, full_active, r)

    dram_ns = hbm_bytes / r.dram
    kernel_ns = np.maximum(kernel_ns, dram_ns)
    time_us = kernel_ns * 1e-3 + ASCEND_LAUNCH_US

    # ---- what the cube multiplies beyond the problem (tails rounded up to 16, masked) ------
    if problem.causal:
        computed = total_rounds * bm * bn
    else:
        rows_c = (n_m - 1) * bm + np.ceil((sq - (n_m - 1) * bm_i) / frac) * frac
        computed = rows_c * ((n_kv - 1) * bn + tail_cols)

    # ---- totals per cube core (figures) ----------------------------------------------------
    per_unit = heads_total * total_rounds / units
    busy_ns = kernel_ns

    def total_us(pipe: FloatArray) -> FloatArray:
        return np.asarray(per_unit * pipe * 1e-3)

    l2_round_ns = full.l2_bytes * full_active / r.l2_total
    move = np.maximum.reduce([full.mte2, full.fix, full.vload, full.vstore, l2_round_ns])
    compute = np.maximum(full.cube, full.vec)
    overlap = np.clip(1.0 - np.maximum(period - compute, 0.0) / np.maximum(move, 1e-9), 0, 1)
    bottleneck = _bottlenecks(full, period, stages, full_active, r, kernel_ns, dram_ns, waves.exact)
    figures = {
        "cube_us": total_us(full.cube),
        "vector_us": total_us(full.vec),
        "mte2_gm_to_l1_us": total_us(full.mte2),
        "mte1_l1_to_l0_us": total_us(full.mte1),
        "fixpipe_l0c_out_us": total_us(full.fix),
        "vector_load_us": total_us(full.vload),
        "vector_store_us": total_us(full.vstore),
        "l2_us": np.asarray(heads_total * total_rounds * full.l2_bytes / r.l2_total * 1e-3),
        "exchange_latency_us": np.asarray(
            per_unit * HANDOFFS_PER_ROUND * r.handoff_ns * 1e-3 * np.ones(n)
        ),
        "round_us": np.asarray(period * 1e-3),
        "rounds_per_block": np.asarray(total_rounds / n_m),
        "l2_bytes_per_round": np.asarray(full.l2_bytes),
        "cube_sustained_fraction": np.full(n, r.cube_efficiency),
    }
    return perf(
        problem,
        flops=problem.flops,
        time_us=np.asarray(time_us),
        hbm_bytes=hbm_bytes,
        waves=waves,
        computed_pairs=np.asarray(computed, dtype=np.float64),
        compute_us=total_us(np.maximum(full.cube, full.vec)),
        load_us=total_us(full.mte2),
        overlap=np.asarray(overlap),
        matrix_busy=total_us(full.cube) * 1e3 / busy_ns,
        bottleneck=bottleneck,
        figures=figures,
    )


def _bottlenecks(
    rd: Round,
    period: FloatArray,
    stages: FloatArray,
    active: FloatArray,
    r: Rates,
    kernel_ns: FloatArray,
    dram_ns: FloatArray,
    waves: FloatArray,
) -> list[str]:
    """The dominant cost of each candidate, in words."""
    names_aic = (
        "MTE2 loads into L1 (K, V, P)",
        "MTE1 (L1 -> L0A/L0B)",
        "cube unit",
        "FIXPIPE (S and O out of L0C)",
    )
    names_aiv = ("vector loads (S, O into UB)", "vector unit (softmax)", "vector stores (P)")
    aic_pipe = np.stack([rd.mte2, rd.mte1, rd.cube, rd.fix]).argmax(axis=0)
    aiv_pipe = np.stack([rd.vload, rd.vec, rd.vstore]).argmax(axis=0)
    l2 = rd.l2_bytes * active / r.l2_total
    hand_off = rd.chain / np.maximum(stages, 1)  # read only where stages >= 2
    rules = [
        (dram_ns >= kernel_ns * 0.999, "HBM bandwidth"),
        (waves < 0.5, "too few blocks to fill the AI cores"),
        (stages < 2, "no pipelining (single-buffered): cube and vector wait on each other"),
        (l2 >= period * 0.999, "L2 bandwidth (the cube-vector exchange)"),
        (
            (hand_off >= period * 0.999) & (hand_off > np.maximum(rd.aic, rd.aiv)),
            "cube-vector hand-off latency",
        ),
    ]
    # the busier core's busiest pipe
    busiest = np.where(rd.aic >= rd.aiv, aic_pipe, len(names_aic) + aiv_pipe)
    return first_rule_words(rules, (*names_aic, *names_aiv), busiest)


def reason_lines(table: CandidateTable, i: int) -> list[str]:
    """The family's lines of configuration i's reasons."""
    res = table.res
    assert isinstance(res, AscendResources)
    device = ascend_device(table.hardware)
    g = geometry(device, table.problem)
    cfg = table.cfg
    bm, bn = int(cfg["block_m"][i]), int(cfg["block_n"][i])
    f = table.perf.figures
    rows_v = bm // g.vector_per_cube
    base = min(bn, CUBE_BASE_COLUMNS)
    buffers = ", ".join(
        f"{u.name.upper() if u.name != 'workspace' else 'workspace'} {kib(u.used)} of "
        f"{kib(u.capacity)}"
        for u in res.uses(i)
    )
    per_vector = "each vector core takes" if g.split else "the vector unit takes"
    return [
        f"S2 tile {bn} = {ceil_div(bn, base)} cube base block(s) of {bm}x{base}; {per_vector} "
        f"{rows_v} rows in passes of {int(cfg['vec_rows'][i])}",
        f"one round {f['round_us'][i]:.2f} us; cube busy {table.perf.mma_utilization[i]:.0%} "
        f"of the kernel; {f['rounds_per_block'][i]:.1f} rounds per block",
        f"buffers: {buffers}",
    ]


def confidence_note(device: AscendDevice, kernel_modelled: str | None = None) -> str:
    """The answer's confidence note: the unconfirmed catalog inputs this prediction used, and
    the kernel modelled (the forward kernels' by default)."""
    core = device.ascend
    used = set(MODEL_INPUTS) | {f"ascend.{f}" for f in required_rates(core)}
    unconfirmed = [f for f in core.unconfirmed_fields if f in used]
    modelled = kernel_name(device) if kernel_modelled is None else kernel_modelled
    kernel = f"kernel modelled on {device.name}: {modelled}"
    if not unconfirmed:
        return f"confidence: every catalog input of this prediction is confirmed; {kernel}"
    cube = (
        ""
        if core.cube_fp16_gemm_measured_tflops is not None
        else "; no measured GEMM rate, so the cube is taken to sustain its peak"
    )
    return (
        f"confidence: this prediction uses {len(unconfirmed)} unconfirmed catalog input(s) of "
        f"{device.name}: {', '.join(unconfirmed)}{cube}; {kernel}"
    )
