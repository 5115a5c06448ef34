"""Issue 26's check against published AMD Instinct throughput: every figure of
`benchmarks/data/published_amd_attention.csv` whose kernel a family models (the `family`
column: ck for CK tile FMHA, aiter's CK path; triton for aiter's Triton kernel) predicted by that
family within 30% (docs/model.md 19.11): the prediction of the tile the published kernel ran
(its dispatch, `benchmarks/data/expert_amd_tiles.csv`), as DESIGN.md's quality target states
it; the family's pick is reported beside it. A figure the model cannot meet yet is an
xfail(strict=True) with its evidence (`NOT_MET`), so that meeting it turns into a failure that
asks for the mark to go; the threshold is the issue's and is not loosened per row."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from benchmark_module import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


published = load_benchmark("amd_published")
POINTS = published.points()
CHECKED = [p for p in POINTS if p.checked]
README = (ROOT / "benchmarks/data/README.md").read_text()

# Figures the model does not meet yet, by row id, with the evidence (issue 26). Empty since
# the check reads the shipped tile's prediction (DESIGN.md's target; docs/model.md 19.11): the
# family's pick stays in the report, and its over-prediction at d 256 and for Triton at S 256
# is the ranking's question (docs/model.md 19.8), not the cost of the tile that ran.
NOT_MET: dict[str, str] = {}


def test_every_row_is_well_formed_and_its_source_documented() -> None:
    ids = [p.id for p in POINTS]
    assert len(ids) == len(set(ids))
    with (ROOT / "benchmarks/data/published_amd_attention.csv").open() as f:
        conventions = {line.rsplit(",", 1)[1].strip() for line in f.readlines()[1:]}
    assert conventions <= {"halved", "unstated"}
    for p in POINTS:
        assert f"`{p.source}`" in README, p.source
        assert p.family in ("", "ck", "triton"), p
        assert p.hardware in ("mi300x", "mi325x", "mi355x"), p
        assert p.tflops > 0 and p.seq_len > 0 and p.heads % p.kv_heads == 0, p
    assert set(NOT_MET) <= {p.id for p in CHECKED}


@pytest.mark.parametrize(
    "point",
    [
        pytest.param(
            p,
            id=p.id,
            marks=[pytest.mark.xfail(strict=True, reason=f"issue 26: {NOT_MET[p.id]}")]
            if p.id in NOT_MET
            else [],
        )
        for p in CHECKED
    ],
)
def test_prediction_within_30_percent_of_the_published_figure(point: object) -> None:
    row = published.predict(point)
    assert abs(row["ratio"] - 1.0) <= published.TOLERANCE, row


@pytest.mark.parametrize("point", CHECKED, ids=[p.id for p in CHECKED])
def test_the_shipped_tile_is_recorded_feasible_and_not_above_the_pick(point: object) -> None:
    """Every checked row has the tile its kernel dispatched; the model accepts it (a refused
    shipped tile means the model is wrong) and predicts it no faster than its own pick (rank
    1 is the fastest configuration the model accepts)."""
    row = published.predict(point)
    assert row["shipped"] is not None and row["shipped_feasible"], row
    assert row["predicted"] <= row["pick_predicted"] + 0.05, row


# A published change over seq_len smaller than this is flat within the measurement: no trend
TREND_STEP = 0.05


def _series() -> list[list[object]]:
    """The checked rows as series over seq_len: the same source, part, kernel, dtype, mask,
    heads and head dims, seq_len_kv equal to seq_len, in order of seq_len."""
    groups: dict[tuple[object, ...], list[object]] = {}
    for p in CHECKED:
        if p.seq_len != p.seq_len_kv:
            continue
        key = (p.source, p.part, p.kernel, p.dtype, p.causal, p.heads, p.kv_heads, p.head_dim)
        groups.setdefault(key, []).append(p)
    return [sorted(g, key=lambda p: p.seq_len) for g in groups.values() if len(g) > 1]


def test_the_predictions_follow_the_published_trend_over_seq_len() -> None:
    """DESIGN.md's quality target asks the shipped tile's prediction to follow the published
    trend over seq_len: wherever a series' published figure rises or falls by more than
    TREND_STEP from one length to the next, the prediction moves the same way."""
    steps = 0
    for series in _series():
        predicted = {p.id: published.predict(p)["predicted"] for p in series}
        for a, b in pairwise(series):
            if a.seq_len == b.seq_len:
                continue
            change = b.tflops / a.tflops - 1.0
            if abs(change) <= TREND_STEP:
                continue
            steps += 1
            moved = predicted[b.id] - predicted[a.id]
            assert moved * change > 0, (a.id, b.id, change, predicted[a.id], predicted[b.id])
    assert steps >= 10  # the data has series to check: aiter's CK path and Triton rows
