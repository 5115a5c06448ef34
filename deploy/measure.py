"""Memory and CPU of one `tilesolve-server` process tree, idle and under cold solves: the
figures the Kubernetes resource requests and limits in deploy/kubernetes/ are sized from.

    .venv/bin/python deploy/measure.py [--workers 2] [--clients 4] [--seconds 6]

Starts `tilesolve-server --host 127.0.0.1 --port 0 --workers N` (solver processes, as the
Deployment runs it), then reports for the whole process tree (the server, the forkserver, its
resource tracker and the N solver processes; tests/harness.py `process_tree`):

- RSS summed over the processes (what `ps` shows; pages shared copy-on-write between the
  forkserver's children count once per process, so this over-counts), and
- PSS summed (`/proc/PID/smaps_rollup`: each shared page split between its sharers, so the
  sum is the memory the tree really holds; a cgroup charges a page once, which is nearer to
  this than to the RSS sum),

idle after start-up, at the peak of CLIENTS threads asking distinct cold solves (cache
misses, tests/harness.py `cold_request`) for SECONDS, and after that load; plus the CPU the
tree used during the load. Everything goes to 127.0.0.1 and stops by itself. One JSON
document on stdout.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import threading
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from harness import ServerProcess, cold_request, cpu_seconds, process_tree, rss_bytes

MIB = 1024 * 1024


def pss_bytes(pid: int) -> int:
    """Proportional set size of one process (0 once it has gone)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def tree_memory(root: int) -> dict[str, float]:
    pids = process_tree(root)
    return {
        "processes": len(pids),
        "rss_mib": round(sum(rss_bytes(p) for p in pids) / MIB, 1),
        "pss_mib": round(sum(pss_bytes(p) for p in pids) / MIB, 1),
    }


def pss_by_process(root: int) -> list[float]:
    """PSS of each process of the tree, MiB: the server first, then its descendants."""
    return [round(pss_bytes(p) / MIB, 1) for p in process_tree(root)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()

    with ServerProcess("--host", "127.0.0.1", "--workers", str(args.workers)) as server:
        time.sleep(1.0)  # solver processes forked and settled
        idle = tree_memory(server.pid)
        channel = grpc.insecure_channel(server.target)
        stub = pb_grpc.TileSolveServiceStub(channel)
        counter = itertools.count(20_000)
        answered = [0] * args.clients
        end = time.monotonic() + args.seconds

        def client(slot: int) -> None:
            while time.monotonic() < end:
                try:
                    stub.Solve(cold_request(next(counter)), timeout=30)
                    answered[slot] += 1
                except grpc.RpcError:
                    pass

        cpu_before, started = cpu_seconds(server.pid), time.monotonic()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for thread in threads:
            thread.start()
        peak = dict(idle)
        while any(thread.is_alive() for thread in threads):
            now = tree_memory(server.pid)
            peak = {key: max(peak[key], now[key]) for key in peak}
            time.sleep(0.2)
        wall = time.monotonic() - started
        cpu = cpu_seconds(server.pid) - cpu_before
        after = tree_memory(server.pid)
        after_each = pss_by_process(server.pid)
        channel.close()
        server.signal(signal.SIGTERM)
        code = server.wait(timeout=30)

    report = {
        "workers": args.workers,
        "clients": args.clients,
        "seconds": round(wall, 2),
        "cold_solves_answered": sum(answered),
        "idle": idle,
        "peak_under_load": peak,
        "after_load": after,
        "after_load_pss_mib_by_process": after_each,
        "cpu_seconds_under_load": round(cpu, 2),
        "cpus_busy_under_load": round(cpu / wall, 2),
        "exit_code_after_sigterm": code,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
