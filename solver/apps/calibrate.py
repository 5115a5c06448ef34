"""Calibration: fit the CUDA forward cost model's free constants to measured kernel times, and
the profile that carries the result (docs/model.md section 15).

The free constants are those of `ModelConstants` (achieved matrix rate, instruction-level
parallelism, per-iteration instructions, latency chain, block start, launch) and three catalog
figures (achievable DRAM and L2 fractions, mma.sync efficiency). `fit` minimises, by
Levenberg-Marquardt over the logarithms of the constants within their bounds,

    sum over timed rows of (ln predicted - ln measured)^2 + PRIOR_WEIGHT * sum (ln c/c0)^2

on the training shapes: relative errors, so that long and short kernels weigh alike, and a
weak pull towards today's values, so that a constant the data cannot see stays where it was.
Rows are split into training and held-out shapes (never at random); `Calibration` reports
Spearman and top-1/top-3 regret before and after on both.

A `Profile` is the fitted record as a file: `profile_device` turns it back into the catalog
device with the fitted constants in its `calibration` field and the fitted catalog figures in
place. Its answers carry `MODEL_VERSION+cal.<digest>`; a profile fitted against another model
or catalog version is refused. Pure: no files, no environment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from ..candidates import Evaluation, evaluation
from ..errors import FieldViolation, InvalidRequestError
from ..hardware import CATALOG_VERSION, CudaDevice, get_hardware, parse_hardware
from ..model_constants import DEFAULT_MODEL_CONSTANTS, ModelConstants
from ..problem import SolveOptions
from ..registry import get_family
from ..schema_config import FROZEN_SCHEMA
from ..solve import MODEL_VERSION, model_version
from ..space import Config, ConfigArrays
from .measured import (
    STATUS_OK,
    Measurement,
    Shape,
    Summary,
    Tile,
    analyse,
    by_shape,
    predict_shape,
)

# Timed rows of model-feasible tiles needed in the training shapes per fitted constant.
MIN_ROWS_PER_CONSTANT = 3
# Weight of the pull towards today's value, per constant, in units of squared log-residuals.
PRIOR_WEIGHT = 0.05
HOLDOUT_EVERY = 3  # every third shape (in sorted order) is held out
FITTED_NOTE = "fitted by tilesolve-cli calibrate (a profile; docs/model.md section 15)"


@dataclass(frozen=True)
class FreeConstant:
    """A constant the fit may move: where it lives, and the range it may take."""

    name: str  # a ModelConstants field, or "memory.<field>" / "throughput.<field>"
    lo: float
    hi: float

    @property
    def catalog_path(self) -> tuple[str, str] | None:
        section, dot, attr = self.name.partition(".")
        return (section, attr) if dot else None

    def value(self, device: CudaDevice) -> float:
        path = self.catalog_path
        if path is None:
            constants = device.calibration or DEFAULT_MODEL_CONSTANTS
            return float(getattr(constants, self.name))
        return float(getattr(getattr(device, path[0]), path[1]))


FREE_CONSTANTS: tuple[FreeConstant, ...] = (
    FreeConstant("matrix_efficiency", 0.1, 1.0),
    FreeConstant("instruction_level_parallelism", 1.0, 64.0),
    FreeConstant("wgmma_instruction_level_parallelism", 1.0, 64.0),
    FreeConstant("iteration_fixed_instructions", 1.0, 2000.0),
    FreeConstant("softmax_chain_cycles", 10.0, 20000.0),
    FreeConstant("mma_latency_cycles", 4.0, 500.0),
    FreeConstant("block_start_cycles", 10.0, 100000.0),
    FreeConstant("kernel_launch_us", 0.1, 100.0),
    FreeConstant("memory.dram_achievable_fraction", 0.2, 1.0),
    FreeConstant("memory.l2_achievable_fraction", 0.1, 1.0),
    FreeConstant("throughput.mma_sync_efficiency", 0.05, 1.0),
)
FREE_CONSTANT_NAMES = tuple(c.name for c in FREE_CONSTANTS)
OVERRIDABLE = tuple(c.name for c in FREE_CONSTANTS if c.catalog_path is not None)


def with_constants(device: CudaDevice, values: dict[str, float]) -> CudaDevice:
    """`device` with some free constants replaced (unvalidated copy; `profile_device` and
    `calibrated_device` validate)."""
    constants = (device.calibration or DEFAULT_MODEL_CONSTANTS).model_dump()
    sections: dict[str, dict[str, float]] = {}
    for name, value in values.items():
        section, dot, attr = name.partition(".")
        if dot:
            sections.setdefault(section, {})[attr] = value
        else:
            constants[name] = value
    update: dict[str, Any] = {"calibration": ModelConstants.model_construct(**constants)}
    for section, fields in sections.items():
        update[section] = getattr(device, section).model_copy(update=fields)
    return device.model_copy(update=update)


def calibrated_device(
    base: CudaDevice, constants: ModelConstants, overrides: dict[str, float], note: str
) -> CudaDevice:
    """The catalog device with fitted constants and catalog figures, validated; each
    overridden figure's source says it was fitted."""
    data = base.model_dump(mode="json")
    sources = dict(data.get("sources", {}))
    for path, value in overrides.items():
        if path not in OVERRIDABLE:
            raise ValueError(f"{path} is not a calibratable catalog figure ({OVERRIDABLE})")
        section, _, attr = path.partition(".")
        data[section][attr] = value
        sources[path] = note
    data["sources"] = sources
    data["calibration"] = constants.model_dump(mode="json")
    device = parse_hardware(data)
    assert isinstance(device, CudaDevice)
    return device


# ---- the data of a fit ------------------------------------------------------------------


@dataclass(frozen=True)
class _ShapeData:
    """The timed, model-feasible rows of one shape, as an evaluation over just those tiles."""

    shape: Shape
    ev: Evaluation
    measured_us: np.ndarray


def _shape_data(shape: Shape, rows: Sequence[Measurement], device: CudaDevice) -> _ShapeData:
    pred = predict_shape(shape, device)
    keep = [
        m for m in rows if m.status == STATUS_OK and m.time_us is not None and pred.feasible(m.tile)
    ]
    problem = shape.problem()
    options = SolveOptions(kernel=shape.kernel)
    family = get_family(shape.kernel, problem.phase, device)
    names = [p.name for p in family.params(problem, device)]
    configs = [Config.of(**m.tile._asdict()) for m in keep]
    cfg = ConfigArrays.from_configs(names, configs)
    ev = evaluation(family, device, problem, options, cfg)
    return _ShapeData(shape, ev, np.array([float(m.time_us or 0.0) for m in keep]))


def usable_rows(rows: Sequence[Measurement], device: CudaDevice) -> int:
    """Timed rows of tiles the model calls feasible (what a fit can use)."""
    return sum(len(_shape_data(s, g, device).measured_us) for s, g in by_shape(rows).items())


def split_shapes(
    shapes: Sequence[Shape], every: int = HOLDOUT_EVERY
) -> tuple[list[Shape], list[Shape]]:
    """(training, held-out) shapes: in sorted order, every `every`-th shape is held out (the
    last one if that holds none out and there are two or more); never at random."""
    ordered = sorted(shapes)
    held = [s for i, s in enumerate(ordered) if every > 0 and i % every == every - 1]
    if not held and len(ordered) >= 2 and every > 0:
        held = [ordered[-1]]
    return [s for s in ordered if s not in held], held


# ---- the fit --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitResult:
    values: dict[str, float]  # the fitted value of each fitted constant
    start: dict[str, float]  # today's values
    rms_log_error_before: float  # root-mean-square ln(predicted/measured), training rows
    rms_log_error_after: float
    iterations: int
    rows: int


FIT_ITERATIONS = 60  # Levenberg-Marquardt iterations per start, at most
# Where a long computation stands: called with (steps done, steps in all).
Progress = Callable[[int, int], None]


def _no_progress(done: int, total: int) -> None:
    """A `Progress` that reports nowhere."""


def fit(
    rows: Sequence[Measurement],
    base: CudaDevice,
    names: Sequence[str] = FREE_CONSTANT_NAMES,
    starts: int = 3,
    max_iterations: int = FIT_ITERATIONS,
    progress: Progress = _no_progress,
) -> FitResult:
    """Least squares of ln(predicted/measured) over `rows` (timed, model-feasible), moving
    the constants `names` from `base`'s values. Deterministic: the first start is today's
    values, the others fixed points between them and the bounds. `progress` hears of each
    iteration, of `max(starts, 1) * max_iterations` steps (a start that converges early
    counts all its iterations as done)."""
    free = [c for c in FREE_CONSTANTS if c.name in names]
    data = [_shape_data(s, g, base) for s, g in by_shape(rows).items()]
    data = [d for d in data if len(d.measured_us)]
    n_rows = sum(len(d.measured_us) for d in data)
    x0 = np.log([c.value(base) for c in free])
    lo = np.log([c.lo for c in free])
    hi = np.log([c.hi for c in free])
    x0 = np.clip(x0, lo, hi)
    log_measured = np.concatenate([np.log(d.measured_us) for d in data])

    def values(x: np.ndarray) -> dict[str, float]:
        return {c.name: float(math.exp(v)) for c, v in zip(free, x, strict=True)}

    def residuals(x: np.ndarray) -> np.ndarray:
        device = with_constants(base, values(x))
        predicted = [d.ev.family.evaluate(replace(d.ev, hardware=device)).time_us for d in data]
        model = np.log(np.concatenate(predicted)) - log_measured
        return np.concatenate([model, math.sqrt(PRIOR_WEIGHT) * (x - x0)])

    before = residuals(x0)[:n_rows]
    best_x, best_cost, iterations = x0, float(before @ before), 0
    steps = max(starts, 1) * max_iterations
    for k in range(max(starts, 1)):
        # Start k: today's values, then fixed fractions of the way towards alternate bounds.
        towards = np.where(np.arange(len(free)) % 2 == k % 2, hi, lo)
        start = x0 + (towards - x0) * (0.0 if k == 0 else 0.25 * k)

        def iterated(it: int, k: int = k) -> None:
            progress(k * max_iterations + it, steps)

        x, cost, it = _levenberg_marquardt(
            residuals, np.clip(start, lo, hi), lo, hi, max_iterations, iterated
        )
        progress((k + 1) * max_iterations, steps)
        iterations += it
        if cost < best_cost:
            best_x, best_cost = x, cost
    after = residuals(best_x)[:n_rows]
    return FitResult(
        values={name: float(f"{v:.6g}") for name, v in values(best_x).items()},
        start={c.name: c.value(base) for c in free},
        rms_log_error_before=float(np.sqrt(np.mean(before**2))) if n_rows else 0.0,
        rms_log_error_after=float(np.sqrt(np.mean(after**2))) if n_rows else 0.0,
        iterations=iterations,
        rows=n_rows,
    )


def _levenberg_marquardt(
    residuals: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    max_iterations: int,
    iterated: Callable[[int], None],
) -> tuple[np.ndarray, float, int]:
    """Bounded Levenberg-Marquardt with a forward-difference Jacobian (steps projected onto
    the bounds); `iterated(n)` after the n-th iteration. Returns the point, its cost (sum of
    squares) and the iterations used."""
    r = residuals(x)
    cost = float(r @ r)
    damping = 1e-2
    step_h = 1e-4
    it = 0
    for it in range(1, max_iterations + 1):
        jac = np.empty((len(r), len(x)))
        for j in range(len(x)):
            h = step_h if x[j] + step_h <= hi[j] else -step_h
            xj = x.copy()
            xj[j] += h
            jac[:, j] = (residuals(xj) - r) / h
        a = jac.T @ jac
        g = jac.T @ r
        improved = False
        while damping < 1e10:
            lhs = a + damping * np.diag(np.diag(a) + 1e-9)
            try:
                delta = np.linalg.solve(lhs, -g)
            except np.linalg.LinAlgError:
                damping *= 10.0
                continue
            x_new = np.clip(x + delta, lo, hi)
            r_new = residuals(x_new)
            cost_new = float(r_new @ r_new)
            if np.isfinite(cost_new) and cost_new < cost:
                gain = cost - cost_new
                x, r, cost = x_new, r_new, cost_new
                damping = max(damping / 3.0, 1e-9)
                improved = gain > 1e-10 * max(cost, 1e-12)
                break
            damping *= 4.0
        iterated(it)
        if not improved:
            break
    return x, cost, it


# ---- calibration: split, fit, report ---------------------------------------------------------


@dataclass
class Calibration:
    """The result of `calibrate`: the fit, the devices, and the reports before and after."""

    hardware: str
    fit: FitResult
    device: CudaDevice
    training: list[Shape]
    held_out: list[Shape]
    before_training: Summary
    after_training: Summary
    before_held_out: Summary
    after_held_out: Summary

    def figures(self) -> dict[str, Any]:
        def means(s: Summary) -> dict[str, float | None]:
            return {
                "spearman": s.mean("spearman"),
                "top1_regret": s.mean("top1_regret"),
                "top3_regret": s.mean("top3_regret"),
            }

        return {
            "training_shapes": [s.label() for s in self.training],
            "held_out_shapes": [s.label() for s in self.held_out],
            "training": {
                "before": means(self.before_training),
                "after": means(self.after_training),
            },
            "held_out": {
                "before": means(self.before_held_out),
                "after": means(self.after_held_out),
            },
            "rows": self.fit.rows,
            "rms_log_error_before": self.fit.rms_log_error_before,
            "rms_log_error_after": self.fit.rms_log_error_after,
            "iterations": self.fit.iterations,
            "fitted": self.fit.values,
            "start": self.fit.start,
        }


class TooFewRowsError(InvalidRequestError):
    """The training shapes hold fewer usable rows than the fit needs."""


def calibrate(
    rows: Sequence[Measurement],
    hardware: str,
    names: Sequence[str] = FREE_CONSTANT_NAMES,
    holdout_every: int = HOLDOUT_EVERY,
    starts: int = 3,
    note: str = FITTED_NOTE,
    progress: Progress = _no_progress,
) -> Calibration:
    """Split `rows` (all on `hardware`) by shape, fit on the training shapes, and report
    before and after on both halves. Raises TooFewRowsError (field `measurements`).
    `progress` hears of the fit's iterations (`fit`), then of the four reports, one step each."""
    base = get_hardware(hardware)
    if not isinstance(base, CudaDevice):
        raise InvalidRequestError(
            [FieldViolation("hardware", f"{hardware} is not a CUDA device: nothing to calibrate")]
        )
    unknown = [n for n in names if n not in FREE_CONSTANT_NAMES]
    if unknown or not names:
        raise InvalidRequestError(
            [
                FieldViolation(
                    "fit",
                    f"unknown constant(s) {', '.join(unknown) or '(none given)'}; allowed: "
                    + ", ".join(FREE_CONSTANT_NAMES),
                )
            ]
        )
    groups = by_shape(rows)
    training, held_out = split_shapes(list(groups), holdout_every)
    train_rows = [m for s in training for m in groups[s]]
    usable = usable_rows(train_rows, base)
    needed = MIN_ROWS_PER_CONSTANT * len(names)
    if usable < needed:
        raise TooFewRowsError(
            [
                FieldViolation(
                    "measurements",
                    f"too few rows to fit {len(names)} constants: {needed} timed rows of "
                    f"model-feasible configurations in the training shapes are needed "
                    f"({MIN_ROWS_PER_CONSTANT} per constant); got {usable} (of {len(rows)} "
                    f"rows; {len(held_out)} of {len(groups)} shapes held out). Measure more "
                    "configurations or shapes, or fit fewer constants (--fit)",
                )
            ]
        )
    reports = 4
    fitted = max(starts, 1) * FIT_ITERATIONS

    def fitting(done: int, total: int) -> None:
        progress(done, total + reports)

    result = fit(train_rows, base, names, starts=starts, progress=fitting)
    fitted_constants = {k: v for k, v in result.values.items() if "." not in k}
    overrides = {k: v for k, v in result.values.items() if "." in k}
    constants = ModelConstants(**(DEFAULT_MODEL_CONSTANTS.model_dump() | fitted_constants))
    device = calibrated_device(base, constants, overrides, note)
    held_rows = [m for s in held_out for m in groups[s]]
    summaries = []
    for n, (measured, on) in enumerate(
        [(train_rows, base), (train_rows, device), (held_rows, base), (held_rows, device)], 1
    ):
        summaries.append(analyse(measured, {base.name: on}))
        progress(fitted + n, fitted + reports)
    return Calibration(
        hardware=base.name,
        fit=result,
        device=device,
        training=training,
        held_out=held_out,
        before_training=summaries[0],
        after_training=summaries[1],
        before_held_out=summaries[2],
        after_held_out=summaries[3],
    )


# ---- profiles ---------------------------------------------------------------------------------


class Profile(BaseModel):
    """A calibration as a file (JSON): the device it was fitted on, the model and catalog it
    was fitted against, the fitted constants and catalog figures, and how well they fit."""

    model_config = FROZEN_SCHEMA

    format: Literal["tilesolve-profile/1"] = "tilesolve-profile/1"
    hardware: str = Field(min_length=1, max_length=64, description="catalog name")
    base_model_version: str = Field(description="MODEL_VERSION the constants were fitted in")
    catalog_version: str = Field(description="CATALOG_VERSION the device came from")
    model_version: str = Field("", description="what answers with this profile carry")
    kernel: str = Field("triton", description="the family whose measurements were fitted")
    constants: ModelConstants = ModelConstants()
    overrides: dict[str, float] = Field(
        default_factory=dict, description="fitted catalog figures, by 'section.field'"
    )
    fit: dict[str, Any] = Field(default_factory=dict, description="the fit's report")


def profile_of(calibration: Calibration, kernel: str, source: dict[str, Any]) -> Profile:
    device = calibration.device
    assert device.calibration is not None
    overrides = {k: v for k, v in calibration.fit.values.items() if "." in k}
    return Profile(
        hardware=calibration.hardware,
        base_model_version=MODEL_VERSION,
        catalog_version=CATALOG_VERSION,
        model_version=model_version(device),
        kernel=kernel,
        constants=device.calibration,
        overrides=overrides,
        fit={"measurements": source, **calibration.figures()},
    )


def parse_profile(data: Any, origin: str = "profile") -> Profile:
    """A profile from decoded JSON; InvalidRequestError (field `profile`) when it is not one."""
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise InvalidRequestError(
            [
                FieldViolation(
                    "profile", f"{origin} is not a tilesolve profile: {where}: {first['msg']}"
                )
            ]
        ) from None


def profile_device(profile: Profile, origin: str = "profile") -> CudaDevice:
    """The calibrated device a profile describes. Refused (InvalidRequestError on `profile`)
    when the profile was fitted against another model or catalog version, names an unknown
    or non-CUDA device, or overrides a figure that is not calibratable."""

    def refuse(why: str) -> InvalidRequestError:
        return InvalidRequestError([FieldViolation("profile", f"{origin}: {why}")])

    if profile.base_model_version != MODEL_VERSION:
        raise refuse(
            f"fitted against model {profile.base_model_version}, this is model {MODEL_VERSION}: "
            "its constants belong to other formulas; calibrate again from the measurements"
        )
    if profile.catalog_version != CATALOG_VERSION:
        raise refuse(
            f"fitted against catalog {profile.catalog_version}, this is catalog "
            f"{CATALOG_VERSION}: calibrate again from the measurements"
        )
    bad = sorted(set(profile.overrides) - set(OVERRIDABLE))
    if bad:
        raise refuse(f"overrides {', '.join(bad)}; only {', '.join(OVERRIDABLE)} may be fitted")
    base = get_hardware(profile.hardware)
    if not isinstance(base, CudaDevice):
        raise refuse(f"{profile.hardware} is not a CUDA device")
    try:
        return calibrated_device(
            base,
            profile.constants,
            dict(profile.overrides),
            FITTED_NOTE,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise refuse(f"{where}: {first['msg']}") from None


# ---- synthetic measurements ---------------------------------------------------------------


def synthetic_measurements(
    shapes: Sequence[Shape],
    tiles_for: Callable[[Shape], Sequence[Tile]],
    truth: dict[str, float],
    noise: float = 0.02,
    seed: int = 0,
) -> list[Measurement]:
    """Rows as a sweep would write them, timed by the model itself with the free constants
    `truth` (a perturbed model standing in for the hardware), times a log-normal noise of
    `noise`; tiles the model rejects are recorded as `out_of_resources`. For tests and for
    exercising the analysis and calibration paths without a GPU (docs/model.md 15)."""
    rng = np.random.default_rng(seed)
    rows: list[Measurement] = []
    line = 1
    for shape in shapes:
        base = get_hardware(shape.hardware)
        assert isinstance(base, CudaDevice)
        device = with_constants(base, truth)
        pred = predict_shape(shape, device)
        for tile in tiles_for(shape):
            line += 1
            time = pred.time_us(tile)
            if time is None or not pred.feasible(tile):
                rows.append(Measurement(line, shape, tile, "out_of_resources", None))
                continue
            measured = time * float(np.exp(rng.normal(0.0, noise)))
            rows.append(Measurement(line, shape, tile, STATUS_OK, round(measured, 3)))
    return rows
