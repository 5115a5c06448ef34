"""The exhaustive engine: sort every feasible configuration by the objective key.

It reads the same candidate table as the integer program, so on every problem the two must
return the same feasible set and the same ranking; tests hold them to that.
"""

from __future__ import annotations

from .candidates import CandidateTable


def solve_exhaustive(table: CandidateTable, top_k: int) -> list[int]:
    """Indices of the `top_k` best feasible configurations, best first, twins folded
    (`CandidateTable.distinct_ranked`)."""
    return table.distinct_ranked(top_k)
