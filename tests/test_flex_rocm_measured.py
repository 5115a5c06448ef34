"""The flex family on ROCm against FlexAttention measured on a gfx950 part
(benchmarks/data/published_flex_rocm.csv, pytorch/pytorch#180720: MI350X, fp16, d 128, 64
heads, the default 128 x 64 tile at 2 stages with 8 and with 4 warps; docs/model.md 19.10).

The 8-wave tile is the one whose waves outnumber its 32x32 MFMA row tiles and compute every row
of S twice (`ChainedDotLayout`, model 0.29.0). What the model claims of it, the measurement
checks: the 4-wave tile is faster on every measured shape, by the measured factor within 30%.
The absolute figures are predicted on mi355x (MI350X is the same gfx950 part at a 2.2 GHz peak
engine clock against 2.4, not in the catalog) and are not asserted: the model is 1.2-1.8x
above them, most at the shortest sequences (docs/model.md 19.10)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from tilesolve.solver import AttentionProblem, SolveOptions
from tilesolve.solver.candidates import CandidateTable
from tilesolve.solver.solve import prepare

DATA = Path(__file__).resolve().parents[1] / "benchmarks/data/published_flex_rocm.csv"
TOLERANCE = 0.30


def _pairs() -> list[tuple[dict[str, str], dict[str, str]]]:
    """(8-wave row, 4-wave row) of each measured shape."""
    with DATA.open(newline="") as f:
        rows = list(csv.DictReader(f))
    by_shape: dict[str, dict[str, dict[str, str]]] = {}
    for r in rows:
        shape = r["id"].rsplit("-", 1)[0]
        by_shape.setdefault(shape, {})[r["num_warps"]] = r
    return [(pair["8"], pair["4"]) for pair in by_shape.values()]


def _predicted(row: dict[str, str], table: CandidateTable) -> float:
    """The model's TFLOP/s of the measured configuration (Triton's default MFMA for 128 x 64,
    32x32; no waves_per_eu; kpack 1, which gfx950 forces)."""
    cfg = table.cfg
    wanted = {
        "block_m": int(row["block_m"]),
        "block_n": int(row["block_n"]),
        "num_warps": int(row["num_warps"]),
        "num_stages": int(row["num_stages"]),
        "waves_per_eu": 0,
        "matrix_instr_nonkdim": 32,
        "kpack": 1,
    }
    mask = np.all([cfg[k] == v for k, v in wanted.items()], axis=0)
    (index,) = np.flatnonzero(mask)
    return float(table.problem.flops / table.perf.time_us[index] / 1e6)


def test_the_data_set() -> None:
    pairs = _pairs()
    assert len(pairs) == 7
    for eight, four in pairs:
        assert float(four["tflops"]) > float(eight["tflops"])


@pytest.mark.parametrize(("eight", "four"), _pairs(), ids=lambda r: r["id"].rsplit("-", 1)[0])
def test_the_four_wave_tile_wins_by_the_measured_factor(
    eight: dict[str, str], four: dict[str, str]
) -> None:
    problem = AttentionProblem(
        batch=int(four["batch"]),
        heads=int(four["heads"]),
        seq_len=int(four["seq_len"]),
        head_dim=int(four["head_dim"]),
        dtype=four["dtype"],
        causal=four["causal"] == "1",
    )
    table = prepare(problem, four["hardware"], SolveOptions(kernel="flex", engine="exhaustive"))
    predicted = _predicted(four, table) / _predicted(eight, table)
    measured = float(four["tflops"]) / float(eight["tflops"])
    assert predicted > 1.0
    assert abs(predicted / measured - 1.0) <= TOLERANCE, (predicted, measured)
