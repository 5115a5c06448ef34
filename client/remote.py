"""Python clients of the tilesolve gRPC service (`tilesolve.v1.TileSolveService`).

    from tilesolve.client.remote import TileSolveClient
    from tilesolve.solver import AttentionProblem

    with TileSolveClient("127.0.0.1:50051") as client:
        answer = client.solve(AttentionProblem(seq_len=4096, head_dim=128), "a100")
        print(answer.candidates[0].block_m, client.last_cache_hit)

Where to connect (`tilesolve.client.targets` has the grammar): one `HOST:PORT` or
`[IPV6]:PORT` is one server, handed to gRPC as it is; several replicas are
`"IP:PORT,IP:PORT,..."` (or a sequence of addresses: IP addresses of one family, each once,
fixed) or `"dns:///NAME:PORT"` (every address of NAME, resolved again when a connection ends,
at most every `RESOLVE_MIN_S`). Replicas are balanced by gRPC's `round_robin` policy with
client-side health checking: a replica whose `grpc.health.v1` status for the service is not
SERVING (a draining server) gets no call, one that dies drops out with its connection, and a
call it cut off is retried on another. A list that cannot be used raises `TargetError` (a
ValueError) naming the entry.

Answers are the solver's own types (`SolveAnswer`, `HardwareSpec`, `Occupancy`,
`MemoryEstimate`), decoded and validated by `tilesolve.wire` (the server encodes with the same
module), so code written against the in-process solver works unchanged; the catalog listing
is `wire`'s `HardwareCatalog` of `HardwareSummary`s.
Failures raise a `TilesolveRpcError` subclass chosen by the gRPC status code, carrying the
server's field violations (`problem.head_dim`, ...) from the `google.rpc.BadRequest` detail.

Riding through a restart (the defaults, all documented in docs/cli.md, "Remote mode"):

- `timeout_s` (30 s) bounds a whole method call, waiting and retries included: it is the
  call's gRPC deadline.
- `wait_for_ready` (on): a call made while the server cannot be reached waits for it, up to
  `ready_timeout_s` (10 s) and never past the deadline, then fails with UnavailableError
  ("no connection within 10 s: <gRPC's reason>"); so does the first call after the channel
  lost its connection (the server went away since the last answer); a call already waiting
  on a connection that breaks waits for the next one. With a list of replicas, a wait that
  reaches only replicas whose health is not SERVING fails the same way (the round robin
  would send them nothing). Off, a call to an unreachable server fails at once.
- Retries are gRPC's own (a service config `retryPolicy`, so they happen below this module,
  with gRPC's jittered exponential backoff): a call that fails with UNAVAILABLE, e.g. because
  the server was killed while answering it, is tried again up to `retries` (4) more times
  (gRPC allows 5 attempts in all), after a random wait of up to `backoff_s` (0.2 s), then up
  to twice that, and so on, at most `max_backoff_s` (2 s). Every method is idempotent; no
  other status is retried.
- The channel reconnects to a server that comes back within `RECONNECT_MAX_S` (1 s).
- With replicas, the retry policy, wait_for_ready and ready_timeout_s are the same: a retry
  goes to another replica if one is serving, and a call waits while none is.

`AsyncTileSolveClient` has the same methods as coroutines over `grpc.aio`; create it inside
the running event loop. This module never imports `tilesolve.server`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, cast

import grpc
import grpc.aio
from google.protobuf.message import Message
from google.rpc import status_pb2
from grpc_health.v1 import health_pb2_grpc
from grpc_health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse

from tilesolve import wire
from tilesolve.solver import (
    AttentionProblem,
    FieldViolation,
    HardwareSpec,
    MemoryEstimate,
    SolveAnswer,
    SolveOptions,
)
from tilesolve.solver.occupancy import Occupancy
from tilesolve.solver.occupancy_rocm_query import RocmOccupancyQuery, RocmOccupancyReport
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc
from tilesolve.wire import HardwareCatalog, HardwareSummary, SolveRequestTuple

from .targets import RESOLVE_MIN_S, Target, TargetError, parse_target

__all__ = [
    "AsyncTileSolveClient",
    "DeadlineError",
    "HardwareCatalog",
    "HardwareSummary",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "ResourceExhaustedError",
    "SolveRequestTuple",
    "TargetError",
    "TileSolveClient",
    "TilesolveRpcError",
    "UnavailableError",
    "client_target",
    "error_from_rpc",
]

_DETAILS_KEY = "grpc-status-details-bin"
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a server may be told to send more than gRPC's 4 MiB
SERVICE = pb.DESCRIPTOR.services_by_name["TileSolveService"].full_name

# The client's defaults (see the module's docstring and docs/cli.md's "Remote mode").
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_READY_TIMEOUT_S = 10.0
DEFAULT_RETRIES = 4  # gRPC's retry policy allows 5 attempts at most
DEFAULT_BACKOFF_S = 0.2
DEFAULT_MAX_BACKOFF_S = 2.0
BACKOFF_MULTIPLIER = 2.0
MAX_RETRIES = 4
RECONNECT_MIN_S = 0.1  # first reconnection attempt after a lost connection
RECONNECT_MAX_S = 1.0  # the longest wait between reconnection attempts
_READY = grpc.ChannelConnectivity.READY.value[0]  # the core's number for READY
_WHY_TIMEOUT_S = 1.0  # the check that asks gRPC why a server cannot be reached
_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# A request is kept for a retry up to this size (the server accepts 4 MiB by default).
_RETRY_BUFFER_BYTES = 8 * 1024 * 1024


# ---- errors -------------------------------------------------------------------------------


class TilesolveRpcError(Exception):
    """A call the server (or the channel) ended with a non-OK status.

    `code` is the `grpc.StatusCode`, `message` the status message, `violations` the field
    violations of a `google.rpc.BadRequest` detail (empty when there is none), `target` the
    server address the client was talking to.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        violations: Sequence[FieldViolation] = (),
        target: str = "",
    ):
        self.code = code
        self.message = message
        self.violations = list(violations)
        self.target = target
        super().__init__(f"{code.name}: {message}")


class InvalidArgumentError(TilesolveRpcError):
    """INVALID_ARGUMENT: `violations` names every bad field of the request."""


class NotFoundError(TilesolveRpcError):
    """NOT_FOUND: unknown hardware; the message lists the known names."""


class DeadlineError(TilesolveRpcError):
    """DEADLINE_EXCEEDED: the call's deadline (or the solver's time limit) passed first."""


class UnavailableError(TilesolveRpcError):
    """UNAVAILABLE: the server could not be reached (after every retry)."""


class ResourceExhaustedError(TilesolveRpcError):
    """RESOURCE_EXHAUSTED: a server limit (batch size, concurrent calls) was hit."""


class InternalError(TilesolveRpcError):
    """INTERNAL: a bug on the server side."""


_ERROR_FOR_CODE: dict[grpc.StatusCode, type[TilesolveRpcError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.INTERNAL: InternalError,
}
_CODE_FOR_NUMBER: dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}


def _make_error(
    code: grpc.StatusCode, message: str, violations: Sequence[FieldViolation], target: str
) -> TilesolveRpcError:
    return _ERROR_FOR_CODE.get(code, TilesolveRpcError)(code, message, violations, target)


def _violations_from_trailers(trailers: Iterable[tuple[str, Any]] | None) -> list[FieldViolation]:
    """Field violations of the `google.rpc.BadRequest` in a call's rich status, if any."""
    out: list[FieldViolation] = []
    for key, value in trailers or ():
        if key == _DETAILS_KEY and isinstance(value, bytes):
            out.extend(wire.violations_from_status(status_pb2.Status.FromString(value)))
    return out


def error_from_rpc(exc: grpc.RpcError, target: str = "") -> TilesolveRpcError:
    """The typed error for a failed call (sync or `grpc.aio`), with its field violations."""
    code_fn = getattr(exc, "code", None)
    code = code_fn() if callable(code_fn) else None
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    details_fn = getattr(exc, "details", None)
    message = (details_fn() if callable(details_fn) else None) or code.name
    trailers_fn = getattr(exc, "trailing_metadata", None)
    try:
        violations = _violations_from_trailers(trailers_fn() if callable(trailers_fn) else None)
    except Exception:  # a malformed detail must not hide the status itself
        violations = []
    return _make_error(code, str(message), violations, target)


def _batch_results(
    response: pb.SolveBatchResponse, expected: int, target: str
) -> list[SolveAnswer | TilesolveRpcError]:
    return [
        item[0] if isinstance(item, tuple) else item
        for item in _batch_results_with_meta(response, expected, target)
    ]


def _batch_results_with_meta(
    response: pb.SolveBatchResponse, expected: int, target: str
) -> list[tuple[SolveAnswer, bool] | TilesolveRpcError]:
    """Each item's answer and whether the server's cache answered it, or its error."""
    if len(response.items) != expected:
        raise InternalError(
            grpc.StatusCode.INTERNAL,
            f"SolveBatch answered {len(response.items)} items for {expected} requests",
            target=target,
        )
    out: list[tuple[SolveAnswer, bool] | TilesolveRpcError] = []
    for item in wire.batch_items_from_proto(response):
        if isinstance(item, wire.FailedItem):
            code = _CODE_FOR_NUMBER.get(item.code, grpc.StatusCode.UNKNOWN)
            out.append(_make_error(code, item.message or code.name, item.violations, target))
        else:
            out.append(item)
    return out


# ---- channels and retries -----------------------------------------------------------------


def service_config(
    retries: int, backoff_s: float, max_backoff_s: float, *, balanced: bool = False
) -> str:
    """The gRPC service config (JSON) of the client's retry policy for TileSolveService: up to
    1 + `retries` attempts, retrying UNAVAILABLE only, with gRPC's jittered exponential
    backoff from `backoff_s` up to `max_backoff_s`. `balanced` (several replicas) adds the
    `round_robin` policy and client-side health checking of the service: a replica whose
    `grpc.health.v1` status for it is not SERVING gets no calls until it is again."""
    method: dict[str, Any] = {"name": [{"service": SERVICE}]}
    if retries > 0:
        method["retryPolicy"] = {
            "maxAttempts": retries + 1,
            "initialBackoff": f"{max(backoff_s, 0.001):.3f}s",
            "maxBackoff": f"{max(max_backoff_s, backoff_s, 0.001):.3f}s",
            "backoffMultiplier": BACKOFF_MULTIPLIER,
            "retryableStatusCodes": ["UNAVAILABLE"],
        }
    config: dict[str, Any] = {"methodConfig": [method]}
    if balanced:
        config["loadBalancingConfig"] = [{"round_robin": {}}]
        config["healthCheckConfig"] = {"serviceName": SERVICE}
    return json.dumps(config)


def client_target(address: str | Sequence[str]) -> Target:
    """The channel target of a client's address (`tilesolve.client.targets`). One address
    without a comma or `dns:` is handed to gRPC as it is, as before; a list, a sequence and
    `dns:///` are checked (TargetError, a ValueError, naming the entry at fault)."""
    if isinstance(address, str):
        if "," not in address and not address.lower().startswith("dns:"):
            return Target(text=address, grpc_target=address, balanced=False)
    elif len(address) == 1 and isinstance(address[0], str):
        return client_target(address[0])
    return parse_target(address)


def _channel_options(
    retries: int,
    backoff_s: float,
    max_backoff_s: float,
    server_name_override: str | None,
    target: Target,
) -> list[tuple[str, Any]]:
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 1),
        (
            "grpc.service_config",
            service_config(retries, backoff_s, max_backoff_s, balanced=target.balanced),
        ),
        ("grpc.per_rpc_retry_buffer_size", _RETRY_BUFFER_BYTES),
        # Find a restarted server quickly: gRPC's own reconnection backoff starts at 1 s and
        # grows to 120 s, far longer than a restart.
        ("grpc.initial_reconnect_backoff_ms", int(RECONNECT_MIN_S * 1000)),
        ("grpc.min_reconnect_backoff_ms", int(RECONNECT_MIN_S * 1000)),
        ("grpc.max_reconnect_backoff_ms", int(RECONNECT_MAX_S * 1000)),
        # A dns:/// name is resolved again when a connection ends; gRPC allows that every
        # 30 s at most by default, too slow to find the replicas of a rolling restart.
        ("grpc.dns_min_time_between_resolutions_ms", int(RESOLVE_MIN_S * 1000)),
    ]
    if server_name_override:
        options.append(("grpc.ssl_target_name_override", server_name_override))
    elif target.authority:
        # An ipv4:/ipv6: list has no name of its own: its first entry is the authority that
        # TLS checks every replica's certificate against.
        options.append(("grpc.default_authority", target.authority))
    return options


def _credentials(
    tls: bool, root_ca: bytes | None, client_cert: bytes | None, client_key: bytes | None
) -> Any:
    """Channel credentials, or None for a plaintext channel."""
    if (client_cert is None) != (client_key is None):
        raise ValueError("client_cert and client_key go together (mutual TLS needs both)")
    if not (tls or root_ca is not None or client_cert is not None):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=root_ca, private_key=client_key, certificate_chain=client_cert
    )


def _stub(channel: Any) -> Any:
    """The generated stub (untyped) over a sync or `grpc.aio` channel."""
    stub_class: Any = pb_grpc.TileSolveServiceStub
    return stub_class(channel)


class _ClientBase:
    """Settings, deadlines and request/response conversion shared by both clients."""

    # The channel module: grpc (blocking) or grpc.aio; set by each client class.
    _channels: Any = grpc

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        wait_for_ready: bool = True,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        retries: int = DEFAULT_RETRIES,
        backoff_s: float = DEFAULT_BACKOFF_S,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
        tls: bool = False,
        root_ca: bytes | None = None,
        client_cert: bytes | None = None,
        client_key: bytes | None = None,
        server_name_override: str | None = None,
    ):
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0; got {timeout_s}")
        if not ready_timeout_s >= 0:
            raise ValueError(f"ready_timeout_s must be >= 0; got {ready_timeout_s}")
        if not 0 <= retries <= MAX_RETRIES:
            raise ValueError(
                f"retries must be from 0 to {MAX_RETRIES} (gRPC allows {MAX_RETRIES + 1} "
                f"attempts); got {retries}"
            )
        if not (backoff_s > 0 and max_backoff_s > 0):
            raise ValueError("backoff_s and max_backoff_s must be > 0")
        parsed = client_target(target)
        # The address as given (a list joined with commas): errors and messages name it.
        self.target = parsed.text
        self.balanced = parsed.balanced
        self.timeout_s = timeout_s
        self.wait_for_ready = wait_for_ready
        self.ready_timeout_s = ready_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        # Whether the last `solve` was answered from the server's cache.
        self.last_cache_hit = False
        credentials = _credentials(tls, root_ca, client_cert, client_key)
        options = _channel_options(retries, backoff_s, max_backoff_s, server_name_override, parsed)
        channels, where = self._channels, parsed.grpc_target
        if credentials is None:
            self._channel = channels.insecure_channel(where, options=options)
        else:
            self._channel = channels.secure_channel(where, credentials, options=options)
        self._stub = _stub(self._channel)
        self._health: Any = health_pb2_grpc.HealthStub(self._channel)
        # Whether the server answered the last call (any status it sent itself): then a call
        # needs no reachability probe first, as long as the channel is still connected.
        self._reached = False

    def _deadline(self, timeout_s: float | None) -> float:
        budget = self.timeout_s if timeout_s is None else timeout_s
        if not budget > 0:
            raise ValueError(f"timeout_s must be > 0; got {budget}")
        return time.monotonic() + budget

    def _needs_probe(self) -> bool:
        """A call first waits (at most ready_timeout_s) for a connection when the server has
        not answered yet, or when the channel has none now (the server went away since)."""
        return self.wait_for_ready and not (self._reached and self._connected())

    def _connected(self) -> bool:
        """Whether the channel has a connection now (READY)."""
        raise NotImplementedError

    def _note(self, error: TilesolveRpcError | None) -> None:
        """After a call: a status from the server proves it reachable; UNAVAILABLE and a
        passed deadline leave it in doubt."""
        self._reached = error is None or error.code not in _UNREACHABLE

    def _ready_wait(self, deadline: float) -> float:
        """How long a call may wait for the server to become reachable."""
        return max(min(self.ready_timeout_s, deadline - time.monotonic()), 0.0)

    def _refuse_not_serving(self, answer: Any, waited: float) -> None:
        """A list of replicas is reachable only through a SERVING one: the round-robin policy
        sends no call to the others. A probe that reached a replica before its client-side
        health check had reported it NOT_SERVING (a race between a new channel's first
        connection and its first health answer) proves nothing, so the call fails now as
        unreachable rather than waiting out its deadline for a replica that will not take it.
        One address is one server, asked whatever its health (a draining server answers)."""
        if self.balanced and answer.status != HealthCheckResponse.SERVING:
            raise self._unreachable(waited, None)

    def _unreachable(self, waited: float, why: grpc.RpcError | None) -> UnavailableError:
        detail = ""
        if why is not None:
            details = why.details() if callable(getattr(why, "details", None)) else None
            detail = f": {details or why}"
        return UnavailableError(
            grpc.StatusCode.UNAVAILABLE,
            f"no connection within {waited:g} s{detail}",
            target=self.target,
        )


# ---- the synchronous client ---------------------------------------------------------------


class TileSolveClient(_ClientBase):
    """A blocking client; use it as a context manager (or call `close()`)."""

    _channels = grpc

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _connected(self) -> bool:
        # A blocking grpc.Channel tells its state only through `subscribe`, whose polling
        # thread outlives `close()` and then raises; its core channel answers at once (as
        # grpc's own _channel module asks it). Without that, assume connected: the call then
        # waits up to its deadline, as it would have.
        check = getattr(getattr(self._channel, "_channel", None), "check_connectivity_state", None)
        if check is None:
            return True
        return bool(check(False) == _READY)

    def _probe(self, deadline: float) -> None:
        """Wait up to ready_timeout_s (and never past the deadline) for the server to be
        reachable: a health check that waits for a connection. UnavailableError if it is not,
        with gRPC's own word on why (from one more check that does not wait)."""
        wait = self._ready_wait(deadline)
        try:
            answer = self._health.Check(
                HealthCheckRequest(), timeout=max(wait, 0.001), wait_for_ready=True
            )
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                try:
                    self._health.Check(HealthCheckRequest(), timeout=_WHY_TIMEOUT_S)
                except grpc.RpcError as why:
                    if why.code() in _UNREACHABLE:
                        raise self._unreachable(wait, why) from None
        else:
            self._refuse_not_serving(answer, wait)
        self._reached = True  # any answer, even "unimplemented", came from the server

    def _call(self, method: str, request: Message, timeout_s: float | None) -> Any:
        deadline = self._deadline(timeout_s)
        if self._needs_probe():
            self._probe(deadline)
        rpc = getattr(self._stub, method)
        try:
            response = rpc(
                request,
                timeout=max(deadline - time.monotonic(), 0.001),
                wait_for_ready=self.wait_for_ready,
            )
        except grpc.RpcError as exc:
            error = error_from_rpc(exc, self.target)
            self._note(error)
            raise error from None
        self._note(None)
        return response

    def solve_with_meta(
        self,
        problem: AttentionProblem,
        hardware: str | HardwareSpec,
        options: SolveOptions | None = None,
        *,
        timeout_s: float | None = None,
    ) -> tuple[SolveAnswer, bool]:
        """The answer, and whether the server answered it from its cache."""
        request = wire.solve_request_to_proto(problem, hardware, options)
        response = cast(pb.SolveResponse, self._call("Solve", request, timeout_s))
        answer, cache_hit = wire.answer_from_proto(response)
        self.last_cache_hit = cache_hit
        return answer, cache_hit

    def solve(
        self,
        problem: AttentionProblem,
        hardware: str | HardwareSpec,
        options: SolveOptions | None = None,
        *,
        timeout_s: float | None = None,
    ) -> SolveAnswer:
        """Rank the tile configurations of one problem (an infeasible one is an answer)."""
        return self.solve_with_meta(problem, hardware, options, timeout_s=timeout_s)[0]

    def solve_batch(
        self, requests: Sequence[SolveRequestTuple], *, timeout_s: float | None = None
    ) -> list[SolveAnswer | TilesolveRpcError]:
        """One answer per request, in order; a request that failed is its error, in place."""
        request = wire.batch_request_to_proto(requests)
        response = cast(pb.SolveBatchResponse, self._call("SolveBatch", request, timeout_s))
        return _batch_results(response, len(requests), self.target)

    def solve_batch_with_meta(
        self, requests: Sequence[SolveRequestTuple], *, timeout_s: float | None = None
    ) -> list[tuple[SolveAnswer, bool] | TilesolveRpcError]:
        """`solve_batch`, each answer with whether the server's cache answered it."""
        request = wire.batch_request_to_proto(requests)
        response = cast(pb.SolveBatchResponse, self._call("SolveBatch", request, timeout_s))
        return _batch_results_with_meta(response, len(requests), self.target)

    def hardware_catalog(self, *, timeout_s: float | None = None) -> HardwareCatalog:
        response = self._call("ListHardware", pb.ListHardwareRequest(), timeout_s)
        return wire.catalog_from_proto(cast(pb.ListHardwareResponse, response))

    def hardware(self, *, timeout_s: float | None = None) -> list[HardwareSummary]:
        """The server's catalog, one summary per device."""
        return list(self.hardware_catalog(timeout_s=timeout_s).hardware)

    def hardware_spec(self, name: str, *, timeout_s: float | None = None) -> HardwareSpec:
        """One catalog entry in full (a name or alias, case-insensitive)."""
        response = self._call("GetHardware", pb.GetHardwareRequest(name=name), timeout_s)
        return wire.spec_from_proto(cast(pb.GetHardwareResponse, response).hardware)

    def occupancy(
        self,
        hardware: str | HardwareSpec,
        threads: int,
        regs: int,
        smem_bytes: int,
        carveout_percent: int | None = None,
        *,
        timeout_s: float | None = None,
    ) -> Occupancy:
        """NVIDIA's occupancy calculation for one launch, computed by the server."""
        request = wire.occupancy_request_to_proto(
            hardware, threads, regs, smem_bytes, carveout_percent
        )
        response = self._call("Occupancy", request, timeout_s)
        return wire.occupancy_from_proto(cast(pb.OccupancyResponse, response))

    def rocm_occupancy(
        self,
        hardware: str | HardwareSpec,
        query: RocmOccupancyQuery,
        *,
        timeout_s: float | None = None,
    ) -> RocmOccupancyReport:
        """AMD's occupancy of one launch on a rocm device, computed by the server."""
        request = wire.rocm_occupancy_request_to_proto(hardware, query)
        response = self._call("Occupancy", request, timeout_s)
        return wire.rocm_occupancy_from_proto(cast(pb.OccupancyResponse, response))

    def estimate_memory(
        self,
        problem: AttentionProblem,
        block_m: int,
        block_n: int,
        hardware: str | HardwareSpec | None = None,
        kernel: str | None = None,
        parameters: Mapping[str, int] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> MemoryEstimate:
        """The memory model of one problem and tile, computed by the server (the roofline too
        when `hardware` is given, `parameters` fixing the family's parameters); equal to
        `tilesolve.solver.estimate_memory`."""
        request = wire.memory_request_to_proto(
            problem, block_m, block_n, hardware, kernel, parameters
        )
        response = self._call("EstimateMemory", request, timeout_s)
        return wire.estimate_from_proto(cast(pb.EstimateMemoryResponse, response))


# ---- the asyncio client -------------------------------------------------------------------


class AsyncTileSolveClient(_ClientBase):
    """The same client over `grpc.aio`; create it inside the running loop, `async with` it."""

    _channels = grpc.aio

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    def _connected(self) -> bool:
        state = self._channel.get_state(try_to_connect=False)
        return bool(state is grpc.ChannelConnectivity.READY)

    async def _probe(self, deadline: float) -> None:
        """As TileSolveClient._probe."""
        wait = self._ready_wait(deadline)
        try:
            answer = await self._health.Check(
                HealthCheckRequest(), timeout=max(wait, 0.001), wait_for_ready=True
            )
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                try:
                    await self._health.Check(HealthCheckRequest(), timeout=_WHY_TIMEOUT_S)
                except grpc.RpcError as why:
                    if why.code() in _UNREACHABLE:
                        raise self._unreachable(wait, why) from None
        else:
            self._refuse_not_serving(answer, wait)
        self._reached = True

    async def _call(self, method: str, request: Message, timeout_s: float | None) -> Any:
        deadline = self._deadline(timeout_s)
        if self._needs_probe():
            await self._probe(deadline)
        rpc: Callable[..., Awaitable[Any]] = getattr(self._stub, method)
        try:
            response = await rpc(
                request,
                timeout=max(deadline - time.monotonic(), 0.001),
                wait_for_ready=self.wait_for_ready,
            )
        except grpc.RpcError as exc:
            error = error_from_rpc(exc, self.target)
            self._note(error)
            raise error from None
        self._note(None)
        return response

    async def solve_with_meta(
        self,
        problem: AttentionProblem,
        hardware: str | HardwareSpec,
        options: SolveOptions | None = None,
        *,
        timeout_s: float | None = None,
    ) -> tuple[SolveAnswer, bool]:
        request = wire.solve_request_to_proto(problem, hardware, options)
        response = cast(pb.SolveResponse, await self._call("Solve", request, timeout_s))
        answer, cache_hit = wire.answer_from_proto(response)
        self.last_cache_hit = cache_hit
        return answer, cache_hit

    async def solve(
        self,
        problem: AttentionProblem,
        hardware: str | HardwareSpec,
        options: SolveOptions | None = None,
        *,
        timeout_s: float | None = None,
    ) -> SolveAnswer:
        return (await self.solve_with_meta(problem, hardware, options, timeout_s=timeout_s))[0]

    async def solve_batch(
        self, requests: Sequence[SolveRequestTuple], *, timeout_s: float | None = None
    ) -> list[SolveAnswer | TilesolveRpcError]:
        response = await self._call("SolveBatch", wire.batch_request_to_proto(requests), timeout_s)
        return _batch_results(cast(pb.SolveBatchResponse, response), len(requests), self.target)

    async def hardware_catalog(self, *, timeout_s: float | None = None) -> HardwareCatalog:
        response = await self._call("ListHardware", pb.ListHardwareRequest(), timeout_s)
        return wire.catalog_from_proto(cast(pb.ListHardwareResponse, response))

    async def hardware(self, *, timeout_s: float | None = None) -> list[HardwareSummary]:
        return list((await self.hardware_catalog(timeout_s=timeout_s)).hardware)

    async def hardware_spec(self, name: str, *, timeout_s: float | None = None) -> HardwareSpec:
        response = await self._call("GetHardware", pb.GetHardwareRequest(name=name), timeout_s)
        return wire.spec_from_proto(cast(pb.GetHardwareResponse, response).hardware)

    async def occupancy(
        self,
        hardware: str | HardwareSpec,
        threads: int,
        regs: int,
        smem_bytes: int,
        carveout_percent: int | None = None,
        *,
        timeout_s: float | None = None,
    ) -> Occupancy:
        request = wire.occupancy_request_to_proto(
            hardware, threads, regs, smem_bytes, carveout_percent
        )
        response = await self._call("Occupancy", request, timeout_s)
        return wire.occupancy_from_proto(cast(pb.OccupancyResponse, response))

    async def rocm_occupancy(
        self,
        hardware: str | HardwareSpec,
        query: RocmOccupancyQuery,
        *,
        timeout_s: float | None = None,
    ) -> RocmOccupancyReport:
        request = wire.rocm_occupancy_request_to_proto(hardware, query)
        response = await self._call("Occupancy", request, timeout_s)
        return wire.rocm_occupancy_from_proto(cast(pb.OccupancyResponse, response))

    async def estimate_memory(
        self,
        problem: AttentionProblem,
        block_m: int,
        block_n: int,
        hardware: str | HardwareSpec | None = None,
        kernel: str | None = None,
        parameters: Mapping[str, int] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> MemoryEstimate:
        request = wire.memory_request_to_proto(
            problem, block_m, block_n, hardware, kernel, parameters
        )
        response = await self._call("EstimateMemory", request, timeout_s)
        return wire.estimate_from_proto(cast(pb.EstimateMemoryResponse, response))
