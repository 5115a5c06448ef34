"""How often FlashAttention-2's shipped forward tile is tilesolve's top-1 / in its top-3.

The reference rows (`tests/data/fa2_forward_tiles.json`, a copy of the shared reference) are
FA2's launch templates: per head_dim, architecture, causal and dropout. The problem for each
row is the one the issue fixes: batch 4, heads 2048 / head_dim, seq_len 4096, fp16;
sm80 = a100-80gb, sm90 = h100-sxm, sm86/sm89 = rtx-4090. A hit compares (block_m, block_n,
num_warps). Head dims 160 and 224 run one of two releases' kernels (the 160/224 instantiation,
or since v2.8.0/v2.6.2 the 192/256 one): a row is compared with the model's ranking of its own
kernel (`kernel_head_dim` pinned to the row's, its head dim unless the row names one).

    python benchmarks/fa2_agreement.py [--reference PATH] [--json] [--misses]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tilesolve.client.progress import add_quiet_argument, tracked
from tilesolve.solver import AttentionProblem, SolveOptions, solve

ARCH_TO_HARDWARE = {"sm80": "a100-80gb", "sm90": "h100-sxm", "sm86/sm89": "rtx-4090"}
DEFAULT_REFERENCE = Path(__file__).resolve().parents[1] / "tests/data/fa2_forward_tiles.json"


def row_problem(row: dict[str, object]) -> AttentionProblem:
    head_dim = int(row["head_dim"])  # type: ignore[call-overload]
    return AttentionProblem(
        batch=4,
        heads=2048 // head_dim,
        seq_len=4096,
        head_dim=head_dim,
        causal=bool(row["causal"]),
        dropout=0.1 if row["dropout"] else 0.0,
    )


# head dims whose kernel depends on the release (solver/families/fa2/release.py)
TWO_KERNEL_HEAD_DIMS = (160, 224)


def row_options(row: dict[str, object], engine: str) -> SolveOptions:
    """The fa2 top 10 for the row's kernel."""
    head_dim = int(row["head_dim"])  # type: ignore[call-overload]
    pins = {}
    if head_dim in TWO_KERNEL_HEAD_DIMS:
        pins["kernel_head_dim"] = int(row.get("kernel_head_dim", head_dim))  # type: ignore[call-overload]
    return SolveOptions(kernel="fa2", top_k=10, engine=engine, parameter_pins=pins)


def evaluate_rows(
    rows: list[dict[str, object]], engine: str = "exhaustive", quiet: bool = True
) -> list[dict[str, object]]:
    """One record per reference row: the shipped tile, our top 3, and its rank in ours (a
    progress bar on a terminal's stderr unless `quiet`)."""
    out = []
    for row in tracked(rows, "reference rows", quiet, len(rows)):
        hardware = ARCH_TO_HARDWARE[str(row["arch"])]
        answer = solve(row_problem(row), hardware, row_options(row, engine))
        ours = [(c.block_m, c.block_n, c.num_warps) for c in answer.candidates]
        shipped = (row["block_m"], row["block_n"], row["num_warps"])
        rank = ours.index(shipped) + 1 if shipped in ours else None  # type: ignore[arg-type]
        out.append(
            {
                "arch": row["arch"],
                "hardware": hardware,
                "head_dim": row["head_dim"],
                "causal": row["causal"],
                "dropout": row["dropout"],
                "shipped": list(shipped),
                "ours_top3": [list(t) for t in ours[:3]],
                "rank_of_shipped": rank,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true", help="list rows not ranked first")
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    if not args.reference.exists():
        print(f"reference file not found: {args.reference}", file=sys.stderr)
        return 2
    rows = json.loads(args.reference.read_text())
    records = evaluate_rows(rows, quiet=args.quiet)
    top1 = sum(r["rank_of_shipped"] == 1 for r in records)
    top3 = sum(r["rank_of_shipped"] is not None and r["rank_of_shipped"] <= 3 for r in records)  # type: ignore[operator]
    if args.json:
        print(json.dumps({"rows": len(records), "top1": top1, "top3": top3, "records": records}))
        return 0
    n = len(records)
    print(f"rows {n}: top-1 {top1} ({top1 / n:.0%}), top-3 {top3} ({top3 / n:.0%})")
    if args.misses:
        for r in records:
            if r["rank_of_shipped"] != 1:
                print(
                    f"  {r['arch']:9} d={r['head_dim']:3} causal={r['causal']!s:5} "
                    f"dropout={r['dropout']!s:5} shipped {r['shipped']} "
                    f"rank {r['rank_of_shipped']} ours {r['ours_top3']}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
