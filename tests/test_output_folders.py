"""Issue 24, item 4 (problem 3): outputs get the umask's permissions, and a missing output
folder is an error naming it unless `--mkdir` says to create it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from command_line import run

GRID = """\
hardware = ["a100"]
head_dim = [64]
seq_len = [1024]
batch = 4
heads = 16
"""


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_missing_output_folder_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    target = tmp_path / "absent" / "deeper" / "t.h"
    code, out, err = run(capsys, "table", "--grid", str(grid), "--output", str(target))
    assert code == 2 and out == ""
    assert f"error: output: the folder '{target.parent}' does not exist" in err
    assert "--mkdir" in err
    assert not (tmp_path / "absent").exists()


def test_mkdir_creates_it_with_the_umasks_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, umask_022: None
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    target = tmp_path / "absent" / "t.h"
    stamp = tmp_path / "other" / "t.h.stamp"
    argv = ["table", "--grid", str(grid), "--mkdir"]
    code, _, err = run(capsys, *argv, "--output", str(target))
    assert code == 0, err
    code, _, err = run(capsys, *argv, "--stamp", str(stamp))
    assert code == 0, err
    for path in (target, stamp):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
