"""The flex family on ROCm against FlexAttention measured on AMD Instinct parts
(benchmarks/data/published_flex_rocm.csv; docs/model.md 19.10):

- pytorch/pytorch#180720, MI350X (gfx950), fp16, d 128, 64 heads: the default 128 x 64 tile at
  2 stages with 8 and with 4 warps. The 8-wave tile is the one whose waves outnumber its 32x32
  MFMA row tiles and compute every row of S twice (`ChainedDotLayout`, model 0.29.0); the
  measurement checks what the model claims of it: the 4-wave tile is faster on every measured
  shape, by the measured factor within 30%. The rows are predicted on mi350x. Absolute time,
  where the kernel's loop dominates (non-causal, S >= 2048): the 8-wave tile within 30%
  (1.07-1.17x); the 4-wave tile's rows the model does not meet yet (1.32-1.47x below S 16384)
  are xfail(strict=True) with their figures (`NOT_MET`). Below S 2048 and causal, the model is
  1.25-1.99x above: a workgroup's fixed cost the model puts at a third of the measured (docs/
  model.md 19.10), recorded, not asserted.
- meta-pytorch/tritonbench#612, MI300 (gfx942), FlexAttention at PyTorch's then default
  (128 x 64, 8 waves, 1 stage), B 4, 48 heads, d 64: the absolute time within 30% where the
  kernel's work dominates (S >= 512; the S 128 and 256 rows, 79 and 86 us for 0.8 and 3.2
  GFLOP, are the call's fixed cost and are not recorded)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tilesolve.solver import AttentionProblem, SolveOptions
from tilesolve.solver.candidates import CandidateTable
from tilesolve.solver.solve import prepare

from benchmark_module import load_benchmark

DATA = Path(__file__).resolve().parents[1] / "benchmarks/data/published_flex_rocm.csv"
TOLERANCE = 0.30
# The sequence length from which #180720's non-causal rows are checked in absolute time: the
# loop's share of a workgroup's time there is what the model states best (docs/model.md 19.10)
LOOP_DOMINATES = 2048
# Rows the model does not meet yet, by id, with the evidence: the 4-wave tile's steady loop is
# about 1.3x faster in the model than on the MI350X (docs/model.md 19.10), where the 8-wave
# tile's is within 10%
NOT_MET = {
    "pytorch180720-b8s2048-w4": "the model 857 against 584 TFLOP/s (1.47x)",
    "pytorch180720-b4s4096-w4": "the model 889 against 646 TFLOP/s (1.38x)",
    "pytorch180720-b2s8192-w4": "the model 906 against 685 TFLOP/s (1.32x)",
}
experts = load_benchmark("amd_experts")  # its index_of and tflops_at read a candidate table


def _rows(source: str) -> list[dict[str, str]]:
    with DATA.open(newline="") as f:
        return [r for r in csv.DictReader(f) if r["source"] == source]


def _pairs() -> list[tuple[dict[str, str], dict[str, str]]]:
    """(8-wave row, 4-wave row) of each shape #180720 measured."""
    by_shape: dict[str, dict[str, dict[str, str]]] = {}
    for r in _rows("pytorch180720"):
        shape = r["id"].rsplit("-", 1)[0]
        by_shape.setdefault(shape, {})[r["num_warps"]] = r
    return [(pair["8"], pair["4"]) for pair in by_shape.values()]


def _table(row: dict[str, str]) -> CandidateTable:
    problem = AttentionProblem(
        batch=int(row["batch"]),
        heads=int(row["heads"]),
        seq_len=int(row["seq_len"]),
        head_dim=int(row["head_dim"]),
        dtype=row["dtype"],
        causal=row["causal"] == "1",
    )
    return prepare(problem, row["hardware"], SolveOptions(kernel="flex", engine="exhaustive"))


def _predicted(row: dict[str, str], table: CandidateTable) -> float:
    """The model's TFLOP/s of the measured configuration (Triton's default MFMA for 128 x 64,
    32x32; no waves_per_eu; the row's kpack)."""
    config = {
        "block_m": int(row["block_m"]),
        "block_n": int(row["block_n"]),
        "num_warps": int(row["num_warps"]),
        "num_stages": int(row["num_stages"]),
        "waves_per_eu": 0,
        "matrix_instr_nonkdim": 32,
        "kpack": int(row["kpack"]),
    }
    index = experts.index_of(table, config)
    return float(experts.tflops_at(table, index, table.problem))


def test_the_data_set() -> None:
    pairs = _pairs()
    assert len(pairs) == 7
    for eight, four in pairs:
        assert float(four["tflops"]) > float(eight["tflops"])
    assert len(_rows("tritonbench612")) == 4
    for r in _rows("tritonbench612"):
        flops = 4 * int(r["batch"]) * int(r["heads"]) * int(r["seq_len"]) ** 2 * int(r["head_dim"])
        assert flops / float(r["time_us"]) / 1e6 == pytest.approx(float(r["tflops"]), abs=0.1)


@pytest.mark.parametrize(("eight", "four"), _pairs(), ids=lambda r: r["id"].rsplit("-", 1)[0])
def test_the_four_wave_tile_wins_by_the_measured_factor(
    eight: dict[str, str], four: dict[str, str]
) -> None:
    table = _table(four)
    predicted = _predicted(four, table) / _predicted(eight, table)
    measured = float(four["tflops"]) / float(eight["tflops"])
    assert predicted > 1.0
    assert abs(predicted / measured - 1.0) <= TOLERANCE, (predicted, measured)


@pytest.mark.parametrize("row", _rows("tritonbench612"), ids=lambda r: r["id"])
def test_the_former_default_on_gfx942_within_30_percent(row: dict[str, str]) -> None:
    predicted = _predicted(row, _table(row))
    assert abs(predicted / float(row["tflops"]) - 1.0) <= TOLERANCE, predicted


def _loop_rows() -> list[object]:
    rows = [
        r
        for r in _rows("pytorch180720")
        if r["causal"] == "0" and int(r["seq_len"]) >= LOOP_DOMINATES
    ]
    return [
        pytest.param(
            r,
            id=r["id"],
            marks=[pytest.mark.xfail(strict=True, reason=f"issue 26: {NOT_MET[r['id']]}")]
            if r["id"] in NOT_MET
            else [],
        )
        for r in rows
    ]


@pytest.mark.parametrize("row", _loop_rows())
def test_the_mi350x_rows_within_30_percent_where_the_loop_dominates(row: dict[str, str]) -> None:
    assert row["hardware"] == "mi350x"
    predicted = _predicted(row, _table(row))
    assert abs(predicted / float(row["tflops"]) - 1.0) <= TOLERANCE, predicted


def test_not_met_names_checked_rows() -> None:
    ids = {r["id"] for r in _rows("pytorch180720")}
    assert set(NOT_MET) <= ids
