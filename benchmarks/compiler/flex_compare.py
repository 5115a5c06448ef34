"""The flex family's forward shared memory against Triton's own figure: compile a fixed sample of
configurations of `flex_kernels.flex_forward_kernel` (the forward template's structure) for
each target, read `metadata.shared`, and put the model's figure beside it.

    nice -n 10 .venv/bin/python benchmarks/compiler/flex_compare.py \\
        --out benchmarks/data/compiler/flex_forward.csv

No GPU is needed: Triton compiles for a named target. One process compiles one configuration
after another (--jobs 1: the machine's cores are shared); Triton's cache is a private folder
emptied after each compile, so each compile is a real one.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import triton
from flex_kernels import flex_source
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware
from tilesolve.solver.families.flex.forward import FlexAttention
from tilesolve.solver.space import ConfigArrays

# Targets and the catalog device the model reads for each (its compute capability).
TARGETS = (("sm80", 80, "a100-80gb"), ("sm86", 86, "rtx-3090"), ("sm89", 89, "rtx-4090"),
           ("sm90", 90, "h100-sxm"))  # fmt: skip
# (dtype, qk head dim, v head dim, block_m, block_n, warps, stages): rounded dims, as the
# template sizes its tiles; fixed so that the data set is the same on every run.
SAMPLE = (
    ("fp16", 64, 64, 128, 64, 4, 3),
    ("bf16", 128, 128, 128, 64, 8, 2),
    ("fp16", 128, 128, 64, 64, 4, 3),
    ("bf16", 256, 128, 64, 32, 4, 2),
    ("fp16", 256, 256, 64, 64, 4, 1),
    ("bf16", 128, 128, 32, 128, 4, 4),
)
COLUMNS = ("target", "dtype", "qk_dim", "v_dim", "block_m", "block_n", "num_warps", "num_stages",
           "status", "compiled_shared_bytes", "model_shared_bytes", "compile_s")  # fmt: skip


def model_bytes(device: str, dtype: str, qk: int, v: int, cfg: tuple[int, ...]) -> int:
    """The flex family's shared memory for one configuration on `device`."""
    family = FlexAttention()
    problem = AttentionProblem(seq_len=4096, head_dim=qk, head_dim_v=v, dtype=dtype)
    names = ("block_m", "block_n", "num_warps", "num_stages")
    one = ConfigArrays({n: np.array([x], dtype=np.int64) for n, x in zip(names, cfg, strict=True)})
    res = family.resources(get_hardware(device), problem, SolveOptions(kernel="flex"), one)
    return int(res.smem_bytes[0])


def compile_one(arch: int, dtype: str, qk: int, v: int, cfg: tuple[int, ...]) -> tuple[str, int]:
    bm, bn, warps, stages = cfg
    fn, signature, constexprs, attrs = flex_source(dtype, qk, v, bm, bn)
    compiled = triton.compile(
        ASTSource(fn, signature, constexprs, attrs),
        target=GPUTarget("cuda", arch, 32),
        options={"num_warps": warps, "num_stages": stages},
    )
    return "ok", int(compiled.metadata.shared)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the CSV to write")
    args = parser.parse_args(argv)
    cache = Path(tempfile.mkdtemp(prefix="flex-triton-cache-"))
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    rows = []
    try:
        for target, arch, device in TARGETS:
            for dtype, qk, v, *cfg in SAMPLE:
                start = time.perf_counter()
                try:
                    status, shared = compile_one(arch, dtype, qk, v, tuple(cfg))
                except Exception as exc:  # a failed compile is a row too
                    status, shared = f"error: {type(exc).__name__}", -1
                seconds = time.perf_counter() - start
                shutil.rmtree(cache, ignore_errors=True)
                cache.mkdir()
                model = model_bytes(device, dtype, qk, v, tuple(cfg))
                rows.append((target, dtype, qk, v, *cfg, status, shared, model, f"{seconds:.2f}"))
                print(f"{target} {dtype} {qk}/{v} {cfg}: compiled {shared} model {model}",
                      file=sys.stderr)  # fmt: skip
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    with open(args.out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    ok = [r for r in rows if r[8] == "ok"]
    exact = sum(1 for r in ok if r[9] == r[10])
    print(f"{exact}/{len(ok)} compiled configurations: the model's shared memory equals Triton's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
