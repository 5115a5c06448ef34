"""What a kernel family must state: its parameters, resources, constraints and cost.

A family describes one kernel design for one phase. The formulas belong to the kernel, not to
the chip: the same A100 runs FlashAttention-2's CUDA kernel and a Triton kernel with different
shared-memory layouts and register footprints. A family is registered under (name, phase) in
`registry.py` (the built-in ones from their kernel folders, `families/<kernel>/`); everything
else (the candidate table, both engines, the validator, pins, tie-breaking, explanations, the
heatmap, the answer, the wire and the CLI) works from what it declares here.
`docs/architecture.md` walks through adding one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .errors import FieldViolation
from .hardware import HardwareSpec
from .problem import BLOCK_MASK_FIELDS, AttentionProblem, DType, Phase, SolveOptions
from .space import COMMON_FIELDS, Config, ConfigArrays, IntArray, Param

if TYPE_CHECKING:
    from .candidates import CandidateTable, Evaluation
    from .constraints import Constraint
    from .cost import Perf
    from .split_kv import SplitKv


@dataclass(frozen=True)
class CapacityUse:
    """One resource of one configuration: how much it uses of what the hardware grants (the
    answer reports it as an `answer.ResourceUse`)."""

    name: str
    used: int
    capacity: int
    unit: str


class Resources(ABC):
    """What every candidate needs of the hardware (arrays over the candidates)."""

    @abstractmethod
    def uses(self, i: int) -> list[CapacityUse]:
        """Configuration i's use of each resource, for the answer."""

    def candidate_fields(self, i: int) -> dict[str, Any]:
        """Values of the answer's optional common fields (smem_bytes, regs_per_thread, ...)
        that this kind of resource record knows, for configuration i."""
        return {}


class KernelFamily(ABC):
    """A kernel design for one phase: which configurations it can run, what each needs of
    the hardware, which constraints apply, and how long each takes."""

    name: ClassVar[str]
    phase: ClassVar[Phase] = Phase.FORWARD
    device_kind: ClassVar[str]  # the `arch` of the devices it runs on ("cuda", "ascend", ...)
    # Further device kinds, for a family whose registration hands each kind's devices to a
    # kernel of its own (`dispatch.ByDevice`: triton on cuda and rocm).
    other_device_kinds: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str]
    # The family's split-KV, GQA-packing and paged-KV path (`split_kv.SplitKv`), if it has one.
    split_kv: ClassVar[SplitKv | None] = None
    # The element types the family's kernels take (a family may refuse some of them on some
    # parts, fp8 below its compute capability say, in `_family_violations`). FP32 is the one
    # the shared rule of `problem_violations` judges: only a family that lists it takes it.
    input_dtypes: ClassVar[tuple[DType, ...]] = (DType.FP16, DType.BF16, DType.FP8)

    @property
    def paged_kv_rule(self) -> str | None:
        """The page sizes the family's paged-KV path takes, in words (None: it has none, and a
        request for a paged cache is invalid input naming the families that have one)."""
        return None if self.split_kv is None else self.split_kv.paged_kv_rule

    @property
    def device_kinds(self) -> tuple[str, ...]:
        """Every device kind (`arch`) the family runs on, its first kind first."""
        return (self.device_kind, *self.other_device_kinds)

    # ---- the problem ---------------------------------------------------------------------
    def problem_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        """Reasons this family cannot run the problem on the hardware (empty if it can)."""
        if hardware.arch not in self.device_kinds:
            return [
                FieldViolation(
                    "kernel",
                    f"kernel family {self.name!r} runs on {' and '.join(self.device_kinds)} "
                    "devices; "
                    f"{hardware.name} is {'an' if hardware.arch[0] in 'aeiou' else 'a'} "
                    f"{hardware.arch} device",
                )
            ]
        if problem.dtype is DType.FP32 and DType.FP32 not in self.input_dtypes:
            return [self.fp32_refusal()]
        return self._family_violations(problem, hardware)

    def fp32_refusal(self) -> FieldViolation:
        """The one refusal of fp32 inputs by a family that does not take them: the dtypes it
        does take, and the family that takes fp32."""
        takes = ", ".join(d.value for d in self.input_dtypes)
        return FieldViolation(
            "dtype",
            f"kernel family {self.name!r} takes {takes} (allowed: {takes}); fp32 inputs run in "
            "the flex family only (FlexAttention compiles float32 tensors: --kernel flex)",
        )

    @abstractmethod
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        """The family's own rules (compute capability, dtypes, head dims), on its device kind."""

    def option_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> list[FieldViolation]:
        """The family's rules for the options beyond the common ones. By default a family has
        no block-mask model, so a block-mask field (`problem.BLOCK_MASK_FIELDS`) is refused."""
        return [
            FieldViolation(
                name,
                f"kernel family {self.name!r} has no block-mask model; block-mask options "
                "apply to a family that models a BlockMask (--kernel flex)",
            )
            for name in BLOCK_MASK_FIELDS
            if getattr(options, name) is not None
        ]

    # ---- the decision variables ------------------------------------------------------------
    @abstractmethod
    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        """The decision variables and their domains for this problem on this hardware."""

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        """The decision variables of one request: `params`, plus any that the request's options
        add (a paged KV cache's page size, `split_kv.py`). The candidate table and
        the validator read this; a family whose space does not depend on the options keeps
        the default."""
        return self.params(problem, hardware)

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        """The common tile fields (block_m, block_n, num_warps, num_stages) this family has,
        declared or derived from its parameters. Default: those it declares."""
        return {name: cfg[name] for name in COMMON_FIELDS if name in cfg}

    def label(self, config: Config) -> str:
        """A configuration as people write it: '128x64 w4 s1', then other parameters."""
        values = config.as_dict()
        common = {**values, **self.derived(values)}
        parts = []
        if "block_m" in common and "block_n" in common:
            parts.append(f"{common['block_m']}x{common['block_n']}")
        if "num_warps" in common:
            parts.append(f"w{common['num_warps']}")
        if "num_stages" in common:
            parts.append(f"s{common['num_stages']}")
        parts.extend(f"{k}={v}" for k, v in values.items() if k not in COMMON_FIELDS)
        return " ".join(parts)

    def derived(self, values: dict[str, int]) -> dict[str, int]:
        """The derived common fields of one configuration (by its common_fields)."""
        one = ConfigArrays({k: np.array([v], dtype=np.int64) for k, v in values.items()})
        return {k: int(v[0]) for k, v in self.common_fields(one).items()}

    # ---- what a configuration needs, what limits it, what it costs -------------------------
    @abstractmethod
    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> Resources:
        """Every configuration's use of the hardware's resources."""

    @abstractmethod
    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        """The family's constraints in funnel order: its legality rules first, then the
        hardware's capacities and the caps the user sets on them. The shared ones (pins,
        divisibility) are added around them by the candidate table."""

    @abstractmethod
    def evaluate(self, ev: Evaluation) -> Perf:
        """The cost model: predicted time and its parts for every configuration."""

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Keys of the fixed tie-break order for equal modelled times, most significant first
        (smaller wins): what keeps the kernel efficient beyond the model. The enumeration
        order closes any remaining tie."""
        return []

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        """Family-specific lines of configuration i's reasons (after the rank line)."""
        return []

    def kernel_summary(self, hardware: HardwareSpec) -> str:
        """What the family models on this device, for the answer's `kernel_reason` (default:
        the summary; a family whose real kernel differs per device names it here)."""
        return self.summary

    def answer_notes(self, table: CandidateTable, ranked: list[int]) -> list[str]:
        """The family's remarks on the answer as a whole (e.g. which catalog inputs of the
        prediction are unconfirmed); appended to the answer's `notes`."""
        return []

    @abstractmethod
    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The validator's independent statement of the family's rules for one
        configuration: every rule it breaks, as '<constraint>: <why>' (empty if none)."""

    def check_all(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """`check` of each configuration (a family may state its rules once over all of
        them, vectorised, when it gives the same answer as `check` for each)."""
        return [self.check(hardware, problem, options, config) for config in configs]


def cuda_only_options(options: SolveOptions) -> list[str]:
    """The CLI flags of the options set that only a CUDA device's residency rules read
    (a family of another device kind ignores them and says so in its notes)."""
    return [
        flag
        for flag, value in (
            ("--max-smem", options.max_smem),
            ("--min-blocks-per-sm", options.min_blocks_per_sm),
        )
        if value is not None
    ]


def pow2_range(lo: int, hi: int) -> tuple[int, ...]:
    """Powers of two from lo to hi inclusive."""
    out = []
    value = lo
    while value <= hi:
        out.append(value)
        value *= 2
    return tuple(out)


def kib(value: float) -> str:
    """Bytes as people read them in a reason line: '48 KiB'."""
    return f"{value / 1024:g} KiB"
