"""Fixtures and helpers shared by the test files, one section per layer.

Each section is kept apart so that the sections can grow independently. Server fixtures are
module-scoped where a module shares one instance (a server), so that modules stay apart: no
answer cached by one module's server is a hit in another's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import grpc
import pytest

from tilesolve.server.app import TileSolveServer
from tilesolve.solver import (
    AttentionProblem,
    Engine,
    InvalidRequestError,
    Phase,
    SolveAnswer,
    SolveOptions,
    get_hardware,
    hardware_names,
    solve,
)
from tilesolve.solver.family import KernelFamily
from tilesolve.solver.registry import find_family, registrations
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

import loopback

# ============================================================================================
# The environment: no test writes to the user's home
# ============================================================================================


@pytest.fixture(autouse=True, scope="session")
def answer_cache_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The CLI's answer cache ($XDG_CACHE_HOME/tilesolve) of every CLI the suite starts, in a
    session folder (test_answer_cache.py gives each of its tests its own)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        yield


# ============================================================================================
# The solver: the engines' agreement and the registry's families
# ============================================================================================

# ---- CP-SAT against the exhaustive oracle ---------------------------------------------------

Explanation = Literal["full", "conflict", "none"]


def ranking(answer: SolveAnswer, explanation: Explanation = "full") -> tuple[Any, ...]:
    """What two engines must agree on for one request: the status, the ranked configurations
    (every decision variable of the family, by name) with their times, the feasible count, and
    for an infeasible request its explanation: the whole `Infeasibility` (`full`), the set of
    constraints that conflict (`conflict`), or nothing (`none`)."""
    tiles = [(tuple(sorted(c.parameters.items())), c.predicted_time_us) for c in answer.candidates]
    why = answer.infeasibility
    shown: Any = None
    if explanation == "full":
        shown = why
    elif explanation == "conflict" and why is not None:
        shown = sorted(why.conflicting_constraints)
    return answer.status, tiles, answer.feasible_count, shown


def solve_with(
    problem: AttentionProblem, hardware: str, options: SolveOptions, engine: str
) -> SolveAnswer:
    """The request solved with the named engine (the other options as given)."""
    return solve(problem, hardware, options.model_copy(update={"engine": Engine(engine)}))


def compare_engines(
    problem: AttentionProblem,
    hardware: str,
    options: SolveOptions,
    explanation: Explanation = "full",
    allow_invalid: bool = False,
) -> SolveAnswer | None:
    """Solve the request with CP-SAT and with the exhaustive engine, assert that they agree
    (`ranking`), and return the CP-SAT answer; with `allow_invalid`, None for a request the
    solver refuses (random requests draw some), which is not compared."""
    try:
        cpsat = solve_with(problem, hardware, options, "cpsat")
    except InvalidRequestError:
        if allow_invalid:
            return None
        raise
    exhaustive = solve_with(problem, hardware, options, "exhaustive")
    assert ranking(cpsat, explanation) == ranking(exhaustive, explanation), (
        problem,
        hardware,
        options,
    )
    return cpsat


@pytest.fixture(name="compare_engines")
def compare_engines_fixture() -> Callable[..., SolveAnswer | None]:
    """`compare_engines` for a test to call on each of its requests."""
    return compare_engines


# ---- one case per registered family ---------------------------------------------------------


@dataclass(frozen=True)
class FamilyCase:
    """A registered family with a catalog device and a problem it runs there; `paged` asks
    for a paged KV cache (`choose_page_size`) when the family has a paged path."""

    name: str
    phase: Phase
    hardware: str
    problem: AttentionProblem
    paged: bool

    @property
    def id(self) -> str:
        return f"{self.name}-{self.phase.value}"

    @property
    def family(self) -> KernelFamily:
        family = find_family(self.name, self.phase)
        assert family is not None, self.id
        return family


# Problems chosen for the built-in families so that their conditional constraints apply
# (split_tiles, pack_gqa, the page rules: a longer cache, GQA, a paged cache); a family
# without one here gets a case from `derived_case`.
DECODE = Phase.DECODE
GQA_DECODE = {"batch": 3, "heads": 32, "kv_heads": 8, "seq_len": 1, "seq_len_kv": 9000}
CHOSEN_CASES: dict[tuple[str, Phase], tuple[str, dict[str, Any]]] = {
    ("fa2", Phase.FORWARD): ("a100-80gb", {"seq_len": 2050, "head_dim": 128}),
    ("triton", Phase.FORWARD): ("h100-sxm", {"seq_len": 3000, "head_dim": 96}),
    ("fa2", Phase.BACKWARD): ("a100-80gb", {"seq_len": 2050, "head_dim": 128}),
    ("triton", Phase.BACKWARD): ("h100-sxm", {"seq_len": 3000, "head_dim": 96}),
    ("ascend", Phase.FORWARD): ("ascend-910b", {"seq_len": 2050, "head_dim": 256}),
    ("fa3", Phase.FORWARD): ("h100-sxm", {"seq_len": 3000, "head_dim": 128}),
    ("flashinfer", Phase.FORWARD): (
        "a100-80gb",
        {"kv_heads": 2, "seq_len": 200, "seq_len_kv": 5000, "head_dim": 128},
    ),
    ("fa2", DECODE): ("h100-sxm", {**GQA_DECODE, "head_dim": 128}),
    ("flashinfer", DECODE): (
        "l4",
        {"heads": 16, "kv_heads": 4, "seq_len": 1, "seq_len_kv": 4100, "head_dim": 64},
    ),
    ("fa3", DECODE): ("h100-sxm", {**GQA_DECODE, "head_dim": 128}),
    ("fa4", Phase.FORWARD): (
        "b200",
        {"kv_heads": 2, "seq_len": 3000, "seq_len_kv": 9000, "head_dim": 64, "dtype": "bf16"},
    ),
    ("fa4", DECODE): ("b200", {**GQA_DECODE, "head_dim": 64}),
    ("ascend", DECODE): (
        "ascend-910b",
        {"heads": 16, "kv_heads": 4, "seq_len": 2, "seq_len_kv": 5000, "head_dim": 128},
    ),
}
CHOSEN_DEFAULTS = {"batch": 2, "heads": 8}  # where an entry above does not say

# Problems a new family of the phase is tried on, in order, on every catalog device.
PROBE_PROBLEMS: dict[Phase, tuple[AttentionProblem, ...]] = {
    phase: tuple(
        AttentionProblem(phase=phase, **fields)
        for fields in (
            {"batch": 2, "heads": 8, "seq_len": 2048, "head_dim": 128},
            {"batch": 2, "heads": 8, "seq_len": 2048, "head_dim": 64},
            {"batch": 2, "heads": 8, "seq_len": 2048, "head_dim": 128, "dtype": "bf16"},
        )
    )
    for phase in (Phase.FORWARD, Phase.BACKWARD)
}
PROBE_PROBLEMS[DECODE] = tuple(
    AttentionProblem(
        batch=4, heads=32, kv_heads=8, seq_len=1, seq_len_kv=8192, head_dim=d, phase=DECODE
    )
    for d in (128, 64)
)


def derived_case(name: str, phase: Phase) -> FamilyCase | None:
    """A case for a registration no one chose one for: the first catalog device (by name) and
    probe problem of the phase the family runs."""
    family = find_family(name, phase)
    if family is None:
        return None
    for hardware in hardware_names():
        spec = get_hardware(hardware)
        for problem in PROBE_PROBLEMS[phase]:
            if not family.problem_violations(problem, spec):
                return FamilyCase(name, phase, hardware, problem, family.paged_kv_rule is not None)
    return None


def family_case(name: str, phase: Phase) -> FamilyCase:
    """The case of a registration: the chosen one, or one derived from the catalog."""
    chosen = CHOSEN_CASES.get((name, phase))
    family = find_family(name, phase)
    if chosen is not None and family is not None:
        hardware, fields = chosen
        problem = AttentionProblem(**{**CHOSEN_DEFAULTS, **fields, "phase": phase})
        return FamilyCase(name, phase, hardware, problem, family.paged_kv_rule is not None)
    case = derived_case(name, phase)
    assert case is not None, f"no catalog device and probe problem runs {name} {phase.value}"
    return case


def registered_cases() -> list[FamilyCase]:
    """One case per registration at collection time (the built-in families; a test's toy
    family registers later and has its own tests)."""
    return [family_case(name, phase) for name, phase in registrations()]


@pytest.fixture(params=registered_cases(), ids=lambda case: case.id)
def registered(request: pytest.FixtureRequest) -> FamilyCase:
    """Each registered family with its case: a test taking it runs once per registration."""
    case: FamilyCase = request.param
    return case


# ============================================================================================
# The server and the client
# ============================================================================================

# ---- the server, its clients and the wire ----------------------------------------------------
# A module gets its own in-process server on a free loopback port (`loopback.serving`) by asking
# for `server`, its address (`target`), a channel or a stub. A module that needs other
# settings overrides `server_settings`; a test that needs a server of its own, or one it stops,
# uses `loopback.serving` directly.


@pytest.fixture(scope="module")
def server_settings() -> dict[str, Any]:
    """The `ServerConfig` settings of the module's `server` beyond host and port (none)."""
    return {}


@pytest.fixture(scope="module")
def server(server_settings: dict[str, Any]) -> Iterator[TileSolveServer]:
    """The module's server, started, in this process; stopped after the module's last test."""
    with loopback.serving(**server_settings) as running:
        yield running


@pytest.fixture(scope="module")
def target(server: TileSolveServer) -> str:
    """`HOST:PORT` of the module's server."""
    return loopback.address_of(server)


@pytest.fixture(scope="module")
def channel(target: str) -> Iterator[grpc.Channel]:
    """A plaintext channel to the module's server."""
    with grpc.insecure_channel(target) as opened:
        yield opened


@pytest.fixture(scope="module")
def stub(channel: grpc.Channel) -> pb_grpc.TileSolveServiceStub:
    """The generated stub over `channel`."""
    return pb_grpc.TileSolveServiceStub(channel)
