"""The flex family's shared memory against Triton's own figure, for the three templates: compile
a fixed sample of configurations of `flex_kernels`' forward, backward and decode kernels (the
templates' structure) for each target, read `metadata.shared`, and put the model's figure
beside it.

    cd benchmarks/compiler && nice -n 10 ../../.venv/bin/python flex_compare.py \\
        --out-dir ../data/compiler

writes `flex_forward.csv`, `flex_backward.csv` and `flex_decode.csv` there (`--kinds` picks
some). No GPU is needed: Triton compiles for a named target. One process compiles one
configuration after another (the machine's cores are shared); Triton's cache is a private
folder emptied after each compile, so each compile is a real one.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import triton
from flex_kernels import Source, flex_backward_source, flex_decode_source, flex_source
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware
from tilesolve.solver.families.flex.backward import FlexAttentionBackward
from tilesolve.solver.families.flex.decode import FlexDecoding
from tilesolve.solver.families.flex.forward import FlexAttention
from tilesolve.solver.family import KernelFamily
from tilesolve.solver.space import ConfigArrays

# Targets and the catalog device the model reads for each (its compute capability).
TARGETS = (("sm80", 80, "a100-80gb"), ("sm86", 86, "rtx-3090"), ("sm89", 89, "rtx-4090"),
           ("sm90", 90, "h100-sxm"))  # fmt: skip
# precision: FLOAT32_PRECISION ('ieee' or 'tf32', read for fp32 only); dims are the rounded
# ones, as the templates size their tiles. Fixed so that the data set is the same on every run.
# forward: (dtype, precision, qk dim, v dim, block_m, block_n, warps, stages)
FORWARD_SAMPLE = (
    ("fp16", "ieee", 64, 64, 128, 64, 4, 3),
    ("bf16", "ieee", 128, 128, 128, 64, 8, 2),
    ("fp16", "ieee", 128, 128, 64, 64, 4, 3),
    ("bf16", "ieee", 256, 128, 64, 32, 4, 2),
    ("fp16", "ieee", 256, 256, 64, 64, 4, 1),
    ("bf16", "ieee", 128, 128, 32, 128, 4, 4),
    ("fp32", "ieee", 64, 64, 128, 32, 4, 2),
    ("fp32", "ieee", 128, 128, 64, 64, 4, 1),
    ("fp32", "tf32", 64, 64, 64, 32, 4, 3),
    ("fp32", "tf32", 128, 128, 128, 32, 4, 2),
)
# backward: (dtype, precision, qk dim, v dim, block_m1, block_n1, block_m2, block_n2, warps,
# stages)
BACKWARD_SAMPLE = (
    ("fp16", "ieee", 64, 64, 64, 128, 128, 64, 8, 2),
    ("bf16", "ieee", 128, 128, 32, 64, 64, 32, 4, 3),
    ("fp16", "ieee", 128, 128, 64, 64, 64, 64, 4, 2),
    ("bf16", "ieee", 256, 128, 32, 32, 32, 32, 4, 2),
    ("fp16", "ieee", 64, 64, 32, 128, 128, 32, 4, 1),
    ("fp32", "tf32", 64, 64, 32, 64, 64, 32, 4, 2),
    # added to separate the mma.sync hypotheses (docs/model.md 20.2): deeper pipelines, 2 and
    # 8 warps, 16-row steps, chained tiles larger than the transposed tile, fp32 at both
    # precisions
    ("fp16", "ieee", 64, 64, 32, 64, 64, 32, 4, 4),
    ("bf16", "ieee", 128, 128, 16, 64, 64, 16, 2, 3),
    ("fp16", "ieee", 64, 64, 16, 128, 128, 16, 8, 3),
    ("fp16", "ieee", 128, 128, 64, 128, 128, 64, 8, 2),
    ("bf16", "ieee", 64, 64, 128, 128, 128, 32, 8, 3),
    ("fp16", "ieee", 256, 256, 32, 64, 64, 32, 4, 2),
    ("fp32", "tf32", 128, 128, 32, 32, 32, 32, 4, 3),
    ("fp32", "tf32", 64, 64, 64, 64, 64, 64, 4, 2),
    ("fp32", "ieee", 64, 64, 32, 64, 64, 32, 4, 2),
)
# decode: (dtype, precision, qk dim, v dim, q_len, GQA group, block_n, split_kv, warps,
# stages); BLOCK_M = max(next_pow2(q_len x group), 16), as the lowering sets it
DECODE_SAMPLE = (
    ("fp16", "ieee", 128, 128, 1, 4, 64, 8, 4, 2),
    ("bf16", "ieee", 64, 64, 2, 8, 128, 4, 4, 3),
    ("fp16", "ieee", 128, 128, 4, 8, 32, 16, 2, 3),
    ("bf16", "ieee", 256, 256, 1, 2, 32, 8, 4, 2),
    ("fp32", "ieee", 128, 128, 1, 4, 64, 8, 4, 2),
    ("fp32", "tf32", 64, 64, 1, 8, 64, 4, 4, 3),
)
COMMON = ("target", "dtype", "precision", "qk_dim", "v_dim")
TAIL = ("num_warps", "num_stages", "status", "compiled_shared_bytes", "model_shared_bytes",
        "compile_s")  # fmt: skip
COLUMNS = {
    "forward": (*COMMON, "block_m", "block_n", *TAIL),
    "backward": (*COMMON, "block_m1", "block_n1", "block_m2", "block_n2", *TAIL),
    "decode": (*COMMON, "q_len", "group", "block_m", "block_n", "split_kv", *TAIL),
}


def decode_block_m(q_len: int, group: int) -> int:
    """FlexDecoding's BLOCK_M: the packed rows, a power of two, at least 16."""
    rows = q_len * group
    return max(1 << max(0, (rows - 1).bit_length()), 16)


def model_bytes(
    family: KernelFamily, device: str, problem: AttentionProblem, values: dict[str, int]
) -> int:
    """The flex family's shared memory for one configuration on `device`."""
    one = ConfigArrays({n: np.array([x], dtype=np.int64) for n, x in values.items()})
    res = family.resources(get_hardware(device), problem, SolveOptions(kernel="flex"), one)
    return int(res.smem_bytes[0])


def precision_pin(dtype: str, precision: str) -> dict[str, int]:
    """The model's `tf32` parameter of an fp32 row (none at 16 bits)."""
    return {"tf32": int(precision == "tf32")} if dtype == "fp32" else {}


def forward_case(device: str, row: tuple[Any, ...]) -> tuple[Source, int, tuple[Any, ...]]:
    dtype, precision, qk, v, bm, bn, warps, stages = row
    problem = AttentionProblem(seq_len=4096, head_dim=qk, head_dim_v=v, dtype=dtype)
    values = dict(block_m=bm, block_n=bn, num_warps=warps, num_stages=stages)
    model = model_bytes(FlexAttention(), device, problem, values | precision_pin(dtype, precision))
    return flex_source(dtype, qk, v, bm, bn, precision=precision), model, row


def backward_case(device: str, row: tuple[Any, ...]) -> tuple[Source, int, tuple[Any, ...]]:
    dtype, precision, qk, v, m1, n1, m2, n2, warps, stages = row
    problem = AttentionProblem(seq_len=4096, head_dim=qk, head_dim_v=v, dtype=dtype,
                               phase="backward")  # fmt: skip
    values = dict(block_m1=m1, block_n1=n1, block_m2=m2, block_n2=n2, num_warps=warps,
                  num_stages=stages)  # fmt: skip
    family = FlexAttentionBackward()
    model = model_bytes(family, device, problem, values | precision_pin(dtype, precision))
    source = flex_backward_source(dtype, qk, v, (m1, n1, m2, n2), precision=precision)
    return source, model, row


def decode_case(device: str, row: tuple[Any, ...]) -> tuple[Source, int, tuple[Any, ...]]:
    dtype, precision, qk, v, q_len, group, bn, splits, warps, stages = row
    problem = AttentionProblem(seq_len=q_len, seq_len_kv=4096, heads=group, kv_heads=1,
                               head_dim=qk, head_dim_v=v, dtype=dtype, phase="decode")  # fmt: skip
    bm = decode_block_m(q_len, group)
    values = dict(block_m=bm, block_n=bn, num_warps=warps, num_stages=stages, num_splits=splits,
                  pack_gqa=1)  # fmt: skip
    model = model_bytes(FlexDecoding(), device, problem, values | precision_pin(dtype, precision))
    source = flex_decode_source(dtype, qk, v, bm, bn, splits, precision=precision)
    return source, model, (*row[:6], bm, *row[6:])


Case = Callable[[str, tuple[Any, ...]], tuple[Source, int, tuple[Any, ...]]]
KINDS: dict[str, tuple[Case, tuple[tuple[Any, ...], ...]]] = {
    "forward": (forward_case, FORWARD_SAMPLE),
    "backward": (backward_case, BACKWARD_SAMPLE),
    "decode": (decode_case, DECODE_SAMPLE),
}


def compile_shared(source: Source, arch: int, warps: int, stages: int) -> int:
    """metadata.shared of one compile for `arch`."""
    compiled = triton.compile(
        ASTSource(*source),
        target=GPUTarget("cuda", arch, 32),
        options={"num_warps": warps, "num_stages": stages},
    )
    return int(compiled.metadata.shared)


def collect(kind: str, cache: Path) -> list[tuple[Any, ...]]:
    """One row per (target, sample configuration) of the kind."""
    case, sample = KINDS[kind]
    rows = []
    for target, arch, device in TARGETS:
        for entry in sample:
            source, model, described = case(device, entry)
            warps, stages = entry[-2:]
            start = time.perf_counter()
            try:
                status, shared = "ok", compile_shared(source, arch, warps, stages)
            except Exception as exc:  # a failed compile is a row too
                status, shared = f"error: {type(exc).__name__}", -1
            seconds = time.perf_counter() - start
            shutil.rmtree(cache, ignore_errors=True)
            cache.mkdir()
            rows.append((target, *described, status, shared, model, f"{seconds:.2f}"))
            print(f"{kind} {target} {described}: compiled {shared} model {model}", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True, help="the folder to write the CSVs in")
    parser.add_argument("--kinds", nargs="+", choices=tuple(KINDS), default=tuple(KINDS))
    args = parser.parse_args(argv)
    cache = Path(tempfile.mkdtemp(prefix="flex-triton-cache-"))
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    try:
        for kind in args.kinds:
            rows = collect(kind, cache)
            out = Path(args.out_dir) / f"flex_{kind}.csv"
            with out.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(COLUMNS[kind])
                writer.writerows(rows)
            ok = [r for r in rows if r[-4] == "ok"]
            exact = sum(1 for r in ok if r[-3] == r[-2])
            close = sum(1 for r in ok if abs(r[-2] - r[-3]) <= 0.02 * r[-3])
            print(f"{kind}: {exact}/{len(ok)} compiled configurations exact, {close} within 2%")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
