"""Service benchmark: the gRPC server measured side by side in one run.

    python benchmarks/service_bench.py [--seconds 2] [--json]

Starts `tilesolve-server` in its own process on a free loopback port (its defaults: one solver
process per CPU), then, for 1, 8 and 32 concurrent client threads, drives each call type for a
fixed time and reports latency p50/p99 and requests per second:

- `health`: grpc.health.v1 Check, the empty call (the server's floor);
- `solve-cached`: the same Solve over and over (answered from the server's cache);
- `solve-cold`: a new problem every call (a cache miss, so CP-SAT solves);
- `batch-100`: SolveBatch of 100 new problems.

It also times the in-process `solve()` of the same kind of cold problems, so the cold-Solve
overhead of the service is a ratio measured in the same run, and then, from one client, a cold
Solve of each problem of `solve_latency.py`'s fa3-backward block (FA3's backward: 46,080
configurations a problem, the heaviest table; its server-side heap is kept between solves,
`tilesolve.heap`): median and p95 beside that block's 20 ms / 50 ms target. Goals (issue 3):
cached Solve throughput at 32 clients at least 70% of the health call's; cold Solve p50 within
2x of the in-process solve time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from solve_latency import build_fa3_backward_cases

from tilesolve import wire
from tilesolve.solver import AttentionProblem, SolveOptions, solve
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

CONCURRENCY = (1, 8, 32)
HARDWARE = "a100-80gb"


@dataclass
class Cell:
    call: str
    clients: int
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


def _problem(index: int) -> AttentionProblem:
    """A distinct problem per index (a cache miss each), shaped like a real workload."""
    head_dims = (64, 128, 96, 256)
    return AttentionProblem(
        batch=1 + index % 8,
        heads=16,
        seq_len=1024 + index,
        head_dim=head_dims[index % len(head_dims)],
        causal=bool(index % 2),
    )


def start_server() -> tuple[subprocess.Popen[str], int]:
    command = [sys.executable, "-m", "tilesolve.server.main", "--port", "0"]
    command += ["--log-level", "warning", "--drain-delay", "0"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        match = re.search(r"listening on [^:\s]+:(\d+)", line)
        if match:
            # Keep draining stderr so the server never blocks on a full pipe.
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, int(match.group(1))
        if process.poll() is not None:
            break
    process.kill()
    raise SystemExit("tilesolve-server did not start")


def drive(
    call: Callable[[int], None], clients: int, seconds: float, counter: itertools.count[int]
) -> Cell:
    """Run `call` from `clients` threads for `seconds`; latency per call in ms."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    stop_at = time.perf_counter() + seconds
    barrier = threading.Barrier(clients)

    def worker(slot: int) -> None:
        barrier.wait()
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            try:
                call(next(counter))
            except grpc.RpcError:
                errors[slot] += 1
            latencies[slot].append((time.perf_counter() - started) * 1e3)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    begun = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - begun
    flat = sorted(x for per in latencies for x in per)
    p99 = flat[min(len(flat) - 1, int(0.99 * len(flat)))]
    return Cell(
        "", clients, len(flat), len(flat) / elapsed, statistics.median(flat), p99, sum(errors)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per call type and concurrency")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    process, port = start_server()
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = pb_grpc.TileSolveServiceStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        cached_request = wire.solve_request_to_proto(_problem(0), HARDWARE)
        stub.Solve(cached_request, timeout=30)  # warm the cache and the server's first solve
        fresh = itertools.count(1_000)

        def health_call(_: int) -> None:
            health.Check(health_pb2.HealthCheckRequest(), timeout=30)

        def cached_call(_: int) -> None:
            stub.Solve(cached_request, timeout=30)

        def cold_call(i: int) -> None:
            stub.Solve(wire.solve_request_to_proto(_problem(i), HARDWARE), timeout=30)

        def batch_call(i: int) -> None:
            requests = [
                wire.solve_request_to_proto(_problem(i * 100 + j), HARDWARE) for j in range(100)
            ]
            stub.SolveBatch(pb.SolveBatchRequest(requests=requests), timeout=300)

        calls: list[tuple[str, Callable[[int], None]]] = [
            ("health", health_call),
            ("solve-cached", cached_call),
            ("solve-cold", cold_call),
            ("batch-100", batch_call),
        ]
        cells = []
        for clients in CONCURRENCY:
            for name, call in calls:
                counter = fresh if name in ("solve-cold", "batch-100") else itertools.count()
                cell = drive(call, clients, args.seconds, counter)
                cell.call = name
                cells.append(cell)
        # In-process reference: cold solves of the same kind, in this process.
        import tilesolve.solver.ip_model  # noqa: F401  (import cost is not solve time)

        local = []
        for i in range(200_000, 200_060):
            started = time.perf_counter()
            solve(_problem(i), HARDWARE, SolveOptions())
            local.append((time.perf_counter() - started) * 1e3)
        # The heaviest cold Solve: fa3 backward, one client, each problem of the block once
        # (a throwaway one first: the solver process's first fa3 backward table).
        fa3_backward = build_fa3_backward_cases()
        first = fa3_backward[0]
        throwaway = first.problem.model_copy(update={"batch": 77})
        stub.Solve(
            wire.solve_request_to_proto(throwaway, first.hardware, first.options("cpsat")),
            timeout=60,
        )
        heavy = []
        for case in fa3_backward:
            request = wire.solve_request_to_proto(
                case.problem, case.hardware, case.options("cpsat")
            )
            started = time.perf_counter()
            stub.Solve(request, timeout=60)
            heavy.append((time.perf_counter() - started) * 1e3)
        channel.close()
    finally:
        process.terminate()
        process.wait(timeout=30)

    in_process_p50 = statistics.median(local)
    by = {(c.call, c.clients): c for c in cells}
    cached_vs_empty = by[("solve-cached", 32)].rps / by[("health", 32)].rps
    cold_vs_local = by[("solve-cold", 1)].p50_ms / in_process_p50
    heavy_p50 = statistics.median(heavy)
    heavy_p95 = sorted(heavy)[min(len(heavy) - 1, int(0.95 * len(heavy)))]
    summary = {
        "fa3_backward_cold_solve_p50_ms": heavy_p50,
        "fa3_backward_cold_solve_p95_ms": heavy_p95,
        "cached_solve_rps_over_health_rps_at_32": cached_vs_empty,
        "cold_solve_p50_over_in_process_p50": cold_vs_local,
        "in_process_solve_p50_ms": in_process_p50,
    }
    if args.json:
        print(json.dumps({"cells": [asdict(c) for c in cells], "summary": summary}, indent=1))
        return 0
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"server: separate process, one solver process per CPU; {args.seconds:g} s per cell\n")
    header = ("call", "clients", "requests", "req/s", "p50 ms", "p99 ms", "errors")
    print("{:<13} {:>7} {:>8} {:>9} {:>8} {:>8} {:>6}".format(*header))
    for c in cells:
        print(
            f"{c.call:<13} {c.clients:>7} {c.requests:>8} {c.rps:>9.1f} "
            f"{c.p50_ms:>8.2f} {c.p99_ms:>8.2f} {c.errors:>6}"
        )
    print(f"\nin-process cold solve p50: {in_process_p50:.2f} ms (60 problems)")
    print(
        f"cached Solve / health at 32 clients: {cached_vs_empty:.0%} of the empty call's "
        "req/s (goal >= 70%)"
    )
    print(f"cold Solve p50 / in-process p50 at 1 client: {cold_vs_local:.2f}x (goal <= 2x)")
    print(
        f"cold fa3 backward Solve, one client, {len(heavy)} problems: p50 {heavy_p50:.2f} ms, "
        f"p95 {heavy_p95:.2f} ms (the latency block's target in-process: 20 / 50 ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
