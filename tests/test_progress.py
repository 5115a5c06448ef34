"""Issue 24, item 2 (problem 10): `table`, `portfolio` and `calibrate` draw a progress bar on a
terminal (a pseudo-terminal here), and nothing in a pipe or with --quiet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tilesolve.solver.apps.calibrate import FIT_ITERATIONS

from pty_run import run_in_pty

ROOT = Path(__file__).resolve().parent.parent
# A calibration: three starts of the fit, then four reports (before and after, on both halves).
CALIBRATION_STEPS = 3 * FIT_ITERATIONS + 4
LABELS = ["table cells evaluated", "shapes evaluated", "calibration steps"]

GRID = """\
hardware = ["a100", "h100"]
head_dim = [64, 128]
seq_len = [512, 1024, 2048, 4096]
batch = 4
heads = 16
"""
SHAPES = """\
head_dim,seq_len,batch,heads,causal,count
64,512,8,16,false,50
128,4096,4,32,true,20
64,2048,4,16,false,30
"""


@pytest.fixture
def commands(tmp_path: Path) -> dict[str, list[str]]:
    (tmp_path / "grid.toml").write_text(GRID)
    (tmp_path / "mix.csv").write_text(SHAPES)
    return {
        "table cells evaluated": [
            "table",
            "--grid",
            str(tmp_path / "grid.toml"),
            "--output",
            str(tmp_path / "t.h"),
        ],
        "shapes evaluated": [
            *("portfolio", "--hardware", "a100", "--shapes", str(tmp_path / "mix.csv")),
            *("--max-configs", "2"),
        ],
        "calibration steps": [
            *("calibrate", str(ROOT / "benchmarks/data/synthetic_h200.csv")),
            *("--hardware", "h200", "-o", str(tmp_path / "profile.json")),
        ],
    }


@pytest.mark.parametrize("label", LABELS)
def test_a_terminal_shows_progress(
    commands: dict[str, list[str]], tmp_path: Path, label: str
) -> None:
    shown = run_in_pty(commands[label], tmp_path / "cache")
    bar = next((line for line in shown.split("\r") if label in line and "━" in line), None)
    assert bar is not None, shown
    total = {
        "table cells evaluated": "16/16",
        "shapes evaluated": "3/3",
        "calibration steps": f"{CALIBRATION_STEPS}/{CALIBRATION_STEPS}",
    }[label]
    assert total in shown
    quiet = run_in_pty([*commands[label], "--quiet"], tmp_path / "cache")
    assert label not in quiet and "━" not in quiet


@pytest.mark.parametrize("label", LABELS)
def test_a_pipe_shows_none(commands: dict[str, list[str]], label: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tilesolve.client.cli", *commands[label]],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "━" not in done.stderr and "\x1b" not in done.stderr
    assert label not in done.stderr


def test_a_benchmark_script_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """The scripts share the CLI's bar (fa2_agreement.py here: 96 reference rows): on a
    terminal's stderr, never in a pipe, where stdout is what it always was."""
    script = [str(ROOT / "benchmarks/fa2_agreement.py")]
    shown = run_in_pty([], tmp_path, program=script)
    assert "reference rows" in shown and "━" in shown and "96/96" in shown
    quiet = run_in_pty(["--quiet"], tmp_path, program=script)
    assert "reference rows" not in quiet and "━" not in quiet
    piped = subprocess.run(
        [sys.executable, *script], capture_output=True, text=True, timeout=300, check=True
    )
    assert piped.stderr == "" and piped.stdout.startswith("rows 96: top-1 ")
    assert piped.stdout.strip() in quiet
