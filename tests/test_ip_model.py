"""The integer program on its own: its variables, its ranking and its infeasibility core, and
that the CpModelProto it writes is the one OR-Tools' public `cp_model` API builds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ortools.sat.python import cp_model

from tilesolve.solver import AttentionProblem, Phase, SolveOptions, get_hardware
from tilesolve.solver.candidates import build_candidate_table
from tilesolve.solver.constraints import ConstraintKind
from tilesolve.solver.ip_model import TileProgram, intervals
from tilesolve.solver.registry import get_family

PROBLEM = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128)


def _table(options: SolveOptions, kernel: str = "fa2") -> object:
    hardware = get_hardware("a100-80gb")
    family = get_family(kernel, Phase.FORWARD, hardware)
    return build_candidate_table(family, hardware, PROBLEM, options)


def test_tiles_are_the_legal_rows_in_ranking_order() -> None:
    table = _table(SolveOptions())
    program = TileProgram(table)  # type: ignore[arg-type]
    assert set(program.rows) == set(np.flatnonzero(table.legal()))  # type: ignore[attr-defined]
    keys = [table.objective[i] for i in program.rows]  # type: ignore[attr-defined]
    assert keys == sorted(keys)


def test_rules_reading_one_column_share_one_variable() -> None:
    table = _table(SolveOptions(max_smem=64 * 1024, block_m=128))
    program = TileProgram(table)  # type: ignore[arg-type]
    # shared_memory and max_smem both compare smem_bytes; pins compares block_m
    assert {"smem_bytes", "spill_regs", "blocks_per_sm", "block_m"} <= set(program.columns)
    assert "remainder" not in program.columns  # divisibility not asked for: no variable
    rows = np.asarray(program.rows)
    assert list(program.columns["smem_bytes"]) == list(table.res.smem_bytes[rows])  # type: ignore[attr-defined]


def test_the_objective_is_the_ranking_position() -> None:
    """Rows are in time_ns order (then the tie-break), so minimising the tile index is
    minimising the modelled time."""
    table = _table(SolveOptions())
    program = TileProgram(table)  # type: ignore[arg-type]
    times = [int(table.time_ns[i]) for i in program.rows]  # type: ignore[attr-defined]
    assert times == sorted(times)


def test_top_k_equals_the_exhaustive_ranking() -> None:
    for kernel in ("fa2", "triton"):
        table = _table(SolveOptions(), kernel)
        result = TileProgram(table).solve_top_k(8, 10.0)  # type: ignore[arg-type]
        expected = table.distinct_ranked(8)  # type: ignore[attr-defined]
        assert result.ranked == expected and result.proven_optimal


def test_infeasible_program_names_its_core() -> None:
    table = _table(SolveOptions(max_smem=4096))
    result = TileProgram(table).solve_top_k(5, 10.0)  # type: ignore[arg-type]
    assert result.ranked == [] and "max_smem" in result.conflicting
    # constraints with nothing to state (no pins, no divisibility asked) are never blamed
    assert "divisibility" not in result.conflicting and "pins" not in result.conflicting


# ---- the proto is the one OR-Tools' public API builds -----------------------------------------

# Real tables of several families, phases and devices: caps, pins, divisibility, decode's
# splits and pages, Ascend's buffers, and one infeasible request (its guarded core model).
TABLES = [
    ("a100-80gb", "fa2", Phase.FORWARD, PROBLEM, SolveOptions(max_smem=64 * 1024, block_m=128)),
    ("a100-80gb", "triton", Phase.FORWARD, PROBLEM, SolveOptions(require_divisible=True)),
    ("h100-sxm", "fa3", Phase.BACKWARD, PROBLEM, SolveOptions(min_blocks_per_sm=1)),
    (
        "h100-sxm",
        "flashinfer",
        Phase.DECODE,
        AttentionProblem(seq_len=1, seq_len_kv=32768, heads=32, kv_heads=8, head_dim=128),
        SolveOptions(choose_page_size=True),
    ),
    ("ascend-910b", "ascend", Phase.FORWARD, PROBLEM, SolveOptions(num_stages=2)),
    ("a100-80gb", "fa2", Phase.FORWARD, PROBLEM, SolveOptions(max_smem=4096)),
]


def _public_api_model(table: Any, guarded: bool, later_than: list[int]) -> Any:
    """The program of `table` built with `ortools.sat.python.cp_model` (pandas and all), as
    the solver built it before it wrote the proto itself: `tile` over the legal rows in
    ranking order, each rule a domain constraint, guarded by its constraint's literal when
    `guarded` (as assumptions), the objective, the search; then, for each v of `later_than`,
    `tile > v` and none of row v's twins."""
    model = cp_model.CpModel()
    legal = np.flatnonzero(table.legal())
    rows = legal[np.argsort(table.objective[legal], kind="stable")]
    tile = model.new_int_var(0, max(len(rows) - 1, 0), "tile")
    literals = []
    for constraint in table.constraints:
        rules = constraint.rules(table)
        if constraint.kind is ConstraintKind.LEGALITY or not rules:
            continue
        guard = [model.new_bool_var(f"enforce_{constraint.name}")] if guarded else []
        literals.extend(guard)
        for rule in rules:
            values = np.asarray(rule.column)[rows]
            holds = {"<=": values <= rule.bound, ">=": values >= rule.bound}.get(
                rule.op, values == rule.bound
            )
            allowed = cp_model.Domain.from_values([int(j) for j in np.flatnonzero(holds)])
            model.add_linear_expression_in_domain(tile, allowed).only_enforce_if(guard)
    model.minimize(tile)
    model.add_decision_strategy([tile], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE)
    position = {int(row): j for j, row in enumerate(rows)}
    for value in later_than:
        twins = [position[int(i)] for i in table.twins(int(rows[value])) if int(i) in position]
        after = cp_model.Domain(value + 1, cp_model.INT_MAX)
        after = after.intersection_with(cp_model.Domain.from_values(twins).complement())
        model.add_linear_expression_in_domain(tile, after)
    for literal in literals:
        model.add_assumption(literal)
    return model.proto


@pytest.mark.parametrize(("device", "kernel", "phase", "problem", "options"), TABLES)
def test_the_proto_is_the_one_cp_model_builds(
    device: str, kernel: str, phase: Phase, problem: AttentionProblem, options: SolveOptions
) -> None:
    hardware = get_hardware(device)
    table = build_candidate_table(get_family(kernel, phase, hardware), hardware, problem, options)
    program = TileProgram(table)
    result = program.solve_top_k(3, 10.0)
    tiles = [program.rows.index(row) for row in result.ranked]
    assert str(program.model) == str(_public_api_model(table, False, tiles))
    guarded = TileProgram(table, explain_infeasibility=True)
    guarded.model.assumptions.extend(guarded.enforce.values())  # as `core` adds them
    assert str(guarded.model) == str(_public_api_model(table, True, []))
    assert len(guarded.model.constraints) > 0


def test_a_domain_is_the_runs_of_consecutive_indices() -> None:
    assert intervals(np.array([], dtype=np.int64)) == []
    assert intervals(np.array([4])) == [4, 4]
    assert intervals(np.array([0, 1, 2, 5, 7, 8])) == [0, 2, 5, 5, 7, 8]
    values = [1, 2, 3, 9, 10, 40]
    expected = cp_model.Domain.from_values(values).flattened_intervals()
    assert intervals(np.array(values)) == expected
