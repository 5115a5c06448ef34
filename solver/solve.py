"""The composition root: validate the request, build the candidate table, rank, explain."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .answer import Candidate, ResourceUse, SolveAnswer, Status
from .cancel import Cancellation
from .candidates import CandidateTable, build_candidate_table, request_space
from .constraints import ConstraintKind
from .errors import (
    DeadlineExceededError,
    FieldViolation,
    InvalidRequestError,
    ModelInvariantError,
    SolveCancelledError,
)
from .exhaustive import solve_exhaustive
from .explain import binding_constraints, funnel, infeasibility, notes, reasons
from .family import KernelFamily
from .hardware import CATALOG_VERSION, CudaDevice, HardwareSpec, get_hardware
from .model_constants import calibration_digest
from .problem import AttentionProblem, Engine, SolveOptions
from .registry import get_family, paged_kv_families, with_alternatives
from .split_kv import paging_requested, split_fields
from .validate import broken_figures, check_configs, fresh_times_us, same_time
from .versions import MODEL_VERSION as MODEL_VERSION  # re-exported; its history: versions.py

# The validator re-checks the ranked configurations this many at a time (one evaluation of
# the family's rules each), a set cancellation stopping it between them.
VALIDATE_CHUNK = 16


def model_version(spec: HardwareSpec) -> str:
    """The model version of answers on `spec`: MODEL_VERSION, suffixed `+cal.<digest>` for a
    calibrated device (a profile; docs/model.md section 15), so that every answer and cache key
    names the constants that produced it."""
    digest = calibration_digest(spec)
    return MODEL_VERSION if digest is None else f"{MODEL_VERSION}+cal.{digest}"


def resolve_hardware(hardware: str | HardwareSpec) -> HardwareSpec:
    """A catalog name/alias or an inline description, as a validated spec."""
    return hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)


@dataclass(frozen=True)
class CheckedRequest:
    """A request that passed every check that needs no search: its device and its family."""

    hardware: HardwareSpec
    family: KernelFamily


def check_request(
    problem: AttentionProblem, hardware: str | HardwareSpec, options: SolveOptions
) -> CheckedRequest:
    """Every check of a request that needs no search, in the order `solve` reports them: the
    hardware (a catalog name, an alias or an `smNN` name; UnknownHardwareError, or
    InvalidRequestError for an ambiguous one), the kernel family for the phase on the device,
    the family's rules for the problem (device kind, compute capability, dtype, head dims,
    dropout) and for the options (min_blocks_per_sm, a paged cache), then the pins against the
    declared domains. Raises InvalidRequestError naming every bad field of the first step that
    has one. It evaluates no configuration (a fraction of a millisecond), so the server runs it
    on its event loop before a request waits for a solver; `prepare` runs it too, so the rules
    are stated once."""
    spec = resolve_hardware(hardware)
    family = get_family(options.kernel, problem.phase, spec)
    violations = family.problem_violations(problem, spec)
    if (
        isinstance(spec, CudaDevice)
        and (options.min_blocks_per_sm or 0) > spec.sm.max_blocks_per_sm
    ):
        violations.append(
            FieldViolation(
                "min_blocks_per_sm",
                f"at most {spec.sm.max_blocks_per_sm} blocks fit on one SM of {spec.name}; "
                f"got {options.min_blocks_per_sm}",
            )
        )
    if family.paged_kv_rule is None and paging_requested(options):
        violations.append(_no_paged_path(family.name, problem, spec, options))
    if not violations:
        violations = family.option_violations(problem, spec, options)
    if violations:
        raise InvalidRequestError(with_alternatives(violations, problem, spec))
    request_space(family, spec, problem, options)  # the pins (and a paged cache's page size)
    return CheckedRequest(spec, family)


def prepare(
    problem: AttentionProblem, hardware: str | HardwareSpec, options: SolveOptions
) -> CandidateTable:
    """Check the request (`check_request`) and evaluate the whole search space."""
    checked = check_request(problem, hardware, options)
    return build_candidate_table(checked.family, checked.hardware, problem, options)


def _no_paged_path(
    name: str, problem: AttentionProblem, spec: HardwareSpec, options: SolveOptions
) -> FieldViolation:
    """--page-size (a pin or auto) for a family without a paged-KV path."""
    paged = paged_kv_families(problem, spec)
    which = f"families with one here: {', '.join(paged)}" if paged else "no family here has one"
    field = "parameter_pins" if "page_size" in options.parameter_pins else "choose_page_size"
    return FieldViolation(field, f"page_size: kernel {name!r} has no paged-KV path; {which}")


def _candidate(table: CandidateTable, i: int, rank: int, winner: int) -> Candidate:
    perf = table.perf
    common = {name: int(column[i]) for name, column in table.common.items()}
    parameters = table.cfg.config(i).as_dict()
    return Candidate(
        rank=rank,
        **common,
        parameters=parameters,
        **split_fields(parameters),
        resources=[
            ResourceUse(name=u.name, used=u.used, capacity=u.capacity, unit=u.unit)
            for u in table.res.uses(i)
        ],
        **table.res.candidate_fields(i),
        predicted_time_us=float(perf.time_us[i]),
        predicted_tflops=float(perf.tflops[i]),
        compute_us=float(perf.compute_us[i]),
        load_us=float(perf.load_us[i]),
        overlap=float(perf.overlap[i]),
        arithmetic_intensity=float(perf.arithmetic_intensity[i]),
        hbm_bytes=float(perf.hbm_bytes[i]),
        waves=float(perf.waves[i]),
        tail_efficiency=float(perf.tail_efficiency[i]),
        padding_waste=float(perf.padding_waste[i]),
        mma_utilization=float(perf.mma_utilization[i]),
        bottleneck=perf.bottleneck[i],
        figures={name: float(values[i]) for name, values in perf.figures.items()},
        reasons=reasons(table, i, winner),
    )


def _validate(table: CandidateTable, ranked: list[int], cancel: Cancellation | None = None) -> None:
    """Re-check every returned candidate apart from the table and the engine, and the figures
    of every feasible configuration (the ranking's times, the answer's figures); a set
    `cancel` stops it between chunks of candidates (`VALIDATE_CHUNK`)."""
    broken = broken_figures(table.perf, np.flatnonzero(table.feasible))
    if broken:
        raise ModelInvariantError(
            f"{table.family.name} on {table.hardware.name}: figures of feasible "
            f"configurations that are not finite and positive: {', '.join(broken)}"
        )
    configs = [table.cfg.config(i) for i in ranked]
    request = (table.family, table.hardware, table.problem, table.options)
    for start in range(0, len(configs), VALIDATE_CHUNK):
        stop_if_cancelled(cancel)
        chunk = configs[start : start + VALIDATE_CHUNK]
        for config, broken in zip(chunk, check_configs(*request, chunk), strict=True):
            if broken:
                label = table.family.label(config)
                raise ModelInvariantError(f"engine returned infeasible {label}: {broken}")
    for i, config, fresh in zip(ranked, configs, fresh_times_us(*request, configs), strict=True):
        if not same_time(fresh, float(table.perf.time_us[i])):
            raise ModelInvariantError(
                f"{table.family.label(config)}: table time {table.perf.time_us[i]} != fresh "
                f"evaluation {fresh}"
            )
    keys = [int(table.objective[i]) for i in ranked]
    if keys != sorted(keys):
        raise ModelInvariantError(f"ranking is not ordered by the objective: {keys}")


def kernel_reason(table: CandidateTable, options: SolveOptions) -> str:
    """Which family was modelled and why: the request named it, or it is the device's default."""
    family = table.family
    summary = family.kernel_summary(table.hardware)
    if options.kernel:
        return f"{family.name}, as requested: {summary}"
    default = table.hardware.default_kernel
    if family.name != default:
        return (
            f"{family.name}, standing in for {table.hardware.name}'s default {default}, which "
            f"has no {table.problem.phase.value} model: {summary}"
        )
    return f"{family.name}, the default kernel of {table.hardware.name}: {summary}"


def resolved_problem(problem: AttentionProblem) -> AttentionProblem:
    """The problem with its defaults written out (kv_heads, seq_len_kv, head_dim_v)."""
    return problem.model_copy(
        update={
            "kv_heads": problem.kv_heads_eff,
            "seq_len_kv": problem.seq_len_kv_eff,
            "head_dim_v": problem.head_dim_v_eff,
        }
    )


def stop_if_cancelled(cancel: Cancellation | None) -> None:
    """Raise SolveCancelledError once `cancel` is set (between the steps of a solve)."""
    if cancel is not None and cancel.cancelled:
        raise SolveCancelledError()


def solve(
    problem: AttentionProblem,
    hardware: str | HardwareSpec,
    options: SolveOptions | None = None,
    *,
    cancel: Cancellation | None = None,
) -> SolveAnswer:
    """Rank the tile configurations of `problem` on `hardware` (the in-process API).

    `cancel`, set from another thread, stops the CP-SAT search at once and the other steps
    (building the table, re-checking the ranked configurations) when they end, and raises
    SolveCancelledError (the server's cancelled calls; see `solver/cancel.py`)."""
    options = options or SolveOptions()
    if options.engine is Engine.CPSAT:
        # Importing ortools (~0.3 s, once per process) is not part of the solve time.
        from . import ip_model  # noqa: F401
    started = time.perf_counter()
    table = prepare(problem, hardware, options)
    stop_if_cancelled(cancel)
    core = None
    if options.engine is Engine.CPSAT:
        from .ip_model import solve_cpsat

        result = solve_cpsat(table, options.top_k, options.time_limit_s, cancel)
        stop_if_cancelled(cancel)
        ranked, proven, core = result.ranked, result.proven_optimal, result.conflicting
        if result.timed_out and not ranked:
            raise DeadlineExceededError(options.time_limit_s, int(table.feasible.sum()))
    else:
        ranked, proven = solve_exhaustive(table, options.top_k), True
    _validate(table, ranked, cancel)
    stop_if_cancelled(cancel)
    feasible_count = int(table.feasible.sum())
    if ranked:
        status = Status.OPTIMAL if proven else Status.FEASIBLE
        winner = ranked[0]
        candidates = [_candidate(table, i, r + 1, winner) for r, i in enumerate(ranked)]
        binding = binding_constraints(table, winner)
        why_not = None
    else:
        status, candidates, binding = Status.INFEASIBLE, [], []
        # CP-SAT's variables cover only legal configurations, so its core is read together
        # with the legality rules before the deletion filter makes it irreducible.
        legality = [c.name for c in table.constraints if c.kind is ConstraintKind.LEGALITY]
        start = [*core, *legality] if core else None
        why_not = infeasibility(table, start)
    return SolveAnswer(
        status=status,
        proven_optimal=proven and bool(ranked),
        hardware=table.hardware.name,
        kernel=table.family.name,
        kernel_reason=kernel_reason(table, options),
        engine=options.engine.value,
        candidates=candidates,
        funnel=funnel(table),
        binding_constraints=binding,
        infeasibility=why_not,
        search_space_size=len(table),
        feasible_count=feasible_count,
        solve_ms=(time.perf_counter() - started) * 1e3,
        model_version=model_version(table.hardware),
        catalog_version=CATALOG_VERSION,
        problem=resolved_problem(problem),
        options=options,
        notes=notes(table, ranked),
    )
