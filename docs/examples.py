"""The command examples of README.md and docs/*.md, regenerated from the code so that they
cannot go stale.

    python docs/examples.py           # rewrite every example's output in place
    python docs/examples.py --check   # exit 1 naming each example whose output differs

An example is a fenced block whose first line is `$ tilesolve-cli ARGS`: the rest of the block
is what that command prints at COLUMNS=100 (in-process, `tilesolve.client.cli.main`). A command
ending in `2>&1 >/dev/null` shows its stderr instead (e.g. `solve --explain --json`'s text
heatmap). The solve time in an answer's first line (`| 16.1 ms`) differs run by run: --check
ignores it, and a rewrite keeps the one already written.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

from tilesolve.client.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = 100
_BLOCK = re.compile(r"^(```[a-z]*\n\$ (tilesolve-cli [^\n]*)\n)(.*?)^```$", re.S | re.M)
_STDERR_ONLY = " 2>&1 >/dev/null"
_TIME = re.compile(r"\| \d+(\.\d+)? ms\b")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@contextlib.contextmanager
def _columns() -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(COLUMNS)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def output_of(command: str) -> str:
    """What `command` (a `tilesolve-cli ...` line) prints, as the block shows it."""
    stderr_only = command.endswith(_STDERR_ONLY)
    argv = shlex.split(command.removesuffix(_STDERR_ONLY))[1:]
    out, err = io.StringIO(), io.StringIO()
    with _columns(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        cli_main(argv)
    return err.getvalue() if stderr_only else out.getvalue()


def _timeless(text: str) -> str:
    return _TIME.sub("| ms", text)


def _keep_times(old: str, new: str) -> str:
    """`new` with the solve times `old` shows (so a rewrite changes only what changed)."""
    times = iter(m.group(0) for m in _TIME.finditer(old))
    return _TIME.sub(lambda m: next(times, m.group(0)), new)


def regenerate(text: str) -> tuple[str, list[str]]:
    """The document with every example's output regenerated, and the commands that moved."""
    moved: list[str] = []

    def block(match: re.Match[str]) -> str:
        head, command, old = match.group(1), match.group(2), match.group(3)
        new = output_of(command)
        if _timeless(new) != _timeless(old):
            moved.append(command)
        return f"{head}{_keep_times(old, new)}```"

    return _BLOCK.sub(block, text), moved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args()
    stale = 0
    for path in documents():
        text = path.read_text(encoding="utf-8")
        new, moved = regenerate(text)
        for command in moved:
            print(f"{path.relative_to(ROOT)}: stale: $ {command}", file=sys.stderr)
        stale += len(moved)
        if moved and not args.check:
            path.write_text(new, encoding="utf-8")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
