"""benchmarks/solve_instructions.py: every latency block can be counted, and the run that
callgrind counts solves the block's problems (without valgrind here; with it where installed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "solve_instructions.py"
LATENCY_BLOCKS = ("forward", "ascend", "backward", "decode", "fa4", "amd", "amd-triton", "flex")


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, cwd=ROOT
    )


def test_every_latency_block_is_a_choice() -> None:
    done = _script("--help")
    assert done.returncode == 0, done.stderr
    for block in (*LATENCY_BLOCKS, "fa3-backward"):
        assert block in done.stdout


def test_the_counted_run_solves_the_problems() -> None:
    done = _script("fa3-backward", "--solve", "1")
    assert done.returncode == 0, done.stderr


def test_an_unknown_block_and_a_bad_sample_are_refused() -> None:
    unknown = _script("fa5")
    assert unknown.returncode == 2 and "invalid choice: 'fa5'" in unknown.stderr
    sample = _script("fa4", "--sample", "0")
    assert sample.returncode == 2 and "--sample must be at least 1" in sample.stderr


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_sample_count_is_positive() -> None:
    done = _script("fa4", "--sample", "1", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["problems"] == 1 and doc["total"] > doc["warm_up"] > 0
    assert doc["per_solve"] == doc["total"] - doc["warm_up"]
