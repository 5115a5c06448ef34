"""The server's C heap kept between solves (server/heap.py): with glibc's thresholds raised, a
process that frees and again allocates a solve's worth of large numpy arrays reuses its pages
instead of faulting fresh ones in; a user's MALLOC_ variable stays in charge; the server sets
it as it starts. Minor page faults are counted by the kernel (getrusage), not timed."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from tilesolve.server.heap import USER_VARIABLES

from harness import ServerProcess

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


@pytest.fixture(autouse=True)
def no_malloc_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The processes below start without a MALLOC_ variable: dask's nanny (the Dask tests'
    clusters) sets MALLOC_TRIM_THRESHOLD_ in this process's environment, which keep_heap
    rightly leaves in charge."""
    for name in USER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


# 60 arrays of 46,080 float64 (fa3 backward's columns: 368,640 bytes each), freed and made again
CHURN = """
import resource, sys
import numpy as np
from tilesolve.server.heap import keep_heap
kept = keep_heap() if sys.argv[1] == "keep" else False
def solve_like():
    arrays = [np.ones(46080) for _ in range(60)]
    return sum(float(a[0]) for a in arrays)
solve_like()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    solve_like()
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20
print(kept, faults)
"""


def _churn(mode: str, **env: str) -> tuple[bool, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHURN, mode],
        env={**os.environ, **env},  # without MALLOC_ variables but `env` (no_malloc_variables)
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0] == "True", float(out[1])


def test_a_kept_heap_reuses_the_pages_a_solve_freed() -> None:
    kept, faults_kept = _churn("keep")
    default, faults_default = _churn("default")
    assert kept and not default
    # 60 x 368,640 bytes are 5,400 pages: glibc's defaults fault them in every round
    assert faults_default > 2000, faults_default
    assert faults_kept < 50, faults_kept


def test_a_users_malloc_variable_is_left_in_charge() -> None:
    kept, _ = _churn("keep", MALLOC_TRIM_THRESHOLD_="131072")
    assert not kept


def test_the_server_keeps_its_heap_as_it_starts() -> None:
    with ServerProcess("--log-level", "debug") as server:
        assert server.log(r"C heap kept between solves: True"), "".join(server.lines)
