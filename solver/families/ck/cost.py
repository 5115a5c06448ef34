"""The cost model of the `ck` family: predicted time of every CK tile FMHA forward instance on
a rocm device, with its parts (docs/model.md 19.5, where every formula and constant has its
source or is marked an estimate).

Units: cycles of the engine clock inside this module (microseconds in the result); bytes;
rates per CU per cycle. One *iteration* is one kN0 block of keys for one workgroup:

    MFMA      M = (2 kM0 kN0 d + 2 kM0 kN0 kN1) / (R_mfma(dtype) x MFMA_SUSTAINED)
    VALU      V = kM0 kN0 SOFTMAX_VALU_OPS / R_valu + kM0 kN0 / R_exp
                  + kM0 kN1 / R_valu (rescale O) + kN0 kN1 V_SHUFFLE / R_valu (not trload)
    LDS       L = ((w + 1) (kN0 d + kN0 kN1) e [+ 2 kM0 d e for qs]) / B_lds
    stalls    S = syncs x BARRIER_CYCLES + CHAIN_CYCLES [+ exposed K loads for qr, qs]

With r workgroups resident per CU (occupancy, `resources.py`), wa = r w / SIMDs waves per SIMD
and a share min(1, r w / SIMDs) of the SIMDs busy, the CU takes for one iteration of each:

    T = max(rM, rV, rL) / s + (1 - phi) (rM + rV + rL - max) / s + (1 - phi) S,
    phi = 1 - 1 / max(wa, 1)          other waves fill one wave's dependent phases

and the L2 bound r x bytes x CUs / (L2 B/clk x achievable). Workgroups (ceil(sq / kM0) x heads
x ceil(dv / kN1)) run in waves over the CUs; causal work is spread as it comes (no persistent
scheduler: half a longest workgroup is added for the uneven finish). K/V reuse is per XCD
(workgroups go round-robin to the XCDs, each with its own L2); the Infinity Cache takes
repeated K/V reads across XCDs while the heads in flight fit in it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import Perf, causal_iterations, forward_hbm_bytes, kv_reuse, perf, wave_schedule
from ...family import kib
from ...hardware import RocmDevice
from ...problem import DType
from ...space import FloatArray, IntArray, ceil_div
from .resources import CkResources, resources_of
from .shape import BLOCK_K1, Dims, Pipeline, rocm_device

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# ---- constants (docs/model.md 19.5; estimates unless a source is named) -----------------------
# Share of the MFMA peak a dependent attention loop sustains (estimate: GEMM libraries reach
# about 0.7-0.8 of the MI300X peak; an attention tile's short K loops reach less).
MFMA_SUSTAINED = 0.7
# VALU instructions per score besides the exp: scale and subtract the max (one FMA), the row
# max, the row sum, the conversion of P to the input dtype (the online softmax's steps).
SOFTMAX_VALU_OPS = 4.0
# VALU instructions per V element per iteration to lay V out as gemm1's B operand (a register
# shuffle); gfx950's transpose loads (qr_async_trload) read it in place (estimate).
V_SHUFFLE_OPS = 1.0
# Cost of one workgroup barrier (block_sync_lds: s_waitcnt lgkmcnt(0) + s_barrier), cycles
# (estimate).
BARRIER_CYCLES = 64.0
# The synchronous pipelines (qr, qs) wait for each K chunk's global load before its LDS store:
# this share of the chunk's L2 latency stays exposed per chunk (one prefetch in registers).
L2_LATENCY_CYCLES = 500.0  # an L2 hit's latency, cycles (estimate; no AMD figure retrieved)
SYNC_LOAD_EXPOSED = 0.5  # estimate
# One iteration's dependent chain beyond its work: gemm0's last MFMA result, the row max and
# sum across lanes, the barriers between gemm0, the softmax and gemm1, the loop; other waves on
# the SIMD hide it as they hide the barriers (cycles, estimate).
CHAIN_CYCLES = 256.0
# A HIP kernel launch beyond its work, microseconds (estimate; CUDA's is 2.5 us).
ROCM_LAUNCH_US = 4.0
# Extra VALU instruction per score on a tile that crosses the causal diagonal (the mask select).
MASK_OPS = 1.0
LSE_BYTES_PER_ROW = 4


def _rates(device: RocmDevice, dtype: DType) -> tuple[float, float, float]:
    """MFMA FLOP, VALU instructions (64-lane ops) and exp2 results per cycle per CU."""
    r = device.rocm
    clock_hz = r.engine_clock_mhz * 1e6
    mfma = r.mfma_tflops(dtype.bytes, bf16=dtype is DType.BF16) * 1e12 / (r.cu_count * clock_hz)
    # packed FP32 FMA: 4 FLOP per lane and instruction; the softmax's instructions are unpacked
    valu = r.valu_fp32_tflops * 1e12 / (4.0 * r.cu_count * clock_hz) * r.wavefront_lanes / 64.0
    return mfma, valu, float(r.transcendental_ops_per_clk_per_cu)


def evaluate(ev: Evaluation) -> Perf:
    """Predicted time and its parts of every configuration (docs/model.md 19.5)."""
    device = rocm_device(ev.hardware)
    rocm = device.rocm
    problem = ev.problem
    res = resources_of(ev)
    dims = Dims.of(problem)
    cfg = ev.cfg
    e = float(dims.elem)
    d, dv = float(dims.d), float(dims.dv)
    bm_i, bn_i, bn1_i = cfg["block_m"], cfg["block_n"], cfg["block_n1"]
    bm, bn, bn1 = (x.astype(np.float64) for x in (bm_i, bn_i, bn1_i))
    bk0 = cfg["block_k0"].astype(np.float64)
    warps = cfg["num_warps"].astype(np.float64)
    pipe = cfg["pipeline"]
    qs = pipe == Pipeline.QS
    trload = pipe == Pipeline.QR_ASYNC_TRLOAD
    asynchronous = (pipe == Pipeline.QR_ASYNC) | trload
    r_mfma, r_valu, r_exp = _rates(device, problem.dtype)

    # ---- one iteration of one workgroup, cycles -------------------------------------------
    scores = bm * bn
    mfma = (2.0 * scores * d + 2.0 * scores * bn1) / (r_mfma * MFMA_SUSTAINED)
    shuffle = np.where(trload, 0.0, V_SHUFFLE_OPS) * bn * bn1
    valu = (scores * SOFTMAX_VALU_OPS + bm * bn1 + shuffle) / r_valu + scores / r_exp
    kv_tile = (bn * d + bn * bn1) * e
    lds_bytes = (warps + 1.0) * kv_tile + np.where(qs, 2.0 * bm * d * e, 0.0)
    lds = lds_bytes / rocm.lds_bandwidth_bytes_per_clk_per_cu
    chunks = d / bk0 + bn / BLOCK_K1
    syncs = np.where(asynchronous, 1.0, 2.0) * chunks
    exposed_load = np.where(asynchronous, 0.0, SYNC_LOAD_EXPOSED * L2_LATENCY_CYCLES * d / bk0)
    stall = syncs * BARRIER_CYCLES + exposed_load + CHAIN_CYCLES
    global_bytes = kv_tile + np.where(qs, bm * d * e, 0.0)  # qs re-reads Q every iteration

    # ---- occupancy: the CU's round over its resident workgroups ---------------------------
    resident = res.occupancy.workgroups_per_cu.astype(np.float64)
    resident = np.maximum(resident, 1.0)
    l2_per_cu = (
        device.memory.l2_bandwidth_bytes_per_clk
        * device.memory.l2_achievable_fraction
        / rocm.cu_count
    )

    def round_cycles(r: FloatArray) -> FloatArray:
        """One iteration of each of r resident workgroups on one CU, cycles."""
        waves = r * warps / rocm.simds_per_cu
        busy = np.minimum(waves, 1.0)
        phi = 1.0 - 1.0 / np.maximum(waves, 1.0)
        parts = np.stack([r * mfma / busy, r * valu / busy, r * lds])
        top = parts.max(axis=0)
        compute = top + (1.0 - phi) * (parts.sum(axis=0) - top) + (1.0 - phi) * stall
        return np.asarray(np.maximum(compute, r * global_bytes / l2_per_cu))

    full_round = round_cycles(resident)

    # ---- workgroups over the CUs -----------------------------------------------------------
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    heads_total = problem.batch * problem.heads
    n_m = ceil_div(sq, bm_i)
    n_kv = ceil_div(sk, bn_i)
    n_n1 = ceil_div(dims.dv, bn1_i)
    groups = n_m * heads_total * n_n1
    slots = np.asarray(rocm.cu_count * res.occupancy.workgroups_per_cu, dtype=np.int64)
    slots = np.maximum(slots, 1)
    waves = wave_schedule(groups, slots)
    head_io = (bm * d * e + bm * bn1 * e + bm * LSE_BYTES_PER_ROW) / (
        device.memory.achievable_dram_bytes_per_s / (rocm.cu_count * rocm.engine_clock_mhz * 1e6)
    )
    if problem.causal:
        total, diagonal = causal_iterations(n_m, bm, bn, n_kv, sk - sq)
        mask = diagonal * scores * MASK_OPS / r_valu
        work = heads_total * n_n1 * (total * full_round / resident + mask + n_m * head_io)
        longest = n_kv * full_round + head_io
        # blocks are launched in grid order, not balanced: the CUs finish unevenly, on average
        # half of a longest workgroup's time after the mean
        kernel = np.maximum(work / rocm.cu_count + 0.5 * longest, longest)
        iterations = total / n_m
    else:
        last = np.asarray(waves.last_wave_ctas, dtype=np.float64)
        last_resident = np.maximum(np.ceil(last / rocm.cu_count), 1.0)
        per_group = n_kv * full_round + head_io * resident
        last_group = n_kv * round_cycles(np.minimum(last_resident, resident)) + head_io
        kernel = (waves.count - 1.0) * per_group + last_group
        iterations = n_kv.astype(np.float64)

    # ---- DRAM: K/V reuse per XCD, the Infinity Cache across XCDs ---------------------------
    xcds = rocm.xcd_count
    kv_head_bytes = float(sk) * (problem.head_dim + problem.head_dim_v_eff) * e
    n_m_xcd = np.asarray(ceil_div(n_m, xcds), dtype=np.int64)
    reuse = kv_reuse(
        problem,
        kv_head_bytes,
        bn * (d + dv) * e,
        n_m_xcd,
        iterations * n_m_xcd / np.maximum(n_kv, 1),
        np.maximum(slots // xcds, 1),
        rocm.l2_per_xcd_bytes,
    )
    fetches = reuse.dram_reads_per_kv_head * np.minimum(n_m, xcds)
    heads_in_flight = np.minimum(float(heads_total), np.ceil(slots / n_m) + 1.0)
    ic_miss = np.clip(
        1.0 - rocm.infinity_cache_bytes / np.maximum(heads_in_flight * kv_head_bytes, 1.0), 0.0, 1.0
    )
    dram_reads = 1.0 + (np.maximum(fetches, 1.0) - 1.0) * ic_miss
    hbm_bytes = forward_hbm_bytes(problem, problem.head_dim, problem.head_dim_v_eff, dram_reads)
    dram_cycles = (
        hbm_bytes / device.memory.achievable_dram_bytes_per_s * rocm.engine_clock_mhz * 1e6
    )
    kernel = np.maximum(kernel, dram_cycles)
    time_us = kernel / rocm.engine_clock_mhz + ROCM_LAUNCH_US

    # ---- figures ----------------------------------------------------------------------------
    if problem.causal:
        computed = causal_iterations(n_m, bm, bn, n_kv, sk - sq)[0] * scores
    else:
        computed = (n_m * bm_i * n_kv * bn_i).astype(np.float64)
    per_cu = heads_total * n_n1 * n_m * iterations / rocm.cu_count
    cycles_to_us = 1.0 / rocm.engine_clock_mhz
    bottleneck = _bottlenecks(
        resident,
        warps,
        mfma,
        valu,
        lds,
        full_round,
        kernel,
        dram_cycles,
        waves.exact,
        rocm.simds_per_cu,
    )
    figures = {
        "mfma_us": np.asarray(per_cu * mfma * cycles_to_us),
        "valu_us": np.asarray(per_cu * valu * cycles_to_us),
        "lds_us": np.asarray(per_cu * lds * cycles_to_us),
        "round_us": np.asarray(full_round * cycles_to_us),
        "iterations_per_workgroup": np.asarray(iterations),
        "waves_per_simd": np.asarray(resident * warps / rocm.simds_per_cu),
        "workgroups_per_cu": resident,
        "head_dim_v_chunks": n_n1.astype(np.float64),
    }
    busy = per_cu * mfma * MFMA_SUSTAINED / np.maximum(kernel, 1e-9)
    return perf(
        problem,
        flops=problem.flops,
        time_us=np.asarray(time_us),
        hbm_bytes=np.asarray(hbm_bytes),
        waves=waves,
        computed_pairs=np.asarray(computed, dtype=np.float64),
        compute_us=np.asarray(per_cu * np.maximum(mfma, valu) * cycles_to_us),
        load_us=np.asarray(per_cu * lds * cycles_to_us),
        overlap=np.clip(
            1.0
            - (full_round - np.maximum(resident * mfma, resident * valu))
            / np.maximum(full_round, 1e-9),
            0.0,
            1.0,
        ),
        matrix_busy=np.asarray(busy),
        bottleneck=bottleneck,
        figures=figures,
    )


# The dominant unit of an iteration, and how the round around it is spent (`_bottlenecks`).
UNITS = ("MFMA (matrix cores)", "softmax on the VALU", "LDS bandwidth")
MANNERS = (
    "",
    ", with MFMA and softmax serialised (one wave per SIMD)",
    ", with exposed barriers and loads",
)
WHOLE = ("HBM bandwidth", "too few workgroups to fill the CUs")
LABELS = WHOLE + tuple(unit + manner for manner in MANNERS for unit in UNITS)


def _bottlenecks(
    resident: FloatArray,
    warps: FloatArray,
    mfma: FloatArray,
    valu: FloatArray,
    lds: FloatArray,
    full_round: FloatArray,
    kernel: FloatArray,
    dram: FloatArray,
    waves: FloatArray,
    simds: int,
) -> list[str]:
    """The dominant cost of each candidate, in words (one of `LABELS`)."""
    stacked = np.stack([mfma, valu, lds])
    unit = stacked.argmax(axis=0)
    serial = (resident * warps / simds <= 1.0) & (
        np.minimum(mfma, valu) > 0.25 * np.maximum(mfma, valu)
    )
    exposed = resident * stacked.max(axis=0) < 0.8 * full_round
    manner = np.where(serial, 1, np.where(exposed, 2, 0))
    code = len(WHOLE) + manner * len(UNITS) + unit
    code = np.where(waves < 0.5, 1, code)
    code = np.where(dram >= kernel * 0.999, 0, code)
    return [LABELS[k] for k in code.tolist()]


def reason_lines(table: CandidateTable, i: int) -> list[str]:
    """The family's lines of configuration i's reasons."""
    res = table.res
    assert isinstance(res, CkResources)
    f = table.perf.figures
    occ = res.occupancy
    return [
        f"{int(occ.workgroups_per_cu[i])} workgroup(s) per CU, {f['waves_per_simd'][i]:g} waves "
        f"per SIMD (limited by {occ.limiter[i]}); LDS {kib(res.lds_allocated[i])}, "
        f"{int(res.register_total[i])} VGPR+AGPR per lane (about {int(res.regs.demand[i])} live)",
        f"one round {f['round_us'][i]:.3f} us over {f['iterations_per_workgroup'][i]:.1f} "
        f"iterations per workgroup; MFMA {f['mfma_us'][i]:.1f} us, VALU {f['valu_us'][i]:.1f} us, "
        f"LDS {f['lds_us'][i]:.1f} us per CU",
    ]


def confidence_note(device: RocmDevice) -> str:
    """The answer's confidence note: the unconfirmed catalog inputs this prediction used."""
    used = [
        f
        for f in device.rocm.unconfirmed_fields
        if f.split(".")[1] not in ("max_sgprs_per_wave", "sgpr_alloc_granule_regs")
    ]
    return (
        f"confidence: this prediction uses {len(used)} unconfirmed catalog input(s) of "
        f"{device.name}: {', '.join(used)}; the MFMA sustained share ({MFMA_SUSTAINED}), the "
        "softmax's instruction count and the register estimate are model estimates "
        "(docs/model.md 19.5)"
        if used
        else "confidence: every catalog input of this prediction is confirmed"
    )


def tie_iterations(ev: Evaluation) -> IntArray:
    """(query block, key block) tiles of one head, times the head_dim_v chunks."""
    dims = Dims.of(ev.problem)
    cfg = ev.cfg
    p = ev.problem
    tiles = ceil_div(p.seq_len, cfg["block_m"]) * ceil_div(p.seq_len_kv_eff, cfg["block_n"])
    return np.asarray(tiles * ceil_div(dims.dv, cfg["block_n1"]), dtype=np.int64)
