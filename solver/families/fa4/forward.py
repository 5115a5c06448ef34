"""FlashAttention-4 (`fa4`, forward): the family that answers on Blackwell, by the kernel the
device runs (`shape.design`): the tcgen05 / tensor-memory kernel on compute capability 10.x and
11.x (`sm100.py`), the SM80 mma.sync port on 12.x (`sm120.py`). The registered family holds
both designs and hands every part of the interface to the one of the device: their parameters
differ (q_stage and cta_group on sm_100; num_warps and num_stages on sm_120), and a
configuration's own parameters say which design made it (`common_fields`, `label`).

Sources: Dao-AILab/flash-attention@0251105a `flash_attn/cute/` (`interface.py`: which kernel
each architecture runs), Zadouri et al., "FlashAttention-4" (2026). Formulas: docs/model.md
section 17.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from ...constraints import Constraint
from ...cost import Perf
from ...errors import FieldViolation
from ...family import KernelFamily, Resources
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, SolveOptions
from ...space import Config, ConfigArrays, IntArray, Param
from .shape import Design, design, device_violation
from .sm100 import Fa4Sm100
from .sm120 import Fa4Sm120
from .split import FA4_SM100_SPLIT_KV

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# The parameter only the sm_100 design declares: it tells a configuration's design apart.
SM100_ONLY_PARAMETER = "q_stage"


class FlashAttention4(KernelFamily):
    """fa4 forward: FlashAttention-4's sm_100 kernel on compute capability 10.x, its sm_120
    kernel on 12.x."""

    name = "fa4"
    device_kind = "cuda"
    summary = (
        "FlashAttention-4 forward (sm_100: tcgen05 into tensor memory, warp roles, 2-CTA "
        "clusters; sm_120: the SM80 mma.sync design under 99 KB)"
    )
    # Neither design has a paged-KV path (split.py); the sm_100 design's split-KV path
    split_kv = FA4_SM100_SPLIT_KV
    designs: ClassVar[dict[Design, KernelFamily]] = {
        Design.SM100: Fa4Sm100(),
        Design.SM120: Fa4Sm120(),
    }

    def on(self, hardware: HardwareSpec) -> KernelFamily:
        """The design that runs on `hardware` (a family checks the device before it gets
        here)."""
        chosen = design(hardware)
        if chosen is None:
            raise TypeError(f"fa4 has no kernel for {hardware.name}")
        return self.designs[chosen]

    def of(self, cfg: ConfigArrays) -> KernelFamily:
        """The design whose parameters `cfg` has."""
        chosen = Design.SM100 if SM100_ONLY_PARAMETER in cfg else Design.SM120
        return self.designs[chosen]

    # ---- the problem -------------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        if design(hardware) is None:
            return [device_violation(hardware)]
        return self.on(hardware).problem_violations(problem, hardware)

    def kernel_summary(self, hardware: HardwareSpec) -> str:
        return self.on(hardware).summary if design(hardware) is not None else self.summary

    # ---- the decision variables --------------------------------------------------------------
    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return self.on(hardware).params(problem, hardware)

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        return self.on(hardware).request_params(problem, hardware, options)

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        return self.of(cfg).common_fields(cfg)

    # ---- resources, constraints, cost ----------------------------------------------------------
    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> Resources:
        return self.on(hardware).resources(hardware, problem, options, cfg)

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return self.on(hardware).constraints(hardware, problem, options)

    def evaluate(self, ev: Evaluation) -> Perf:
        return self.on(ev.hardware).evaluate(ev)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        return self.on(ev.hardware).tie_keys(ev)

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        return self.on(table.hardware).reason_lines(table, i)

    def answer_notes(self, table: CandidateTable, ranked: list[int]) -> list[str]:
        return self.on(table.hardware).answer_notes(table, ranked)

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        return self.on(hardware).check(hardware, problem, options, config)
