"""Registers and spills of the flex forward template at fp32 'ieee' (FMA dots) as ptxas reports
them, beside the flex family's figures: compile a fixed sample of `flex_kernels.flex_source`
configurations for sm80 and sm90 (no GPU: Triton compiles for a named target) and write

    cd benchmarks/compiler && nice -n 10 ../../.venv/bin/python flex_fma_registers.py \\
        --out ../data/compiler/flex_fma_registers.csv

with the columns target, qk_dim, v_dim, block_m, block_n, num_warps, num_stages, status,
compiled_regs, compiled_spill_bytes, model_regs, model_spill_regs, compile_s.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import triton
from flex_kernels import flex_source
from toolchain import read_ptxas_log
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware
from tilesolve.solver.families.flex.forward import FlexAttention
from tilesolve.solver.space import ConfigArrays

TARGETS = (("sm80", 80, "a100-80gb"), ("sm90", 90, "h100-sxm"))
# (qk dim, v dim, block_m, block_n, warps, stages), fixed so that every run is the same set
SAMPLE = (
    (64, 64, 128, 64, 4, 3), (64, 64, 128, 32, 4, 2), (64, 64, 64, 64, 4, 2),
    (64, 64, 64, 32, 4, 1), (64, 64, 32, 32, 2, 2), (64, 64, 128, 64, 8, 2),
    (128, 128, 64, 64, 4, 1), (128, 128, 64, 32, 4, 2), (128, 128, 128, 32, 8, 2),
    (128, 128, 32, 64, 4, 3), (128, 128, 16, 32, 2, 2), (256, 256, 32, 32, 4, 2),
)  # fmt: skip
COLUMNS = ("target", "qk_dim", "v_dim", "block_m", "block_n", "num_warps", "num_stages",
           "status", "compiled_regs", "compiled_spill_bytes", "model_regs", "model_spill_regs",
           "compile_s")  # fmt: skip


def model_registers(device: str, row: tuple[int, ...]) -> tuple[int, int]:
    """The flex forward's registers per thread and spilled registers at fp32 'ieee'."""
    qk, v, bm, bn, warps, stages = row
    problem = AttentionProblem(seq_len=4096, head_dim=qk, head_dim_v=v, dtype="fp32")
    values = dict(block_m=bm, block_n=bn, num_warps=warps, num_stages=stages, tf32=0)
    one = ConfigArrays({n: np.array([x], dtype=np.int64) for n, x in values.items()})
    res = FlexAttention().resources(get_hardware(device), problem, SolveOptions(kernel="flex"), one)
    return int(res.regs_allocated[0]), int(res.spill_regs[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the CSV to write")
    args = parser.parse_args(argv)
    cache = Path(tempfile.mkdtemp(prefix="flex-fma-cache-"))
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    triton.knobs.nvidia.dump_ptxas_log = True  # `ptxas -v`'s log, read as toolchain.py does
    rows = []
    try:
        for target, arch, device in TARGETS:
            for entry in SAMPLE:
                qk, v, bm, bn, warps, stages = entry
                source = flex_source("fp32", qk, v, bm, bn, precision="ieee")
                start = time.perf_counter()
                printed = io.StringIO()
                try:
                    with contextlib.redirect_stdout(printed):
                        triton.compile(
                            ASTSource(*source),
                            target=GPUTarget("cuda", arch, 32),
                            options={"num_warps": warps, "num_stages": stages},
                        )
                    log = read_ptxas_log(printed.getvalue())
                    status, regs, spill = "ok", log["regs"], log["spill_store_bytes"]
                except Exception as exc:  # a failed compile is a row too
                    status, regs, spill = f"error: {type(exc).__name__}", -1, -1
                seconds = time.perf_counter() - start
                shutil.rmtree(cache, ignore_errors=True)
                cache.mkdir()
                model, model_spill = model_registers(device, entry)
                rows.append((target, *entry, status, regs, spill, model, model_spill,
                             f"{seconds:.2f}"))  # fmt: skip
                print(f"{target} {entry}: compiled {regs} +{spill}B, model {model} "
                      f"+{model_spill}", file=sys.stderr)  # fmt: skip
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    with Path(args.out).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
