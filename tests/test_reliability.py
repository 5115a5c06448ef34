"""The service under attack and under faults: `tilesolve-server` as a process on loopback.

One test per weakness of issue 12 (each fails on the server before it), then the fault tests:
a cancelled single solve, deadlines shorter than the solve, a slow-reading client, the
concurrency cap, SIGTERM under load, SIGKILL and a restart under load. Every loop is bounded
in count and in time; timings are compared side by side in the same run, with margins, as
the machine running them (two shared cores in CI) is noisy. Each test prints one `FIGURE`
line, the figures of docs/reliability.md (`pytest -s` shows them).
"""

from __future__ import annotations

import gc
import itertools
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tilesolve.client.remote import TileSolveClient
from tilesolve.solver import AttentionProblem, SolveOptions, solve
from tilesolve.solver.cancel import Cancellation
from tilesolve.solver.errors import SolveCancelledError
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from h2raw import stuck_call
from harness import (
    ServerProcess,
    cold_request,
    cpu_seconds,
    free_port,
    percentile,
    process_tree,
    rss_bytes,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

MIB = 1024 * 1024
HARNESS = Path(__file__).with_name("harness.py")
# The mixed-load test: rounds of idle and loaded measurement, samples of each per round, and
# the load generator's running time (longer than the rounds take).
ROUNDS, SAMPLES, LOAD_S = 4, 250, 60
IDLE_FLOOR_S = 0.001  # see test_cache_hits_and_health_checks_do_not_wait_behind_cold_solves
CHECK = health_pb2.HealthCheckRequest()
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# A Solve that takes CP-SAT a while: 100 ranks of the triton family (about 0.3-0.8 s).
SLOW = dict(kernel="triton", top_k=100)


def slow_request(index: int) -> pb.SolveRequest:
    """A distinct problem per index that takes CP-SAT a while (see SLOW)."""
    return pb.SolveRequest(
        hardware=pb.HardwareRef(name="a100"),
        problem=pb.AttentionProblem(seq_len=5000 + index, head_dim=128),
        options=pb.SolveOptions(**SLOW),  # type: ignore[arg-type]
    )


def long_request(index: int) -> pb.SolveRequest:
    """A distinct problem per index whose solve takes tens of milliseconds but whose answer is
    small (top 5): a batch of many keeps solvers busy without filling the response limit."""
    return pb.SolveRequest(
        hardware=pb.HardwareRef(name="a100"),
        problem=pb.AttentionProblem(seq_len=5000 + index, head_dim=128, phase=pb.PHASE_BACKWARD),
        options=pb.SolveOptions(kernel="triton", top_k=5),
    )


def figure(text: str) -> None:
    print(f"\nFIGURE {text}")


def stubs(target: str) -> tuple[grpc.Channel, pb_grpc.TileSolveServiceStub, Callable[..., object]]:
    channel = grpc.insecure_channel(target)
    grpc.channel_ready_future(channel).result(timeout=30)
    return (
        channel,
        pb_grpc.TileSolveServiceStub(channel),
        health_pb2_grpc.HealthStub(channel).Check,
    )


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    with ServerProcess("--log-level", "warning") as running:
        yield running


# ---- 1. memory cannot be filled on purpose ----------------------------------------------


def test_padded_requests_leave_memory_flat() -> None:
    """300 solves, each padded with a different 1 MB unknown field: RSS grows < 64 MB (the
    server before: 296 MB, every padded request a new cache key of its own)."""
    with ServerProcess("--log-level", "warning") as server:
        channel, _, _ = stubs(server.target)
        plain = cold_request(1).SerializeToString()
        raw = channel.unary_unary("/tilesolve.v1.TileSolveService/Solve")
        raw(plain, timeout=30)
        before = rss_bytes(server.pid)
        counter = itertools.count()
        answered: list[pb.SolveResponse] = []

        def send() -> None:
            while (i := next(counter)) < 300:
                # Field 1000, length-delimited: unknown to SolveRequest; 1 MB, distinct each.
                padding = i.to_bytes(4, "big") * (MIB // 4)
                field = b"\xc2\x3e" + bytes([0x80, 0x80, 0x40])  # tag 1000, varint 1 MiB
                response = raw(plain + field + padding, timeout=60)
                answered.append(pb.SolveResponse.FromString(response))

        threads = [threading.Thread(target=send) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        time.sleep(0.5)
        grown = rss_bytes(server.pid) - before
        channel.close()
    assert len(answered) == 300
    assert sum(r.cache_hit for r in answered) >= 299  # one canonical request, one entry
    figure(f"padded requests: RSS +{grown / MIB:.1f} MB after 300 x 1 MB (limit 64 MB)")
    assert grown < 64 * MIB


# ---- 2. cheap calls never wait behind cold solves ---------------------------------------


def _probe(
    stub: pb_grpc.TileSolveServiceStub, check: Callable[..., object], n: int
) -> tuple[list[float], list[float]]:
    cached = cold_request(0)
    gc.collect()
    gc.disable()  # the measure is the server's latency, not this process's collector's
    try:
        return _timed(stub, check, cached, n)
    finally:
        gc.enable()


def _timed(
    stub: pb_grpc.TileSolveServiceStub,
    check: Callable[..., object],
    cached: pb.SolveRequest,
    n: int,
) -> tuple[list[float], list[float]]:
    solved, healthy = [], []
    for _ in range(n):
        started = time.perf_counter()
        stub.Solve(cached, timeout=30)
        solved.append(time.perf_counter() - started)
        started = time.perf_counter()
        check(CHECK, timeout=30)
        healthy.append(time.perf_counter() - started)
        time.sleep(0.002)
    return solved, healthy


def test_cache_hits_and_health_checks_do_not_wait_behind_cold_solves() -> None:
    """Under 64 clients asking cold solves, a cached Solve's and a health check's p99 stay
    within 10x of their p99 on the idle server (the server before: 950 ms p50 for a hit).

    The machine is shared and noisy, so idle and loaded are measured in alternating rounds
    (the load generator stopped with SIGSTOP, its queued solves drained, then resumed) and
    each p99 is taken over all the rounds of its kind. An idle p99 under IDLE_FLOOR_S counts
    as IDLE_FLOOR_S: on a two-vCPU VM a bare gRPC health check's p99 alone rises from about
    0.8 ms to 2-4 ms as soon as both vCPUs are busy (with any process: measured with a
    minimal server and two niced busy loops), so below it the idle figure measures the
    machine, not the server."""
    with ServerProcess("--log-level", "warning") as server:
        channel, stub, check = stubs(server.target)
        stub.Solve(cold_request(0), timeout=30)
        _probe(stub, check, 50)  # warm both paths
        load = subprocess.Popen(
            [sys.executable, str(HARNESS), "load", str(server.port), "64", str(LOAD_S)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        idle: tuple[list[float], list[float]] = ([], [])
        busy: tuple[list[float], list[float]] = ([], [])
        try:
            time.sleep(2.0)  # started; all 64 clients busy
            for _ in range(ROUNDS):
                load.send_signal(signal.SIGSTOP)
                time.sleep(1.0)  # the solves it queued are done: the server is idle
                for kept, new in zip(idle, _probe(stub, check, SAMPLES), strict=True):
                    kept.extend(new)
                load.send_signal(signal.SIGCONT)
                time.sleep(0.5)  # its 64 clients are back, the solvers' queue full
                for kept, new in zip(busy, _probe(stub, check, SAMPLES), strict=True):
                    kept.extend(new)
            assert load.poll() is None, "the load ended before the measurement did"
            solves = int(load.communicate("", timeout=60)[0])  # stdin closed: it stops
        finally:
            load.kill()
        channel.close()
    summary = []
    ratios = {}
    for name, quiet, loaded in zip(("cached Solve", "health Check"), idle, busy, strict=True):
        ratios[name] = percentile(loaded, 0.99) / max(percentile(quiet, 0.99), IDLE_FLOOR_S)
        raw = percentile(loaded, 0.99) / percentile(quiet, 0.99)
        summary.append(
            f"{name} p50/p99 {statistics.median(quiet) * 1e3:.2f}/"
            f"{percentile(quiet, 0.99) * 1e3:.2f} ms idle, {statistics.median(loaded) * 1e3:.2f}/"
            f"{percentile(loaded, 0.99) * 1e3:.2f} ms loaded (p99 {ratios[name]:.1f}x, "
            f"{raw:.1f}x without the 1 ms floor)"
        )
    figure(
        f"mixed load (64 cold-solve clients, {solves} cold solves, {ROUNDS} rounds): "
        + "; ".join(summary)
    )
    assert solves > 64, "the load did not load the server"
    for name, ratio in ratios.items():
        assert ratio < 10, f"{name}: p99 {ratio:.1f}x its idle p99"


def test_the_concurrency_cap_counts_tilesolve_calls_only() -> None:
    """Beyond --max-concurrent-rpcs, RESOURCE_EXHAUSTED naming the limit; health checks are
    answered all the while (gRPC's own cap, used before, refused them too)."""
    with ServerProcess("--max-concurrent-rpcs", "4", "--workers", "1") as server:
        channel, stub, check = stubs(server.target)
        calls = [stub.Solve.future(slow_request(i), timeout=60) for i in range(12)]
        time.sleep(0.2)
        healthy = [check(CHECK, timeout=2).status for _ in range(20)]  # type: ignore[attr-defined]
        outcomes = []
        for call in calls:
            try:
                outcomes.append(("OK", call.result().status))
            except grpc.RpcError as exc:
                outcomes.append((exc.code().name, exc.details()))
        channel.close()
    answered = [detail for code, detail in outcomes if code == "OK"]
    refused = [detail for code, detail in outcomes if code == "RESOURCE_EXHAUSTED"]
    assert 4 <= len(answered) <= 5 and len(answered) + len(refused) == 12, outcomes
    assert all("4 calls" in d and "max_concurrent_rpcs" in d for d in refused), refused
    assert healthy == [SERVING] * 20


def test_a_batch_without_a_deadline_stops_at_its_budget() -> None:
    """--batch-budget: a 1,000-problem SolveBatch without a deadline answers within its budget
    with what it solved, the rest DEADLINE_EXCEEDED in place (before: 24 s on one worker)."""
    with ServerProcess("--batch-budget", "1.5", "--workers", "1") as server:
        channel, stub, _ = stubs(server.target)
        batch = pb.SolveBatchRequest(requests=[cold_request(i) for i in range(1000)])
        started = time.monotonic()
        response = stub.SolveBatch(batch)  # no deadline
        took = time.monotonic() - started
        channel.close()
    codes = [item.code for item in response.items]
    solved = codes.count(0)
    late = codes.count(grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
    figure(f"batch budget 1.5 s: 1000-problem batch answered in {took:.2f} s, {solved} solved")
    assert took < 4.0 and solved + late == 1000 and 0 < solved < 1000
    assert codes == [0] * solved + [4] * late  # answered in order, then cut
    assert "batch_budget_s" in response.items[-1].message


def test_a_call_without_a_deadline_gets_the_default_one() -> None:
    """--default-deadline: a Solve without a deadline waiting behind slow solves ends with
    DEADLINE_EXCEEDED naming the limit; a slow one alone is cut to it."""
    with ServerProcess("--default-deadline", "0.3", "--workers", "1") as server:
        channel, stub, _ = stubs(server.target)
        busy = [stub.Solve.future(slow_request(i), timeout=30) for i in range(20)]
        time.sleep(0.1)
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as caught:
            stub.Solve(cold_request(5000))  # no deadline; waits behind about 1 s of solving
        waited = time.monotonic() - started
        for call in busy:
            call.result()
        started = time.monotonic()
        try:
            cut = stub.Solve(slow_request(10))  # no deadline; alone, but longer than 0.3 s
        except grpc.RpcError as exc:
            assert exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        else:
            # proven only if it needed no more than the default deadline; else cut short
            unproven = cut.status == pb.SOLVE_STATUS_FEASIBLE and not cut.proven_optimal
            assert unproven or time.monotonic() - started < 0.3 + 0.2
        alone = time.monotonic() - started
        channel.close()
    assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert "default_deadline_s" in caught.value.details()
    assert waited < 2 and alone < 2


# ---- 3. cancellation stops the work -----------------------------------------------------


def test_cancelling_a_batch_stops_its_cpu() -> None:
    """A 300-problem SolveBatch cancelled after 0.5 s: the server's processes use under 1 CPU
    second in the 3 s after (the server before: 6.4 CPU-s)."""
    with ServerProcess("--log-level", "info") as server:
        channel, stub, _ = stubs(server.target)
        batch = pb.SolveBatchRequest(requests=[cold_request(i) for i in range(300)])
        call = stub.SolveBatch.future(batch)
        time.sleep(0.5)
        assert cpu_seconds(server.pid) > 0
        call.cancel()
        at_cancel = cpu_seconds(server.pid)
        time.sleep(3.0)
        spent = cpu_seconds(server.pid) - at_cancel
        assert stub.ListHardware(pb.ListHardwareRequest(), timeout=10).hardware
        channel.close()
        server.signal(signal.SIGINT)
        server.wait(timeout=30)
    figure(f"cancel: {spent:.2f} CPU-s in the 3 s after cancelling a 300-problem batch (< 1)")
    assert spent < 1.0
    assert server.log(r"method=SolveBatch code=CANCELLED")


def test_a_cancelled_solve_stops_within_a_cp_sat_slice() -> None:
    """In-process: a Cancellation set from another thread stops a solve in progress (the
    CP-SAT search at once, the re-check of the ranked configurations between two)."""
    problem, options = AttentionProblem(seq_len=5000, head_dim=128), SolveOptions(**SLOW)
    solve(problem, "a100", options)
    started = time.perf_counter()
    solve(problem, "a100", options)
    whole = time.perf_counter() - started
    cancel = Cancellation()
    threading.Timer(whole / 5, cancel.cancel).start()
    started = time.perf_counter()
    with pytest.raises(SolveCancelledError):
        solve(problem, "a100", options, cancel=cancel)
    stopped = time.perf_counter() - started
    figure(f"single solve: {whole * 1e3:.0f} ms whole, stopped after {stopped * 1e3:.0f} ms")
    assert stopped < whole * 0.6


def test_deadlines_shorter_than_the_solve() -> None:
    """A deadline shorter than the solve: DEADLINE_EXCEEDED or an unproven answer, never a
    hang; a batch answers before its deadline with what it solved; the solver is free after."""
    with ServerProcess("--workers", "1") as server:
        channel, stub, check = stubs(server.target)
        for timeout in (0.001, 0.05, 0.2):
            try:
                cut = stub.Solve(slow_request(7), timeout=timeout)
            except grpc.RpcError as exc:
                assert exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            else:
                assert cut.status == pb.SOLVE_STATUS_FEASIBLE and not cut.proven_optimal
        started = time.monotonic()
        batch = stub.SolveBatch(
            pb.SolveBatchRequest(requests=[slow_request(100 + i) for i in range(300)]),
            timeout=1.5,
        )
        took = time.monotonic() - started
        codes = [item.code for item in batch.items]
        started = time.monotonic()
        after = stub.Solve(cold_request(9999), timeout=30)
        free_after = time.monotonic() - started
        assert check(CHECK, timeout=5).status == SERVING  # type: ignore[attr-defined]
        channel.close()
    assert took < 1.5 and 0 < codes.count(0) < 300
    assert set(codes) == {0, grpc.StatusCode.DEADLINE_EXCEEDED.value[0]}
    assert after.status == pb.SOLVE_STATUS_OPTIMAL and free_after < 1.0


# ---- 4. the drain -----------------------------------------------------------------------


def test_sigterm_turns_health_not_serving_keeps_answering_then_exits_0_on_time() -> None:
    """SIGTERM: NOT_SERVING while calls are still answered for --drain-delay; then no new
    calls; calls in flight finish within --grace, the batch that cannot keeps the answers it
    found and gets UNAVAILABLE in place for the rest (issue 22; before it, the whole batch was
    UNAVAILABLE); exit 0 within drain-delay + grace (the server before issue 12: never
    NOT_SERVING, exit 1.7 s late, 8 of 32 queued calls cut)."""
    delay, grace = 1.5, 3.0
    server = ServerProcess("--drain-delay", str(delay), "--grace", str(grace))
    try:
        channel, stub, check = stubs(server.target)
        in_flight = [stub.Solve.future(slow_request(i), timeout=60) for i in range(6)]
        endless = stub.SolveBatch.future(
            pb.SolveBatchRequest(requests=[long_request(500 + i) for i in range(1000)]),
            timeout=120,
        )
        time.sleep(0.2)
        signalled = time.monotonic()
        server.signal(signal.SIGTERM)
        time.sleep(0.3)
        during = [check(CHECK, timeout=2).status for _ in range(5)]  # type: ignore[attr-defined]
        served = stub.Solve(cold_request(0), timeout=30)  # a new call, still answered
        time.sleep(delay)
        with pytest.raises(grpc.RpcError) as refused:
            stub.ListHardware(pb.ListHardwareRequest(), timeout=2)
        code = server.wait(timeout=delay + grace + 10)
        took = time.monotonic() - signalled
        finished = [call.result(timeout=1).status for call in in_flight]
        cut = [item.code for item in endless.result(timeout=1).items]
        last = endless.result().items[-1].message
        channel.close()
    finally:
        server.stop()
    kept = cut.count(0)
    figure(
        f"drain (delay {delay:g} s, grace {grace:g} s): NOT_SERVING while answering, "
        f"6/6 in flight finished, an over-long batch kept {kept} answers and said UNAVAILABLE "
        f"for {len(cut) - kept}, exit {code} after {took:.2f} s"
    )
    assert during == [NOT_SERVING] * 5 and served.status == pb.SOLVE_STATUS_OPTIMAL
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    assert finished == [pb.SOLVE_STATUS_OPTIMAL] * 6
    unavailable = grpc.StatusCode.UNAVAILABLE.value[0]
    assert 0 < kept < 1000 and cut == [0] * kept + [unavailable] * (1000 - kept)
    assert "shutting down" in last
    assert code == 0 and took < delay + grace + 1.5


def test_sigterm_under_load_loses_no_call_in_flight() -> None:
    """16 clients calling without pause; SIGTERM: every call started before the server stops
    accepting is answered OK."""
    delay, grace = 1.0, 10.0
    server = ServerProcess("--drain-delay", str(delay), "--grace", str(grace))
    outcomes: list[tuple[float, str]] = []
    try:
        channel, stub, _ = stubs(server.target)
        counter = itertools.count(20_000)
        stop_at = [float("inf")]

        def client() -> None:
            while (started := time.monotonic()) < stop_at[0]:
                i = next(counter)
                try:
                    if i % 3:
                        stub.Solve(cold_request(i), timeout=30)
                    else:
                        stub.Solve(cold_request(0), timeout=30)
                    outcomes.append((started, "OK"))
                except grpc.RpcError as exc:
                    outcomes.append((started, exc.code().name))

        threads = [threading.Thread(target=client) for _ in range(16)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        signalled = time.monotonic()
        server.signal(signal.SIGTERM)
        stop_at[0] = signalled + delay + 0.5
        for thread in threads:
            thread.join(timeout=60)
        code = server.wait(timeout=delay + grace + 10)
        channel.close()
    finally:
        server.stop()
    accepted = [outcome for started, outcome in outcomes if started < signalled + delay - 0.1]
    lost = [outcome for outcome in accepted if outcome != "OK"]
    figure(f"SIGTERM under load: {len(accepted)} calls accepted, {len(lost)} lost, exit {code}")
    assert len(accepted) > 50 and not lost and code == 0


# ---- 5. clients ride through a restart --------------------------------------------------


def test_default_clients_ride_through_a_kill_and_restart() -> None:
    """SIGKILL, then the server restarted on the same port 2 s later: 8 default clients, 24
    calls each, lose none (the client before gave up after about 0.5 s: 2 of 192 failed)."""
    port = free_port()
    server = ServerProcess(port=port)
    failures: list[str] = []
    done = itertools.count()
    restarted: list[ServerProcess] = []
    try:

        def client(slot: int) -> None:
            with TileSolveClient(f"127.0.0.1:{port}") as c:
                for n in range(24):
                    problem = AttentionProblem(
                        seq_len=2048 + 8 * slot + 1000 * (n % 3), head_dim=64
                    )
                    try:
                        if n % 4 == 3:
                            c.hardware()
                        else:
                            c.solve(problem, "a100")
                        next(done)
                    except Exception as exc:
                        failures.append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.1)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(0.8)
        server.proc.kill()
        server.wait(timeout=10)
        killed = time.monotonic()
        time.sleep(2.0)
        restarted.append(ServerProcess(port=port))
        back = time.monotonic() - killed
        for thread in threads:
            thread.join(timeout=120)
    finally:
        server.stop()
        for again in restarted:
            again.stop()
    ok = next(done)
    figure(f"SIGKILL + restart ({back:.1f} s down): {ok}/192 calls OK, {len(failures)} failed")
    assert not failures, failures[:3]
    assert ok == 192


# ---- 6. nothing is echoed unbounded -----------------------------------------------------


def _trailer_bytes(error: grpc.RpcError) -> int:
    metadata = error.trailing_metadata() or ()  # type: ignore[attr-defined]
    size = sum(len(key) + len(value) for key, value in metadata)
    return size + len((error.details() or "").encode())


def test_echoed_inputs_are_bounded(server: ServerProcess) -> None:
    """An 8 KB+ name comes back as a short INVALID_ARGUMENT naming the limit (the server
    before echoed it twice into the trailers, past the client's 16 KiB metadata limit, and
    the client reported RESOURCE_EXHAUSTED)."""
    channel, stub, _ = stubs(server.target)
    huge = "x" * 9000
    problem = cold_request(0).problem
    calls: list[tuple[str, Callable[[], object]]] = [
        (
            "hardware.name",
            lambda: stub.Solve(
                pb.SolveRequest(hardware=pb.HardwareRef(name=huge), problem=problem), timeout=10
            ),
        ),
        ("name", lambda: stub.GetHardware(pb.GetHardwareRequest(name=huge), timeout=10)),
        ("options.kernel", lambda: stub.Solve(cold_request(0, kernel=huge), timeout=10)),
        ("kernel", lambda: stub.EstimateMemory(pb.EstimateMemoryRequest(kernel=huge), timeout=10)),
    ]
    sizes = []
    for field, call in calls:
        with pytest.raises(grpc.RpcError) as caught:
            call()
        error = caught.value
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, (field, error)
        assert "at most" in error.details() and "got 9000 characters" in error.details()
        assert "xxxxxxxx" not in error.details()
        sizes.append(_trailer_bytes(error))
    # A value within the size limits that the schema quotes back, many times over.
    spec = pb.HardwareSpec(
        name="n" * 4000,
        display_name="d" * 4000,
        vendor="v" * 4000,
        arch="cuda",
        aliases=["a" * 4000] * 200,
        sources={f"k{i}": "s" * 4000 for i in range(200)},
    )
    with pytest.raises(grpc.RpcError) as caught:
        stub.Solve(pb.SolveRequest(hardware=pb.HardwareRef(spec=spec), problem=problem), timeout=10)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    sizes.append(_trailer_bytes(caught.value))
    # In a batch, each item's message is bounded the same way.
    batch = stub.SolveBatch(
        pb.SolveBatchRequest(requests=[pb.SolveRequest(hardware=pb.HardwareRef(name=huge))] * 50),
        timeout=30,
    )
    item_bytes = max(item.ByteSize() for item in batch.items)
    channel.close()
    figure(
        f"echo: a 9000-character name -> INVALID_ARGUMENT; largest error trailers "
        f"{max(sizes)} bytes (client limit 8 KiB soft, 16 KiB hard); largest batch item "
        f"{item_bytes} bytes"
    )
    assert max(sizes) < 6 * 1024 and item_bytes < 4 * 1024


# ---- 7. no amplification past what clients accept ---------------------------------------


def test_a_batch_response_stays_within_what_clients_accept(server: ServerProcess) -> None:
    """1,000 copies of a 100-candidate problem (a 40 KB request): a generic client (gRPC's
    usual 4 MiB receive limit) gets the answers that fit and RESOURCE_EXHAUSTED items for the
    rest, naming the limit (the server before: a 16 MB response the client refused)."""
    channel, stub, _ = stubs(server.target)  # default channel options: 4 MiB receive limit
    request = pb.SolveBatchRequest(requests=[slow_request(3)] * 1000)
    response = stub.SolveBatch(request, timeout=120)
    size = response.ByteSize()
    codes = [item.code for item in response.items]
    answered = codes.count(0)
    channel.close()
    figure(
        f"amplification: {request.ByteSize()} B request -> {size} B response "
        f"(x{size / request.ByteSize():.0f}), {answered} of 1000 answered, the rest "
        "RESOURCE_EXHAUSTED in place"
    )
    assert size <= 4 * MIB and 0 < answered < 1000
    assert codes == [0] * answered + [grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]] * (
        1000 - answered
    )
    assert "max_response_bytes" in response.items[-1].message


# ---- a slow-reading client ----------------------------------------------------------------


def test_a_client_that_never_reads_holds_no_solver_and_no_call_slot() -> None:
    """16 calls whose client never reads the answer (flow-control window 0): with all 16 stuck
    and a cap of 4 calls at a time, the server still answers others at once (a stuck answer
    holds neither a solver nor a call slot), and it lets the stuck calls go at their
    deadline."""
    with ServerProcess("--max-concurrent-rpcs", "4") as server:
        channel, stub, check = stubs(server.target)
        big = pb.SolveBatchRequest(requests=[cold_request(11)] * 20).SerializeToString()
        sockets = []
        try:
            for _ in range(16):  # one after the other: each answered, then stuck
                sockets.append(
                    stuck_call(server.port, "tilesolve.v1.TileSolveService/SolveBatch", big, 4.0)
                )
                time.sleep(0.1)
            started = time.monotonic()
            answered = [stub.Solve(cold_request(12 + i), timeout=10) for i in range(8)]
            latency = (time.monotonic() - started) / 8
            assert check(CHECK, timeout=5).status == SERVING  # type: ignore[attr-defined]
            time.sleep(3.5)  # past the stuck calls' deadline
            after = stub.Solve(cold_request(30), timeout=10)
        finally:
            for sock in sockets:
                sock.close()
        assert stub.ListHardware(pb.ListHardwareRequest(), timeout=10).hardware
        channel.close()
        server.signal(signal.SIGINT)
        server.wait(timeout=30)
    stuck = server.log(r"method=SolveBatch code=OK")
    figure(f"slow reader: 16 stuck calls; others answered in {latency * 1e3:.0f} ms each")
    assert all(r.status == pb.SOLVE_STATUS_OPTIMAL for r in [*answered, after])
    assert len(stuck) == 16  # every stuck call was answered by the servicer, then let go
    assert latency < 1.0


def test_solver_processes_end_with_the_server() -> None:
    """SIGKILL of the server leaves no solver process behind."""
    server = ServerProcess("--workers", "2")
    tree = process_tree(server.pid)
    assert len(tree) >= 4  # the server, the forkserver, 2 solvers (and a resource tracker)
    server.proc.kill()
    server.wait(timeout=10)
    deadline = time.monotonic() + 10
    alive = tree[1:]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in alive if Path(f"/proc/{pid}").exists() and _not_zombie(pid)]
    assert not alive


def _not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_requests_that_no_solver_can_answer_are_refused_before_the_queue() -> None:
    """An unknown hardware name, an ambiguous sm80, an unknown kernel, fp8 on an A100 and a
    pin outside its domain, each behind 40 queued cold solves on one solver: refused in under
    20 ms (issue 22; before: 258-526 ms, after every queued solve; only range checks ran
    before the queue)."""
    with ServerProcess("--workers", "1") as server:
        channel, stub, _ = stubs(server.target)
        stub.Solve(cold_request(0), timeout=30)  # the channel and the solver warm
        refusals = {
            "unknown hardware": (pb.SolveRequest(hardware=pb.HardwareRef(name="a1000"),
                                                 problem=cold_request(1).problem),
                                 grpc.StatusCode.NOT_FOUND, "hardware"),
            "ambiguous sm80": (pb.SolveRequest(hardware=pb.HardwareRef(name="sm80"),
                                               problem=cold_request(1).problem),
                               grpc.StatusCode.INVALID_ARGUMENT, "hardware"),
            "unknown kernel": (cold_request(1, kernel="fa9"),
                               grpc.StatusCode.INVALID_ARGUMENT, "options.kernel"),
            "fp8 on a100": (pb.SolveRequest(hardware=pb.HardwareRef(name="a100"),
                                            problem=pb.AttentionProblem(
                                                seq_len=1024, head_dim=128,
                                                dtype=pb.DATA_TYPE_FP8)),
                            grpc.StatusCode.INVALID_ARGUMENT, "problem.dtype"),
            "block_m=7": (cold_request(1, block_m=7),
                          grpc.StatusCode.INVALID_ARGUMENT, "options.block_m"),
        }  # fmt: skip
        busy = [stub.Solve.future(slow_request(700 + i), timeout=120) for i in range(40)]
        time.sleep(0.3)
        waited: dict[str, float] = {}
        for label, (request, code, field) in refusals.items():
            started = time.perf_counter()
            with pytest.raises(grpc.RpcError) as refused:
                stub.Solve(request, timeout=30)
            waited[label] = time.perf_counter() - started
            assert refused.value.code() is code, (label, refused.value)
            assert field in (refused.value.details() or ""), (label, refused.value.details())
        still_busy = sum(not call.done() for call in busy)
        for call in busy:
            call.result()
        channel.close()
    figure(
        f"refused behind {still_busy} queued cold solves (one solver): "
        + ", ".join(f"{label} {seconds * 1e3:.1f} ms" for label, seconds in waited.items())
    )
    assert still_busy >= 20
    assert max(waited.values()) < 0.020, waited


def test_an_out_of_range_solve_is_refused_without_waiting_for_a_solver() -> None:
    """head_dim 0 behind about a second of queued solves (30 slow ones, one solver):
    INVALID_ARGUMENT at once (it used to wait for a solver, like a cold solve, to be refused
    there)."""
    with ServerProcess("--workers", "1") as server:
        channel, stub, _ = stubs(server.target)
        busy = [stub.Solve.future(slow_request(900 + i), timeout=60) for i in range(30)]
        time.sleep(0.2)
        bad = cold_request(3)
        bad.problem.head_dim = 0
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            stub.Solve(bad, timeout=30)
        waited = time.monotonic() - started
        still_busy = sum(not call.done() for call in busy)
        for call in busy:
            call.result()
        channel.close()
    figure(f"out-of-range Solve behind {still_busy} queued slow solves: refused in "
           f"{waited * 1000:.1f} ms")  # fmt: skip
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "problem.head_dim" in (refused.value.details() or "")
    assert still_busy >= 5 and waited < 0.25
