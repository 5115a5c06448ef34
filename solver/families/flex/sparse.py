"""The templates' block-size legality: the block mask's BLOCK_SIZE is a multiple of every tile
that walks it (flex_attention.py.jinja: `tl.static_assert(SPARSE_Q_BLOCK_SIZE >= BLOCK_M and
SPARSE_Q_BLOCK_SIZE % BLOCK_M == 0)`, likewise for KV and BLOCK_N; the backward lowering's
divisibility filter on BLOCK_M1/N1/M2/N2; reference/flex_attention.md section 5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...problem import SolveOptions
from ...space import Config, IntArray
from .mask import sparse_block_size

if TYPE_CHECKING:
    from ...candidates import Evaluation


class SparseBlocks(Constraint):
    """Every tile named in `tiles` divides the block mask's block size."""

    name = "sparse_block"
    rule = "the block mask's BLOCK_SIZE (--sparse-block-size) is a multiple of every tile"
    short = "spblk"
    kind = ConstraintKind.LEGALITY

    def __init__(self, tiles: tuple[str, ...]):
        self.tiles = tiles

    def _remainders(self, ev: Evaluation) -> IntArray:
        size = sparse_block_size(ev.options)
        total = np.zeros(len(ev.cfg), dtype=np.int64)
        for tile in self.tiles:
            total = total + size % ev.cfg[tile]
        return np.asarray(total, dtype=np.int64)

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("sparse_remainder", self._remainders(ev), "==", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        size = sparse_block_size(ev.options)
        bad = [f"{t} {ev.cfg[t][i]}" for t in self.tiles if size % int(ev.cfg[t][i])]
        return f"{ev.label(i)}: {', '.join(bad)} does not divide the block size {size}"


def sparse_block_problems(size: int, fields: dict[str, int], tiles: tuple[str, ...]) -> list[str]:
    """The validator's statement of the rule for one configuration."""
    return [
        f"sparse_block: {tile} {fields[tile]} does not divide the block size {size}"
        for tile in tiles
        if size % fields[tile]
    ]


def with_block_mask_rules(
    options: SolveOptions,
    configs: list[Config],
    tiles: tuple[str, ...],
    rules: list[list[str]],
) -> list[list[str]]:
    """Each configuration's block-mask rules (`sparse_block_problems`), then the family's other
    rules found for it (`rules`, one list per configuration): a flex template's `check_all`."""
    size = sparse_block_size(options)
    return [
        [*sparse_block_problems(size, config.as_dict(), tiles), *found]
        for config, found in zip(configs, rules, strict=True)
    ]
