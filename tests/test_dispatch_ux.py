"""Issue 24, item 5 (problems 6 and 7): a table's lookup accepts any catalog alias of its
devices (the generated code carries the alias map), and a grid without batch and heads says
what that means when the table is generated and in the table itself."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from command_line import run

GRID = """\
hardware = ["a100", "h100"]
head_dim = [64]
seq_len = [1024, 4096]
batch = 4
heads = 16
"""


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("table_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_lookup_accepts_aliases(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "grid.toml").write_text(GRID)
    out = tmp_path / "t.py"
    argv = ["table", "--grid", str(tmp_path / "grid.toml"), "--format", "python"]
    code, _, err = run(capsys, *argv, "--output", str(out))
    assert code == 0, err
    table = _module(out)
    for name in ("a100", "A100", "a100-80gb", "a100-sxm4-80gb"):
        entry = table.lookup(name, 64, "fp16", False, "forward", 1000)
        assert entry is not None and entry["hardware"] == "a100-80gb", name
    for name in ("h100", "h100-sxm"):
        entry = table.lookup(name, 64, "fp16", False, "forward", 4000)
        assert entry is not None and entry["hardware"] == "h100-sxm", name
    assert table.lookup("b200", 64, "fp16", False, "forward", 1000) is None


def test_json_and_cpp_tables_carry_the_alias_map(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "grid.toml").write_text(GRID)
    argv = ["table", "--grid", str(tmp_path / "grid.toml")]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    aliases = json.loads(out)["aliases"]
    assert aliases["a100"] == "a100-80gb" and aliases["h100"] == "h100-sxm"
    code, header, _ = run(capsys, *argv, "--format", "cpp")
    assert code == 0
    assert '{"h100", "h100-sxm"},' in header and "hardware = canonical(hardware);" in header


def test_a_grid_without_batch_and_heads_is_stated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "grid.toml").write_text('hardware = ["a100"]\nhead_dim = [64]\nseq_len = [1024]\n')
    argv = ["table", "--grid", str(tmp_path / "grid.toml"), "--format", "cpp"]
    code, header, err = run(capsys, *argv)
    assert code == 0
    assert "gives no batch or heads" in err and "batch 1 and heads 1" in err
    assert "one sequence of one head: too few blocks to fill a GPU" in header
    (tmp_path / "grid.toml").write_text(GRID)
    code, header, err = run(capsys, *argv)
    assert code == 0 and "gives no" not in err and "one sequence of one head" not in header
