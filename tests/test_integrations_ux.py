"""Issue 24, items 3 and 4 (problems 2 and 4): `--format triton` means the triton family, and
the Triton prune hook checks its arguments when it is built, not at the autotuner's first
call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tilesolve.client import triton as ts
from tilesolve.solver import AttentionProblem, InvalidRequestError

from command_line import run

SHAPE = ["--head-dim", "128", "--seq-len", "4096", "--batch", "4", "--heads", "32", "--causal"]
PROBLEM = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128, causal=True)


class _Config:
    """triton.Config's documented attributes."""

    def __init__(self, kwargs: dict[str, int], num_warps: int = 4, num_stages: int = 3):
        self.kwargs, self.num_warps, self.num_stages = kwargs, num_warps, num_stages


class _FakeTriton:
    Config = _Config


def _generated_configs(source: str) -> list[tuple[int, int, int, int]]:
    """The tiles of `--format triton`'s module, run against a stand-in for triton.Config."""
    namespace: dict[str, Any] = {}
    exec(source.replace("import triton", ""), {"triton": _FakeTriton}, namespace)
    return [
        (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages)
        for c in namespace["configs"]
    ]


def test_format_triton_uses_the_triton_family(capsys: pytest.CaptureFixture[str]) -> None:
    """On an sm89 device whose default family is fa2, the configurations are triton's."""
    code, text, err = run(capsys, "solve", "--hardware", "4090", *SHAPE, "--format", "triton")
    assert code == 0, err
    assert "the triton family on rtx-4090" in text
    argv = ["solve", "--hardware", "4090", *SHAPE, "--kernel", "triton", "--json"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    expected = [
        (c["block_m"], c["block_n"], c["num_warps"], c["num_stages"])
        for c in json.loads(out)["candidates"]
    ]
    assert _generated_configs(text) == expected


def test_format_triton_refuses_another_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["solve", "--hardware", "4090", *SHAPE, "--format", "triton", "--kernel", "fa2"]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert "error: format:" in err and "--kernel fa2" in err and "triton" in err


def test_prune_hook_takes_a_fixed_problem() -> None:
    prune = ts.early_config_prune_for("h200", problem=PROBLEM, top_k=2)
    assert "fixed problem" in prune.source and "fixed problem" in repr(prune)
    configs = [_Config({"BLOCK_M": m, "BLOCK_N": n}) for m in (64, 128) for n in (32, 64)]
    kept = prune(configs, {})
    assert len(kept) == 2 and prune.last_problem == PROBLEM


def test_prune_hook_says_it_reads_the_call() -> None:
    def shape(named_args: Any, kwargs: Any) -> AttentionProblem:
        return PROBLEM

    prune = ts.early_config_prune_for("h200", problem=shape)
    assert "read at each call" in prune.source and "shape" in prune.source


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"problem": 4096}, TypeError, "AttentionProblem (one fixed shape) or a callable"),
        ({"problem": PROBLEM, "top_k": 0}, ValueError, "top_k"),
        ({"problem": PROBLEM, "top_k": "3"}, ValueError, "top_k"),
        ({"problem": PROBLEM, "kernel": "fa9"}, ValueError, "kernel must be one of"),
        ({"problem": PROBLEM, "names": ("BM", "BN")}, TypeError, "MetaNames"),
    ],
)
def test_prune_hook_checks_its_arguments_when_built(
    kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        ts.early_config_prune_for("h200", **kwargs)


def test_prune_hook_checks_the_device_when_built() -> None:
    with pytest.raises(InvalidRequestError):
        ts.early_config_prune_for("h2000", problem=PROBLEM)
