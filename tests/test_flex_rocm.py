"""The flex family's forward template on rocm devices (`families/flex/rocm.py`): the AMD knobs as
decisions, the block mask's legality and iterations on the shared Triton-on-ROCm cost, what
kernel_options can pin there, and the phases without a ROCm model."""

from __future__ import annotations

import json

import pytest

from tests.command_line import run
from tilesolve.solver import AttentionProblem, SolveOptions, solve
from tilesolve.solver.errors import InvalidRequestError

PROBLEM = AttentionProblem(batch=2, heads=16, seq_len=8192, head_dim=128)


def _solve(problem: AttentionProblem = PROBLEM, hardware: str = "mi300x", **options: object):  # type: ignore[no-untyped-def]
    return solve(problem, hardware, SolveOptions(kernel="flex", **options))  # type: ignore[arg-type]


@pytest.mark.parametrize("hardware", ["mi300x", "mi355x"])
def test_flex_ranks_rocm_configurations_with_the_knobs(hardware: str) -> None:
    answer = _solve(hardware=hardware, top_k=3)
    assert answer.candidates
    for c in answer.candidates:
        assert {"waves_per_eu", "matrix_instr_nonkdim", "kpack"} <= set(c.parameters)
        # the block mask's default BLOCK_SIZE 128 is a multiple of both tiles
        assert 128 % c.parameters["block_m"] == 0 and 128 % c.parameters["block_n"] == 0
    assert any("kernel_options" in note for note in answer.notes)


def test_a_window_skips_blocks_and_is_faster() -> None:
    full = _solve(top_k=1).candidates[0]
    windowed = _solve(window=1024, top_k=1).candidates[0]
    assert windowed.predicted_time_us < 0.5 * full.predicted_time_us


def test_a_pinned_tile_must_divide_the_block_size() -> None:
    answer = _solve(block_m=128, sparse_block_size=64)
    assert not answer.candidates
    assert "sparse_block" in {row.constraint for row in answer.funnel if row.removed}


def test_fp8_and_dropout_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _solve(AttentionProblem(seq_len=1024, head_dim=128, dtype="fp8"))
    assert caught.value.violations[0].field == "dtype"


def test_fp32_is_refused_on_rocm_and_answered_by_the_same_registration_on_cuda() -> None:
    fp32 = AttentionProblem(seq_len=1024, head_dim=128, dtype="fp32")
    with pytest.raises(InvalidRequestError) as caught:
        _solve(fp32)
    (violation,) = caught.value.violations
    assert violation.field == "dtype" and "rocm" in violation.description
    # the registration hands the dtype rule to the device's kernel: fp32 runs on CUDA
    assert _solve(fp32, hardware="a100", top_k=1).candidates


@pytest.mark.parametrize("phase", ["backward", "decode"])
def test_backward_and_decode_are_refused_naming_the_forward(phase: str) -> None:
    seq_len = 1 if phase == "decode" else 1024
    other = AttentionProblem(seq_len=seq_len, seq_len_kv=4096, head_dim=128, phase=phase)
    with pytest.raises(InvalidRequestError) as caught:
        _solve(other)
    (violation,) = caught.value.violations
    assert violation.field == "kernel" and "--phase forward" in violation.description


def test_format_flex_prints_the_keys_kernel_options_can_pin(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys, "solve", "--hardware", "mi355x", "--kernel", "flex", "--head-dim", "128",
        "--seq-len", "4096", "--format", "flex",
    )  # fmt: skip
    assert code == 0
    assert set(json.loads(out)) == {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"}


def test_both_engines_agree() -> None:
    small = AttentionProblem(batch=1, heads=8, seq_len=2048, head_dim=64, causal=True)
    cpsat = _solve(small, "mi355x", top_k=5)
    exhaustive = _solve(small, "mi355x", top_k=5, engine="exhaustive")
    assert [c.parameters for c in cpsat.candidates] == [c.parameters for c in exhaustive.candidates]
