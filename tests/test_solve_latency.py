"""benchmarks/solve_latency.py runs to its end: every block (the main set, ascend, backward and
the blocks of their own) is built, solved by both engines, reported and put in the JSON
document. A sample run (`--sample 1`: each set's first problem) exercises every code path of the
script; two merges once broke it after its fourth block, which no test saw."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "solve_latency.py"
BLOCK_KEYS = (
    "ascend_group",
    "backward",
    "decode",
    "fa4",
    "amd",
    "amd_triton",
    "flex",
    "fa3_backward",
)
BLOCK_LABELS = ("decode", "fa4", "amd", "amd triton", "flex", "fa3-backward")


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, cwd=ROOT
    )


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return _script("--repeats", "1", "--sample", "1", "--quiet", *args)


def test_a_sample_run_puts_every_block_in_the_json_document() -> None:
    done = _run("--json")
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["sample"] == 1
    for section in (doc, *(doc[key] for key in BLOCK_KEYS)):
        assert section["agreement"] == {"agree": 1, "problems": 1}
        assert section["context"]["problems"] == 1
        assert section["summary"]["all"]["engines"]["cpsat"]["problems"] == 1


def test_a_sample_run_reports_every_block_and_says_it_is_a_sample() -> None:
    done = _run()
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert out.startswith("SAMPLE RUN: the first problem of every set (not a measurement)")
    assert "ascend group" in out
    assert "backward problems 1 (set " in out
    for label in BLOCK_LABELS:
        assert f"{label} block: problems 1 " in out
        assert f"target: {label} cold CP-SAT solve" in out


@pytest.mark.parametrize("value", ["0", "-3"])
def test_sample_must_be_positive(value: str) -> None:
    done = _script("--sample", value)
    assert done.returncode == 2
    assert "--sample must be at least 1" in done.stderr
