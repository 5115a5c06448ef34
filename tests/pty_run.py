"""Running `tilesolve-cli` (or a script) on a pseudo-terminal (the `pty` module), as a user's
terminal would: what it writes there (stdout and stderr together, colour and progress
included)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

CLI = ("-m", "tilesolve.client.cli")


def run_in_pty(
    argv: Sequence[str],
    cache_dir: Path,
    columns: int = 100,
    timeout_s: float = 120.0,
    program: Sequence[str] = CLI,
) -> str:
    """The output of `python *program *argv` (the CLI by default) on a terminal `columns` wide
    (its answer cache in `cache_dir`)."""
    leader, follower = pty.openpty()
    env = os.environ | {"COLUMNS": str(columns), "XDG_CACHE_HOME": str(cache_dir)}
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm-256color"
    process = subprocess.Popen(
        [sys.executable, *program, *argv],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], timeout_s)
            if not ready:
                raise TimeoutError(f"no output for {timeout_s} s from {argv}")
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
        process.wait(timeout=timeout_s)
    return b"".join(chunks).decode("utf-8", "replace")
