"""The candidate table: every configuration of the domain with its resources, figures,
constraint results and objective key. Both engines read the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .constraints import ConstraintName, Resources, resources, satisfied
from .families.base import BoolArray, KernelFamily
from .hardware import HardwareSpec
from .perf_model import PerfArrays, evaluate
from .problem import AttentionProblem, SolveOptions
from .space import ConfigArrays, IntArray

# The objective is the modelled time in whole nanoseconds; equal times are ordered by the
# fixed tie-break order, which makes `objective` (time_ns * N + tie position) a unique key.
NS_PER_US = 1000
MAX_TIME_NS = 1 << 52  # 52 days: slower configurations all tie here and rank by the tie order


@dataclass(frozen=True)
class CandidateTable:
    """All configurations of a (problem, hardware, family, options) request."""

    problem: AttentionProblem
    hardware: HardwareSpec
    family: KernelFamily
    options: SolveOptions
    cfg: ConfigArrays
    res: Resources
    perf: PerfArrays
    satisfied: dict[ConstraintName, BoolArray]
    feasible: BoolArray
    tie_order: IntArray  # position of each configuration in the fixed tie-break order
    time_ns: IntArray  # modelled time, whole nanoseconds (the integer program's objective)
    objective: IntArray  # time_ns * N + tie_order: the total ranking order, all distinct

    def __len__(self) -> int:
        return len(self.cfg)

    def ranked_feasible(self) -> IntArray:
        """Indices of feasible configurations, best first (the exhaustive ranking)."""
        indices = np.flatnonzero(self.feasible)
        return np.asarray(indices[np.argsort(self.objective[indices], kind="stable")])


def tie_break_order(cfg: ConfigArrays, smem_bytes: IntArray) -> IntArray:
    """Fixed total order for equal times: less shared memory, fewer warps, fewer stages,
    then larger block_m, then larger block_n (the enumeration makes it total)."""
    keys = (
        -cfg.block_n,
        -cfg.block_m,
        cfg.num_stages,
        cfg.num_warps,
        smem_bytes,
    )  # np.lexsort sorts by the last key first
    order = np.lexsort(keys)
    position = np.empty(len(cfg), dtype=np.int64)
    position[order] = np.arange(len(cfg), dtype=np.int64)
    return position


def build_table(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
) -> CandidateTable:
    """Enumerate the family's domain and evaluate every configuration."""
    cfg = ConfigArrays.from_domain(family.domain(problem, hardware))
    res = resources(family, hardware, problem, options, cfg)
    perf = evaluate(family, hardware, problem, cfg, res.occupancy.blocks_per_sm, res.spill_regs)
    sat = satisfied(family, hardware, problem, options, cfg, res)
    feasible = np.logical_and.reduce(list(sat.values()))
    order = tie_break_order(cfg, res.smem_bytes)
    time_ns = np.clip(np.rint(perf.time_us * NS_PER_US), 1, MAX_TIME_NS).astype(np.int64)
    objective = time_ns * len(cfg) + order
    return CandidateTable(
        problem=problem,
        hardware=hardware,
        family=family,
        options=options,
        cfg=cfg,
        res=res,
        perf=perf,
        satisfied=sat,
        feasible=np.asarray(feasible, dtype=np.bool_),
        tie_order=order,
        time_ns=time_ns,
        objective=objective,
    )
