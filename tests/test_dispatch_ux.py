"""Issue 24, item 5 (problems 6 and 7): a table's lookup accepts any catalog alias of its
devices (the generated code carries the alias map), and a grid without batch and heads says
what that means when the table is generated and in the table itself."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tilesolve.solver.apps.dispatch_table import Grid

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


DECODE_GRID = """\
hardware = ["h100"]
head_dim = [128]
phase = ["decode"]
seq_len = [2048, 8192, 32768]
batch = 8
heads = 32
kv_heads = 8
"""


def test_a_decode_grid_is_keyed_on_the_cache_length(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "grid.toml").write_text(DECODE_GRID)
    out = tmp_path / "t.py"
    code, _, err = run(capsys, "table", "--grid", str(tmp_path / "grid.toml"), "--output", str(out))
    assert code == 0, err
    table = _module(out)
    entry = table.lookup("h100", 128, "fp16", False, "decode", 20000)
    assert entry is not None and (entry["seq_len_min"], entry["solved_at"]) == (8193, 32768)
    code, answer, _ = run(
        capsys,
        *("solve", "--hardware", "h100", "--phase", "decode", "--seq-len", "1"),
        *("--seq-len-kv", "32768", "--batch", "8", "--heads", "32", "--kv-heads", "8"),
        *("--head-dim", "128", "--engine", "exhaustive", "--top-k", "1", "--json"),
    )
    best = json.loads(answer)["candidates"][0]
    assert entry["parameters"] == best["parameters"]


def test_grid_keys_added_later_leave_older_grids_hash_alone() -> None:
    old = Grid.model_validate({"hardware": ["a100"], "head_dim": [64], "seq_len": [1024]})
    assert "seq_len_kv" not in old.canonical() and "decode_seq_len" not in old.canonical()
    longer = old.model_copy(update={"seq_len_kv": 8192})
    assert longer.canonical()["seq_len_kv"] == 8192 and longer.sha256() != old.sha256()
