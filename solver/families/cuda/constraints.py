"""The CUDA constraints, in the hand method's order (seed 000): the tile shape the kernel's
instructions can tile, threads per block, shared memory (the hardware's and the user's cap),
registers, and the blocks that must fit on one SM. Each reads the candidates' `CudaResources`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Relaxation, Rule
from ...family import kib
from ...space import IntArray
from .resources import MAX_SPILL_REGS, CudaResources, cuda_device

if TYPE_CHECKING:
    from ...candidates import Evaluation
    from .family import CudaFamily


def cuda_resources(ev: Evaluation) -> CudaResources:
    """The evaluation's resources, which a CUDA family's are."""
    assert isinstance(ev.res, CudaResources)
    return ev.res


class Alignment(Constraint):
    """The tile shape is one the family's MMA and copy instructions can tile."""

    name = "alignment"
    rule = "the tile shape is one the family's instructions can tile"
    short = "align"
    kind = ConstraintKind.LEGALITY

    def __init__(self, family: CudaFamily):
        self.family = family

    def rules(self, ev: Evaluation) -> list[Rule]:
        ok = self.family.alignment_ok(ev.cfg, ev.problem, cuda_device(ev.hardware))
        return [Rule("misaligned", np.asarray(~ok, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} breaks {self.family.name}'s alignment: {self.family.alignment_rule}"


class Threads(Constraint):
    """Threads per block within what one block may launch."""

    name = "threads"
    rule = "threads per block within the hardware maximum"
    short = "thrds"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        res = cuda_resources(ev)
        return [Rule("threads", res.threads, "<=", res.max_threads)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = cuda_resources(ev)
        return f"{ev.label(i)} needs {res.threads[i]} threads per block, maximum {res.max_threads}"


class SharedMemory(Constraint):
    """Dynamic shared memory per block within the opt-in maximum."""

    name = "shared_memory"
    rule = "shared memory per block within the opt-in maximum"
    short = "smem"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        res = cuda_resources(ev)
        return [Rule("smem_bytes", res.smem_bytes, "<=", res.smem_limit_bytes)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = cuda_resources(ev)
        return (
            f"{ev.label(i)} needs {kib(res.smem_bytes[i])} of shared memory, "
            f"the opt-in maximum is {kib(res.smem_limit_bytes)}"
        )


class MaxSmem(Constraint):
    """Shared memory per block within the user's cap (--max-smem)."""

    name = "max_smem"
    rule = "shared memory per block within the user's cap"
    short = "cap"
    kind = ConstraintKind.USER

    def rules(self, ev: Evaluation) -> list[Rule]:
        if ev.options.max_smem is None:
            return []
        return [Rule("smem_bytes", cuda_resources(ev).smem_bytes, "<=", ev.options.max_smem)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return (
            f"{ev.label(i)} needs {kib(cuda_resources(ev).smem_bytes[i])} of shared memory, "
            f"the cap is {kib(ev.options.max_smem or 0)}"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        smem = cuda_resources(ev).smem_bytes
        smallest = int(allowed[np.argmin(smem[allowed])])
        return Relaxation(
            self.name,
            "option",
            "max_smem",
            int(smem[smallest]),
            f"raise --max-smem to {smem[smallest]} bytes ({kib(smem[smallest])}, the smallest "
            f"feasible cap) with {ev.label(smallest)}",
        )


class Registers(Constraint):
    """The estimated registers spill at most MAX_SPILL_REGS per thread."""

    name = "registers"
    rule = f"estimated registers spill at most {MAX_SPILL_REGS} per thread"
    short = "regs"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("spill_regs", cuda_resources(ev).spill_regs, "<=", MAX_SPILL_REGS)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = cuda_resources(ev)
        return (
            f"{ev.label(i)} wants about {res.regs_demand[i]} registers per thread; with a limit "
            f"of {res.regs_cap[i]} it would spill {res.spill_regs[i]} (> {MAX_SPILL_REGS})"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        least = int(cuda_resources(ev).spill_regs[allowed].min())
        return Relaxation(
            self.name,
            "none",
            "",
            None,
            f"accept {least} spilled registers per thread (best then: {ev.label(best)})",
        )


class ResidentBlocks(Constraint):
    """At least the required blocks per SM fit (the occupancy constraint)."""

    name = "occupancy"
    rule = "at least the required number of blocks fit on one SM"
    short = "occ"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        need = max(1, ev.options.min_blocks_per_sm or 1)
        return [Rule("blocks_per_sm", cuda_resources(ev).occupancy.blocks_per_sm, ">=", need)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = cuda_resources(ev)
        need = max(1, ev.options.min_blocks_per_sm or 1)
        limiters = ", ".join(x.value for x in res.occupancy.limiters(i))
        return (
            f"{ev.label(i)} fits {res.occupancy.blocks_per_sm[i]} block(s) per SM (limited by "
            f"{limiters}), {need} required"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        if not ev.options.min_blocks_per_sm:
            return super().relaxation(ev, allowed, best)
        most = int(cuda_resources(ev).occupancy.blocks_per_sm[allowed].max())
        return Relaxation(
            self.name,
            "option",
            "min_blocks_per_sm",
            most,
            f"lower --min-blocks-per-sm to {most} (best then: {ev.label(best)})",
        )
