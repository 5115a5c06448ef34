"""Property tests: any valid problem gets an answer or a named refusal, never a crash, and the
answer obeys the model's invariants."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware, hardware_names, solve
from tilesolve.solver.errors import InvalidRequestError

CUDA_NAMES = [n for n in hardware_names() if get_hardware(n).arch == "cuda"]


@st.composite
def requests(draw: st.DrawFn) -> tuple[AttentionProblem, str, SolveOptions]:
    heads = draw(st.sampled_from([1, 2, 3, 8, 12, 64]))
    kv_heads = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    problem = AttentionProblem(
        batch=draw(st.integers(1, 64)),
        heads=heads,
        kv_heads=kv_heads,
        seq_len=draw(st.one_of(st.integers(1, 300), st.integers(1, 200_000))),
        seq_len_kv=draw(st.one_of(st.none(), st.integers(1, 100_000))),
        head_dim=draw(st.sampled_from([8, 16, 24, 32, 48, 64, 72, 96, 100, 128, 200, 256])),
        dtype=draw(st.sampled_from(["fp16", "fp16", "fp16", "bf16", "bf16", "fp8"])),
        causal=draw(st.booleans()),
        dropout=draw(st.sampled_from([0.0, 0.1])),
    )
    options = SolveOptions(
        kernel=draw(st.sampled_from([None, "triton"])),
        top_k=draw(st.integers(1, 6)),
        engine="exhaustive",
        require_divisible=draw(st.sampled_from([False, False, False, True])),
        max_smem=draw(st.sampled_from([None, None, None, 0, 16_384, 65_536, 300_000])),
    )
    return problem, draw(st.sampled_from(CUDA_NAMES)), options


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI stays reproducible
    suppress_health_check=[HealthCheck.too_slow],
)
@given(requests())
def test_every_valid_request_is_answered_or_refused_by_name(
    request: tuple[AttentionProblem, str, SolveOptions],
) -> None:
    problem, hardware, options = request
    try:
        answer = solve(problem, hardware, options)
    except InvalidRequestError as refusal:
        # A refusal names a field of the request and says what is allowed.
        fields = {"kernel", "dtype", "head_dim", "head_dim_v", "phase", "min_blocks_per_sm"}
        fields.add("dropout")  # fa3, Hopper's default family, has no dropout
        assert refusal.violations and {v.field for v in refusal.violations} <= fields
        return
    if answer.status == "infeasible":
        assert answer.infeasibility is not None and answer.infeasibility.conflicting_constraints
        assert answer.feasible_count == 0
        return
    peak = get_hardware(hardware).throughput.tensor_fp16_dense_tflops  # type: ignore[union-attr]
    if problem.dtype == "fp8":
        peak *= 2
    # The objective is the time in whole nanoseconds; equal ones are ordered by the tie-break.
    times_ns = [round(c.predicted_time_us * 1000) for c in answer.candidates]
    assert times_ns == sorted(times_ns)
    for c in answer.candidates:
        assert math.isfinite(c.predicted_time_us) and c.predicted_time_us > 0
        assert 0 < c.predicted_tflops <= peak
        assert 0.0 <= c.overlap <= 1.0 and 0.0 < c.tail_efficiency <= 1.0
        assert 0.0 <= c.padding_waste < 1.0
        assert c.blocks_per_sm >= 1 and c.reasons
        if options.max_smem is not None:
            assert c.smem_bytes <= options.max_smem
        if options.require_divisible:
            assert problem.seq_len % c.block_m == 0
            assert problem.seq_len_kv_eff % c.block_n == 0
