"""`tilesolve-server --processes N`: N server processes behind one port.

The supervisor (this module, in the process the user started) reserves the address with a
socket bound with `SO_REUSEPORT` and never listening, then starts N worker processes, each a
whole `tilesolve-server` (`python -m tilesolve.server.main ... --supervised`) that binds the
same address with `SO_REUSEPORT`. Linux then hands each new connection to one of the
listening workers (a hash of the connection's addresses and ports): it spreads connections,
not calls, so one client on one connection stays with one worker, as gRPC's own
multiprocessing example does. The reserving socket keeps the port this program's while a
worker restarts, and lets `--port 0` pick one port for all of them.

Each worker has its own solver processes, answer cache and limits (`--workers`,
`--cache-mib` and `--max-concurrent-rpcs` are per worker): a shared cache would need shared
memory and a lock on every hit, the thing the cached path avoids; a client's repeated
requests ride its connection to the same worker, so they hit its cache.

The supervisor
- prints one `tilesolve-server listening on HOST:PORT with N processes` line once every
  worker is serving (a worker that cannot start stops the others: exit 1);
- forwards each worker's log lines to its own stderr, prefixed `[worker I]`;
- restarts a worker that exits on its own (a crash): at once if it had run for
  `QUICK_CRASH_S`, else after a pause that doubles from 1 s to 8 s while crashes keep
  coming; after `MAX_QUICK_CRASHES` crashes in a row, each within `QUICK_CRASH_S` of its
  start, it gives up: it drains the others and exits 1;
- on SIGTERM or SIGINT sends SIGTERM to every worker: all turn health NOT_SERVING at once,
  keep answering for `--drain-delay`, then finish their calls within `--grace`; a worker
  still running `STOP_MARGIN_S` after that is killed; exit 0.
A worker reads its stdin, a pipe from the supervisor, and drains when it reads EOF: if the
supervisor is killed, its workers do not outlive it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import IO

from .app import why_not_bindable
from .config import MIB, ServerConfig, available_cpus, bracketed

logger = logging.getLogger("tilesolve.server.supervisor")

MAX_PROCESSES = 64  # --processes from 1 to this
STARTUP_TIMEOUT_S = 120.0  # a worker not serving by then counts as failed to start
STOP_MARGIN_S = 5.0  # past drain-delay + grace, a worker still running is killed
QUICK_CRASH_S = 10.0  # a worker that exits within this of its start crashed "quickly" ...
MAX_QUICK_CRASHES = 5  # ... and this many such crashes in a row stop the supervisor
_LISTENING = re.compile(r"tilesolve-server listening on \S+:\d+")
_POLL_S = 0.2


def has_reuseport() -> bool:
    """Whether this platform lets several processes listen on one port (Linux's
    SO_REUSEPORT balancing)."""
    return hasattr(socket, "SO_REUSEPORT") and sys.platform.startswith("linux")


def workers_per_process(config: ServerConfig, processes: int) -> int:
    """Solves at once in each worker: `--workers` as given, or the available CPUs shared
    among the processes (at least 1 each) for 0."""
    return config.workers or max(available_cpus() // processes, 1)


def worker_arguments(config: ServerConfig, log_level: str) -> list[str]:
    """The `tilesolve-server` options that give a worker process `config` (its inverse is
    main.config_from_args; a test checks the round trip)."""
    args = [
        "--host", config.host,
        "--port", str(config.port),
        "--workers", str(config.workers),
        "--solve-in", config.solve_in,
        "--max-concurrent-rpcs", str(config.max_concurrent_rpcs),
        "--cache-mib", str(config.cache_bytes // MIB),
        "--max-batch-size", str(config.max_batch_size),
        "--max-request-bytes", str(config.max_request_bytes),
        "--max-response-bytes", str(config.max_response_bytes),
        "--default-deadline", repr(config.default_deadline_s),
        "--batch-budget", repr(config.batch_budget_s),
        "--drain-delay", repr(config.drain_delay_s),
        "--grace", repr(config.grace_s),
        "--max-connection-age", repr(config.max_connection_age_s),
        "--max-connection-idle", repr(config.max_connection_idle_s),
        "--max-streams-per-connection", str(config.max_streams_per_connection),
        "--max-inflight-mib", str(config.max_inflight_bytes // MIB),
        "--log-level", log_level,
    ]  # fmt: skip
    for flag, path in (
        ("--tls-cert", config.tls_cert),
        ("--tls-key", config.tls_key),
        ("--tls-client-ca", config.tls_client_ca),
        ("--profile", config.profile),
    ):
        if path is not None:
            args += [flag, str(path)]
    return args


def reserve_address(config: ServerConfig) -> socket.socket:
    """A socket bound to the server's address with SO_REUSEPORT, not listening (so it takes
    no connections): the workers bind beside it. OSError names the address and why."""
    why = why_not_bindable(config.host, config.port) if config.port else None
    if why is not None:
        raise OSError(f"cannot listen on {config.address}: {why}")
    try:
        found = socket.getaddrinfo(
            config.host.strip("[]") or None,
            config.port,
            type=socket.SOCK_STREAM,
            flags=socket.AI_PASSIVE,
        )
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {config.address}: {exc.strerror}") from None
    family, kind, proto, _, address = found[0]
    reserved = socket.socket(family, kind, proto)
    try:
        reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        reserved.bind(address)
    except OSError as exc:
        reserved.close()
        raise OSError(f"cannot listen on {config.address}: {exc.strerror or exc}") from None
    return reserved


@dataclass
class Worker:
    """One worker process and what the supervisor knows of it."""

    index: int
    process: subprocess.Popen[bytes]
    started: float
    ready: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None


class Supervisor:
    """Starts, watches, restarts and drains the workers (see the module's docstring)."""

    def __init__(self, config: ServerConfig, log_level: str) -> None:
        self.config = config
        self.log_level = log_level
        self.workers: dict[int, Worker] = {}
        self.quick_crashes = 0
        self._stderr_lock = threading.Lock()

    # ---- workers --------------------------------------------------------------------------

    def _command(self) -> list[str]:
        args = worker_arguments(self.config, self.log_level)
        return [sys.executable, "-m", "tilesolve.server.main", *args, "--supervised"]

    def start_worker(self, index: int) -> Worker:
        process = subprocess.Popen(
            self._command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        worker = Worker(index, process, time.monotonic())
        worker.reader = threading.Thread(
            target=self._forward, args=(worker,), name=f"worker-{index}-log", daemon=True
        )
        worker.reader.start()
        self.workers[index] = worker
        return worker

    def _forward(self, worker: Worker) -> None:
        """Copy the worker's stderr to ours, line by line, prefixed with its index; its
        "listening" line marks it ready instead."""
        stream: IO[bytes] | None = worker.process.stderr
        assert stream is not None
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            serving = _LISTENING.search(line) is not None
            if serving:
                line = f"tilesolve-server worker {worker.index} (pid {worker.process.pid}) serving"
            self._write(f"[worker {worker.index}] {line}")
            if serving:
                worker.ready.set()

    def _write(self, line: str) -> None:
        with self._stderr_lock:
            print(line, file=sys.stderr, flush=True)

    def wait_ready(self, deadline: float) -> Worker | None:
        """None once every worker serves; else the first that exited (or is not serving by
        `deadline`, then killed)."""
        for worker in self.workers.values():
            while not worker.ready.wait(_POLL_S):
                if worker.process.poll() is not None or time.monotonic() > deadline:
                    if worker.process.poll() is None:
                        worker.process.kill()
                    worker.process.wait()
                    return worker
        return None

    def restart_if_exited(self) -> bool:
        """Restart every worker that exited on its own; False once they crash too often."""
        for index, worker in list(self.workers.items()):
            code = worker.process.poll()
            if code is None:
                continue
            if worker.reader is not None:
                worker.reader.join(timeout=1)
            lived_s = time.monotonic() - worker.started
            self.quick_crashes = self.quick_crashes + 1 if lived_s < QUICK_CRASH_S else 0
            if self.quick_crashes >= MAX_QUICK_CRASHES:
                logger.error(
                    "worker %d (pid %d) exited with status %d; %d workers exited within "
                    "%.0f s of their start in a row: giving up",
                    index, worker.process.pid, code, self.quick_crashes, QUICK_CRASH_S,
                )  # fmt: skip
                return False
            pause_s = min(2.0 ** (self.quick_crashes - 1), 8.0) if self.quick_crashes else 0.0
            logger.warning(
                "worker %d (pid %d) exited with status %d after %.1f s; restarting%s",
                index, worker.process.pid, code, lived_s,
                f" in {pause_s:.0f} s" if pause_s else "",
            )  # fmt: skip
            if pause_s:
                time.sleep(pause_s)
            self.start_worker(index)
        return True

    def stop_all(self) -> int:
        """SIGTERM every worker, wait for their drains, kill what is left; the exit status
        (0 when every worker drained and exited 0)."""
        for worker in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.config.drain_delay_s + self.config.grace_s
        deadline += STOP_MARGIN_S
        status = 0
        for worker in self.workers.values():
            try:
                code = worker.process.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                logger.error("worker %d (pid %d) did not stop: killed", worker.index,
                             worker.process.pid)  # fmt: skip
                worker.process.kill()
                code = worker.process.wait()
            if worker.reader is not None:
                worker.reader.join(timeout=1)
            status = status or (1 if code != 0 else 0)
        return status


def supervise(config: ServerConfig, processes: int, log_level: str) -> int:
    """Run `processes` workers until SIGTERM or SIGINT (see the module's docstring); the exit
    status. SIGTERM and SIGINT must already be blocked (main does it)."""
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    reserved = reserve_address(config)
    try:
        port = reserved.getsockname()[1]
        worker_config = replace(config, port=port, workers=workers_per_process(config, processes))
        supervisor = Supervisor(worker_config, log_level)
        for index in range(1, processes + 1):
            supervisor.start_worker(index)
        failed = supervisor.wait_ready(time.monotonic() + STARTUP_TIMEOUT_S)
        if failed is not None:
            code = failed.process.returncode
            logger.error("worker %d did not start (status %s); stopping", failed.index, code)
            supervisor.stop_all()
            return 1
        print(
            f"tilesolve-server listening on {bracketed(config.host)}:{port} with {processes} "
            f"processes (each solving up to {worker_config.workers} at once)",
            file=sys.stderr,
            flush=True,
        )
        while True:
            received = signal.sigtimedwait(stop_signals, 0.5)
            if received is not None:
                logger.info(
                    "received %s; draining %d workers (delay %.1f s, grace %.1f s)",
                    signal.Signals(received.si_signo).name,
                    processes,
                    config.drain_delay_s,
                    config.grace_s,
                )
                return supervisor.stop_all()
            if not supervisor.restart_if_exited():
                supervisor.stop_all()
                return 1
    finally:
        reserved.close()


def watch_supervisor() -> None:
    """In a worker: drain (SIGTERM to itself) when the supervisor's pipe on stdin closes."""

    def wait_for_eof() -> None:
        # os.read, not sys.stdin: a daemon thread blocked inside a buffered reader's lock
        # aborts the interpreter's shutdown.
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait_for_eof, name="supervisor-watch", daemon=True).start()
