"""The configuration space as a (block_m x block_n) grid: what `solve --plot` and
`solve --explain` draw.

Pure: computed from the candidate table that both engines rank (`solve.prepare`), so the grid
agrees with the answer by construction. Each cell is one tile shape; the other tile parameters
(warps, stages) are collapsed to the cell's best feasible configuration. A cell with no
feasible configuration is labelled with the constraint that removes it (see `heatmap_grid`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..candidates import CandidateTable
from ..hardware import HardwareSpec
from ..problem import AttentionProblem, SolveOptions
from ..solve import prepare


@dataclass(frozen=True)
class HeatmapGrid:
    """Predicted TFLOP/s over (block_m, block_n), best warps/stages per cell.

    All per-cell tuples are indexed `[i][j]` for `block_m_values[i]`, `block_n_values[j]`.
    A feasible cell has `tflops`, `num_warps`, `num_stages` of its best feasible configuration
    (smallest objective: modelled time, then the fixed tie-break order) and `labels` None; an
    infeasible cell has those None and `labels` the constraint that removes it. `winner` is
    the (block_m, block_n) of the overall best feasible configuration (the answer's rank 1),
    None when nothing is feasible.
    """

    hardware: str
    kernel: str
    block_m_values: tuple[int, ...]
    block_n_values: tuple[int, ...]
    tflops: tuple[tuple[float | None, ...], ...]
    num_warps: tuple[tuple[int | None, ...], ...]
    num_stages: tuple[tuple[int | None, ...], ...]
    labels: tuple[tuple[str | None, ...], ...]
    winner: tuple[int, int] | None
    winner_tflops: float | None
    short_names: dict[str, str]  # constraint name -> label for cells too small for the name
    constraint_order: tuple[str, ...]  # the funnel order

    def cell(self, block_m: int, block_n: int) -> tuple[int, int]:
        """The (row, column) index of a tile shape; ValueError if it is not in the grid."""
        return self.block_m_values.index(block_m), self.block_n_values.index(block_n)

    @property
    def feasible_cells(self) -> int:
        return sum(value is not None for row in self.tflops for value in row)

    def constraints_shown(self) -> list[str]:
        """The constraints that label at least one cell, in funnel order."""
        present = {label for row in self.labels for label in row if label is not None}
        return [name for name in self.constraint_order if name in present]


def removing_constraint(table: CandidateTable, indices: np.ndarray) -> str:
    """The constraint that removes the last configurations of `indices` (a cell with no
    feasible configuration): the cell's own funnel, constraints applied in funnel order to
    the cell's configurations; the label is the constraint at which none remain.
    Equivalently: of the cell's configurations that get furthest through the funnel,
    take the fastest (smallest objective); the label is the first constraint it violates.
    """
    alive = np.ones(len(indices), dtype=np.bool_)
    for c in table.constraints:
        alive &= table.satisfied[c.name][indices]
        if not alive.any():
            return c.name
    raise ValueError("the cell has a feasible configuration")


def grid_from_table(table: CandidateTable) -> HeatmapGrid:
    """The heatmap grid of an evaluated candidate table."""
    cfg = table.common
    bm_values = tuple(sorted({int(v) for v in cfg["block_m"]}))
    bn_values = tuple(sorted({int(v) for v in cfg["block_n"]}))
    tflops: list[tuple[float | None, ...]] = []
    warps: list[tuple[int | None, ...]] = []
    stages: list[tuple[int | None, ...]] = []
    labels: list[tuple[str | None, ...]] = []
    for bm in bm_values:
        row_t: list[float | None] = []
        row_w: list[int | None] = []
        row_s: list[int | None] = []
        row_l: list[str | None] = []
        for bn in bn_values:
            indices = np.flatnonzero((cfg["block_m"] == bm) & (cfg["block_n"] == bn))
            ok = indices[table.feasible[indices]]
            if len(ok):
                best = int(ok[np.argmin(table.objective[ok])])
                row_t.append(float(table.perf.tflops[best]))
                row_w.append(int(cfg["num_warps"][best]) if "num_warps" in cfg else None)
                row_s.append(int(cfg["num_stages"][best]) if "num_stages" in cfg else None)
                row_l.append(None)
            else:
                row_t.append(None)
                row_w.append(None)
                row_s.append(None)
                row_l.append(removing_constraint(table, indices))
        tflops.append(tuple(row_t))
        warps.append(tuple(row_w))
        stages.append(tuple(row_s))
        labels.append(tuple(row_l))
    ranked = table.ranked_feasible()
    winner = winner_tflops = None
    if len(ranked):
        top = int(ranked[0])
        winner = (int(cfg["block_m"][top]), int(cfg["block_n"][top]))
        winner_tflops = float(table.perf.tflops[top])
    return HeatmapGrid(
        hardware=table.hardware.name,
        kernel=table.family.name,
        block_m_values=bm_values,
        block_n_values=bn_values,
        tflops=tuple(tflops),
        num_warps=tuple(warps),
        num_stages=tuple(stages),
        labels=tuple(labels),
        winner=winner,
        winner_tflops=winner_tflops,
        short_names={c.name: c.short for c in table.constraints},
        constraint_order=tuple(c.name for c in table.constraints),
    )


def heatmap_grid(
    problem: AttentionProblem,
    hardware: str | HardwareSpec,
    options: SolveOptions | None = None,
) -> HeatmapGrid:
    """The (block_m x block_n) heatmap of `problem` on `hardware` under `options`.

    Per cell: the best feasible configuration over warps and stages (by the solver's
    objective), its predicted TFLOP/s, warps and stages; or, with none feasible, the
    constraint that removes the cell (`removing_constraint`). The winner cell holds the
    overall best feasible configuration, the answer's rank 1. Invalid requests raise
    `InvalidRequestError`, as `solve` does.
    """
    return grid_from_table(prepare(problem, hardware, options or SolveOptions()))
