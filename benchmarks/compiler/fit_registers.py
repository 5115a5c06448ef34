"""Fit the register estimate's free constants (`triton_compiler.registers.REGISTER_CONSTANTS`) on
the `fit` split of the compiled data set, and report both splits.

    .venv/bin/python benchmarks/compiler/fit_registers.py [--data CSV] [--seed N]

For each target family (sm75; sm80; sm86 = sm86 and sm89, one ptxas scheduling model; sm90;
sm100; sm120) and each lowering it uses (mma.sync, warpgroup, FMA), two linear estimates of
registers per thread are fitted over the rows the model and the launch both accept (compiled
shared memory within the target's limit, status ok):

- the live state, by coordinate descent on a grid of each weight, to maximise the share of rows
  whose spilling (yes/no) it predicts (`live > cap`); among weights that predict equally many,
  the one whose rows lie farther from the cap on their own side (a hinge loss on
  (cap - live) / HINGE_SCALE, weighted HINGE_WEIGHT: it breaks ties, it never outvotes a row).
  The address term is not part of the live state (registers.py: ptxas recomputes addresses
  rather than spill them);
- the count, with the live state fixed, to minimise the mean |count - ptxas| over the rows ptxas
  compiled without spilling: least absolute deviations, a linear program (`fit_count`), so its
  optimum is exact and independent of the seed (the coordinate descent it replaces found a
  different flat optimum for each seed, and the held-out median moved by 6 registers with it).

The live state is the best of RESTARTS random starting points (the spill agreement is a count,
not a convex loss); the seed draws those points.

The terms are the module's (`loop_registers`); the result is printed as the Python literal
pasted into registers.py, then the issue's figures (median register error, spill agreement)
per target and split. Deterministic for a given --seed (the restarts' starting points).
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from configs import TARGETS, from_row
from ortools.linear_solver import pywraplp
from plan import SHARED_LIMIT_BYTES

from tilesolve.solver.families.triton_compiler.flash_loops import backward_kernel, forward_kernel
from tilesolve.solver.families.triton_compiler.loops import AttentionKernel
from tilesolve.solver.families.triton_compiler.registers import (
    REGISTER_CONSTANTS,
    LoopRegisters,
    loop_registers,
    path_keys,
    target_family,
)
from tilesolve.solver.families.triton_compiler.shared_memory import shared_bytes

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
PATHS = ("mma", "warpgroup", "fma")
TERMS = ("base", "scores", "a_fragments", "b_fragments", "staging", "addresses")
GRID = {
    "base": [float(x) for x in range(-40, 201, 4)],
    "scores": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0],
    "a_fragments": [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5, 2.0],
    "b_fragments": [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0, 1.25],
    "staging": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0],
    "addresses": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0],
}
LIVE_EXCLUDED = ("addresses",)  # terms held at 0 in the live state
HINGE_SCALE = 16.0  # registers: a row this far on its own side of the cap has no hinge loss
HINGE_WEIGHT = 0.001  # the hinge's weight against the share of rows predicted
RESTARTS = 32
SPILL_WORD_BYTES = 4
CV_SEED = 100  # the cross-validation's fold draws: CV_SEED, CV_SEED + 1, ...
ROUNDS = 3


def row_kernel(row: dict[str, str]) -> AttentionKernel:
    """The triton family's description of the row's kernel (one candidate)."""
    variant, tile = from_row(row)
    d = variant.padded_head_dim

    def one(x: int) -> np.ndarray:
        return np.array([x], dtype=np.int64)

    if row["kernel"] == "fwd":
        return forward_kernel(one(tile.block_m), one(tile.block_n), d, d, 2)
    return backward_kernel(
        one(tile.block_m), one(tile.block_n), one(tile.dq_block_m), one(tile.dq_block_n), d, d, 2
    )


@dataclass
class Rows:
    """The rows of one target family: per loop, the terms and the lowering index."""

    keys: list[str]
    targets: list[str]
    splits: list[str]
    terms: list[np.ndarray]  # per loop slot: (rows, 7) accumulators, scores, chain, a, b,
    # staging, addresses
    paths: list[np.ndarray]  # per loop slot: (rows,) index into PATHS
    cap: np.ndarray
    regs: np.ndarray
    spills: np.ndarray
    peak: np.ndarray  # peak live registers (nvdisasm -lrm count); NaN where not measured
    spill_bytes: np.ndarray | None = None  # spill stores, bytes per thread (ptxas -v)


def _terms(t: LoopRegisters) -> np.ndarray:
    return np.array(
        [t.accumulators[0], t.scores[0], t.chain[0], t.a_fragments[0], t.b_fragments[0],
         t.staging[0], t.addresses[0]]
    )  # fmt: skip


def load(path: Path) -> dict[str, Rows]:
    """The rows both the model and the launch accept, grouped by target family."""
    with path.open(newline="") as f:
        # one row a key, the last one read (collect.py --peak-live appends rows again)
        data = [r for r in {r["key"]: r for r in csv.DictReader(f)}.values() if r["status"] == "ok"]
    groups: dict[str, dict[str, list]] = {}
    for row in data:
        if TARGETS[row["target"]].backend != "cuda":
            continue
        target = TARGETS[row["target"]].compiler_target()
        kernel = row_kernel(row)
        warps = np.array([int(row["num_warps"])], dtype=np.int64)
        stages = np.array([int(row["num_stages"])], dtype=np.int64)
        limit = SHARED_LIMIT_BYTES[row["target"]]
        model_smem = int(shared_bytes(kernel, target, warps, stages)[0])
        if int(row["shared_bytes"]) > limit or model_smem > limit:
            continue
        g = groups.setdefault(target_family(target), {k: [] for k in Rows.__annotations__})
        loops = [loop_registers(loop, target, warps, stages) for loop in kernel.loops]
        g["keys"].append(row["key"])
        g["targets"].append(row["target"])
        g["splits"].append(row["split"])
        g["terms"].append([_terms(t) for t in loops])
        g["paths"].append([PATHS.index(str(path_keys(t.path)[0])) for t in loops])
        g["cap"].append(int(target.register_cap(warps * 32)[0]))
        g["regs"].append(int(row["regs"]))
        g["spills"].append(int(row["spill_store_bytes"]) > 0)
        g["peak"].append(float(row.get("peak_live_regs") or "nan"))
        g["spill_bytes"].append(int(row["spill_store_bytes"]))
    out = {}
    for family, g in groups.items():
        slots = max(len(t) for t in g["terms"])
        terms = [
            np.array([t[min(i, len(t) - 1)] for t in g["terms"]]) for i in range(slots)
        ]  # a one-loop kernel repeats its loop in the second slot
        paths = [np.array([p[min(i, len(p) - 1)] for p in g["paths"]]) for i in range(slots)]
        out[family] = Rows(
            g["keys"], g["targets"], g["splits"], terms, paths,
            np.array(g["cap"]), np.array(g["regs"]), np.array(g["spills"]),
            np.array(g["peak"]), np.array(g["spill_bytes"]),
        )  # fmt: skip
    return out


def estimate(rows: Rows, weights: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The kernel's estimate (largest loop) with weights[path] = (base, scores, a, b, staging,
    addresses)."""
    best = np.full(int(mask.sum()), -np.inf)
    for terms, paths in zip(rows.terms, rows.paths, strict=True):
        t = terms[mask]
        w = weights[paths[mask]]
        value = w[:, 0] + t[:, 0] + w[:, 1] * t[:, 1] + t[:, 2] + w[:, 2] * t[:, 3]
        value = value + w[:, 3] * t[:, 4] + w[:, 4] * t[:, 5] + w[:, 5] * t[:, 6]
        best = np.maximum(best, value)
    return best


def agreement(rows: Rows, live: np.ndarray, mask: np.ndarray) -> float:
    spills = estimate(rows, live, mask) > rows.cap[mask]
    return float(np.mean(spills == rows.spills[mask]))


def live_score(rows: Rows, live: np.ndarray, mask: np.ndarray) -> float:
    """The live state's objective: the spill agreement, ties broken by the hinge loss."""
    side = np.where(rows.spills[mask], -1.0, 1.0)  # spilling rows belong above the cap
    slack = (rows.cap[mask] - estimate(rows, live, mask)) / HINGE_SCALE
    hinge = float(np.mean(np.maximum(0.0, 1.0 - side * slack)))
    return agreement(rows, live, mask) - HINGE_WEIGHT * hinge


def predict(rows: Rows, live: np.ndarray, count: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Registers ptxas would report: the cap when the live state exceeds it, else the count."""
    cap = rows.cap[mask]
    spills = np.ceil(estimate(rows, live, mask)) > cap
    counted = np.minimum(cap, np.ceil(np.maximum(estimate(rows, count, mask), 1.0)))
    return np.where(spills, cap, counted)


def _weighted(path: int, term: str) -> bool:
    """Whether loop path `path` has a weight for `term` (a warpgroup path loads no A or B
    fragments into registers)."""
    return not (PATHS[path] == "warpgroup" and term in ("a_fragments", "b_fragments"))


def descend(
    score: Callable[[np.ndarray], float],
    start: np.ndarray,
    used: list[int],
    excluded: tuple[str, ...] = (),
) -> np.ndarray:
    """Coordinate descent over the grid: each weight of each used lowering in turn (the
    warpgroup lowerings have no fragment terms, and `excluded` terms none: their weights
    stay 0)."""
    best = start.copy()
    best[PATHS.index("warpgroup"), [TERMS.index("a_fragments"), TERMS.index("b_fragments")]] = 0
    best[:, [TERMS.index(t) for t in excluded]] = 0
    current = score(best)
    for _ in range(ROUNDS):
        for p in used:
            for j, term in enumerate(TERMS):
                if not _weighted(p, term) or term in excluded:
                    continue
                for value in GRID[term]:
                    trial = best.copy()
                    trial[p, j] = value
                    s = score(trial)
                    if s > current:
                        best, current = trial, s
    return best


def fit_live_agreement(
    rows: Rows, mask: np.ndarray, used: list[int], rng: random.Random
) -> np.ndarray:
    """The live state by coordinate descent on the spill agreement of the `mask` rows, the
    best of RESTARTS random starts (the module docstring)."""

    def random_start() -> np.ndarray:
        return np.array([[rng.choice(GRID[t]) for t in TERMS] for _ in PATHS])

    return max(
        (
            descend(lambda w: live_score(rows, w, mask), random_start(), used, LIVE_EXCLUDED)
            for _ in range(RESTARTS)
        ),
        key=lambda w: live_score(rows, w, mask),
    )


def fit_family(
    rows: Rows, rng: random.Random, method: str = "agreement"
) -> tuple[np.ndarray, np.ndarray]:
    fit = np.array([s == "fit" for s in rows.splits])
    used = sorted({int(p) for paths in rows.paths for p in paths[fit]})
    if method == "agreement":
        live = fit_live_agreement(rows, fit, used, rng)
    else:  # no peak measured near the cap for this family: today's live state stays
        regressed = regressed_live(rows, fit, used)
        live = current_live(family_of(rows)) if regressed is None else regressed[0]
    return live, fit_count(rows, live, fit, used)


def heaviest_slot(rows: Rows, live: np.ndarray) -> np.ndarray:
    """Per row, the loop slot whose live state is the largest (the loop the kernel's figure is
    taken from)."""
    values = []
    everything = np.ones(len(rows.keys), dtype=bool)
    for terms, paths in zip(rows.terms, rows.paths, strict=True):
        single = Rows(
            rows.keys, rows.targets, rows.splits, [terms], [paths], rows.cap, rows.regs,
            rows.spills, rows.peak,
        )  # fmt: skip
        values.append(estimate(single, live, everything))
    return np.argmax(np.array(values), axis=0)


def _row_estimate(weights: dict[tuple[int, int], Any], rows: Rows, slot: int, i: int) -> Any:
    """Row `i`'s estimate from its loop `slot` as a linear expression of the LP's `weights`
    ((path, term index) -> variable): the base, each weighted term, and the accumulators and
    the chain at weight 1."""
    t = rows.terms[slot][i]
    p = int(rows.paths[slot][i])
    # t = accumulators, scores, chain, a, b, staging, addresses; TERMS[0] is the base
    linear = weights[(p, 0)] + sum(
        weights[(p, j)] * float(t[j + 1 if j >= 2 else j])
        for j in range(1, len(TERMS))
        if (p, j) in weights
    )
    return linear + float(t[0] + t[2])


def fit_count(rows: Rows, live: np.ndarray, fit: np.ndarray, used: list[int]) -> np.ndarray:
    """The count's weights that minimise the sum of |count - ptxas| over the fit rows ptxas
    compiled without spilling, each row's count taken from its heaviest loop (`heaviest_slot`),
    within the grid's range of each weight: a linear program (least absolute deviations,
    OR-Tools' GLOP), so the optimum is exact and does not depend on a seed."""
    solver = pywraplp.Solver.CreateSolver("GLOP")
    weights = {
        (p, j): solver.NumVar(min(GRID[t]), max(GRID[t]), f"w{p}_{t}")
        for p in used
        for j, t in enumerate(TERMS)
        if _weighted(p, t)
    }
    slot = heaviest_slot(rows, live)
    errors = []
    for i in np.flatnonzero(fit & ~rows.spills):
        estimated = _row_estimate(weights, rows, int(slot[i]), i)
        e = solver.NumVar(0, solver.infinity(), f"e{i}")
        solver.Add(e >= estimated - float(rows.regs[i]))
        solver.Add(e >= float(rows.regs[i]) - estimated)
        errors.append(e)
    return _solved(solver, errors, weights, "the count")


def _solved(
    solver: pywraplp.Solver,
    errors: list[pywraplp.Variable],
    weights: dict[tuple[int, int], pywraplp.Variable],
    what: str,
) -> np.ndarray:
    """Minimise the sum of `errors` and return the weights (PATHS x TERMS, 3 decimals)."""
    solver.Minimize(sum(errors))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError(f"{what}'s linear program has no optimum")
    out = np.zeros((len(PATHS), len(TERMS)))
    for (p, j), var in weights.items():
        out[p, j] = round(var.solution_value(), 3)
    return out


PEAK_FREE_BOUNDS = {  # the live regression's weight ranges (registers per term register)
    "base": (-100.0, 250.0),
    "scores": (0.0, 3.0),
    "a_fragments": (0.0, 2.0),
    "b_fragments": (0.0, 2.0),
    "staging": (0.0, 2.0),
}
SLOT_ROUNDS = 8  # refits while each row's heaviest loop changes


MARGIN_WINDOW = 8  # registers: a row allocating this close to its cap without spilling is at it


def allocation_margin(rows: Rows, mask: np.ndarray) -> float:
    """Registers a thread allocates beyond its peak live count where the cap binds: the median
    of regs - peak over the `mask` rows that allocate within MARGIN_WINDOW of their cap without
    spilling (ptxas aligns 64- and 128-bit register tuples and keeps values of different live
    ranges apart, so a kernel that needs all of its cap has fewer values live at its peak
    instruction). A live estimate in peak units meets the cap that much early."""
    near = near_cap(rows, mask)
    if not near.any():
        raise ValueError("no measured row near its cap without spilling")
    return float(np.median(rows.regs[near] - rows.peak[near]))


def near_cap(rows: Rows, mask: np.ndarray) -> np.ndarray:
    """The `mask` rows with a measured peak that allocate within MARGIN_WINDOW of their cap
    without spilling: the rows `allocation_margin` is measured on."""
    return mask & ~rows.spills & (rows.regs >= rows.cap - MARGIN_WINDOW) & ~np.isnan(rows.peak)


def regressed_live(
    rows: Rows, mask: np.ndarray, used: list[int]
) -> tuple[np.ndarray, float] | None:
    """`fit_live_regression` on the `mask` rows and the margin it used, or None where none of
    them is measured near its cap (the margin, and so the regression, is then undefined)."""
    if not near_cap(rows, mask).any():
        return None
    margin = allocation_margin(rows, mask)
    return fit_live_regression(rows, mask, used, margin, current_live(family_of(rows))), margin


def fit_live_regression(
    rows: Rows, mask: np.ndarray, used: list[int], margin: float, start: np.ndarray
) -> np.ndarray:
    """The live state's weights as a regression on the measured peak live registers
    (`peak_live_regs`), a linear program (least absolute deviations, OR-Tools' GLOP):

    - a `mask` row that does not spill: |estimate - (peak + margin)|, in registers;
    - a row that spills: its peak is censored (ptxas held what its cap allowed; the demand is
      above it), so only an estimate below the cap costs: max(0, cap + 1 - estimate).

    `margin` is `allocation_margin`: the estimate is of the registers the live values need,
    so that `live > cap` stays the spill verdict. Each row's estimate is its heaviest loop's;
    the loop is taken under the previous weights (`start`, then each refit's) until it no
    longer changes. Addresses stay out of the live state (weight 0)."""
    live = start.copy()
    free = [t for t in TERMS if t in PEAK_FREE_BOUNDS]
    measured = mask & (rows.spills | ~np.isnan(rows.peak))
    previous_slots = None
    for _ in range(SLOT_ROUNDS):
        slots = heaviest_slot(rows, live)
        if previous_slots is not None and np.array_equal(slots, previous_slots):
            break
        previous_slots = slots
        solver = pywraplp.Solver.CreateSolver("GLOP")
        weights = {
            (p, TERMS.index(t)): solver.NumVar(*PEAK_FREE_BOUNDS[t], f"w{p}_{t}")
            for p in used
            for t in free
            if _weighted(p, t)
        }
        errors = []
        for i in np.flatnonzero(measured):
            estimated = _row_estimate(weights, rows, int(slots[i]), i)
            e = solver.NumVar(0, solver.infinity(), f"e{i}")
            if rows.spills[i]:
                solver.Add(e >= float(rows.cap[i]) + 1.0 - estimated)
            else:
                target = float(rows.peak[i]) + margin
                solver.Add(e >= estimated - target)
                solver.Add(e >= target - estimated)
            errors.append(e)
        live = _solved(solver, errors, weights, "the live regression")
    return live


def fit_family_regression(rows: Rows, mask: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The live state fitted to the measured peaks of the `mask` rows (`fit_live_regression`
    with the margin measured on the same rows)."""
    used = sorted({int(p) for paths in rows.paths for p in paths[mask]})
    return fit_live_regression(rows, mask, used, allocation_margin(rows, mask), start)


def current_live(family: str) -> np.ndarray:
    """The live weights registers.py holds today for `family` (PATHS x TERMS)."""
    live = np.zeros((len(PATHS), len(TERMS)))
    for key, constants in REGISTER_CONSTANTS.get(family, {}).items():
        live[PATHS.index(key)] = [getattr(constants.live, t) for t in TERMS]
    return live


def cross_validate(
    rows: Rows, method: str, draws: int, folds: int = 5
) -> tuple[int, int, float | None]:
    """Spill verdicts right, of all, over `draws` random `folds`-fold splits of the family's
    fit rows, each fold predicted by weights fitted on the others (`method`: "agreement",
    today's coordinate descent on the yes/no; "regression", `fit_live_regression`), and for
    the regression the median |estimate - (peak + margin)| of the held-out measured rows that
    do not spill."""
    fit = np.array([s == "fit" for s in rows.splits])
    index = np.flatnonzero(fit)
    right = total = 0
    errors: list[float] = []
    for draw in range(draws):
        rng = random.Random(CV_SEED + draw)
        order = list(index)
        rng.shuffle(order)
        for held in np.array_split(np.array(order), folds):
            test = np.zeros(len(fit), dtype=bool)
            test[held] = True
            train = fit & ~test
            used = sorted({int(p) for paths in rows.paths for p in paths[train]})
            if method == "agreement":
                live = fit_live_agreement(rows, train, used, rng)
            else:
                regressed = regressed_live(rows, train, used)
                if regressed is None:  # as fit_family: today's live state stays
                    live, margin = current_live(family_of(rows)), 0.0
                else:
                    live, margin = regressed
                clean = test & ~rows.spills & ~np.isnan(rows.peak)
                if clean.any():
                    errors += list(np.abs(estimate(rows, live, clean) - rows.peak[clean] - margin))
            predicted = estimate(rows, live, test) > rows.cap[test]
            right += int((predicted == rows.spills[test]).sum())
            total += int(test.sum())
    return right, total, (float(np.median(errors)) if errors else None)


def demand_threshold(rows: Rows, fit: np.ndarray, held: np.ndarray) -> tuple[int, float, float]:
    """What the measured peaks allow: ptxas's own demand, the peak live registers plus the
    registers it spilled (spill stores / 4) for a spilling row, put against the cap less d
    registers, with the d (0..39) that predicts the most `fit` rows' spills. Returns d and
    the share of `fit` and of `held` rows predicted (NaN where none is measured): no live
    estimate put against the cap can beat this on these rows but by luck."""
    assert rows.spill_bytes is not None
    demand = rows.peak + np.where(rows.spills, rows.spill_bytes / SPILL_WORD_BYTES, 0.0)
    measured = ~np.isnan(rows.peak)

    def share(mask: np.ndarray, d: int) -> float:
        m = mask & measured
        if not m.any():
            return float("nan")
        return float(np.mean((demand[m] > rows.cap[m] - d) == rows.spills[m]))

    best = max(range(40), key=lambda d: (share(fit, d), -d))
    return best, share(fit, best), share(held, best)


BLUR_DRAWS = 200  # demand_blurred: noise draws per sigma
BLUR_SIGMAS = (4.0, 8.0, 16.0)  # registers (a normal error's median magnitude is 0.674 sigma)


def demand_blurred(rows: Rows, mask: np.ndarray, d: int, sigma: float) -> float:
    """The share of `mask`'s measured rows whose spill `demand_threshold`'s rule predicts when
    each row's demand is off by a normal error of `sigma` registers (the mean over
    BLUR_DRAWS draws, seed 0): how close to ptxas's own demand a live estimate must come."""
    assert rows.spill_bytes is not None
    m = mask & ~np.isnan(rows.peak)
    demand = (rows.peak + np.where(rows.spills, rows.spill_bytes / SPILL_WORD_BYTES, 0.0))[m]
    rng = np.random.default_rng(0)
    shares = [
        np.mean((demand + rng.normal(0.0, sigma, len(demand)) > rows.cap[m] - d) == rows.spills[m])
        for _ in range(BLUR_DRAWS)
    ]
    return float(np.mean(shares))


def family_of(rows: Rows) -> str:
    return target_family(TARGETS[rows.targets[0]].compiler_target())


def figures(rows: Rows, live: np.ndarray, count: np.ndarray, mask: np.ndarray) -> str:
    if not mask.any():
        return "-"
    error = np.abs(predict(rows, live, count, mask) - rows.regs[mask])
    return (
        f"median register error {np.median(error):.1f}, spills agree "
        f"{agreement(rows, live, mask):.0%} of {int(mask.sum())}"
    )


def literal(fitted: dict[str, tuple[np.ndarray, np.ndarray, list[int]]]) -> str:
    """The REGISTER_CONSTANTS literal."""

    def weights(w: np.ndarray) -> str:
        return (
            f"Weights(base={w[0]:g}, scores={w[1]:g}, a_fragments={w[2]:g}, "
            f"b_fragments={w[3]:g}, staging={w[4]:g}, addresses={w[5]:g})"
        )

    lines = ["REGISTER_CONSTANTS: dict[str, dict[str, PathConstants]] = {"]
    for family, (live, count, used) in sorted(fitted.items()):
        lines.append(f'    "{family}": {{')
        for p in used:
            lines.append(f'        "{PATHS[p]}": PathConstants(')
            lines.append(f"            live={weights(live[p])},")
            lines.append(f"            count={weights(count[p])},")
            lines.append("        ),")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the collected CSV")
    parser.add_argument("--seed", type=int, default=21, help="the restarts' random seed")
    parser.add_argument(
        "--live",
        choices=("agreement", "regression"),
        default="agreement",
        help="how the live state is fitted (the module docstring)",
    )
    parser.add_argument(
        "--cross-validate",
        type=int,
        metavar="DRAWS",
        default=0,
        help="instead of fitting: 5-fold cross-validation inside the fit split, DRAWS fold "
        "draws, both methods, per family",
    )
    parser.add_argument(
        "--peak-report",
        action="store_true",
        help="instead of fitting: per target, the measured rows, the allocation margin and "
        "what the measured demand allows (`demand_threshold`)",
    )
    args = parser.parse_args(argv)
    if not args.data.exists():
        parser.error(f"--data: no file {args.data}")
    rng = random.Random(args.seed)
    groups = load(args.data)
    if args.peak_report:
        with args.data.open(newline="") as f:
            by_key = {r["key"]: r for r in csv.DictReader(f)}
        for target in sorted({r["target"] for r in by_key.values()}):
            done = [r for r in by_key.values() if r["target"] == target and r["peak_live_regs"]]
            if done:
                same = sum(
                    r["peak_live_used_regs"] == r["regs"]
                    and r["peak_live_spill_bytes"] == r["spill_store_bytes"]
                    for r in done
                )
                assemblers = ", ".join(sorted({r["peak_live_assembler"] for r in done}))
                print(
                    f"{target}: {len(done)} rows measured ({assemblers}); the reassembly "
                    f"allocates as the row records (registers and spill stores) in {same}"
                )
        for family in sorted(groups):
            rows = groups[family]
            fit = np.array([s == "fit" for s in rows.splits])
            measured = ~np.isnan(rows.peak)
            for target in sorted(set(rows.targets)):
                mine = np.array([t == target for t in rows.targets])
                if not (mine & measured).any():
                    continue
                d, on_fit, on_held = demand_threshold(rows, mine & fit, mine & ~fit)
                try:
                    margin = f"{allocation_margin(rows, mine & fit):g}"
                except ValueError:
                    margin = "-"
                blurred = ", ".join(
                    f"{demand_blurred(rows, mine, d, sigma):.1%} at sigma {sigma:g}"
                    for sigma in BLUR_SIGMAS
                )
                print(
                    f"{target}: {int((mine & measured).sum())} of {int(mine.sum())} rows "
                    f"measured; margin {margin}; demand > cap - {d}: fit {on_fit:.1%} of "
                    f"{int((mine & fit & measured).sum())}, validation {on_held:.1%} of "
                    f"{int((mine & ~fit & measured).sum())}; all rows, the demand blurred: "
                    f"{blurred}"
                )
        return 0
    if args.cross_validate:
        for family in sorted(groups):
            rows = groups[family]
            methods: tuple[str, ...] = ("agreement", "regression")
            if not near_cap(rows, np.array([s == "fit" for s in rows.splits])).any():
                print(f"{family} regression: no fit row's peak measured near its cap")
                methods = ("agreement",)
            for method in methods:
                right, total, error = cross_validate(rows, method, args.cross_validate)
                detail = "" if error is None else f"; held-out peak error median {error:.1f}"
                print(
                    f"{family} {method}: {right} of {total} spill verdicts right "
                    f"({right / total:.1%}){detail}",
                    flush=True,
                )
        return 0
    fitted = {}
    for family in sorted(groups):
        rows = groups[family]
        live, count = fit_family(rows, rng, args.live)
        fit = np.array([s == "fit" for s in rows.splits])
        used = sorted({int(p) for paths in rows.paths for p in paths[fit]})
        fitted[family] = (live, count, used)
    print(literal(fitted))
    print()
    for family in sorted(groups):
        rows = groups[family]
        live, count, _ = fitted[family]
        for target in sorted(set(rows.targets)):
            for split in ("fit", "validation", "holdout"):
                mask = np.array(
                    [
                        t == target and s == split
                        for t, s in zip(rows.targets, rows.splits, strict=True)
                    ]
                )
                print(f"{target} {split}: {figures(rows, live, count, mask)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
