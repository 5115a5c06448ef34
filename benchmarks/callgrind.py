"""Instructions a command executes, counted by valgrind's callgrind (all threads): the figure
the benchmarks quote where the shared machine's clock is too noisy (cli_startup.py
`--instructions`, solve_instructions.py)."""

from __future__ import annotations

import subprocess


def instructions(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Instructions `argv` executes under `valgrind --tool=callgrind` (RuntimeError where
    callgrind reports no count)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip())
    raise RuntimeError(f"callgrind reported no instruction count:\n{done.stderr[-2000:]}")
