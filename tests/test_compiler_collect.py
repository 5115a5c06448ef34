"""benchmarks/compiler/collect.py's bookkeeping, without compiling (no Triton needed): how it
counts a resumed, limited run, and that sorting the data keeps the rows an earlier plan drew
(the plan's `top5` stratum follows the model of its day, so the committed data holds rows
today's plan no longer draws; they are still what the compiler allocated)."""

from __future__ import annotations

import csv
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks/compiler/collect.py"
DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
sys.path.insert(0, str(ROOT / "benchmarks/compiler"))

from plan import build_plan  # noqa: E402


def _collect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _write(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def sm80_plan() -> list[str]:
    return [str(r.as_dict()["key"]) for r in build_plan() if r.target == "sm80"]


def test_a_limited_resumed_run_counts_what_is_there_and_what_is_left(
    tmp_path: Path, sm80_plan: list[str]
) -> None:
    columns, rows = _rows(DATA)
    sm80 = [r for r in rows if r["target"] == "sm80"]
    planned_here = [k for k in sm80_plan if k in {r["key"] for r in sm80}]
    dropped = set(planned_here[:2])  # two planned rows taken out of the file
    kept = [r for r in sm80 if r["key"] not in dropped]
    out = tmp_path / "partial.csv"
    _write(out, columns, kept)
    done = _collect("--out", str(out), "--targets", "sm80", "--limit", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    already = len(planned_here) - 2
    missing = len(sm80_plan) - already
    assert (
        f"plan: {len(sm80_plan)} rows, {already} already in {out}, 0 to compile "
        f"(--limit 0 of {missing} missing)"
    ) in done.stderr
    assert "done: 0 compiled (nothing to compile)" in done.stderr
    assert _rows(out)[1] == kept  # nothing appended, nothing rewritten


def test_sort_only_keeps_the_rows_an_earlier_plan_drew(
    tmp_path: Path, sm80_plan: list[str]
) -> None:
    columns, rows = _rows(DATA)
    sm80 = [r for r in rows if r["target"] == "sm80"]
    assert any(r["key"] not in set(sm80_plan) for r in sm80), "no earlier-plan rows to keep"
    shuffled = sm80[:]
    random.Random(0).shuffle(shuffled)
    out = tmp_path / "shuffled.csv"
    _write(out, columns, shuffled)
    done = _collect("--out", str(out), "--targets", "sm80", "--sort-only")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _rows(out)[1] == sorted(sm80, key=lambda r: r["key"])


def test_a_negative_limit_is_refused(tmp_path: Path) -> None:
    done = _collect("--out", str(tmp_path / "x.csv"), "--limit", "-1")
    assert done.returncode == 2
    assert "--limit must be at least 0" in done.stderr


def test_peak_live_rows_are_taken_within_the_shared_limit_first() -> None:
    """collect.py --peak-live measures the CUDA `ok` rows without a measurement, those that
    fit their target's shared memory first, the targets in the order given."""
    from collect import peak_live_pending
    from plan import SHARED_LIMIT_BYTES

    def row(key: str, target: str, shared: int, status: str = "ok", done: str = "") -> dict:
        return {"key": key, "target": target, "status": status, "shared_bytes": str(shared),
                "peak_live_assembler": done}  # fmt: skip

    over = SHARED_LIMIT_BYTES["sm86"] + 1
    rows = [
        row("a", "sm86", over),
        row("b", "sm80", 1024),
        row("c", "sm86", 1024),
        row("d", "sm86", 1024, status="timeout"),
        row("e", "sm86", 1024, done="ptxas 13.0.88"),
        row("f", "sm86", 1024, done="none: killed after 120 s"),
        row("g", "gfx942", 1024),
    ]
    pending = peak_live_pending({r["key"]: r for r in rows}, ["sm86", "sm80"])
    assert [r["key"] for r in pending] == ["c", "b", "a"]
    assert [r["key"] for r in peak_live_pending({r["key"]: r for r in rows}, [])] == [
        "b", "c", "a"
    ]  # fmt: skip


def test_read_peak_live_takes_the_largest_gpr_column() -> None:
    from toolchain import read_peak_live

    listing = """\
.text._k:                                   // |       |        |
        /*0000*/   MOV R1, c[0x0][0x28] ;   // |    2  |        |
        /*0010*/   IABS R5, c[0x0][0x1bc] ; // |  243  |        |    1   |
        /*0020*/   EXIT ;                    // |    7  |    1   |
"""
    assert read_peak_live(listing) == 243
    with pytest.raises(ValueError, match="no live-register counts"):
        read_peak_live("nvdisasm error : Cannot print life ranges")
