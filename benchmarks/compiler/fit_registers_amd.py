"""Fit the AMD register estimate's weights (`triton_compiler.registers_amd.AMD_REGISTER_CONSTANTS`)
on the compiled data set's `fit` split, per target, and report them on both splits.

    .venv/bin/python benchmarks/compiler/fit_registers_amd.py [--data CSV]

A grid search (weights in steps of 0.25, the base in steps of 8) for the smallest median
|model - compiled| VGPR+AGPR per lane over the forward rows, with a disagreement on spilling
(yes/no) counted as a miss of 64 registers. docs/model.md 19.10 gives the figures.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import sys
from pathlib import Path

import numpy as np

from tilesolve.solver.families.triton_compiler.flash_loops import forward_kernel
from tilesolve.solver.families.triton_compiler.registers_amd import (
    AmdWeights,
    amd_register_estimate,
)
from tilesolve.solver.families.triton_compiler.target import CompilerTarget

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
SPILL_MISS = 64  # registers a wrong spill verdict counts as
BASES = tuple(range(48, 129, 8))
STEPS = tuple(x / 4 for x in range(0, 13))


def padded(head_dim: int) -> int:
    return max(16, 1 << (head_dim - 1).bit_length())


Groups = list[tuple[object, np.ndarray, np.ndarray, np.ndarray]]


def groups(rows: list[dict[str, str]]) -> Groups:
    """The rows by padded head dim: (kernel, warps, compiled VGPR+AGPR, compiled spills)."""
    out: Groups = []
    for d in sorted({padded(int(r["head_dim"])) for r in rows}):
        mine = [r for r in rows if padded(int(r["head_dim"])) == d]

        def col(name: str, rs: list[dict[str, str]] = mine) -> np.ndarray:
            return np.array([int(r[name]) for r in rs], dtype=np.int64)

        kernel = forward_kernel(col("block_m"), col("block_n"), d, d, 2)
        out.append((kernel, col("num_warps"), col("total_vgprs"), col("vgpr_spills") > 0))
    return out


def errors(parts: Groups, target: str, weights: AmdWeights) -> list[float]:
    """|model - compiled| per row (a wrong spill verdict counts as SPILL_MISS at least)."""
    out: list[float] = []
    for kernel, warps, total, spills in parts:
        est = amd_register_estimate(
            kernel,  # type: ignore[arg-type]
            CompilerTarget.amd(target),
            warps,
            np.zeros_like(warps),
            {target: weights},
        )
        miss = np.abs(est.allocated - total).astype(np.float64)
        miss = np.where((est.spilled > 0) != spills, np.maximum(miss, SPILL_MISS), miss)
        out.extend(miss.tolist())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    with args.data.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok" and r["kernel"] == "fwd"]
    for target in ("gfx942", "gfx950"):
        fit = groups([r for r in rows if r["target"] == target and r["split"] == "fit"])
        validation = groups(
            [r for r in rows if r["target"] == target and r["split"] == "validation"]
        )
        best: tuple[float, AmdWeights] | None = None
        for base, s, q, g in itertools.product(BASES, STEPS, STEPS, STEPS):
            weights = AmdWeights(float(base), s, q, g)
            score = statistics.median(errors(fit, target, weights))
            if best is None or score < best[0]:
                best = (score, weights)
        assert best is not None
        weights = best[1]
        for name, part in (("fit", fit), ("validation", validation)):
            e = errors(part, target, weights)
            print(f"{target} {name}: {len(e)} rows, median miss {statistics.median(e):.1f}")
        print(f"{target}: {weights}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
