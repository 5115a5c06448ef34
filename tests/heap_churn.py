"""A solve-sized churn of numpy arrays and the minor page faults it takes (tests/test_heap.py):
60 arrays of 46,080 float64, fa3 backward's columns of 368,640 bytes, made and freed again."""

from __future__ import annotations

import resource

import numpy as np

ROWS = 46080
ARRAYS = 60


def solve_like() -> float:
    """Allocate a solve's worth of columns at once, then free them."""
    arrays = [np.ones(ROWS) for _ in range(ARRAYS)]
    return sum(float(a[0]) for a in arrays)


def churn_faults(rounds: int) -> float:
    """Minor page faults (getrusage) a round takes in the calling process, after one round
    that grows the heap."""
    solve_like()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(rounds):
        solve_like()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / rounds
