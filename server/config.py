"""`ServerConfig`: everything a tilesolve server can be told, in one record.

The command line (`main.py`) maps onto it one to one; `create_server` (`app.py`) builds the
server from it, and the servicer (`service.py`) reads its limits from it. It imports nothing
heavy, so `tilesolve-server --help` reads its defaults before grpc or the solver is loaded.
"""

from __future__ import annotations

import math
import os
import ssl
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


def tls_pair_problem(cert: Path | None, key: Path | None) -> str | None:
    """Why the PEM certificate chain `cert` and private key `key` cannot serve TLS (unreadable,
    not PEM, an encrypted key, a key that is not the certificate's), in one line; None when
    they can, or when either is not given. gRPC itself only reports a failure to bind."""
    if cert is None or key is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # An encrypted key gets an empty password and fails: gRPC cannot use one either.
        context.load_cert_chain(cert, key, password=b"")
    except OSError as exc:
        if not isinstance(exc, ssl.SSLError):
            return f"cannot read the TLS files: {exc.strerror or exc}"
        reason = exc.reason or str(exc)
        if reason == "KEY_VALUES_MISMATCH":
            return (
                f"tls_key {str(key)!r} is not the private key of tls_cert {str(cert)!r} "
                "(their public keys differ)"
            )
        return (
            f"tls_cert {str(cert)!r} and tls_key {str(key)!r} are not a usable PEM "
            f"certificate chain and unencrypted private key ({reason})"
        )
    return None


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
    # Seconds a connection may carry no call before the server closes it (HTTP/2 GOAWAY; a
    # gRPC client reconnects on its next call); 0 = never. Idle sockets cannot pile up to the
    # file-descriptor limit.
    max_connection_idle_s: float = 120.0
    # Streams one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS;
    # RFC 9113 recommends no fewer than 100). gRPC counts a stream until it is freed, so a
    # client that opens and resets streams (the rapid-reset attack) holds at most this many;
    # a gRPC client queues its calls beyond it.
    max_streams_per_connection: int = 100
    # Bytes of requests and answers the calls in progress may hold at once (each call its
    # request from arrival and its answer until gRPC has sent it); beyond it
    # RESOURCE_EXHAUSTED. The deployment's memory limit is derived from it (docs/deploy.md).
    max_inflight_bytes: int = 128 * MIB
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
            "max_streams_per_connection": self.max_streams_per_connection,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0; got {value}")
        if self.workers < 0 or self.cache_bytes < 0:
            raise ValueError("workers and cache_bytes must be >= 0")
        if self.drain_delay_s < 0 or self.grace_s < 0:
            raise ValueError("drain_delay_s and grace_s must be >= 0")
        for name in ("max_connection_age_s", "max_connection_idle_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0; got {getattr(self, name)}")
        one_call = self.max_request_bytes + self.max_response_bytes
        if self.max_inflight_bytes < one_call:
            raise ValueError(
                f"max_inflight_bytes ({self.max_inflight_bytes}) must hold one call of the "
                f"largest request and response (max_request_bytes + max_response_bytes = "
                f"{one_call})"
            )
        if self.solve_in not in ("processes", "threads"):
            raise ValueError(f"solve_in must be 'processes' or 'threads'; got {self.solve_in!r}")
        if self.max_batch_size * RESERVED_ITEM_BYTES > self.max_response_bytes:
            raise ValueError(
                f"max_response_bytes ({self.max_response_bytes}) must leave "
                f"{RESERVED_ITEM_BYTES} bytes for each of max_batch_size "
                f"({self.max_batch_size}) requests"
            )

        why = tls_pair_problem(self.tls_cert, self.tls_key)
        if why is not None:
            raise ValueError(why)

    @property
    def address(self) -> str:
        return f"{bracketed(self.host)}:{self.port}"
