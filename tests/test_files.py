"""The CLI's files (issue 22): hostile inputs are refused with exit 2 naming the file, the line
and the limit; every output replaces its target atomically, so a write error or a SIGKILL
leaves the old file whole and no temporary behind.

Before issue 22: a grid of 100,000 nested arrays and a CSV cell over 131,072 characters exited
4 ("internal error"); `calibrate -o` and `solve --plot` wrote in place (a SIGKILL left a 0-byte
file, a full disk a truncated profile); `table --output` left its temporary on a write error.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tilesolve.client import files, measurements
from tilesolve.client.files import nesting_depth_error, replace_file

from command_line import run

SYNTHETIC_CSV = Path(__file__).resolve().parents[1] / "benchmarks/data/synthetic_h200.csv"
OLD = b"the previous version of this file\n"
GRID = 'hardware = ["a100"]\nhead_dim = [64]\ncausal = [false]\nseq_len = [1024]\n'


def _leftovers(folder: Path, keep: set[str]) -> list[str]:
    """Files in `folder` other than `keep` (a temporary left behind would be one)."""
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


# ---- hostile inputs --------------------------------------------------------------------------


@pytest.mark.parametrize(("suffix", "line"), [(".toml", 2), (".json", 3)])
def test_a_grid_nested_100000_deep_is_refused_naming_the_line(
    suffix: str, line: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = tmp_path / f"grid{suffix}"
    deep = "[" * 100_000 + "]" * 100_000  # on the file's `line`
    if suffix == ".toml":
        grid.write_text(f'hardware = ["a100"]\nhead_dim = {deep}\n')
    else:
        grid.write_text('{\n"hardware": ["a100"],\n"head_dim": ' + deep + "\n}\n")
    code, out, err = run(capsys, "table", "--grid", str(grid))
    assert code == 2 and out == ""
    assert f"{grid}:{line}" in err and "nested more than 64 deep" in err, err


def test_nesting_counts_brackets_outside_strings_and_comments() -> None:
    toml = textwrap.dedent(
        '''\
        a = "[[[[ \\" [[[["
        b = '[[[['
        # [[[[[[
        c = """
        [[[[ \\""" [[[[
        """
        d = [[1], [2]]
        e = [[[3]]]
        '''
    )
    assert nesting_depth_error(toml, "toml", 2) == (8, 3)
    assert nesting_depth_error(toml, "toml", 3) is None
    assert nesting_depth_error('{"a": "[[[\\"[[", "b": [[1]]}', "json", 2) == (1, 3)


def test_a_calibrate_csv_cell_over_the_limit_is_refused_naming_the_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = SYNTHETIC_CSV.read_text().splitlines()
    csv_file = tmp_path / "m.csv"
    huge = lines[4].split(",")
    huge[0] = "h" * 131_073
    lines[4] = ",".join(huge)
    csv_file.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "calibrate", str(csv_file), "--hardware", "h200", "-o",
                         str(tmp_path / "p.json"))  # fmt: skip
    assert code == 2 and out == ""
    assert f"{csv_file} row 5" in err and "longer than 4096 characters" in err, err
    assert not (tmp_path / "p.json").exists()


def test_a_shapes_csv_cell_over_the_limit_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "grid.toml").write_text(GRID)
    shapes = tmp_path / "mix.csv"
    shapes.write_text("head_dim,seq_len,count\n64,512,1\n" + "9" * 200_000 + ",1,1\n")
    code, _, err = run(capsys, "portfolio", "--shapes", str(shapes), "--hardware", "a100",
                       "--max-configs", "1")  # fmt: skip
    assert code == 2 and f"{shapes}:3" in err and "longer than 4096 characters" in err, err


def test_more_measurement_rows_than_the_limit_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row limit (100,000; 50 here, so the test is quick) is named with the row past it:
    the file is not read on (before: 10^6 rows took 805 MiB)."""
    monkeypatch.setattr(measurements, "MAX_ROWS", 50)
    code, _, err = run(capsys, "calibrate", str(SYNTHETIC_CSV), "--hardware", "h200",
                       "-o", str(tmp_path / "p.json"))  # fmt: skip
    assert code == 2 and f"{SYNTHETIC_CSV} row 52" in err and "more than 50 rows" in err, err


def test_a_profile_nested_too_deep_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "p.json"
    profile.write_text('{"hardware":\n' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run(capsys, "solve", "--hardware", "h200", "--seq-len", "1024",
                       "--head-dim", "64", "--profile", str(profile))  # fmt: skip
    assert code == 2 and f"{profile}:2" in err and "nested more than 64" in err, err
    server = subprocess.run(
        [sys.executable, "-m", "tilesolve.server.main", "--profile", str(profile)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert server.returncode == 2 and "nested too deep" in server.stderr, server.stderr


def test_a_file_over_its_size_limit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID + "# " + "x" * (1024 * 1024) + "\n")
    code, _, err = run(capsys, "table", "--grid", str(grid))
    assert code == 2 and "is over 1 MiB, the limit for a grid file" in err, err


# ---- atomic outputs --------------------------------------------------------------------------


def test_a_new_output_has_the_umasks_mode_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.json"
        replace_file(fresh, "{}\n")
        kept = tmp_path / "kept.json"
        kept.write_bytes(OLD)
        kept.chmod(0o640)
        replace_file(kept, b"new\n")
    finally:
        os.umask(previous)
    assert fresh.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
    assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_bytes() == b"new\n"
    assert _leftovers(tmp_path, {"fresh.json", "kept.json"}) == []


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named temporary"])
def test_a_failing_writer_leaves_the_old_file_and_no_temporary(
    unnamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not unnamed:
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    target = tmp_path / "profile.json"
    target.write_bytes(OLD)

    def half_then_full_disk(handle: object) -> None:
        handle.write(b'{"half": ')  # type: ignore[attr-defined]
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        replace_file(target, half_then_full_disk)
    assert target.read_bytes() == OLD
    assert _leftovers(tmp_path, {"profile.json"}) == []
    assert files.new_file_mode(target) == target.stat().st_mode & 0o777


_SLOW_WRITER = """
import sys, time
from tilesolve.client.files import replace_file
def slow(handle):
    handle.write(b"x" * 65536)
    handle.flush()
    print("writing", flush=True)
    time.sleep(60)
replace_file(sys.argv[1], slow)
"""


def test_a_sigkill_during_a_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "table.h"
    target.write_bytes(OLD)
    writer = subprocess.Popen(
        [sys.executable, "-c", _SLOW_WRITER, str(target)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.wait(timeout=30)
    assert target.read_bytes() == OLD
    assert _leftovers(tmp_path, {"table.h"}) == []


KILLS = 6  # SIGKILLs per command, spread over the second half of a whole run's time


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("profile.json", ["calibrate", str(SYNTHETIC_CSV), "--hardware", "h200", "-o"]),
        ("heatmap.png", ["solve", "--hardware", "a100", "--seq-len", "1024", "--head-dim", "64",
                         "--plot"]),
    ],
    ids=["calibrate -o", "solve --plot"],
)  # fmt: skip
def test_the_cli_killed_at_any_moment_leaves_the_old_output_or_the_whole_new_one(
    name: str, args: list[str], tmp_path: Path
) -> None:
    """The probe's failure, as it found it: `calibrate -o` and `solve --plot` SIGKILLed at
    moments spread over the end of their run (before issue 22: a 0-byte profile in 13 of 15
    runs, a 0-byte PNG in 15 of 15). The target is always the old file or the whole new one
    (the same bytes as a run left alone), and no temporary is left."""
    command = [sys.executable, "-m", "tilesolve.client.cli", *args, name]
    started = time.monotonic()
    subprocess.run(command, cwd=tmp_path, capture_output=True, check=True, timeout=300)
    whole_s = time.monotonic() - started
    new = (tmp_path / name).read_bytes()
    seen: dict[str, int] = {"old": 0, "new": 0}
    for kill in range(KILLS):
        (tmp_path / name).write_bytes(OLD)
        killed = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(whole_s * (0.5 + 0.6 * kill / KILLS))
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        content = (tmp_path / name).read_bytes()
        assert content in (OLD, new), f"kill {kill}: {len(content)} bytes"
        seen["old" if content == OLD else "new"] += 1
        assert _leftovers(tmp_path, {name}) == []
    print(f"\nFIGURE SIGKILL of {args[0]} x {KILLS} (a run {whole_s:.2f} s): {seen}")


def _limited(max_bytes: int) -> None:
    """In the child: files may grow to `max_bytes` (a write past it fails with EFBIG; Python
    ignores SIGXFSZ)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))


def _cli_with_a_size_limit(
    args: list[str], max_bytes: int, cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tilesolve.client.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
        preexec_fn=lambda: _limited(max_bytes),
    )


SOLVE = ["solve", "--hardware", "a100", "--seq-len", "1024", "--head-dim", "64"]
MEMORY = ["memory", "--seq-len", "4096", "--tile", "128", "--head-dim", "128"]


@pytest.mark.parametrize(
    ("name", "args", "limit"),
    [
        ("tiles.json", ["table", "--grid", "grid.toml", "--output", "tiles.json"], 600),
        ("tiles.h", ["table", "--grid", "grid.toml", "--output", "tiles.h"], 600),
        ("tiles.py", ["table", "--grid", "grid.toml", "--output", "tiles.py"], 600),
        ("grid.stamp", ["table", "--grid", "grid.toml", "--stamp", "grid.stamp"], 100),
        ("profile.json", ["calibrate", str(SYNTHETIC_CSV), "--hardware", "h200", "-o",
                          "profile.json"], 300),
        ("heatmap.png", [*SOLVE, "--plot", "heatmap.png"], 4096),
        ("memory.svg", [*MEMORY, "--plot", "memory.svg"], 4096),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)  # fmt: skip
def test_every_output_survives_a_write_error(
    name: str, args: list[str], limit: int, tmp_path: Path
) -> None:
    """The write fails part way (the file size limit: a full disk's error): exit 2 naming the
    output, the old file whole, no temporary left."""
    (tmp_path / "grid.toml").write_text(GRID)
    target = tmp_path / name
    target.write_bytes(OLD)
    result = _cli_with_a_size_limit(args, limit, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "cannot write" in result.stderr and name in result.stderr, result.stderr
    assert target.read_bytes() == OLD
    assert _leftovers(tmp_path, {"grid.toml", name}) == []
    again = _cli_with_a_size_limit(args, 64 * 1024 * 1024, tmp_path)  # room enough
    assert again.returncode == 0, again.stderr
    assert target.read_bytes() != OLD
    assert _leftovers(tmp_path, {"grid.toml", name}) == []
