"""The integer program, solved with OR-Tools CP-SAT.

Variable: `tile`, the index of the chosen configuration among the family's legal ones (the
configurations that satisfy every legality constraint: the shapes its instructions can tile,
a legal thread count; those rules define the domain, and the funnel and the validator still
count and check them), indexed in ranking order (modelled time, then the fixed tie-break
order). Each rule of a constraint object compares one column of the candidate table (a pinned
parameter, `smem_bytes`, `spill_regs`, `blocks_per_sm`, Ascend's buffer sizes, ...) with a
bound; `column[tile] <= bound` is stated exactly as the set of tile indices whose row
satisfies it: a domain constraint on `tile` (rules of several constraints that read the same
column read the same values). Ranking solves them as they are; when the first solve proves
the model infeasible, a second model guards each constraint with its own enforcement literal,
passed as an assumption, so that CP-SAT names the constraints that conflict.

The objective is the ranking position `tile` itself: the rows are sorted by `time_ns` (the
modelled time in whole nanoseconds) and then the tie-break order, so the smallest feasible
`tile` is the fastest configuration, equal times in the tie-break order, as the exhaustive
engine ranks them. (An element variable per column, with `time_ns` as the objective, states
the same program; it cost about 10 us per legal configuration and solve in CP-SAT's model
loading, 25-40 ms for the decode spaces of 200-700 legal configurations, against under 1 ms
for the domain form.) The search tries tiles in index order. Top-k: solve, require a later
tile index than the last winner, none of its twins (the configurations the model cannot tell
apart from it, `CandidateTable.twins`), solve again. One worker, a fixed seed and the fixed search
make every run identical.

The model is written as CP-SAT's own `CpModelProto` and solved by its `SolveWrapper`, both
from `ortools.sat.python.cp_model_helper` (the C++ extension OR-Tools' `cp_model` wrapper is
built on): `cp_model` imports pandas, which costs a one-off CLI question about 0.4 s, and this
program needs nothing it adds. The proto is the one `cp_model.CpModel` builds for the same
calls (tests/test_ip_model.py compares them). `ortools` is imported here and by
`apps/portfolio.py` (its facility-location program, inside the functions that build it);
`solve` imports this module only for a CP-SAT solve, so other commands never load OR-Tools.

The extension is loaded with lazy symbol binding (`_lazily_bound`): `cp_model_helper` links
`libortools.so`, one 33 MB library with about a hundred shared libraries of its own (abseil,
protobuf, and solvers CP-SAT never calls: SCIP, HiGHS, CBC), and Python opens extensions with
`RTLD_NOW`, which resolves every function symbol of all of them before the import returns. With
`RTLD_LAZY` (the dynamic loader's default for programs, dlopen(3)) a function's symbol is
resolved the first time it is called, so only the ones a solve reaches are. Measured on the
project's 2-core machine: the import 61 -> 46 ms, the first solve after it 0.8 ms slower, 14 ms
less in all (medians of 15 runs each; docs/cli.md, "Start-up"). The flag is the process's only
for the length of that one import.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cancel import Cancellation
from .candidates import CandidateTable
from .constraints import ConstraintKind


@contextlib.contextmanager
def _lazily_bound() -> Iterator[None]:
    """Shared libraries opened inside the block bind their function symbols lazily (RTLD_LAZY,
    the module docstring); the interpreter's own flags are restored after it. Where Python has
    no dlopen flags (Windows) it does nothing."""
    if not hasattr(sys, "setdlopenflags"):
        yield
        return
    flags = sys.getdlopenflags()
    sys.setdlopenflags((flags & ~os.RTLD_NOW) | os.RTLD_LAZY)
    try:
        yield
    finally:
        sys.setdlopenflags(flags)


with _lazily_bound():
    from ortools.sat.python import cp_model_helper as cmh

CPSAT_SEED = 20261129
INT64_MAX = 2**63 - 1  # "no upper bound" in a CP-SAT domain
TILE = 0  # the index of the variable `tile` in the model (the first one made)

OPTIMAL = cmh.CpSolverStatus.OPTIMAL
FEASIBLE = cmh.CpSolverStatus.FEASIBLE
INFEASIBLE = cmh.CpSolverStatus.INFEASIBLE
UNKNOWN = cmh.CpSolverStatus.UNKNOWN


@dataclass(frozen=True)
class IpResult:
    """Ranked indices into the candidate table, and what CP-SAT proved."""

    ranked: list[int]
    proven_optimal: bool
    timed_out: bool  # the time limit ended the search before k ranks were proven or refuted
    conflicting: list[str]  # constraint names (an infeasible request's core)
    wall_ms: float


def intervals(indices: np.ndarray[Any, Any]) -> list[int]:
    """Sorted distinct integers as a CP-SAT domain: the flattened [start, end] runs of
    consecutive values (what `Domain.from_values(...).flattened_intervals()` gives)."""
    if len(indices) == 0:
        return []
    breaks = np.flatnonzero(np.diff(indices) > 1)
    starts = np.concatenate(([indices[0]], indices[breaks + 1]))
    ends = np.concatenate((indices[breaks], [indices[-1]]))
    return [int(v) for v in np.column_stack((starts, ends)).ravel()]


class TileProgram:
    """The CP-SAT model of one candidate table."""

    def __init__(self, table: CandidateTable, explain_infeasibility: bool = False):
        """`explain_infeasibility`: guard each constraint with an enforcement literal."""
        self._guarded = explain_infeasibility
        self.table = table
        # tile of each candidate-table row (-1: not legal), made at the first top-k step
        self._position: np.ndarray[Any, Any] | None = None
        self.model = cmh.CpModelProto()
        # rows[j]: the candidate-table index of the j-th allowed tuple.
        legal_rows = np.flatnonzero(table.legal())
        by_key = np.argsort(table.objective[legal_rows], kind="stable")
        self.rows = [int(i) for i in legal_rows[by_key]]
        # tile = j selects table row rows[j]; rows are sorted by the objective key.
        tile = self._new_variable("tile", 0, max(len(self.rows) - 1, 0))
        assert tile == TILE
        # The columns the rules compare, by variable name, at the legal rows in tile order.
        self.columns: dict[str, np.ndarray[Any, Any]] = {}
        # Each guarded constraint's enforcement literal (a variable index), by name.
        self.enforce: dict[str, int] = {}
        self._add_constraints()
        # The rows are in ranking order (time_ns, then the tie-break): the smallest feasible
        # tile is the optimum.
        self.model.objective.vars.append(TILE)
        self.model.objective.coeffs.append(1)
        self.model.objective.scaling_factor = 1
        # Try tiles in ranking order: the first solution found is the optimum.
        strategy = self.model.search_strategy.add()
        expression = strategy.exprs.add()
        expression.vars.append(TILE)
        expression.coeffs.append(1)
        strategy.variable_selection_strategy = (
            cmh.DecisionStrategyProto.VariableSelectionStrategy.CHOOSE_FIRST
        )
        strategy.domain_reduction_strategy = (
            cmh.DecisionStrategyProto.DomainReductionStrategy.SELECT_MIN_VALUE
        )

    def _after(self, tile: int) -> list[int]:
        """The domain of the tiles after `tile` in ranking order, its twins left out."""
        twins = self.table.twins(self.rows[tile])
        if self._position is None:
            self._position = np.full(len(self.table), -1, dtype=np.int64)
            self._position[np.asarray(self.rows, dtype=np.int64)] = np.arange(len(self.rows))
        skipped = np.sort(self._position[twins])
        skipped = skipped[skipped > tile]  # (legal twins have a tile; later ones are cut)
        domain: list[int] = []
        low = tile + 1
        for twin in skipped:
            if low < twin:
                domain += [low, int(twin) - 1]
            low = int(twin) + 1
        return [*domain, low, INT64_MAX]

    def _new_variable(self, name: str, low: int, high: int) -> int:
        """A new integer variable in [low, high]; its index."""
        variable = self.model.variables.add()
        variable.name = name
        variable.domain.extend([low, high])
        return len(self.model.variables) - 1

    def _restrict_tile(self, domain: list[int], enforced_by: list[int]) -> None:
        """`tile` in `domain` (flattened intervals), when every literal of `enforced_by` holds."""
        constraint = self.model.constraints.add()
        constraint.enforcement_literal.extend(enforced_by)
        constraint.linear.vars.append(TILE)
        constraint.linear.coeffs.append(1)
        constraint.linear.domain.extend(domain)

    def _column(self, name: str, column: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """`column` at the legal rows in tile order (one per name: rules of several
        constraints that read the same column share it)."""
        if name not in self.columns:
            self.columns[name] = np.asarray(column)[np.asarray(self.rows, dtype=np.int64)]
        return self.columns[name]

    def _literal(self, name: str) -> list[int]:
        """The enforcement literals for constraint `name`: its own literal, or none."""
        if not self._guarded:
            return []
        literal = self._new_variable(f"enforce_{name}", 0, 1)
        self.enforce[name] = literal
        return [literal]

    def _add_constraints(self) -> None:
        """Every non-legality constraint's rules, each as the tile indices whose row satisfies
        `column op bound` (legality rules already define the domain of `tile`)."""
        for constraint in self.table.constraints:
            if constraint.kind is ConstraintKind.LEGALITY:
                continue
            rules = constraint.rules(self.table)
            if not rules:  # e.g. no pins, no --require-divisible: nothing to state
                continue
            literal = self._literal(constraint.name)
            for rule in rules:
                values = self._column(rule.variable, rule.column)
                if rule.op == "<=":
                    holds = values <= rule.bound
                elif rule.op == ">=":
                    holds = values >= rule.bound
                else:
                    holds = values == rule.bound
                self._restrict_tile(intervals(np.flatnonzero(holds)), literal)

    def solve_top_k(
        self, k: int, time_limit_s: float, cancel: Cancellation | None = None
    ) -> IpResult:
        """The k best configurations in rank order, re-solving above the last winner's index.
        A set `cancel` stops the search in progress and every later one (as the time limit
        would)."""
        started = time.perf_counter()
        deadline = started + time_limit_s
        ranked: list[int] = []
        proven = True
        timed_out = False
        conflicting: list[str] = []
        search = Search(time_limit_s)
        while len(ranked) < k and self.rows:
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or (cancel is not None and cancel.cancelled):
                timed_out = True
                break
            search.parameters.max_time_in_seconds = remaining
            response = search.run(self.model, cancel)
            status = response.status
            if status == INFEASIBLE:
                if not ranked:
                    core = TileProgram(self.table, True).core
                    conflicting = core(deadline - time.perf_counter(), cancel)
                break
            if status not in (OPTIMAL, FEASIBLE):
                timed_out = True  # UNKNOWN: the limit passed before any solution
                break
            if status != OPTIMAL:
                timed_out = True
                proven = False
            tile = int(response.solution[TILE])
            ranked.append(self.rows[tile])
            # The next rank comes later in the ranking order than this winner and is none of
            # its twins (`CandidateTable.twins`: the answer's one row for them).
            self._restrict_tile(self._after(tile), [])
        wall_ms = (time.perf_counter() - started) * 1e3
        return IpResult(ranked, proven and not timed_out, timed_out, conflicting, wall_ms)

    def core(self, time_limit_s: float, cancel: Cancellation | None = None) -> list[str]:
        """Constraints whose enforcement literals CP-SAT finds sufficient for infeasibility
        (needs `explain_infeasibility`); empty if the time runs out first."""
        self.model.assumptions.extend(self.enforce.values())
        response = Search(max(time_limit_s, 1e-3)).run(self.model, cancel)
        if response.status != INFEASIBLE:
            return []
        found = set(response.sufficient_assumptions_for_infeasibility)
        return [name for name, literal in self.enforce.items() if literal in found]


class Search:
    """CP-SAT searches with one worker, a fixed seed and the fixed smallest-time-first search,
    one at a time, each stoppable from another thread (`stop`).

    Presolve, probing, symmetry detection and LP linearisation cost more than they save on
    this model (benchmarks/solve_latency.py measures the solve).
    """

    def __init__(self, time_limit_s: float) -> None:
        params = cmh.SatParameters()
        params.num_workers = 1
        params.random_seed = CPSAT_SEED
        params.max_time_in_seconds = time_limit_s
        params.cp_model_presolve = False
        params.cp_model_probing_level = 0
        params.symmetry_level = 0
        params.linearization_level = 0
        params.search_branching = cmh.SatParameters.FIXED_SEARCH
        # Leave SIGINT to the host process (the CLI's Ctrl-C, the server's graceful drain).
        params.catch_sigint_signal = False
        self.parameters = params
        self._lock = threading.Lock()
        self._running: Any = None  # the SolveWrapper of the search in progress

    def run(self, model: Any, cancel: Cancellation | None = None) -> Any:
        """Solve `model` (a CpModelProto): CP-SAT's response. A set `cancel` (from another
        thread) stops the search early: the status is then the one the search had reached."""
        wrapper = cmh.SolveWrapper()
        wrapper.set_parameters(self.parameters)
        solve: Any = wrapper.solve  # (OR-Tools' stub leaves its arguments untyped)
        if cancel is None:
            return solve(model)
        with self._lock:
            self._running = wrapper
        try:
            with cancel.stopping(self.stop):
                if cancel.cancelled:  # set before this search could be stopped
                    return _unknown()
                return solve(model)
        finally:
            with self._lock:
                self._running = None

    def stop(self) -> None:
        """Stop the search in progress, if any (CP-SAT returns from it at once)."""
        with self._lock:
            if self._running is not None:
                self._running.stop_search()


def _unknown() -> Any:
    """A response with status UNKNOWN: a search that never started."""
    response = cmh.CpSolverResponse()
    response.status = UNKNOWN
    return response


def solve_cpsat(
    table: CandidateTable, top_k: int, time_limit_s: float, cancel: Cancellation | None = None
) -> IpResult:
    return TileProgram(table).solve_top_k(top_k, time_limit_s, cancel)
