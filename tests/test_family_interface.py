"""The family interface: every registered family satisfies it, and a toy family defined in a
test (tests/toy_family.py) solves end to end — CLI --json, gRPC Solve, the funnel, the
infeasibility explanation, the validator — with no edit to any shared module."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest

from tilesolve import wire
from tilesolve.client.cli import main
from tilesolve.solver import (
    AttentionProblem,
    Config,
    SolveOptions,
    get_hardware,
    register,
    solve,
    unregister,
)
from tilesolve.solver.apps.heatmap import heatmap_grid
from tilesolve.solver.candidates import build_candidate_table, evaluation, ordered_constraints
from tilesolve.solver.constraints import ConstraintKind
from tilesolve.solver.registry import family_names, get_family, registrations
from tilesolve.solver.solve import prepare
from tilesolve.solver.space import COMMON_FIELDS
from tilesolve.solver.validate import check_config
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from conftest import FamilyCase, derived_case
from toy_family import ToyFamily, toy_expectations

PROBLEM = AttentionProblem(batch=2, heads=8, seq_len=1024, head_dim=64)
CLI_PROBLEM = ["solve", "--hardware", "a100", "--kernel", "toy", "--head-dim", "64"]
CLI_PROBLEM += ["--seq-len", "1024", "--batch", "2", "--heads", "8"]


@pytest.fixture(scope="module")
def toy() -> Iterator[ToyFamily]:
    family = ToyFamily()
    register(family)
    yield family
    unregister("toy")


def _pairs(answer: Any) -> list[tuple[int, int]]:
    return [(c.parameters["block_m"], c.parameters["chunks"]) for c in answer.candidates]


# ---- the toy family, end to end ------------------------------------------------------------


@pytest.mark.parametrize("engine", ["cpsat", "exhaustive"])
def test_toy_family_solves_in_process(toy: ToyFamily, engine: str) -> None:
    expected = toy_expectations()
    answer = solve(PROBLEM, "a100", SolveOptions(kernel="toy", engine=engine, top_k=20))
    assert answer.kernel == "toy" and answer.status.value == "optimal"
    assert set(_pairs(answer)) == expected["feasible"]
    assert _pairs(answer)[0] == expected["winner"]
    best = answer.candidates[0]
    assert best.block_n == 64 and best.num_warps is None and best.smem_bytes is None
    assert best.resources[0].name == "scratch" and best.resources[0].used == 128 * 128
    assert best.figures == {"row_chunks": 128.0}
    funnel = [step.constraint for step in answer.funnel]
    assert funnel == ["toy_shape", "pins", "scratch", "divisibility"]
    assert answer.funnel[0].removed == 1  # only 128 x 4 breaks the legality rule


def test_toy_family_cli_json_and_pins(toy: ToyFamily, capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*CLI_PROBLEM, "--json", "--block-n", "128"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    # block_n is derived (64 x chunks): pinning it pins chunks = 2
    assert {c["parameters"]["chunks"] for c in out["candidates"]} == {2}
    assert out["candidates"][0]["resources"][0]["name"] == "scratch"
    code = main([*CLI_PROBLEM, "--param", "chunks=3"])
    err = capsys.readouterr().err
    assert code == 2 and "allowed: 1, 2, 4" in err and "error: param:" in err
    code = main([*CLI_PROBLEM, "--num-warps", "4"])
    err = capsys.readouterr().err
    assert code == 2 and "toy has no num_warps" in err


def test_toy_family_infeasibility_and_relaxation(
    toy: ToyFamily, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*CLI_PROBLEM, "--json", "--block-m", "128", "--param", "chunks=2"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["status"] == "infeasible"
    why = out["infeasibility"]
    assert set(why["conflicting_constraints"]) == {"pins", "scratch"}
    assert why["relaxation"]["constraint"] == "pins"
    assert why["relaxation"]["target_kind"] == "parameter"
    assert "needs 32768 bytes of scratch" in why["explanation"]


def test_toy_family_validator_and_heatmap(toy: ToyFamily) -> None:
    hardware = get_hardware("a100")
    options = SolveOptions(kernel="toy")
    assert check_config(toy, hardware, PROBLEM, options, Config.of(block_m=128, chunks=4)) == [
        "toy_shape: 512 > 256",
        "scratch: over capacity",
    ]
    assert check_config(toy, hardware, PROBLEM, options, Config.of(block_m=64, chunks=2)) == []
    assert check_config(toy, hardware, PROBLEM, options, Config.of(block_m=48, chunks=1))
    grid = heatmap_grid(PROBLEM, hardware, options)
    assert grid.block_n_values == (64, 128, 256) and grid.winner == (128, 64)
    assert grid.labels[grid.block_m_values.index(128)][2] == "toy_shape"


def test_toy_family_over_grpc(toy: ToyFamily, stub: pb_grpc.TileSolveServiceStub) -> None:
    """The module's server solves in threads of this process: it sees the registered toy."""
    request = wire.solve_request_to_proto(PROBLEM, "a100", SolveOptions(kernel="toy"))
    response = stub.Solve(request, timeout=30)
    assert response.kernel == "toy" and response.kernel_enum == 0
    assert response.candidates[0].parameters == {"block_m": 128, "chunks": 1}
    assert not response.candidates[0].HasField("num_warps")
    answer, _ = wire.answer_from_proto(response)
    assert _pairs(answer)[0] == toy_expectations()["winner"]
    pinned = SolveOptions(kernel="toy", parameter_pins={"block_m": 128, "chunks": 2})
    response = stub.Solve(wire.solve_request_to_proto(PROBLEM, "a100", pinned), timeout=30)
    assert response.status == pb.SOLVE_STATUS_INFEASIBLE
    assert response.infeasibility.relaxation.target_kind == "parameter"
    bad = SolveOptions(kernel="toy", parameter_pins={"chunks": 3})
    with pytest.raises(grpc.RpcError) as caught:
        stub.Solve(wire.solve_request_to_proto(PROBLEM, "a100", bad), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "allowed: 1, 2, 4" in (caught.value.details() or "")


# ---- every registered family satisfies the interface ----------------------------------------

# Each test below runs once per registration (tests/conftest.py: `registered`), so that a new
# family is tested by registering it.


def test_built_in_families_are_registered(registered: FamilyCase) -> None:
    assert registered.name in family_names()
    family = registered.family
    assert family.phase is registered.phase and registered.problem.phase is registered.phase


def test_every_registered_family_gets_a_case_from_the_catalog() -> None:
    """A registration without a chosen case still gets one: a catalog device and a probe
    problem it runs (so a new family needs no edit here to be tested)."""
    for name, phase in registrations():
        case = derived_case(name, phase)
        assert case is not None, (name, phase)
        family = case.family
        assert not family.problem_violations(case.problem, get_hardware(case.hardware))


def test_family_satisfies_the_interface(registered: FamilyCase) -> None:
    name, problem, paged = registered.name, registered.problem, registered.paged
    hardware = get_hardware(registered.hardware)
    family = get_family(name, registered.phase, hardware)
    assert family.problem_violations(problem, hardware) == []
    # every user constraint switched on, so each has rules to state
    options = SolveOptions(kernel=name, max_smem=96 * 1024, min_blocks_per_sm=1)
    options = options.model_copy(update={"require_divisible": True, "choose_page_size": paged})
    params = family.request_params(problem, hardware, options)
    ev = evaluation(family, hardware, problem, options)
    # the declared parameters are the table's columns, and the table is their product
    assert ev.cfg.names == tuple(p.name for p in params)
    assert len(ev.cfg) == int(np.prod([len(p.domain) for p in params]))
    for p in params:
        assert set(np.unique(ev.cfg[p.name])) == set(p.domain) and p.doc
    for field in COMMON_FIELDS:
        if field in ev.common:
            assert len(ev.common[field]) == len(ev.cfg)
    # every constraint has an encoding and a detail
    constraints = ordered_constraints(family, hardware, problem, options)
    names = [c.name for c in constraints]
    assert len(names) == len(set(names)) and names[-1] == "divisibility"
    for c in constraints:
        assert c.rule and c.short and isinstance(c.kind, ConstraintKind)
        rules = c.rules(ev)
        assert rules or c.name == "pins", c.name
        for rule in rules:
            assert len(rule.column) == len(ev.cfg) and rule.op in ("<=", ">=", "==")
        assert c.detail(ev, 0)
    # every resource reported with a capacity; cost positive and finite
    assert all(u.capacity > 0 and u.unit for u in ev.res.uses(0))
    table = build_candidate_table(family, hardware, problem, options)
    assert np.all(np.isfinite(table.perf.time_us)) and np.all(table.perf.time_us > 0)
    assert np.all(np.isfinite(table.perf.tflops)) and len(table.perf.bottleneck) == len(table)
    for values in table.perf.figures.values():
        assert np.all(np.isfinite(values))
    # a label names the common fields
    # (the first configuration's tile: 16x16 for fa2/triton, 64x16 for fa3, whose consumer
    # warpgroups own 64 rows each)
    first = {field: int(column[0]) for field, column in ev.common.items()}
    assert family.label(ev.cfg.config(0)).startswith(f"{first['block_m']}x{first['block_n']}")


def test_a_parameter_that_cannot_be_pinned_is_refused(toy: ToyFamily) -> None:
    """A family may declare a parameter that only describes its structure; pinning it is
    invalid input naming the pinnable ones."""
    from tilesolve.solver import InvalidRequestError, Param
    from tilesolve.solver.pins import resolve_pins

    params = (
        Param("block_m", (32, 64, 128), "rows per block"),
        Param("chunks", (1, 2, 4), "derived from the layout", pinnable=False),
    )
    options = SolveOptions(kernel="toy", parameter_pins={"chunks": 2})
    with pytest.raises(InvalidRequestError) as caught:
        resolve_pins(toy, params, {"block_m": np.array([32])}, options)
    (violation,) = caught.value.violations
    assert violation.field == "parameter_pins"
    assert "chunks of toy cannot be pinned" in violation.description
    assert "pinnable: block_m" in violation.description


def _feasible_smem(table: Any) -> np.ndarray:
    """Shared-memory bytes of the table's feasible configurations (none for a family without
    a shared_memory resource)."""
    used = []
    for i in np.flatnonzero(table.feasible):
        uses = {u.name: u.used for u in table.res.uses(int(i))}
        if "shared_memory" in uses:
            used.append(uses["shared_memory"])
    return np.asarray(used, dtype=np.int64)


def test_the_validator_agrees_with_the_table(registered: FamilyCase) -> None:
    """check_config states each family's rules apart from the table and the constraint
    objects: every configuration the table finds feasible passes it, and every one the table
    rejects breaks a rule it names (a sample spread over the space, user caps switched on)."""
    hardware = get_hardware(registered.hardware)
    options = SolveOptions(
        kernel=registered.name,
        max_smem=64 * 1024,
        min_blocks_per_sm=1,
        choose_page_size=registered.paged,
    )
    capped = prepare(registered.problem, hardware, options)
    tables = {True: capped, False: capped}
    if not capped.feasible.any():
        # no configuration fits 64 KiB (fa3's backward): cap at the median of the feasible
        # ones' shared memory instead, so that the cap still splits the space
        uncapped = prepare(
            registered.problem, hardware, options.model_copy(update={"max_smem": None})
        )
        cap = int(np.median(_feasible_smem(uncapped)))
        median = prepare(registered.problem, hardware, options.model_copy(update={"max_smem": cap}))
        # a space of one tile (fa2's split-KV decode kernel) all fits the median: its
        # feasible configurations from there, its rejected ones from the 64 KiB cap
        tables = {True: median, False: median if (~median.feasible).any() else capped}
    for feasible, table in tables.items():
        request = (table.family, hardware, registered.problem, table.options)
        indices = np.flatnonzero(table.feasible == feasible)
        assert len(indices), f"no {'feasible' if feasible else 'infeasible'} configuration"
        for i in indices[:: max(1, len(indices) // 40)]:
            broken = check_config(*request, table.cfg.config(int(i)))
            assert (broken == []) is feasible, (table.label(int(i)), broken)


def test_a_phase_given_as_its_string_finds_the_same_family() -> None:
    """A problem copied with `model_copy(update={"phase": "backward"})` keeps the string (no
    validation runs): the registry's look-ups and a solve treat it as the Phase it names (the
    latency benchmark's warm-up does exactly this)."""
    from tilesolve.solver.problem import Phase
    from tilesolve.solver.registry import find_family

    hardware = get_hardware("rtx-4090")
    text: Any = "backward"  # what model_copy leaves in the field
    for name in ("triton", "fa2"):
        assert find_family(name, text) is find_family(name, Phase.BACKWARD)
        assert get_family(name, text, hardware) is get_family(name, Phase.BACKWARD, hardware)
    problem = AttentionProblem(batch=2, heads=8, seq_len=1024, head_dim=64)
    copied = problem.model_copy(update={"phase": text})
    validated = problem.model_copy(update={"phase": Phase.BACKWARD})
    options = SolveOptions(kernel="triton", top_k=3, engine="exhaustive")
    first, second = solve(copied, hardware, options), solve(validated, hardware, options)
    assert [c.parameters for c in first.candidates] == [c.parameters for c in second.candidates]
    assert first.kernel == "triton" and len(first.candidates) == 3
