"""The solver-independent validator: the executable specification of a feasible configuration.

`check_config` states every rule directly for one configuration, without the candidate table,
the constraint objects or any engine: the declared domains, the family's own statement of its
rules (`KernelFamily.check`, e.g. the CUDA families' scalar occupancy calculation), the pins
and divisibility; `check_configs` does the same for several at once (a family may evaluate
its rules once over all of them: `KernelFamily.check_all`). `solve` runs it on every
candidate it returns and fails loudly if an engine
ever returns a configuration the rules reject, or figures that differ from a fresh evaluation.
`broken_figures` states what every figure of an answer must be (finite, not negative; a time
positive): an answer that breaks it would not even encode, so it is a broken model invariant,
never an answer.
"""

from __future__ import annotations

import math

import numpy as np

from .candidates import evaluation
from .cost import Perf
from .family import KernelFamily
from .hardware import HardwareSpec
from .problem import AttentionProblem, SolveOptions
from .space import COMMON_FIELDS, Config, ConfigArrays


def check_config(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    config: Config,
) -> list[str]:
    """Every rule `config` breaks, as '<constraint>: <why>' (empty when it is feasible)."""
    return check_configs(family, hardware, problem, options, [config])[0]


def check_configs(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    configs: list[Config],
) -> list[list[str]]:
    """`check_config` of each configuration, the family's rules stated once over all of
    those inside the domains (`KernelFamily.check_all`)."""
    params = family.request_params(problem, hardware, options)
    found: list[list[str]] = []
    for config in configs:
        values = config.as_dict()
        found.append(
            [
                f"domain: {param.name}={values.get(param.name)} not in the domain"
                for param in params
                if values.get(param.name) not in param.domain
            ]
        )
    inside = [k for k, problems in enumerate(found) if not problems]
    if not inside:
        return found
    checked = family.check_all(hardware, problem, options, [configs[k] for k in inside])
    pins = dict(options.parameter_pins)
    pins.update({f: getattr(options, f) for f in COMMON_FIELDS if getattr(options, f) is not None})
    for k, family_problems in zip(inside, checked, strict=True):
        problems = found[k]
        problems.extend(family_problems)
        values = configs[k].as_dict()
        fields = {
            **{name: v for name, v in values.items() if name in COMMON_FIELDS},
            **family.derived(values),
        }
        for name, pinned in pins.items():
            actual = values.get(name, fields.get(name))
            if actual != pinned:
                problems.append(f"pins: {name} {actual} != pinned {pinned}")
        if options.require_divisible:
            bm, bn = fields.get("block_m"), fields.get("block_n")
            if (bm and problem.seq_len % bm) or (bn and problem.seq_len_kv_eff % bn):
                problems.append("divisibility: seq_len not a multiple of the tile")
    return found


def fresh_times_us(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    configs: list[Config],
) -> list[float]:
    """The modelled time of each configuration, evaluated apart from the table (us)."""
    if not configs:
        return []
    names = [p.name for p in family.request_params(problem, hardware, options)]
    cfg = ConfigArrays.from_configs(names, configs)
    perf = family.evaluate(evaluation(family, hardware, problem, options, cfg))
    return [float(t) for t in perf.time_us]


# The figures every Perf carries for each configuration; a family's own `figures` come beside.
PERF_FIGURES = (
    "time_us",
    "tflops",
    "compute_us",
    "load_us",
    "overlap",
    "arithmetic_intensity",
    "hbm_bytes",
    "waves",
    "tail_efficiency",
    "padding_waste",
    "mma_utilization",
)


def broken_figures(perf: Perf, indices: np.ndarray | list[int]) -> list[str]:
    """The figures of the configurations at `indices` that are not finite or are negative,
    or a time that is not positive, as 'name (value)' (empty when every one is sound)."""
    named = {name: getattr(perf, name) for name in PERF_FIGURES}
    named.update({f"figures.{name}": values for name, values in perf.figures.items()})
    broken = []
    for name, column in named.items():
        values = np.asarray(column, dtype=np.float64)[indices]
        bad = ~np.isfinite(values) | (values < 0)
        if name == "time_us":
            bad |= values == 0
        if bad.any():
            broken.append(f"{name} ({values[bad][0]!r})")
    return broken


def same_time(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
