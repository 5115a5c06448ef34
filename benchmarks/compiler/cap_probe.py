"""Compile rows of the data set again under lower register caps and report what ptxas does
there: whether a row's spill at the default cap comes from its live state (it spills under
every lower cap too) or from how ptxas allocates at that cap (it fits under a lower one).

    .venv/bin/python benchmarks/compiler/cap_probe.py --near-cap sm86 --below 7 23
    .venv/bin/python benchmarks/compiler/cap_probe.py KEY [KEY ...] --below 7 23

Each row is compiled once per `--below` value N, with its register cap N below ptxas's own
limit for the row's block (255, or what the register file leaves each thread: 128 at 16
warps), the limit the data set is compiled under. The cap is Triton's `maxnreg` compile option
(the PTX `.maxnreg` directive, which ptxas obeys as its register limit per thread).
`--near-cap TARGET` takes that target's `ok` rows that sit at the limit with at most
`--small-spill-bytes` spill stores, and those within 5 registers of it without spilling: the
rows where the spill decision is made (docs/model.md 16.9). One compile per row and cap, on
this machine's CPU (a few seconds each; no GPU); the table goes to stdout, one line per row as
it finishes, then the counts: spilling rows that fit under a lower cap, and rows that do not
spill at the limit but do under a lower cap.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

import numpy as np
import toolchain
from configs import TARGETS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
NEAR_CAP_REGISTERS = 5  # a non-spilling row this close to the limit is "near the cap"


def default_cap(row: dict[str, str]) -> int:
    """ptxas's register limit per thread for the row's block (`CompilerTarget.register_cap`)."""
    target = TARGETS[row["target"]].compiler_target()
    threads = np.array([int(row["num_warps"]) * 32], dtype=np.int64)
    return int(target.register_cap(threads)[0])


def near_cap_rows(rows: list[dict[str, str]], target: str, small: int) -> list[dict[str, str]]:
    """The target's ok rows at the limit with 1..small spill-store bytes, and those within
    NEAR_CAP_REGISTERS of it with none."""
    chosen = []
    for row in rows:
        if row["target"] != target or row["status"] != "ok":
            continue
        cap, regs, spill = default_cap(row), int(row["regs"]), int(row["spill_store_bytes"])
        at_cap_small_spill = regs == cap and 0 < spill <= small
        near_cap_clean = spill == 0 and regs >= cap - NEAR_CAP_REGISTERS
        if at_cap_small_spill or near_cap_clean:
            chosen.append(row)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("keys", nargs="*", help="data-set keys to probe")
    parser.add_argument(
        "--below", nargs="+", type=int, required=True, help="caps: registers below the limit"
    )
    parser.add_argument("--near-cap", metavar="TARGET", help="probe TARGET's near-cap rows")
    parser.add_argument("--small-spill-bytes", type=int, default=64, help="with --near-cap")
    parser.add_argument("--data", type=Path, default=DATA, help="the collected CSV")
    args = parser.parse_args(argv)
    with args.data.open(newline="") as f:
        rows = list(csv.DictReader(f))
    by_key = {r["key"]: r for r in rows}
    unknown = [k for k in args.keys if k not in by_key]
    if unknown:
        parser.error(f"not in {args.data.name}: {', '.join(unknown)}")
    chosen = [by_key[k] for k in args.keys]
    if args.near_cap:
        if args.near_cap not in TARGETS or TARGETS[args.near_cap].backend != "cuda":
            parser.error(f"--near-cap: {args.near_cap} is not a CUDA target")
        chosen += near_cap_rows(rows, args.near_cap, args.small_spill_bytes)
    if not chosen:
        parser.error("no rows: give keys or --near-cap TARGET")
    if any(TARGETS[r["target"]].backend != "cuda" for r in chosen):
        parser.error("maxnreg is a CUDA option: CUDA rows only")

    if any(n <= 0 for n in args.below):
        parser.error("--below: positive numbers of registers")
    below = sorted(set(args.below))
    print("| key | split | limit | at the limit: regs, spill B | " + " | ".join(
        f"limit - {n}" for n in below) + " |")  # fmt: skip
    print("|---|---|---|---|" + "---|" * len(below))
    fits_lower = spills_lower = spilling = clean = 0
    with tempfile.TemporaryDirectory() as scratch:
        compiler = toolchain.Compiler(Path(scratch))
        for row in chosen:
            limit = default_cap(row)
            cells = []
            spilled_under = []
            for n in below:
                got = compiler.compile(row, maxnreg=limit - n)
                if got["status"] != "ok":
                    cells.append(got["status"])
                    continue
                spilled_under.append(int(got["spill_store_bytes"]) > 0)
                cells.append(f"{got['regs']}, {got['spill_store_bytes']}")
            spills = int(row["spill_store_bytes"]) > 0
            if spills:
                spilling += 1
                fits_lower += bool(spilled_under) and not all(spilled_under)
            else:
                clean += 1
                spills_lower += any(spilled_under)
            print(
                f"| {row['key']} | {row['split']} | {limit} | {row['regs']}, "
                f"{row['spill_store_bytes']} | " + " | ".join(cells) + " |",
                flush=True,
            )
    print(
        f"\n{fits_lower} of {spilling} rows that spill at the limit fit under a lower cap; "
        f"{spills_lower} of {clean} that do not spill at the limit spill under a lower cap"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
