"""Server assembly and lifecycle: build a gRPC server with the tilesolve service, health
checking and reflection (`create_server`), and run it until SIGTERM/SIGINT (`serve`).

The server is a `grpc.aio` server on an event loop of its own thread; `TileSolveServer` wraps
it for callers that are not asyncio code (the command line, tests): `start`, `stop(grace)`,
`drain(delay, grace)`. `create_server` returns it bound and unstarted, its `port` the one it
bound, so tests can run a real server on port 0 in-process. Its settings are one
`ServerConfig` (`config.py`).

The drain (`serve`, on SIGTERM or SIGINT): health turns NOT_SERVING while the server keeps
answering for `drain_delay_s` seconds (so a load balancer polling health sees it and stops
sending calls), then the server stops accepting calls, the calls in progress get `grace_s`
seconds to finish, those still running at its end get UNAVAILABLE (their solves are stopped),
the solver processes are stopped, and `serve` returns 0 — within drain_delay_s + grace_s.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from tilesolve.solver import load_catalog
from tilesolve.solver.registry import registrations
from tilesolve.solver.solve import model_version
from tilesolve.v1 import tilesolve_pb2 as pb

from .config import ServerConfig, bracketed
from .logs import THROTTLE, install_throttle
from .profile import load_profile_file
from .service import TileSolveServicer
from .solving import ProcessSolvers, Solvers, ThreadSolvers

logger = logging.getLogger("tilesolve.server")
T = TypeVar("T")
KEEPALIVE_S = 60  # the server pings each connection this often ...
KEEPALIVE_TIMEOUT_S = 20  # ... and drops one whose peer does not answer within this
# A new connection's TLS handshake must end within this (gRPC's default: 120 s, during which a
# silent socket holds a file descriptor); a plaintext one is closed when idle.
HANDSHAKE_TIMEOUT_S = 10

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["TileSolveService"].full_name
HEALTH_SERVICE_NAME: str = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name


def why_not_bindable(host: str, port: int) -> str | None:
    """Why no TCP socket can be bound to (host, port), in the operating system's words, or
    None if one can. As for gRPC, the address is usable if any address `host` resolves to is."""
    try:
        found = socket.getaddrinfo(
            host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        return f"cannot resolve the host {host!r} ({exc.strerror})"
    errors: list[OSError] = []
    for family, kind, proto, _, address in found:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
                probe.bind(address)
                return None
        except OSError as exc:
            errors.append(exc)
    if not errors:
        return f"the host {host!r} resolves to no address"
    if any(e.errno == errno.EADDRINUSE for e in errors):
        return "the address is already in use (another process is listening on that port)"
    reason = errors[0].strerror or str(errors[0])
    if any(e.errno == errno.EADDRNOTAVAIL for e in errors):
        return f"the host is not an address of this machine ({reason})"
    return reason


def _credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    if config.tls_cert is None and config.tls_key is None:
        if config.tls_client_ca is not None:
            raise ValueError("tls_client_ca needs tls_cert and tls_key")
        return None
    if config.tls_cert is None or config.tls_key is None:
        raise ValueError("tls_cert and tls_key go together")
    pair = (config.tls_key.read_bytes(), config.tls_cert.read_bytes())
    client_ca = config.tls_client_ca.read_bytes() if config.tls_client_ca is not None else None
    return grpc.ssl_server_credentials(
        [pair], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def _serialize_response(response: Message | bytes) -> bytes:
    """Responses go out serialized; a cached answer or a batch already is."""
    return response if isinstance(response, bytes) else response.SerializeToString()


def _service_handler(servicer: TileSolveServicer) -> grpc.GenericRpcHandler:
    """The service's method handlers, as the generated `add_..._to_server` builds them, except
    that every method receives its request serialized (the servicer decodes it: garbage is
    INVALID_ARGUMENT) and may answer with serialized bytes."""
    methods = pb.DESCRIPTOR.services_by_name["TileSolveService"].methods
    handlers = {
        method.name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name),
            request_deserializer=None,
            response_serializer=_serialize_response,
        )
        for method in methods
    }
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


class TileSolveServer:
    """A tilesolve gRPC server (grpc.aio) running on an event loop in its own thread."""

    def __init__(self, config: ServerConfig, credentials: grpc.ServerCredentials | None) -> None:
        self.config = config
        self.port = 0  # the port bound (config.port, or the free one port 0 found)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tilesolve-server", daemon=True
        )
        self._stopped = threading.Event()
        self._stopping = False
        self._lock = threading.Lock()
        profile = load_profile_file(config.profile) if config.profile is not None else None
        # A profile's model version salts every cache key (cache.request_key).
        self._key_salt = model_version(profile).encode() if profile is not None else b""
        solvers: Solvers
        if config.solve_in == "processes":
            solvers = ProcessSolvers(config.solvers, profile=profile)
        else:
            solvers = ThreadSolvers(config.solvers, profile)
        self.solvers = solvers
        self._thread.start()
        try:
            self.port = self._call(self._build(credentials))
        except BaseException:
            self._call(self.solvers.close())
            self._end_loop()
            raise

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _build(self, credentials: grpc.ServerCredentials | None) -> int:
        config = self.config
        if isinstance(self.solvers, ProcessSolvers):
            await self.solvers.start()
        self.server = grpc.aio.server(
            # No maximum_concurrent_rpcs: gRPC's counts every service, health checks included;
            # the servicer caps tilesolve calls itself.
            options=[
                # A port another process holds must fail loudly, not be shared (unless this
                # is one of the supervisor's workers, which share it on purpose).
                ("grpc.so_reuseport", 1 if config.reuse_port else 0),
                ("grpc.max_receive_message_length", config.max_request_bytes),
                ("grpc.max_send_message_length", config.max_response_bytes),
                # A peer that stops reading (or vanishes) stops answering pings too: its
                # connection, and the answers stuck in it, are dropped within 80 s.
                ("grpc.keepalive_time_ms", KEEPALIVE_S * 1000),
                ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_S * 1000),
                ("grpc.http2.max_pings_without_data", 0),
                # Streams open at once on one connection, counted until gRPC frees them: a
                # client that opens and resets streams (HTTP/2 rapid reset) holds at most
                # this many, and the rest are refused in gRPC's core, before any of them
                # costs this process a task (docs/reliability.md, "Rapid reset").
                ("grpc.max_concurrent_streams", config.max_streams_per_connection),
                ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_S * 1000),
                *self._connection_age_options(),
                *self._connection_idle_options(),
            ],
        )
        self.servicer = TileSolveServicer(self.solvers, config, self._key_salt)
        self.server.add_generic_rpc_handlers((_service_handler(self.servicer),))
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, HEALTH_SERVICE_NAME, reflection.SERVICE_NAME), self.server
        )
        try:
            if credentials is None:
                port = self.server.add_insecure_port(config.address)
            else:
                port = self.server.add_secure_port(config.address, credentials)
        except RuntimeError as exc:
            why = why_not_bindable(config.host, config.port) or str(exc)
            raise OSError(f"cannot listen on {config.address}: {why}") from None
        if not port:
            why = why_not_bindable(config.host, config.port) or "gRPC could not bind it"
            raise OSError(f"cannot listen on {config.address}: {why}")
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return int(port)

    def _connection_age_options(self) -> list[tuple[str, int]]:
        """GOAWAY after max_connection_age_s (none when 0), then the grace for calls."""
        age_s = self.config.max_connection_age_s
        if age_s <= 0:
            return []
        return [
            ("grpc.max_connection_age_ms", max(int(age_s * 1000), 1)),
            ("grpc.max_connection_age_grace_ms", int(self.config.connection_age_grace_s * 1000)),
        ]

    def _connection_idle_options(self) -> list[tuple[str, int]]:
        """GOAWAY to a connection that carried no call for max_connection_idle_s (none when 0)."""
        idle_s = self.config.max_connection_idle_s
        return [("grpc.max_connection_idle_ms", max(int(idle_s * 1000), 1))] if idle_s > 0 else []

    def start(self) -> None:
        self._call(self.server.start())

    async def _drain(self, delay_s: float, grace_s: float) -> None:
        await self.health.enter_graceful_shutdown()
        if delay_s > 0:
            logger.info("health NOT_SERVING; still answering for %.1f s", delay_s)
            await asyncio.sleep(delay_s)
        # No new calls from now; gRPC waits for the calls in progress (and health Watch
        # streams) up to the grace period, then cuts what is left. It is called once: a
        # second, concurrent stop of a grpc.aio server can crash the process (seen with
        # grpcio 1.81.1).
        stopping = asyncio.ensure_future(self.server.stop(grace_s))
        # Calls in progress get the grace period, less a moment to answer those that do not
        # finish in it with UNAVAILABLE before gRPC would cut them itself. A SolveBatch cut
        # then writes an item for each request it did not reach (1,000 items in the drain
        # test): 0.3 s of a 3 s grace was too little on a loaded machine (1 run in 3 lost the
        # batch's answer to gRPC's cut), so a quarter of the grace, at most 1 s.
        margin = min(1.0, grace_s * 0.25)
        if not await self.servicer.wait_idle(max(grace_s - margin, 0.0)):
            cut = await self.servicer.cancel_calls()
            logger.warning("grace period over: %d calls answered UNAVAILABLE", cut)
        await stopping
        await self.solvers.close()
        THROTTLE.flush()  # what the log throttle left out and has not said yet

    def drain(self, delay_s: float, grace_s: float) -> None:
        """Drain as `serve` does on a signal (see the module's docstring); returns when the
        server has stopped."""
        with self._lock:
            if self._stopping:
                self._stopped.wait()
                return
            self._stopping = True
        try:
            self._call(self._drain(delay_s, grace_s))
        finally:
            self._end_loop()

    def stop(self, grace: float | None = None) -> threading.Event:
        """Stop accepting calls now, give those in progress `grace` seconds (None: none); the
        returned event is set once stopped (`.wait()` blocks until then)."""
        threading.Thread(
            target=self.drain, args=(0.0, grace or 0.0), name="tilesolve-stop", daemon=True
        ).start()
        return self._stopped

    def _end_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
        self._stopped.set()


def create_server(config: ServerConfig) -> TileSolveServer:
    """A bound, unstarted server with the tilesolve service, health and reflection; the port
    it bound is its `port` (the one asked for, or a free one for port 0). Its health status
    is SERVING once the catalog has loaded, NOT_SERVING from the start of a drain."""
    import tilesolve.solver.ip_model  # noqa: F401  (ortools: the first Solve should not pay)

    config.check()
    install_throttle()
    credentials = _credentials(config)
    load_catalog()  # validates every catalog file; a broken one stops startup here
    registrations()  # imports every kernel family's folder (the first Solve should not pay)
    # Asked first, so a busy port is one clear line (gRPC only says "failed to bind" and logs).
    # (A supervisor's worker binds beside the supervisor's reserving socket: checked there.)
    checked = config.port and not config.reuse_port
    why = why_not_bindable(config.host, config.port) if checked else None
    if why is not None:
        raise OSError(f"cannot listen on {config.address}: {why}")
    return TileSolveServer(config, credentials)


def serve(config: ServerConfig) -> int:
    """Run until SIGTERM or SIGINT, then drain; returns the exit status (0).

    The two signals are blocked in every thread (threads inherit the mask, so it is set before
    any exist) and taken with `sigwait` in the main thread. A Python handler would not do:
    CP-SAT installs its own SIGINT handler around each solve and leaves SIGINT at the default
    action afterwards, which would kill the process instead of draining it.
    """
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    try:
        server = create_server(config)
        # Everything loaded so far (ortools, the catalog, the stubs) lives as long as the
        # process: out of the collector's sight, a full collection no longer walks it.
        gc.freeze()
        server.start()
        print(
            f"tilesolve-server listening on {bracketed(config.host)}:{server.port}",
            file=sys.stderr,
            flush=True,
        )
        received = signal.Signals(signal.sigwait(stop_signals))
        started = time.monotonic()
        logger.info(
            "received %s; draining (delay %.1f s, grace %.1f s)",
            received.name,
            config.drain_delay_s,
            config.grace_s,
        )
        server.drain(config.drain_delay_s, config.grace_s)
        logger.info("stopped after %.2f s", time.monotonic() - started)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    return 0
