"""What one workgroup of an attention kernel needs of a CU on a rocm device, as every AMD family
reports it (`WorkgroupResources`: LDS, registers, threads, workgroups per CU), and the two
capacities every such family states (`LdsCapacity`, `Resident`). A family adds its own register
record (`vgpr_use`, `register_fields`). docs/model.md 19.2 and 19.4.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...family import CapacityUse, Resources, kib
from ...hardware import RocmCompute
from ...occupancy_rocm import RocmOccupancyArrays
from ...space import IntArray

if TYPE_CHECKING:
    from ...candidates import Evaluation


@dataclass(frozen=True)
class WorkgroupResources(Resources):
    """What each candidate's workgroup needs of one CU (arrays over the candidates)."""

    rocm: RocmCompute
    threads: IntArray
    lds: IntArray  # bytes as requested
    lds_allocated: IntArray  # bytes, rounded up to the granule
    occupancy: RocmOccupancyArrays

    @abstractmethod
    def vgpr_use(self, i: int) -> CapacityUse:
        """Configuration i's VGPR+AGPR per lane against what it may use."""

    @abstractmethod
    def register_fields(self, i: int) -> dict[str, Any]:
        """The answer's register fields of configuration i (regs_per_thread, regs_demand, ...)."""

    def uses(self, i: int) -> list[CapacityUse]:
        r = self.rocm
        return [
            CapacityUse(
                "lds", int(self.lds_allocated[i]), r.lds_per_workgroup_bytes, "bytes/workgroup"
            ),
            self.vgpr_use(i),
            CapacityUse(
                "threads", int(self.threads[i]), r.max_workgroup_threads, "threads/workgroup"
            ),
            CapacityUse(
                "workgroups_per_cu",
                int(self.occupancy.workgroups_per_cu[i]),
                r.waves_per_cu * r.wavefront_lanes // max(int(self.threads[i]), 1),
                "workgroups/CU",
            ),
        ]

    def candidate_fields(self, i: int) -> dict[str, Any]:
        return {
            "threads_per_block": int(self.threads[i]),
            "smem_bytes": int(self.lds_allocated[i]),
            **self.register_fields(i),
            "blocks_per_sm": int(self.occupancy.workgroups_per_cu[i]),
            "occupancy_limiter": self.occupancy.limiter[i],
            "occupancy": int(self.occupancy.waves_per_cu[i]) / self.rocm.waves_per_cu,
        }


def workgroup_of(ev: Evaluation) -> WorkgroupResources:
    """The evaluation's resources, which an AMD family's are."""
    assert isinstance(ev.res, WorkgroupResources)
    return ev.res


class LdsCapacity(Constraint):
    """The workgroup's LDS, rounded up to the granule, within what one workgroup may use."""

    name = "lds"
    rule = (
        "the workgroup's LDS (rounded up to the allocation granule) within lds_per_workgroup_bytes"
    )
    short = "lds"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        res = workgroup_of(ev)
        over = res.lds_allocated > res.rocm.lds_per_workgroup_bytes
        return [Rule("lds_over", np.asarray(over, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = workgroup_of(ev)
        cap = kib(res.rocm.lds_per_workgroup_bytes)
        return f"{ev.label(i)} needs {kib(res.lds_allocated[i])} of LDS; a workgroup may use {cap}"


class Resident(Constraint):
    """At least one workgroup fits a CU (threads, registers, LDS and wave slots together)."""

    name = "occupancy"
    rule = "at least one workgroup resident per CU (AMD's occupancy rules)"
    short = "occ"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        res = workgroup_of(ev)
        return [Rule("workgroups_per_cu", res.occupancy.workgroups_per_cu, ">=", 1)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = workgroup_of(ev)
        return f"{ev.label(i)} cannot be resident on a CU (limited by {res.occupancy.limiter[i]})"
