"""The search space: the decision variables a family declares, and every configuration of
their domains as parallel integer columns.

A family declares its parameters (`Param`: name, domain, doc, pinnable); the space is their
Cartesian product in declaration order, enumerated with the last parameter varying fastest.
Every engine, the validator, pins, tie-breaking, explanations and the answer read the columns
by name, so a family with other parameters (num_splits, page_size, Ascend's S1/S2 tiles) needs
no change outside its own module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import numpy.typing as npt

# Columns over the candidates: every constraint, resource and cost model reads and writes these.
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# The tile fields every candidate carries, whichever parameters its family declares (null on
# the wire where a family has none of them, e.g. num_warps on Ascend).
COMMON_FIELDS = ("block_m", "block_n", "num_warps", "num_stages")


@overload
def ceil_div(x: int, y: int) -> int: ...
@overload
def ceil_div(x: IntArray, y: IntArray | int) -> IntArray: ...
@overload
def ceil_div(x: int, y: IntArray) -> IntArray: ...
def ceil_div(x: Any, y: Any) -> Any:
    """Integer ceiling division: of ints, or elementwise of int64 arrays."""
    return -(-x // y)


def align_up(x: IntArray, align: int) -> IntArray:
    """Each value rounded up to a multiple of `align`, a power of two: a bit mask, a few times
    faster than `ceil_div(x, align) * align` over tens of thousands of configurations."""
    if align <= 0 or align & (align - 1):
        raise ValueError(f"align_up: {align} is not a power of two")
    return np.asarray((x + (align - 1)) & -align, dtype=np.int64)


@dataclass(frozen=True)
class Param:
    """One decision variable of a kernel family.

    `domain` lists the values it may take before any constraint, increasing; `pinnable` says
    whether a user may fix it (`--param NAME=VALUE`); a parameter that only exists to describe
    the kernel's structure may refuse pins.
    """

    name: str
    domain: tuple[int, ...]
    doc: str
    pinnable: bool = True

    def __post_init__(self) -> None:
        if not self.domain or list(self.domain) != sorted(set(self.domain)):
            raise ValueError(f"parameter {self.name}: domain must be non-empty and increasing")


@dataclass(frozen=True)
class Config:
    """One configuration: a value for each declared parameter, in declaration order."""

    values: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, **values: int) -> Config:
        return cls(tuple(values.items()))

    def as_dict(self) -> dict[str, int]:
        return dict(self.values)

    def __getitem__(self, name: str) -> int:
        for key, value in self.values:
            if key == name:
                return value
        raise KeyError(name)

    def get(self, name: str) -> int | None:
        return self.as_dict().get(name)


class ConfigArrays:
    """N configurations as one int64 column per parameter, in the space's fixed order."""

    def __init__(self, columns: Mapping[str, IntArray], product_of: tuple[Param, ...] = ()):
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError("parameter columns must have equal lengths")
        self.columns: dict[str, IntArray] = {
            k: np.asarray(v, dtype=np.int64) for k, v in columns.items()
        }
        self._len = lengths.pop() if lengths else 0
        # the parameters whose whole product these columns are (set by `product` only)
        self.product_of = product_of

    @classmethod
    def product(cls, params: Iterable[Param]) -> ConfigArrays:
        """All combinations of the domains, ordered lexicographically by declaration order."""
        params = list(params)
        if not params:
            return cls({})
        # itertools.product's order, the last varying fastest: each value of a domain repeated
        # once per combination of the later domains, that run tiled once per combination of
        # the earlier ones
        total = math.prod(len(p.domain) for p in params)
        columns = {}
        later = total
        for p in params:
            later //= len(p.domain)
            run = np.repeat(np.asarray(p.domain, dtype=np.int64), later)
            columns[p.name] = np.tile(run, total // len(run))
        return cls(columns, tuple(params))

    @classmethod
    def from_configs(cls, names: Iterable[str], configs: list[Config]) -> ConfigArrays:
        """The given configurations, in the given order."""
        names = list(names)
        return cls(
            {n: np.array([c[n] for c in configs], dtype=np.int64).reshape(-1) for n in names}
        )

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, name: str) -> IntArray:
        return self.columns[name]

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def get(self, name: str) -> IntArray | None:
        """A parameter's column, or None where the space does not declare it."""
        return self.columns.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.columns)

    # The common tile fields, for families that declare them (KeyError otherwise).
    @property
    def block_m(self) -> IntArray:
        return self.columns["block_m"]

    @property
    def block_n(self) -> IntArray:
        return self.columns["block_n"]

    @property
    def num_warps(self) -> IntArray:
        return self.columns["num_warps"]

    @property
    def num_stages(self) -> IntArray:
        return self.columns["num_stages"]

    def config(self, index: int) -> Config:
        return Config(tuple((n, int(col[index])) for n, col in self.columns.items()))

    def index_of(self, config: Config) -> int | None:
        hit = np.ones(len(self), dtype=np.bool_)
        for name, value in config.values:
            if name not in self.columns:
                return None
            hit &= self.columns[name] == value
        found = np.flatnonzero(hit)
        return int(found[0]) if len(found) else None

    def leading(self, trailing: Iterable[str]) -> tuple[ConfigArrays, IntArray] | None:
        """For the whole product of some parameters (`product`) whose last ones are `trailing`:
        the product of the others and, for each configuration here, the index of its own in
        that smaller product. A quantity that does not read the trailing columns can then be
        derived once per configuration of the smaller product and taken at those indices.
        None for any other set of configurations."""
        names = set(trailing)
        count = len(names)
        if not 0 < count < len(self.product_of):
            return None
        if {p.name for p in self.product_of[-count:]} != names:
            return None
        lead = ConfigArrays.product(self.product_of[:-count])
        repeat = len(self) // len(lead)
        return lead, np.repeat(np.arange(len(lead), dtype=np.int64), repeat)

    def take(self, indices: IntArray) -> ConfigArrays:
        """The configurations at `indices`, in that order."""
        return ConfigArrays({n: col[indices] for n, col in self.columns.items()})
