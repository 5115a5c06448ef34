"""FlashAttention-3's backward kernel on Hopper, its structure and parameters (the `fa3`
backward registration): the head dim it compiles, the producer and consumer warpgroups, the
decision variables (the tile, the consumer warpgroups, how each of the three GEMM groups is
laid out over them, the dO and dS stages, V in registers) and FA3's rules between them.

One CTA holds a block of `block_n` keys (K and V in shared memory, the dK and dV accumulators
in the consumers' registers) and streams the query blocks that see it, `block_m` rows at a
time (Q, dO, LSE and dPsum by TMA). Five GEMMs run on wgmma per iteration in three groups
that FA3 lays out independently: S = QK^T and dP = dO V^T (one layout), dV = P^T dO and
dK = dS^T Q (one layout), dQ = dS K (one layout). A group's wgmma has M = 64 rows per
warpgroup; "swapAB" computes the transposed product so that the other operand supplies the
M rows, and the atom layout says along which dimension the consumer warpgroups split the
result. Sources (Dao-AILab/flash-attention at commit 0251105a2fb19d2957484b7f023cd8c115286ced):
`hopper/mainloop_bwd_sm90_tma_gmma_ws.hpp` lines 35-134 (the layouts, `Mma_dKV_is_RS`,
`Mma_dQ_is_RS`, the static_asserts), lines 257-267 (`SeparateMaskingIterations`,
`ShuffleLSE`, `dQacc_use_TMA`, `Slice_dQKV_Mma`); `hopper/flash_bwd_kernel_sm90.h` lines
57-65 (warpgroups, setmaxnreg); `hopper/flash_api.cpp` `mha_bwd` (dtypes, the head dim it
rounds up to). Formulas: docs/model.md section 17.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import FieldViolation
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, DType
from ...space import BoolArray, ConfigArrays, IntArray, Param
from ..cuda.resources import cuda_device
from .shape import FA3_COMPUTE_CAPABILITY, FA3_HEAD_DIMS, WARPGROUP_ROWS, kernel_dim

# ---- what the kernel instantiates -----------------------------------------------------------
# Query rows per iteration and key rows per CTA: multiples of the wgmma K step (16 elements of
# a 16-bit type) from one wgmma M (64) up. FA3 ships 64, 80, 96 and 128 rows of queries and 64,
# 80, 96 and 128 keys (flash_bwd_launch_template.h, run_mha_bwd_hdim64 ... hdim256).
BWD_BLOCK_M = (64, 80, 96, 112, 128)
BWD_BLOCK_N = (64, 80, 96, 112, 128, 144, 160, 176, 192)
# The consumer warpgroups: FlashAttnBwdSm90 static_asserts NumMmaWarpGroups == 2 || == 3; with
# the producer warpgroup that is 12 or 16 warps.
BWD_WARPS = (12, 16)
WARPS_PER_WARPGROUP = 4
WGMMA_N_STEP = 8  # a wgmma's N is a multiple of 8 ...
WGMMA_N_MAX = 256  # ... up to 256 (PTX ISA, wgmma.mma_async shapes)
# The register-to-shared copies of the dQ accumulator and of P and dS store 4 values per thread
# per instruction (R2STiledCopydQaccum: 4 floats; the STSM copies of P and dS).
VALUES_PER_STORE = 4
WARPGROUP_THREADS = 128
# dQ goes through shared memory and a TMA bulk reduce-add below head dim 256; at 256 the
# consumers add it to global memory with atomics (dQacc_use_TMA = kHeadDim < 256).
DQ_TMA_MAX_HEAD_DIM = 255
SLICED_DQ_HEAD_DIM = 256  # Slice_dQKV_Mma: hdim 256 on two warpgroups, dQ split in halves
# ShuffleLSE / ShuffledPsum: with SdP_swapAB and head dim <= 64 each row's LSE is shared by the
# 8 threads that hold it and fetched by shuffle.
SHUFFLE_STATS_MAX_HEAD_DIM = 64
SHUFFLE_STATS_THREADS = 8
# SeparateMaskingIterations (head dim <= 64): only the key block's diagonal iterations apply
# the causal mask; above 64 every iteration of a causal problem applies it.
SEPARATE_MASKING_MAX_HEAD_DIM = 64

SHAPE_RULE = (
    "each GEMM group's wgmma tiles it: the M side (block_m, block_n or the head dim, as the "
    "swap chooses) a multiple of 64 x the warpgroups along it, the N side per warpgroup a "
    "multiple of 8 up to 256; V in registers needs SdP_swapAB; the dQ accumulator and P/dS "
    "copies store 4 values per thread; with head dim 256, two warpgroups and a swapped dQ "
    "split by the head dim (Slice_dQKV_Mma) dK/dV cannot read P and dS from registers"
)


def backward_head_dim(problem: AttentionProblem) -> int:
    """The one head dim FA3's backward compiles for: max(head_dim, head_dim_v) rounded up to
    64, 96, 128, 192, 256 (flash_api.cpp mha_bwd: head_size_v_rounded = head_size_rounded)."""
    return kernel_dim(max(problem.head_dim, problem.head_dim_v_eff))


def fa3_backward_violations(
    problem: AttentionProblem, hardware: HardwareSpec
) -> list[FieldViolation]:
    """FA3's backward on the problem: compute capability 9.0, fp16 or bf16, head dims of
    whole 16-byte rows up to 256, no dropout (FA3 has none)."""
    sm = cuda_device(hardware).sm
    if (sm.cc_major, sm.cc_minor) != FA3_COMPUTE_CAPABILITY:
        return [
            FieldViolation(
                "kernel",
                "fa3's backward runs on compute capability 9.0 only (wgmma, TMA and setmaxnreg "
                f"are sm_90a instructions); {hardware.name} is {sm.compute_capability}",
            )
        ]
    violations = []
    if problem.dtype not in (DType.FP16, DType.BF16):
        violations.append(
            FieldViolation(
                "dtype",
                "FA3's backward kernel is 16-bit only (mha_bwd: fp16 and bf16); allowed: fp16, "
                "bf16",
            )
        )
    for field, value in (("head_dim", problem.head_dim), ("head_dim_v", problem.head_dim_v_eff)):
        if value > FA3_HEAD_DIMS[-1] or value % 8:
            violations.append(
                FieldViolation(
                    field,
                    f"fa3's backward supports {field} a multiple of 8 up to "
                    f"{FA3_HEAD_DIMS[-1]}; got {value}",
                )
            )
    if problem.dropout > 0:
        violations.append(FieldViolation("dropout", "FlashAttention-3 has no dropout (allowed: 0)"))
    return violations


def backward_params() -> tuple[Param, ...]:
    """The tile, the consumer warpgroups, and FA3's structural choices. The three warpgroup
    splits are booleans: with 2 or 3 consumer warpgroups an atom layout that divides them is
    1 or all of them (FA3's AtomLayoutMSdP, AtomLayoutNdKV, AtomLayoutMdQ)."""
    return (
        Param("block_m", BWD_BLOCK_M, "query rows streamed per iteration (kBlockM)"),
        Param("block_n", BWD_BLOCK_N, "key/value rows the CTA holds (kBlockN)"),
        Param(
            "num_warps",
            BWD_WARPS,
            "warps per CTA: 2 or 3 consumer warpgroups (NumMmaWarpGroups) and the producer",
        ),
        Param(
            "sdp_swap_ab",
            (0, 1),
            "1: S and dP are computed transposed, block_n on the wgmma's M side (SdP_swapAB)",
        ),
        Param(
            "dkv_swap_ab",
            (0, 1),
            "1: dV and dK are computed transposed, the head dim on the M side (dKV_swapAB)",
        ),
        Param(
            "dq_swap_ab",
            (0, 1),
            "1: dQ is computed transposed, the head dim on the M side (dQ_swapAB)",
        ),
        Param(
            "sdp_split_m",
            (0, 1),
            "1: the consumer warpgroups split block_m of S and dP (AtomLayoutMSdP = all of "
            "them); 0: they split block_n (AtomLayoutMSdP = 1)",
        ),
        Param(
            "dkv_split_n",
            (0, 1),
            "1: the consumer warpgroups split block_n of dK and dV (AtomLayoutNdKV = all of "
            "them); 0: they split the head dim (AtomLayoutNdKV = 1)",
        ),
        Param(
            "dq_split_m",
            (0, 1),
            "1: the consumer warpgroups split block_m of dQ (AtomLayoutMdQ = all of them); "
            "0: they split the head dim (AtomLayoutMdQ = 1)",
        ),
        Param(
            "v_in_regs",
            (0, 1),
            "1: V is held in registers as the A operand of an RS dP wgmma (FA3's V_in_regs, "
            "Mma_dP_is_RS)",
        ),
        Param("stages_do", (1, 2), "dO tiles in the ring the producer fills (Stages_dO)"),
        Param(
            "stages_ds",
            (1, 2),
            "P and dS buffers in shared memory (Stages_dS: 1 or the Q ring's 2)",
        ),
    )


# The inner parameters: for each tile and warpgroup count the kernel runs the structure the
# model rates best (cuda/backward.InnerChoice).
BWD_INNER_PARAMS = tuple(p.name for p in backward_params()[3:])


@dataclass(frozen=True)
class GemmLayout:
    """One GEMM group's wgmma layout over the consumer warpgroups (arrays over candidates):
    the warpgroups along its M and N sides and whether it tiles."""

    wg_m: IntArray
    wg_n: IntArray
    ok: BoolArray

    def take(self, rows: IntArray) -> GemmLayout:
        """The layouts of the candidates at `rows`, in that order."""
        return GemmLayout(self.wg_m[rows], self.wg_n[rows], self.ok[rows])


def gemm_layout(m: IntArray | int, n: IntArray | int, wg_m: IntArray, wg_n: IntArray) -> GemmLayout:
    """A wgmma tiling of an M x N result: M a multiple of 64 per warpgroup along it, and each
    warpgroup's N a multiple of 8 up to 256."""
    m_arr = np.asarray(m, dtype=np.int64)
    n_arr = np.asarray(n, dtype=np.int64)
    m_step = WARPGROUP_ROWS * wg_m
    n_per_wg = n_arr // wg_n
    ok = (
        _divides(m_step, m_arr)
        & (n_per_wg * wg_n == n_arr)
        & _divides(WGMMA_N_STEP, n_per_wg)
        & (n_per_wg <= WGMMA_N_MAX)
    )
    return GemmLayout(wg_m, wg_n, np.asarray(ok, dtype=np.bool_))


@dataclass(frozen=True)
class BackwardStructure:
    """The derived structure of every candidate (arrays over candidates)."""

    warpgroups: IntArray  # consumer warpgroups W
    atom_sdp: IntArray  # FA3's AtomLayoutMSdP: warpgroups along block_m of S and dP
    atom_dkv: IntArray  # AtomLayoutNdKV: warpgroups along block_n of dK and dV
    atom_dq: IntArray  # AtomLayoutMdQ: warpgroups along block_m of dQ
    sdp: GemmLayout  # S and dP (swapped: M = block_n)
    dkv: GemmLayout  # dV and dK (swapped: M = head dim)
    dq: GemmLayout  # dQ (swapped: M = head dim)
    mma_dkv_rs: BoolArray  # dV and dK read P and dS from registers (Mma_dKV_is_RS)
    mma_dq_rs: BoolArray  # dQ reads dS from registers (Mma_dQ_is_RS)
    dq_through_smem: bool  # dQ staged in shared memory for a TMA reduce-add (dQacc_use_TMA)
    sliced: BoolArray  # Slice_dQKV_Mma: dQ (and dK/dV) issued in two halves
    ok: BoolArray  # every rule holds

    def take(self, rows: IntArray) -> BackwardStructure:
        """The structure of the candidates at `rows`, in that order (what
        `backward_structure` gives for `cfg.take(rows)`, without deriving it again)."""
        return BackwardStructure(
            warpgroups=self.warpgroups[rows],
            atom_sdp=self.atom_sdp[rows],
            atom_dkv=self.atom_dkv[rows],
            atom_dq=self.atom_dq[rows],
            sdp=self.sdp.take(rows),
            dkv=self.dkv.take(rows),
            dq=self.dq.take(rows),
            mma_dkv_rs=self.mma_dkv_rs[rows],
            mma_dq_rs=self.mma_dq_rs[rows],
            dq_through_smem=self.dq_through_smem,
            sliced=self.sliced[rows],
            ok=self.ok[rows],
        )


# The parameters the structure does not read (the last ones the family declares).
STAGE_PARAMS = ("stages_do", "stages_ds")


def backward_structure(cfg: ConfigArrays, head_dim: int) -> BackwardStructure:
    """FA3's layouts, its derived RS choices and its rules for every candidate
    (mainloop_bwd_sm90_tma_gmma_ws.hpp lines 72-134, 264-267). Over the family's whole
    space, derived once per choice of the parameters before the stages (a quarter of it)."""
    reduced = cfg.leading(STAGE_PARAMS)
    if reduced is None:
        return _derive_structure(cfg, head_dim)
    lead, rows = reduced
    return _derive_structure(lead, head_dim).take(rows)


def _derive_structure(cfg: ConfigArrays, head_dim: int) -> BackwardStructure:
    """`backward_structure` of each configuration."""
    w = cfg["num_warps"] // WARPS_PER_WARPGROUP - 1
    bm, bn = cfg["block_m"], cfg["block_n"]
    sdp_swap = cfg["sdp_swap_ab"] == 1
    dkv_swap = cfg["dkv_swap_ab"] == 1
    dq_swap = cfg["dq_swap_ab"] == 1
    atom_sdp = np.where(cfg["sdp_split_m"] == 1, w, 1)
    atom_dkv = np.where(cfg["dkv_split_n"] == 1, w, 1)
    atom_dq = np.where(cfg["dq_split_m"] == 1, w, 1)
    d = np.full(len(cfg), head_dim, dtype=np.int64)
    # S and dP: (block_m x block_n), or transposed (block_n x block_m)
    sdp = _oriented(sdp_swap, bm, bn, atom_sdp, w)
    # dV and dK: (block_n x head dim), or transposed (head dim x block_n)
    dkv = _oriented(dkv_swap, bn, d, atom_dkv, w)
    # dQ: (block_m x head dim), or transposed (head dim x block_m)
    dq = _oriented(dq_swap, bm, d, atom_dq, w)
    mma_dkv_rs = (atom_sdp == 1) & (atom_dkv == w) & sdp_swap & ~dkv_swap
    mma_dq_rs = (atom_sdp == w) & (atom_dq == w) & ~sdp_swap & ~dq_swap
    through_smem = head_dim <= DQ_TMA_MAX_HEAD_DIM
    sliced = (head_dim == SLICED_DQ_HEAD_DIM) & dq_swap & (atom_dq == 1) & (w == 2)
    threads = WARPGROUP_THREADS * w
    per_store = threads * VALUES_PER_STORE
    stores_ok = _divides(per_store, bm * head_dim) & _divides(per_store, bm * bn)
    ok = (
        sdp.ok
        & dkv.ok
        & dq.ok
        & ((cfg["v_in_regs"] == 0) | sdp_swap)  # static_assert(!Mma_dP_is_RS || SdP_swapAB)
        & ~(sliced & mma_dkv_rs)  # static_assert(!(Slice_dQKV_Mma && Mma_dKV_is_RS))
        & stores_ok
    )
    return BackwardStructure(
        warpgroups=np.asarray(w, dtype=np.int64),
        atom_sdp=np.asarray(atom_sdp, dtype=np.int64),
        atom_dkv=np.asarray(atom_dkv, dtype=np.int64),
        atom_dq=np.asarray(atom_dq, dtype=np.int64),
        sdp=sdp,
        dkv=dkv,
        dq=dq,
        mma_dkv_rs=np.asarray(mma_dkv_rs, dtype=np.bool_),
        mma_dq_rs=np.asarray(mma_dq_rs, dtype=np.bool_),
        dq_through_smem=through_smem,
        sliced=np.asarray(sliced, dtype=np.bool_),
        ok=np.asarray(ok, dtype=np.bool_),
    )


def _divides(divisor: IntArray | int, value: IntArray) -> BoolArray:
    """Elementwise: `divisor` divides `value` (an integer quotient times the divisor gives the
    value back: numpy's modulo by an array is several times slower than its division)."""
    return np.asarray((value // divisor) * divisor == value, dtype=np.bool_)


def _oriented(
    swapped: BoolArray, rows: IntArray, cols: IntArray, atom: IntArray, warpgroups: IntArray
) -> GemmLayout:
    """The wgmma layout of a rows x cols result with `atom` of the warpgroups along rows (FA3's
    atom layout) and the others along cols; swapped (swapAB), the wgmma computes the transpose,
    cols x rows, and rows are its N side."""
    along = warpgroups // atom
    return gemm_layout(
        np.where(swapped, cols, rows),
        np.where(swapped, rows, cols),
        np.asarray(np.where(swapped, along, atom), dtype=np.int64),
        np.asarray(np.where(swapped, atom, along), dtype=np.int64),
    )
