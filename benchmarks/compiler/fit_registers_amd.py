"""Fit the AMD register estimate's free constants (`triton_compiler.registers_amd.
AMD_REGISTER_CONSTANTS`: the base, the streamed operands' window b, the staged tiles t_1 and
t_2, the share a of the loads' pointers live, the causal mask's c) on the compiled data set's
`fit` split, per target, and report them on both splits.

    .venv/bin/python benchmarks/compiler/fit_registers_amd.py [--data CSV]

The rows are the forward rows `compare.py` sets against the model on AMD: compiled, within the
target's LDS limit, num_stages within the ROCm kernel's domain, at Triton's default knobs. A
grid search for the smallest mean |model - compiled| VGPR+AGPR per lane (`total_vgprs`) over
the rows the compiler did not cap (where the allocation says how much is live), among the
constants whose spill verdicts (yes/no) agree on at least 90% of all the rows; ties go to the
first in grid order. t_2 is searched only where the stream pipeliner stages the tiles in
registers (gfx942; gfx950's asynchronous copies hold none). The mean, not the median, is
minimised: it weighs every row, where the median of 30-odd rows moves with a few of them.
docs/model.md 19.10 gives the figures.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from configs import TARGETS

from tilesolve.solver.families.triton_compiler.flash_loops import forward_kernel
from tilesolve.solver.families.triton_compiler.registers_amd import (
    ASYNC_COPY_TARGETS,
    AmdWeights,
    allocation,
    launch_cap,
    live_estimate,
    loop_terms,
)
from tilesolve.solver.families.triton_compiler.target import CompilerTarget

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
LDS_LIMIT = {"gfx942": 65536, "gfx950": 163840}
MAX_STAGES = 3
SPILLS_AGREE = 0.90
BASES = tuple(float(b) for b in range(0, 101, 2))
STREAMED = tuple(x / 8 for x in range(9))  # 0 to 1
STAGED = tuple(x / 2 for x in range(6))  # 0 to 2.5
MASK = tuple(x / 4 for x in range(5))  # 0 to 1
ADDRESSES = (0.0, 0.5, 1.0)  # none, one or both registers of each load's pointer


def padded(head_dim: int) -> int:
    return max(16, 1 << (head_dim - 1).bit_length())


@dataclass(frozen=True)
class Rows:
    """The terms of each row (causal and not apart), and what the compiler allocated."""

    terms: dict[str, np.ndarray]
    stages: np.ndarray
    causal: np.ndarray
    cap: np.ndarray
    total: np.ndarray
    spills: np.ndarray

    @classmethod
    def of(cls, target: CompilerTarget, rows: list[dict[str, str]]) -> Rows:
        terms: dict[str, list[float]] = {}
        for r in rows:
            one = {k: np.array([int(r[k])]) for k in ("block_m", "block_n", "num_warps")}
            d = padded(int(r["head_dim"]))
            kernel = forward_kernel(one["block_m"], one["block_n"], d, d, 2)
            stages = np.array([int(r["num_stages"])])
            found = loop_terms(kernel.loops[0], target, one["num_warps"], stages, np.zeros(1, int))
            for name, value in found.items():
                terms.setdefault(name, []).append(float(value[0]))
        warps = np.array([int(r["num_warps"]) for r in rows])
        return cls(
            {k: np.array(v) for k, v in terms.items()},
            np.array([int(r["num_stages"]) for r in rows]),
            np.array([r["causal"] == "1" for r in rows]),
            launch_cap(warps, np.zeros_like(warps)),
            np.array([int(r["total_vgprs"]) for r in rows]),
            np.array([int(r["vgpr_spills"]) > 0 for r in rows]),
        )

    def live(self, w: AmdWeights) -> np.ndarray:
        plain = live_estimate(self.terms, self.stages, False, w)
        masked = live_estimate(self.terms, self.stages, True, w)
        return np.ceil(np.where(self.causal, masked, plain)).astype(np.int64)

    def score(self, w: AmdWeights) -> tuple[float, float, float]:
        """(median |allocated - compiled| over all rows, mean of it over the rows the compiler
        did not cap, share of spill verdicts that agree)."""
        live = self.live(w)
        allocated, spilled = allocation(live, self.cap)
        miss = np.abs(allocated - self.total)
        free = self.total < self.cap
        mean = float(np.mean(miss[free])) if free.any() else 0.0
        return float(np.median(miss)), mean, float(np.mean((spilled > 0) == self.spills))


def fit(target: CompilerTarget, part: Rows) -> AmdWeights:
    """The constants of the smallest mean miss with spills agreeing (module docstring)."""
    pipelined = (0.0,) if target.name in ASYNC_COPY_TARGETS else STAGED
    best: tuple[float, AmdWeights] | None = None
    grid = itertools.product(BASES, STREAMED, STAGED, pipelined, MASK, ADDRESSES)
    for base, b, t1, t2, c, a in grid:
        weights = AmdWeights(base, b, t1, t2, c, a)
        _, mean, agree = part.score(weights)
        penalty = 0.0 if agree >= SPILLS_AGREE else 100.0 * (SPILLS_AGREE - agree)
        if best is None or mean + penalty < best[0]:
            best = (mean + penalty, weights)
    assert best is not None
    return best[1]


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
    for name in LDS_LIMIT:
        target = TARGETS[name].compiler_target()
        parts = {
            split: Rows.of(target, [r for r in rows if r["target"] == name and r["split"] == split])
            for split in ("fit", "validation")
        }
        weights = fit(target, parts["fit"])
        for split, part in parts.items():
            median, mean, agree = part.score(weights)
            print(
                f"{name} {split}: {len(part.total)} rows, median miss {median:.1f}, "
                f"mean miss uncapped {mean:.1f}, spills {agree:.0%}"
            )
        print(f"{name}: {weights}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
