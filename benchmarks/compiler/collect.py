"""Compile the sample (plan.py) with the installed Triton and record what the compilers
allocated, one CSV row per configuration (columns: plan.PLAN_COLUMNS + toolchain.MEASURED_COLUMNS).

    nice -n 10 .venv/bin/python benchmarks/compiler/collect.py --jobs 2 \\
        --out benchmarks/data/compiler/triton_resources.csv

Resumable: rows already in --out are skipped, and each row is appended as it finishes, so an
interrupted run continues where it stopped. `--time-budget-s` stops handing out compiles once
spent (compiles under way finish); `--compile-timeout-s` kills a worker whose compile runs
longer and records the row as `timeout`. When no planned row is left, the file is rewritten
sorted by key, so that the committed data diff cleanly (`--sort-only` does that alone, for a
partial collection); rows an earlier plan drew stay (the `top5` stratum follows the model, so a
later model's plan adds rows, it does not replace the old ones). Progress goes to stderr: one
line per row, under a progress bar when stderr is a terminal (`--quiet`: the lines alone).

`--peak-live` compiles nothing new: it measures the peak live registers (toolchain's
PEAK_LIVE_COLUMNS, `nvdisasm -lrm count`) of the CUDA `ok` rows already in --out that have no
`peak_live_assembler` yet, rows within their target's shared-memory limit first, `--targets` in
the order given, and appends each row again with them (a later row of the same key replaces an
earlier one when the file is read; the file is rewritten sorted, one row a key, at the end).
Resumable in the same way; a measurement that fails or runs past `--compile-timeout-s` is
recorded as `peak_live_assembler` = 'none: REASON' and not tried again.

Workers are processes (`worker.py`), `--jobs` of them; each keeps one Triton import for its
whole life. There is no Dask path: see docs/model.md "Compiler truth" for why.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from configs import TARGETS
from plan import PLAN_COLUMNS, SHARED_LIMIT_BYTES, STRATA, build_plan
from toolchain import MEASURED_COLUMNS, PEAK_LIVE_COLUMNS
from worker import PEAK_LIVE, TASK

from tilesolve.client.progress import Meter, add_quiet_argument, shown

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker.py"
COLUMNS = PLAN_COLUMNS + MEASURED_COLUMNS
READY_TIMEOUT_S = 300.0


class Worker:
    """A worker process and the row it is compiling (None when idle)."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(scratch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,  # its own process group: ptxas children die with it
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.stdout: IO[str] = self.proc.stdout
        self.stdin: IO[str] = self.proc.stdin
        self.row: dict[str, Any] | None = None
        self.started = 0.0
        self.ready = False

    def send(self, row: dict[str, Any], task: str | None = None) -> None:
        self.row = row
        self.started = time.monotonic()
        self.stdin.write(json.dumps(row if task is None else {**row, TASK: task}) + "\n")
        self.stdin.flush()

    def stop(self) -> None:
        """Kill this worker and the compiler processes it started (ptxas): the process group
        this module created for it, by its id."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def read_done(path: Path) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    with path.open(newline="") as f:
        return {row["key"]: row for row in csv.DictReader(f)}


def has_columns(path: Path) -> bool:
    """Whether the CSV's header is today's (COLUMNS)."""
    with path.open(newline="") as f:
        return next(csv.reader(f), []) == list(COLUMNS)


def peak_live_pending(done: dict[str, dict[str, str]], targets: list[str]) -> list[dict[str, str]]:
    """The CUDA `ok` rows without a peak-live measurement (nor a recorded failure of one),
    those within their target's shared-memory limit first, in the order of `targets` (all
    CUDA targets when empty), then by key."""
    order = targets or [t for t in TARGETS if TARGETS[t].backend == "cuda"]
    rows = [
        r
        for r in done.values()
        if r["target"] in order
        and TARGETS[r["target"]].backend == "cuda"
        and r["status"] == "ok"
        and not r.get("peak_live_assembler")
    ]

    def rank(r: dict[str, str]) -> tuple[bool, int, str]:
        over = int(r["shared_bytes"] or 0) > SHARED_LIMIT_BYTES[r["target"]]
        return over, order.index(r["target"]), r["key"]

    return sorted(rows, key=rank)


def peak_live_failed(row: dict[str, Any], reason: str) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(PEAK_LIVE_COLUMNS, "")
    out["peak_live_assembler"] = f"none: {reason}"
    return row | out


def write_sorted(path: Path) -> None:
    """Rewrite `path` sorted by key, every row kept: a row that an earlier version of the plan
    drew (the `top5` stratum follows the model of its day) is still what the compiler
    allocated for that configuration."""
    rows = sorted(read_done(path).values(), key=lambda r: r["key"])
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def failed_row(row: dict[str, Any], status: str, message: str, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(MEASURED_COLUMNS, "")
    out.update(status=status, message=message, compile_s=round(seconds, 3))
    return row | out


def collect(args: argparse.Namespace) -> int:
    out_path: Path = args.out
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if args.sort_only:
        write_sorted(out_path)
        print(f"{out_path}: sorted by key", file=sys.stderr)
        return 0
    done = read_done(out_path)
    task = PEAK_LIVE if args.peak_live else None
    plan: list[dict[str, Any]]
    if done and not has_columns(out_path):
        write_sorted(out_path)  # today's header first: the rows appended below carry its columns
    if task is not None:
        pending = deque(peak_live_pending(done, args.targets or []))
        plan = list(done.values())
        missing = len(pending)
    else:
        plan = [
            r.as_dict()
            for r in build_plan(args.strata)
            if not args.targets or r.target in args.targets
        ]
        pending = deque(r for r in plan if r["key"] not in done)
        missing = len(pending)  # rows of the plan not in the file yet
    if args.limit is not None:
        pending = deque(list(pending)[: args.limit])
    total = len(pending)
    limited = f" (--limit {args.limit} of {missing} missing)" if total < missing else ""
    print(
        f"plan: {len(plan)} rows, {len(plan) - missing} already in {out_path}, "
        f"{total} to {'measure' if task else 'compile'}{limited}",
        file=sys.stderr,
    )
    # a run over the whole plan leaves the file sorted when nothing of it is left to compile
    whole_plan = task is not None or (args.limit is None and not args.targets)
    if not pending:
        print("done: 0 compiled (nothing to compile)", file=sys.stderr)
        if whole_plan and out_path.exists():
            write_sorted(out_path)
        return 0
    new_file = not out_path.exists() or out_path.stat().st_size == 0
    sink = out_path.open("a", newline="")
    writer = csv.DictWriter(sink, fieldnames=COLUMNS)
    if new_file:
        writer.writeheader()
    start = time.monotonic()
    finished = 0
    selector = selectors.DefaultSelector()
    scratch_root = Path(tempfile.mkdtemp(prefix="tilesolve-compile-"))
    workers: list[Worker] = []
    meter = Meter("rows compiled", shown(args.quiet))
    meter.add(total)

    def record(result: dict[str, Any]) -> None:
        nonlocal finished
        writer.writerow(result)
        sink.flush()
        finished += 1
        elapsed = time.monotonic() - start
        eta = elapsed / finished * (total - finished)
        if task is not None:
            detail = (
                f"peak live {result['peak_live_regs']} of {result['regs']} regs, "
                f"{result['peak_live_assembler']}"
            )[:120]
        elif result["status"] == "ok":
            detail = f"shared={result['shared_bytes']} regs={result['regs'] or result['vgprs']}"
        else:
            detail = result["message"][:80]
        meter.note(
            f"[{finished}/{total} {elapsed:.0f}s eta {eta:.0f}s] {result['key']} "
            f"{result['status']} {result['compile_s']}s {detail}"
        )
        meter.advance(1)

    def spawn(index: int) -> Worker:
        worker = Worker(scratch_root / f"w{index}")
        worker.started = time.monotonic()
        selector.register(worker.stdout, selectors.EVENT_READ, worker)
        return worker

    def replace(worker: Worker) -> None:
        selector.unregister(worker.stdout)
        worker.stop()
        workers[workers.index(worker)] = spawn(workers.index(worker))

    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    with meter:  # the bar, on a terminal, until the last worker has stopped
        try:
            workers.extend(spawn(i) for i in range(args.jobs))
            while True:
                budget_left = args.time_budget_s is None or (
                    time.monotonic() - start < args.time_budget_s
                )
                for worker in workers:
                    if worker.ready and worker.row is None and pending and budget_left:
                        worker.send(pending.popleft(), task)
                busy = [w for w in workers if w.row is not None or not w.ready]
                if not any(w.row is not None for w in workers) and (not pending or not budget_left):
                    break
                now = time.monotonic()
                deadlines = [
                    w.started + (args.compile_timeout_s if w.ready else READY_TIMEOUT_S)
                    for w in busy
                ]
                for key, _ in selector.select(timeout=max(0.1, min(deadlines) - now)):
                    worker = key.data
                    line = worker.stdout.readline()
                    if not line:  # the worker died
                        row = worker.row
                        if row is not None and task is not None:
                            record(peak_live_failed(row, "the worker exited"))
                            worker.row = None
                        elif row is not None:
                            record(failed_row(row, "crash", "the compile worker exited", 0.0))
                            worker.row = None
                        elif not worker.ready:
                            raise RuntimeError(
                                f"a compile worker failed to start; see {worker.scratch}"
                            )
                        replace(worker)
                        continue
                    message = json.loads(line)
                    if not worker.ready:
                        worker.ready = message.get("ready", False)
                        continue
                    assert worker.row is not None
                    record(worker.row | message)
                    worker.row = None
                now = time.monotonic()
                for worker in list(workers):
                    if worker.row is not None and now - worker.started > args.compile_timeout_s:
                        row = worker.row
                        worker.row = None
                        seconds = now - worker.started
                        if task is not None:
                            record(peak_live_failed(row, f"killed after {seconds:.0f} s"))
                        else:
                            record(
                                failed_row(row, "timeout", f"killed after {seconds:.0f} s", seconds)
                            )
                        replace(worker)
        finally:
            for worker in workers:
                worker.stop()
            sink.close()
    left = len(pending)
    print(
        f"done: {finished} compiled in {time.monotonic() - start:.0f}s; {left} left (time budget)"
        if left
        else f"done: {finished} compiled",
        file=sys.stderr,
    )
    if not left and whole_plan:
        write_sorted(out_path)
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="CSV to append to")
    parser.add_argument(
        "--jobs", type=int, default=1, help="worker processes (default 1: a shared machine)"
    )
    parser.add_argument("--time-budget-s", type=float, default=None, help="stop handing out")
    parser.add_argument(
        "--compile-timeout-s", type=float, default=300.0, help="kill a compile after this"
    )
    parser.add_argument("--targets", nargs="*", choices=sorted(TARGETS), help="only these targets")
    parser.add_argument(
        "--strata", nargs="*", choices=STRATA, default=list(STRATA), help="plan strata"
    )
    parser.add_argument("--limit", type=int, default=None, help="compile at most N rows")
    parser.add_argument(
        "--peak-live",
        action="store_true",
        help="compile nothing new: measure the peak live registers of --out's CUDA rows that "
        "have none yet (the module docstring)",
    )
    add_quiet_argument(parser)
    parser.add_argument(
        "--sort-only",
        action="store_true",
        help="compile nothing: rewrite --out sorted by key (what a finished run does; for "
        "committing a partial collection)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.time_budget_s is not None and args.time_budget_s <= 0:
        parser.error("--time-budget-s must be positive")
    if args.compile_timeout_s <= 0:
        parser.error("--compile-timeout-s must be positive")
    if args.limit is not None and args.limit < 0:
        parser.error("--limit must be at least 0")
    return args


def main() -> int:
    args = parse_args()
    try:
        return collect(args)
    except KeyboardInterrupt as stop:
        print(f"interrupted ({stop}); rows so far are in {args.out}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
