"""What FlexAttention's three Triton templates share in the flex family: the problems they take,
the head dims they size their tiles with, and the block-mask options they accept.

Sources (pytorch/pytorch; reference/flex_attention.md): `torch/_inductor/kernel/flex/common.py`
`set_head_dim_values` rounds the Q/K and the V head dim each to the next power of two
(`QK_HEAD_DIM_ROUNDED`, `V_HEAD_DIM_ROUNDED`), and every tile is sized with the rounded dims;
`tl.dot` needs at least 16 (the lowering raises NotImplementedError below it); FlexAttention has
no fp8 path and no dropout; it takes fp16, bf16 and fp32. The model covers compute capability
8.0 and later (Triton's MMA and software pipeliner) and head dims up to 256.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ...constraints import ConstraintKind
from ...errors import FieldViolation
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, DType, SolveOptions
from ..cuda.constraints import cuda_resources
from ..cuda.resources import cuda_device
from .mask import sparse_block_size

if TYPE_CHECKING:
    from ...candidates import CandidateTable

MIN_CC = (8, 0)
ROCM_FORWARD_ONLY = (
    "on rocm devices the flex family models FlexAttention's forward template (--phase "
    "forward); its backward and decode templates have no ROCm model"
)
MIN_HEAD_DIM = 16  # tl.dot's smallest K extent
MAX_HEAD_DIM = 256  # the model's range (rounded dims above it fit no tile's shared memory)
SMALLEST_TILE = 16  # the smallest BLOCK_M / BLOCK_N the family declares


def rounded_head_dim(value: int) -> int:
    """The next power of two at or above `value` (set_head_dim_values)."""
    return 1 << max(0, (value - 1).bit_length())


def flex_head_dims(problem: AttentionProblem) -> tuple[int, int]:
    """The template's tile widths: the Q/K and V head dims, each rounded to a power of two."""
    return rounded_head_dim(problem.head_dim), rounded_head_dim(problem.head_dim_v_eff)


def flex_violations(problem: AttentionProblem, hardware: HardwareSpec) -> list[FieldViolation]:
    """The templates' rules on the problem: sm80+, fp16/bf16/fp32, head dims 16..256, no
    dropout. On a rocm device only the forward template is modelled (`rocm.py`)."""
    if hardware.arch == "rocm":
        return [FieldViolation("kernel", ROCM_FORWARD_ONLY)]
    violations = []
    sm = cuda_device(hardware).sm
    if (sm.cc_major, sm.cc_minor) < MIN_CC:
        violations.append(
            FieldViolation(
                "kernel",
                f"the flex family models compute capability >= 8.0; {hardware.name} is "
                f"{sm.compute_capability}",
            )
        )
    if problem.dtype is DType.FP8:
        violations.append(
            FieldViolation("dtype", "FlexAttention has no fp8 path; allowed: fp16, bf16, fp32")
        )
    for field, value in (("head_dim", problem.head_dim), ("head_dim_v", problem.head_dim_v_eff)):
        if not MIN_HEAD_DIM <= value <= MAX_HEAD_DIM:
            violations.append(
                FieldViolation(
                    field,
                    f"flex takes {field} from {MIN_HEAD_DIM} (tl.dot's smallest K) to "
                    f"{MAX_HEAD_DIM}; got {value}",
                )
            )
    if problem.dropout > 0:
        violations.append(FieldViolation("dropout", "FlexAttention has no dropout; set dropout 0"))
    return violations


def mask_option_violations(options: SolveOptions) -> list[FieldViolation]:
    """The block-mask options the templates can take: a block size some tile divides, and
    either a window or a stated density."""
    violations = []
    size = sparse_block_size(options)
    if size % SMALLEST_TILE:
        violations.append(
            FieldViolation(
                "sparse_block_size",
                f"the block mask's BLOCK_SIZE must be a multiple of the query and key tiles "
                f"(powers of two from {SMALLEST_TILE}); {size} is not a multiple of "
                f"{SMALLEST_TILE}, so no tile divides it (allowed: multiples of 16, e.g. 128)",
            )
        )
    if options.window is not None and options.block_density is not None:
        violations.append(
            FieldViolation(
                "block_density",
                "give either a window (the model derives the blocks) or a block density, not both",
            )
        )
    return violations


class FlexTemplateRules:
    """What every flex registration states alike: the element types it takes, the block-mask
    options it accepts, the rounded head dims its tiles are sized with, and the note on a
    pinned configuration that does not fit."""

    # FlexAttention compiles float32 inputs too (the dots at FLOAT32_PRECISION: `precision.py`)
    input_dtypes: ClassVar[tuple[DType, ...]] = (DType.FP16, DType.BF16, DType.FP32)

    def answer_notes(self, table: CandidateTable, ranked: list[int]) -> list[str]:
        """With no feasible configuration and pins given: the shared memory the pinned
        configurations need against the part's limit, and the nearest one that fits (fewest
        pins changed, then the fastest)."""
        if ranked or "pins" not in table.satisfied or table.satisfied["pins"].all():
            return []
        res = cuda_resources(table)
        limit = int(res.smem_limit_bytes)
        legal = table.satisfied["pins"].copy()
        for constraint in table.constraints:
            if constraint.kind is ConstraintKind.LEGALITY:
                legal &= table.satisfied[constraint.name]
        pinned = np.flatnonzero(legal)
        if not len(pinned):
            return []
        smallest = int(pinned[np.argmin(res.smem_bytes[pinned])])
        others = np.ones(len(table.cfg), dtype=np.bool_)
        for constraint in table.constraints:
            if constraint.name != "pins":
                others &= table.satisfied[constraint.name]
        note = (
            f"the pinned configuration needs {int(res.smem_bytes[smallest])} bytes of shared "
            f"memory at the least ({table.label(smallest)}); {table.hardware.name} allows "
            f"{limit} bytes per block"
        )
        fitting = np.flatnonzero(others)
        if not len(fitting):
            return [note]
        changed = np.zeros(len(fitting), dtype=np.int64)
        for name, value in table.pins.items():
            changed += table.column(name)[fitting] != value
        order = np.lexsort((table.time_ns[fitting], changed))
        nearest = int(fitting[order[0]])
        return [
            f"{note}; the nearest that fits: {table.label(nearest)} with "
            f"{int(res.smem_bytes[nearest])} bytes"
        ]

    def option_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> list[FieldViolation]:
        return mask_option_violations(options)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return flex_head_dims(problem)
