"""Server assembly and lifecycle: build a gRPC server with the tilesolve service, health
checking and reflection (`create_server`), and run it until SIGTERM/SIGINT (`serve`).

`create_server` returns the server unstarted with the port it bound, so tests can run a real
server on port 0 in-process. `serve` drains on a signal: health turns NOT_SERVING, the server
stops accepting calls, in-flight calls get `grace_s` seconds to finish, and it returns 0.
"""

from __future__ import annotations

import errno
import logging
import signal
import socket
import sys
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf.message import Message
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from tilesolve.solver import load_catalog
from tilesolve.v1 import tilesolve_pb2 as pb

from .profile import load_profile_file
from .service import TileSolveServicer

logger = logging.getLogger("tilesolve.server")

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["TileSolveService"].full_name
HEALTH_SERVICE_NAME: str = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name


@dataclass(frozen=True)
class ServerConfig:
    """Everything `tilesolve-server` can be told (the command line maps onto it one to one)."""

    host: str = "127.0.0.1"
    # 0: any free port (the bound one is returned by create_server).
    port: int = 50051
    # Threads serving calls.
    workers: int = 8
    # Calls in progress beyond this get RESOURCE_EXHAUSTED; None: unlimited.
    max_concurrent_rpcs: int | None = None
    # Cached answers (LRU); 0 disables the cache.
    cache_size: int = 4096
    # The most requests one SolveBatch call may carry.
    max_batch_size: int = 1000
    # Seconds in-flight calls get to finish after SIGTERM/SIGINT.
    grace_s: float = 10.0
    # PEM server certificate chain and private key: serve TLS instead of plaintext.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # PEM CA bundle: require client certificates signed by it (mutual TLS).
    tls_client_ca: Path | None = None
    # A calibration profile (tilesolve-cli calibrate): its device's answers use the fitted
    # constants (server/profile.py).
    profile: Path | None = None

    @property
    def address(self) -> str:
        return f"{_host(self.host)}:{self.port}"


def _host(host: str) -> str:
    """An IPv6 literal in brackets, as gRPC addresses and URLs write it."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _why_not_bindable(host: str, port: int) -> str | None:
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
    """Responses go out serialized; a cached answer already is."""
    return response if isinstance(response, bytes) else response.SerializeToString()


def _service_handler(servicer: TileSolveServicer) -> grpc.GenericRpcHandler:
    """The service's method handlers, as the generated `add_..._to_server` builds them, except
    that Solve receives its request serialized and may answer with serialized bytes, so a
    repeated request is answered from the request cache without a decode or an encode."""
    methods = pb.DESCRIPTOR.services_by_name["TileSolveService"].methods
    handlers = {}
    for method in methods:
        request_type = getattr(pb, method.input_type.name)
        deserialize = None if method.name == "Solve" else request_type.FromString
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            getattr(servicer, method.name),
            request_deserializer=deserialize,
            response_serializer=_serialize_response,
        )
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


def create_server(config: ServerConfig) -> tuple[grpc.Server, int, health.HealthServicer]:
    """A bound, unstarted server with the tilesolve service, health and reflection, the port
    it bound, and its health servicer (SERVING once the catalog has loaded)."""
    import tilesolve.solver.ip_model  # noqa: F401  (ortools: the first Solve should not pay)

    credentials = _credentials(config)
    load_catalog()  # validates every catalog file; a broken one stops startup here
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="tilesolve"),
        maximum_concurrent_rpcs=config.max_concurrent_rpcs,
        # A port another process holds must fail loudly, not be shared.
        options=[("grpc.so_reuseport", 0)],
    )
    profile = load_profile_file(config.profile) if config.profile is not None else None
    servicer = TileSolveServicer(config.cache_size, config.max_batch_size, profile)
    server.add_generic_rpc_handlers((_service_handler(servicer),))
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, HEALTH_SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    # Asked first, so a busy port is one clear line (gRPC only says "failed to bind" and logs).
    why = _why_not_bindable(config.host, config.port) if config.port else None
    if why is not None:
        raise OSError(f"cannot listen on {config.address}: {why}")
    try:
        if credentials is None:
            port = server.add_insecure_port(config.address)
        else:
            port = server.add_secure_port(config.address, credentials)
    except RuntimeError as exc:
        why = _why_not_bindable(config.host, config.port) or str(exc)
        raise OSError(f"cannot listen on {config.address}: {why}") from None
    if not port:
        why = _why_not_bindable(config.host, config.port) or "gRPC could not bind it"
        raise OSError(f"cannot listen on {config.address}: {why}")
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, int(port), health_servicer


def drain(server: grpc.Server, health_servicer: health.HealthServicer, grace_s: float) -> None:
    """Health NOT_SERVING, refuse new calls, give in-flight ones `grace_s` seconds."""
    health_servicer.enter_graceful_shutdown()
    server.stop(grace_s).wait()


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
        server, port, health_servicer = create_server(config)
        server.start()
        print(
            f"tilesolve-server listening on {_host(config.host)}:{port}",
            file=sys.stderr,
            flush=True,
        )
        received = signal.Signals(signal.sigwait(stop_signals))
        logger.info("received %s; draining (grace %.1f s)", received.name, config.grace_s)
        drain(server, health_servicer, config.grace_s)
        logger.info("stopped")
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    return 0
