"""Issue 24, item 1: text answers fit the terminal (`$COLUMNS`, else 80 columns in a pipe),
the family's extra parameters sit on their own line, `--wide` prints the full table, colour
only on a terminal, and `--json` never changes with the width."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from command_line import run
from pty_run import run_in_pty

# Answers across families and phases, as the README and docs show them.
ANSWERS = {
    "fa2 forward": ["solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"],
    "fa3 decode paged": [
        *("solve", "--hardware", "h100", "--phase", "decode", "--seq-len", "1"),
        *("--seq-len-kv", "32768", "--heads", "32", "--kv-heads", "8", "--head-dim", "128"),
        *("--page-size", "auto", "--top-k", "3"),
    ],
    "both passes": [
        *("solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"),
        *("--phase", "both", "--batch", "4", "--heads", "16", "--causal"),
    ],
    "triton backward": [
        *("solve", "--hardware", "h100", "--kernel", "triton", "--phase", "backward"),
        *("--head-dim", "64", "--seq-len", "2048", "--batch", "2", "--heads", "8"),
    ],
    "flashinfer decode": [
        *("solve", "--hardware", "a100", "--kernel", "flashinfer", "--phase", "decode"),
        *("--seq-len", "1", "--seq-len-kv", "8192", "--heads", "32", "--kv-heads", "8"),
        *("--head-dim", "128", "--batch", "8"),
    ],
    "ascend forward": [
        *("solve", "--hardware", "ascend-910b", "--head-dim", "128", "--seq-len", "4096"),
    ],
    "infeasible": [
        *("solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "2050"),
        "--require-divisible",
    ],
    "explain": [
        *("solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"),
        "--explain",
    ],
    "hardware list": ["hardware", "list"],
    "hardware show": ["hardware", "show", "h100"],
    "memory": [
        *("memory", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"),
        *("--tile", "128"),
    ],
    "memory sweep": ["memory", "--sweep", "--head-dim", "128"],
    "occupancy": [
        *("occupancy", "--hardware", "a100", "--threads", "128", "--regs", "96"),
        *("--smem", "49152"),
    ],
}


@pytest.mark.parametrize("columns", [100, 80])
@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_answers_fit_the_width(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    columns: int,
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run(capsys, *ANSWERS[name])
    assert code in (0, 1), err
    widest = max(out.splitlines(), key=len)
    assert len(widest) <= columns, widest
    assert "\x1b[" not in out  # a pipe gets no colour


def test_a_pipe_without_columns_gets_80(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, *ANSWERS["fa3 decode paged"])
    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 80


def _decode_table(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: str, *flags: str
) -> tuple[list[str], int]:
    """The paged decode answer's lines at `columns`, and the index of its table's header."""
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = run(capsys, *ANSWERS["fa3 decode paged"], *flags)
    assert code == 0
    lines = out.splitlines()
    return lines, next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "tile"])


def test_extra_parameters_have_their_own_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines, header = _decode_table(capsys, monkeypatch, "100")
    first = lines[header + 2]
    rank, tile, warps, stages = first.split()[:4]
    assert rank == "1" and re.fullmatch(r"\d+x\d+", tile), first
    assert re.fullmatch(r"w\d+", warps) and re.fullmatch(r"s\d+", stages), first
    assert "num_splits" not in first
    under = lines[header + 3]
    assert under.startswith("      ") and re.search(r"num_splits=\d+", under), under
    assert re.search(r"page_size=\d+", under), under
    # the reason is a whole readable line, not ten characters a line
    reason = next(line for line in lines[header + 3 :] if "modelled time" in line)
    assert len(reason.strip()) > 40


def test_wide_prints_one_line_per_candidate(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines, header = _decode_table(capsys, monkeypatch, "80", "--wide")
    assert "top reason" in lines[header] and "warps" in lines[header]
    rows = lines[header + 2 : header + 5]
    assert [row.split()[0] for row in rows] == ["1", "2", "3"]
    assert all("num_splits=16" in row and "bound by" in row for row in rows)
    assert max(len(line) for line in rows) > 150


def test_json_is_the_same_at_every_width(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = set()
    for columns in ("40", "80", "300"):
        monkeypatch.setenv("COLUMNS", columns)
        code, out, _ = run(capsys, *ANSWERS["fa3 decode paged"], "--json")
        assert code == 0
        # everything but the measured time is byte-identical
        documents.add(re.sub(r'"solve_ms": [0-9.e+-]+', '"solve_ms": 0', out))
    assert len(documents) == 1


def test_tables_are_never_cut_in_a_narrow_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    code, out, _ = run(capsys, *ANSWERS["memory sweep"])
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("1024")]
    assert [row[1] for row in rows] == ["64", "128", "256"]


def test_colour_only_on_a_terminal(tmp_path: Path) -> None:
    """On a pseudo-terminal the table header is bold; the same command in a pipe has none."""
    argv = ["hardware", "list"]
    shown = run_in_pty(argv, tmp_path)
    assert "\x1b[1m" in shown and "h100-sxm" in shown
