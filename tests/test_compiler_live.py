"""A live compile of a handful of the committed data set's rows (no GPU): the installed Triton
must still allocate what benchmarks/data/compiler/triton_resources.csv says, so that the data
cannot silently rot when the compiler changes (pyproject pins the Triton it was made with).

Skipped where triton is not importable; about 15 s (one Triton import, five small compiles).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks/compiler"))

import toolchain  # noqa: E402
from configs import TARGETS  # noqa: E402

DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
# One row of each of these (target, kernel) groups: its fastest compile (CUDA and AMD, both
# kernels, the mma.sync, wgmma and sm120 paths).
GROUPS = (("sm80", "fwd"), ("sm90", "fwd"), ("sm86", "bwd"), ("gfx942", "fwd"), ("sm120", "fwd"))
CUDA_COLUMNS = ("shared_bytes", "regs", "spill_store_bytes", "static_shared_bytes")
AMD_COLUMNS = ("shared_bytes", "vgprs", "agprs", "total_vgprs", "vgpr_spills")


def _chosen() -> list[dict[str, str]]:
    with DATA.open(newline="") as f:
        ok = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    return [
        min(
            (r for r in ok if (r["target"], r["kernel"]) == group),
            key=lambda r: (float(r["compile_s"]), r["key"]),
        )
        for group in GROUPS
    ]


@pytest.fixture(scope="module")
def compiler(tmp_path_factory: pytest.TempPathFactory) -> toolchain.Compiler:
    return toolchain.Compiler(tmp_path_factory.mktemp("triton"))


@pytest.mark.parametrize("row", _chosen(), ids=lambda r: r["key"])
def test_recorded_row_compiles_the_same(row: dict[str, str], compiler: toolchain.Compiler) -> None:
    fresh = compiler.compile(row)
    assert fresh["status"] == "ok", fresh["message"]
    assert fresh["triton_version"] == row["triton_version"], (
        "the installed Triton is not the one the data set was made with: rerun "
        "benchmarks/compiler/collect.py (benchmarks/data/compiler/README.md)"
    )
    assert fresh["assembler"] == row["assembler"]
    columns = CUDA_COLUMNS if TARGETS[row["target"]].backend == "cuda" else AMD_COLUMNS
    for column in columns:
        assert str(fresh[column]) == row[column], f"{row['key']}: {column}"


def test_a_lower_register_cap_is_obeyed(compiler: toolchain.Compiler) -> None:
    """`maxnreg` (cap_probe.py) reaches ptxas: the sm86 backward row compiled under a cap
    below what it uses reports at most that many registers."""
    row = next(r for r in _chosen() if (r["target"], r["kernel"]) == ("sm86", "bwd"))
    cap = max(24, int(row["regs"]) // 2 // 8 * 8)
    assert cap < int(row["regs"])
    fresh = compiler.compile(row, maxnreg=cap)
    assert fresh["status"] == "ok", fresh["message"]
    assert int(fresh["regs"]) <= cap


def test_a_register_cap_is_refused_on_amd(compiler: toolchain.Compiler) -> None:
    row = next(r for r in _chosen() if TARGETS[r["target"]].backend == "hip")
    with pytest.raises(ValueError, match="CUDA option"):
        compiler.compile(row, maxnreg=64)


def test_the_peak_live_registers_are_measured_again(compiler: toolchain.Compiler) -> None:
    """`measure_peak_live` (collect.py --peak-live) gives the sm80 forward row's recorded peak
    live registers, and the reassembly it analyses allocates what the row records."""
    row = next(r for r in _chosen() if (r["target"], r["kernel"]) == ("sm80", "fwd"))
    if not row.get("peak_live_regs"):
        pytest.skip("the row has no peak-live measurement yet")
    fresh = compiler.measure_peak_live(row)
    for column in toolchain.PEAK_LIVE_COLUMNS:
        assert str(fresh[column]) == row[column], f"{row['key']}: {column}"
    assert fresh["peak_live_used_regs"] == int(row["regs"])


def test_a_full_compile_measures_the_peak_live_registers(compiler: toolchain.Compiler) -> None:
    """`Compiler.compile` of a CUDA row fills the peak-live columns from its own PTX (sm90:
    the bundled ptxas-blackwell, the row's own assembler, whose allocation it reports)."""
    row = next(r for r in _chosen() if (r["target"], r["kernel"]) == ("sm90", "fwd"))
    fresh = compiler.compile(row)
    assert fresh["status"] == "ok", fresh["message"]
    assert fresh["peak_live_assembler"] == row["assembler"]
    assert fresh["peak_live_used_regs"] == fresh["regs"]
    assert 0 < fresh["peak_live_regs"] <= fresh["regs"]
