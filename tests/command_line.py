"""Running `tilesolve-cli` in the test process: `run(capsys, *argv)` is its exit code, stdout
and stderr (what a shell would see, without starting one)."""

from __future__ import annotations

import pytest

from tilesolve.client.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
