"""Issue 24, item 11's small texts: singular and plural agree, the server's usage error is one
line, and the portfolio report numbers problems and configurations alike (from 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from command_line import run

SHAPES = """\
head_dim,seq_len,batch,heads,causal,count
64,512,8,16,false,50
128,4096,4,32,true,20
64,2048,4,16,false,30
"""


def test_one_configuration_is_singular(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "mix.csv").write_text(SHAPES)
    argv = ["portfolio", "--hardware", "a100", "--shapes", str(tmp_path / "mix.csv")]
    code, out, err = run(capsys, *argv, "--max-configs", "1", "--wide")
    assert code == 0, err
    assert "at most 1 configuration |" in out and "1 configurations" not in out
    worst = next(line for line in out.splitlines() if "worst case" in line)
    code, document, _ = run(capsys, *argv, "--max-configs", "1", "--json")
    index = json.loads(document)["worst_problem"]
    assert f"(problem {index + 1}, " in worst  # numbered from 1, as the configurations


def test_one_remote_flag_applies(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "hardware", "list", "--tls")
    assert code == 2
    assert "--tls only applies to a server" in err


def test_server_usage_error_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tilesolve.server.main", "--prot", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "unrecognized arguments: --prot 1" in done.stderr and "usage:" not in done.stderr
