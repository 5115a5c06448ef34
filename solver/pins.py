"""The user's pins, resolved against what the family declares.

A request pins parameters two ways: `parameter_pins` (`--param NAME=VALUE`), for any parameter
the family declares, and the shorthands `block_m`, `block_n`, `num_warps`, `num_stages`
(`--block-m` ...), which pin the common tile fields whether the family declares them or
derives them (a family whose warp count follows from its warpgroups). A pin outside the
domain, an unknown or unpinnable name, or a shorthand that contradicts a `--param` is an
invalid request that names the field and lists what is allowed; it is never "infeasible".
"""

from __future__ import annotations

import numpy as np

from .errors import FieldViolation, InvalidRequestError
from .family import KernelFamily
from .problem import SolveOptions
from .space import COMMON_FIELDS, IntArray, Param


def _values(values: IntArray | tuple[int, ...]) -> str:
    return ", ".join(str(int(v)) for v in sorted(set(int(x) for x in values)))


def resolve_pins(
    family: KernelFamily,
    params: tuple[Param, ...],
    common: dict[str, IntArray],
    options: SolveOptions,
) -> dict[str, int]:
    """Every pinned column by name (a declared parameter or a common field) and its value;
    InvalidRequestError listing every bad pin."""
    declared = {p.name: p for p in params}
    pins: dict[str, int] = {}
    violations: list[FieldViolation] = []
    for name, value in sorted(options.parameter_pins.items()):
        param = declared.get(name)
        if param is None:
            violations.append(
                FieldViolation(
                    "parameter_pins",
                    f"{family.name} has no parameter {name!r}; its parameters: "
                    f"{', '.join(declared)}",
                )
            )
        elif not param.pinnable:
            violations.append(
                FieldViolation(
                    "parameter_pins",
                    f"{name} of {family.name} cannot be pinned ({param.doc}); pinnable: "
                    f"{', '.join(p.name for p in params if p.pinnable)}",
                )
            )
        elif value not in param.domain:
            violations.append(
                FieldViolation(
                    "parameter_pins",
                    f"{name}={value} is outside {family.name}'s domain; allowed: "
                    f"{_values(param.domain)}",
                )
            )
        else:
            pins[name] = value
    for name in COMMON_FIELDS:
        value = getattr(options, name)
        if value is None:
            continue
        if name in options.parameter_pins and options.parameter_pins[name] != value:
            violations.append(
                FieldViolation(
                    name,
                    f"--{name.replace('_', '-')} {value} contradicts --param "
                    f"{name}={options.parameter_pins[name]}; give one value",
                )
            )
            continue
        column = common.get(name)
        if column is None:
            violations.append(
                FieldViolation(
                    name, f"{family.name} has no {name}; its parameters: {', '.join(declared)}"
                )
            )
            continue
        allowed = declared[name].domain if name in declared else np.unique(column)
        if value not in {int(v) for v in allowed}:
            violations.append(
                FieldViolation(
                    name,
                    f"{name}={value} is outside {family.name}'s domain; allowed: "
                    f"{_values(allowed)}",
                )
            )
            continue
        pins[name] = value
    if violations:
        raise InvalidRequestError(violations)
    return pins
