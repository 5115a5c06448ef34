"""Fit the AMD register estimate's weights (`triton_compiler.registers_amd.AMD_REGISTER_CONSTANTS`)
on the compiled data set's `fit` split, per target, and report them on both splits.

    .venv/bin/python benchmarks/compiler/fit_registers_amd.py [--data CSV]

The rows are the forward rows `compare.py` sets against the model on AMD: compiled, within the
target's LDS limit, num_stages within the ROCm kernel's domain. A grid search (the base in
steps of 8, the weights in steps of 0.25) for the smallest median |model - compiled| VGPR+AGPR
per lane (`total_vgprs`), among the weights whose spill verdicts (yes/no) agree on at least 90%
of the rows where any do. docs/model.md 19.10 gives the figures.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilesolve.solver.families.triton_compiler.flash_loops import forward_kernel
from tilesolve.solver.families.triton_compiler.registers_amd import (
    AmdWeights,
    launch_cap,
    live_estimate,
    loop_terms,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
LDS_LIMIT = {"gfx942": 65536, "gfx950": 163840}
MAX_STAGES = 3
SPILLS_AGREE = 0.90
BASES = tuple(range(24, 137, 8))
ACCUMULATORS = (0.5, 0.75, 1.0, 1.25)
STEPS = tuple(x / 4 for x in range(13))


def padded(head_dim: int) -> int:
    return max(16, 1 << (head_dim - 1).bit_length())


@dataclass(frozen=True)
class Rows:
    """The terms of each row, and what the compiler allocated."""

    terms: dict[str, np.ndarray]
    cap: np.ndarray
    total: np.ndarray
    spills: np.ndarray

    @classmethod
    def of(cls, rows: list[dict[str, str]]) -> Rows:
        terms: dict[str, list[float]] = {}
        for r in rows:
            one = {k: np.array([int(r[k])]) for k in ("block_m", "block_n", "num_warps")}
            d = padded(int(r["head_dim"]))
            kernel = forward_kernel(one["block_m"], one["block_n"], d, d, 2)
            for name, value in loop_terms(kernel.loops[0], one["num_warps"]).items():
                terms.setdefault(name, []).append(float(value[0]))
        warps = np.array([int(r["num_warps"]) for r in rows])
        return cls(
            {k: np.array(v) for k, v in terms.items()},
            launch_cap(warps, np.zeros_like(warps)),
            np.array([int(r["total_vgprs"]) for r in rows]),
            np.array([int(r["vgpr_spills"]) > 0 for r in rows]),
        )

    def score(self, w: AmdWeights) -> tuple[float, float]:
        """(median |allocated - compiled|, share of spill verdicts that agree)."""
        live = np.ceil(live_estimate(self.terms, w))
        allocated = np.where(live > self.cap, self.cap, np.minimum(self.cap, np.ceil(live / 8) * 8))
        miss = float(np.median(np.abs(allocated - self.total)))
        return miss, float(np.mean((live > self.cap) == self.spills))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    with args.data.open(newline="") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if r["status"] == "ok"
            and r["kernel"] == "fwd"
            and r["target"] in LDS_LIMIT
            and int(r["shared_bytes"]) <= LDS_LIMIT[r["target"]]
            and int(r["num_stages"]) <= MAX_STAGES
        ]
    for target in LDS_LIMIT:
        fit = Rows.of([r for r in rows if r["target"] == target and r["split"] == "fit"])
        validation = Rows.of(
            [r for r in rows if r["target"] == target and r["split"] == "validation"]
        )
        best: tuple[float, AmdWeights] | None = None
        for base, a, s, q, g in itertools.product(BASES, ACCUMULATORS, STEPS, STEPS[:9], STEPS[:9]):
            weights = AmdWeights(float(base), a, s, q, g)
            miss, agree = fit.score(weights)
            penalty = 0.0 if agree >= SPILLS_AGREE else 100.0 * (SPILLS_AGREE - agree)
            if best is None or miss + penalty < best[0]:
                best = (miss + penalty, weights)
        assert best is not None
        for name, part in (("fit", fit), ("validation", validation)):
            miss, agree = part.score(best[1])
            rows_n = len(part.total)
            print(f"{target} {name}: {rows_n} rows, median miss {miss:.1f}, spills {agree:.0%}")
        print(f"{target}: {best[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
