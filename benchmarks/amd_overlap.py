"""How much the resident workgroups of a CU overlap each other's dependent phases: the fit of
`rocm.device.WORKGROUP_OVERLAP` (beta; docs/model.md 19.5, "How much resident workgroups
overlap") and its held-out check, against published AMD attention throughput.

For each beta of a 0.05 grid from 0 to 1 the model predicts (the shipped tile of each row, as
`amd_published.py` and `tests/test_flex_rocm_measured.py` do) and this prints, per source, the
geometric mean of predicted / published and the worst row's factor:

- `aiter_ck` (the fit): aiter's CK path on MI355X (ROCm/FlyDSL PRs 225 and 629), eleven of its
  13 rows at two resident workgroups a CU (the two B 1 S 128 rows have fewer workgroups than
  CUs); beta is the grid value whose geometric mean is nearest 1;
- held out: `aiter_triton` (ROCm/aiter PR 4147, gfx950), `flex` (PyTorch #180720 on MI350X and
  tritonbench#612 on MI300, the non-causal rows at S >= 2048, where the loop dominates) and
  `ck_tile` (CK at d 256 on MI355X, ROCm/aiter PR 5403: one workgroup a CU, which beta does
  not touch).

    .venv/bin/python benchmarks/amd_overlap.py
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

from tilesolve.solver import AttentionProblem, SolveOptions
from tilesolve.solver.candidates import CandidateTable
from tilesolve.solver.families.rocm import schedule
from tilesolve.solver.solve import prepare

# the scripts beside this one (also when a test loads this file by its path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import amd_experts
import amd_published

GRID = tuple(round(0.05 * i, 2) for i in range(21))
FIT_SOURCE = "aiter_ck"
FLEX_DATA = Path(__file__).resolve().parent / "data" / "published_flex_rocm.csv"
# the length from which a workgroup's loop dominates its time (docs/model.md 19.10)
LOOP_DOMINATES = 2048


def flex_rows() -> list[dict[str, str]]:
    with FLEX_DATA.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if r["causal"] == "0" and int(r["seq_len"]) >= LOOP_DOMINATES]


def flex_table(row: dict[str, str]) -> CandidateTable:
    """The flex family's candidate table for a measured row's problem on its part."""
    problem = AttentionProblem(
        batch=int(row["batch"]),
        heads=int(row["heads"]),
        seq_len=int(row["seq_len"]),
        head_dim=int(row["head_dim"]),
        dtype=row["dtype"],
        causal=row["causal"] == "1",
    )
    return prepare(problem, row["hardware"], SolveOptions(kernel="flex", engine="exhaustive"))


def flex_config(row: dict[str, str]) -> dict[str, int]:
    """A measured row's configuration (Triton's default MFMA for 128 x 64, 32x32; no
    waves_per_eu; the row's kpack)."""
    return {
        "block_m": int(row["block_m"]),
        "block_n": int(row["block_n"]),
        "num_warps": int(row["num_warps"]),
        "num_stages": int(row["num_stages"]),
        "waves_per_eu": 0,
        "matrix_instr_nonkdim": 32,
        "kpack": int(row["kpack"]),
    }


def flex_predicted(row: dict[str, str], table: CandidateTable) -> float:
    """The model's TFLOP/s of the measured configuration (`flex_config`)."""
    index = amd_experts.index_of(table, flex_config(row))
    return float(amd_experts.tflops_at(table, index, table.problem))


def log_ratios() -> dict[str, list[float]]:
    """log(predicted / published) of every row, by source, at the current beta."""
    out: dict[str, list[float]] = {}
    for point in amd_published.points():
        if point.checked:
            ratio = amd_published.predict(point)["ratio"]
            out.setdefault(point.kernel, []).append(math.log(ratio))
    out["flex"] = [
        math.log(flex_predicted(r, flex_table(r)) / float(r["tflops"])) for r in flex_rows()
    ]
    return out


def sweep() -> list[tuple[float, dict[str, tuple[float, float]]]]:
    """(beta, {source: (geometric-mean ratio, worst factor)}) over the grid, set where the
    round reads it (`rocm.schedule`'s name for `rocm.device.WORKGROUP_OVERLAP`); the shipped beta
    is restored after."""
    shipped = schedule.WORKGROUP_OVERLAP
    found: list[tuple[float, dict[str, tuple[float, float]]]] = []
    try:
        for beta in GRID:
            schedule.WORKGROUP_OVERLAP = beta
            by_source = log_ratios()
            found.append(
                (
                    beta,
                    {
                        s: (math.exp(statistics.mean(v)), math.exp(max(abs(x) for x in v)))
                        for s, v in by_source.items()
                    },
                )
            )
    finally:
        schedule.WORKGROUP_OVERLAP = shipped
    return found


def fitted(found: list[tuple[float, dict[str, tuple[float, float]]]]) -> float:
    """The grid's beta whose fit-source geometric mean is nearest 1."""
    return min(found, key=lambda row: abs(math.log(row[1][FIT_SOURCE][0])))[0]


def main() -> int:
    found = sweep()
    sources = sorted(found[0][1], key=lambda s: (s != FIT_SOURCE, s))
    print("beta | " + " | ".join(f"{s} (mean, worst)" for s in sources))
    for beta, by_source in found:
        cells = " | ".join(f"{by_source[s][0]:.3f}, {by_source[s][1]:.2f}" for s in sources)
        print(f"{beta:.2f} | {cells}")
    best = fitted(found)
    print(f"fitted on {FIT_SOURCE}: beta = {best:.2f} (shipped: {schedule.WORKGROUP_OVERLAP})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
