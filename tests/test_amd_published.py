"""Issue 26's check against published AMD Instinct throughput: every figure of
`benchmarks/data/published_amd_attention.csv` whose kernel a family models (the `family`
column: ck for CK tile FMHA, aiter's CK path; triton for aiter's Triton kernel) predicted by that
family within 30% (docs/model.md 19.11). A figure the model cannot meet yet is an
xfail(strict=True) with its evidence (`NOT_MET`), so that meeting it turns into a failure that
asks for the mark to go; the threshold is the issue's and is not loosened per row."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark_module import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


published = load_benchmark("amd_published")
POINTS = published.points()
CHECKED = [p for p in POINTS if p.checked]
README = (ROOT / "benchmarks/data/README.md").read_text()

D256 = (
    "d 256 varlen s=5121: the model's pick (two workgroups a CU: 128 x 64 qs, kK0 64, which "
    "keeps Q in LDS) predicts 765-858 TFLOP/s where CK ran 436 and aiter's assembly kernel "
    "497-509; CK's own tile (128 x 64, kN1 256, qr, one workgroup a CU) is predicted at 448 and "
    "417 (1.03, 0.96): the miss is the ranking of the two-workgroup d 256 tiles, which neither "
    "CK nor the assembly kernels ship (docs/model.md 19.8, 19.11)"
)
TRITON = (
    "aiter's Triton MHA on gfx950 (part not named) at S 256 and S 1024 x 4096: the model's picks "
    "(64 x 32 at waves_per_eu 4 at S 256; 128 x 64 at 2 stages at S 1024 x 4096) predict "
    "1.33-1.42 of the figure, while aiter's own default (128 x 64, 4 waves, 1 stage, "
    "waves_per_eu 2) is predicted at 1.20-1.27 of it: the ranking of the Triton configurations, "
    "not their calibration (docs/model.md 19.11)"
)
# Figures the model does not meet yet, by row id, with the evidence (issue 26).
NOT_MET: dict[str, str] = {
    "aiter5403-01": D256,
    "aiter5403-02": D256,
    **{f"aiter4147-{i:02d}": TRITON for i in (1, 4, 5, 9)},
}


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
