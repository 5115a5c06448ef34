"""The shape of a CK tile FMHA forward instance and CK's own legality rules for it
(docs/model.md 19.3).

An instance is `TileFmhaShape<BlockTile, Gemm0BlockWarps, Gemm0WarpTile, Gemm1BlockWarps,
Gemm1WarpTile>` plus a pipeline. The block tile is (kM0, kN0, kK0, kN1, kK1, kQKHeaddim): kM0
query rows per workgroup, kN0 keys per iteration of gemm0 (S = Q K^T), kK0 gemm0's unroll
along the head dim, kN1 gemm1's (O += P V) chunk of head_dim_v (a workgroup per chunk: the
grid has ceil(dv / kN1) workgroups along it, each recomputing S), kK1 gemm1's unroll along the
keys. Sources: ROCm/composable_kernel include/ck_tile/ops/fmha/pipeline/tile_fmha_shape.hpp
(commit 0b42f81), block_fmha_pipeline_qr_ks_vs.hpp (commit 00737a7),
block_fmha_pipeline_qx_ks_vs_custom_policy.hpp, and shared/reference/blackwell_amd.md 3.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...problem import AttentionProblem, DType
from ...space import IntArray
from ..rocm.device import rocm_device

if TYPE_CHECKING:
    from ...candidates import Evaluation


class Pipeline(IntEnum):
    """CK's forward pipelines, as the declared parameter `pipeline` numbers them."""

    QR = 0  # Q in registers, K and V through LDS (BlockFmhaPipelineQRKSVS)
    QR_ASYNC = 1  # as qr, K global -> LDS by asynchronous buffer loads, 3 LDS buffers
    QS = 2  # Q through LDS in kK0 chunks, re-read every iteration (BlockFmhaPipelineQSKSVS)
    QR_ASYNC_TRLOAD = 3  # gfx950: as qr_async, V read from LDS with transpose loads

    @property
    def label(self) -> str:
        return self.name.lower()


PIPELINES = tuple(Pipeline)
BLOCK_M_DOMAIN = (64, 128, 256)
BLOCK_N_DOMAIN = (32, 64, 128, 256)
BLOCK_K0_DOMAIN = (16, 32, 64, 128)
BLOCK_N1_DOMAIN = (32, 64, 128, 256)
WARPS_DOMAIN = (1, 2, 4, 8)
MFMA_DOMAIN = (16, 32)
# gemm1's unroll along the keys: not a decision here (two 16-deep MFMA K steps); CK's
# instances set it per tile. kN0 must be a multiple of it (k1_loops >= 1).
BLOCK_K1 = 32
# The head dims a tile qualifies for (tile_fmha_shape.hpp ceil_to_qualified_tile_length: 48
# and 192 as they are, 96 -> 128, 160 -> 256, powers of two); the qr pipelines take at most 256
# (block_fmha_pipeline_qr_ks_vs.hpp: "hdim bigger than 256 is not suitable").
EXACT_HEAD_DIMS = (48, 192)
MAX_HEAD_DIM = 256
# qr_async_trload instances exist for (d, dv) in {(64, 64), (128, 128), (256, 256)} only
# (fmha_fwd.py CompatibilityRuleFactoryGfx950.check_tile_pipeline, blackwell_amd.md 3.5).
TRLOAD_HEAD_DIMS = (64, 128, 256)
TRLOAD_TARGETS = ("gfx950",)
# The fp8 forward pipelines: fp8 Q/K/V take the 32x32 MFMA only (the custom policy's
# static_assert(WarpGemmM == 32) for fp8); CK's codegen generates its fp8 instances (fp8bf16,
# fp8fp32: bf16 or fp32 output) on qr at d 64 and on qr_async above (fmha_fwd.py get_pipelines,
# ROCm/rocm-libraries@014d097), and qs is dtype-generic as qr is. The transpose-load pipeline
# is generated for 16-bit types only.
FP8_PIPELINES = (Pipeline.QR, Pipeline.QR_ASYNC, Pipeline.QS)


# V's LDS rows: 32 banks x 4 bytes hold 128 / e elements, 16 / e per pack: 8 rows per LDS row
# (NPerRow in the custom policy's MakeVLdsBlockDescriptor); kN1 must be a multiple.
V_ROWS_PER_LDS_ROW = 8
# A global load of K on the synchronous path (qr, qs) and of Q's chunk on qs is 16 bytes a
# lane (`K1 = 16 / sizeof(KDataType)`, "use dwordx4", in the custom policy's
# MakeKDramTileDistribution and, for qs, MakeQDramTileDistribution).
DRAM_VECTOR_BYTES = 16
WAVE_LANES = 64  # the wavefront CK's distributions are written for (get_warp_size())
# qs's gemm0 (both operands from LDS) is CK's 32x32x16 warp GEMM whatever the shape's warp
# tile (QXCustomPolicy<QLoadOnce = false>::GetQKBlockGemm returns the M32N32K16 SwizzleB
# warp GEMM for every 16- and 8-bit type); its P is then sliced into gemm1's kK1 columns, which
# the 16x16 gemm1 cannot take (get_slice_tile's static_assert "not sliced at y dim",
# block_fmha_pipeline_qs_ks_vs.hpp at ROCm/composable_kernel@8e22e1a).
QS_MFMA = 32


def sync_k_elements(bk: IntArray, bn: IntArray, elem: int) -> IntArray:
    """Elements of a kN0 x kK K tile (or qs's kM0 x kK0 Q chunk, the same layout) in the
    synchronous pipelines' padded k-major LDS layout: kK (kN0 + 1) - KPack, the last row's pad
    not allocated (the element space of `MakeKLdsBlockDescriptor` and
    `MakeQLdsBlockDescriptor`; KPack = 16 / e)."""
    return np.asarray(bk * (bn + 1) - DRAM_VECTOR_BYTES // elem, dtype=np.int64)


def v_chunk_elements(bn1: IntArray, elem: int) -> IntArray:
    """Elements of a kK1 x kN1 V chunk in LDS: (kK1 / KPack) x (kN1 / 8) rows of 128 / e + KPack
    (`MakeVLdsBlockDescriptor`)."""
    kpack = DRAM_VECTOR_BYTES // elem
    rows = -(-bn1 // V_ROWS_PER_LDS_ROW)
    return np.asarray((BLOCK_K1 // kpack) * rows * (128 // elem + kpack), dtype=np.int64)


def sync_k_tile_overflows(bn: IntArray, bk0: IntArray, bn1: IntArray, elem: int) -> IntArray:
    """Whether qr's or qs's kN0 x kK0 K tile outgrows the LDS buffer CK sizes for it: the
    pipeline stores and reads K through a kN0 x kK0 window (`make_tile_window(k_lds,
    {kN0, kK0})`, block_fmha_pipeline_qr_ks_vs.hpp) over a descriptor and a buffer sized for
    kK1 (`GetSingleSmemElementSpaceSize`: max(K at kK1, V chunk)), so a wider kK0 writes past
    the buffer unless V's chunk is the larger (LDS writes past a workgroup's allocation are
    dropped and reads return 0: wrong scores, not a compile error)."""
    buffer = np.maximum(
        sync_k_elements(np.asarray(BLOCK_K1), bn, elem), v_chunk_elements(bn1, elem)
    )
    return np.asarray(sync_k_elements(bk0, bn, elem) > buffer, dtype=np.int64)


def v_shuffle_illegal(bn1: IntArray, warps: IntArray, elem: int) -> IntArray:
    """Whether V's row-major load and register shuffle cannot lay out a kK1 x kN1 chunk
    (`MakeVDramTileDistribution` and `MakeShuffledVRegBlockDescriptor` of the custom policy,
    `shuffle_tile` -> `transpose_vectors`, ROCm/composable_kernel@8e22e1a): a lane holds
    t = kN1 kK1 / threads elements as N1 x K3 (N1 = 4 when t > 4, else 2: `GetAlignmentV`),
    t % N1 == 0 and KPack (16 / e) % K3 == 0 are static_asserts, the lanes then tile
    K2 = KPack / K3 by N0 = kN1 / N1 within a wave or across K1 = K2 N0 / 64 waves, and the
    shuffle transposes 2 x 2 16-bit or 4 x 4 8-bit blocks (N1 and K3 multiples of 4 / e)."""
    threads = warps * WAVE_LANES
    pixels = bn1 * BLOCK_K1
    t = pixels // threads
    n1 = np.where(t > 4, 4, 2)
    k3 = np.maximum(t // n1, 1)
    kpack = DRAM_VECTOR_BYTES // elem
    k2 = np.maximum(kpack // k3, 1)
    n0 = np.maximum(bn1 // n1, 1)
    spread = k2 * n0
    across = spread > WAVE_LANES  # K1 = K2 N0 / 64 waves share a K2 span
    k1 = np.maximum(spread // WAVE_LANES, 1)
    block = max(4 // elem, 1)
    bad = (
        (pixels % threads != 0)
        | (t < 1)
        | (t % n1 != 0)
        | (kpack % k3 != 0)
        | np.where(
            across,
            (spread % WAVE_LANES != 0) | (k2 % k1 != 0) | (warps % k1 != 0),
            WAVE_LANES % spread != 0,
        )
        | (n1 % block != 0)
        | (k3 % block != 0)
    )
    return np.asarray(bad, dtype=np.int64)


def dram_rows_per_issue(bk0: IntArray, elem: int, warps: IntArray) -> IntArray:
    """Rows of a kK0-wide tile one pass of the workgroup loads on the synchronous path: each
    lane loads 16 bytes, kK0 / (16 / e) lanes cover a row, so a wave covers 64 / that rows and
    the workgroup w times as many (`N2 * N1` of MakeKDramTileDistribution; the tile's rows
    must be a whole number of passes, N0 >= 1)."""
    lanes_per_row = np.maximum(bk0 * elem // DRAM_VECTOR_BYTES, 1)
    return np.asarray((WAVE_LANES // lanes_per_row) * warps, dtype=np.int64)


def min_k0_loops(pipe: IntArray) -> IntArray:
    """The fewest kK0 chunks of the head dim a pipeline takes: 2 (the synchronous pipelines
    prefetch chunk i + 1 while gemm0 runs on chunk i: static_assert(2 <= k0_loops)), 1 on
    qr_async (static_assert(1 <= k0_loops), block_fmha_pipeline_qr_ks_vs_async.hpp)."""
    return np.asarray(np.where(pipe == Pipeline.QR_ASYNC, 1, 2), dtype=np.int64)


def trload_instance(gfx: str, dims: Dims) -> bool:
    """Whether a qr_async_trload instance exists for this target and head dims."""
    return gfx in TRLOAD_TARGETS and dims.d == dims.dv and dims.d in TRLOAD_HEAD_DIMS


def qualified_head_dim(d: int) -> int:
    """The tile length CK pads a head dim to: 48 and 192 as they are, else the next power of
    two (other dims run on a padded instance of that length)."""
    return d if d in EXACT_HEAD_DIMS else 1 << max(d - 1, 1).bit_length()


@dataclass(frozen=True)
class Dims:
    """The padded head dims and element size of a request (docs/model.md 19.3)."""

    d: int  # kQKHeaddim: head_dim padded to its qualified length
    dv: int  # head_dim_v padded likewise
    elem: int  # bytes per Q/K/V element

    @classmethod
    def of(cls, problem: AttentionProblem) -> Dims:
        return cls(
            qualified_head_dim(problem.head_dim),
            qualified_head_dim(problem.head_dim_v_eff),
            problem.dtype.bytes,
        )


def illegal(
    dims: Dims,
    gfx: str,
    dtype: DType,
    bm: IntArray,
    bn: IntArray,
    bk0: IntArray,
    bn1: IntArray,
    warps: IntArray,
    mfma: IntArray,
    pipe: IntArray,
) -> dict[str, IntArray]:
    """Every template rule an instance breaks, as 0/1 columns by rule (docs/model.md 19.3)."""
    lanes_m = warps * mfma
    k0_loops = dims.d // bk0
    trload = pipe == Pipeline.QR_ASYNC_TRLOAD
    async_k = (pipe == Pipeline.QR_ASYNC) | trload
    sync_k = (pipe == Pipeline.QR) | (pipe == Pipeline.QS)
    k_vector = max(4 // dims.elem, 1)
    rules = {
        # kQKHeaddim % kK0 == 0 (tile_fmha_shape.hpp) and k0_loops >= 2, or >= 1 on qr_async
        # (static_assert(2 <= k0_loops) in qr_ks_vs.hpp and qs_ks_vs.hpp, 1 <= in _async.hpp)
        "k0_divides_head_dim": (dims.d % bk0 != 0) | (k0_loops < min_k0_loops(pipe)),
        # gemm1's chunk divides head_dim_v and is no wider than it
        "n1_divides_head_dim_v": (dims.dv % bn1 != 0) | (bn1 > dims.dv),
        # warps laid along M: each owns kM0 / warps rows, whole MFMA tiles of them
        "warps_tile_m": bm % lanes_m != 0,
        # gemm0's N and gemm1's N in whole MFMA tiles; kN0 in whole kK1 unrolls
        "mfma_tiles_n": (bn % mfma != 0) | (bn1 % mfma != 0) | (bn % BLOCK_K1 != 0),
        # V's LDS layout: kN1 a multiple of NPerRow = 8, kK1 of KPack (custom policy)
        "v_lds_layout": bn1 % V_ROWS_PER_LDS_ROW != 0,
        # async K: kN0 x kK1 is a whole number of issues of (threads x KVector) elements
        "async_issues": async_k & ((bn * BLOCK_K1) % (warps * 64 * k_vector) != 0),
        # synchronous K (qr, qs): kN0 a whole number of the workgroup's load passes
        # (MakeKDramTileDistribution: N0 = kN0 / (N2 N1) >= 1; with N0 = 0 the tile is empty
        # and CK's space-filling curve static_asserts)
        "sync_k_rows": sync_k & (bn % dram_rows_per_issue(bk0, dims.elem, warps) != 0),
        # qs loads Q's kK0 chunk as K's: kM0 a whole number of passes (MakeQDramTileDistribution)
        "qs_q_rows": (pipe == Pipeline.QS) & (bm % dram_rows_per_issue(bk0, dims.elem, warps) != 0),
        # V through registers (every pipeline but trload): its load and shuffle lay out kK1 x kN1
        "v_shuffle": ~trload & (v_shuffle_illegal(bn1, warps, dims.elem) != 0),
        # qr and qs: the kN0 x kK0 K tile within the LDS buffer sized for kK1 (a semantic rule:
        # CK compiles such an instance, and it reads K its LDS never held)
        "sync_k_tile": sync_k & (sync_k_tile_overflows(bn, bk0, bn1, dims.elem) != 0),
        # qs runs gemm0 on the 32x32 MFMA whatever the declared warp tile
        "qs_mfma": (pipe == Pipeline.QS) & (mfma != QS_MFMA),
        # qr_async copies K to LDS in kN0 x kK1 slices (the custom policy's AsyncCopy K DRAM
        # distribution and LDS descriptors) and gemm0 reads kN0 x kK0 of one: kK0 <= kK1
        "async_k_chunk": (pipe == Pipeline.QR_ASYNC) & (bk0 > BLOCK_K1),
        # fp8 takes the 32x32 MFMA and the qr, qr_async and qs pipelines
        "fp8_instance": np.full_like(bm, dtype is DType.FP8)
        & ((mfma != 32) | ~np.isin(pipe, [int(p) for p in FP8_PIPELINES])),
        # transpose loads are gfx950's, for the instances generated
        "trload_target": trload & np.full_like(bm, not trload_instance(gfx, dims)),
    }
    return {name: np.asarray(bad, dtype=np.int64) for name, bad in rules.items()}


RULE_WORDS = {
    "k0_divides_head_dim": "kK0 divides the padded head dim at least twice (k0_loops >= 2; "
    "once on qr_async)",
    "n1_divides_head_dim_v": "kN1 divides the padded head_dim_v",
    "warps_tile_m": "block_m is a whole number of warps x MFMA rows (warps along M)",
    "mfma_tiles_n": f"block_n and kN1 whole MFMA tiles, block_n a multiple of kK1 = {BLOCK_K1}",
    "v_lds_layout": "V's LDS layout: kN1 a multiple of 8 (NPerRow)",
    "async_issues": "qr_async: block_n x kK1 a whole number of (threads x 4-byte) issues",
    "sync_k_rows": "qr and qs: block_n a whole number of the workgroup's 16-byte K load passes "
    "(64 / (kK0 e / 16) rows a wave)",
    "qs_q_rows": "qs: block_m a whole number of the workgroup's 16-byte Q load passes",
    "qs_mfma": "qs: gemm0 is CK's 32x32 warp GEMM (mfma 32)",
    "sync_k_tile": "qr and qs: the kN0 x kK0 K tile within the LDS buffer CK sizes for kK1 = "
    f"{BLOCK_K1} (or V's chunk, the larger)",
    "v_shuffle": "V's register shuffle: kN1 x kK1 / threads elements a lane as N1 x K3 "
    "(N1 = 4 above 4 elements, else 2), K3 dividing 16 / e, N1 and K3 multiples of 4 / e",
    "async_k_chunk": f"qr_async: kK0 <= kK1 = {BLOCK_K1} (K reaches LDS in kN0 x kK1 slices)",
    "fp8_instance": "fp8 runs the 32x32 MFMA on the qr, qr_async or qs pipeline",
    "trload_target": "qr_async_trload needs gfx950 and d = dv in {64, 128, 256}",
}


class TemplateRules(Constraint):
    """CK's template constraints on the instance (legality)."""

    name = "ck_template"
    rule = "CK tile FMHA template rules: " + "; ".join(RULE_WORDS.values())
    short = "tmpl"
    kind = ConstraintKind.LEGALITY

    def _broken(self, ev: Evaluation) -> dict[str, IntArray]:
        cfg = ev.cfg
        device = rocm_device(ev.hardware)
        return illegal(
            Dims.of(ev.problem),
            device.rocm.gfx_target,
            ev.problem.dtype,
            cfg["block_m"],
            cfg["block_n"],
            cfg["block_k0"],
            cfg["block_n1"],
            cfg["num_warps"],
            cfg["mfma"],
            cfg["pipeline"],
        )

    def rules(self, ev: Evaluation) -> list[Rule]:
        broken = self._broken(ev)
        column = np.zeros(len(ev.cfg), dtype=np.int64)
        for bad in broken.values():
            column |= bad
        return [Rule("ck_illegal", column, "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        broken = [RULE_WORDS[name] for name, bad in self._broken(ev).items() if bad[i]]
        return f"{ev.label(i)} breaks CK's template rules: {'; '.join(broken)}"
