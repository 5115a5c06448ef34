"""Instructions a cold CP-SAT solve executes, per problem of a latency block, counted by valgrind's
callgrind: a figure that the shared machine's clock cannot blur (benchmarks/README.md).

Usage:
    .venv/bin/python benchmarks/solve_instructions.py fa3-backward
    .venv/bin/python benchmarks/solve_instructions.py backward --json
    /other/checkout/.venv/bin/python benchmarks/solve_instructions.py fa3-backward  # that tree

The script runs itself twice under `valgrind --tool=callgrind`: once solving only two throwaway
problems (the block's first two: imports, the catalog and the first sight of each module, as the
latency benchmark's warm-up), once solving those and then every problem of the block. The
difference, over the block's size, is the figure: instructions per cold solve, with the process's
start and warm-up taken out. The problems are `solve_latency.py`'s sets, so the figure is the
instruction count behind that script's wall-clock medians. Run with another checkout's
interpreter, it measures that checkout's solver on the same problems (the sets come from this
file's directory).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import solve_latency as latency
from callgrind import instructions

import tilesolve.solver

WARM_UP_SOLVES = 2


def blocks() -> dict[str, Callable[[], list[latency.Case]]]:
    """Every latency block by name: the forward set, Ascend, backward and the own blocks (by
    their report label, e.g. fa3-backward)."""
    named: dict[str, Callable[[], list[latency.Case]]] = {
        "forward": latency.build_cases,
        "ascend": latency.build_ascend_cases,
        "backward": latency.build_backward_cases,
    }
    for block in latency.OWN_BLOCKS:
        named[block.label.replace(" ", "-")] = block.build
    return named


def solve_block(name: str, count: int) -> None:
    """The warm-up solves, then the block's first `count` problems (CP-SAT, top 5)."""
    cases = blocks()[name]()
    for case in cases[:WARM_UP_SOLVES]:
        latency.timed_solve(case, "cpsat")
    for case in cases[:count]:
        latency.timed_solve(case, "cpsat")


def counted(name: str, count: int) -> int:
    """Instructions of a run of this script that solves `count` problems after the warm-up."""
    return instructions([sys.executable, __file__, name, "--solve", str(count)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("block", choices=sorted(blocks()), help="the latency block to count")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="only the block's first N problems: a smoke run, not a measurement",
    )
    parser.add_argument("--solve", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.solve is not None:  # the run that callgrind counts
        solve_block(args.block, args.solve)
        return 0
    if shutil.which("valgrind") is None:
        parser.error("counting needs valgrind (apt-get install valgrind)")
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    problems = len(blocks()[args.block]())
    if args.sample is not None:
        problems = min(problems, args.sample)
    base = counted(args.block, 0)
    total = counted(args.block, problems)
    per_solve = (total - base) / problems
    tree = str(Path(tilesolve.solver.__file__).resolve().parent.parent)
    if args.json:
        doc = {"block": args.block, "problems": problems, "tree": tree}
        print(json.dumps(doc | {"warm_up": base, "total": total, "per_solve": per_solve}))
    else:
        print(f"{args.block}: {problems} problems, solver from {tree}")
        print(f"  start and warm-up  {base / 1e6:10.1f} M instructions")
        print(f"  with every problem {total / 1e6:10.1f} M instructions")
        print(f"  per cold solve     {per_solve / 1e6:10.1f} M instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
