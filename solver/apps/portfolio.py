"""Kernel portfolios: which few configurations to compile for a weighted mix of problems.

A kernel library compiles a handful of tile variants and dispatches each call to one of them.
Given weighted problems on one device and one kernel family, `solve_portfolio` chooses at most
K configurations and assigns every problem one of them, minimising the weighted total of the
modelled times. It is a facility-location (K-median) program, solved with CP-SAT:

    y[c]     = 1 when configuration c is in the portfolio          (one per distinct config)
    x[p, c]  = 1 when problem p is served by configuration c        (c allowed for p)
    sum_c x[p, c] = 1 for every p;  x[p, c] <= y[c];  sum_c y[c] <= K;  y[c] = 1 if pinned
    minimise sum_p w[p] * time_ns[p, c] * x[p, c]

A configuration is every declared parameter of the family by name (`Config.values`), so a
family with other parameters (num_splits, warps_kv) needs nothing here. Each problem's allowed
set is its **whole** feasible set (the candidate table's feasible rows, not its top k: the
configuration two problems share is often neither one's favourite), less what the options
exclude: the per-problem bound (at most `max_slowdown` slower than the problem's own optimum,
its solver answer), and the footprint caps (`max_resources`: the most of a resource, e.g.
shared_memory bytes or registers per thread, any assignment of the portfolio may use; the
portfolio's footprint is the largest of its kernels', since variants are launched one at a
time). Times are whole nanoseconds, as in the single-problem program.

Determinism: one worker, a fixed seed, and a deterministic work limit (`work_limit_s`, CP-SAT's
deterministic time) decide the search, so the same request gets the same answer on any machine;
`time_limit_s` is only a wall-clock safety net (the answer says when it stopped the search).
When no K configurations can meet the bound, a second program (set cover: the fewest
configurations that give every problem an allowed one) finds the smallest K that would.
`ortools` is imported only when a portfolio is solved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, Field, field_validator, model_validator

from ..candidates import CandidateTable
from ..errors import DeadlineExceededError, FieldViolation, InvalidRequestError, TilesolveError
from ..hardware import CATALOG_VERSION, HardwareSpec
from ..problem import MIN_TIME_LIMIT_S, AttentionProblem, ParamName, PinValue, SolveOptions
from ..schema_config import FROZEN_SCHEMA, empty_list
from ..solve import MODEL_VERSION, prepare, resolve_hardware
from ..space import COMMON_FIELDS

# The most problems one portfolio may weigh: 5,000 problems of fa2 (~35 feasible
# configurations each) make ~175,000 assignment variables, about what one CP-SAT worker
# proves in minutes; more is taken for a mistake (bucket the shapes first).
MAX_PORTFOLIO_PROBLEMS = 5000
MAX_WEIGHT = 1e12
PORTFOLIO_SEED = 20261129  # the single-problem program's seed (ip_model.CPSAT_SEED)
# Weights are made integers for the objective by a power of ten, exact up to this many decimals.
_WEIGHT_DECIMALS = 6
# The objective (sum of weight x time) must stay well inside int64; times are coarsened by
# powers of two past this (the answer states the unit).
_OBJECTIVE_CAP = 1 << 60

T = TypeVar("T")
R = TypeVar("R")
MapFn = Callable[[Callable[[T], R], Sequence[T]], list[R]]


def serial_map(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """The default evaluator: in order, in this process."""
    return [fn(item) for item in items]


# ---- the request ---------------------------------------------------------------------------


class WeightedProblem(BaseModel):
    """One problem of the mix and how much it counts (a weight, or a call count)."""

    model_config = FROZEN_SCHEMA

    problem: AttentionProblem
    weight: float = Field(1.0, gt=0, le=MAX_WEIGHT, description="share or call count, > 0")


ResourceCap = Annotated[int, Field(ge=0, le=1 << 40)]


class PortfolioRequest(BaseModel):
    """A weighted mix of problems on one device and family, and what limits the portfolio."""

    model_config = FROZEN_SCHEMA

    problems: list[WeightedProblem] = Field(min_length=1, max_length=MAX_PORTFOLIO_PROBLEMS)
    max_configs: int = Field(ge=1, le=MAX_PORTFOLIO_PROBLEMS, description="K")
    kernel: str | None = Field(None, pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    max_slowdown: float | None = Field(
        None, ge=0, le=100, description="no problem more than this fraction slower than its optimum"
    )
    max_resources: dict[ParamName, ResourceCap] = Field(
        default_factory=dict,
        max_length=16,
        description="resource name -> the most any assignment may use (the footprint)",
    )
    pinned: list[dict[ParamName, PinValue]] = Field(
        default_factory=empty_list,
        max_length=64,
        description="configurations that must be included",
    )
    work_limit_s: float = Field(
        60.0,
        ge=MIN_TIME_LIMIT_S,
        le=3600,
        description="CP-SAT deterministic time (about seconds, 0.001 to 3600)",
    )
    time_limit_s: float = Field(
        300.0,
        ge=MIN_TIME_LIMIT_S,
        le=3600,
        description="wall-clock safety limit, seconds (0.001 to 3600)",
    )

    @model_validator(mode="after")
    def _k_within_problems(self) -> PortfolioRequest:
        """K is at least 1 and at most the number of problems; pins fit in K."""
        if self.max_configs > len(self.problems):
            raise ValueError(
                f"max_configs must be from 1 to the number of problems ({len(self.problems)}); "
                f"got {self.max_configs}"
            )
        if len(self.pinned) > self.max_configs:
            raise ValueError(
                f"pinned: {len(self.pinned)} pinned configurations do not fit in max_configs "
                f"{self.max_configs}"
            )
        return self


# ---- one problem's candidates --------------------------------------------------------------


@dataclass(frozen=True)
class CandidateSet:
    """One problem's feasible configurations in its ranking order (best first), with what
    the portfolio needs of each: its modelled time and its use of each resource."""

    names: tuple[str, ...]  # the family's parameters, in declaration order
    configs: tuple[tuple[int, ...], ...]  # values in `names` order
    labels: tuple[str, ...]
    common: tuple[tuple[tuple[str, int], ...], ...]  # block_m, block_n, ... where the family has
    time_ns: tuple[int, ...]
    time_us: tuple[float, ...]
    resources: tuple[tuple[int, ...], ...]  # per config, in `resource_names` order
    resource_names: tuple[str, ...]
    domains: tuple[tuple[int, ...], ...]  # each parameter's domain for this problem
    kernel: str


def candidate_set(
    problem: AttentionProblem, hardware: HardwareSpec, kernel: str | None
) -> CandidateSet | list[FieldViolation]:
    """Every feasible configuration of `problem` (the violations if the family refuses it).
    A module-level function of picklable arguments, so process pools and Dask can run it."""
    try:
        table = prepare(problem, hardware, SolveOptions(kernel=kernel))
    except InvalidRequestError as exc:
        return list(exc.violations)
    return candidate_set_of(table)


def candidate_set_of(table: CandidateTable) -> CandidateSet:
    rows = [int(i) for i in table.ranked_feasible()]
    names = table.cfg.names
    resource_names = tuple(u.name for u in table.res.uses(0)) if len(table) else ()
    return CandidateSet(
        names=names,
        configs=tuple(tuple(int(table.cfg[n][i]) for n in names) for i in rows),
        labels=tuple(table.family.label(table.cfg.config(i)) for i in rows),
        common=tuple(
            tuple((k, int(v[i])) for k, v in table.common.items() if k in COMMON_FIELDS)
            for i in rows
        ),
        time_ns=tuple(int(table.time_ns[i]) for i in rows),
        time_us=tuple(float(table.perf.time_us[i]) for i in rows),
        resources=tuple(tuple(u.used for u in table.res.uses(i)) for i in rows),
        resource_names=resource_names,
        domains=tuple(p.domain for p in table.params),
        kernel=table.family.name,
    )


# ---- the answer ----------------------------------------------------------------------------


class PortfolioConfig(BaseModel):
    """One configuration of the portfolio and the problems it serves."""

    model_config = FROZEN_SCHEMA

    index: int = Field(ge=1, description="1-based; assignments refer to it")
    label: str
    parameters: dict[str, int]
    block_m: int | None = None
    block_n: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    pinned: bool
    problems: list[int] = Field(description="0-based indices of the problems it serves")
    weight: float = Field(description="total weight of those problems")
    seq_len_min: int | None = Field(None, description="shortest seq_len it serves")
    seq_len_max: int | None = Field(None, description="longest seq_len it serves")
    head_dims: list[int] = Field(description="head dims of the problems it serves")
    resources: dict[str, int] = Field(description="its largest use of each resource")

    @field_validator("parameters", "resources")
    @classmethod
    def _by_name(cls, values: dict[str, int]) -> dict[str, int]:
        """Sorted by name: the same bytes wherever the answer was made (wire maps are
        unordered)."""
        return dict(sorted(values.items()))


class PortfolioAssignment(BaseModel):
    """Which configuration serves one problem, and what that costs against its own optimum."""

    model_config = FROZEN_SCHEMA

    problem: int = Field(ge=0, description="0-based index in the request")
    config: int = Field(ge=1, description="PortfolioConfig.index")
    weight: float
    seq_len: int
    time_us: float = Field(description="modelled time with the portfolio's configuration")
    optimal_time_us: float = Field(description="modelled time of the problem's own optimum")
    optimal_label: str
    loss: float = Field(description="time_us / optimal_time_us - 1")


PortfolioStatus = Literal["optimal", "feasible", "infeasible"]


class PortfolioAnswer(BaseModel):
    """The chosen configurations, the assignment, and the loss against per-problem optima."""

    model_config = FROZEN_SCHEMA

    status: PortfolioStatus
    proven_optimal: bool
    gap: float = Field(description="(objective - best bound) / objective; 0 when proven")
    stopped_by: Literal["", "work_limit", "time_limit"] = Field(
        description="which limit ended the search before a proof; empty when none did"
    )
    hardware: str
    kernel: str
    max_configs: int
    configurations: list[PortfolioConfig]
    assignments: list[PortfolioAssignment]
    weighted_time_us: float = Field(description="sum of weight x time_us")
    optimal_weighted_time_us: float = Field(description="the same with every problem's optimum")
    loss: float = Field(description="weighted_time_us / optimal_weighted_time_us - 1")
    worst_loss: float = Field(description="the largest per-problem loss")
    worst_problem: int | None = Field(None, description="0-based index of that problem")
    smallest_feasible_max_configs: int | None = Field(
        None, description="infeasible: the smallest K that meets the bound; null if none does"
    )
    unserved_problems: list[int] = Field(
        default_factory=empty_list, description="problems no allowed configuration serves at all"
    )
    explanation: str = Field("", description="why it is infeasible, in words")
    candidate_configs: int = Field(description="distinct feasible configurations considered")
    assignment_variables: int
    objective_unit_ns: int = Field(description="time resolution of the objective, ns")
    solve_ms: float
    model_version: str
    catalog_version: str


# ---- solving -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Instance:
    """The program's data: configurations, and per problem its allowed (config, time) pairs."""

    keys: list[tuple[int, ...]]  # distinct configurations, sorted
    allowed: list[list[tuple[int, int]]]  # per problem: (config index, time_ns)
    weights: list[int]  # integer weights for the objective
    unit_ns: int
    pinned: list[int]  # config indices


def _integer_weights(weights: Sequence[float]) -> list[int]:
    """Weights as integers in the same proportions: scaled by the smallest power of ten that
    makes them whole (up to 6 decimals; beyond that rounded)."""
    decimals = 0
    for w in weights:
        exponent = Decimal(repr(w)).normalize().as_tuple().exponent
        if isinstance(exponent, int):
            decimals = max(decimals, -exponent)
    scale = 10 ** min(decimals, _WEIGHT_DECIMALS)
    return [max(1, round(w * scale)) for w in weights]


def _check_sets(
    request: PortfolioRequest, sets: Sequence[CandidateSet | list[FieldViolation]]
) -> list[CandidateSet]:
    violations: list[FieldViolation] = []
    good: list[CandidateSet] = []
    for i, s in enumerate(sets):
        if isinstance(s, CandidateSet):
            good.append(s)
        else:
            violations.extend(
                FieldViolation(
                    f"problems[{i}].problem.{v.field}"
                    if v.field in AttentionProblem.model_fields
                    else f"problems[{i}].{v.field}",
                    v.description,
                )
                for v in s
            )
    if violations:
        raise InvalidRequestError(violations)
    kernels = sorted({s.kernel for s in good})
    if len(kernels) > 1:
        raise InvalidRequestError(
            [
                FieldViolation(
                    "kernel",
                    f"the problems run on different default families ({', '.join(kernels)}); "
                    "a portfolio is for one family: name it",
                )
            ]
        )
    names = good[0].names
    known = sorted({r for s in good for r in s.resource_names})
    bad = [
        FieldViolation(
            "max_resources",
            f"unknown resource {name!r} of {good[0].kernel}; allowed: {', '.join(known)}",
        )
        for name in request.max_resources
        if name not in known
    ]
    for j, pin in enumerate(request.pinned):
        missing = [n for n in names if n not in pin]
        extra = [n for n in pin if n not in names]
        if missing or extra:
            what = "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"unknown {', '.join(extra)}" if extra else "",
                )
                if part
            )
            bad.append(
                FieldViolation(
                    f"pinned[{j}]",
                    f"{what}: a pinned configuration gives every parameter of "
                    f"{good[0].kernel}: {', '.join(names)}",
                )
            )
            continue
        for k, n in enumerate(names):
            domain = sorted({v for s in good for v in s.domains[k]})
            if pin[n] not in domain:
                bad.append(
                    FieldViolation(
                        f"pinned[{j}]",
                        f"{n}={pin[n]} is outside the domain of {good[0].kernel}; allowed: "
                        f"{', '.join(str(v) for v in domain)}",
                    )
                )
    if bad:
        raise InvalidRequestError(bad)
    return good


def _instance(request: PortfolioRequest, sets: list[CandidateSet]) -> tuple[_Instance, list[int]]:
    """The program's data, and the problems left with no allowed configuration."""
    names = sets[0].names
    pinned_keys = [tuple(pin[n] for n in names) for pin in request.pinned]
    keys = sorted({c for s in sets for c in s.configs} | set(pinned_keys))
    index = {k: j for j, k in enumerate(keys)}
    caps = request.max_resources
    allowed: list[list[tuple[int, int]]] = []
    unserved = []
    for p, s in enumerate(sets):
        column = {r: s.resource_names.index(r) for r in caps}
        bound_us = s.time_us[0] * (1.0 + (request.max_slowdown or 0.0)) if s.time_us else 0.0
        mine = []
        for c, t_ns, t_us, use in zip(s.configs, s.time_ns, s.time_us, s.resources, strict=True):
            if request.max_slowdown is not None and t_us > bound_us * (1 + 1e-12):
                continue
            if any(use[column[r]] > cap for r, cap in caps.items()):
                continue
            mine.append((index[c], t_ns))
        if not mine:
            unserved.append(p)
        allowed.append(mine)
    weights = _integer_weights([wp.weight for wp in request.problems])
    worst = sum(
        w * max((t for _, t in a), default=0) for w, a in zip(weights, allowed, strict=True)
    )
    unit = 1
    while worst // unit > _OBJECTIVE_CAP:
        unit *= 2
    instance = _Instance(keys, allowed, weights, unit, sorted({index[k] for k in pinned_keys}))
    return instance, unserved


def _solver_parameters(solver: Any, request: PortfolioRequest) -> None:
    params = solver.parameters
    params.num_workers = 1
    params.random_seed = PORTFOLIO_SEED
    params.max_deterministic_time = request.work_limit_s
    params.max_time_in_seconds = request.time_limit_s
    # The LP relaxation of x <= y (level 2 keeps every constraint in the LP) proves the
    # K-median bound far sooner: 200 fa2 problems, K = 4: 0.4 s against 4.6 s at level 1.
    params.linearization_level = 2
    params.catch_sigint_signal = False


def _greedy(inst: _Instance, k: int) -> list[int] | None:
    """A starting portfolio for the search: the pins, then repeatedly the configuration that
    lowers the weighted total most (ties: the lower index); None if it leaves a problem
    unserved. Only a hint: CP-SAT proves or improves it."""
    times = np.full((len(inst.allowed), len(inst.keys)), np.inf)
    for p, mine in enumerate(inst.allowed):
        for c, t in mine:
            times[p, c] = t
    weights = np.asarray(inst.weights, dtype=np.float64)
    chosen = list(inst.pinned)
    current = times[:, chosen].min(axis=1) if chosen else np.full(len(inst.allowed), np.inf)
    while len(chosen) < k:
        with np.errstate(invalid="ignore"):
            trial = np.minimum(current[:, None], times)
            unserved = np.isinf(trial).sum(axis=0)
            total = np.where(np.isinf(trial), 0.0, trial).T @ weights
        unserved[chosen] = len(inst.allowed) + 1  # never pick one twice
        best = int(np.lexsort((np.arange(len(inst.keys)), total, unserved))[0])
        if best in chosen:
            break
        chosen.append(best)
        current = trial[:, best]
    return chosen if not np.isinf(current).any() else None


def _smallest_k(inst: _Instance, request: PortfolioRequest) -> int | None:
    """The fewest configurations that give every problem an allowed one (set cover)."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    y = [model.new_bool_var(f"y_c{j}") for j in range(len(inst.keys))]
    for mine in inst.allowed:
        model.add_bool_or([y[c] for c, _ in mine])
    for c in inst.pinned:
        model.add(y[c] == 1)
    model.minimize(sum(y))
    solver = cp_model.CpSolver()
    _solver_parameters(solver, request)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return round(solver.objective_value)


def solve_portfolio(
    request: PortfolioRequest,
    hardware: str | HardwareSpec,
    *,
    sets: Sequence[CandidateSet | list[FieldViolation]] | None = None,
    map_fn: MapFn[AttentionProblem, CandidateSet | list[FieldViolation]] | None = None,
) -> PortfolioAnswer:
    """Choose at most `request.max_configs` configurations for the weighted problems.

    `sets` are the problems' candidate sets if already computed; otherwise `map_fn` (default:
    in order, in this process) evaluates `candidate_set` for each problem, e.g. on a process
    pool or a Dask cluster. Problems the family refuses raise InvalidRequestError naming
    `problems[i].<field>`; an infeasible portfolio is an answer (status "infeasible")."""
    started = time.perf_counter()
    spec = resolve_hardware(hardware)
    if sets is None:
        evaluate = map_fn or serial_map
        one = partial(candidate_set, hardware=spec, kernel=request.kernel)
        sets = evaluate(one, [wp.problem for wp in request.problems])
    good = _check_sets(request, sets)
    inst, unserved = _instance(request, good)
    solved = None if unserved else _facility_location(inst, request)
    return _answer(request, spec, good, inst, unserved, solved, started)


@dataclass(frozen=True)
class _Solved:
    status: PortfolioStatus
    chosen: list[int]  # config indices; empty when infeasible
    gap: float
    stopped_by: Literal["", "work_limit", "time_limit"]
    smallest_k: int | None


def _facility_location(inst: _Instance, request: PortfolioRequest) -> _Solved:
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    y = [model.new_bool_var(f"y_c{j}") for j in range(len(inst.keys))]
    terms: list[Any] = []
    coefficients: list[int] = []
    x: list[list[Any]] = []
    for p, (w, mine) in enumerate(zip(inst.weights, inst.allowed, strict=True)):
        row = []
        for c, t in mine:
            var = model.new_bool_var(f"x_p{p}_c{c}")
            model.add_implication(var, y[c])
            row.append(var)
            terms.append(var)
            coefficients.append(w * (t // inst.unit_ns))
        model.add_exactly_one(row)
        x.append(row)
    model.add(sum(y) <= request.max_configs)
    for c in inst.pinned:
        model.add(y[c] == 1)
    model.minimize(cp_model.LinearExpr.weighted_sum(terms, coefficients))
    start = _greedy(inst, request.max_configs)
    if start is not None:
        for j, var in enumerate(y):
            model.add_hint(var, j in start)
    solver = cp_model.CpSolver()
    _solver_parameters(solver, request)
    begun = time.perf_counter()
    status = solver.solve(model)
    wall = time.perf_counter() - begun
    stopped: Literal["time_limit", "work_limit"] = (
        "time_limit" if wall >= request.time_limit_s * 0.99 else "work_limit"
    )
    if status == cp_model.INFEASIBLE:
        return _Solved("infeasible", [], 0.0, "", _smallest_k(inst, request))
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise PortfolioTimeoutError(request, stopped)
    chosen = [j for j, var in enumerate(y) if solver.value(var)]
    if status == cp_model.OPTIMAL:
        return _Solved("optimal", chosen, 0.0, "", None)
    objective = solver.objective_value
    gap = (objective - solver.best_objective_bound) / objective if objective > 0 else 0.0
    return _Solved("feasible", chosen, max(gap, 0.0), stopped, None)


class PortfolioTimeoutError(DeadlineExceededError):
    """The limits passed before CP-SAT found any portfolio (a deadline, not infeasibility)."""

    def __init__(self, request: PortfolioRequest, stopped_by: str):
        limit = request.time_limit_s if stopped_by == "time_limit" else request.work_limit_s
        self.stopped_by = stopped_by
        self.time_limit_s = limit
        self.feasible_count = 0
        TilesolveError.__init__(
            self,
            f"{'time_limit_s' if stopped_by == 'time_limit' else 'work_limit_s'}: CP-SAT found "
            f"no portfolio within {limit:g} s; allow more time or lower the number of problems",
        )


def _config_fields(s: CandidateSet, position: int) -> dict[str, Any]:
    return {
        "label": s.labels[position],
        "parameters": dict(zip(s.names, s.configs[position], strict=True)),
        **dict(s.common[position]),
    }


def _answer(
    request: PortfolioRequest,
    spec: HardwareSpec,
    sets: list[CandidateSet],
    inst: _Instance,
    unserved: list[int],
    solved: _Solved | None,
    started: float,
) -> PortfolioAnswer:
    problems = request.problems
    optimal_total = sum(
        wp.weight * (s.time_us[0] if s.time_us else 0.0)
        for wp, s in zip(problems, sets, strict=True)
    )
    common: dict[str, Any] = {
        "hardware": spec.name,
        "kernel": sets[0].kernel,
        "max_configs": request.max_configs,
        "optimal_weighted_time_us": optimal_total,
        "candidate_configs": len(inst.keys),
        "assignment_variables": sum(len(a) for a in inst.allowed),
        "objective_unit_ns": inst.unit_ns,
        "model_version": MODEL_VERSION,
        "catalog_version": CATALOG_VERSION,
    }
    if solved is None or solved.status == "infeasible":
        smallest = solved.smallest_k if solved is not None else None
        return PortfolioAnswer(
            status="infeasible",
            proven_optimal=False,
            gap=0.0,
            stopped_by="",
            configurations=[],
            assignments=[],
            weighted_time_us=0.0,
            loss=0.0,
            worst_loss=0.0,
            smallest_feasible_max_configs=smallest,
            unserved_problems=unserved,
            explanation=_why_infeasible(request, unserved, smallest),
            solve_ms=(time.perf_counter() - started) * 1e3,
            **common,
        )
    chosen = set(solved.chosen)
    # Each problem takes its best chosen configuration (ties: its own ranking order); that
    # never costs more than the program's assignment, and makes the answer canonical.
    served: dict[int, list[int]] = {c: [] for c in sorted(chosen)}
    picks: list[tuple[int, int]] = []  # (config index, position in the problem's set)
    position_of = [{c: i for i, c in enumerate(s.configs)} for s in sets]
    for p, allowed_pairs in enumerate(inst.allowed):
        allowed = {c for c, _ in allowed_pairs}
        best = min(
            (position_of[p][inst.keys[c]], c) for c in chosen if c in allowed
        )  # positions follow the ranking order, so the smallest is the best
        picks.append((best[1], best[0]))
        served[best[1]].append(p)
    order = [c for c in sorted(chosen) if served[c] or c in inst.pinned]
    number = {c: i + 1 for i, c in enumerate(order)}
    configurations = []
    for c in order:
        users = served[c]
        if users:
            p0 = users[0]
            fields = _config_fields(sets[p0], position_of[p0][inst.keys[c]])
        else:  # a pinned configuration no problem can use
            fields = {"label": _pinned_label(sets[0], inst.keys[c]), "parameters": {}}
            fields["parameters"] = dict(zip(sets[0].names, inst.keys[c], strict=True))
        resources: dict[str, int] = {}
        for p in users:
            s = sets[p]
            use = s.resources[position_of[p][inst.keys[c]]]
            for name, used in zip(s.resource_names, use, strict=True):
                resources[name] = max(resources.get(name, 0), used)
        seq = [problems[p].problem.seq_len for p in users]
        configurations.append(
            PortfolioConfig(
                index=number[c],
                pinned=c in inst.pinned,
                problems=users,
                weight=sum(problems[p].weight for p in users),
                seq_len_min=min(seq) if seq else None,
                seq_len_max=max(seq) if seq else None,
                head_dims=sorted({problems[p].problem.head_dim for p in users}),
                resources=resources,
                **fields,
            )
        )
    assignments = []
    for p, ((c, position), s) in enumerate(zip(picks, sets, strict=True)):
        t = s.time_us[position]
        assignments.append(
            PortfolioAssignment(
                problem=p,
                config=number[c],
                weight=problems[p].weight,
                seq_len=problems[p].problem.seq_len,
                time_us=t,
                optimal_time_us=s.time_us[0],
                optimal_label=s.labels[0],
                loss=t / s.time_us[0] - 1.0,
            )
        )
    total = sum(a.weight * a.time_us for a in assignments)
    worst = max(assignments, key=lambda a: (a.loss, -a.problem))
    return PortfolioAnswer(
        status=solved.status,
        proven_optimal=solved.status == "optimal",
        gap=solved.gap,
        stopped_by=solved.stopped_by,
        configurations=configurations,
        assignments=assignments,
        weighted_time_us=total,
        loss=total / optimal_total - 1.0 if optimal_total > 0 else 0.0,
        worst_loss=worst.loss,
        worst_problem=worst.problem,
        solve_ms=(time.perf_counter() - started) * 1e3,
        **common,
    )


def _pinned_label(s: CandidateSet, key: tuple[int, ...]) -> str:
    values = dict(zip(s.names, key, strict=True))
    shown = []
    if "block_m" in values and "block_n" in values:
        shown.append(f"{values['block_m']}x{values['block_n']}")
    shown.extend(f"{k}={v}" for k, v in values.items() if k not in ("block_m", "block_n"))
    return " ".join(shown)


def _why_infeasible(request: PortfolioRequest, unserved: list[int], smallest: int | None) -> str:
    if unserved:
        shown = ", ".join(str(p) for p in unserved[:10])
        more = f" and {len(unserved) - 10} more" if len(unserved) > 10 else ""
        caps = ", ".join(f"{k} <= {v}" for k, v in request.max_resources.items())
        why = f"the footprint caps ({caps})" if caps else "the kernel's own rules"
        return (
            f"problems {shown}{more} have no feasible configuration within {why}; no number "
            "of configurations serves them"
        )
    bound = f"{(request.max_slowdown or 0.0) * 100:g}%"
    if smallest is None:
        return f"no portfolio meets the per-problem bound of {bound} within the limits"
    return (
        f"no {request.max_configs} configurations keep every problem within {bound} of its own "
        f"optimum; the smallest portfolio that does has {smallest} configurations"
    )
