"""The C heap kept between solves (`tilesolve.heap`, proto/tilesolve/heap.py): with glibc's
thresholds raised, a process that frees and again allocates a solve's worth of large numpy
arrays reuses its pages instead of faulting fresh ones in; a user's MALLOC_ variable stays in
charge; the server sets it as it starts, the CLI for `table` and `portfolio` only. Minor page
faults are counted by the kernel (getrusage), not timed."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from tilesolve import wire
from tilesolve.heap import USER_VARIABLES
from tilesolve.solver import AttentionProblem, SolveOptions
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

import heap_churn
from harness import ServerProcess, minor_faults

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")


@pytest.fixture(autouse=True)
def no_malloc_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The processes below start without a MALLOC_ variable: dask's nanny (the Dask tests'
    clusters) sets MALLOC_TRIM_THRESHOLD_ in this process's environment, which keep_heap
    rightly leaves in charge."""
    for name in USER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


TESTS = Path(__file__).resolve().parent
# In a fresh process: the CLI's set-up for a command, or keep_heap, or nothing; then the churn
CHURN = """
import sys
from tilesolve.heap import keep_heap
if sys.argv[1].startswith("cli-"):  # the console script's set-up for a command
    from tilesolve.client import startup
    startup.configure_process(sys.argv[1][4:])
    kept = sys.argv[1] in ("cli-table", "cli-portfolio")
else:
    kept = keep_heap() if sys.argv[1] == "keep" else False
sys.path.insert(0, sys.argv[2])
from heap_churn import churn_faults
print(kept, churn_faults(20))
"""


def _churn(mode: str, **env: str) -> tuple[bool, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHURN, mode, str(TESTS)],
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


def _fa3_backward(index: int) -> Any:
    problem = AttentionProblem(
        batch=1 + index, heads=16, seq_len=4096, head_dim=128, causal=True, phase="backward"
    )
    return wire.solve_request_to_proto(problem, "h100-sxm", SolveOptions(kernel="fa3"))


def test_the_server_and_its_solver_processes_keep_the_heap() -> None:
    """The server's process says so as it starts; its solver processes (forked from a
    forkserver that was started by exec, so the server's setting does not reach them by
    inheritance) fault a few hundred pages at most over eight cold fa3 backward solves,
    where glibc's defaults fault about 3,000 a solve."""
    with (
        ServerProcess("--log-level", "debug", "--workers", "1") as server,
        grpc.insecure_channel(server.target) as channel,
    ):
        assert server.log(r"C heap kept between solves: True"), "".join(server.lines)
        stub = pb_grpc.TileSolveServiceStub(channel)
        for i in range(2):  # the solver process's first solves grow its heap
            stub.Solve(_fa3_backward(i), timeout=60)
        before = minor_faults(server.pid)
        for i in range(2, 10):
            stub.Solve(_fa3_backward(i), timeout=60)
        per_solve = (minor_faults(server.pid) - before) / 8
    assert per_solve < 500, per_solve


@pytest.mark.parametrize("command", ["table", "portfolio"])
def test_the_clis_batch_commands_keep_the_heap(command: str) -> None:
    _, faults = _churn(f"cli-{command}")
    assert faults < 50, faults


def test_a_one_off_cli_question_leaves_the_heap_alone() -> None:
    _, faults = _churn("cli-solve")
    assert faults > 2000, faults


def test_the_clis_worker_processes_keep_the_heap() -> None:
    """`table --workers N` and `portfolio --workers N` evaluate in spawned processes, each
    started with the heap kept (client/parallel.py's initializer)."""
    from tilesolve.client.parallel import ProcessMap

    pool = ProcessMap(workers=2, min_items_per_worker=1)
    try:
        faults = pool(heap_churn.churn_faults, [20, 20])
    finally:
        pool.close()
    assert max(faults) < 50, faults
