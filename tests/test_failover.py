"""Failover across replicas: real `tilesolve-server` processes on loopback (127.0.0.1 and
127.0.0.2), one `TileSolveClient` given both addresses, threads calling it without pause (cold
solves, cached solves, occupancy), then a fault: SIGKILL of one replica, SIGTERM (a drain) of
one, and a server that closes every connection after a second (`--max-connection-age 1`).
Each must cost no call.

Which replica answered is read from the servers themselves: every call ends with one log line
`rpc method=Solve code=OK ... peer=ipv4:127.0.0.1:PORT` on the server's stderr. Each test
prints one `FIGURE` line (`pytest -s` shows them).
"""

from __future__ import annotations

import itertools
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tilesolve import wire
from tilesolve.client.remote import TileSolveClient
from tilesolve.solver import AttentionProblem

from harness import ServerProcess, cold_request

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux loopback")

# Light servers: solves in threads, one at a time, a short drain.
SERVER_ARGS = ("--solve-in", "threads", "--workers", "1", "--log-level", "info")
DRAIN_DELAY_S, GRACE_S = 1.0, 5.0
RPC_LINE = r"rpc method=\w+ code="
CACHED = AttentionProblem(seq_len=2048, head_dim=128, causal=True)


def figure(text: str) -> None:
    print(f"\nFIGURE {text}")


@dataclass
class Replica:
    server: ServerProcess
    host: str

    @property
    def target(self) -> str:
        return f"{self.host}:{self.server.port}"

    def calls(self) -> int:
        """Calls this replica has answered (any status), from its log."""
        return len(self.server.log(RPC_LINE))

    def peers(self) -> set[str]:
        """The client ports its calls came from (one per connection)."""
        return {
            found.group(1)
            for line in self.server.log(RPC_LINE)
            if (found := re.search(r"peer=\S+:(\d+)$", line.strip()))
        }


@contextmanager
def replicas(*hosts: str, extra: tuple[str, ...] = ()) -> Iterator[list[Replica]]:
    """One server per host, started side by side; stopped (killed if need be) at the end."""
    with ThreadPoolExecutor(len(hosts)) as pool:
        started = list(
            pool.map(lambda host: ServerProcess("--host", host, *SERVER_ARGS, *extra), hosts)
        )
    try:
        yield [Replica(server, host) for server, host in zip(started, hosts, strict=True)]
    finally:
        for server in started:
            server.stop()


@dataclass
class Load:
    """Threads calling one client without pause until stopped: of every 3 calls a cold solve
    (a new problem), a cached solve and an occupancy calculation. Each call's start and end
    are kept, and every failure."""

    client: TileSolveClient
    threads: int = 4
    done: list[tuple[float, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._counter = itertools.count(30_000)
        self._workers = [threading.Thread(target=self._run) for _ in range(self.threads)]

    def _one(self, i: int) -> None:
        if i % 3 == 0:
            problem, hardware, options = wire.solve_request_from_proto(cold_request(i))
            self.client.solve(problem, hardware, options)
        elif i % 3 == 1:
            self.client.solve(CACHED, "a100")
        else:
            assert self.client.occupancy("a100", 128, 96, 49152).blocks_per_sm == 3

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._one(next(self._counter))
                self.done.append((started, time.monotonic()))
            except Exception as exc:  # every failure is the test's business
                self.failures.append(f"{type(exc).__name__}: {exc}")

    def __enter__(self) -> Load:
        for worker in self._workers:
            worker.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=60)

    def answered_after(self, moment: float) -> int:
        return sum(1 for started, _ in self.done if started > moment)

    def longest_call_s(self, after: float) -> float:
        return max((end - start for start, end in self.done if end > after), default=0.0)


def until(condition: Callable[[], bool], limit_s: float = 15.0) -> None:
    """Wait (polling) for `condition`; AssertionError if it does not hold within `limit_s`."""
    end = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < end, "the condition did not hold in time"
        time.sleep(0.02)


def _both_took_calls(pair: list[Replica], load: Load) -> None:
    """Before the fault: both replicas answer calls (20 each), the load has no failure."""
    until(lambda: min(r.calls() for r in pair) >= 20)
    assert not load.failures, load.failures[:3]


def test_sigkill_of_one_replica_loses_no_call() -> None:
    with replicas("127.0.0.1", "127.0.0.2") as pair:
        victim, survivor = pair
        client = TileSolveClient([r.target for r in pair], timeout_s=30)
        with client, Load(client) as load:
            _both_took_calls(pair, load)
            before = [r.calls() for r in pair]
            victim.server.proc.kill()
            victim.server.wait(timeout=10)
            killed = time.monotonic()
            at_kill = survivor.calls()
            until(lambda: load.answered_after(killed) >= 60)
        after = load.answered_after(killed)
        longest = load.longest_call_s(killed)
    figure(
        f"SIGKILL of 1 of 2 replicas under 4 threads: before it {before[0]} + {before[1]} "
        f"calls; after it {after} calls answered by the survivor, {len(load.failures)} failed, "
        f"longest call across the kill {longest:.2f} s"
    )
    assert not load.failures, load.failures[:3]
    # Every call started since the kill was answered by the survivor (its log may lag).
    until(lambda: survivor.calls() - at_kill >= after, limit_s=5)


def test_sigterm_drain_takes_the_replica_out_of_rotation_losing_no_call() -> None:
    extra = ("--drain-delay", str(DRAIN_DELAY_S), "--grace", str(GRACE_S))
    with replicas("127.0.0.1", "127.0.0.2", extra=extra) as pair:
        draining, survivor = pair
        client = TileSolveClient([r.target for r in pair], timeout_s=30)
        with client, Load(client) as load:
            _both_took_calls(pair, load)
            draining.server.signal(signal.SIGTERM)
            signalled = time.monotonic()
            # Calls picked before health said NOT_SERVING may still be running; then none.
            time.sleep(0.3)
            settled = draining.calls(), survivor.calls()
            code = draining.server.wait(timeout=DRAIN_DELAY_S + GRACE_S + 10)
            exited = time.monotonic() - signalled
            late = draining.calls() - settled[0]
            during = survivor.calls() - settled[1]
            until(lambda: load.answered_after(signalled + exited) >= 30)
        after = load.answered_after(signalled)
    figure(
        f"SIGTERM (drain {DRAIN_DELAY_S:g} s) of 1 of 2 replicas under 4 threads: "
        f"{after} calls answered after it, {len(load.failures)} failed; from 0.3 s on the "
        f"draining replica took {late} calls while still answering, the other {during}; "
        f"exit {code} after {exited:.2f} s"
    )
    assert not load.failures, load.failures[:3]
    assert code == 0
    # Health NOT_SERVING took it out of rotation while it still answered: at most the calls
    # each thread had in flight there when it turned (about 0 here); the other replica took
    # the rest (without health checks, about half would still have gone to the draining one).
    assert late <= load.threads and during >= 20
    assert exited < DRAIN_DELAY_S + GRACE_S  # the client's health Watch does not hold it


def test_max_connection_age_reconnects_without_losing_a_call() -> None:
    with replicas("127.0.0.1", extra=("--max-connection-age", "1")) as (server,):
        client = TileSolveClient(f"dns:///localhost:{server.server.port}", timeout_s=30)
        states: list[str] = []
        channel = client._channel
        channel.subscribe(lambda state: states.append(state.name), try_to_connect=True)
        with client, Load(client, threads=2) as load:
            started = time.monotonic()
            until(lambda: time.monotonic() - started >= 3.0 and len(server.peers()) >= 3)
        connections = len(server.peers())
    figure(
        f"--max-connection-age 1 under 2 threads for {time.monotonic() - started:.1f} s: "
        f"{len(load.done)} calls answered, {len(load.failures)} failed, over {connections} "
        f"connections (client channel states {' > '.join(states)})"
    )
    assert not load.failures, load.failures[:3]
    assert connections >= 3 and len(load.done) >= 50
