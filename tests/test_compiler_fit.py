"""benchmarks/compiler/fit_registers.py's live-state regression on the measured peak live
registers (docs/model.md 16.11), on synthetic rows: no data set, no Triton."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks/compiler"))

import fit_registers as fr  # noqa: E402

TRUE = {"base": 40.0, "scores": 1.25, "a_fragments": 0.5, "b_fragments": 0.75, "staging": 0.25}
MARGIN = 8.0


def _rows(n: int = 120, seed: int = 0) -> fr.Rows:
    """One-loop kernels on mma.sync whose peak live registers are a linear function of the
    terms, less MARGIN; the rows whose estimate exceeds the cap spill (their peak censored)."""
    rng = np.random.default_rng(seed)
    terms = np.zeros((n, 7))  # accumulators, scores, chain, a, b, staging, addresses
    terms[:, 0] = rng.choice([32, 64, 128], n)
    terms[:, 1] = rng.choice([8, 16, 32, 64], n)
    terms[:, 2] = terms[:, 1] / 2
    terms[:, 3] = rng.choice([0, 16, 32, 64, 128], n)
    terms[:, 4] = rng.choice([4, 8, 16, 32, 64], n)
    terms[:, 5] = rng.choice([0, 16, 32], n)
    # every tenth row needs exactly the cap: ptxas uses all of it, MARGIN above its peak
    exact = np.arange(n) % 10 == 0
    terms[exact, :5] = [128, 32, 16, 0, 16]
    terms[exact, 5] = (255 - (40 + 128 + 1.25 * 32 + 16 + 0.75 * 16)) / 0.25
    need = (
        TRUE["base"] + terms[:, 0] + TRUE["scores"] * terms[:, 1] + terms[:, 2]
        + TRUE["a_fragments"] * terms[:, 3] + TRUE["b_fragments"] * terms[:, 4]
        + TRUE["staging"] * terms[:, 5]
    )  # fmt: skip
    cap = np.full(n, 255)
    spills = need > cap
    regs = np.minimum(cap, np.ceil(need)).astype(int)
    peak = np.where(spills, cap - 2, need - MARGIN)
    keys = [f"sm86/row{i}" for i in range(n)]
    return fr.Rows(
        keys, ["sm86"] * n, ["fit"] * n, [terms], [np.zeros(n, dtype=int)], cap, regs,
        spills, peak,
    )  # fmt: skip


def test_the_allocation_margin_is_read_off_the_rows_at_their_cap() -> None:
    """The rows that use their whole cap without spilling, and no other (the spilling rows,
    whose peak is censored, are at the cap too)."""
    rows = _rows()
    assert rows.spills.any() and (rows.regs == rows.cap).sum() > rows.spills.sum()
    assert fr.allocation_margin(rows, np.ones(len(rows.keys), dtype=bool)) == MARGIN


def test_the_regression_recovers_a_linear_live_state() -> None:
    rows = _rows()
    mask = np.ones(len(rows.keys), dtype=bool)
    live = fr.fit_live_regression(rows, mask, [0], MARGIN, np.zeros((len(fr.PATHS), len(fr.TERMS))))
    for j, term in enumerate(fr.TERMS):
        assert abs(live[0, j] - TRUE.get(term, 0.0)) < 1e-3, term
    assert fr.agreement(rows, live, mask) == 1.0


def test_cross_validation_counts_every_fit_row_once_per_draw() -> None:
    rows = _rows(60, seed=1)
    right, total, error = fr.cross_validate(rows, "regression", draws=2)
    assert total == 2 * 60
    assert right == total
    assert error is not None and error < 1e-2
