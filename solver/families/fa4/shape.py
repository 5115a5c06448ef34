"""FlashAttention-4's structure on sm_100/sm_103 and the parameters it tiles with (the `fa4`
family): which devices run which of its designs, the head dims it takes, the warp roles, the
decision variables (block_m, q_stage, block_n, cta_group; num_warps fixed by the roles), and its
rules between them (`Fa4Shape`: the 2-CTA conditions and the dedicated hd256 kernel's).

Sources: Dao-AILab/flash-attention@0251105a `flash_attn/cute/interface.py` (`_validate_head_dims`,
the 2-CTA conditions at 822-835, the hd256 routing at 839-840), `flash_fwd_sm100.py` (warp roles
300-320, the tilers 197-201, `q_stage in [1, 2]`, block_n in 32-column fragments),
`sm100_hd256_2cta_fmha_forward.py` (its asserts, lines 62-132). Formulas: docs/model.md 17.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...errors import FieldViolation
from ...hardware import CudaDevice, HardwareSpec
from ...problem import AttentionProblem
from ...space import BoolArray, ConfigArrays, IntArray, Param, ceil_div
from ...split_kv import gqa_group
from ..cuda.resources import cuda_device

if TYPE_CHECKING:
    from ...candidates import Evaluation


class Design(StrEnum):
    """Which FlashAttention-4 kernel a device runs."""

    SM100 = "sm100"  # tcgen05, tensor memory, 2-CTA clusters (compute capability 10.x, 11.x)
    SM120 = "sm120"  # the SM80 mma.sync design under 99 KB (compute capability 12.x)


# interface.py: arch // 10 in [10, 11] runs FlashAttentionForwardSm100, arch // 10 == 12 the
# sm120 port of the SM80 kernel (flash_fwd_sm120.py).
TCGEN05_MAJORS = (10, 11)
MMA_SYNC_MAJORS = (12,)

# ---- head dims (interface.py `_validate_head_dims` for compute capability 10/11) -------------
HEAD_DIM_ALIGN_BYTES = 16  # both dims a multiple of 16 bytes / element size
STANDARD_MAX = 128  # 8 <= head_dim, head_dim_v <= 128
DEEPSEEK_DIMS = (192, 128)  # (head_dim, head_dim_v)
HD256_DIMS = (256, 256)  # the dedicated 2-CTA kernel (sm100_hd256_2cta_fmha_forward.py)
MLA_HEAD_DIM_V = 512  # FA4's MLA-absorbed kernel (flash_fwd_mla_sm100.py): not modelled here
HEAD_DIM_PAD = 16  # head dims are padded to multiples of 16 (head_dim_padded)

# ---- the warp roles (flash_fwd_sm100.py:300-320; hd256 kernel lines 121-132) ---------------
WARPGROUP_THREADS = 128
GENERAL_WARPS = 16  # softmax0, softmax1, correction (4 each), MMA, epilogue, load, empty
HD256_WARPS = 12  # softmax 4, correction 4, MMA, load, 2 empty
# One CTA tile row per TMEM lane: the tcgen05 M of one CTA is 128 (its accumulators fill the
# 128 lanes, one softmax thread per row via 32x32b tcgen05.ld); a 2-CTA instruction spans
# 256 rows, 128 in each CTA.
BLOCK_M = 128
Q_STAGES = (1, 2)  # asserted
# block_n: the softmax converts P in 32-column fragments (apply_exp2_convert, frg_tile = 32)
# and tcgen05.ld reads S 32 columns at a time; the MMA N of QK^T is at most 256.
BLOCK_N_STEP = 32
BLOCK_N_MAX = 256
CTA_GROUPS = (1, 2)
# The hd256 kernel asserts its tile (line 79) and runs only as a 2x1 cluster (line 112); its
# "q_stage" counts the two 128-wide chunks of the head dim, not Q tiles: one Q tile per CTA.
HD256_BLOCK = 128
# 2-CTA (interface.py:822-835): ceil16(head_dim) in {128, 192}, ceil16(head_dim_v) == 128 and
# more (GQA-packed) query rows than two Q tiles.
TWO_CTA_HEAD_DIMS = (128, 192)
TWO_CTA_HEAD_DIM_V = 128

SHAPE_RULE = (
    "cta_group 2 (the 2-CTA cluster) only without a causal mask, without split-KV, for padded "
    "head dims (128 or 192, 128) and more than 2 x block_m query rows (with packed GQA: "
    "block_m a multiple of the group); head dims (256, 256) run the dedicated kernel: "
    "128 x 128 tiles, cta_group 2, one Q tile per CTA; a cluster needs as many SMs as CTAs"
)


def design(hardware: HardwareSpec) -> Design | None:
    """The FlashAttention-4 kernel a device runs, or None (not a CUDA device it supports)."""
    if not isinstance(hardware, CudaDevice):
        return None
    major = hardware.sm.cc_major
    if major in TCGEN05_MAJORS and hardware.sm.tensor_memory_columns is not None:
        return Design.SM100
    if major in MMA_SYNC_MAJORS:
        return Design.SM120
    return None


def device_violation(hardware: HardwareSpec) -> FieldViolation:
    """Why a CUDA device runs no FlashAttention-4 kernel."""
    sm = cuda_device(hardware).sm
    if sm.cc_major in TCGEN05_MAJORS:
        why = f"{hardware.name} declares no tensor memory (sm.tensor_memory_columns)"
    else:
        why = f"{hardware.name} is {sm.compute_capability}"
    return FieldViolation(
        "kernel",
        "fa4 runs on compute capability 10.x and 11.x with tensor memory (tcgen05, the sm_100 "
        f"kernel) and on 12.x (its mma.sync sm_120 kernel); {why}",
    )


def padded(value: int) -> int:
    """A head dim padded to FA4's multiple of 16."""
    return ceil_div(value, HEAD_DIM_PAD) * HEAD_DIM_PAD


def kernel_head_dims(problem: AttentionProblem) -> tuple[int, int]:
    """The head dims the kernel computes with: each padded to a multiple of 16."""
    return padded(problem.head_dim), padded(problem.head_dim_v_eff)


def is_hd256(problem: AttentionProblem) -> bool:
    """Whether the problem runs the dedicated hd256 2-CTA kernel (interface.py:839)."""
    return (problem.head_dim, problem.head_dim_v_eff) == HD256_DIMS


def sm100_violations(problem: AttentionProblem) -> list[FieldViolation]:
    """FA4's rules on the problem on sm_100: the head-dim shapes it accepts (whole 16-byte
    rows), no dropout. bf16, fp16 and fp8 all run (fp8 only here, on 10.x)."""
    out = []
    d, dv = problem.head_dim, problem.head_dim_v_eff
    align = HEAD_DIM_ALIGN_BYTES // problem.dtype.bytes
    standard = 8 <= d <= STANDARD_MAX and 8 <= dv <= STANDARD_MAX
    if dv == MLA_HEAD_DIM_V:
        out.append(
            FieldViolation(
                "head_dim_v",
                "head_dim_v 512 (MLA absorbed) runs FlashAttention-4's MLA kernel, which is "
                "not modelled; fa4 models 8 <= head_dim, head_dim_v <= 128, (192, 128) and "
                "(256, 256)",
            )
        )
    elif not (standard or (d, dv) in (DEEPSEEK_DIMS, HD256_DIMS)):
        out.append(
            FieldViolation(
                "head_dim",
                f"fa4 on sm_100 takes 8 <= head_dim, head_dim_v <= 128, or (head_dim, "
                f"head_dim_v) = (192, 128) or (256, 256); got ({d}, {dv})",
            )
        )
    for field, value in (("head_dim", d), ("head_dim_v", dv)):
        if value % align:
            out.append(
                FieldViolation(
                    field,
                    f"fa4 needs {field} a multiple of {align} ({problem.dtype.value}: 16-byte "
                    f"rows); got {value}",
                )
            )
    if problem.dropout > 0:
        out.append(FieldViolation("dropout", "FlashAttention-4 has no dropout (allowed: 0)"))
    return out


def tile_params(problem: AttentionProblem) -> tuple[Param, ...]:
    """block_m (the tcgen05 M per CTA), block_n, num_warps (fixed by the warp roles), q_stage
    and cta_group."""
    warps = HD256_WARPS if is_hd256(problem) else GENERAL_WARPS
    return (
        Param(
            "block_m",
            (BLOCK_M,),
            "query rows per Q tile: the tcgen05 M of one CTA (128 TMEM lanes, one softmax "
            "thread per row)",
        ),
        Param(
            "block_n",
            tuple(range(BLOCK_N_STEP, BLOCK_N_MAX + 1, BLOCK_N_STEP)),
            "keys per K/V tile: the N of QK^T and the K of P.V (a multiple of the softmax's "
            "32-column fragments)",
        ),
        Param(
            "num_warps",
            (warps,),
            "warps per CTA, fixed by the warp roles (softmax, correction, MMA, epilogue, load)",
        ),
        Param(
            "q_stage",
            Q_STAGES,
            "Q tiles per CTA: 2 runs two softmax warpgroups on two Q tiles so that one's "
            "softmax overlaps the other's MMAs",
        ),
        Param(
            "cta_group",
            CTA_GROUPS,
            "2: a 2x1 cluster whose two CTAs share each tcgen05 MMA (M = 256), each holding "
            "half of every K/V tile",
        ),
    )


def shape_ok(cfg: ConfigArrays, problem: AttentionProblem) -> BoolArray:
    """The 2-CTA conditions and the hd256 kernel's fixed tile (interface.py, the kernels'
    asserts)."""
    n = len(cfg)
    bm, bn, q, cg = cfg["block_m"], cfg["block_n"], cfg["q_stage"], cfg["cta_group"]
    if is_hd256(problem):
        ok = (bm == HD256_BLOCK) & (bn == HD256_BLOCK) & (cg == 2) & (q == 1)
        return np.asarray(ok, dtype=np.bool_)
    two_cta_ok = np.full(n, two_cta_problem_ok(problem), dtype=np.bool_)
    two_cta_ok &= problem.seq_len * packed_group(cfg, problem) > 2 * bm
    if "num_splits" in cfg:
        two_cta_ok &= cfg["num_splits"] == 1
    if "pack_gqa" in cfg:
        two_cta_ok &= (cfg["pack_gqa"] == 0) | (bm % gqa_group(problem) == 0)
    ok = (cg == 1) | two_cta_ok
    return np.asarray(ok & (bn % BLOCK_N_STEP == 0), dtype=np.bool_)


def two_cta_problem_ok(problem: AttentionProblem) -> bool:
    """What the problem itself must be for the 2-CTA path: no causal mask, padded head dims
    (128 or 192, 128)."""
    d, dv = kernel_head_dims(problem)
    return not problem.causal and d in TWO_CTA_HEAD_DIMS and dv == TWO_CTA_HEAD_DIM_V


def packed_group(cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
    """Query heads per block row group: the GQA group where pack_gqa = 1, else 1."""
    if "pack_gqa" not in cfg:
        return np.ones(len(cfg), dtype=np.int64)
    return np.asarray(np.where(cfg["pack_gqa"] == 1, gqa_group(problem), 1), dtype=np.int64)


class Fa4Shape(Constraint):
    """The cluster mode and the tile combine as FA4's interface and kernels allow."""

    name = "fa4_shape"
    rule = SHAPE_RULE
    short = "shape"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        ok = shape_ok(ev.cfg, ev.problem)
        ok &= ev.cfg["cta_group"] <= cuda_device(ev.hardware).throughput.sm_count
        return [Rule("fa4_illegal", np.asarray(~ok, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} breaks fa4's rules: {SHAPE_RULE}"
