"""Constraint objects: each rule of the tile program stated once.

A constraint has a name, its rule in words, a short label for the heatmap, and a kind: a
*legality* rule of the kernel (alignment, thread counts: what the instructions can tile), a
*capacity* of the hardware (shared memory, registers, residency, Ascend's buffers), or a rule
the *user* sets (pins, caps, divisibility). Its `rules` are linear comparisons of one integer
column each (`column <= bound`, `>=`, `==`): the same rules give the numpy evaluation of which
candidates satisfy it and the CP-SAT encoding, so the two cannot drift apart. It also says how a
configuration breaks it (`detail`), and the smallest change that would admit a configuration
(`relaxation`). The candidate table, the integer program, the explanations and the heatmap loop
over these objects; the validator states the rules again, independently (`validate.py`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

import numpy as np

from .space import BoolArray, IntArray

if TYPE_CHECKING:
    from .candidates import Evaluation


class ConstraintKind(StrEnum):
    LEGALITY = "legality"  # a property of the kernel's instructions; never "binding"
    CAPACITY = "capacity"  # what the hardware grants
    USER = "user"  # what the request sets: pins, caps, divisibility


Comparison = Literal["<=", ">=", "=="]


@dataclass(frozen=True)
class Rule:
    """`column op bound` for every candidate; `variable` names the column in the IP model
    (rules of different constraints that read the same column share one variable)."""

    variable: str
    column: IntArray
    op: Comparison
    bound: int

    def holds(self) -> BoolArray:
        if self.op == "<=":
            return np.asarray(self.column <= self.bound, dtype=np.bool_)
        if self.op == ">=":
            return np.asarray(self.column >= self.bound, dtype=np.bool_)
        return np.asarray(self.column == self.bound, dtype=np.bool_)


@dataclass(frozen=True)
class Relaxation:
    """The smallest change to one constraint that admits a configuration.

    `target_kind` is "option" (a SolveOptions field, e.g. max_smem), "parameter" (a pinned
    parameter) or "none" (a property of the hardware or kernel: nothing the request controls);
    `suggested_value` is the value to set (None: drop the option or pin). `text` says it in
    words, with the best configuration it would admit."""

    constraint: str
    target_kind: Literal["option", "parameter", "none"]
    target: str
    suggested_value: int | None
    text: str


class Constraint(ABC):
    """One rule of the tile program."""

    name: str
    rule: str
    short: str
    kind: ConstraintKind

    @abstractmethod
    def rules(self, ev: Evaluation) -> list[Rule]:
        """The comparisons that state this constraint (empty: it admits everything)."""

    def satisfied(self, ev: Evaluation) -> BoolArray:
        """Which candidates satisfy every rule."""
        ok = np.ones(len(ev.cfg), dtype=np.bool_)
        for rule in self.rules(ev):
            ok &= rule.holds()
        return ok

    @abstractmethod
    def detail(self, ev: Evaluation, i: int) -> str:
        """A sentence saying how configuration i breaks this constraint."""

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        """The smallest change that makes the request feasible, given `allowed`: the
        configurations that satisfy every other constraint (`best` the fastest of them)."""
        return Relaxation(
            self.name,
            "none",
            "",
            None,
            f"{self.rule} is a property of the hardware and kernel; best otherwise "
            f"{ev.label(best)}",
        )


# ---- constraints every family shares -----------------------------------------------------------


class Pins(Constraint):
    """The pinned parameters take their pinned values."""

    name = "pins"
    rule = "tile parameters equal the user's pins"
    short = "pins"
    kind = ConstraintKind.USER

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule(name, ev.column(name), "==", value) for name, value in ev.pins.items()]

    def detail(self, ev: Evaluation, i: int) -> str:
        differs = [
            f"{name} {int(ev.column(name)[i])} != {value}"
            for name, value in ev.pins.items()
            if int(ev.column(name)[i]) != value
        ]
        return f"{ev.label(i)} differs from the pinned parameters ({', '.join(differs)})"

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        pinned = " ".join(f"{name}={value}" for name, value in ev.pins.items())
        moved = [
            (n, int(ev.column(n)[best])) for n, v in ev.pins.items() if ev.column(n)[best] != v
        ]
        name, value = moved[0] if moved else next(iter(ev.pins.items()))
        return Relaxation(
            self.name,
            "parameter",
            name,
            value,
            f"drop the pins ({pinned}); the best feasible tile is {ev.label(best)}",
        )


class Divisibility(Constraint):
    """With --require-divisible: seq_len and seq_len_kv are multiples of the tile."""

    name = "divisibility"
    rule = "seq_len and seq_len_kv are multiples of block_m and block_n"
    short = "div"
    kind = ConstraintKind.USER

    def rules(self, ev: Evaluation) -> list[Rule]:
        if not ev.options.require_divisible:
            return []
        return [Rule("remainder", self._remainder(ev), "==", 0)]

    @staticmethod
    def _remainder(ev: Evaluation) -> IntArray:
        """seq_len mod block_m + seq_len_kv mod block_n (0 exactly when both divide)."""
        rem = np.zeros(len(ev.cfg), dtype=np.int64)
        if "block_m" in ev.common:
            rem = rem + ev.problem.seq_len % ev.common["block_m"]
        if "block_n" in ev.common:
            rem = rem + ev.problem.seq_len_kv_eff % ev.common["block_n"]
        return np.asarray(rem, dtype=np.int64)

    def detail(self, ev: Evaluation, i: int) -> str:
        parts = []
        bm, bn = ev.common.get("block_m"), ev.common.get("block_n")
        if bm is not None and ev.problem.seq_len % bm[i]:
            parts.append(f"seq_len {ev.problem.seq_len} is not a multiple of block_m {bm[i]}")
        if bn is not None and ev.problem.seq_len_kv_eff % bn[i]:
            parts.append(
                f"seq_len_kv {ev.problem.seq_len_kv_eff} is not a multiple of block_n {bn[i]}"
            )
        return f"{ev.label(i)}: " + "; ".join(parts)

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        pad = ""
        if "block_m" in ev.common:
            pad = f", or pad seq_len to a multiple of {int(ev.common['block_m'][best])}"
        return Relaxation(
            self.name,
            "option",
            "require_divisible",
            None,
            f"drop --require-divisible (pad instead); the best feasible tile is "
            f"{ev.label(best)}{pad}",
        )
