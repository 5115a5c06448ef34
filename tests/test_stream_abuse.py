"""Connections and streams used against the server (issue 22): HTTP/2 rapid reset, idle
connections, answers held in flight, and the log lines a client can cause.

Each test fails on the server before issue 22 (the rapid-reset rounds grew the process tree by
about 520 MiB at about 2 CPU-s a round; idle connections stayed open; in-flight answers had no
budget; every never-read answer logged a traceback). `FIGURE` lines are the figures of
docs/reliability.md (`pytest -s` shows them).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from h2raw import RapidReset, stuck_call
from harness import ServerProcess, cold_request, cpu_seconds, process_tree, rss_bytes
from loopback import serving

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

MIB = 1024 * 1024
SOLVE = "tilesolve.v1.TileSolveService/Solve"
BATCH = "tilesolve.v1.TileSolveService/SolveBatch"
ROUNDS, STREAMS = 6, 20_000
SETTLE_S = 1.0  # after a round, time for the server to finish what the round left


def figure(text: str) -> None:
    print(f"\nFIGURE {text}")


def _tree_rss(pid: int) -> int:
    return sum(rss_bytes(member) for member in process_tree(pid))


def test_rapid_reset_rounds_leave_memory_and_cpu_bounded() -> None:
    """Six rounds of 20,000 HEADERS + DATA + RST_STREAM on one connection: the process tree
    grows by under 64 MiB, each round costs under 1 CPU-s, and another client is answered
    throughout (before: +520 MiB, about 2 CPU-s a round)."""
    with ServerProcess("--log-level", "info") as server:
        channel = grpc.insecure_channel(server.target)
        stub = pb_grpc.TileSolveServiceStub(channel)
        check = health_pb2_grpc.HealthStub(channel).Check
        request = cold_request(1)
        stub.Solve(request, timeout=30)  # warm; cached from now on
        time.sleep(SETTLE_S)
        before = _tree_rss(server.pid)
        others: list[float] = []
        failures: list[str] = []
        stop = threading.Event()

        def another_client() -> None:
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    stub.Solve(request, timeout=10)
                    check(health_pb2.HealthCheckRequest(), timeout=10)
                except grpc.RpcError as exc:
                    failures.append(exc.code().name)
                others.append(time.perf_counter() - started)
                time.sleep(0.01)

        watcher = threading.Thread(target=another_client)
        watcher.start()
        costs, sent = [], 0
        attack = RapidReset(server.port, SOLVE, request.SerializeToString())
        try:
            for _ in range(ROUNDS):
                if attack.closed.is_set():  # the server may end a connection; start another
                    attack.close()
                    attack = RapidReset(server.port, SOLVE, request.SerializeToString())
                cpu = cpu_seconds(server.pid)
                sent += attack.flood(STREAMS)
                time.sleep(SETTLE_S)
                costs.append(cpu_seconds(server.pid) - cpu)
            grown = _tree_rss(server.pid) - before
        finally:
            attack.close()
            stop.set()
            watcher.join(timeout=30)
        after = stub.Solve(cold_request(2), timeout=30)  # a cold solve, after it all
        channel.close()
        failed_calls = server.log(r"code=(?!OK)")
    figure(
        f"rapid reset: {ROUNDS} x {STREAMS} streams opened and reset on one connection "
        f"({sent} sent): process tree {before / MIB:.0f} -> {(before + grown) / MIB:.0f} MiB "
        f"({grown / MIB:+.1f}), CPU per round {min(costs):.2f}-{max(costs):.2f} s; another "
        f"client: {len(others)} calls, slowest {max(others) * 1e3:.0f} ms, {len(failures)} "
        f"failed; {len(failed_calls)} log lines of calls that did not end OK"
    )
    assert sent == ROUNDS * STREAMS
    assert grown < 64 * MIB
    assert max(costs) < 1.0
    assert not failures and others and max(others) < 2.0
    assert after.status == pb.SOLVE_STATUS_OPTIMAL
    assert not failed_calls  # the reset streams never reached the servicer


def test_an_idle_connection_is_closed() -> None:
    """--max-connection-idle: a connection that carries no call gets GOAWAY and is closed (a
    silent socket too); a client that was idle is answered on its next call (it reconnects)."""
    with ServerProcess("--max-connection-idle", "1") as server:
        started = time.monotonic()
        with RapidReset(server.port, SOLVE, b"") as silent:  # the preface, then nothing
            closed = silent.closed.wait(10)
            took = time.monotonic() - started
            assert closed and silent.goaway.is_set()
        channel = grpc.insecure_channel(server.target)
        stub = pb_grpc.TileSolveServiceStub(channel)
        first = stub.Solve(cold_request(1), timeout=30)
        time.sleep(2.0)  # idle: the server closes the connection
        again = stub.Solve(cold_request(1), timeout=30)
        channel.close()
    figure(f"idle connection (--max-connection-idle 1): GOAWAY and closed after {took:.2f} s")
    assert 0.5 < took < 3.0
    assert first.status == again.status == pb.SOLVE_STATUS_OPTIMAL


def test_answers_in_flight_are_held_within_their_budget() -> None:
    """Answers a client does not read stay held until their call ends; beyond
    max_inflight_bytes a Solve is RESOURCE_EXHAUSTED naming the limit and a SolveBatch answers
    what fits and the rest in place; once the stuck calls end, everything is given back."""
    settings = {
        "workers": 2,
        "max_request_bytes": 64 * 1024,
        "max_response_bytes": 256 * 1024,
        "max_inflight_bytes": 400 * 1024,
    }
    with serving(**settings) as server:
        budget = server.servicer.in_flight_bytes
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        stub = pb_grpc.TileSolveServiceStub(channel)
        batch = pb.SolveBatchRequest(requests=[cold_request(11)] * 20)
        stub.SolveBatch(batch, timeout=30)  # solved and cached: the stuck ones answer at once
        sockets = [stuck_call(server.port, BATCH, batch.SerializeToString(), 3.0)]
        sockets += [stuck_call(server.port, BATCH, batch.SerializeToString(), 3.0)]
        sockets += [stuck_call(server.port, BATCH, batch.SerializeToString(), 3.0)]
        try:
            time.sleep(0.5)
            stuck_held = budget.held
            with pytest.raises(grpc.RpcError) as refused:
                stub.Solve(cold_request(3, top_k=100, kernel="triton"), timeout=30)
            partial = stub.SolveBatch(batch, timeout=30)
            small = stub.Solve(cold_request(11), timeout=30)  # a small answer still fits
            time.sleep(3.0)  # the stuck calls' deadline: their answers are let go
            let_go = budget.held
            whole = stub.SolveBatch(batch, timeout=30)
        finally:
            for sock in sockets:
                sock.close()
        channel.close()
        time.sleep(0.2)
        end = budget.held
    codes = [item.code for item in partial.items]
    answered = codes.count(0)
    figure(
        f"in-flight budget 400 KiB: 3 stuck batch answers hold {stuck_held} bytes; a 100-"
        f"candidate Solve RESOURCE_EXHAUSTED; a 20-problem batch: {answered} answered, the "
        f"rest in place; after the stuck calls' deadline {let_go} bytes held"
    )
    assert stuck_held > 300 * 1024
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "max_inflight_bytes" in (refused.value.details() or "")
    assert 0 < answered < 20 and codes[answered:] == [8] * (20 - answered)
    assert "max_inflight_bytes" in partial.items[-1].message
    assert small.status == pb.SOLVE_STATUS_OPTIMAL
    assert [item.code for item in whole.items] == [0] * 20
    assert let_go < 64 * 1024 and end == 0


def test_what_clients_cause_is_logged_at_a_bounded_rate() -> None:
    """120 answers nobody reads and 300 refused requests: a few lines of each kind and a count
    of the rest, no traceback (before: a traceback per unread answer, a line per refusal)."""
    drain = ("--drain-delay", "0", "--grace", "1")
    with ServerProcess("--log-level", "info", *drain) as server:
        channel = grpc.insecure_channel(server.target)
        stub = pb_grpc.TileSolveServiceStub(channel)
        stub.Solve(cold_request(1), timeout=30)
        sockets = [
            stuck_call(server.port, BATCH, pb.SolveBatchRequest(
                requests=[cold_request(1)] * 20).SerializeToString(), 1.0)
            for _ in range(120)
        ]  # fmt: skip
        bad = pb.SolveRequest(problem=cold_request(1).problem)  # no hardware
        refused = 0
        for _ in range(300):
            try:
                stub.Solve(bad, timeout=10)
            except grpc.RpcError:
                refused += 1
        time.sleep(2.5)  # past the stuck calls' deadline
        for sock in sockets:
            sock.close()
        channel.close()
        server.signal(signal.SIGTERM)
        server.wait(timeout=30)
    unsent = server.log("ExecuteBatchError")
    invalid = server.log(r"method=Solve code=INVALID_ARGUMENT")
    tracebacks = server.log("Traceback")
    summaries = server.log(r"similar lines suppressed")
    figure(
        f"log volume: 120 unread answers -> {len(unsent)} lines, 300 refused Solves -> "
        f"{len(invalid)} lines, {len(tracebacks)} tracebacks, {len(summaries)} summaries"
    )
    assert refused == 300
    assert 1 <= len(unsent) <= 25 and len(invalid) <= 25 and not tracebacks
    assert summaries  # what was left out is counted
