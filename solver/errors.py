"""Errors the solver raises. Each names the offending field and what would be allowed.

An infeasible request is *not* an error: it is an answer whose status says so and explains why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .names import did_you_mean


@dataclass(frozen=True)
class FieldViolation:
    """One bad input: a dotted field path and a sentence saying what is allowed."""

    field: str
    description: str


class TilesolveError(Exception):
    """Base class of every error tilesolve raises on purpose."""


class InvalidRequestError(TilesolveError):
    """The request is malformed; `violations` lists every offending field."""

    def __init__(self, violations: list[FieldViolation]):
        self.violations = violations
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in violations))


class UnknownHardwareError(InvalidRequestError):
    """The hardware name is not in the catalog: the message suggests the closest name or
    alias (as the canonical name it stands for) and lists every name with its aliases."""

    def __init__(
        self, name: str, known: list[str], aliases: Mapping[str, Sequence[str]] | None = None
    ):
        self.name = name
        self.known = known
        aliases = aliases or {}
        meaning = {alias: canonical for canonical in known for alias in aliases.get(canonical, ())}
        suggestion = did_you_mean(name, [*known, *meaning], meaning)
        listed = ", ".join(
            f"{n} (aliases {', '.join(aliases[n])})" if aliases.get(n) else n for n in known
        )
        super().__init__(
            [
                FieldViolation(
                    "hardware",
                    f"unknown hardware {name!r}{suggestion}; known names: {listed}",
                )
            ]
        )


class ModelInvariantError(TilesolveError):
    """A solver returned a configuration the independent validator rejects (a bug)."""


class DeadlineExceededError(TilesolveError):
    """The solver's time limit passed before it found any configuration."""

    def __init__(self, time_limit_s: float, feasible_count: int):
        self.time_limit_s = time_limit_s
        self.feasible_count = feasible_count
        super().__init__(
            f"time_limit_s: CP-SAT found no configuration within {time_limit_s:g} s "
            f"({feasible_count} are feasible); allow more time or use --engine exhaustive"
        )


class SolveCancelledError(TilesolveError):
    """The solve was cancelled (`solver.cancel.Cancellation`) before it answered."""

    def __init__(self) -> None:
        super().__init__("the solve was cancelled before it answered")
