"""The cost model of the `ck` family: predicted time of every CK tile FMHA forward instance on
a rocm device, with its parts (docs/model.md 19.5, where every formula and constant has its
source or is marked an estimate).

Units: cycles of the engine clock inside this module (microseconds in the result); bytes;
rates per CU per cycle. One *iteration* is one kN0 block of keys for one workgroup:

    MFMA      M = (2 kM0 kN0 d + 2 kM0 kN0 kN1) / (R_mfma(dtype) x MFMA_SUSTAINED)
    VALU      V = kM0 kN0 SOFTMAX_VALU_OPS / R_valu + kM0 kN0 / R_exp
                  + kM0 kN1 / R_valu (rescale O) + kN0 kN1 V_SHUFFLE / R_valu (not trload)
                  + 64 X / R_valu,  X = 2 (kM0 / m) log2(64 / m)   the row max and sum across
                                     the lanes of an m x m MFMA result (`cross_lane_steps`)
    LDS       L = ((w + 1) (kN0 d + kN0 kN1) e [+ 2 kM0 d e for qs] + f kN0 d e + 256 X) / B_lds
                                     (f = kK1 / kK0 - 1 for qr_async with kK0 < kK1: its copy
                                     moves kK1 columns a kK0 chunk, `async_k_refetch`)
                                     (X ds_bpermute_b32 of 64 lanes x 4 bytes)
    stalls    S = syncs x BARRIER_CYCLES + CHAIN_CYCLES + W
              W = (d / k) max(0, latency - cover) for one K buffer (qr, qs, trload: k = kK0,
                  or d for trload above 64 rows), 0 for qr_async and trload's prefill path
                  (`single_buffer_wait`); trload's prefill path: 4 syncs an iteration

With r workgroups resident per CU (occupancy, `resources.py`), wa = r w / SIMDs waves per SIMD
and a share min(1, r w / SIMDs) of the SIMDs busy, the CU takes for one iteration of each:

    T = max(rM, rV, rL') / s + (1 - phi) (rM + rV + rL' - max) / s + (1 - phi) S,
    phi = beta (1 - 1 / max(g, 1)),  g = r min(w, SIMDs) / SIMDs
                              the waves of other workgroups fill part (beta, fitted:
                              `rocm.device.WORKGROUP_OVERLAP`) of one stream's dependent
                              phases; a workgroup's own waves pass its barriers together
    L' = L / LDS_SUSTAINED    the LDS at the loop's sustained share of its peak

and the memory bound r (L2 bytes / L2 share + HBM bytes / HBM share) of one CU (the HBM share of
the K/V reads, `rocm.schedule.kv_traffic`). Workgroups (ceil(sq / kM0) x heads
x ceil(dv / kN1)) run in waves over the CUs; causal work is spread as it comes (no persistent
scheduler: half a longest workgroup is added for the uneven finish). K/V reuse is per XCD
(workgroups go round-robin to the XCDs, each with its own L2); the Infinity Cache takes
repeated K/V reads across XCDs while the heads in flight fit in it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import Perf
from ...family import kib
from ...hardware import RocmCompute, RocmDevice
from ...space import FloatArray, IntArray, ceil_div
from ..rocm.device import MFMA_SUSTAINED, cu_rates, rocm_device
from ..rocm.device import confidence_note as rocm_confidence_note
from ..rocm.schedule import (
    BARRIER_CYCLES,
    CHAIN_CYCLES,
    DRAM_LATENCY_CYCLES,
    L2_LATENCY_CYCLES,
    SHUFFLE_BYTES_PER_LANE,
    SOFTMAX_VALU_OPS,
    Iteration,
    KvTraffic,
    cu_round,
    dram_floor,
    grid_cycles,
    head_io_cycles,
    kv_traffic,
    rocm_perf,
    row_reduction_steps,
)
from .resources import CkResources, resources_of, trload_k_columns, trload_prefill
from .shape import BLOCK_K1, Dims, Pipeline

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# ---- constants (docs/model.md 19.5; estimates unless a source is named) -----------------------
# The sustained MFMA share, the launch, the softmax's VALU instructions, a barrier, an L2 hit's
# latency and an iteration's dependent chain are the shared AMD pieces' (`families/rocm`).
# VALU instructions per V element per iteration to lay V out as gemm1's B operand (a register
# shuffle); gfx950's transpose loads (qr_async_trload) read it in place (estimate).
V_SHUFFLE_OPS = 1.0
# The softmax's row max and row sum, each reduced across the lanes that share a row of S every
# iteration (`block_tile_reduce_sync` in both of CK's qr pipelines; ck_tile/ops/reduce/block/
# block_reduce.hpp: log2(lanes per row) stages for every row a lane holds, each a ds_bpermute_b32
# through the LDS, `warp_shuffle_down` in ck_tile/core/arch/utility.hpp, and one VALU op):
# `rocm.schedule.row_reduction_steps`.
# Workgroup synchronisations an iteration of qr_async_trload's prefill path: block_sync_lds
# before V's next load and before K's, block_sync_lds_direct_load after gemm0 (V in) and after
# gemm1 (K in); its gemm0 and gemm1 chunks run without one between them (the next chunk is
# read into registers while the MFMAs run on this one; ROCm/composable_kernel@1d4e219
# block_fmha_pipeline_qr_ks_vs_async_trload.hpp, "Prefill, double lds").
TRLOAD_PREFILL_SYNCS = 4.0


def evaluate(ev: Evaluation) -> Perf:
    """Predicted time and its parts of every configuration (docs/model.md 19.5)."""
    device = rocm_device(ev.hardware)
    rocm = device.rocm
    problem = ev.problem
    res = resources_of(ev)
    dims = Dims.of(problem)
    cfg = ev.cfg
    e = float(dims.elem)
    d = float(dims.d)
    bm_i, bn_i, bn1_i = cfg["block_m"], cfg["block_n"], cfg["block_n1"]
    bm, bn, bn1 = (x.astype(np.float64) for x in (bm_i, bn_i, bn1_i))
    bk0 = cfg["block_k0"].astype(np.float64)
    warps = cfg["num_warps"].astype(np.float64)
    pipe = cfg["pipeline"]
    qs = pipe == Pipeline.QS
    trload = pipe == Pipeline.QR_ASYNC_TRLOAD
    asynchronous = pipe == Pipeline.QR_ASYNC
    rates = cu_rates(device, problem.dtype)
    r_mfma, r_valu, r_exp = rates.mfma, rates.valu, rates.exp

    # ---- one iteration of one workgroup, cycles -------------------------------------------
    scores = bm * bn
    mfma = (2.0 * scores * d + 2.0 * scores * bn1) / (r_mfma * MFMA_SUSTAINED)
    shuffle = np.where(trload, 0.0, V_SHUFFLE_OPS) * bn * bn1
    steps = cross_lane_steps(bm, cfg["mfma"].astype(np.float64), warps, rocm.wavefront_lanes)
    valu = (
        scores * SOFTMAX_VALU_OPS + bm * bn1 + shuffle + steps * rocm.wavefront_lanes
    ) / r_valu + scores / r_exp
    kv_tile = (bn * d + bn * bn1) * e
    k_refetched = async_k_refetch(pipe, bk0) * bn * d * e
    lds_bytes = (
        (warps + 1.0) * kv_tile
        + k_refetched
        + np.where(qs, 2.0 * bm * d * e, 0.0)
        + steps * rocm.wavefront_lanes * SHUFFLE_BYTES_PER_LANE
    )
    lds = lds_bytes / rocm.lds_bandwidth_bytes_per_clk_per_cu
    chunks = d / bk0 + bn / BLOCK_K1
    prefill = trload & trload_prefill(dims, bm_i)
    syncs = np.where(prefill, TRLOAD_PREFILL_SYNCS, np.where(asynchronous, 1.0, 2.0) * chunks)
    traffic = kv_traffic(device, problem, e, kv_tile, bm_i, bn_i, res.occupancy.workgroups_per_cu)
    exposed_load = single_buffer_wait(rocm, pipe, dims, bm, bn, bk0, bn1, warps, r_mfma, traffic)
    stall = syncs * BARRIER_CYCLES + exposed_load + CHAIN_CYCLES
    # qs re-reads Q every iteration; qr_async's re-copied K columns come from L2
    global_bytes = kv_tile + k_refetched + np.where(qs, bm * d * e, 0.0)
    it = Iteration(mfma, valu, lds, stall, global_bytes, traffic.hbm_share * kv_tile)

    # ---- occupancy, the CU's round, the workgroups over the CUs -----------------------------
    n_n1 = ceil_div(dims.dv, bn1_i)
    grid = grid_cycles(
        device,
        problem,
        bm_i,
        bn_i,
        n_n1,
        res.occupancy.workgroups_per_cu,
        lambda r: cu_round(device, it, warps, r),
        head_io_cycles(device, bm, d, bn1, e),
        r_valu,
    )
    dram = dram_floor(device, problem, traffic)
    return rocm_perf(device, problem, it, warps, bm_i, bn_i, n_n1, grid, dram)


def async_k_refetch(pipe: IntArray, bk0: FloatArray) -> FloatArray:
    """The K bytes qr_async copies to LDS past one copy of each element, as a share of K's
    bytes: its copy moves kN0 x kK1 a chunk (the policy's asynchronous K layout, docs/model.md
    19.3) while the window steps kK0, so each element is copied kK1 / kK0 times when kK0 < kK1
    (a share of kK1 / kK0 - 1); 0 for every other case."""
    narrow = (pipe == Pipeline.QR_ASYNC) & (bk0 < BLOCK_K1)
    return np.asarray(np.where(narrow, BLOCK_K1 / bk0 - 1.0, 0.0))


def cross_lane_steps(bm: FloatArray, mfma: FloatArray, warps: FloatArray, lanes: int) -> FloatArray:
    """Wave-wide cross-lane steps a CK workgroup issues per iteration for the softmax's row max
    and row sum (docs/model.md 19.5): its w waves hold kM0 / w rows each, so 2 (kM0 / m)
    log2(lanes / m) for a wavefront of `lanes` (`rocm.schedule.row_reduction_steps`)."""
    return row_reduction_steps(bm / warps, warps, mfma, lanes)


def single_buffer_wait(
    rocm: RocmCompute,
    pipe: IntArray,
    dims: Dims,
    bm: FloatArray,
    bn: FloatArray,
    bk0: FloatArray,
    bn1: FloatArray,
    warps: FloatArray,
    r_mfma: float,
    traffic: KvTraffic,
) -> FloatArray:
    """Cycles an iteration waits for its K loads in a pipeline with one K buffer (qr and qs:
    one prefetch in registers; qr_async_trload: one LDS buffer, NumPrefetchK = 1): each load
    is issued when the MFMA work before it starts and waits out the rest of its latency,
    max(0, latency - cover). A load of one kK0 chunk is covered by gemm0 on the chunk before it
    (d / kK0 loads an iteration); trload's whole-head-dim K (kM0 > 64) is loaded once an
    iteration, after gemm0, and covered by gemm1. The latency is an L2 hit's, or HBM's for
    the HBM share of the K/V reads. qr_async (three buffers) waits for none, nor does trload's
    prefill path (K and V double-buffered, each loaded an iteration or two ahead)."""
    trload = pipe == Pipeline.QR_ASYNC_TRLOAD
    cols = np.where(trload, trload_k_columns(dims, bm.astype(np.int64), bk0.astype(np.int64)), bk0)
    once = trload & (cols == dims.d)
    # the MFMA rate of the workgroup's waves: min(w, SIMDs) of the CU's SIMDs
    rate = r_mfma * MFMA_SUSTAINED * np.minimum(warps, rocm.simds_per_cu) / rocm.simds_per_cu
    cover = np.where(once, 2.0 * bm * bn * bn1, 2.0 * bm * bn * cols) / rate
    latency = L2_LATENCY_CYCLES + traffic.hbm_share * (DRAM_LATENCY_CYCLES - L2_LATENCY_CYCLES)
    wait = dims.d / cols * np.maximum(latency - cover, 0.0)
    ahead = (pipe == Pipeline.QR_ASYNC) | (trload & trload_prefill(dims, bm.astype(np.int64)))
    return np.asarray(np.where(ahead, 0.0, wait))


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
    return rocm_confidence_note(device, "the softmax's instruction count and the register estimate")


def tie_iterations(ev: Evaluation) -> IntArray:
    """(query block, key block) tiles of one head, times the head_dim_v chunks."""
    dims = Dims.of(ev.problem)
    cfg = ev.cfg
    p = ev.problem
    tiles = ceil_div(p.seq_len, cfg["block_m"]) * ceil_div(p.seq_len_kv_eff, cfg["block_n"])
    return np.asarray(tiles * ceil_div(dims.dv, cfg["block_n1"]), dtype=np.int64)
