"""Issue 24, item 6 (problem 8): names that suggest the right one, case-insensitive dtype and
kernel names, the Python API's InvalidRequestError, and integers that must be integers."""

from __future__ import annotations

import pytest

from tilesolve.solver import AttentionProblem, InvalidRequestError, SolveOptions, get_hardware

from command_line import run

SHAPE = ["--head-dim", "64", "--seq-len", "1024"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["solve", "--hardware", "a100-80", *SHAPE], "(did you mean a100-80gb?)"),
        (["solve", "--hardware", "h100-sx", *SHAPE], "(did you mean h100-sxm?)"),
        (
            ["solve", "--hardware", "a100", *SHAPE, "--kernel", "flashinfr"],
            "did you mean flashinfer?",
        ),
        (["solve", "--hardware", "a100", *SHAPE, "--dtype", "fp61"], "did you mean fp16?"),
        (["slove", "--hardware", "a100", *SHAPE], "did you mean solve?"),
        (["hardware", "shw", "h100"], "did you mean show?"),
        (
            ["solve", "--hardwre", "a100", *SHAPE],
            "unknown option --hardwre (did you mean --hardware?)",
        ),
        (["solve", "--hardware", "a100", *SHAPE, "--top-kk=3"], "did you mean --top-k?"),
    ],
)
def test_a_mistyped_name_gets_a_suggestion(
    capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert words in err, err
    assert "Traceback" not in err


def test_unknown_hardware_lists_the_aliases(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "solve", "--hardware", "a100-80", *SHAPE)
    assert code == 2
    assert "a100-80gb (aliases a100, " in err and "h100-sxm (aliases h100, " in err


@pytest.mark.parametrize("flags", [["--dtype", "FP16"], ["--kernel", "FA2"], ["--dtype", "Bf16"]])
def test_dtype_and_kernel_names_in_any_case(
    capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    code, lower, _ = run(
        capsys, "solve", "--hardware", "a100", *SHAPE, *(f.lower() for f in flags), "--json"
    )
    assert code == 0
    code, given, err = run(capsys, "solve", "--hardware", "a100", *SHAPE, *flags, "--json")
    assert code == 0, err
    strip = [line for line in given.splitlines() if "solve_ms" not in line]
    assert strip == [line for line in lower.splitlines() if "solve_ms" not in line]


def test_a_kernel_name_that_is_no_name_says_what_a_name_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "solve", "--hardware", "a100", *SHAPE, "--kernel", "fa 2")
    assert code == 2
    assert "must be a name of 1 to 32 letters" in err and "[a-z]" not in err


@pytest.mark.parametrize("value", ["4096.0", "4e3", "4096.5"])
def test_integers_must_be_integers(capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, _, err = run(
        capsys, "solve", "--hardware", "a100", "--head-dim", "64", "--seq-len", value
    )
    assert code == 2
    assert "error: seq_len: must be an integer" in err


def test_python_api_raises_invalid_request_error_with_violations() -> None:
    with pytest.raises(InvalidRequestError) as info:
        AttentionProblem(seq_len=0, head_dim=64)
    assert [v.field for v in info.value.violations] == ["seq_len"]
    assert "from 1 to" in info.value.violations[0].description
    with pytest.raises(InvalidRequestError) as info:
        AttentionProblem(seq_len=4096.0, head_dim=64)
    assert info.value.violations[0].field == "seq_len"
    with pytest.raises(InvalidRequestError) as info:
        SolveOptions(top_k=0, engine="fast")
    assert {v.field for v in info.value.violations} == {"top_k", "engine"}


def test_python_api_names_in_any_case() -> None:
    assert AttentionProblem(seq_len=8, head_dim=64, dtype="BF16").dtype.value == "bf16"
    assert SolveOptions(kernel="Triton").kernel == "triton"
    assert get_hardware("A100").name == "a100-80gb"
