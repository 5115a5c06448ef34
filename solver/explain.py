"""Explanations: the funnel, the constraints that bind the winner, why a request is infeasible,
and the per-candidate reasons. All are computed from the candidate table and its constraint
objects, so they do not depend on which engine ranked it, nor on the family.
"""

from __future__ import annotations

import math
from itertools import takewhile

import numpy as np

from .answer import (
    BindingConstraint,
    DivisibleLength,
    FunnelStep,
    Infeasibility,
    PaddingOption,
    RelaxationStep,
)
from .candidates import CandidateTable
from .constraints import ConstraintKind, Relaxation
from .cost import EQUIVALENT_TIME_FRACTION
from .space import BoolArray, ceil_div

# Below this many waves the problem leaves SMs idle whatever the tile; the answer says so.
SMALL_PROBLEM_WAVES = 1.0


def funnel(table: CandidateTable) -> list[FunnelStep]:
    """Configurations removed by each constraint, applied in funnel order."""
    alive = np.ones(len(table), dtype=np.bool_)
    steps = []
    for c in table.constraints:
        after = alive & table.satisfied[c.name]
        steps.append(
            FunnelStep(
                constraint=c.name,
                rule=c.rule,
                removed=int(alive.sum() - after.sum()),
                remaining=int(after.sum()),
            )
        )
        alive = after
    return steps


def _all_except(table: CandidateTable, skipped: set[str]) -> BoolArray:
    ok = np.ones(len(table), dtype=np.bool_)
    for name, sat in table.satisfied.items():
        if name not in skipped:
            ok &= sat
    return ok


def _best(table: CandidateTable, mask: BoolArray) -> int | None:
    indices = np.flatnonzero(mask)
    if not len(indices):
        return None
    return int(indices[np.argmin(table.objective[indices])])


def binding_constraints(table: CandidateTable, winner: int) -> list[BindingConstraint]:
    """Constraints without which a faster configuration than the winner would be chosen.
    Legality rules of the kernel never bind: only what the user or the hardware's capacity
    imposes."""
    out = []
    for c in table.constraints:
        if c.kind is ConstraintKind.LEGALITY:
            continue
        better = _best(table, _all_except(table, {c.name}))
        if better is None or table.objective[better] >= table.objective[winner]:
            continue
        gain = 1.0 - table.perf.time_us[better] / table.perf.time_us[winner]
        out.append(
            BindingConstraint(
                constraint=c.name,
                detail=f"without it {c.detail(table, better)}; it would be {gain:.1%} faster",
            )
        )
    return out


def minimal_conflict(table: CandidateTable, start: list[str] | None = None) -> list[str]:
    """An irreducible set of constraints that together admit no configuration.

    Deletion filter: drop each constraint in turn (funnel order) and keep it out if the rest
    still admit nothing. `start` (e.g. CP-SAT's core) narrows the search.
    """
    names = [c.name for c in table.constraints]
    kept = [n for n in names if n in start] if start else list(names)
    everything = set(names)
    for name in list(kept):
        trial = [k for k in kept if k != name]
        if not _all_except(table, everything - set(trial)).any():
            kept = trial
    return kept


def _relaxation(table: CandidateTable, name: str) -> Relaxation | None:
    """The smallest change to constraint `name` that makes the request feasible, or None."""
    allowed = _all_except(table, {name})
    best = _best(table, allowed)
    if best is None:
        return None
    return table.constraint(name).relaxation(table, np.flatnonzero(allowed), best)


def padding_options(table: CandidateTable) -> list[PaddingOption]:
    """Per block_m value of the family's legal configurations (the tile sizes its kernel can
    run): the nearest padded seq_len it divides, and the share of the padded length that is
    waste."""
    column = table.common.get("block_m")
    if column is None:
        return []
    sq = table.problem.seq_len
    out = []
    for block in sorted({int(v) for v in column[table.legal()]}):
        padded = ceil_div(sq, block) * block
        out.append(
            PaddingOption(block=block, padded_seq_len=padded, waste_fraction=(padded - sq) / padded)
        )
    return out


def divisible_lengths(table: CandidateTable) -> list[DivisibleLength]:
    """The nearest lengths that some tile divides: the longest below the request (trim, or
    split off the rest) and the shortest above it (pad), each with the fastest configuration
    that satisfies every other constraint and divides it. With seq_len == seq_len_kv both move
    together (a multiple of block_m and block_n); otherwise each moves to its own tile."""
    bm, bn = table.common.get("block_m"), table.common.get("block_n")
    if bm is None or bn is None:
        return []
    allowed = np.flatnonzero(_all_except(table, {"divisibility"}))
    if not len(allowed):
        return []
    sq, sk = table.problem.seq_len, table.problem.seq_len_kv_eff
    out = []
    for direction in (-1, 1):
        best: tuple[int, int, int, int] | None = None  # (distance, objective, lq, lk)
        best_i = -1
        for i in allowed:
            m, n = int(bm[i]), int(bn[i])
            if sq == sk:
                step = m * n // math.gcd(m, n)
                lq = lk = _nearest_multiple(sq, step, direction)
            else:
                lq, lk = _nearest_multiple(sq, m, direction), _nearest_multiple(sk, n, direction)
            if lq <= 0 or lk <= 0:
                continue
            key = (abs(lq - sq) + abs(lk - sk), int(table.objective[i]), lq, lk)
            if best is None or key < best:
                best, best_i = key, int(i)
        if best is not None:
            out.append(
                DivisibleLength(
                    seq_len=best[2],
                    seq_len_kv=best[3],
                    block_m=int(bm[best_i]),
                    block_n=int(bn[best_i]),
                    configuration=table.label(best_i),
                )
            )
    return out


def _nearest_multiple(length: int, step: int, direction: int) -> int:
    """The nearest multiple of `step` at or below (direction -1) or at or above `length`."""
    return (length // step) * step if direction < 0 else ceil_div(length, step) * step


def infeasibility(table: CandidateTable, core: list[str] | None = None) -> Infeasibility:
    """Why no configuration is feasible, and what would make one feasible."""
    conflict = minimal_conflict(table, core)
    details = []
    for name in conflict:
        others = _best(table, _all_except(table, {name}))
        if others is not None:
            details.append(table.constraint(name).detail(table, others))
    explanation = f"no configuration satisfies all of: {', '.join(conflict)}. " + " ".join(
        f"Best without {c}: {d}." for c, d in zip(conflict, details, strict=False)
    )
    kinds = {c.name: c.kind for c in table.constraints}
    order = [c.name for c in table.constraints]
    user_first = sorted(
        conflict, key=lambda c: (kinds[c] is not ConstraintKind.USER, order.index(c))
    )
    relaxation = next((r for r in (_relaxation(table, c) for c in user_first) if r), None)
    text = relaxation.text if relaxation else f"relax all of: {', '.join(conflict)}"
    return Infeasibility(
        conflicting_constraints=conflict,
        explanation=explanation.strip(),
        nearest_relaxation=text,
        relaxation=RelaxationStep(
            constraint=relaxation.constraint,
            target_kind=relaxation.target_kind,
            target=relaxation.target,
            suggested_value=relaxation.suggested_value,
        )
        if relaxation
        else None,
        padding=padding_options(table) if "divisibility" in conflict else [],
        divisible_lengths=divisible_lengths(table) if "divisibility" in conflict else [],
    )


def reasons(table: CandidateTable, i: int, winner: int) -> list[str]:
    """Why configuration `i` ranks where it does, most important first."""
    perf = table.perf
    out = []
    if i == winner:
        out.append(
            f"fastest modelled time ({perf.time_us[i]:.1f} us); bound by {perf.bottleneck[i]}"
        )
    else:
        slower = perf.time_us[i] / perf.time_us[winner] - 1.0
        out.append(f"{slower:.1%} slower than rank 1; bound by {perf.bottleneck[i]}")
    twins = twin_line(table, i)
    if twins:
        out.append(twins)
    out.extend(table.family.reason_lines(table, i))
    if perf.tail_efficiency[i] < 0.9:
        out.append(
            f"{perf.waves[i]:.2f} waves: the last wave leaves "
            f"{1 - perf.tail_efficiency[i]:.0%} of the block slots idle"
        )
    if perf.padding_waste[i] > 0.01:
        out.append(f"{perf.padding_waste[i]:.1%} of computed scores are padding or masked")
    return out


def twin_line(table: CandidateTable, i: int) -> str:
    """The parameter values configuration i stands for besides its own: those of its feasible
    twins (`CandidateTable.twins`), or "" where it has none."""
    twins = table.twins(i)
    twins = twins[table.feasible[twins]]
    if not len(twins):
        return ""
    differ = []
    for name, value in table.cfg.config(i).as_dict().items():
        others = [int(v) for v in np.unique(table.cfg[name][twins]) if v != value]
        if others:
            differ.append(f"{name} {', '.join(map(str, others))}")
    return (
        f"stands for {len(twins)} more configuration(s) of this tile at the same modelled time, "
        f"which differ in {'; '.join(differ)}: the model prices them alike"
    )


def equivalent_ranks(table: CandidateTable, ranked: list[int]) -> int:
    """How many of the ranked candidates (from rank 1) the model cannot tell apart: their
    modelled times are within EQUIVALENT_TIME_FRACTION of rank 1's."""
    if not ranked:
        return 0
    best = float(table.perf.time_us[ranked[0]])
    limit = best * (1.0 + EQUIVALENT_TIME_FRACTION)
    return sum(1 for _ in takewhile(lambda i: table.perf.time_us[i] <= limit, ranked))


def notes(table: CandidateTable, ranked: list[int]) -> list[str]:
    """Remarks about the answer as a whole (not about one candidate)."""
    out = []
    tied = equivalent_ranks(table, ranked)
    if tied > 1:
        bound = table.perf.bottleneck[ranked[0]]
        out.append(
            f"ranks 1-{tied} are equivalent within the model's resolution (modelled times within "
            f"{EQUIVALENT_TIME_FRACTION:.2%}; bound by {bound}): they are ordered by what "
            "kernels prefer beyond the model (the family's fixed tie-break order: fewer loop "
            "iterations first; docs/model.md), so measure them if the difference matters"
        )
    waves = float(table.perf.waves[ranked[0]]) if ranked else SMALL_PROBLEM_WAVES
    # A family that splits K/V across blocks (num_splits) already answers an under-filled grid.
    if waves < SMALL_PROBLEM_WAVES and "num_splits" not in table.cfg:
        out.append(
            f"the problem fills less than one wave ({waves:.2f} waves for rank 1): "
            f"batch {table.problem.batch} x heads {table.problem.heads} gives too few blocks "
            "to keep every compute unit busy; a realistic batch or head count changes the answer"
        )
    out.extend(table.family.answer_notes(table, ranked))
    return out
