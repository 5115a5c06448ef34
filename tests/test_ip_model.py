"""The integer program on its own: its variables, its ranking and its infeasibility core."""

from __future__ import annotations

import numpy as np

from tilesolve.solver import AttentionProblem, Phase, SolveOptions, get_hardware
from tilesolve.solver.candidates import build_candidate_table
from tilesolve.solver.ip_model import TileProgram
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
        expected = [int(i) for i in table.ranked_feasible()[:8]]  # type: ignore[attr-defined]
        assert result.ranked == expected and result.proven_optimal


def test_infeasible_program_names_its_core() -> None:
    table = _table(SolveOptions(max_smem=4096))
    result = TileProgram(table).solve_top_k(5, 10.0)  # type: ignore[arg-type]
    assert result.ranked == [] and "max_smem" in result.conflicting
    # constraints with nothing to state (no pins, no divisibility asked) are never blamed
    assert "divisibility" not in result.conflicting and "pins" not in result.conflicting
