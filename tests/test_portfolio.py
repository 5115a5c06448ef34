"""Kernel portfolios (`tilesolve.solver.apps.portfolio`): the CP-SAT facility-location program
against brute force over every K-subset, its bound, caps and pins, and its refusals.

The realistic mix: 50 forward shapes on an A100 (fa2), head_dim 64 or 128, seq_len from 128 to
32k (powers of two and a few odd lengths), causal and not, batch 1 to 16 and 16 or 32 heads,
drawn from `random.Random(14)`; weights are call counts from a Zipf law over the draw order,
round(1000 / rank), so a few shapes dominate, as in a real serving mix.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from tilesolve.solver import AttentionProblem, InvalidRequestError
from tilesolve.solver.apps.portfolio import (
    CandidateSet,
    PortfolioAnswer,
    PortfolioRequest,
    WeightedProblem,
    candidate_set,
    solve_portfolio,
)
from tilesolve.solver.solve import resolve_hardware

HARDWARE = "a100-80gb"
SEQ_LENS = (128, 256, 512, 1000, 1024, 2048, 3000, 4096, 8192, 16384, 32768)


def realistic_mix(count: int = 50) -> list[WeightedProblem]:
    rng = random.Random(14)
    out = []
    for rank in range(1, count + 1):
        problem = AttentionProblem(
            batch=rng.choice((1, 2, 4, 8, 16)),
            heads=rng.choice((16, 32)),
            seq_len=rng.choice(SEQ_LENS),
            head_dim=rng.choice((64, 128)),
            causal=rng.random() < 0.5,
        )
        out.append(WeightedProblem(problem=problem, weight=round(1000 / rank)))
    return out


@pytest.fixture(scope="module")
def mix() -> list[WeightedProblem]:
    return realistic_mix()


@pytest.fixture(scope="module")
def sets(mix: list[WeightedProblem]) -> list[CandidateSet]:
    spec = resolve_hardware(HARDWARE)
    found = [candidate_set(wp.problem, spec, None) for wp in mix]
    assert all(isinstance(s, CandidateSet) for s in found)
    return [s for s in found if isinstance(s, CandidateSet)]


def time_matrix(sets: list[CandidateSet]) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Distinct configurations, and each problem's time (ns) with each (inf: infeasible)."""
    keys = sorted({c for s in sets for c in s.configs})
    index = {k: j for j, k in enumerate(keys)}
    times = np.full((len(sets), len(keys)), np.inf)
    for p, s in enumerate(sets):
        for c, t in zip(s.configs, s.time_ns, strict=True):
            times[p, index[c]] = t
    return keys, times


def brute_force(times: np.ndarray, weights: np.ndarray, k: int) -> float:
    """The least weighted total time over every set of k configurations."""
    best = np.inf
    for subset in itertools.combinations(range(times.shape[1]), k):
        total = float(times[:, list(subset)].min(axis=1) @ weights)
        best = min(best, total)
    return best


def objective_ns(answer: PortfolioAnswer, sets: list[CandidateSet]) -> float:
    """The answer's weighted total in the program's own unit (whole ns)."""
    total = 0.0
    for a in answer.assignments:
        config = answer.configurations[a.config - 1]
        key = tuple(config.parameters[n] for n in sets[a.problem].names)
        position = sets[a.problem].configs.index(key)
        total += a.weight * sets[a.problem].time_ns[position]
    return total


def test_k3_on_the_realistic_mix_equals_brute_force(
    mix: list[WeightedProblem], sets: list[CandidateSet]
) -> None:
    answer = solve_portfolio(PortfolioRequest(problems=mix, max_configs=3), HARDWARE, sets=sets)
    assert answer.status == "optimal" and answer.proven_optimal and answer.gap == 0
    assert len(answer.configurations) == 3
    keys, times = time_matrix(sets)
    weights = np.array([wp.weight for wp in mix])
    assert answer.candidate_configs == len(keys)
    assert objective_ns(answer, sets) == brute_force(times, weights, 3)
    # the loss against per-problem optima is stated, and consistent with the assignments
    optimum = sum(wp.weight * s.time_us[0] for wp, s in zip(mix, sets, strict=True))
    assert answer.optimal_weighted_time_us == pytest.approx(optimum)
    assert answer.loss == pytest.approx(answer.weighted_time_us / optimum - 1)
    assert answer.loss >= 0 and answer.worst_loss >= answer.loss - 1e-12
    worst = answer.assignments[answer.worst_problem or 0]
    assert worst.loss == answer.worst_loss == max(a.loss for a in answer.assignments)
    # every problem is served once, by a configuration that lists it, within its seq_len range
    served = sorted(p for c in answer.configurations for p in c.problems)
    assert served == list(range(len(mix)))
    for c in answer.configurations:
        lengths = [mix[p].problem.seq_len for p in c.problems]
        assert (c.seq_len_min, c.seq_len_max) == (min(lengths), max(lengths))


def test_each_problem_gets_its_best_chosen_configuration(
    mix: list[WeightedProblem], sets: list[CandidateSet]
) -> None:
    answer = solve_portfolio(PortfolioRequest(problems=mix, max_configs=2), HARDWARE, sets=sets)
    chosen = [tuple(c.parameters[n] for n in sets[0].names) for c in answer.configurations]
    for a, s in zip(answer.assignments, sets, strict=True):
        times = [s.time_us[s.configs.index(k)] for k in chosen if k in s.configs]
        assert a.time_us == min(times)


def test_the_same_request_gets_the_same_answer(mix: list[WeightedProblem]) -> None:
    request = PortfolioRequest(problems=mix[:20], max_configs=3)
    first = solve_portfolio(request, HARDWARE).model_dump(exclude={"solve_ms"})
    again = solve_portfolio(request, HARDWARE).model_dump(exclude={"solve_ms"})
    assert first == again


def test_an_unmeetable_bound_is_infeasible_with_the_smallest_k_that_works(
    mix: list[WeightedProblem], sets: list[CandidateSet]
) -> None:
    request = PortfolioRequest(problems=mix, max_configs=2, max_slowdown=0.01)
    answer = solve_portfolio(request, HARDWARE, sets=sets)
    assert answer.status == "infeasible" and not answer.assignments
    smallest = answer.smallest_feasible_max_configs
    assert smallest is not None and smallest > 2
    assert f"has {smallest} configurations" in answer.explanation
    at = solve_portfolio(request.model_copy(update={"max_configs": smallest}), HARDWARE, sets=sets)
    assert at.status == "optimal" and at.worst_loss <= 0.01 + 1e-9
    below = request.model_copy(update={"max_configs": smallest - 1})
    assert solve_portfolio(below, HARDWARE, sets=sets).status == "infeasible"


def test_a_footprint_cap_binds_every_kernel(
    mix: list[WeightedProblem], sets: list[CandidateSet]
) -> None:
    cap = 48 * 1024
    request = PortfolioRequest(
        problems=mix, max_configs=3, max_resources={"shared_memory": cap, "registers": 200}
    )
    answer = solve_portfolio(request, HARDWARE, sets=sets)
    assert answer.status == "optimal"
    for c in answer.configurations:
        assert c.resources["shared_memory"] <= cap and c.resources["registers"] <= 200
    free = solve_portfolio(PortfolioRequest(problems=mix, max_configs=3), HARDWARE, sets=sets)
    assert answer.weighted_time_us >= free.weighted_time_us
    tiny = request.model_copy(update={"max_resources": {"shared_memory": 1024}})
    refused = solve_portfolio(tiny, HARDWARE, sets=sets)
    assert refused.status == "infeasible" and refused.smallest_feasible_max_configs is None
    assert refused.unserved_problems == list(range(len(mix)))


def test_pinned_configurations_are_included_and_count_towards_k(
    mix: list[WeightedProblem], sets: list[CandidateSet]
) -> None:
    pin = {"block_m": 64, "block_n": 32, "num_warps": 4, "num_stages": 1}
    request = PortfolioRequest(problems=mix, max_configs=3, pinned=[pin])
    answer = solve_portfolio(request, HARDWARE, sets=sets)
    pinned = [c for c in answer.configurations if c.pinned]
    assert [c.parameters for c in pinned] == [pin]
    assert len(answer.configurations) <= 3
    free = solve_portfolio(PortfolioRequest(problems=mix, max_configs=3), HARDWARE, sets=sets)
    assert answer.weighted_time_us >= free.weighted_time_us


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"max_configs": 0}, "max_configs"),
        ({"max_configs": 4}, "max_configs"),
        ({"max_configs": 1, "pinned": [{"block_m": 64}, {"block_m": 128}]}, "pinned"),
    ],
)
def test_bad_requests_name_the_field(update: dict[str, object], field: str) -> None:
    from pydantic import ValidationError

    problems = [{"problem": {"seq_len": 1024, "head_dim": 64}}] * 3
    with pytest.raises(ValidationError) as caught:
        PortfolioRequest.model_validate({"problems": problems, "max_configs": 1, **update})
    assert field in str(caught.value)


def test_family_refusals_and_unknown_names_are_invalid_input(mix: list[WeightedProblem]) -> None:
    bad = [*mix[:2], WeightedProblem(problem=AttentionProblem(seq_len=128, head_dim=600))]
    with pytest.raises(InvalidRequestError) as caught:
        solve_portfolio(PortfolioRequest(problems=bad, max_configs=1), HARDWARE)
    assert [v.field for v in caught.value.violations] == ["problems[2].problem.head_dim"]
    request = PortfolioRequest(
        problems=mix[:3], max_configs=1, max_resources={"l0c": 1}, pinned=[{"block_m": 64}]
    )
    with pytest.raises(InvalidRequestError) as caught:
        solve_portfolio(request, HARDWARE)
    fields = {v.field: v.description for v in caught.value.violations}
    assert "shared_memory" in fields["max_resources"]
    assert "missing block_n, num_warps, num_stages" in fields["pinned[0]"]
