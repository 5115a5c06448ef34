"""The model against the stopwatch: measured kernel times beside the model's predictions.

A `Measurement` is one row of a sweep (a shape, a tile, what happened, the median time); the
CSV reader that makes them is `tilesolve.client.measurements`. `predict_shape` evaluates the
model on one shape (the whole space of its family, as `solve` does, so the feasibility and the
ranking order are the answer's own), and `shape_report` compares: the model's top-1 and top-3
regret, Spearman's rank correlation between predicted and measured times, and the feasibility
confusion (docs/model.md section 15). Pure: no files, no environment.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..candidates import CandidateTable
from ..hardware import HardwareSpec
from ..problem import AttentionProblem, DType, SolveOptions
from ..solve import prepare

STATUS_OK = "ok"
# What a sweep records for a configuration that produced no time (the harness's words).
FAILURE_STATUSES = ("out_of_resources", "compile_error", "launch_error", "wrong_result")
STATUSES = (STATUS_OK, *FAILURE_STATUSES)
# The families whose cost model reads `ModelConstants` (the CUDA forward model).
CALIBRATED_KERNELS = ("triton", "fa2")


class Tile(NamedTuple):
    """The four tile parameters a Triton kernel takes."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def label(self) -> str:
        return f"{self.block_m}x{self.block_n} w{self.num_warps} s{self.num_stages}"


@dataclass(frozen=True, order=True)
class Shape:
    """One measured problem: the device (catalog name), the kernel family and the problem."""

    hardware: str
    kernel: str
    batch: int
    heads: int
    kv_heads: int
    seq_len: int
    seq_len_kv: int
    head_dim: int
    head_dim_v: int
    dtype: str
    causal: bool

    def problem(self) -> AttentionProblem:
        """The shape's problem; pydantic's ValidationError when it is not one (the readers
        turn it into their row's violations)."""
        return AttentionProblem.model_validate(
            {
                "batch": self.batch,
                "heads": self.heads,
                "kv_heads": self.kv_heads,
                "seq_len": self.seq_len,
                "seq_len_kv": self.seq_len_kv,
                "head_dim": self.head_dim,
                "head_dim_v": self.head_dim_v,
                "dtype": DType(self.dtype),
                "causal": self.causal,
            }
        )

    def label(self) -> str:
        kv = f" kv{self.kv_heads}" if self.kv_heads != self.heads else ""
        sk = f"/{self.seq_len_kv}" if self.seq_len_kv != self.seq_len else ""
        dv = f"/{self.head_dim_v}" if self.head_dim_v != self.head_dim else ""
        mask = " causal" if self.causal else ""
        return (
            f"b{self.batch} h{self.heads}{kv} s{self.seq_len}{sk} d{self.head_dim}{dv} "
            f"{self.dtype}{mask}"
        )


@dataclass(frozen=True)
class Measurement:
    """One sweep row: `row` is its line in the file (the header is line 1)."""

    row: int
    shape: Shape
    tile: Tile
    status: str
    time_us: float | None  # the median time; None unless status is ok


def by_shape(rows: Iterable[Measurement]) -> dict[Shape, list[Measurement]]:
    """Rows grouped by shape, shapes in sorted order; a tile measured twice keeps its last
    row (a resumed sweep appends)."""
    groups: dict[Shape, dict[Tile, Measurement]] = {}
    for m in rows:
        groups.setdefault(m.shape, {})[m.tile] = m
    return {shape: list(groups[shape].values()) for shape in sorted(groups)}


@dataclass(frozen=True)
class ShapePrediction:
    """The model on one shape: its table and, per tile of its space, the row index."""

    table: CandidateTable
    index: dict[Tile, int]

    def lookup(self, tile: Tile) -> int | None:
        return self.index.get(tile)

    def time_us(self, tile: Tile) -> float | None:
        i = self.index.get(tile)
        return None if i is None else float(self.table.perf.time_us[i])

    def feasible(self, tile: Tile) -> bool:
        i = self.index.get(tile)
        return i is not None and bool(self.table.feasible[i])

    def ranked_tiles(self) -> list[Tile]:
        """The model's feasible tiles, best first (the answer's order)."""
        return [self.tile(int(i)) for i in self.table.ranked_feasible()]

    def tile(self, i: int) -> Tile:
        """Configuration i of the table as a tile (its common fields)."""
        c = self.table.common
        return Tile(
            int(c["block_m"][i]),
            int(c["block_n"][i]),
            int(c["num_warps"][i]),
            int(c["num_stages"][i]),
        )


def predict_shape(shape: Shape, spec: HardwareSpec) -> ShapePrediction:
    """The model's table for a shape on `spec` (a catalog device or a calibrated one)."""
    table = prepare(shape.problem(), spec, SolveOptions(kernel=shape.kernel))
    if "num_stages" not in table.common:
        raise ValueError(f"the {shape.kernel} family has no num_stages: not a Triton tile")
    pred = ShapePrediction(table, {})
    pred.index.update({pred.tile(i): i for i in range(len(table))})
    return pred


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties take their mean rank); None for fewer than 3 pairs
    or a constant side."""
    if len(x) != len(y):
        raise ValueError("spearman needs two sequences of one length")
    if len(x) < 3:
        return None
    rx, ry = _ranks(np.asarray(x, dtype=np.float64)), _ranks(np.asarray(y, dtype=np.float64))
    if float(rx.std()) == 0.0 or float(ry.std()) == 0.0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1, dtype=np.float64)
    for value in np.unique(values):
        same = values == value
        if same.sum() > 1:
            ranks[same] = ranks[same].mean()
    return ranks


@dataclass
class Confusion:
    """The model's feasibility against what the kernel did (counts of tiles)."""

    feasible_ran: int = 0  # agreed: the model ranks it and it ran
    feasible_failed: int = 0  # the model too lenient: ranked, but it failed
    infeasible_ran: int = 0  # the model too strict: rejected, but it ran
    infeasible_failed: int = 0  # agreed: rejected, and it failed
    failed_tiles: list[str] = field(default_factory=list)  # "tile: status", model-feasible
    ran_tiles: list[str] = field(default_factory=list)  # "tile: constraint", model-infeasible

    @property
    def agreement(self) -> float | None:
        total = self.feasible_ran + self.feasible_failed + self.infeasible_ran
        total += self.infeasible_failed
        return None if total == 0 else (self.feasible_ran + self.infeasible_failed) / total


@dataclass
class ShapeReport:
    """How the model did on one shape."""

    shape: Shape
    rows: int
    timed: int  # rows with a time
    compared: int  # timed rows the model calls feasible (Spearman's pairs)
    best_tile: Tile | None
    best_us: float | None
    pick: Tile | None  # the model's first choice among the measured tiles
    pick_status: str | None
    pick_us: float | None
    top1_regret: float | None  # pick's time / best time (None: the pick failed or no time)
    top3_regret: float | None  # best of the model's first three measured / best time
    spearman: float | None
    model_top1: Tile | None  # the model's choice over its whole space
    model_top1_measured: bool
    confusion: Confusion

    def as_dict(self) -> dict[str, object]:
        c = self.confusion
        return {
            "shape": self.shape.label(),
            "hardware": self.shape.hardware,
            "kernel": self.shape.kernel,
            "rows": self.rows,
            "timed": self.timed,
            "compared": self.compared,
            "best": None if self.best_tile is None else self.best_tile.label(),
            "best_us": self.best_us,
            "pick": None if self.pick is None else self.pick.label(),
            "pick_status": self.pick_status,
            "pick_us": self.pick_us,
            "top1_regret": self.top1_regret,
            "top3_regret": self.top3_regret,
            "spearman": self.spearman,
            "model_top1": None if self.model_top1 is None else self.model_top1.label(),
            "model_top1_measured": self.model_top1_measured,
            "confusion": {
                "feasible_ran": c.feasible_ran,
                "feasible_failed": c.feasible_failed,
                "infeasible_ran": c.infeasible_ran,
                "infeasible_failed": c.infeasible_failed,
                "model_feasible_but_failed": c.failed_tiles,
                "model_infeasible_but_ran": c.ran_tiles,
            },
        }


def _rejecting_constraint(pred: ShapePrediction, i: int) -> str:
    for c in pred.table.constraints:
        if not bool(pred.table.satisfied[c.name][i]):
            return c.name
    return "?"


def shape_report(
    shape: Shape, rows: Sequence[Measurement], pred: ShapePrediction, top: int = 3
) -> ShapeReport:
    """Regret, rank correlation and feasibility of the model on one shape's rows."""
    timed = [m for m in rows if m.status == STATUS_OK and m.time_us is not None]
    best = min(timed, key=lambda m: (m.time_us, m.tile), default=None)
    confusion = Confusion()
    compared_pred: list[float] = []
    compared_meas: list[float] = []
    for m in rows:
        i = pred.lookup(m.tile)
        ran = m.status == STATUS_OK
        if i is not None and bool(pred.table.feasible[i]):
            if ran:
                confusion.feasible_ran += 1
                compared_pred.append(float(pred.table.perf.time_us[i]))
                compared_meas.append(float(m.time_us or 0.0))
            else:
                confusion.feasible_failed += 1
                confusion.failed_tiles.append(f"{m.tile.label()}: {m.status}")
        elif ran:
            confusion.infeasible_ran += 1
            why = "outside the family's space" if i is None else _rejecting_constraint(pred, i)
            confusion.ran_tiles.append(f"{m.tile.label()}: {why}")
        else:
            confusion.infeasible_failed += 1
    measured = {m.tile: m for m in rows}
    # The model's order over the measured tiles it calls feasible (the answer's order).
    ranked = pred.ranked_tiles()
    order = [t for t in ranked if t in measured]
    pick = order[0] if order else None
    best_us = None if best is None else best.time_us
    pick_row = measured[pick] if pick is not None else None
    pick_us = pick_row.time_us if pick_row is not None and pick_row.status == STATUS_OK else None
    top1 = None if pick_us is None or not best_us else pick_us / best_us
    first = [measured[t].time_us for t in order[:top] if measured[t].status == STATUS_OK]
    first_times = [t for t in first if t is not None]
    top3 = None if not first_times or not best_us else min(first_times) / best_us
    return ShapeReport(
        shape=shape,
        rows=len(rows),
        timed=len(timed),
        compared=len(compared_pred),
        best_tile=None if best is None else best.tile,
        best_us=best_us,
        pick=pick,
        pick_status=None if pick_row is None else pick_row.status,
        pick_us=pick_us,
        top1_regret=top1,
        top3_regret=top3,
        spearman=spearman(compared_pred, compared_meas),
        model_top1=ranked[0] if ranked else None,
        model_top1_measured=bool(ranked) and ranked[0] in measured,
        confusion=confusion,
    )


@dataclass
class Summary:
    """Per-shape reports and their means (over the shapes where a figure exists)."""

    shapes: list[ShapeReport]

    def mean(self, name: str) -> float | None:
        values = [getattr(r, name) for r in self.shapes]
        kept = [float(v) for v in values if v is not None and not math.isnan(v)]
        return sum(kept) / len(kept) if kept else None

    def as_dict(self) -> dict[str, object]:
        return {
            "shapes": [r.as_dict() for r in self.shapes],
            "mean_top1_regret": self.mean("top1_regret"),
            "mean_top3_regret": self.mean("top3_regret"),
            "mean_spearman": self.mean("spearman"),
        }


def analyse(
    rows: Iterable[Measurement], spec_for: dict[str, HardwareSpec], top: int = 3
) -> Summary:
    """Reports for every shape of `rows`; `spec_for` maps a row's hardware name to the device
    to predict with (a catalog device, or a calibrated one)."""
    reports = []
    for shape, group in by_shape(rows).items():
        pred = predict_shape(shape, spec_for[shape.hardware])
        reports.append(shape_report(shape, group, pred, top))
    return Summary(reports)


def sample_tiles(pred: ShapePrediction, top: int, size: int, seed: int = 0) -> list[Tile]:
    """A sweep's configurations for one shape: the model's `top` feasible tiles in its order,
    then a uniform sample of the rest of the family's legal space (feasible or not: the
    kernel's failures test the model's feasibility) up to `size` in all, drawn with a
    generator seeded by `seed` and the shape, so that a plan is reproducible."""
    ranked = pred.ranked_tiles()[:top]
    legal = [pred.tile(int(i)) for i in np.flatnonzero(pred.table.legal())]
    rest = [t for t in legal if t not in set(ranked)]
    digest = hashlib.sha256(repr((seed, pred.table.problem.model_dump_json())).encode())
    rng = np.random.default_rng(int.from_bytes(digest.digest()[:8], "little"))
    count = max(0, min(size - len(ranked), len(rest)))
    chosen = sorted(rng.choice(len(rest), size=count, replace=False).tolist())
    return ranked + [rest[i] for i in chosen]
