"""How an attention kernel's workgroups spend a rocm device's CUs (docs/model.md 19.5), for any
kernel that states one iteration of one workgroup (`Iteration`: one block of keys, in engine
cycles of each unit).

One CU's round over r resident workgroups of w waves (wa = r w / SIMDs waves per SIMD, a share
s = min(1, wa) of the SIMDs busy; g = r min(w, SIMDs) / SIMDs independent instruction streams
per SIMD and phi = beta (1 - 1 / max(g, 1)): the waves of other workgroups fill part of one
stream's dependent phases, beta of what streams in independent phases would (`WORKGROUP_OVERLAP`,
fitted to measured throughput: docs/model.md 19.5), while the waves of one workgroup pass the
same barriers every iteration and sit in the same phase, so they do not fill each other's):

    T(r) = max(rM, rV, rL') / s + (1 - phi)(rM + rV + rL' - max) / s + (1 - phi) S,
           at least r x (L2 bytes / L2 share + HBM bytes / HBM share) of one CU,
    L' = L / LDS_SUSTAINED   (the LDS at the loop's sustained share of its peak)

(the HBM bytes: the share of the K/V tile reads HBM serves, `kv_traffic`: high when few query
blocks share a head's K/V, near 0 for long sequences).

The workgroups run in waves over CUs x r slots (non-causal: full waves, then the last wave at
its own residency); causal work is summed and spread over the CUs, plus half a longest
workgroup for the uneven finish of blocks launched in grid order (at least the longest), plus
a mask instruction per score of a diagonal tile, plus every workgroup's prologue (the HBM
latency of its Q and first K/V tile), which the resident workgroups wait out together. K/V
reuse is per XCD (workgroups go round-robin to the XCDs, each with its own L2: the shared
`kv_reuse` on ceil(n_m / XCDs) blocks per XCD); repeated reads across XCDs hit the Infinity
Cache while the heads in flight fit in it; the HBM floor is the bytes over the achievable DRAM
bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...cost import (
    Perf,
    Waves,
    causal_iterations,
    forward_hbm_bytes,
    kv_reuse,
    perf,
    wave_schedule,
)
from ...hardware import RocmDevice
from ...problem import AttentionProblem
from ...space import FloatArray, IntArray, ceil_div
from .device import LDS_SUSTAINED, MFMA_SUSTAINED, ROCM_LAUNCH_US, WORKGROUP_OVERLAP

# VALU instructions per score besides the exp: scale and subtract the max (one FMA), the row
# max, the row sum, the conversion of P to the input dtype (the online softmax's steps).
SOFTMAX_VALU_OPS = 4.0
# The online softmax's two row reductions an iteration (max before the exp, sum after), each
# across the lanes that share a row of S in the MFMA's transposed result layout (docs/model.md
# 19.5, `row_reduction_steps`).
ROW_REDUCTIONS = 2.0
# Bytes a lane one cross-lane shuffle moves through the LDS unit (ds_bpermute_b32 /
# ds_swizzle_b32: a dword a lane).
SHUFFLE_BYTES_PER_LANE = 4.0
# Cost of one workgroup barrier (s_waitcnt lgkmcnt(0) + s_barrier), cycles (estimate).
BARRIER_CYCLES = 64.0
L2_LATENCY_CYCLES = 500.0  # an L2 hit's latency, cycles (estimate; no AMD figure retrieved)
# An HBM access's latency, cycles: taken as twice an L2 hit's (estimate; no AMD figure retrieved).
# A workgroup's Q tile is read once, so it comes from HBM, and no MFMA can start before it and the
# first K/V tile are in: this latency opens every workgroup's life (`prologue`).
DRAM_LATENCY_CYCLES = 2.0 * L2_LATENCY_CYCLES
# One iteration's dependent chain beyond its work: the first GEMM's last MFMA result, the row
# max and sum across lanes, the barriers between the first GEMM, the softmax and the second,
# the loop; other waves on the SIMD hide it as they hide the barriers (cycles, estimate).
CHAIN_CYCLES = 256.0
# Extra VALU instruction per score on a tile that crosses the causal diagonal (the mask select).
MASK_OPS = 1.0
LSE_BYTES_PER_ROW = 4


@dataclass(frozen=True)
class Iteration:
    """One iteration (one block of keys) of one workgroup, arrays over the candidates."""

    mfma: FloatArray  # cycles of the MFMA units
    valu: FloatArray  # cycles of the VALU (softmax, rescale, shuffles)
    lds: FloatArray  # cycles of LDS bandwidth
    stall: FloatArray  # exposed cycles: barriers, the dependent chain, exposed loads
    global_bytes: FloatArray  # bytes read from memory (K and V, anything re-read)
    hbm_bytes: FloatArray  # the part of them served by HBM (`KvTraffic.hbm_share` of K/V)


def hbm_bytes_per_clk_per_cu(device: RocmDevice) -> float:
    """A CU's share of the achievable HBM bandwidth, bytes per engine cycle."""
    rocm = device.rocm
    return device.memory.achievable_dram_bytes_per_s / (rocm.cu_count * rocm.engine_clock_mhz * 1e6)


def l2_bytes_per_clk_per_cu(device: RocmDevice) -> float:
    """A CU's share of the achievable L2 bandwidth, bytes per engine cycle."""
    memory = device.memory
    return memory.l2_bandwidth_bytes_per_clk * memory.l2_achievable_fraction / device.rocm.cu_count


def independent_streams(device: RocmDevice, warps: FloatArray, r: FloatArray) -> FloatArray:
    """Instruction streams per SIMD that can be in different phases of an iteration: one per
    resident workgroup with a wave on the SIMD, g = r min(w, SIMDs) / SIMDs. The waves of one
    workgroup are not independent: the kernel fences each iteration's LDS tiles with workgroup
    barriers (CK's pipelines call block_sync_lds around every gemm0 and gemm1 chunk,
    ROCm/composable_kernel@8e22e1a block_fmha_pipeline_qr_ks_vs.hpp; Triton's loop two barriers
    an iteration), so between two barriers all of them run the same phase; CK's one pipeline that
    offsets two wave groups by a phase, so that one group's MFMAs meet the other's softmax, is
    the v3 kernel's explicit schedule (block_fmha_fwd_v3_pipeline.hpp, CoreLoopScheduler per
    WaveGroup), the only CK instance generated with 8 waves (fmha_fwd.py, the gfx950 rule
    bm0 = 256 with 8 warps exactly when the pipeline is qr_async_trload_v3; docs/model.md
    19.5)."""
    simds = device.rocm.simds_per_cu
    return np.asarray(r * np.minimum(warps, simds) / simds)


def row_reduction_steps(
    rows_per_wave: FloatArray, warps: FloatArray, mfma: FloatArray, lanes: int
) -> FloatArray:
    """Wave-wide cross-lane shuffle steps a workgroup issues per iteration for the softmax's row
    max and row sum (docs/model.md 19.5): in the MFMA's transposed result layout (CK's gemm0,
    Triton's chained dots) a row of an m x m tile lies in lanes / m lanes of the wavefront (64
    lanes on CDNA3/CDNA4: 2 for 32x32, 4 for 16x16), so each of the rows_per_wave / m rows a
    lane holds takes log2(lanes / m) shuffle stages per reduction, each one shuffle through the
    LDS unit and one VALU op of the whole wave: 2 w (rows_per_wave / m) log2(lanes / m)."""
    return np.asarray(ROW_REDUCTIONS * warps * rows_per_wave / mfma * np.log2(lanes / mfma))


def cu_round(device: RocmDevice, it: Iteration, warps: FloatArray, r: FloatArray) -> FloatArray:
    """One iteration of each of r resident workgroups on one CU, cycles (T(r) above); the
    bytes bound reads the HBM share of them at the CU's share of HBM, the rest at its L2
    share."""
    streams = np.maximum(independent_streams(device, warps, r), 1.0)
    phi = WORKGROUP_OVERLAP * (1.0 - 1.0 / streams)
    return overlapped_round(device, it, warps, r, phi, phi)


def overlapped_round(
    device: RocmDevice,
    it: Iteration,
    warps: FloatArray,
    r: FloatArray,
    overlap: FloatArray,
    hidden_stall: FloatArray,
) -> FloatArray:
    """T(r) with the non-binding parts overlapped by `overlap` and the stalls hidden by
    `hidden_stall` (both phi in `cu_round`, which states them), at least the bytes bound r x
    (L2 bytes / L2 share + HBM bytes / HBM share) of one CU, cycles."""
    busy = np.minimum(r * warps / device.rocm.simds_per_cu, 1.0)
    parts = np.stack([r * it.mfma / busy, r * it.valu / busy, r * it.lds / LDS_SUSTAINED])
    top = parts.max(axis=0)
    compute = top + (1.0 - overlap) * (parts.sum(axis=0) - top) + (1.0 - hidden_stall) * it.stall
    memory = (it.global_bytes - it.hbm_bytes) / l2_bytes_per_clk_per_cu(device) + it.hbm_bytes / (
        hbm_bytes_per_clk_per_cu(device)
    )
    return np.asarray(np.maximum(compute, r * memory))


@dataclass(frozen=True)
class MaskedIterations:
    """The K/V iterations of a masked kernel's workgroups (a block mask's, arrays over the
    candidates): `total` over the workgroups of one head, `diagonal` those that apply the mask
    (weighted by its cost relative to the causal mask's), `longest` the most one workgroup runs,
    whether the work is uneven the way a causal triangle is (`imbalanced`), and `partial` the
    iterations of the masked loop, unweighted (`diagonal` at the causal mask's weight)."""

    total: FloatArray
    diagonal: FloatArray
    longest: FloatArray
    imbalanced: bool
    partial: FloatArray


@dataclass(frozen=True)
class Grid:
    """The workgroups over the CUs."""

    kernel: FloatArray  # cycles of the whole grid, before the HBM floor
    iterations: FloatArray  # iterations of one workgroup (the mean, causal)
    waves: Waves
    slots: IntArray  # CUs x resident workgroups
    full_round: FloatArray  # cycles of one round at full residency
    resident: FloatArray  # workgroups per CU, at least 1
    n_m: IntArray  # query blocks of one head
    n_kv: IntArray  # key blocks


def grid_cycles(
    device: RocmDevice,
    problem: AttentionProblem,
    block_m: IntArray,
    block_n: IntArray,
    chunks: IntArray,
    workgroups_per_cu: IntArray,
    round_of: Callable[[FloatArray], FloatArray],
    head_io: FloatArray,
    r_valu: float,
    masked: MaskedIterations | None = None,
    masked_loop_extra: FloatArray | None = None,
) -> Grid:
    """The grid's cycles: ceil(sq / block_m) x batch x heads x `chunks` workgroups (chunks: of
    head_dim_v, where a workgroup owns one), each walking ceil(sk / block_n) key blocks, or the
    iterations `masked` states (a block mask's: its work spread over the CUs as the causal
    triangle's is, the uneven finish added where it is imbalanced); `round_of(r)` is the CU's
    round at r resident, `head_io` a workgroup's own Q/O/LSE traffic in cycles;
    `masked_loop_extra` what one iteration of a kernel's masked loop costs a workgroup beyond
    `round_of`'s iteration, cycles (a spill only that loop has: the Triton kernels' diagonal
    loop, docs/model.md 19.10)."""
    rocm = device.rocm
    resident = np.maximum(workgroups_per_cu.astype(np.float64), 1.0)
    full_round = round_of(resident)
    bm = block_m.astype(np.float64)
    bn = block_n.astype(np.float64)
    scores = bm * bn
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    heads_total = problem.batch * problem.heads
    n_m = ceil_div(sq, block_m)
    n_kv = ceil_div(sk, block_n)
    groups = n_m * heads_total * chunks
    slots = np.asarray(rocm.cu_count * workgroups_per_cu, dtype=np.int64)
    slots = np.maximum(slots, 1)
    waves = wave_schedule(groups, slots)
    # the prologue's latency: the r resident workgroups wait for theirs together, once per slot
    fill = DRAM_LATENCY_CYCLES
    extra = 0.0 if masked_loop_extra is None else masked_loop_extra
    if masked is not None:
        mask = masked.diagonal * scores * MASK_OPS / r_valu + masked.partial * extra
        own = n_m * (head_io + fill / resident)
        work = heads_total * chunks * (masked.total * full_round / resident + mask + own)
        longest = masked.longest * full_round + head_io + fill
        uneven = 0.5 * longest if masked.imbalanced else 0.0
        kernel = np.maximum(work / rocm.cu_count + uneven, longest)
        iterations = masked.total / n_m
    elif problem.causal:
        total, diagonal = causal_iterations(n_m, bm, bn, n_kv, sk - sq)
        mask = diagonal * (scores * MASK_OPS / r_valu + extra)
        own = n_m * (head_io + fill / resident)
        work = heads_total * chunks * (total * full_round / resident + mask + own)
        longest = n_kv * full_round + head_io + fill
        # blocks are launched in grid order, not balanced: the CUs finish unevenly, on average
        # half of a longest workgroup's time after the mean
        kernel = np.maximum(work / rocm.cu_count + 0.5 * longest, longest)
        iterations = total / n_m
    else:
        last = np.asarray(waves.last_wave_ctas, dtype=np.float64)
        last_resident = np.maximum(np.ceil(last / rocm.cu_count), 1.0)
        per_group = n_kv * full_round + head_io * resident + fill
        last_group = n_kv * round_of(np.minimum(last_resident, resident)) + head_io + fill
        kernel = (waves.count - 1.0) * per_group + last_group
        iterations = n_kv.astype(np.float64)
    return Grid(
        np.asarray(kernel),
        np.asarray(iterations),
        waves,
        slots,
        np.asarray(full_round),
        resident,
        np.asarray(n_m),
        np.asarray(n_kv),
    )


def head_io_cycles(
    device: RocmDevice, block_m: FloatArray, d: float, out_cols: FloatArray, e: float
) -> FloatArray:
    """A workgroup's own DRAM traffic (its Q rows, its O columns, the LSE), in cycles of its
    share of the achievable bandwidth."""
    return np.asarray(
        (block_m * d * e + block_m * out_cols * e + block_m * LSE_BYTES_PER_ROW)
        / hbm_bytes_per_clk_per_cu(device)
    )


def mean_iterations(
    problem: AttentionProblem,
    block_m: IntArray,
    block_n: IntArray,
    masked: MaskedIterations | None = None,
) -> tuple[IntArray, IntArray, FloatArray]:
    """Query blocks of one head, key blocks, and the mean key blocks a workgroup walks (all of
    K/V, the causal triangle's, or a block mask's)."""
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    n_m = np.asarray(ceil_div(sq, block_m))
    n_kv = np.asarray(ceil_div(sk, block_n))
    if masked is not None:
        iterations = masked.total / n_m
    elif problem.causal:
        bm, bn = block_m.astype(np.float64), block_n.astype(np.float64)
        iterations = causal_iterations(n_m, bm, bn, n_kv, sk - sq)[0] / n_m
    else:
        iterations = n_kv.astype(np.float64)
    return n_m, n_kv, np.asarray(iterations)


@dataclass(frozen=True)
class KvTraffic:
    """Where each candidate's K/V tiles come from."""

    hbm_reads: FloatArray  # HBM reads of each KV head's K/V, in whole heads
    hbm_share: FloatArray  # share of the K/V tile reads that HBM serves (the rest: L2, the IC)


def kv_traffic(
    device: RocmDevice,
    problem: AttentionProblem,
    e: float,
    kv_tile_bytes: FloatArray,
    block_m: IntArray,
    block_n: IntArray,
    workgroups_per_cu: IntArray,
    masked: MaskedIterations | None = None,
) -> KvTraffic:
    """K/V reuse per XCD, the Infinity Cache across XCDs (module docstring); `kv_tile_bytes`
    the bytes of one block of keys' K and V. The HBM share is the HBM reads over all the tile
    reads of a KV head (its query heads' workgroups each walk their key blocks): about 1 /
    (query blocks) for short sequences, where each XCD's workgroups of a head run out of step
    with few tiles to share, near 0 for long ones."""
    rocm = device.rocm
    xcds = rocm.xcd_count
    n_m, n_kv, iterations = mean_iterations(problem, block_m, block_n, masked)
    slots = np.maximum(np.asarray(rocm.cu_count * workgroups_per_cu, dtype=np.int64), 1)
    heads_total = problem.batch * problem.heads
    group = problem.heads // problem.kv_heads_eff
    kv_head_bytes = float(problem.seq_len_kv_eff) * (problem.head_dim + problem.head_dim_v_eff) * e
    n_m_xcd = np.asarray(ceil_div(n_m, xcds), dtype=np.int64)
    reuse = kv_reuse(
        problem,
        kv_head_bytes,
        kv_tile_bytes,
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
    hbm_reads = 1.0 + (np.maximum(fetches, 1.0) - 1.0) * ic_miss
    tile_reads = group * iterations * n_m / np.maximum(n_kv, 1)
    share = np.clip(hbm_reads / np.maximum(tile_reads, 1.0), 0.0, 1.0)
    return KvTraffic(np.asarray(hbm_reads), np.asarray(share))


@dataclass(frozen=True)
class Dram:
    """The HBM traffic and its floor."""

    hbm_bytes: FloatArray
    cycles: FloatArray


def dram_floor(device: RocmDevice, problem: AttentionProblem, traffic: KvTraffic) -> Dram:
    """The HBM floor: Q read and O written once, each KV head's K/V `traffic.hbm_reads`
    times, over the achievable HBM bandwidth."""
    hbm_bytes = forward_hbm_bytes(
        problem, problem.head_dim, problem.head_dim_v_eff, traffic.hbm_reads
    )
    rocm = device.rocm
    cycles = hbm_bytes / device.memory.achievable_dram_bytes_per_s * rocm.engine_clock_mhz * 1e6
    return Dram(np.asarray(hbm_bytes), np.asarray(cycles))


# The dominant unit of an iteration, and how the round around it is spent (`bottlenecks`).
UNITS = ("MFMA (matrix cores)", "softmax on the VALU", "LDS bandwidth")
MANNERS = (
    "",
    ", with MFMA and softmax serialised (one workgroup's waves per SIMD)",
    ", with exposed barriers and loads",
)
WHOLE = ("HBM bandwidth", "too few workgroups to fill the CUs")
LABELS = WHOLE + tuple(unit + manner for manner in MANNERS for unit in UNITS)


def bottlenecks(
    device: RocmDevice,
    it: Iteration,
    warps: FloatArray,
    grid: Grid,
    kernel: FloatArray,
    dram: FloatArray,
) -> list[str]:
    """The dominant cost of each candidate, in words (one of `LABELS`)."""
    resident = grid.resident
    stacked = np.stack([it.mfma, it.valu, it.lds / LDS_SUSTAINED])
    unit = stacked.argmax(axis=0)
    serial = (independent_streams(device, warps, resident) <= 1.0) & (
        np.minimum(it.mfma, it.valu) > 0.25 * np.maximum(it.mfma, it.valu)
    )
    exposed = resident * stacked.max(axis=0) < 0.8 * grid.full_round
    manner = np.where(serial, 1, np.where(exposed, 2, 0))
    code = len(WHOLE) + manner * len(UNITS) + unit
    code = np.where(grid.waves.exact < 0.5, 1, code)
    code = np.where(dram >= kernel * 0.999, 0, code)
    return [LABELS[k] for k in code.tolist()]


def rocm_perf(
    device: RocmDevice,
    problem: AttentionProblem,
    it: Iteration,
    warps: FloatArray,
    block_m: IntArray,
    block_n: IntArray,
    chunks: IntArray,
    grid: Grid,
    dram: Dram,
    masked: MaskedIterations | None = None,
) -> Perf:
    """The predicted time (grid or HBM floor, plus a launch) and its parts, with the figures
    the reason lines read (`masked`: a block mask's iterations, which are the computed
    pairs)."""
    rocm = device.rocm
    kernel = np.maximum(grid.kernel, dram.cycles)
    time_us = kernel / rocm.engine_clock_mhz + ROCM_LAUNCH_US
    bm, bn = block_m.astype(np.float64), block_n.astype(np.float64)
    n_m, n_kv, iterations = grid.n_m, grid.n_kv, grid.iterations
    resident, full_round = grid.resident, grid.full_round
    heads_total = problem.batch * problem.heads
    if masked is not None:
        computed = masked.total * (bm * bn)
    elif problem.causal:
        offset = problem.seq_len_kv_eff - problem.seq_len
        computed = causal_iterations(n_m, bm, bn, n_kv, offset)[0] * (bm * bn)
    else:
        computed = (n_m * block_m * n_kv * block_n).astype(np.float64)
    per_cu = heads_total * chunks * n_m * iterations / rocm.cu_count
    cycles_to_us = 1.0 / rocm.engine_clock_mhz
    mfma, valu, lds = it.mfma, it.valu, it.lds
    figures = {
        "mfma_us": np.asarray(per_cu * mfma * cycles_to_us),
        "valu_us": np.asarray(per_cu * valu * cycles_to_us),
        "lds_us": np.asarray(per_cu * lds * cycles_to_us),
        "round_us": np.asarray(full_round * cycles_to_us),
        "iterations_per_workgroup": np.asarray(iterations),
        "waves_per_simd": np.asarray(resident * warps / rocm.simds_per_cu),
        "workgroups_per_cu": resident,
        "head_dim_v_chunks": chunks.astype(np.float64),
    }
    busy = per_cu * mfma * MFMA_SUSTAINED / np.maximum(kernel, 1e-9)
    return perf(
        problem,
        flops=problem.flops,
        time_us=np.asarray(time_us),
        hbm_bytes=np.asarray(dram.hbm_bytes),
        waves=grid.waves,
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
        bottleneck=bottlenecks(device, it, warps, grid, kernel, dram.cycles),
        figures=figures,
    )
