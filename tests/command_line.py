"""Running `tilesolve-cli` in the test process: `run(capsys, *argv)` is its exit code, stdout
and stderr (what a shell would see, without starting one). `console(argv, env)` runs it as the
console script does, in a fresh interpreter, and says which modules it loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from tilesolve.client.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# The console script's way in (argv from sys.argv, so the answer cache is used), then the
# names of the modules loaded, as the last line of stderr.
_CONSOLE = """
import json, sys
from tilesolve.client.cli import main
code = main()
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


@dataclass(frozen=True)
class ConsoleRun:
    """One console-script run: exit code, output and the modules it had loaded at the end."""

    code: int
    stdout: str
    stderr: str
    modules: list[str]

    def loaded(self, *prefixes: str) -> list[str]:
        """The loaded modules that are one of `prefixes` or inside one of them."""
        return [m for m in self.modules if any(m == p or m.startswith(f"{p}.") for p in prefixes)]


def console(argv: list[str], env: dict[str, str]) -> ConsoleRun:
    """`tilesolve-cli *argv` in a fresh interpreter, with `env` added to the environment."""
    done = subprocess.run(
        [sys.executable, "-c", _CONSOLE, *argv],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    *errors, last = done.stderr.strip().splitlines() or [""]
    report = json.loads(last)
    return ConsoleRun(report["code"], done.stdout, "\n".join(errors), report["modules"])
