"""One compile worker: reads plan rows as JSON lines on stdin, writes one JSON line of measured
columns per row on its original stdout, until stdin closes. A row whose `task` is `peak_live`
is measured by `toolchain.Compiler.measure_peak_live` (its PEAK_LIVE_COLUMNS only), any other
is compiled (`toolchain.Compiler.compile`).

    python benchmarks/compiler/worker.py SCRATCH_DIR

File descriptors 1 and 2 are redirected to SCRATCH_DIR/compiler.log once the protocol stream
is saved, so whatever Triton, MLIR, LLVM or ptxas print (they write to the descriptors, not
through Python) cannot corrupt the protocol; `toolchain.Compiler` reads that log back for a
failed compile's message. `collect.py` starts these workers and kills one whose compile runs
past the time limit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import toolchain

TASK = "task"  # the request's field naming what to do with a row that is already compiled
PEAK_LIVE = "peak_live"


def main() -> int:
    scratch = Path(sys.argv[1])
    scratch.mkdir(parents=True, exist_ok=True)
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    log_path = scratch / "compiler.log"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    compiler = toolchain.Compiler(scratch, log_path)
    protocol.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        row = json.loads(line)
        if row.pop(TASK, None) == PEAK_LIVE:
            protocol.write(json.dumps(compiler.measure_peak_live(row)) + "\n")
        else:
            protocol.write(json.dumps(compiler.compile(row)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
