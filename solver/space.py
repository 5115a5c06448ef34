"""The search space: every tile configuration of a family's domain, as parallel integer arrays."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .problem import TileConfig

IntArray = npt.NDArray[np.int64]


@overload
def ceil_div(x: int, y: int) -> int: ...
@overload
def ceil_div(x: IntArray, y: IntArray | int) -> IntArray: ...
@overload
def ceil_div(x: int, y: IntArray) -> IntArray: ...
def ceil_div(x: Any, y: Any) -> Any:
    """Integer ceiling division: of ints, or elementwise of int64 arrays."""
    return -(-x // y)


@dataclass(frozen=True)
class Domain:
    """The values each tile parameter may take (before any constraint)."""

    block_m: tuple[int, ...]
    block_n: tuple[int, ...]
    num_warps: tuple[int, ...]
    num_stages: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.block_m) * len(self.block_n) * len(self.num_warps) * len(self.num_stages)


@dataclass(frozen=True)
class ConfigArrays:
    """N configurations, one array entry each, in the space's fixed enumeration order."""

    block_m: IntArray
    block_n: IntArray
    num_warps: IntArray
    num_stages: IntArray

    @classmethod
    def from_domain(cls, domain: Domain) -> ConfigArrays:
        """All combinations, ordered by (block_m, block_n, num_warps, num_stages) ascending."""
        rows = list(
            itertools.product(domain.block_m, domain.block_n, domain.num_warps, domain.num_stages)
        )
        table = np.array(rows, dtype=np.int64).reshape(-1, 4)
        return cls(table[:, 0], table[:, 1], table[:, 2], table[:, 3])

    @classmethod
    def from_configs(cls, configs: list[TileConfig]) -> ConfigArrays:
        """The given configurations, in the given order."""
        table = np.array([c.key() for c in configs], dtype=np.int64).reshape(-1, 4)
        return cls(table[:, 0], table[:, 1], table[:, 2], table[:, 3])

    @classmethod
    def single(cls, config: TileConfig) -> ConfigArrays:
        return cls.from_configs([config])

    def __len__(self) -> int:
        return len(self.block_m)

    def config(self, index: int) -> TileConfig:
        return TileConfig(
            block_m=int(self.block_m[index]),
            block_n=int(self.block_n[index]),
            num_warps=int(self.num_warps[index]),
            num_stages=int(self.num_stages[index]),
        )

    def index_of(self, config: TileConfig) -> int | None:
        hits = np.flatnonzero(
            (self.block_m == config.block_m)
            & (self.block_n == config.block_n)
            & (self.num_warps == config.num_warps)
            & (self.num_stages == config.num_stages)
        )
        return int(hits[0]) if len(hits) else None
