"""A family whose one registration holds several kernels and hands each device to the kernel
it runs (`ByDevice`): FlashAttention-4's sm_100 and sm_120 kernels (`fa4`), the triton family's
CUDA and ROCm kernels (`triton`). Each kernel is a complete `KernelFamily`; the registered
family answers every part of the interface with the kernel of the device. The two methods that
see no device (`common_fields`, hence `label`) tell the kernel by a configuration's parameters
(`of`). docs/architecture.md, "Decisions of the fa4 folder" and "One triton over two device
kinds".
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .constraints import Constraint
from .cost import Perf
from .errors import FieldViolation
from .family import KernelFamily, Resources
from .hardware import HardwareSpec
from .problem import AttentionProblem, SolveOptions
from .space import Config, ConfigArrays, IntArray, Param

if TYPE_CHECKING:
    from .candidates import CandidateTable, Evaluation


class ByDevice(KernelFamily):
    """A registration that hands every method to the kernel of the device (`on`)."""

    @abstractmethod
    def on(self, hardware: HardwareSpec) -> KernelFamily:
        """The kernel that runs on `hardware` (called once the device is known to run one)."""

    @abstractmethod
    def of(self, cfg: ConfigArrays) -> KernelFamily:
        """The kernel whose parameters `cfg` has."""

    @abstractmethod
    def _device_violations(self, hardware: HardwareSpec) -> list[FieldViolation]:
        """Why no kernel of the family runs on the device (empty if one does)."""

    # ---- the problem -------------------------------------------------------------------------
    def problem_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        """The device kind here; every other rule, the input dtypes included, is the device's
        kernel's (the kernels of one registration take different dtypes: flex takes fp32 on
        CUDA devices only, fa4's sm_120 kernel no fp8)."""
        if hardware.arch not in self.device_kinds:
            return super().problem_violations(problem, hardware)
        return self._family_violations(problem, hardware)

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        refused = self._device_violations(hardware)
        return refused or self.on(hardware).problem_violations(problem, hardware)

    def option_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> list[FieldViolation]:
        return self.on(hardware).option_violations(problem, hardware, options)

    def kernel_summary(self, hardware: HardwareSpec) -> str:
        if self._device_violations(hardware):
            return self.summary
        return self.on(hardware).kernel_summary(hardware)

    # ---- the decision variables --------------------------------------------------------------
    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return self.on(hardware).params(problem, hardware)

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        return self.on(hardware).request_params(problem, hardware, options)

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        return self.of(cfg).common_fields(cfg)

    def label(self, config: Config) -> str:
        names = config.as_dict()
        one = ConfigArrays.from_configs(list(names), [config])
        return self.of(one).label(config)

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

    def check_all(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        return self.on(hardware).check_all(hardware, problem, options, configs)
