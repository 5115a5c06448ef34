"""What a kernel family must state: its tile domain, legality rules and resource formulas.

A family describes one kernel design. The formulas belong to the kernel, not to the chip: the
same A100 runs FlashAttention-2's CUDA kernel and a Triton kernel with different shared-memory
layouts and register footprints. Every method works on whole `ConfigArrays` at once.
Formulas and their sources are in `docs/model.md` ("Kernel families").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from ..errors import FieldViolation
from ..hardware import HardwareSpec
from ..problem import AttentionProblem, Phase
from ..space import ConfigArrays, Domain, IntArray

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

# Register-estimate constants (32-bit registers per thread); see docs/model.md "Registers".
MMA_ROWS = 16  # rows of one mma.m16n8k16 A tile; a warp's rows come in slabs of 16
FIXED_OVERHEAD_REGS = 36  # pointers, indices, loop state, predicates, B-operand staging
DROPOUT_EXTRA_REGS = 12  # Philox 4x32 counter + key and one batch of 4 random words
SOFTMAX_REGS_PER_SLAB = 4  # running max and sum for the 2 rows a thread owns per slab
A_FRAGMENT_REGS_PER_SLAB = 4  # one m16k16 fp16 A fragment (8 halves)


class KernelFamily(ABC):
    """A kernel design: which tiles it can run and what each costs in resources."""

    name: ClassVar[str]
    summary: ClassVar[str]
    alignment_rule: ClassVar[str]
    pipeline_note: ClassVar[str]

    # ---- the problem ---------------------------------------------------------------------
    def problem_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        """Reasons this family cannot run the problem on the hardware (empty if it can)."""
        violations: list[FieldViolation] = []
        if hardware.arch != "cuda":
            violations.append(
                FieldViolation(
                    "kernel",
                    f"kernel family {self.name!r} runs on CUDA devices; {hardware.name} is an "
                    f"{hardware.arch} device (allowed kernel for it: {hardware.default_kernel!r})",
                )
            )
            return violations
        if problem.phase is not Phase.FORWARD:
            violations.append(
                FieldViolation(
                    "phase",
                    f"phase {problem.phase.value!r} is not modelled yet for kernel {self.name!r}; "
                    "allowed: forward",
                )
            )
        violations.extend(self._family_violations(problem, hardware))
        return violations

    @abstractmethod
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]: ...

    @abstractmethod
    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """The head dims (Q/K, V) the compiled kernel actually uses, after padding."""

    # ---- the tile ------------------------------------------------------------------------
    @abstractmethod
    def domain(self, problem: AttentionProblem, hardware: HardwareSpec) -> Domain: ...

    @abstractmethod
    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, hardware: HardwareSpec
    ) -> BoolArray:
        """Whether each tile shape is one the kernel's instructions and copies can tile."""

    def threads_per_block(self, cfg: ConfigArrays, hardware: HardwareSpec) -> IntArray:
        sm, _ = hardware.cuda
        return cfg.num_warps * sm.warp_size_threads

    @abstractmethod
    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Dynamic shared memory of one block, bytes."""

    @abstractmethod
    def q_in_registers(self) -> bool:
        """True if Q fragments stay in registers; False if re-read from shared memory."""

    @abstractmethod
    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        """Iterations of compute available to hide one K/V tile load (0 = none)."""

    def tile_readers(self, cfg: ConfigArrays, hardware: HardwareSpec) -> FloatArray:
        """How many times each K/V tile is read from shared memory per iteration: once per
        warp for warp-level mma.sync (each warp loads its own B fragments)."""
        return cfg.num_warps.astype(np.float64)

    def tensor_efficiency(self, cfg: ConfigArrays, hardware: HardwareSpec) -> FloatArray:
        """Fraction of the dense tensor peak this family's MMA instruction can reach."""
        _, tp = hardware.cuda
        return np.full(len(cfg), tp.mma_sync_efficiency, dtype=np.float64)

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Estimated 32-bit registers per thread the kernel wants before any spilling.

        Accumulators are FP32 and spread over the 32 lanes of the warp that owns the rows:
        O holds rows_per_warp x dv, S holds rows_per_warp x block_n. Softmax keeps a max and a
        sum per owned row; one A fragment (Q, or P) is staged per 16-row slab; Q stays in
        registers for families that keep it there (fp16 packed two per register).
        """
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        rows_per_warp = cfg.block_m // cfg.num_warps
        slabs = np.maximum(rows_per_warp // MMA_ROWS, 1)
        o_acc = -(-rows_per_warp * dv // 32)
        s_acc = -(-rows_per_warp * cfg.block_n // 32)
        softmax = SOFTMAX_REGS_PER_SLAB * slabs
        a_frag = A_FRAGMENT_REGS_PER_SLAB * slabs
        q_regs = -(-rows_per_warp * d * elem // (32 * 4)) if self.q_in_registers() else 0
        dropout = DROPOUT_EXTRA_REGS if problem.dropout > 0 else 0
        total = o_acc + s_acc + softmax + a_frag + q_regs + FIXED_OVERHEAD_REGS + dropout
        return np.asarray(total, dtype=np.int64)


def pow2_range(lo: int, hi: int) -> tuple[int, ...]:
    """Powers of two from lo to hi inclusive."""
    out = []
    value = lo
    while value <= hi:
        out.append(value)
        value *= 2
    return tuple(out)
