"""`tilesolve-server --processes N`: several server processes behind one port (issue 13).

Real servers on loopback: the supervisor and its workers are real processes, clients are real
gRPC channels, faults are real signals.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tilesolve.client.remote import TileSolveClient
from tilesolve.server.config import MIB, ServerConfig, available_cpus, cgroup_cpu_limit
from tilesolve.server.main import build_parser, config_from_args, main
from tilesolve.server.supervisor import MAX_PROCESSES, worker_arguments, workers_per_process
from tilesolve.solver import AttentionProblem
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from harness import ServerProcess, cold_request, process_tree

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

CHECK = health_pb2.HealthCheckRequest()
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_WORKER_SERVING = re.compile(r"\[worker (\d+)\] tilesolve-server worker \d+ \(pid (\d+)\) serving")


def _connection(target: str) -> grpc.Channel:
    """A channel with a connection of its own (not shared with the process's other channels
    to the same target): SO_REUSEPORT balances connections."""
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


def _worker_pids(server: ServerProcess) -> dict[int, int]:
    """The serving workers by index (the latest pid each), from the supervisor's log."""
    pids: dict[int, int] = {}
    for line in server.log(_WORKER_SERVING.pattern):
        found = _WORKER_SERVING.search(line)
        assert found is not None
        pids[int(found.group(1))] = int(found.group(2))
    return pids


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("value", ["0", str(MAX_PROCESSES + 1), "two", "-1"])
def test_processes_out_of_range_exits_2_naming_the_range(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--processes", value])
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("tilesolve-server: error: argument --processes:")
    assert (f"from 1 to {MAX_PROCESSES}" in error) or "integer" in error


def test_a_worker_is_told_exactly_the_supervisors_settings() -> None:
    """worker_arguments is the inverse of the command line: every setting survives the trip."""
    config = ServerConfig(
        host="::1",
        port=4567,
        workers=3,
        solve_in="processes",
        max_concurrent_rpcs=17,
        cache_bytes=5 * MIB,
        max_batch_size=12,
        max_request_bytes=2048,
        max_response_bytes=1 << 20,
        default_deadline_s=1.25,
        batch_budget_s=0.3,
        drain_delay_s=0.1,
        grace_s=7.5,
        max_connection_age_s=12.5,
    )
    parser = build_parser()
    args = parser.parse_args([*worker_arguments(config, "debug"), "--supervised"])
    assert config_from_args(args, parser) == replace(config, reuse_port=True)
    assert args.log_level == "debug"


def test_two_processes_share_the_port_each_with_its_own_cache() -> None:
    """The same request over 24 separate connections: connections land on both workers, and
    each worker solves it once (its own cache) and answers the rest from its cache."""
    with ServerProcess("--processes", "2", "--drain-delay", "0") as server:
        assert server.log(r"listening on 127\.0\.0\.1:\d+ with 2 processes")
        workers = _worker_pids(server)
        assert sorted(workers) == [1, 2]
        assert set(workers.values()) <= set(process_tree(server.pid))
        hits = []
        for _ in range(24):
            channel = _connection(server.target)
            stub = pb_grpc.TileSolveServiceStub(channel)
            hits.append(stub.Solve(cold_request(7), timeout=30).cache_hit)
            channel.close()
        time.sleep(0.2)  # the workers' log lines reach the supervisor
        answered_by = {
            int(m.group(1))
            for line in server.log(r"rpc method=Solve code=OK")
            if (m := re.match(r"\[worker (\d+)\]", line))
        }
    assert answered_by == {1, 2}
    assert hits.count(False) == 2 and hits.count(True) == 22


def test_a_killed_worker_is_replaced_and_no_call_fails() -> None:
    """SIGKILL of one worker while 4 clients call: gRPC's retries carry the calls it had to
    the other worker, the supervisor starts a new one, and every call is answered."""
    with ServerProcess("--processes", "2", "--drain-delay", "0") as server:
        victim = _worker_pids(server)[1]
        failures: list[str] = []
        answered = itertools.count()
        stop = threading.Event()

        def client(slot: int) -> None:
            with TileSolveClient(server.target) as remote:
                for n in itertools.count():
                    if stop.is_set():
                        return
                    try:
                        problem = AttentionProblem(seq_len=1024 + 64 * slot + n, head_dim=128)
                        remote.solve(problem, "a100")
                        next(answered)
                    except Exception as exc:  # every failure is one to report
                        failures.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=client, args=(slot,)) for slot in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(0.8)
        signal_sent = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        deadline = signal_sent + 15
        while _worker_pids(server).get(1) == victim and time.monotonic() < deadline:
            time.sleep(0.1)
        replaced = time.monotonic() - signal_sent
        time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        assert server.log(r"worker 1 \(pid \d+\) exited with status -9")
    calls = next(answered)
    print(f"\nFIGURE worker SIGKILL: {calls} calls OK, {len(failures)} failed, replaced in "
          f"{replaced:.1f} s")  # fmt: skip
    assert not failures, failures[:3]
    assert _worker_pids(server)[1] != victim and replaced < 15
    assert calls > 20


def test_sigterm_drains_every_worker_and_exits_0() -> None:
    """SIGTERM to the supervisor: every worker turns NOT_SERVING while still answering, then
    stops; the supervisor exits 0 within drain-delay + grace and leaves no process behind."""
    delay, grace = 1.0, 2.0
    server = ServerProcess("--processes", "2", "--drain-delay", str(delay), "--grace", str(grace))
    try:
        tree = process_tree(server.pid)
        signalled = time.monotonic()
        server.signal(signal.SIGTERM)
        time.sleep(0.3)
        during = []
        for _ in range(8):  # separate connections: both workers are asked
            channel = _connection(server.target)
            check = health_pb2_grpc.HealthStub(channel).Check
            during.append(check(CHECK, timeout=2).status)
            still = pb_grpc.TileSolveServiceStub(channel).ListHardware(
                pb.ListHardwareRequest(), timeout=2
            )
            channel.close()
        code = server.wait(timeout=delay + grace + 10)
        took = time.monotonic() - signalled
    finally:
        server.stop()
    drained = {line.split("]")[0] for line in server.log(r"received SIGTERM; draining")}
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.1)
    print(f"\nFIGURE supervisor SIGTERM: {during.count(NOT_SERVING)}/8 NOT_SERVING while "
          f"answering, exit {code} after {took:.2f} s")  # fmt: skip
    assert during == [NOT_SERVING] * 8 and len(still.hardware) > 0
    assert {"[worker 1", "[worker 2"} <= drained
    assert code == 0 and took < delay + grace + 1.5
    assert all(_gone(pid) for pid in tree)


def test_workers_do_not_outlive_a_killed_supervisor() -> None:
    server = ServerProcess("--processes", "2", "--drain-delay", "0", "--grace", "1")
    workers = list(_worker_pids(server).values())
    server.proc.kill()
    server.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(workers) == 2 and all(_gone(pid) for pid in workers)


def test_a_busy_port_exits_1_with_one_line() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        command = [sys.executable, "-m", "tilesolve.server.main", "--processes", "2"]
        done = subprocess.run(
            [*command, "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"tilesolve-server: error: cannot listen on 127.0.0.1:{port}: the address is already "
        "in use (another process is listening on that port)"
    )


@pytest.mark.parametrize(
    ("files", "limit"),
    [
        ({"cpu.max": "200000 100000\n"}, 2.0),
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 0.5),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_a_containers_cpu_limit_is_read_from_its_cgroup(
    tmp_path: Path, files: dict[str, str], limit: float | None
) -> None:
    """--workers 0 counts the container's CPU limit, not every CPU of the node."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_limit(tmp_path) == limit


def test_workers_0_shares_the_cpus_among_the_processes() -> None:
    cpus = available_cpus()
    assert workers_per_process(ServerConfig(workers=0), 1) == cpus
    assert workers_per_process(ServerConfig(workers=0), 2 * cpus) == 1
    assert workers_per_process(ServerConfig(workers=0), 2) == max(cpus // 2, 1)
    assert workers_per_process(ServerConfig(workers=3), 2) == 3


_PENDING_SIGTERM_SCRIPT = """
import asyncio, os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # as main() does,
from tilesolve.server.solving import ProcessSolvers  # before any thread starts
os.kill(os.getpid(), signal.SIGTERM)  # a SIGTERM sent while the server starts: pending
solvers = ProcessSolvers(1)  # starts multiprocessing's resource tracker, which unblocks it
pending = signal.SIGTERM in signal.sigpending()
asyncio.run(solvers.close())
print("pending" if pending else "lost")
"""


def test_a_sigterm_sent_while_the_solvers_start_stays_pending_for_the_drain() -> None:
    """Without care, the resource tracker's start delivers the pending SIGTERM with its
    default action (exit 143) instead of leaving it to the server's drain."""
    done = subprocess.run(
        [sys.executable, "-c", _PENDING_SIGTERM_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "pending"), done.stderr[-2000:]
