"""Explanations: the funnel, the constraints that bind the winner, why a request is infeasible,
and the per-candidate reasons. All are computed from the candidate table, so they do not
depend on which engine ranked it.
"""

from __future__ import annotations

import numpy as np

from .answer import BindingConstraint, FunnelStep, Infeasibility
from .candidates import CandidateTable
from .constraints import CONSTRAINT_RULES, MAX_SPILL_REGS, ConstraintName
from .families.base import BoolArray


def _kib(value: float) -> str:
    return f"{value / 1024:g} KiB"


def funnel(table: CandidateTable) -> list[FunnelStep]:
    """Configurations removed by each constraint, applied in funnel order."""
    alive = np.ones(len(table), dtype=np.bool_)
    steps = []
    for name in ConstraintName:
        after = alive & table.satisfied[name]
        steps.append(
            FunnelStep(
                constraint=name.value,
                rule=CONSTRAINT_RULES[name],
                removed=int(alive.sum() - after.sum()),
                remaining=int(after.sum()),
            )
        )
        alive = after
    return steps


def _all_except(table: CandidateTable, skipped: set[ConstraintName]) -> BoolArray:
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


def violation_detail(table: CandidateTable, name: ConstraintName, i: int) -> str:
    """A sentence saying how configuration `i` breaks constraint `name`."""
    sm, _ = table.hardware.cuda
    res, cfg, opts, problem = table.res, table.cfg.config(i), table.options, table.problem
    if name is ConstraintName.ALIGNMENT:
        return f"{cfg} breaks {table.family.name}'s alignment: {table.family.alignment_rule}"
    if name is ConstraintName.THREADS:
        return f"{cfg} needs {res.threads[i]} threads per block, maximum {sm.max_threads_per_block}"
    if name is ConstraintName.PINS:
        return f"{cfg} differs from the pinned parameters"
    if name is ConstraintName.SHARED_MEMORY:
        return (
            f"{cfg} needs {_kib(res.smem_bytes[i])} of shared memory, "
            f"the opt-in maximum is {_kib(sm.smem_per_block_optin_bytes)}"
        )
    if name is ConstraintName.MAX_SMEM:
        return (
            f"{cfg} needs {_kib(res.smem_bytes[i])} of shared memory, "
            f"the cap is {_kib(opts.max_smem or 0)}"
        )
    if name is ConstraintName.REGISTERS:
        return (
            f"{cfg} wants about {res.regs_demand[i]} registers per thread; with a limit of "
            f"{res.regs_cap[i]} it would spill {res.spill_regs[i]} (> {MAX_SPILL_REGS})"
        )
    if name is ConstraintName.OCCUPANCY:
        need = max(1, opts.min_blocks_per_sm or 1)
        limiters = ", ".join(x.value for x in res.occupancy.limiters(i))
        return (
            f"{cfg} fits {res.occupancy.blocks_per_sm[i]} block(s) per SM (limited by "
            f"{limiters}), {need} required"
        )
    parts = []
    if problem.seq_len % cfg.block_m:
        parts.append(f"seq_len {problem.seq_len} is not a multiple of block_m {cfg.block_m}")
    if problem.seq_len_kv_eff % cfg.block_n:
        parts.append(
            f"seq_len_kv {problem.seq_len_kv_eff} is not a multiple of block_n {cfg.block_n}"
        )
    return f"{cfg}: " + "; ".join(parts)


def binding_constraints(table: CandidateTable, winner: int) -> list[BindingConstraint]:
    """Constraints without which a faster configuration than the winner would be chosen."""
    out = []
    for name in ConstraintName:
        better = _best(table, _all_except(table, {name}))
        if better is None or table.objective[better] >= table.objective[winner]:
            continue
        gain = 1.0 - table.perf.time_us[better] / table.perf.time_us[winner]
        out.append(
            BindingConstraint(
                constraint=name.value,
                detail=f"without it {violation_detail(table, name, better)}; "
                f"it would be {gain:.1%} faster",
            )
        )
    return out


def minimal_conflict(
    table: CandidateTable, start: list[ConstraintName] | None = None
) -> list[ConstraintName]:
    """An irreducible set of constraints that together admit no configuration.

    Deletion filter: drop each constraint in turn (funnel order) and keep it out if the rest
    still admit nothing. `start` (e.g. CP-SAT's core) narrows the search.
    """
    kept = list(start) if start else list(ConstraintName)
    everything = set(ConstraintName)
    for name in list(kept):
        trial = [k for k in kept if k is not name]
        if not _all_except(table, everything - set(trial)).any():
            kept = trial
    return kept


def _relaxation(table: CandidateTable, name: ConstraintName) -> str | None:
    """The smallest change to `name` that makes the request feasible, or None."""
    allowed = _all_except(table, {name})
    best = _best(table, allowed)
    if best is None:
        return None
    cfg, res, opts = table.cfg.config(best), table.res, table.options
    indices = np.flatnonzero(allowed)
    if name is ConstraintName.MAX_SMEM:
        smallest = indices[np.argmin(res.smem_bytes[indices])]
        return (
            f"raise --max-smem to {res.smem_bytes[smallest]} bytes "
            f"({_kib(res.smem_bytes[smallest])}, the smallest feasible cap) with "
            f"{table.cfg.config(int(smallest))}"
        )
    if name is ConstraintName.OCCUPANCY:
        most = int(res.occupancy.blocks_per_sm[indices].max())
        return f"lower --min-blocks-per-sm to {most} (best then: {cfg})"
    if name is ConstraintName.PINS:
        pinned = [
            f"--{flag} {value}"
            for flag, value in (
                ("block-m", opts.block_m),
                ("block-n", opts.block_n),
                ("num-warps", opts.num_warps),
                ("num-stages", opts.num_stages),
            )
            if value is not None
        ]
        return f"drop the pins ({' '.join(pinned)}); the best feasible tile is {cfg}"
    if name is ConstraintName.DIVISIBILITY:
        return (
            f"drop --require-divisible (pad instead); the best feasible tile is {cfg}, "
            f"or pad seq_len to a multiple of {cfg.block_m}"
        )
    if name is ConstraintName.REGISTERS:
        least = int(res.spill_regs[indices].min())
        return f"accept {least} spilled registers per thread (best then: {cfg})"
    return (
        f"{CONSTRAINT_RULES[name]} is a property of the hardware and kernel; best otherwise {cfg}"
    )


def infeasibility(table: CandidateTable, core: list[ConstraintName] | None = None) -> Infeasibility:
    """Why no configuration is feasible, and what would make one feasible."""
    conflict = minimal_conflict(table, core)
    details = []
    for name in conflict:
        others = _best(table, _all_except(table, {name}))
        if others is not None:
            details.append(violation_detail(table, name, others))
    explanation = (
        f"no configuration satisfies all of: {', '.join(c.value for c in conflict)}. "
        + " ".join(f"Best without {c.value}: {d}." for c, d in zip(conflict, details, strict=False))
    )
    user_first = sorted(
        conflict,
        key=lambda c: (
            c
            not in (
                ConstraintName.MAX_SMEM,
                ConstraintName.PINS,
                ConstraintName.OCCUPANCY,
                ConstraintName.DIVISIBILITY,
            ),
            list(ConstraintName).index(c),
        ),
    )
    relaxation = next(
        (r for r in (_relaxation(table, c) for c in user_first) if r is not None),
        f"relax all of: {', '.join(c.value for c in conflict)}",
    )
    return Infeasibility(
        conflicting_constraints=[c.value for c in conflict],
        explanation=explanation.strip(),
        nearest_relaxation=relaxation,
    )


def reasons(table: CandidateTable, i: int, winner: int) -> list[str]:
    """Why configuration `i` ranks where it does, most important first."""
    sm, _ = table.hardware.cuda
    perf, res = table.perf, table.res
    out = []
    if i == winner:
        out.append(
            f"fastest modelled time ({perf.time_us[i]:.1f} us); bound by {perf.bottleneck[i]}"
        )
    else:
        slower = perf.time_us[i] / perf.time_us[winner] - 1.0
        out.append(f"{slower:.1%} slower than rank 1; bound by {perf.bottleneck[i]}")
    limiters = "/".join(x.value for x in res.occupancy.limiters(i))
    warps = int(res.occupancy.blocks_per_sm[i] * table.cfg.num_warps[i])
    out.append(
        f"{res.occupancy.blocks_per_sm[i]} block(s)/SM limited by {limiters}; "
        f"{warps} of {sm.max_warps_per_sm} warps resident"
    )
    out.append(
        f"{perf.overlap[i]:.0%} of each K/V tile load hidden by compute; "
        f"tensor cores busy {perf.mma_utilization[i]:.0%}"
    )
    spill = f", {res.spill_regs[i]} spilled" if res.spill_regs[i] else ""
    out.append(
        f"shared memory {_kib(res.smem_bytes[i])} of {_kib(sm.smem_per_block_optin_bytes)}; "
        f"about {res.regs_demand[i]} registers per thread{spill}"
    )
    if perf.tail_efficiency[i] < 0.9:
        out.append(
            f"{perf.waves[i]:.2f} waves: the last wave leaves "
            f"{1 - perf.tail_efficiency[i]:.0%} of the SM slots idle"
        )
    if perf.padding_waste[i] > 0.01:
        out.append(f"{perf.padding_waste[i]:.1%} of computed scores are padding or masked")
    return out
