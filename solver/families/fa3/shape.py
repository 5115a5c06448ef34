"""FlashAttention-3's structure and the parameters it tiles with (the `fa3` family): the head
dims it compiles, the warp-specialised layout (one producer warpgroup, block_m / 64 consumer
warpgroups), the decision variables (block_m, block_n, the K/V ring, and the structural
options of FA3's kernel template), its own rules on the problem and between the options
(`Fa3Shape`). Sources: Shah et al., "FlashAttention-3" (2024) sec. 3; Dao-AILab/flash-attention
`hopper/` (`flash_api.cpp`: head dims; `mainloop_fwd_sm90_tma_gmma_ws.hpp`: the rules between
the options). Formulas: docs/model.md section 11.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...errors import FieldViolation
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, DType
from ...space import BoolArray, ConfigArrays, IntArray, Param
from ..cuda.resources import cuda_device

if TYPE_CHECKING:
    from ...candidates import Evaluation

# ---- what the kernel compiles for (hopper/flash_api.cpp, round_up_headdim) --------------------
FA3_HEAD_DIMS = (64, 96, 128, 192, 256)
FA3_COMPUTE_CAPABILITY = (9, 0)
# flash_api.cpp: head_size % alignment == 0 with alignment 16 for fp8 (e4m3), 8 otherwise: a
# row must be a whole number of 16-byte TMA units.
HEAD_DIM_ALIGN_BYTES = 16

# ---- the warp-specialised structure ----------------------------------------------------------
WARPGROUP_THREADS = 128  # 4 warps (PTX ISA: wgmma is issued by a warpgroup of 4 warps)
WARPGROUP_ROWS = 64  # the M of one wgmma.mma_async: each consumer warpgroup owns 64 rows
PRODUCER_WARPGROUPS = 1
BLOCK_M_VALUES = (64, 128, 192)  # 1, 2, 3 consumer warpgroups (FA3 asserts 1 <= W <= 3)
BLOCK_N_MAX = 256  # wgmma N of QK^T is at most 256
# The K of one wgmma step is 32 bytes: 16 elements of fp16/bf16, 32 of fp8; block_n is the K of
# the P.V wgmma, so it is a multiple of that.
WGMMA_K_BYTES = 32
# FP8 V must be transposed in shared memory for the second GEMM (FA3: LDSM.T + STSM by the
# producer); the transpose works on 64 x 32 blocks when dv % 64 == 0, else it needs
# block_n % 64 == 0 (mainloop_fwd_sm90_tma_gmma_ws.hpp static_asserts).
FP8_TRANSPOSE_V_MULTIPLE = 64

# The K/V ring: FA3 instantiates kStages = 2 on sm90 (flash_fwd_launch_template.h). One stage
# exposes every load and a third only adds shared memory where the second already hides the
# load, so neither changes the answer (docs/model.md 11.1).
KV_STAGES = (2,)

SHAPE_RULE = (
    "ping-pong needs two or more consumer warpgroups; P staged in shared memory needs "
    "intra-warpgroup overlap and 16-bit inputs (FA3 asserts both); fp8 block_n a multiple "
    "of 64 when head_dim_v is not"
)


def kernel_dim(value: int) -> int:
    """A head dim padded up to the next one FA3 compiles."""
    return next((h for h in FA3_HEAD_DIMS if h >= value), FA3_HEAD_DIMS[-1])


def kernel_head_dims(problem: AttentionProblem) -> tuple[int, int]:
    """The head dims FA3 compiles for: the next of 64, 96, 128, 192, 256."""
    return kernel_dim(problem.head_dim), kernel_dim(problem.head_dim_v_eff)


def fa3_violations(problem: AttentionProblem, hardware: HardwareSpec) -> list[FieldViolation]:
    """FA3's rules on the problem: compute capability 9.0, an fp8 peak for fp8, head dims of
    whole 16-byte TMA rows up to 256, the head-dim pairs it compiles, no dropout."""
    device = cuda_device(hardware)
    sm = device.sm
    cc = (sm.cc_major, sm.cc_minor)
    if cc != FA3_COMPUTE_CAPABILITY:
        why = (
            "sm_100 parts use tcgen05 and tensor memory instead"
            if sm.cc_major >= 10
            else "wgmma, TMA and setmaxnreg are sm_90a instructions"
        )
        return [
            FieldViolation(
                "kernel",
                f"fa3 runs on compute capability 9.0 only ({why}); {hardware.name} is "
                f"{sm.compute_capability}",
            )
        ]
    violations = []
    if problem.dtype is DType.FP8 and device.throughput.tensor_fp8_dense_tflops is None:
        violations.append(
            FieldViolation(
                "dtype",
                f"fp8 needs fp8 tensor cores; {hardware.name} has no fp8 tensor peak "
                "(allowed: fp16, bf16)",
            )
        )
    align = HEAD_DIM_ALIGN_BYTES // problem.dtype.bytes
    for field, value in (
        ("head_dim", problem.head_dim),
        ("head_dim_v", problem.head_dim_v_eff),
    ):
        if value > FA3_HEAD_DIMS[-1] or value % align:
            violations.append(
                FieldViolation(
                    field,
                    f"fa3 supports {field} a multiple of {align} ({problem.dtype.value}: "
                    f"16-byte TMA rows) up to {FA3_HEAD_DIMS[-1]}; got {value}",
                )
            )
    d, dv = problem.head_dim, problem.head_dim_v_eff
    if dv != d and not ((128 < d <= 192 and 96 < dv <= 128) or d <= 64):
        violations.append(
            FieldViolation(
                "head_dim_v",
                f"fa3 allows head_dim_v != head_dim only for head_dim in (128, 192] with "
                f"head_dim_v in (96, 128], or head_dim <= 64; got {d} and {dv}",
            )
        )
    if problem.dropout > 0:
        violations.append(
            FieldViolation(
                "dropout", "FlashAttention-3's forward kernel has no dropout (allowed: 0)"
            )
        )
    return violations


def tile_params(problem: AttentionProblem) -> tuple[Param, ...]:
    """block_m (1-3 consumer warpgroups), block_n (a multiple of the wgmma K), the K/V ring,
    and the structural options of FA3's template."""
    step = WGMMA_K_BYTES // problem.dtype.bytes
    return (
        Param(
            "block_m",
            BLOCK_M_VALUES,
            "query rows per CTA tile: 64 per consumer warpgroup (the wgmma M)",
        ),
        Param(
            "block_n",
            tuple(range(step, BLOCK_N_MAX + 1, step)),
            "keys per K/V iteration: the N of QK^T and the K of the P.V wgmma "
            f"(a multiple of {step} for {problem.dtype.value})",
        ),
        Param(
            "num_stages",
            KV_STAGES,
            "K/V tiles in the ring the producer fills by TMA (FA3 fixes 2 on sm90)",
        ),
        Param(
            "intra_wg_overlap",
            (0, 1),
            "1: each consumer warpgroup issues the next QK^T before its softmax "
            "(two-stage pipelining within a warpgroup)",
        ),
        Param(
            "pingpong",
            (0, 1),
            "1: named barriers make the consumer warpgroups take turns on the tensor "
            "cores, one's softmax under another's GEMMs",
        ),
        Param(
            "p_in_smem",
            (0, 1),
            "1: P is written to shared memory and P.V is an SS wgmma; 0: P stays in "
            "registers (RS wgmma)",
        ),
    )


def common_fields(cfg: ConfigArrays) -> dict[str, IntArray]:
    """block_m, block_n and the ring as declared; num_warps derived: 4 x (the consumer
    warpgroups + the producer)."""
    warpgroups = cfg["block_m"] // WARPGROUP_ROWS
    return {
        "block_m": cfg["block_m"],
        "block_n": cfg["block_n"],
        "num_warps": np.asarray(4 * (warpgroups + PRODUCER_WARPGROUPS), dtype=np.int64),
        "num_stages": cfg["num_stages"],
    }


def shape_ok(cfg: ConfigArrays, problem: AttentionProblem) -> BoolArray:
    """FA3's rules between its options (static_asserts of the mainloop)."""
    _, dv = kernel_head_dims(problem)
    warpgroups = cfg["block_m"] // WARPGROUP_ROWS
    fp8 = problem.dtype is DType.FP8
    pingpong_ok = (cfg["pingpong"] == 0) | (warpgroups >= 2)
    p_smem_ok = (cfg["p_in_smem"] == 0) | ((cfg["intra_wg_overlap"] == 1) & (not fp8))
    transpose_ok = np.ones(len(cfg), dtype=np.bool_)
    if fp8 and dv % FP8_TRANSPOSE_V_MULTIPLE:
        transpose_ok = cfg["block_n"] % FP8_TRANSPOSE_V_MULTIPLE == 0
    ok = (cfg["block_m"] % WARPGROUP_ROWS == 0) & pingpong_ok & p_smem_ok & transpose_ok
    return np.asarray(ok, dtype=np.bool_)


class Fa3Shape(Constraint):
    """The options combine as FA3's kernel template allows."""

    name = "fa3_shape"
    rule = "the structural options combine as FA3's kernel template allows"
    short = "shape"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        ok = shape_ok(ev.cfg, ev.problem)
        return [Rule("fa3_illegal", np.asarray(~ok, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} breaks fa3's rules: {SHAPE_RULE}"
