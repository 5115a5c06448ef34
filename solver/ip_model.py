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
tile index than the last winner, solve again. One worker, a fixed seed and the fixed search
make every run identical. `ortools` is imported here and by `apps/portfolio.py` (its
facility-location program, inside the functions that build it); `solve` imports this module
only for a CP-SAT solve, so other commands never load OR-Tools.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model, cp_model_helper

from .cancel import Cancellation
from .candidates import CandidateTable
from .constraints import ConstraintKind

CPSAT_SEED = 20261129


@dataclass(frozen=True)
class IpResult:
    """Ranked indices into the candidate table, and what CP-SAT proved."""

    ranked: list[int]
    proven_optimal: bool
    timed_out: bool  # the time limit ended the search before k ranks were proven or refuted
    conflicting: list[str]  # constraint names (an infeasible request's core)
    wall_ms: float


class TileProgram:
    """The CP-SAT model of one candidate table."""

    def __init__(self, table: CandidateTable, explain_infeasibility: bool = False):
        """`explain_infeasibility`: guard each constraint with an enforcement literal."""
        self._guarded = explain_infeasibility
        self._cp = cp_model
        self.table = table
        self.model = cp_model.CpModel()
        # rows[j]: the candidate-table index of the j-th allowed tuple.
        legal_rows = np.flatnonzero(table.legal())
        by_key = np.argsort(table.objective[legal_rows], kind="stable")
        self.rows = [int(i) for i in legal_rows[by_key]]
        # tile = j selects table row rows[j]; rows are sorted by the objective key.
        self.tile = self.model.new_int_var(0, max(len(self.rows) - 1, 0), "tile")
        # The columns the rules compare, by variable name, at the legal rows in tile order.
        self.columns: dict[str, np.ndarray[Any, Any]] = {}
        self.enforce: dict[str, Any] = {}
        self._add_constraints()
        # The rows are in ranking order (time_ns, then the tie-break): the smallest feasible
        # tile is the optimum.
        self.model.minimize(self.tile)
        # Try tiles in ranking order: the first solution found is the optimum.
        self.model.add_decision_strategy(
            [self.tile], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE
        )

    def _column(self, name: str, column: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """`column` at the legal rows in tile order (one per name: rules of several
        constraints that read the same column share it)."""
        if name not in self.columns:
            self.columns[name] = np.asarray(column)[np.asarray(self.rows, dtype=np.int64)]
        return self.columns[name]

    def _literal(self, name: str) -> list[Any]:
        """The enforcement literals for constraint `name`: its own literal, or none."""
        if not self._guarded:
            return []
        literal = self.model.new_bool_var(f"enforce_{name}")
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
                allowed = self._cp.Domain.from_values([int(j) for j in np.flatnonzero(holds)])
                self.model.add_linear_expression_in_domain(self.tile, allowed).only_enforce_if(
                    literal
                )

    def _solver(self, time_limit_s: float) -> Any:
        """One worker, a fixed seed, and the fixed smallest-time-first search.

        Presolve, probing, symmetry detection and LP linearisation cost more than they save
        on this model (benchmarks/solve_latency.py measures the solve).
        """
        solver = self._cp.CpSolver()
        params = solver.parameters
        params.num_workers = 1
        params.random_seed = CPSAT_SEED
        params.max_time_in_seconds = time_limit_s
        params.cp_model_presolve = False
        params.cp_model_probing_level = 0
        params.symmetry_level = 0
        params.linearization_level = 0
        params.search_branching = cp_model_helper.SatParameters.FIXED_SEARCH
        # Leave SIGINT to the host process (the CLI's Ctrl-C, the server's graceful drain).
        params.catch_sigint_signal = False
        return solver

    def _row_of(self, solver: Any) -> int:
        return self.rows[int(solver.value(self.tile))]

    def solve_top_k(
        self, k: int, time_limit_s: float, cancel: Cancellation | None = None
    ) -> IpResult:
        """The k best configurations in rank order, re-solving above the last winner's index.
        A set `cancel` stops the search in progress and every later one (as the time limit
        would)."""
        cp = self._cp
        started = time.perf_counter()
        deadline = started + time_limit_s
        ranked: list[int] = []
        proven = True
        timed_out = False
        conflicting: list[str] = []
        solver = self._solver(time_limit_s)
        while len(ranked) < k and self.rows:
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or (cancel is not None and cancel.cancelled):
                timed_out = True
                break
            solver.parameters.max_time_in_seconds = remaining
            status = _solve(solver, self.model, cancel)
            if status == cp.INFEASIBLE:
                if not ranked:
                    core = TileProgram(self.table, True).core
                    conflicting = core(deadline - time.perf_counter(), cancel)
                break
            if status not in (cp.OPTIMAL, cp.FEASIBLE):
                timed_out = True  # UNKNOWN: the limit passed before any solution
                break
            if status != cp.OPTIMAL:
                timed_out = True
                proven = False
            row = self._row_of(solver)
            ranked.append(row)
            # The next rank comes later in the ranking order than this winner.
            self.model.add(self.tile > int(solver.value(self.tile)))
        wall_ms = (time.perf_counter() - started) * 1e3
        return IpResult(ranked, proven and not timed_out, timed_out, conflicting, wall_ms)

    def core(self, time_limit_s: float, cancel: Cancellation | None = None) -> list[str]:
        """Constraints whose enforcement literals CP-SAT finds sufficient for infeasibility
        (needs `explain_infeasibility`); empty if the time runs out first."""
        for literal in self.enforce.values():
            self.model.add_assumption(literal)
        solver = self._solver(max(time_limit_s, 1e-3))
        if _solve(solver, self.model, cancel) != self._cp.INFEASIBLE:
            return []
        found = set(solver.sufficient_assumptions_for_infeasibility())
        return [name for name, lit in self.enforce.items() if lit.index in found]


def _solve(solver: Any, model: Any, cancel: Cancellation | None) -> Any:
    """`solver.solve(model)`, stopped early by `cancel` (from another thread)."""
    if cancel is None:
        return solver.solve(model)
    with cancel.stopping(solver.stop_search):
        if cancel.cancelled:  # set before this search could be stopped
            return cp_model.UNKNOWN
        return solver.solve(model)


def solve_cpsat(
    table: CandidateTable, top_k: int, time_limit_s: float, cancel: Cancellation | None = None
) -> IpResult:
    return TileProgram(table).solve_top_k(top_k, time_limit_s, cancel)
