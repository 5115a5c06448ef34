"""Load, soak and scaling of `tilesolve-server` on loopback (issue 13).

    python benchmarks/load_test.py [--only load,soak,scaling] [--json] [size flags]

Every section starts its own `tilesolve-server` processes (`--log-level warning --drain-delay
0`) on free loopback ports and drives them from client processes started once by this script
(`--procs` processes x `--threads` threads; a Python client is bound by its interpreter lock,
so one process could not keep 64 calls in flight). Each client process has its own channel
(its own HTTP/2 connection); in the scaling section each thread has its own connection
(`grpc.use_local_subchannel_pool`), since SO_REUSEPORT spreads connections, not calls.

- **load**: `--load-calls` (20,000) calls in the mix LOAD_MIX at procs x threads (4 x 16)
  clients against one server: throughput, p50/p99/max latency, statuses per kind, server RSS
  (the whole process tree: server, forkserver, solver processes) before and after.
- **soak**: `--soak-calls` (100,000) calls in the mix SOAK_MIX against one server with a
  `--soak-cache-mib` (16) answer cache, the RSS of its process tree sampled every
  `--soak-sample-s` (2) seconds; growth = last sample - first sample after `--soak-warmup-s`.
- **scaling**: cold-solve throughput (a distinct problem each call) of `--processes 1`
  against `--processes 2`, both servers up at once, measured in alternating rounds of the
  same duration (1, 2, 2, 1, 1, 2, ...), for `--solve-in processes` and `--solve-in
  threads`; then cached Solve for 1 against 2 processes. Per round: calls/s, latency, and the
  CPU (user+sys seconds) of each server tree, of the clients and of the whole machine.

Bounds (broken: exit status 1): no unexpected status in any section (every call gets its
kind's expected status: OK, or INVALID_ARGUMENT for the invalid kind; a cached Solve must be a
cache hit and a cold one a miss in load and soak; every item of a batch OK); every call of load
and soak made within `--max-seconds`; soak growth <= `--soak-cache-mib` + `--soak-margin-mib`.
The issue's scaling target (>= 1.3x cold solves/s for 2 processes over 1) is reported per
configuration, and is a bound only with `--enforce-scaling-target`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing as mp
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc

from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness import (  # noqa: E402  (tests/ is not a package)
    ServerProcess,
    cold_request,
    cpu_seconds,
    parent_pid,
    percentile,
    process_tree,
    rss_bytes,
)

MIB = 1024 * 1024
HARDWARE = pb.HardwareRef(name="a100")
SERVER_ARGS = ("--log-level", "warning", "--drain-delay", "0")
# Percent of calls per kind. load: mostly cheap calls, as a build farm asks, with a real share
# of solving (cold Solves and 10-problem batches are ~60% of the server's CPU); soak: mostly
# cheap, enough cold answers to fill its cache past the cap.
LOAD_MIX = {"cached": 56, "occupancy": 17, "invalid": 10, "cold": 15, "batch": 2}
SOAK_MIX = {"cached": 75, "occupancy": 10, "invalid": 10, "cold": 5}
KINDS = ("cached", "cold", "batch", "occupancy", "invalid")
EXPECTED = {kind: "OK" for kind in KINDS} | {"invalid": "INVALID_ARGUMENT"}
BATCH = 10  # problems per SolveBatch, each new
CACHED_SET = 32  # distinct problems the cached kind cycles through (warmed first)
CALL_TIMEOUT_S = 60.0  # the server's default deadline
START_DELAY_S = 0.5  # clients connect, then all start at the same moment
# Problem index ranges (harness.cold_request: seq_len = 1024 + index), so that no two calls
# of one run share a cold problem: cached 0..CACHED_SET, then a range per section and round.
LOAD_BASE, SOAK_BASE, SCALING_BASE = 100_000, 300_000, 500_000
ROUND_SPAN = 20_000
SCALING_TARGET = 1.3
WARMUP_ROUND_S = 2.0  # scaling: a first round per server (solver start-up, caches)
_TICKS = os.sysconf("SC_CLK_TCK")


# ---- the calls ------------------------------------------------------------------------------


def _pattern(mix: dict[str, int]) -> list[str]:
    """The kinds of 100 consecutive calls, each kind spread evenly (a fixed interleave, no
    random stream)."""
    slots = [
        (k * 100 / share + 50 / share, kind) for kind, share in mix.items() for k in range(share)
    ]
    return [kind for _, kind in sorted(slots)]


INVALID = ("solve-head-dim-0", "solve-name-100-chars", "occupancy-regs-300", "memory-no-problem")


def _invalid(stub: pb_grpc.TileSolveServiceStub, variant: str) -> object:
    """Bad input of four kinds (INVALID), each of which must be INVALID_ARGUMENT."""
    if variant == "solve-head-dim-0":
        problem = pb.AttentionProblem(seq_len=1024, head_dim=0)
        return stub.Solve(pb.SolveRequest(hardware=HARDWARE, problem=problem), timeout=10)
    if variant == "solve-name-100-chars":
        problem = pb.AttentionProblem(seq_len=1024, head_dim=64)
        named = pb.HardwareRef(name="x" * 100)
        return stub.Solve(pb.SolveRequest(hardware=named, problem=problem), timeout=10)
    if variant == "occupancy-regs-300":
        request = pb.OccupancyRequest(hardware=HARDWARE, threads=128, regs=300, smem_bytes=0)
        return stub.Occupancy(request, timeout=10)
    return stub.EstimateMemory(pb.EstimateMemoryRequest(hardware=HARDWARE), timeout=10)


def _call(kind: str, stub: pb_grpc.TileSolveServiceStub, i: int, job: dict[str, Any]) -> str:
    """Make call number `i` of its kind; its status as a label (see EXPECTED)."""
    try:
        if kind in ("cached", "cold"):
            index = i % CACHED_SET if kind == "cached" else job["cold_base"] + i
            response = stub.Solve(cold_request(index), timeout=CALL_TIMEOUT_S)
            if not job["check_cache"] or response.cache_hit == (kind == "cached"):
                return "OK"
            return "OK_BUT_CACHE_HIT" if response.cache_hit else "OK_BUT_CACHE_MISS"
        if kind == "batch":
            first = job["batch_base"] + i * BATCH
            requests = [cold_request(first + j) for j in range(BATCH)]
            batch = stub.SolveBatch(pb.SolveBatchRequest(requests=requests), timeout=CALL_TIMEOUT_S)
            codes = {item.code for item in batch.items} | (
                {-1} if len(batch.items) != BATCH else set()
            )
            return (
                "OK" if codes == {0} else "OK_BUT_ITEM_CODES_" + "_".join(map(str, sorted(codes)))
            )
        if kind == "occupancy":
            request = pb.OccupancyRequest(
                hardware=HARDWARE,
                threads=(64, 128, 256)[i % 3],
                regs=32 + 8 * (i % 12),
                smem_bytes=1024 * (i % 96),
            )
            stub.Occupancy(request, timeout=CALL_TIMEOUT_S)
            return "OK"
        _invalid(stub, kind.partition("/")[2])
        return "OK"
    except grpc.RpcError as error:
        return str(error.code().name)  # type: ignore[attr-defined]


# ---- client processes -----------------------------------------------------------------------


def _run_job(slot: int, job: dict[str, Any]) -> dict[str, Any]:
    """One client process's share of a job: call indexes slot, slot + procs, ... below
    job["calls"], made by job["threads"] threads until done or job["seconds"] have passed."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    n_channels = job["threads"] if job["channel_per_thread"] else 1
    channels = [grpc.insecure_channel(job["target"], options=options) for _ in range(n_channels)]
    for channel in channels:
        grpc.channel_ready_future(channel).result(timeout=30)
    stubs = [pb_grpc.TileSolveServiceStub(channel) for channel in channels]
    pattern: list[str] = job["pattern"]
    procs, calls = job["procs"], job["calls"]
    latencies: dict[str, list[float]] = {}
    statuses: dict[str, Counter[str]] = {}
    shares = Counter(pattern)
    ordinal = [pattern[:p].count(kind) for p, kind in enumerate(pattern)]
    counter = itertools.count()
    lock = threading.Lock()
    time.sleep(max(job["start_at"] - time.monotonic(), 0.0))
    started = time.monotonic()
    stop_at = started + job["seconds"]
    cpu_before = os.times()

    def worker(thread: int) -> None:
        stub = stubs[thread % len(stubs)]
        mine: list[tuple[str, float, str]] = []
        while time.monotonic() < stop_at:
            i = slot + next(counter) * procs
            if i >= calls:
                break
            kind = pattern[i % len(pattern)]
            if kind == "invalid":  # "invalid/VARIANT", the variants in turn
                nth = i // len(pattern) * shares[kind] + ordinal[i % len(pattern)]
                kind = f"invalid/{INVALID[nth % len(INVALID)]}"
            began = time.perf_counter()
            try:
                status = _call(kind, stub, i, job)
            except Exception as exc:  # a bug here must show as a status, not vanish
                status = f"EXCEPTION_{type(exc).__name__}"
            mine.append((kind, (time.perf_counter() - began) * 1e3, status))
        with lock:
            for kind, ms, status in mine:
                latencies.setdefault(kind, []).append(ms)
                statuses.setdefault(kind, Counter())[status] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(job["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ended = time.monotonic()
    cpu_after = os.times()
    for channel in channels:
        channel.close()
    done = sum(len(values) for values in latencies.values())
    return {
        "latencies": latencies,
        "statuses": {kind: dict(counts) for kind, counts in statuses.items()},
        "started": started,
        "ended": ended,
        "assigned": len(range(slot, calls, procs)),
        "done": done,
        "cpu_s": (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system),
    }


def _client_main(slot: int, jobs: Any, results: Any) -> None:
    while (job := jobs.get()) is not None:
        try:
            results.put((slot, _run_job(slot, job)))
        except BaseException as exc:
            results.put((slot, {"error": f"{type(exc).__name__}: {exc}"}))


class ClientPool:
    """`procs` client processes (spawned: no gRPC state inherited), each running the jobs it
    is given with `threads` threads."""

    def __init__(self, procs: int, threads: int) -> None:
        context = mp.get_context("spawn")
        self.procs, self.threads = procs, threads
        self._jobs = [context.Queue() for _ in range(procs)]
        self._results = context.Queue()
        self._processes = [
            context.Process(
                target=_client_main, args=(k, self._jobs[k], self._results), daemon=True
            )
            for k in range(procs)
        ]
        for process in self._processes:
            process.start()

    def run(
        self,
        target: str,
        pattern: list[str],
        calls: int,
        seconds: float,
        *,
        cold_base: int = 0,
        batch_base: int = 0,
        check_cache: bool = True,
        channel_per_thread: bool = False,
        during: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Run a job on every client process; `during()` runs in this thread from the common
        start until the clients are done. The merged result."""
        start_at = time.monotonic() + START_DELAY_S
        job = dict(
            target=target,
            pattern=pattern,
            calls=calls,
            seconds=seconds,
            cold_base=cold_base,
            batch_base=batch_base,
            check_cache=check_cache,
            channel_per_thread=channel_per_thread,
            procs=self.procs,
            threads=self.threads,
            start_at=start_at,
        )
        for queue in self._jobs:
            queue.put(job)
        time.sleep(max(start_at - time.monotonic(), 0.0))
        if during is not None:
            during()
        parts = [self._results.get(timeout=seconds + 120)[1] for _ in range(self.procs)]
        errors = [part["error"] for part in parts if "error" in part]
        if errors:
            raise RuntimeError("client process failed: " + "; ".join(errors))
        return _merge(parts)

    def close(self) -> None:
        for queue in self._jobs:
            queue.put(None)
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()


def _figures(values: list[float], counts: Counter[str], wall: float) -> dict[str, Any]:
    return {
        "calls": len(values),
        "calls_per_s": len(values) / wall,
        "p50_ms": statistics.median(values),
        "p99_ms": percentile(values, 0.99),
        "max_ms": max(values),
        "statuses": dict(sorted(counts.items())),
    }


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The client processes' results as one: figures per kind (and per invalid variant)."""
    latencies: dict[str, list[float]] = {}
    statuses: dict[str, Counter[str]] = {}
    for part in parts:
        for label, values in part["latencies"].items():
            for key in {label, label.partition("/")[0]}:
                latencies.setdefault(key, []).extend(values)
                statuses.setdefault(key, Counter()).update(part["statuses"][label])
    wall = max(p["ended"] for p in parts) - min(p["started"] for p in parts)
    done = sum(p["done"] for p in parts)
    kinds = {}
    for kind in sorted((k for k in latencies if k in KINDS), key=KINDS.index):
        counts = statuses[kind]
        kinds[kind] = _figures(latencies[kind], counts, wall)
        kinds[kind]["unexpected"] = sum(n for st, n in counts.items() if st != EXPECTED[kind])
        variants = sorted(k for k in latencies if k.startswith(kind + "/"))
        if variants:
            kinds[kind]["variants"] = {
                k.partition("/")[2]: _figures(latencies[k], statuses[k], wall) for k in variants
            }
    return {
        "calls": done,
        "not_made": sum(p["assigned"] for p in parts) - done,
        "wall_s": wall,
        "calls_per_s": done / wall,
        "unexpected": sum(k["unexpected"] for k in kinds.values()),
        "client_cpu_s": sum(p["cpu_s"] for p in parts),
        "kinds": kinds,
    }


# ---- the server and /proc -------------------------------------------------------------------


def start_server(*args: str) -> ServerProcess:
    return ServerProcess(*SERVER_ARGS, *args)


def stop_server(server: ServerProcess) -> None:
    """SIGTERM (a drain without delay), then SIGKILL whatever of its tree is left."""
    tree = process_tree(server.pid)
    if server.proc.poll() is None:
        server.signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=20)
    for pid in tree:
        if Path(f"/proc/{pid}").exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    server.stop()


def tree_rss(root: int) -> int:
    """Resident bytes of `root`'s process tree (pages shared between them counted in each)."""
    return sum(rss_bytes(pid) for pid in process_tree(root))


def machine_busy_s() -> float:
    """CPU seconds this machine's CPUs have been busy (all of them, everything running)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / _TICKS


def warm_cache(target: str) -> None:
    """Solve the cached set once and check the second ask of each is a cache hit."""
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.TileSolveServiceStub(channel)
        for index in range(CACHED_SET):
            stub.Solve(cold_request(index), timeout=CALL_TIMEOUT_S)
            if not stub.Solve(cold_request(index), timeout=CALL_TIMEOUT_S).cache_hit:
                raise RuntimeError(f"cached problem {index} was not cached")


# ---- the sections ---------------------------------------------------------------------------


def run_load(pool: ClientPool, args: argparse.Namespace) -> dict[str, Any]:
    server = start_server(*args.server_arg)
    try:
        warm_cache(server.target)
        rss_before = tree_rss(server.pid)
        cpu_before = cpu_seconds(server.pid)
        result = pool.run(
            server.target,
            _pattern(LOAD_MIX),
            args.load_calls,
            args.max_seconds,
            cold_base=LOAD_BASE,
            batch_base=LOAD_BASE + args.load_calls,
        )
        result["server_cpu_s"] = cpu_seconds(server.pid) - cpu_before
        result["rss_before_mib"] = rss_before / MIB
        result["rss_after_mib"] = tree_rss(server.pid) / MIB
        result["server_processes"] = len(process_tree(server.pid))
    finally:
        stop_server(server)
    result["mix_percent"] = LOAD_MIX
    result["clients"] = f"{pool.procs} processes x {pool.threads} threads"
    return result


def run_soak(pool: ClientPool, args: argparse.Namespace) -> dict[str, Any]:
    server = start_server("--cache-mib", str(args.soak_cache_mib), *args.server_arg)
    samples: list[tuple[float, float, float]] = []  # seconds, tree and front-end RSS MiB
    try:
        warm_cache(server.target)
        stopped = threading.Event()
        begun: list[float] = []  # when the calls start

        def take() -> None:
            front_end = rss_bytes(server.pid) / MIB
            samples.append((time.monotonic() - begun[0], tree_rss(server.pid) / MIB, front_end))

        def sample() -> None:
            begun.append(time.monotonic())
            while True:
                take()
                if stopped.wait(args.soak_sample_s):
                    break

        sampler = threading.Thread(target=sample, daemon=True)
        result = pool.run(
            server.target,
            _pattern(SOAK_MIX),
            args.soak_calls,
            args.max_seconds,
            cold_base=SOAK_BASE,
            during=sampler.start,
        )
        stopped.set()
        sampler.join()
        take()  # after the last call
    finally:
        stop_server(server)
    after_warmup = next((s for s in samples if s[0] >= args.soak_warmup_s), samples[0])
    rss = [sample[1] for sample in samples]
    growth = samples[-1][1] - after_warmup[1]
    bound = args.soak_cache_mib + args.soak_margin_mib
    result.update(
        mix_percent=SOAK_MIX,
        clients=f"{pool.procs} processes x {pool.threads} threads",
        cache_mib=args.soak_cache_mib,
        samples=len(samples),
        sample_every_s=args.soak_sample_s,
        warmup_s=args.soak_warmup_s,
        rss_first_mib=rss[0],
        rss_after_warmup_mib=after_warmup[1],
        rss_min_mib=min(rss),
        rss_max_mib=max(rss),
        rss_last_mib=rss[-1],
        growth_mib=growth,
        growth_front_end_mib=samples[-1][2] - after_warmup[2],
        bound_mib=bound,
        bound_held=growth <= bound,
        # [seconds, tree, front end]: the rest of the tree is its forkserver and solvers
        rss_series_mib=[[round(x, 2) for x in sample] for sample in samples],
    )
    return result


def run_scaling(pool: ClientPool, args: argparse.Namespace) -> dict[str, Any]:
    """Cold solves for --processes 1 against 2, per --solve-in, then cached Solve."""
    out: dict[str, Any] = {
        "rounds": args.rounds,
        "round_s": args.round_s,
        "clients": f"{pool.procs} processes x {pool.threads} threads",
        "configs": {},
    }
    slot = itertools.count()
    plans = [(mode, "cold") for mode in args.solve_in] + [("processes", "cached")]
    for mode, kind in plans:
        servers = {
            n: start_server("--processes", str(n), "--solve-in", mode, *args.server_arg)
            for n in (1, 2)
        }
        try:
            rounds: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
            order = [1, 2] if kind == "cold" else [2, 1]
            for r in range(args.rounds + 1):  # round 0 warms up (shorter), not counted
                seconds = args.round_s if r else min(args.round_s, WARMUP_ROUND_S)
                for n in order if r % 2 == 0 else order[::-1]:
                    measured = _scaling_round(pool, servers[n], n, kind, next(slot), seconds)
                    if r:
                        rounds[n].append(measured)
            for n in (1, 2):
                out["configs"][f"{kind} solve-in={mode} processes={n}"] = {
                    "kind": kind,
                    "solve_in": mode,
                    "processes": n,
                    "rounds": rounds[n],
                    "calls_per_s_median": statistics.median(x["calls_per_s"] for x in rounds[n]),
                    "server_cpu_ms_per_call": 1e3
                    * sum(x["server_cpu_s"] for x in rounds[n])
                    / max(sum(x["calls"] for x in rounds[n]), 1),
                }
        finally:
            for server in servers.values():
                stop_server(server)
    ratios = {}
    for mode, kind in plans:
        one = out["configs"][f"{kind} solve-in={mode} processes=1"]["calls_per_s_median"]
        two = out["configs"][f"{kind} solve-in={mode} processes=2"]["calls_per_s_median"]
        ratio = two / one
        ratios[f"{kind} solve-in={mode}"] = {
            "one_calls_per_s": one,
            "two_calls_per_s": two,
            "ratio": ratio,
            "target": SCALING_TARGET if kind == "cold" else None,
            "target_met": ratio >= SCALING_TARGET if kind == "cold" else None,
        }
    out["ratios"] = ratios
    out["unexpected"] = sum(r["unexpected"] for c in out["configs"].values() for r in c["rounds"])
    return out


def _scaling_round(
    pool: ClientPool, server: ServerProcess, processes: int, kind: str, slot: int, seconds: float
) -> dict[str, Any]:
    """`seconds` of `kind` calls (each cold one a new problem) on a connection per client
    thread; the calls' figures and the CPU each part of the server used meanwhile."""
    marks: dict[str, Any] = {}

    def mark() -> None:
        marks.update(cpu=server_cpu(server.pid, processes), machine=machine_busy_s())
        marks["t"] = time.monotonic()

    result = pool.run(
        server.target,
        [kind],
        10**9,
        seconds,
        check_cache=False,
        cold_base=SCALING_BASE + slot * ROUND_SPAN,
        channel_per_thread=True,
        during=mark,
    )
    elapsed = time.monotonic() - marks["t"]
    machine_busy = machine_busy_s() - marks["machine"]
    after = server_cpu(server.pid, processes)
    parts = {name: round(cpu - marks["cpu"].get(name, 0.0), 3) for name, cpu in after.items()}
    stats = result["kinds"][kind]
    return {
        "calls": result["calls"],
        "calls_per_s": result["calls_per_s"],
        "p50_ms": stats["p50_ms"],
        "p99_ms": stats["p99_ms"],
        "unexpected": result["unexpected"],
        "statuses": stats["statuses"],
        "elapsed_s": elapsed,
        "server_cpu_s": sum(parts.values()),
        "front_end_cpu_s": sum(v for k, v in parts.items() if k.startswith("front-end")),
        "solver_cpu_s": sum(v for k, v in parts.items() if k.startswith("solvers")),
        "server_cpu_by_part": parts,
        "client_cpu_s": result["client_cpu_s"],
        "machine_busy_s": machine_busy,
        "others_cpu_s": machine_busy - sum(parts.values()) - result["client_cpu_s"],
    }


def server_cpu(root: int, processes: int) -> dict[str, float]:
    """CPU seconds (user+sys) so far of each part of a server: with --processes above 1 the
    supervisor (`root`) and its children, the server processes; each server process (the
    front end answering calls) and, apart, the processes under it (forkserver and solvers)."""
    tree = process_tree(root)
    parent = {pid: parent_pid(pid) for pid in tree}
    front_ends = [root] if processes == 1 else [pid for pid in tree if parent[pid] == root]
    parts = {}
    if processes > 1:
        parts["supervisor"] = cpu_seconds(root) - sum(cpu_seconds(pid) for pid in front_ends)
    for pid in front_ends:
        below = sum(cpu_seconds(child) for child in tree if parent[child] == pid)
        parts[f"front-end {pid}"] = cpu_seconds(pid) - below
        parts[f"solvers {pid}"] = below
    return parts


# ---- report ---------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "git_head": head,
        "load_average": os.getloadavg(),
    }


def bounds(report: dict[str, Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []

    def check(section: str, name: str, value: object, limit: object, held: bool) -> None:
        checks.append(dict(section=section, name=name, value=value, limit=limit, held=held))

    sections = report["sections"]
    for name in ("load", "soak"):
        if name in sections:
            s = sections[name]
            check(name, "unexpected statuses", s["unexpected"], 0, s["unexpected"] == 0)
            check(name, "calls not made within --max-seconds", s["not_made"], 0, s["not_made"] == 0)
            missing = [
                k
                for k in (LOAD_MIX if name == "load" else SOAK_MIX)
                if not s["kinds"].get(k, {}).get("calls")
            ]
            check(name, "kinds without a call", missing, [], not missing)
    if "soak" in sections:
        s = sections["soak"]
        check(
            "soak",
            "RSS growth after warm-up, MiB",
            round(s["growth_mib"], 1),
            s["bound_mib"],
            s["bound_held"],
        )
    if "scaling" in sections:
        s = sections["scaling"]
        check("scaling", "unexpected statuses", s["unexpected"], 0, s["unexpected"] == 0)
        if args.enforce_scaling_target:
            for name, r in s["ratios"].items():
                if r["target"] is not None:
                    check(
                        "scaling",
                        f"{name}: 2 over 1 process",
                        round(r["ratio"], 2),
                        r["target"],
                        r["target_met"],
                    )
    return checks


def _print_kinds(section: dict[str, Any]) -> None:
    print(f"{'kind':<26} {'calls':>6} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  "
          "statuses")  # fmt: skip
    for kind, k in section["kinds"].items():
        rows = [(kind, k)] + [(f"  {name}", v) for name, v in k.get("variants", {}).items()]
        for name, r in rows:
            statuses = ", ".join(f"{status} {n}" for status, n in r["statuses"].items())
            print(f"{name:<26} {r['calls']:>6} {r['calls_per_s']:>8.1f} {r['p50_ms']:>8.2f} "
                  f"{r['p99_ms']:>8.2f} {r['max_ms']:>8.1f}  {statuses}")  # fmt: skip


def print_report(report: dict[str, Any]) -> None:
    m = report["machine"]
    print(
        f"{m['date']}; python {m['python']}, grpcio {m['grpcio']}, {m['cpus']} CPUs "
        f"({m['cpu_model']}), {m['platform']}, git {m['git_head']}, load average "
        f"{' '.join(f'{x:.2f}' for x in m['load_average'])}"
    )
    sections = report["sections"]
    if "load" in sections:
        s = sections["load"]
        mix = ", ".join(f"{k} {v}%" for k, v in s["mix_percent"].items())
        print(
            f"\nload: {s['calls']} calls from {s['clients']} in {s['wall_s']:.1f} s = "
            f"{s['calls_per_s']:.0f} calls/s; mix {mix} (batch = SolveBatch of {BATCH} new "
            f"problems)"
        )
        _print_kinds(s)
        print(
            f"unexpected statuses: {s['unexpected']}; server tree ({s['server_processes']} "
            f"processes) RSS {s['rss_before_mib']:.1f} MiB before, {s['rss_after_mib']:.1f} "
            f"MiB after ({s['rss_after_mib'] - s['rss_before_mib']:+.1f}); server CPU "
            f"{s['server_cpu_s']:.1f} s, clients' {s['client_cpu_s']:.1f} s"
        )
    if "soak" in sections:
        s = sections["soak"]
        mix = ", ".join(f"{k} {v}%" for k, v in s["mix_percent"].items())
        print(
            f"\nsoak: {s['calls']} calls from {s['clients']} in {s['wall_s']:.1f} s = "
            f"{s['calls_per_s']:.0f} calls/s; mix {mix}; --cache-mib {s['cache_mib']}"
        )
        _print_kinds(s)
        print(
            f"unexpected statuses: {s['unexpected']}; RSS of the server tree, {s['samples']} "
            f"samples every {s['sample_every_s']:g} s: first {s['rss_first_mib']:.1f}, after "
            f"{s['warmup_s']:g} s warm-up {s['rss_after_warmup_mib']:.1f}, min "
            f"{s['rss_min_mib']:.1f}, max {s['rss_max_mib']:.1f}, last {s['rss_last_mib']:.1f} "
            f"MiB"
        )
        verdict = "held" if s["bound_held"] else "BROKEN"
        print(
            f"growth after warm-up {s['growth_mib']:+.1f} MiB (the front end "
            f"{s['growth_front_end_mib']:+.1f}); bound {s['bound_mib']} MiB "
            f"(--cache-mib {s['cache_mib']} + margin): {verdict}"
        )
    if "scaling" in sections:
        _print_scaling(sections["scaling"])
    print()
    for c in report["bounds"]:
        print(
            f"bound {c['section']}: {c['name']} = {c['value']} (limit {c['limit']}): "
            f"{'held' if c['held'] else 'BROKEN'}"
        )
    print("all bounds held" if report["ok"] else "SOME BOUND BROKEN")


def _per_process(parts: dict[str, float]) -> str:
    """ "0.3+1.6, 0.3+1.5": each server process's front end + solvers, CPU-s."""
    fronts = [k.split()[1] for k in parts if k.startswith("front-end")]
    return ", ".join(f"{parts['front-end ' + p]:.1f}+{parts['solvers ' + p]:.1f}" for p in fronts)


def _print_scaling(s: dict[str, Any]) -> None:
    print(
        f"\nscaling: {s['rounds']} rounds of {s['round_s']:g} s per configuration, 1 and 2 "
        f"processes alternating, after a warm-up round each; clients {s['clients']}, a "
        "connection per thread"
    )
    print(
        f"{'configuration':<38} {'calls/s per round':<20} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'server':>7} {'fronts':>7} {'solvers':>7} {'clients':>7} {'others':>7} {'machine':>7} "
        f"{'ms/call':>7}"
    )
    for name, c in s["configs"].items():
        rounds = c["rounds"]
        rates = " ".join(f"{r['calls_per_s']:.0f}" for r in rounds)

        def med(key: str, rounds: list[dict[str, Any]] = rounds) -> float:
            return statistics.median(r[key] for r in rounds)

        def per_s(key: str, rounds: list[dict[str, Any]] = rounds) -> float:
            return statistics.median(r[key] / r["elapsed_s"] for r in rounds)

        print(
            f"{name:<38} {rates:<20} {med('p50_ms'):>7.2f} {med('p99_ms'):>7.2f} "
            f"{per_s('server_cpu_s'):>7.2f} {per_s('front_end_cpu_s'):>7.2f} "
            f"{per_s('solver_cpu_s'):>7.2f} {per_s('client_cpu_s'):>7.2f} "
            f"{per_s('others_cpu_s'):>7.2f} {per_s('machine_busy_s'):>7.2f} "
            f"{c['server_cpu_ms_per_call']:>7.2f}"
        )
    print(
        "CPU columns: CPU-seconds per second of round (medians over the rounds): the server "
        "tree in all (user+sys), its front-end processes, the processes under them "
        "(forkserver, solvers), the client processes, everything else on the machine (other "
        "users' work; this script's own sampling), the whole machine busy; ms/call: the "
        "server tree's CPU-ms per call over the rounds"
    )
    for name, c in s["configs"].items():
        if c["processes"] > 1:
            spread = "; ".join(_per_process(r["server_cpu_by_part"]) for r in c["rounds"])
            print(f"  {name}: CPU-s per round, each process (front end + solvers): {spread}")
    for name, r in s["ratios"].items():
        target = ""
        if r["target"] is not None:
            target = f" (target >= {r['target']}x: {'met' if r['target_met'] else 'not met'})"
        print(
            f"{name}: 2 processes {r['two_calls_per_s']:.0f}/s over 1 process "
            f"{r['one_calls_per_s']:.0f}/s = {r['ratio']:.3f}x{target}"
        )


# ---- main -----------------------------------------------------------------------------------


def _sections(text: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = set(chosen) - {"load", "soak", "scaling"}
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"sections are load, soak, scaling; got {text!r}")
    return chosen


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--only",
        type=_sections,
        default=["load", "soak", "scaling"],
        help="comma-separated sections (default load,soak,scaling)",
    )
    p.add_argument("--procs", type=int, default=4, help="client processes (default 4)")
    p.add_argument("--threads", type=int, default=16, help="threads per client process (16)")
    p.add_argument("--load-calls", type=int, default=20_000, help="load calls (20000)")
    p.add_argument("--soak-calls", type=int, default=100_000, help="soak calls (100000)")
    p.add_argument("--soak-cache-mib", type=int, default=16, help="soak server's --cache-mib (16)")
    p.add_argument(
        "--soak-margin-mib",
        type=float,
        default=16.0,
        help="soak bound = --soak-cache-mib + this (16; see benchmarks/README.md)",
    )
    p.add_argument("--soak-sample-s", type=float, default=2.0, help="RSS sampling period (2)")
    p.add_argument(
        "--soak-warmup-s",
        type=float,
        default=10.0,
        help="growth is counted from the first sample after this (10)",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="load and soak each make every call within this or fail (600)",
    )
    p.add_argument("--rounds", type=int, default=3, help="scaling rounds per configuration (3)")
    p.add_argument("--round-s", type=float, default=5.0, help="seconds per scaling round (5)")
    p.add_argument("--scaling-procs", type=int, default=2, help="scaling client processes (2)")
    p.add_argument("--scaling-threads", type=int, default=8, help="their threads each (8)")
    p.add_argument(
        "--solve-in",
        type=lambda t: t.split(","),
        default=["processes", "threads"],
        help="scaling: --solve-in values to compare (processes,threads)",
    )
    p.add_argument(
        "--enforce-scaling-target",
        action="store_true",
        help=f"fail when 2 processes give < {SCALING_TARGET}x the cold solves of 1",
    )
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="pass ARG to every tilesolve-server (repeatable; e.g. "
        "--server-arg=--max-concurrent-rpcs=8)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--json-out", type=Path, metavar="FILE", help="also write it to FILE")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    report: dict[str, Any] = {"machine": machine(), "sections": {}}
    began = time.monotonic()
    pool = ClientPool(args.procs, args.threads)
    try:
        if "load" in args.only:
            report["sections"]["load"] = run_load(pool, args)
        if "soak" in args.only:
            report["sections"]["soak"] = run_soak(pool, args)
    finally:
        pool.close()
    if "scaling" in args.only:
        pool = ClientPool(args.scaling_procs, args.scaling_threads)
        try:
            report["sections"]["scaling"] = run_scaling(pool, args)
        finally:
            pool.close()
    report["wall_s"] = time.monotonic() - began
    report["bounds"] = bounds(report, args)
    report["ok"] = all(c["held"] for c in report["bounds"])
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(report, indent=1))
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
