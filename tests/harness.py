"""Running `tilesolve-server` as a process and measuring it, for the service's fault tests.

`ServerProcess` starts `python -m tilesolve.server.main` on a loopback port and collects its
stderr line by line; `process_tree`, `cpu_seconds` and `rss_bytes` read /proc (Linux), so the
CPU of the server's solver processes counts as the server's. `cold_request(i)` is a distinct
problem per `i` (a cache miss each), `percentile` what the tests compare.

Run as a script, it is the load generator of the mixed-load test: `python tests/harness.py
load PORT CLIENTS SECONDS` runs CLIENTS threads asking cold solves for SECONDS or until its
stdin closes, reniced as clients on other machines would not take this machine's CPU, and
prints how many were answered.
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
from pathlib import Path

import grpc

from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")
HEAD_DIMS = (64, 128, 96, 256)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def cold_request(index: int, **options: object) -> pb.SolveRequest:
    """A distinct, realistic problem per index: a cache miss each (a few milliseconds of
    CP-SAT)."""
    return pb.SolveRequest(
        hardware=pb.HardwareRef(name="a100"),
        problem=pb.AttentionProblem(
            batch=1 + index % 8,
            heads=16,
            seq_len=1024 + index,
            head_dim=HEAD_DIMS[index % len(HEAD_DIMS)],
            causal=bool(index % 2),
        ),
        options=pb.SolveOptions(**options) if options else None,  # type: ignore[arg-type]
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---- /proc --------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from the 3rd on (state, ppid, ...)


def parent_pid(pid: int) -> int:
    """The parent of a process (0 once it is gone)."""
    fields = _stat(pid)
    return int(fields[1]) if fields is not None else 0


def process_tree(root: int) -> list[int]:
    """`root` and every process descended from it (the forkserver and solver processes)."""
    pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    parents = {pid: parent_pid(pid) for pid in pids}
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parents.items() if ppid in frontier]
        tree.extend(frontier)
    return tree


def cpu_seconds(root: int) -> float:
    """User + system CPU of `root`'s process tree as it is now (exited members not counted)."""
    total = 0
    for pid in process_tree(root):
        fields = _stat(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICKS


def minor_faults(root: int) -> int:
    """Minor page faults of `root`'s process tree so far (exited members not counted)."""
    total = 0
    for pid in process_tree(root):
        fields = _stat(pid)
        if fields is not None:
            total += int(fields[7])  # minflt
    return total


def rss_bytes(pid: int) -> int:
    """Resident memory of one process."""
    fields = _stat(pid)
    return int(fields[21]) * _PAGE if fields is not None else 0


# ---- the server as a process --------------------------------------------------------------


class ServerProcess:
    """`python -m tilesolve.server.main --port PORT ARGS`, its stderr collected line by line."""

    def __init__(self, *args: str, port: int = 0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tilesolve.server.main", "--port", str(port), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._listening = threading.Event()
        self.host = "127.0.0.1"
        self.port = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listening.wait(timeout=60):
            self.proc.kill()
            raise AssertionError("server did not start:\n" + "".join(self.lines))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            found = re.search(r"tilesolve-server listening on (\S+):(\d+)", line)
            if found:
                self.host = found.group(1)
                self.port = int(found.group(2))
                self._listening.set()

    @property
    def target(self) -> str:
        """HOST:PORT as the server announced it (127.0.0.1 unless --host said otherwise)."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)  # every line read
        return code

    def log(self, pattern: str) -> list[str]:
        return [line for line in self.lines if re.search(pattern, line)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._reader.join(timeout=5)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


# ---- the load generator -------------------------------------------------------------------


def _load(port: int, clients: int, seconds: float) -> int:
    os.nice(10)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.TileSolveServiceStub(channel)
    counter = itertools.count(5_000)
    done = [0] * clients
    end = time.monotonic() + seconds
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

    def client(slot: int) -> None:
        while time.monotonic() < end and not stop.is_set():
            try:
                stub.Solve(cold_request(next(counter)), timeout=60)
                done[slot] += 1
            except grpc.RpcError:
                pass

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done)


if __name__ == "__main__":
    if sys.argv[1:2] == ["load"]:
        port, clients, seconds = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
        print(_load(port, clients, seconds), flush=True)
