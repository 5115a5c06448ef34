"""The candidate table: every configuration of the family's space with its resources, cost,
constraint results and objective key. Both engines read the same table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .constraints import Constraint, ConstraintKind, Divisibility, Pins
from .cost import Perf
from .family import KernelFamily, Resources
from .hardware import HardwareSpec
from .pins import resolve_pins
from .problem import AttentionProblem, SolveOptions
from .space import BoolArray, ConfigArrays, IntArray, Param

# The objective is the modelled time in whole nanoseconds; equal times are ordered by the
# fixed tie-break order, which makes `objective` (time_ns * N + tie position) a unique key.
NS_PER_US = 1000
MAX_TIME_NS = 1 << 52  # 52 days: slower configurations all tie here and rank by the tie order
# The fields that name a tile: two configurations that share them (those the family has) and
# their modelled time in whole nanoseconds are *twins*: they differ only in parameters the model
# prices alike there (a waves_per_eu cap that does not bind, kpack, stages a target does not
# keep), so the answer gives them one row, the first in the ranking order (`CandidateTable.twins`,
# docs/model.md 6).
TILE_FIELDS = ("block_m", "block_n", "num_warps")


@dataclass(frozen=True)
class Evaluation:
    """A request and its space: what constraints and cost models read."""

    family: KernelFamily
    hardware: HardwareSpec
    problem: AttentionProblem
    options: SolveOptions
    params: tuple[Param, ...]
    cfg: ConfigArrays  # the declared parameters' columns
    common: dict[str, IntArray]  # block_m, block_n, num_warps, num_stages where they apply
    pins: dict[str, int]  # resolved pins: declared parameter or common field -> value
    res: Resources

    def column(self, name: str) -> IntArray:
        """A declared parameter's column, or a common field's."""
        return self.cfg[name] if name in self.cfg else self.common[name]

    def label(self, i: int) -> str:
        """Configuration i as people write it ('128x64 w4 s1')."""
        return self.family.label(self.cfg.config(i))


@dataclass(frozen=True)
class CandidateTable(Evaluation):
    """All configurations of a (problem, hardware, family, options) request, evaluated."""

    perf: Perf
    constraints: tuple[Constraint, ...]  # in funnel order
    satisfied: dict[str, BoolArray]  # constraint name -> which candidates satisfy it
    feasible: BoolArray
    time_ns: IntArray  # modelled time, whole nanoseconds (the integer program's objective)
    objective: IntArray  # time_ns * N + tie-break position: the total ranking order, all distinct

    def __len__(self) -> int:
        return len(self.cfg)

    def constraint(self, name: str) -> Constraint:
        return next(c for c in self.constraints if c.name == name)

    def legal(self) -> BoolArray:
        """Configurations that satisfy every legality rule of the kernel."""
        ok = np.ones(len(self), dtype=np.bool_)
        for c in self.constraints:
            if c.kind is ConstraintKind.LEGALITY:
                ok &= self.satisfied[c.name]
        return ok

    def ranked_feasible(self) -> IntArray:
        """Indices of feasible configurations, best first (the exhaustive ranking)."""
        indices = np.flatnonzero(self.feasible)
        return np.asarray(indices[np.argsort(self.objective[indices], kind="stable")])

    def twins(self, i: int) -> IntArray:
        """Indices of configuration i's twins (`TILE_FIELDS`): the other configurations with
        its tile fields and its modelled time (whole ns), feasible or not; none where the
        family has no tile field."""
        columns = self._tile_columns()
        if not columns:
            return np.zeros(0, dtype=np.int64)
        same = np.flatnonzero(self.time_ns == self.time_ns[i])
        for column in columns:
            same = same[column[same] == column[i]]
        return np.asarray(same[same != i], dtype=np.int64)

    def answer_ranks(self, order: IntArray) -> IntArray:
        """The answer's rank of each configuration of `order` (feasible ones, best first, as
        `ranked_feasible` gives them): the rank of the row that stands for it, itself or the
        first of its twins in `order` (`distinct_ranked`'s rows, numbered from 1)."""
        columns = self._tile_columns()
        if not columns:  # no twins: every configuration its own row
            return np.arange(1, len(order) + 1, dtype=np.int64)
        key = np.stack([self.time_ns[order], *(c[order] for c in columns)], axis=1)
        _, first, group = np.unique(key, axis=0, return_index=True, return_inverse=True)
        rank_of_group = np.empty(len(first), dtype=np.int64)
        rank_of_group[np.argsort(first)] = np.arange(1, len(first) + 1)
        return np.asarray(rank_of_group[group.ravel()])

    def _tile_columns(self) -> list[IntArray]:
        """The columns of the TILE_FIELDS the family has."""
        return [self.common[name] for name in TILE_FIELDS if name in self.common]

    def distinct_ranked(self, top_k: int) -> list[int]:
        """The `top_k` best feasible configurations, best first, one per set of twins (the
        first of each in the ranking order): the exhaustive engine's answer."""
        ranked: list[int] = []
        folded: set[int] = set()
        for i in self.ranked_feasible():
            if len(ranked) == top_k:
                break
            if int(i) in folded:
                continue
            ranked.append(int(i))
            folded.update(int(j) for j in self.twins(int(i)))
        return ranked


def tie_break_order(keys: Sequence[IntArray], n: int) -> IntArray:
    """Position of each configuration in the fixed total order for equal times: by `keys`,
    most significant first (smaller first), then enumeration order."""
    order = _combined_order(keys, n)
    if order is None:
        order = np.lexsort([*reversed(keys), *([] if keys else [np.arange(n)])])
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n, dtype=np.int64)
    return position


def _combined_order(keys: Sequence[IntArray], n: int) -> IntArray | None:
    """`np.lexsort`'s order of `keys` and then the enumeration order, from one argsort of a
    single int64 key (each key offset to start at 0, packed in mixed radix, most significant
    first, the enumeration index last, so that no two packed keys are equal): several times
    faster than a lexsort over tens of thousands of configurations. None where a key is not an
    integer column or the packed key would not fit in 62 bits."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if not all(np.issubdtype(np.asarray(k).dtype, np.integer) for k in keys):
        return None
    offsets = [int(k.min()) for k in keys]
    spans = [int(k.max()) - low + 1 for k, low in zip(keys, offsets, strict=True)]
    if math.prod(spans) * n >= 1 << 62:
        return None
    packed = np.zeros(n, dtype=np.int64)
    for key, low, span in zip(keys, offsets, spans, strict=True):
        packed = packed * span + (np.asarray(key, dtype=np.int64) - low)
    return np.asarray(np.argsort(packed * n + np.arange(n, dtype=np.int64)), dtype=np.int64)


def ordered_constraints(
    family: KernelFamily, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
) -> tuple[Constraint, ...]:
    """The family's constraints with the shared ones in funnel order: legality, pins, the
    family's capacities and caps, divisibility."""
    own = list(family.constraints(hardware, problem, options))
    legality = [c for c in own if c.kind is ConstraintKind.LEGALITY]
    rest = [c for c in own if c.kind is not ConstraintKind.LEGALITY]
    return (*legality, Pins(), *rest, Divisibility())


@dataclass(frozen=True)
class RequestSpace:
    """A request's decision variables, their configurations and its resolved pins."""

    params: tuple[Param, ...]
    cfg: ConfigArrays
    common: dict[str, IntArray]
    pins: dict[str, int]


def request_space(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    cfg: ConfigArrays | None = None,
) -> RequestSpace:
    """The request's parameters and space (the whole product of the domains unless `cfg` is
    given), its pins resolved against them: InvalidRequestError for a pin outside its domain,
    unknown or unpinnable (and for a page size the family's rule refuses)."""
    params = family.request_params(problem, hardware, options)
    if cfg is None:
        cfg = ConfigArrays.product(params)
    common = family.common_fields(cfg)
    return RequestSpace(params, cfg, common, resolve_pins(family, params, common, options))


def evaluation(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    cfg: ConfigArrays | None = None,
) -> Evaluation:
    """The request's space (`request_space`) with its resources."""
    space = request_space(family, hardware, problem, options, cfg)
    res = family.resources(hardware, problem, options, space.cfg)
    return Evaluation(
        family, hardware, problem, options, space.params, space.cfg, space.common, space.pins, res
    )


def build_candidate_table(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
) -> CandidateTable:
    """Enumerate the family's space and evaluate every configuration."""
    ev = evaluation(family, hardware, problem, options)
    perf = family.evaluate(ev)
    constraints = ordered_constraints(family, hardware, problem, options)
    sat = {c.name: c.satisfied(ev) for c in constraints}
    feasible = np.logical_and.reduce(list(sat.values()))
    n = len(ev.cfg)
    order = tie_break_order(family.tie_keys(ev), n)
    # time_ns * n + order must stay inside int64 for any size of space
    cap = min(MAX_TIME_NS, (1 << 62) // max(n, 1))
    time_ns = np.clip(np.rint(perf.time_us * NS_PER_US), 1, cap).astype(np.int64)
    objective = time_ns * n + order
    fields = {name: getattr(ev, name) for name in Evaluation.__dataclass_fields__}
    return CandidateTable(
        **fields,
        perf=perf,
        constraints=constraints,
        satisfied=sat,
        feasible=np.asarray(feasible, dtype=np.bool_),
        time_ns=time_ns,
        objective=objective,
    )
