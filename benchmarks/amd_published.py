"""The model's predictions beside published AMD Instinct attention-forward throughput
(docs/model.md 19.11): every row of `benchmarks/data/published_amd_attention.csv` (sources and
their TFLOP/s conventions in `benchmarks/data/README.md`), the prediction of the family that
models the published kernel (`family`: ck for CK tile FMHA, aiter's CK path; triton for a Triton
kernel), its rank-1 configuration, and the ratio predicted / published.

Rows whose kernel no family models (aiter's assembly kernels) carry the ck family's prediction
for reference, marked `-` in the `checked` column: the assembly kernels are a different design
(docs/model.md 19.8), and their figures bound what the hardware gives, not what CK gives.

Usage:
    .venv/bin/python benchmarks/amd_published.py [--source ID ...] [--checked] [--json]

FLOPs: the model's (`AttentionProblem.flops`: 2 x pairs x (d + dv) per head, the causal pairs
of a bottom-right-aligned mask, about half), the same convention as every source whose
convention is stated; varlen rows of equal lengths are taken as the batch they equal. A
published dtype "fp16/bf16" (not stated) is predicted as bf16: the model's rates for the two
are the same on these parts.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilesolve.solver import AttentionProblem, SolveOptions, solve

DATA = Path(__file__).resolve().parent / "data" / "published_amd_attention.csv"
REFERENCE_FAMILY = "ck"  # the prediction shown beside a kernel no family models
TOLERANCE = 0.30  # issue 26: within 30% of published MI355X attention throughput


@dataclass(frozen=True)
class Point:
    """One published figure (a row of the CSV)."""

    id: str
    source: str
    part: str
    hardware: str
    kernel: str
    family: str  # the family that models this kernel; "" when none does
    dtype: str
    causal: bool
    batch: int
    heads: int
    kv_heads: int
    seq_len: int
    seq_len_kv: int
    head_dim: int
    head_dim_v: int
    mode: str
    tflops: float

    @property
    def checked(self) -> bool:
        """Whether a family claims to model this kernel (the test checks it)."""
        return bool(self.family)

    def problem(self) -> AttentionProblem:
        return AttentionProblem(
            batch=self.batch,
            heads=self.heads,
            kv_heads=self.kv_heads,
            seq_len=self.seq_len,
            seq_len_kv=self.seq_len_kv,
            head_dim=self.head_dim,
            head_dim_v=self.head_dim_v,
            dtype="bf16" if self.dtype == "fp16/bf16" else self.dtype,
            causal=self.causal,
        )

    def shape(self) -> str:
        kv = f"/{self.kv_heads}" if self.kv_heads != self.heads else ""
        s = f"{self.seq_len}" + (f"x{self.seq_len_kv}" if self.seq_len_kv != self.seq_len else "")
        d = f"{self.head_dim}" + (f"/{self.head_dim_v}" if self.head_dim_v != self.head_dim else "")
        return f"B{self.batch} H{self.heads}{kv} S{s} d{d}"


def points(path: Path = DATA) -> list[Point]:
    """Every published figure of the data file."""
    with path.open(newline="") as f:
        return [
            Point(
                id=r["id"],
                source=r["source"],
                part=r["part"],
                hardware=r["hardware"],
                kernel=r["kernel"],
                family=r["family"],
                dtype=r["dtype"],
                causal=r["causal"] == "1",
                batch=int(r["batch"]),
                heads=int(r["heads"]),
                kv_heads=int(r["kv_heads"]),
                seq_len=int(r["seq_len"]),
                seq_len_kv=int(r["seq_len_kv"]),
                head_dim=int(r["head_dim"]),
                head_dim_v=int(r["head_dim_v"]),
                mode=r["mode"],
                tflops=float(r["tflops"]),
            )
            for r in csv.DictReader(f)
        ]


def predict(point: Point) -> dict[str, Any]:
    """The prediction of the point's family (or the reference family) and its ratio."""
    family = point.family or REFERENCE_FAMILY
    answer = solve(point.problem(), point.hardware, SolveOptions(kernel=family, top_k=1))
    best = answer.candidates[0]
    ratio = best.predicted_tflops / point.tflops
    return {
        "id": point.id,
        "part": point.part,
        "hardware": point.hardware,
        "kernel": point.kernel,
        "dtype": point.dtype,
        "causal": point.causal,
        "shape": point.shape(),
        "published": point.tflops,
        "family": family,
        "checked": point.checked,
        "pick": best.parameters,
        "predicted": round(best.predicted_tflops, 1),
        "ratio": round(ratio, 3),
        "within": abs(ratio - 1.0) <= TOLERANCE,
    }


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| id | part | kernel | dtype | causal | shape | published | family | predicted | "
        "ratio | checked |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mark = ("yes" if r["within"] else "OUT") if r["checked"] else "-"
        out.append(
            f"| {r['id']} | {r['part']} | {r['kernel']} | {r['dtype']} | "
            f"{'yes' if r['causal'] else 'no'} | {r['shape']} | {r['published']:g} | "
            f"{r['family']} | {r['predicted']:g} | {r['ratio']:.2f} | {mark} |"
        )
    checked = [r for r in rows if r["checked"]]
    inside = sum(r["within"] for r in checked)
    out.append("")
    out.append(
        f"{inside} of {len(checked)} checked rows within {TOLERANCE:.0%} "
        f"({len(rows) - len(checked)} rows of kernels no family models, shown for reference)"
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", nargs="*", help="only these sources (the CSV's `source`)")
    parser.add_argument("--checked", action="store_true", help="only rows a family models")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    chosen = [
        p
        for p in points()
        if (not args.source or p.source in args.source) and (p.checked or not args.checked)
    ]
    rows = [predict(p) for p in chosen]
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
