"""The CLI's on-disk answer cache: a repeated `tilesolve-cli solve` question is answered from
disk, without loading the solver (numpy, pandas, OR-Tools).

Where: `$XDG_CACHE_HOME/tilesolve/answers/` (default `~/.cache/tilesolve/answers/`), one
small JSON file per question; deleting the folder is always safe. What: the command's exact
output (stdout, stderr and exit code) for an answer (exit 0 or 1); errors are never cached.
Key: a SHA-256 of the options as given (the parsed command line), the model and catalog
versions (`tilesolve.solver.versions`) and what shapes the text (the width, colour, --wide):
a new model or catalog version never reuses an older answer. Not cached: `--no-cache`,
`--server` (the server has its own cache), `--profile` (a file that may change), `--explain`
and `--plot` (pictures), and calls of `main([...])` from Python (a program may have
registered its own families, which the key cannot see): the console script caches.

The Triton prune hook (`triton.ModelPrune`) keeps its rankings here too (`key_of`,
`read_entry`, `write_entry`), so that a training process's hook answers a shape an earlier
process ranked without loading the solver.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tilesolve.solver.versions import CATALOG_VERSION, MODEL_VERSION

from . import terminal
from .files import replace_file

CACHE_FORMAT = 1  # bump when an entry's layout changes
# Options that do not change the answer's text, or that make a question uncacheable.
_NOT_KEYED = frozenset({"handler", "no_cache"})
_UNCACHEABLE = ("server", "profile", "plot")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/tilesolve/answers (XDG_CACHE_HOME unset or empty: ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base else Path.home() / ".cache"
    return root / "tilesolve" / "answers"


def cache_key(args: argparse.Namespace) -> str | None:
    """The question's key, or None when it is not cached (see the module docstring)."""
    if not getattr(args, "cacheable", False) or getattr(args, "no_cache", False):
        return None
    if any(getattr(args, name, None) is not None for name in _UNCACHEABLE):
        return None
    if getattr(args, "explain", False):
        return None
    options = {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_KEYED}
    document = {
        "options": options,
        "width": terminal.width(),
        "colour": terminal.colour(),
    }
    return key_of(document)


def key_of(question: dict[str, Any]) -> str:
    """The key of an entry for `question` (JSON-able), under this cache format and the model
    and catalog versions."""
    document = question | {
        "format": CACHE_FORMAT,
        "model_version": MODEL_VERSION,
        "catalog_version": CATALOG_VERSION,
    }
    text = json.dumps(document, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def read_entry(key: str) -> dict[str, Any] | None:
    """The entry stored under `key`, or None (absent, unreadable or of another format)."""
    try:
        data = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == CACHE_FORMAT else None


def write_entry(key: str, entry: dict[str, Any]) -> None:
    """Keep `entry` (JSON-able) under `key`, atomically; a cache that cannot be written is
    skipped."""
    with contextlib.suppress(OSError):
        cache_dir().mkdir(parents=True, exist_ok=True)
        replace_file(
            cache_dir() / f"{key}.json", json.dumps({"format": CACHE_FORMAT} | entry) + "\n"
        )


@dataclass(frozen=True)
class CachedRun:
    """What one run of the command printed, and its exit code."""

    code: int
    stdout: str
    stderr: str

    def replay(self) -> int:
        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)
        return self.code


def lookup(key: str) -> CachedRun | None:
    """The cached run of `key`, or None (absent, unreadable or of another format)."""
    data = read_entry(key)
    if data is None:
        return None
    try:
        return CachedRun(int(data["code"]), str(data["stdout"]), str(data["stderr"]))
    except (ValueError, KeyError, TypeError):
        return None


def store(key: str, run: CachedRun) -> None:
    """Keep `run` under `key` (atomically); a cache that cannot be written is skipped."""
    write_entry(key, {"code": run.code, "stdout": run.stdout, "stderr": run.stderr})


class _Tee:
    """A text stream that writes through to `target` and keeps a copy (isatty, fileno and
    the rest are the target's, so the width and colour rules see the real stream)."""

    def __init__(self, target: TextIO) -> None:
        self.target = target
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


@contextlib.contextmanager
def recording() -> Iterator[tuple[_Tee, _Tee]]:
    """stdout and stderr, written through and copied, while the block runs."""
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = out.target, err.target
