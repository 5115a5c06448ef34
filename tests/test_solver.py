"""The solver's contracts: validation, infeasibility explanations, pins, determinism, validator."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from tilesolve.solver import AttentionProblem, Config, Phase, SolveOptions, get_hardware, solve
from tilesolve.solver.errors import InvalidRequestError, UnknownHardwareError
from tilesolve.solver.registry import get_family
from tilesolve.solver.solve import prepare
from tilesolve.solver.validate import check_config, check_configs

A100 = "a100-80gb"
BASE = {"batch": 4, "heads": 16, "seq_len": 4096, "head_dim": 128}


def problem(**changes: object) -> AttentionProblem:
    return AttentionProblem.model_validate({**BASE, **changes})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("head_dim", 0),
        ("head_dim", -3),
        ("head_dim", 5000),
        ("seq_len", 0),
        ("seq_len", 1 << 40),
        ("batch", 0),
        ("heads", "many"),
        ("dtype", "fp4"),
        ("dropout", 1.5),
    ],
)
def test_invalid_problem_fields_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        problem(**{field: value})
    assert field in str(info.value)


def test_kv_heads_must_divide_heads_and_the_message_lists_divisors() -> None:
    with pytest.raises(ValidationError) as info:
        problem(heads=8, kv_heads=3)
    assert "kv_heads" in str(info.value) and "1, 2, 4, 8" in str(info.value)


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError):
        AttentionProblem.model_validate({**BASE, "head_dims": 64})


def test_unknown_hardware_lists_the_known_names() -> None:
    with pytest.raises(UnknownHardwareError) as info:
        solve(problem(), "a1000")
    assert "a100-80gb" in str(info.value) and info.value.violations[0].field == "hardware"


@pytest.mark.parametrize(
    ("changes", "options", "field"),
    [
        ({"head_dim": 300}, {}, "head_dim"),
        ({"head_dim": 100}, {}, "head_dim"),  # fa2: multiple of 8 only
        ({"dtype": "fp8"}, {}, "dtype"),
        ({"phase": "decode"}, {}, "seq_len"),  # decode: 1 to 64 query rows
        ({"head_dim_v": 64}, {}, "head_dim_v"),
        ({}, {"kernel": "fa3"}, "kernel"),
    ],
)
def test_family_rejects_what_it_cannot_run(changes: dict, options: dict, field: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        solve(problem(**changes), A100, SolveOptions(**options))
    assert [v.field for v in info.value.violations] == [field]


def test_fa2_is_refused_on_volta_with_the_alternative_named() -> None:
    with pytest.raises(InvalidRequestError) as info:
        solve(problem(), "v100", SolveOptions(kernel="fa2"))
    assert "triton" in str(info.value)


def test_ascend_hardware_defaults_to_the_ascend_family() -> None:
    answer = solve(problem(), "ascend-910b")
    assert answer.kernel == "ascend" and answer.candidates
    assert answer.kernel_reason.startswith("ascend, the default kernel of ascend-910b")
    with pytest.raises(InvalidRequestError) as info:
        solve(problem(), "ascend-910b", SolveOptions(kernel="fa2"))
    assert info.value.violations[0].field == "kernel"
    assert "families that run this problem on ascend-910b: ascend" in str(info.value)


@pytest.mark.parametrize("engine", ["cpsat", "exhaustive"])
def test_tiny_smem_cap_is_infeasible_with_the_nearest_cap(engine: str) -> None:
    answer = solve(problem(), A100, SolveOptions(max_smem=4096, engine=engine))
    assert answer.status == "infeasible" and not answer.candidates
    assert answer.infeasibility is not None
    assert "max_smem" in answer.infeasibility.conflicting_constraints
    relaxation = answer.infeasibility.nearest_relaxation
    assert "--max-smem" in relaxation
    # The suggested cap really is the smallest feasible one: solving with it succeeds,
    # and one byte less does not.
    cap = int(relaxation.split("--max-smem to ")[1].split(" ")[0])
    assert solve(problem(), A100, SolveOptions(max_smem=cap, engine=engine)).candidates
    assert not solve(problem(), A100, SolveOptions(max_smem=cap - 1, engine=engine)).candidates


def test_both_engines_explain_infeasibility_the_same_way() -> None:
    options = {"block_m": 256, "num_warps": 1}
    a = solve(problem(), A100, SolveOptions(engine="cpsat", **options))
    b = solve(problem(), A100, SolveOptions(engine="exhaustive", **options))
    assert a.status == b.status == "infeasible"
    assert a.infeasibility is not None and b.infeasibility is not None
    assert set(a.infeasibility.conflicting_constraints) == set(
        b.infeasibility.conflicting_constraints
    )


def test_pins_are_honoured_and_reported_as_binding() -> None:
    free = solve(problem(), A100)
    pinned = solve(problem(), A100, SolveOptions(block_n=16))
    assert all(c.block_n == 16 for c in pinned.candidates)
    assert pinned.candidates[0].predicted_time_us >= free.candidates[0].predicted_time_us
    if free.candidates[0].block_n != 16:
        assert "pins" in [b.constraint for b in pinned.binding_constraints]


def test_require_divisible_only_returns_dividing_tiles() -> None:
    answer = solve(problem(seq_len=4000), A100, SolveOptions(require_divisible=True, top_k=10))
    assert answer.candidates
    assert all(4000 % c.block_m == 0 and 4000 % c.block_n == 0 for c in answer.candidates)


def test_min_blocks_per_sm_caps_registers_and_is_met() -> None:
    answer = solve(problem(), A100, SolveOptions(min_blocks_per_sm=3, top_k=10))
    assert all(c.blocks_per_sm >= 3 for c in answer.candidates)


def test_same_request_same_answer_bit_for_bit() -> None:
    first = solve(problem(causal=True), "h100-sxm").model_dump(mode="json", exclude={"solve_ms"})
    second = solve(problem(causal=True), "h100-sxm").model_dump(mode="json", exclude={"solve_ms"})
    assert first == second


def test_funnel_accounts_for_every_configuration() -> None:
    answer = solve(problem(), A100)
    removed = sum(step.removed for step in answer.funnel)
    assert removed + answer.funnel[-1].remaining == answer.search_space_size
    assert answer.funnel[-1].remaining == answer.feasible_count


def test_candidates_are_ranked_and_carry_reasons() -> None:
    answer = solve(problem(), A100, SolveOptions(top_k=5))
    times = [c.predicted_time_us for c in answer.candidates]
    assert times == sorted(times) and [c.rank for c in answer.candidates] == [1, 2, 3, 4, 5]
    assert all(c.reasons for c in answer.candidates)
    assert answer.candidates[0].reasons[0].startswith("fastest")


def test_validator_rejects_broken_configurations() -> None:
    hardware = get_hardware(A100)
    family = get_family("fa2", Phase.FORWARD, hardware)
    p = problem()
    # 8 rows per warp is not a multiple of the 16-row mma; 256x256 needs 192 KiB of smem.
    assert any(
        v.startswith("alignment")
        for v in check_config(
            family,
            hardware,
            p,
            SolveOptions(),
            Config.of(block_m=32, block_n=64, num_warps=4, num_stages=1),
        )
    )
    assert any(
        v.startswith("shared_memory")
        for v in check_config(
            family,
            hardware,
            p,
            SolveOptions(),
            Config.of(block_m=256, block_n=256, num_warps=16, num_stages=1),
        )
    )
    assert (
        check_config(
            family,
            hardware,
            p,
            SolveOptions(),
            Config.of(block_m=128, block_n=64, num_warps=4, num_stages=1),
        )
        == []
    )


def test_inline_hardware_description_is_accepted() -> None:
    spec = get_hardware(A100).model_dump()
    spec["name"] = "a100-half"
    spec["throughput"]["sm_count"] = 54
    from tilesolve.solver import parse_hardware

    half = parse_hardware(spec)
    full_answer = solve(problem(), A100)
    half_answer = solve(problem(), half)
    assert half_answer.hardware == "a100-half"
    assert half_answer.candidates[0].predicted_time_us > full_answer.candidates[0].predicted_time_us


def test_model_sanity_causal_is_cheaper_and_longer_sequences_cost_more() -> None:
    dense = solve(problem(), A100).candidates[0]
    causal = solve(problem(causal=True), A100).candidates[0]
    longer = solve(problem(seq_len=8192), A100).candidates[0]
    assert causal.predicted_time_us < dense.predicted_time_us
    assert longer.predicted_time_us > 3 * dense.predicted_time_us
    peak = get_hardware(A100).throughput.tensor_fp16_dense_tflops  # type: ignore[union-attr]
    assert 0.3 * peak < dense.predicted_tflops < peak


def test_a_search_cut_short_is_a_deadline_not_an_infeasibility() -> None:
    from tilesolve.solver.errors import DeadlineExceededError

    # Below the schema's 1 ms: only a server's deadline cuts a limit this short (model_copy).
    cut_short = SolveOptions().model_copy(update={"time_limit_s": 1e-6})
    with pytest.raises(DeadlineExceededError) as info:
        solve(problem(), A100, cut_short)
    assert info.value.feasible_count > 0 and "time_limit_s" in str(info.value)


def test_absurd_work_is_rejected_and_the_largest_allowed_problem_ranks_by_time() -> None:
    with pytest.raises(InvalidRequestError) as info:  # built by keyword: the API's error
        AttentionProblem(batch=65536, heads=1024, seq_len=1 << 24, head_dim=128)
    assert "2^50" in str(info.value)
    huge = AttentionProblem(batch=4, heads=1, seq_len=1 << 24, head_dim=128)
    cpsat = solve(huge, A100)
    exhaustive = solve(huge, A100, SolveOptions(engine="exhaustive"))
    times = [c.predicted_time_us for c in cpsat.candidates]
    assert times == sorted(times) and len(times) == 5
    assert [c.model_dump(exclude={"reasons"}) for c in cpsat.candidates] == [
        c.model_dump(exclude={"reasons"}) for c in exhaustive.candidates
    ]


def test_min_blocks_beyond_the_hardware_limit_names_the_limit() -> None:
    with pytest.raises(InvalidRequestError) as info:
        solve(problem(), A100, SolveOptions(min_blocks_per_sm=33))
    assert info.value.violations[0].field == "min_blocks_per_sm" and "32" in str(info.value)


@pytest.mark.parametrize(
    ("kernel", "phase"),
    [
        ("fa2", "backward"),
        ("triton", "backward"),
        ("triton", "forward"),
        ("fa2", "forward"),
        ("flashinfer", "forward"),
    ],
)
@pytest.mark.parametrize("hardware", ["a100-80gb", "h100-sxm", "l4"])
def test_checking_configurations_together_finds_what_checking_each_finds(
    kernel: str, phase: str, hardware: str
) -> None:
    """The validator states the rules once over several configurations (`check_configs`):
    what it finds for each is what checking it alone finds, for feasible configurations,
    ones that break a limit (or the backward's inner choice), and ones outside the domains."""
    problem = AttentionProblem(
        batch=4, heads=16, seq_len=4096, head_dim=64, causal=True, phase=phase
    )
    spec = get_hardware(hardware)
    options = SolveOptions(kernel=kernel)
    table = prepare(problem, spec, options)
    rng = np.random.default_rng(7)
    infeasible = np.flatnonzero(~table.feasible)
    assert len(infeasible), "every configuration is feasible: nothing to refuse"
    picked = [*np.flatnonzero(table.feasible)[:3], *rng.choice(infeasible, 12)]
    configs = [table.cfg.config(int(i)) for i in picked]
    first = table.params[0].name
    configs.append(Config.of(**{**configs[0].as_dict(), first: -1}))  # outside its domain
    request = (table.family, spec, problem, options)
    together = check_configs(*request, configs)
    assert together == [check_config(*request, c) for c in configs]
    assert together[:3] == [[], [], []] and together[-1][0].startswith("domain:")
    assert all(together[3:-1]), "an infeasible configuration passed the check"
