"""`ServerConfig`: everything a tilesolve server can be told, in one record.

The command line (`main.py`) maps onto it one to one; `create_server` (`app.py`) builds the
server from it, and the servicer (`service.py`) reads its limits from it. It imports nothing
heavy, so `tilesolve-server --help` reads its defaults before grpc or the solver is loaded.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MIB = 1024 * 1024
# Room a SolveBatch response keeps for each request not answered yet (its item, should it
# have to say "not solved": the servicer's cut messages take about 200 bytes).
RESERVED_ITEM_BYTES = 256


def cgroup_cpu_limit(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPUs this process's cgroup may use per second (a container's CPU limit: cgroup v2
    `cpu.max`, or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), or None when unlimited or
    unknown."""
    try:
        quota, _, period = (root / "cpu.max").read_text().strip().partition(" ")
    except OSError:
        try:
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        quota_us, period_us = int(quota), int(period or 100_000)
    except ValueError:  # "max": no limit
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def available_cpus() -> int:
    """CPUs this process may run on: its affinity, and no more than its cgroup's CPU limit
    rounded up (in a container the affinity is every CPU of the node); at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(cpus, 1)


def bracketed(host: str) -> str:
    """An IPv6 literal in brackets, as gRPC addresses and URLs write it."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass(frozen=True)
class ServerConfig:
    """Everything `tilesolve-server` can be told (the command line maps onto it one to one;
    only `solve_in` has another default there: `processes`)."""

    host: str = "127.0.0.1"
    # 0: any free port (the bound one is `TileSolveServer.port`).
    port: int = 50051
    # Solves running at once (cold solves beyond it wait their turn).
    workers: int = 0  # 0: one per available CPU
    # Where solves run: "processes" (solver processes: nothing they do slows the server's
    # own answers) or "threads" of this process (solving with the kernel families registered
    # in it, as tests that register their own need).
    solve_in: Literal["processes", "threads"] = "threads"
    # tilesolve calls in progress at once; beyond it RESOURCE_EXHAUSTED (health and
    # reflection are not counted).
    max_concurrent_rpcs: int = 256
    # Bytes the answer cache may hold (keys, answers and per-entry overhead); 0 disables it.
    cache_bytes: int = 64 * MIB
    # The most requests one SolveBatch may carry.
    max_batch_size: int = 1000
    # The largest request and response, bytes (gRPC's usual 4 MiB).
    max_request_bytes: int = 4 * MIB
    max_response_bytes: int = 4 * MIB
    # The deadline of a call that sets none, and the most time one SolveBatch may take.
    default_deadline_s: float = 60.0
    batch_budget_s: float = 30.0
    # On SIGTERM/SIGINT: seconds of NOT_SERVING while still answering, then seconds the calls
    # in progress get to finish.
    drain_delay_s: float = 5.0
    grace_s: float = 10.0
    # Seconds after which the server asks a client to open a new connection (HTTP/2 GOAWAY;
    # gRPC adds +-10% jitter), so that long-lived clients rebalance onto replicas started
    # since they connected; 0 = never. Calls in progress on the old connection get
    # `connection_age_grace_s` more to finish.
    max_connection_age_s: float = 300.0
    # PEM server certificate chain and private key: serve TLS instead of plaintext.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # PEM CA bundle: require client certificates signed by it (mutual TLS).
    tls_client_ca: Path | None = None
    # A calibration profile (tilesolve-cli calibrate): its device's answers use the fitted
    # constants (server/profile.py); other devices are answered as without it.
    profile: Path | None = None
    # Share the port with other processes that set it too (SO_REUSEPORT): the workers of
    # `tilesolve-server --processes N` (server/supervisor.py), whose supervisor has checked
    # and reserved the address.
    reuse_port: bool = False

    @property
    def connection_age_grace_s(self) -> float:
        """Seconds a call may still run on a connection past its age: the longest a call
        that sets no deadline may take, or a batch."""
        return max(self.default_deadline_s, self.batch_budget_s)

    @property
    def solvers(self) -> int:
        return self.workers or available_cpus()

    def check(self) -> None:
        """ValueError naming the setting that is out of range."""
        positive = {
            "max_concurrent_rpcs": self.max_concurrent_rpcs,
            "max_batch_size": self.max_batch_size,
            "max_request_bytes": self.max_request_bytes,
            "max_response_bytes": self.max_response_bytes,
            "default_deadline_s": self.default_deadline_s,
            "batch_budget_s": self.batch_budget_s,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0; got {value}")
        if self.workers < 0 or self.cache_bytes < 0:
            raise ValueError("workers and cache_bytes must be >= 0")
        if self.drain_delay_s < 0 or self.grace_s < 0:
            raise ValueError("drain_delay_s and grace_s must be >= 0")
        if not self.max_connection_age_s >= 0:
            raise ValueError(f"max_connection_age_s must be >= 0; got {self.max_connection_age_s}")
        if self.solve_in not in ("processes", "threads"):
            raise ValueError(f"solve_in must be 'processes' or 'threads'; got {self.solve_in!r}")
        if self.max_batch_size * RESERVED_ITEM_BYTES > self.max_response_bytes:
            raise ValueError(
                f"max_response_bytes ({self.max_response_bytes}) must leave "
                f"{RESERVED_ITEM_BYTES} bytes for each of max_batch_size "
                f"({self.max_batch_size}) requests"
            )

    @property
    def address(self) -> str:
        return f"{bracketed(self.host)}:{self.port}"
