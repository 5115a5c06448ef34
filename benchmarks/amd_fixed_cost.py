"""Where the AMD predictions lose time to the part: each published row's measured time against
the model's for the shipped tile, and the difference spread over the rounds of resident
workgroups the grid runs (docs/model.md 19.10, "What a workgroup costs beyond its loop").

A round is one workgroup on every slot (CUs x resident workgroups a CU); the excess a round is
(measured - predicted) / max(rounds, 1), in microseconds. A cost the model lacks that comes once
per workgroup (a prologue, an epilogue, a dispatch) shows as an excess a round that stays put as
the sequence grows; one that comes with every iteration grows with it. The rows: every checked
row of `benchmarks/data/published_amd_attention.csv` (aiter's CK path and CK on MI355X, aiter's
Triton kernel on gfx950; `amd_published.py`) and every FlexAttention row of
`benchmarks/data/published_flex_rocm.csv` (PyTorch #180720 on MI350X, tritonbench#612 on
MI300). Nothing here is fitted or fed back into the model.

    .venv/bin/python benchmarks/amd_fixed_cost.py [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tilesolve.solver import AttentionProblem
from tilesolve.solver.candidates import CandidateTable

# the scripts beside this one (also when a test loads this file by its path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import amd_experts
import amd_overlap
import amd_published

# below this many iterations a workgroup the fixed costs are a visible share of its time
SHORT_ITERATIONS = 20


@dataclass(frozen=True)
class Excess:
    """One published row against the model's time for its shipped tile."""

    id: str
    source: str
    hardware: str
    causal: bool
    seq_len: int
    workgroups_per_cu: float
    rounds: float
    iterations: float
    predicted_us: float
    measured_us: float
    excess_per_round_us: float
    loop_per_round_us: float

    @property
    def ratio(self) -> float:
        return self.measured_us / self.predicted_us


def excess(
    row_id: str,
    source: str,
    problem: AttentionProblem,
    hardware: str,
    table: CandidateTable,
    config: dict[str, int],
    measured_tflops: float,
) -> Excess:
    """The row's figures: `config` the shipped tile in `table`, the family's candidates."""
    i = amd_experts.index_of(table, config)
    predicted_us = float(table.perf.time_us[i])
    figures = table.perf.figures
    resident = float(figures["workgroups_per_cu"][i])
    iterations = float(figures["iterations_per_workgroup"][i])
    round_us = float(figures["round_us"][i])
    measured_us = problem.flops / (measured_tflops * 1e6)
    rounds = float(table.perf.waves[i])  # workgroups over CUs x resident, as the model spreads them
    return Excess(
        id=row_id,
        source=source,
        hardware=hardware,
        causal=problem.causal,
        seq_len=problem.seq_len,
        workgroups_per_cu=resident,
        rounds=rounds,
        iterations=iterations,
        predicted_us=predicted_us,
        measured_us=measured_us,
        excess_per_round_us=(measured_us - predicted_us) / max(rounds, 1.0),
        loop_per_round_us=iterations * round_us,
    )


def published_rows() -> list[Excess]:
    """The checked rows of the published AMD file, at their shipped tiles."""
    out = []
    for point in amd_published.points():
        found = amd_published.shipped_candidates(point) if point.checked else None
        if found is None:
            continue
        _, table, config = found
        out.append(
            excess(
                point.id, point.kernel, table.problem, point.hardware, table, config, point.tflops
            )
        )
    return out


def flex_rows() -> list[Excess]:
    """Every measured FlexAttention row, at its measured configuration."""
    with amd_overlap.FLEX_DATA.open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        table = amd_overlap.flex_table(r)
        config = amd_overlap.flex_config(r)
        source = f"flex ({r['source']})"
        out.append(
            excess(r["id"], source, table.problem, r["hardware"], table, config, float(r["tflops"]))
        )
    return out


def summary(rows: list[Excess]) -> dict[str, dict[str, Any]]:
    """Per source: the median excess a round over its short rows (fewer than SHORT_ITERATIONS
    iterations a workgroup) and the range of measured / predicted over them."""
    out: dict[str, dict[str, Any]] = {}
    for source in dict.fromkeys(r.source for r in rows):
        short = [r for r in rows if r.source == source and r.iterations < SHORT_ITERATIONS]
        if not short:
            continue
        out[source] = {
            "short_rows": len(short),
            "median_excess_per_round_us": round(
                statistics.median(r.excess_per_round_us for r in short), 2
            ),
            "ratio_range": (
                round(min(r.ratio for r in short), 2),
                round(max(r.ratio for r in short), 2),
            ),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the rows and summary as JSON")
    args = parser.parse_args(argv)
    rows = published_rows() + flex_rows()
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows], "summary": summary(rows)}, indent=1))
        return 0
    print(
        "| id | part | causal | S | WGs a CU | rounds | iterations | predicted us | measured us "
        "| measured / predicted | excess a round, us | loop a round, us |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.id} | {r.hardware} | {'yes' if r.causal else 'no'} | {r.seq_len} | "
            f"{r.workgroups_per_cu:.0f} | {r.rounds:.2f} | {r.iterations:.1f} | "
            f"{r.predicted_us:.1f} | {r.measured_us:.1f} | {r.ratio:.2f} | "
            f"{r.excess_per_round_us:.2f} | {r.loop_per_round_us:.2f} |"
        )
    print()
    for source, s in summary(rows).items():
        lo, hi = s["ratio_range"]
        print(
            f"{source}: {s['short_rows']} short rows (< {SHORT_ITERATIONS} iterations a "
            f"workgroup), median excess {s['median_excess_per_round_us']} us a round, "
            f"measured / predicted {lo}-{hi}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
