"""Issue 26's check against published AMD Instinct throughput: every figure of
`benchmarks/data/published_amd_attention.csv` whose kernel a family models (the `family`
column: ck for CK tile FMHA, aiter's CK path; triton for aiter's Triton kernel) predicted by that
family within 30% (docs/model.md 19.11). A figure the model cannot meet yet is an
xfail(strict=True) with its evidence (`NOT_MET`), so that meeting it turns into a failure that
asks for the mark to go; the threshold is the issue's and is not loosened per row."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    """benchmarks/amd_published.py, which reads the data file and predicts each row."""
    spec = importlib.util.spec_from_file_location(
        "amd_published", ROOT / "benchmarks/amd_published.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


published = _load()
POINTS = published.points()
CHECKED = [p for p in POINTS if p.checked]
README = (ROOT / "benchmarks/data/README.md").read_text()

D256 = (
    "d 256 varlen s=5121: CK 436 TFLOP/s and aiter's assembly kernel 497-509, 2.7x below the "
    "same assembly family at d 128 (aiter3390); no per-FLOP cost of the model grows with the "
    "head dim, and the published figure's convention is not stated"
)
TRITON = (
    "aiter's Triton MHA on gfx950 (part not named) runs below CK where the model puts the triton "
    "family above its ck pick: the model has no term for what the Triton kernel's schedule adds"
)
# Figures the model does not meet yet, by row id, with the evidence (issue 26).
NOT_MET: dict[str, str] = {
    "aiter5403-01": D256,
    "aiter5403-02": D256,
    **{f"aiter4147-{i:02d}": TRITON for i in range(1, 13)},
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
