"""What one CK tile FMHA workgroup needs of a compute unit (docs/model.md 19.4): LDS by
pipeline, as CK's policies size it, VGPRs by what each pipeline keeps in registers, and the
occupancy that follows by AMD's rules (`occupancy_rocm`).

LDS, in elements of the input dtype (e bytes; KPack = 16 / e; ROCm/composable_kernel
block_fmha_pipeline_qx_ks_vs_custom_policy.hpp, GetSmemSizeKV and GetSingleSmemElementSpaceSize):

    K chunk (qr, qs)      kK1 x (kN0 + 1) - KPack          the padded k-major descriptor, kK1 wide
    K chunk (async)       kN0 kK1 / (64 KVector) x (64 KVector + KPack),  KVector = 4 / e
    V chunk               (kK1 / KPack) x (kN1 / 8) x (128 / e + KPack)
    one buffer            max(K chunk, V chunk)             K and V share it
    qr                    1 buffer;   qr_async: 3 buffers (NumPrefetchK = 3)
    qs                    + ceil16((kK0 x (kM0 + 1) - KPack) x e) bytes of Q
    qr_async_trload       decode path: max(kM0 x d, K + kN0 x kN1): Q, K and V all in LDS, one
                          buffer each (its policy: QLoadOnce, NumPrefetchK = NumPrefetchV = 1,
                          GetSmemSize = max(Q, K + S + V), S = 0 with the warps along M);
                          K = kN0 x d when kM0 > 64 (kKLoadOnce), else one kK0 chunk kN0 x kK0;
                          prefill path (kM0 > 64 and d < 256, the kernel's PrefillCase):
                          max(kM0 x d, 2 kN0 x d + 2 kN0 x kN1), K and V double-buffered

VGPRs per lane (fp32 accumulators and fragments spread over a wave's 64 lanes; each of the w
warps owns kM0 / w rows; estimates of what the compiler keeps live, docs/model.md 19.4):

    S (fp32)        kM0 kN0 / (64 w)               P (input dtype)  kM0 kN0 e / (256 w)
    O (fp32)        kM0 kN1 / (64 w)               Q (qr pipelines) kM0 d e / (256 w)
    K/V prefetch    (kN0 kK0 [sync K] + kM0 kK0 [qs: Q's chunk] + kN1 kK1 [not trload]) e / (256 w)
    B fragments     B_TILE_VGPRS x B_TILES_LIVE    one warp-GEMM B tile read from LDS at a time;
                    trload: n max(kN0 kK0, kK1 kN1) e / 256, its B operands in registers, a
                    whole chunk a wave, n = 2 on the prefill path, 1 on the decode path
    fixed           ADDRESS_VGPRS_SYNC (qr, qs) or _FENCED, + d / kK0 (row statistics, pointers,
                    loop state, one offset a gemm0 chunk)

    V chunk (qr, qs) kN1 kK1 e / 256            gemm1's B tiles of a whole chunk, every wave
    live = O + Q + K/V prefetch + S + P + B fragments [+ V chunk] + fixed (by pipeline)

(S and P are both live at the softmax's peak, and the synchronous pipelines hold a V chunk
across it: checked against the instances compiled for gfx942 and gfx950, benchmarks/data/compiler/
ck_fmha.csv, docs/model.md 19.4.)

The architectural file holds 256 per wave; beyond it the compiler places the accumulators in
AGPRs (gfx90a+: up to 256 more), and past 512 in all the instance cannot be compiled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...family import CapacityUse
from ...hardware import RocmCompute
from ...occupancy_rocm import lds_allocation, rocm_occupancy_arrays
from ...space import IntArray, ceil_div
from ..rocm.device import rocm_device
from ..rocm.resources import WorkgroupResources
from .shape import BLOCK_K1, Dims, Pipeline, sync_k_elements, v_chunk_elements

if TYPE_CHECKING:
    from ...candidates import Evaluation

LANES = 64  # the wavefront CK's tile distributions are written for
SIXTEEN = 16  # the 16x16 MFMA's edge
# Registers beyond the tiles: row max and sum, pointers and strides, loop counters, masks,
# plus one a gemm0 chunk of the head dim (d / kK0, the unrolled chunk loop's offsets); fitted
# to the compiled instances (docs/model.md 19.4: of the scan 12-20 x 16-24 the pair that puts
# the most of them at the compiler's occupancy, 74 of the first 81): 16 on the pipelines whose loops
# fence each phase with a scheduling barrier (qr_async: ten `__builtin_amdgcn_sched_barrier`,
# and trload), 20 on qr and qs (two).
ADDRESS_VGPRS_FENCED = 16
ADDRESS_VGPRS_SYNC = 20
# The largest estimate at which the compiled instances hold without spilling to memory (docs/
# model.md 19.4): CK's d 256 tile, estimated at 412, compiles in the full 512 (one register
# spilled), and every instance estimated above it spills (432: 1056 registers to scratch, 480:
# 46, 516: 346), so the estimate's error near the file's top is taken as this margin; rounded up
# to the 8-register granule. Feasibility only: occupancy still follows the estimate.
SPILL_FREE_DEMAND = 416
# Scalar registers of a CK FMHA kernel: kernel arguments, descriptors, loop state (estimate;
# below every part's limit, so SGPRs never bind here).
KERNEL_SGPRS = 80
ASYNC_BUFFERS = 3  # NumPrefetchK of the qr_async default policy
# qr_async_trload loads K over the whole head dim at once above this many query rows
# (`kKLoadOnce = kM0 > 64`, block_fmha_pipeline_qr_ks_vs_async_trload.hpp, rocm-libraries@2bc5627).
TRLOAD_LOAD_ONCE_ROWS = 64
# The kernel runs qr_async_trload's prefill path, K and V double-buffered in LDS, when
# `PrefillCase = kM0 > 64 && kQKHeaddim < 256` (fmha_fwd_kernel.hpp,
# ROCm/composable_kernel@0282f870: four __shared__ arrays, two of GetSmemSizeK<Problem, true>
# -- K over the whole head dim -- and two of GetSmemSizeV; the pipeline's "Prefill, double lds"
# operator, block_fmha_pipeline_qr_ks_vs_async_trload.hpp, ROCm/composable_kernel@1d4e219);
# else the single-buffer decode path.
TRLOAD_PREFILL_MAX_HEAD_DIM = 256  # exclusive
TRLOAD_PREFILL_BUFFERS = 2
LDS_ALIGNMENT = 16  # bytes, GetSmemSizeQ's alignment of the Q buffer
# A block GEMM with B in LDS reads one warp-GEMM B tile at a time and runs its MFMAs on it
# (BlockGemmARegBSmemCRegV2's hot loop: `load_tile(b_warp_windows(nIter)(kIter))` inside the
# k and n loops): a 16-byte read a lane (32x32x16 or 16x16x32 16-bit, 32x32x32 fp8: 1 KiB a
# wave), 4 VGPRs. The tile in use and the next one, loaded ahead of its MFMA (estimate).
B_TILE_VGPRS = 4
B_TILES_LIVE = 2


def lds_bytes(
    dims: Dims,
    bm: IntArray,
    bn: IntArray,
    bk0: IntArray,
    bn1: IntArray,
    warps: IntArray,
    pipe: IntArray,
) -> IntArray:
    """A workgroup's LDS, bytes, by pipeline (the formulas above)."""
    e = dims.elem
    kpack = 16 // e
    k_vector = max(4 // e, 1)
    # the padded k-major descriptors' element space: kK (kN0 + 1) - KPack (the last row's pad
    # is not allocated; `get_element_space_size`), K's kK1 wide whatever kK0
    # (MakeKLdsBlockDescriptor's kKPerBlock is kK1), Q's chunk kK0 (MakeQLdsBlockDescriptor)
    k_sync = sync_k_elements(np.asarray(BLOCK_K1), bn, e)
    issue = LANES * k_vector
    k_async = ceil_div(bn * BLOCK_K1, issue) * (issue + kpack)
    v_chunk = v_chunk_elements(bn1, e)
    asynchronous = pipe == Pipeline.QR_ASYNC
    buffer = np.where(asynchronous, np.maximum(k_async, v_chunk), np.maximum(k_sync, v_chunk))
    buffers = np.where(asynchronous, ASYNC_BUFFERS, 1)
    q_bytes = ceil_div(sync_k_elements(bk0, bm, e) * e, LDS_ALIGNMENT) * LDS_ALIGNMENT
    q = np.where(pipe == Pipeline.QS, q_bytes, 0)
    k_trload = bn * trload_k_columns(dims, bm, bk0)
    single = k_trload + bn * bn1
    double = TRLOAD_PREFILL_BUFFERS * (bn * dims.d + bn * bn1)
    kv_trload = np.where(trload_prefill(dims, bm), double, single)
    trload = np.maximum(bm * dims.d, kv_trload) * e
    out = np.where(pipe == Pipeline.QR_ASYNC_TRLOAD, trload, buffers * buffer * e + q)
    return np.asarray(out, dtype=np.int64)


def trload_prefill(dims: Dims, bm: IntArray) -> IntArray:
    """Whether a qr_async_trload tile runs the kernel's prefill path (`PrefillCase`): K and V
    double-buffered in LDS, K over the whole head dim, loaded an iteration ahead."""
    return np.asarray((bm > TRLOAD_LOAD_ONCE_ROWS) & (dims.d < TRLOAD_PREFILL_MAX_HEAD_DIM))


def trload_k_columns(dims: Dims, bm: IntArray, bk0: IntArray) -> IntArray:
    """The head-dim columns of K one qr_async_trload load brings in: all of them when the tile
    has more than TRLOAD_LOAD_ONCE_ROWS query rows (kKLoadOnce), else one kK0 chunk."""
    return np.asarray(np.where(bm > TRLOAD_LOAD_ONCE_ROWS, dims.d, bk0))


@dataclass(frozen=True)
class Registers:
    """VGPRs per lane of each candidate, split as the compiler would place them."""

    demand: IntArray  # everything live, registers per lane
    arch: IntArray  # architectural VGPRs (at most 256)
    agpr: IntArray  # accumulators beyond the architectural file


def registers(
    rocm: RocmCompute,
    dims: Dims,
    bm: IntArray,
    bn: IntArray,
    bk0: IntArray,
    bn1: IntArray,
    warps: IntArray,
    pipe: IntArray,
    mfma: IntArray,
) -> Registers:
    """The register estimate of docs/model.md 19.4 (the formulas above); `mfma` the MFMA edge."""
    e = dims.elem
    per_lane = LANES * warps
    s_acc = ceil_div(bm * bn, per_lane)
    o_acc = ceil_div(bm * bn1, per_lane)
    p = ceil_div(bm * bn * e, 4 * per_lane)
    q = np.where(pipe == Pipeline.QS, 0, ceil_div(bm * dims.d * e, 4 * per_lane))
    sync_k = (pipe == Pipeline.QR) | (pipe == Pipeline.QS)
    trload = pipe == Pipeline.QR_ASYNC_TRLOAD
    k_prefetch = np.where(sync_k, bn * bk0, 0)
    # qs reads Q from global in kK0 chunks each iteration, through registers as it reads K
    # (`q_block_tile = load_tile(q_dram_window)` beside `k_block_tile`, "global read i + 2")
    k_prefetch = k_prefetch + np.where(pipe == Pipeline.QS, bm * bk0, 0)
    # trload loads V, as K, straight into LDS (async_load_tile): no global prefetch in registers
    v_prefetch = np.where(trload, 0, bn1 * BLOCK_K1)
    prefetch = ceil_div((k_prefetch + v_prefetch) * e, 4 * per_lane)
    # S and P are live together at the softmax's peak (the compiled instances, docs/model.md
    # 19.4; model 0.22.0's max(S, P) put CK's d 256 tile 190 registers under the compiler)
    # trload's block GEMMs take B from registers (BlockGemmARegBRegCRegV1): every wave holds a
    # whole K chunk (kN0 x kK0) in gemm0 and V chunk (kK1 x kN1) in gemm1, two of each on the
    # prefill path (the next chunk is read while the MFMAs run on this one)
    tiles = np.where(trload_prefill(dims, bm), TRLOAD_PREFILL_BUFFERS, 1)
    b_regs = tiles * ceil_div(np.maximum(bn * bk0, BLOCK_K1 * bn1) * e, 4 * LANES)
    fragments = np.where(trload, b_regs, B_TILE_VGPRS * B_TILES_LIVE)
    # qr and qs (two scheduling barriers a loop against qr_async's ten): the compiler reads
    # gemm1's B tiles of a whole V chunk ahead, across the softmax
    v_chunk = np.where(sync_k, ceil_div(bn1 * BLOCK_K1 * e, 4 * LANES), 0)
    fixed = np.where(sync_k, ADDRESS_VGPRS_SYNC, ADDRESS_VGPRS_FENCED) + dims.d // bk0
    # on the 16x16 MFMA the compiled instances hold S's tile about twice over (docs/model.md
    # 19.4: +0.9 S against the 32x32 ones, measured, not explained)
    s_copies = np.where(mfma == SIXTEEN, 2, 1)
    demand = o_acc + q + prefetch + s_copies * s_acc + p + v_chunk + fragments + fixed
    arch = np.minimum(demand, rocm.max_arch_vgprs_per_wave)
    agpr = np.maximum(demand - arch, 0)
    return Registers(
        np.asarray(demand, np.int64), np.asarray(arch, np.int64), np.asarray(agpr, np.int64)
    )


@dataclass(frozen=True)
class CkResources(WorkgroupResources):
    """What each candidate needs of one CU."""

    regs: Registers

    @property
    def register_total(self) -> IntArray:
        """VGPR+AGPR per lane as allocated (the unified file's entries)."""
        return np.asarray(self.regs.arch + self.regs.agpr, dtype=np.int64)

    def vgpr_use(self, i: int) -> CapacityUse:
        r = self.rocm
        return CapacityUse(
            "vgprs",
            int(self.register_total[i]),
            r.max_arch_vgprs_per_wave + r.max_agprs_per_wave,
            "registers/lane (VGPR+AGPR)",
        )

    def register_fields(self, i: int) -> dict[str, Any]:
        return {
            "regs_per_thread": int(self.register_total[i]),
            "regs_demand": int(self.regs.demand[i]),
        }


def ck_resources(hardware: Any, dims: Dims, cfg: Any) -> CkResources:
    """Every candidate's LDS, registers and occupancy."""
    rocm = rocm_device(hardware).rocm
    args = (
        cfg["block_m"],
        cfg["block_n"],
        cfg["block_k0"],
        cfg["block_n1"],
        cfg["num_warps"],
        cfg["pipeline"],
    )
    lds = lds_bytes(dims, *args)
    regs = registers(rocm, dims, *args, cfg["mfma"])
    threads = np.asarray(cfg["num_warps"] * rocm.wavefront_lanes, dtype=np.int64)
    sgprs = np.full_like(threads, KERNEL_SGPRS)
    occ = rocm_occupancy_arrays(rocm, threads, regs.arch, regs.agpr, sgprs, lds)
    return CkResources(
        rocm=rocm,
        threads=threads,
        lds=lds,
        lds_allocated=lds_allocation(rocm, lds),
        occupancy=occ,
        regs=regs,
    )


def resources_of(ev: Evaluation) -> CkResources:
    """The evaluation's resources, which a ck family's are."""
    assert isinstance(ev.res, CkResources)
    return ev.res


def spill_free_limit(rocm: RocmCompute) -> int:
    """The largest register estimate taken as compiling without spills: SPILL_FREE_DEMAND,
    within the 256 + 256 VGPR+AGPR a wave addresses."""
    return min(SPILL_FREE_DEMAND, rocm.max_arch_vgprs_per_wave + rocm.max_agprs_per_wave)


class RegisterCapacity(Constraint):
    """The wave's VGPR+AGPR estimate within what the compiled instances hold without spilling
    (of the 256 + 256 a wave addresses)."""

    name = "vgprs"
    rule = (
        f"a wave's VGPR estimate within {SPILL_FREE_DEMAND} of the 256 architectural + 256 "
        "accumulation registers (above it the compiled instances spill)"
    )
    short = "vgpr"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        res = resources_of(ev)
        over = res.regs.demand > spill_free_limit(res.rocm)
        return [Rule("vgpr_over", np.asarray(over, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = resources_of(ev)
        demand = int(res.regs.demand[i])
        return (
            f"{ev.label(i)} keeps about {demand} registers per lane live; the compiled "
            f"instances hold {spill_free_limit(res.rocm)} without spilling"
        )
