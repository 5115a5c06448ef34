"""The `tilesolve.v1.TileSolveService` servicer: decode, solve, encode — within bounds.

Every method is a coroutine on the server's event loop and a thin adapter over
`tilesolve.solver` through the `tilesolve.wire` codec. What runs on the loop is cheap (a cache
hit, the catalog, the memory and occupancy models: tens to hundreds of microseconds); a cold
solve is decoded and validated here, once, and its typed request handed to a solver pool
(`solving.py`) and awaited, so health checks and cache hits never wait behind one, and a
request that is out of range is refused before it queues. The pool encodes the answer once;
the cache keeps those bytes, and a hit sends them again with `cache_hit` and the request's
time limit appended (`wire.cache_hit_response`).

The bounds (`ServerConfig`, `config.py`), each with the status and a message naming it:

- calls in progress at once, beyond `max_concurrent_rpcs`: RESOURCE_EXHAUSTED (health checks
  and reflection are not counted);
- bytes of requests and answers the calls in progress hold, beyond `max_inflight_bytes`
  (`budget.py`): RESOURCE_EXHAUSTED (a SolveBatch answers what fits and the rest in place);
- strings, lists and maps of a request over their sizes (`limits.py`): INVALID_ARGUMENT;
- a call without a deadline gets `default_deadline_s`; DEADLINE_EXCEEDED when it passes;
- a SolveBatch stops solving when its time budget (`batch_budget_s`, or its deadline if
  sooner) or its response (`max_response_bytes`) runs out: the requests left are answered
  in place with DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED, so the answers already found are kept
  and the response stays within the limit; one Solve answer above the limit is
  RESOURCE_EXHAUSTED;
- while the server drains and its grace period ends, calls still running: UNAVAILABLE (a
  SolveBatch keeps the answers it has and answers the rest so in place).

Before a cold solve queues for a solver, every check that needs none runs here
(`tilesolve.solver.solve.check_request`: hardware and kernel names, compatibility, pins), so a
bad request is refused at once, not after the cold solves queued before it.

A call that is cancelled (by its client, or by its deadline) cancels its solve. Errors become
statuses in `errors.py`; answers are cached in `cache.py`; each call writes one structured log
line (method, status code, latency, cache hit, peer) on the `tilesolve.server` logger, aborted
and cancelled calls included; the lines of calls that did not end OK are throttled per method
and code (`logs.py`), since a client decides how many of those there are.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from tilesolve import wire
from tilesolve.solver import (
    CATALOG_VERSION,
    MODEL_VERSION,
    AttentionProblem,
    FieldViolation,
    HardwareSpec,
    InvalidRequestError,
    UnknownHardwareError,
    estimate_memory,
    get_hardware,
    load_catalog,
    occupancy,
)
from tilesolve.solver.apps.portfolio import solve_portfolio
from tilesolve.solver.hardware import RocmDevice
from tilesolve.solver.occupancy import occupancy_device
from tilesolve.solver.occupancy_rocm_query import rocm_occupancy_report
from tilesolve.solver.solve import check_request
from tilesolve.v1 import tilesolve_pb2 as pb

from .budget import CallBytes, InFlightBytes
from .cache import LruCache, discard_unknown_fields, request_key
from .config import RESERVED_ITEM_BYTES, ServerConfig
from .errors import Failure, RequestFailed, abort, bounded, failure_from, with_request_paths
from .limits import request_violations
from .solving import Solvers

logger = logging.getLogger("tilesolve.server")

# Time kept back from a SolveBatch's deadline to encode and send what it has.
BATCH_REPLY_MARGIN_S = 0.2

_DRAINED = "the drain's grace period ended"  # the message of the drain's cancellations
# The bytes the current call holds (each call runs in its own task, with its own context).
_CALL_BYTES: contextvars.ContextVar[CallBytes] = contextvars.ContextVar("call_bytes")


class _Aborted(Exception):
    """The call ends with this failure (raised inside the servicer, turned into a status by
    `rpc` outside every try that could catch grpc's own abort exception)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _outcome_of_cancel(context: grpc.aio.ServicerContext) -> str:
    remaining = context.time_remaining()
    return "DEADLINE_EXCEEDED" if remaining is not None and remaining <= 0 else "CANCELLED"


# Seconds a Portfolio call keeps back from its deadline to encode and send the answer.
PORTFOLIO_REPLY_MARGIN_S = 0.05

Method = Callable[["TileSolveServicer", Any, grpc.aio.ServicerContext], Awaitable[tuple[Any, str]]]


def rpc(request_type: type[Message]) -> Callable[[Method], Callable[..., Awaitable[Any]]]:
    """A servicer method taking its request serialized (garbage is INVALID_ARGUMENT, not
    gRPC's INTERNAL), with the concurrency cap, the drain, failures as statuses and one log
    line: `rpc method=Solve code=OK latency_ms=3.214 cache_hit=false peer=ipv4:127.0.0.1:5123`.
    The method returns (response, cache note)."""

    def decorate(method: Method) -> Callable[..., Awaitable[Any]]:
        name = method.__name__

        @functools.wraps(method)
        async def wrapper(
            self: TileSolveServicer, raw: bytes, context: grpc.aio.ServicerContext
        ) -> Any:
            started = time.perf_counter()
            code, note = "OK", "-"
            try:
                response, note = await self._guarded(method, name, request_type, raw, context)
                return response
            except _Aborted as aborted:
                code = aborted.failure.code.name
                await abort(context, aborted.failure)
            except asyncio.CancelledError:
                code = _outcome_of_cancel(context)
                raise
            finally:
                logger.info(
                    "rpc method=%s code=%s latency_ms=%.3f cache_hit=%s peer=%s",
                    name,
                    code,
                    (time.perf_counter() - started) * 1e3,
                    note,
                    context.peer(),
                    # lines of calls that did not end OK are throttled (logs.py)
                    extra={"throttle": None if code == "OK" else f"{name} {code}"},
                )

        return wrapper

    return decorate


def _memory_request_paths(exc: InvalidRequestError) -> InvalidRequestError:
    """The memory model names bare fields: problem fields live under `problem.`, the tile and
    the kernel at the top of an EstimateMemoryRequest (not under `options.` as in Solve)."""
    return InvalidRequestError(
        [
            FieldViolation(
                f"problem.{v.field}" if v.field in AttentionProblem.model_fields else v.field,
                v.description,
            )
            for v in exc.violations
        ]
    )


def _checked(message: Message) -> None:
    """INVALID_ARGUMENT for a request whose strings, lists or maps are over their sizes."""
    violations = request_violations(message)
    if violations:
        raise InvalidRequestError(violations)


def _failed_item(failure: Failure) -> bytes:
    failure = bounded(failure)
    return wire.failed_item(
        wire.FailedItem(failure.code_number, failure.message, failure.violations)
    )


class TileSolveServicer:
    """Answers `tilesolve.v1.TileSolveService`: cheap calls on the loop, solves in `solvers`."""

    def __init__(self, solvers: Solvers, config: ServerConfig, key_salt: bytes = b"") -> None:
        self.config = config  # its limits are the servicer's bounds
        self.solvers = solvers
        # A calibration profile's model version: every cache key holds it (cache.request_key).
        self.key_salt = key_salt
        # Serialized, proven SolveResponses by canonical request (see cache.py).
        self.cache = LruCache(self.config.cache_bytes)
        self.in_flight = 0
        self.in_flight_bytes = InFlightBytes(self.config.max_inflight_bytes)
        self._calls: set[asyncio.Task[Any]] = set()
        self._closing = False
        catalog = load_catalog()
        listing = wire.HardwareCatalog(
            hardware=tuple(wire.HardwareSummary.of(catalog[name]) for name in sorted(catalog)),
            catalog_version=CATALOG_VERSION,
            model_version=MODEL_VERSION,
            max_batch_size=self.config.max_batch_size,
        )
        self._hardware_list = wire.catalog_to_proto(listing).SerializeToString()

    # ---- bounds and the drain ------------------------------------------------------------

    async def _guarded(
        self,
        method: Method,
        name: str,
        request_type: type[Message],
        raw: bytes,
        context: grpc.aio.ServicerContext,
    ) -> tuple[Any, str]:
        if self._closing:
            raise _Aborted(self._shutting_down())
        cap = self.config.max_concurrent_rpcs
        if self.in_flight >= cap:
            raise _Aborted(
                Failure(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"the server is already answering {cap} calls, its limit "
                    "(max_concurrent_rpcs); retry with backoff",
                )
            )
        share = self.in_flight_bytes.call()
        context.add_done_callback(lambda _: share.end())
        if not share.take_request(len(raw)):
            raise _Aborted(self._over_budget(f"its request of {len(raw)} bytes"))
        try:
            request = request_type.FromString(raw)
        except DecodeError:
            name_of = request_type.DESCRIPTOR.name
            raise _Aborted(
                Failure(grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a {name_of}")
            ) from None
        discard_unknown_fields(request)  # never kept, never echoed, never part of a key
        # The call's own task: gRPC cancels it when the client cancels or the deadline
        # passes (which cancels the solve it waits for), the drain when the grace ends.
        task = asyncio.current_task()
        assert task is not None
        self.in_flight += 1
        self._calls.add(task)
        _CALL_BYTES.set(share)
        try:
            response, note = await method(self, request, context)
            size = len(response) if isinstance(response, bytes) else response.ByteSize()
            # What a SolveBatch held for its items as it went is this answer already.
            if size > share.answer and not share.take_answer(size - share.answer):
                raise _Aborted(self._over_budget(f"its answer of {size} bytes"))
            return response, note
        except asyncio.CancelledError as exc:
            if exc.args == (_DRAINED,):
                task.uncancel()
                raise _Aborted(self._shutting_down()) from None
            raise
        except _Aborted:
            raise
        except Exception as exc:  # every failure becomes a status; none escapes to grpc
            raise _Aborted(failure_from(exc, name)) from None
        finally:
            share.drop_request()
            self._calls.discard(task)
            self.in_flight -= 1

    def _over_budget(self, what: str) -> Failure:
        limit = self.config.max_inflight_bytes
        return Failure(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"the calls in progress already hold {self.in_flight_bytes.held} bytes of requests "
            f"and answers: {what} would pass the server's limit of {limit} bytes "
            "(max_inflight_bytes); retry with backoff",
        )

    @staticmethod
    def _shutting_down() -> Failure:
        return Failure(
            grpc.StatusCode.UNAVAILABLE,
            "the server is shutting down and its grace period ended before this call was "
            "answered; retry (another server, or this one once it is back)",
        )

    async def cancel_calls(self) -> int:
        """End every call in progress with UNAVAILABLE (the end of the drain's grace period);
        returns how many there were. Calls arriving afterwards get UNAVAILABLE too."""
        self._closing = True
        calls = list(self._calls)
        for task in calls:
            task.cancel(_DRAINED)
        if calls:
            await asyncio.wait(calls, timeout=1.0)
        return len(calls)

    async def wait_idle(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the calls in progress to end; True if they did."""
        end = time.monotonic() + timeout
        while self._calls:
            left = end - time.monotonic()
            if left <= 0:
                return False
            await asyncio.wait(list(self._calls), timeout=min(left, 0.05))
        return True

    def _deadline(self, context: grpc.aio.ServicerContext) -> tuple[float, bool]:
        """The call's deadline on time.monotonic(), and whether it is the server's default."""
        remaining = context.time_remaining()
        if remaining is None:
            return time.monotonic() + self.config.default_deadline_s, True
        return time.monotonic() + max(float(remaining), 0.0), False

    def _default_deadline_passed(self) -> RequestFailed:
        seconds = self.config.default_deadline_s
        return RequestFailed(
            Failure(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no answer within {seconds:g} s, the server's deadline for calls that set "
                "none (default_deadline_s); set a deadline on the call",
            )
        )

    # ---- solving -------------------------------------------------------------------------

    async def _solve_one(self, request: pb.SolveRequest, deadline: float) -> tuple[bytes, bool]:
        """One SolveRequest (unknown fields dropped) to its serialized SolveResponse, and
        whether it came from the cache; raises what the request fails with."""
        _checked(request)
        key = request_key(request, self.key_salt)
        cached = self.cache.get(key)
        if cached is not None:
            # The rest of the request is the entry's (the key); only its time limit is new.
            limit = wire.time_limit_from_proto(request.options)
            if limit is not None:
                return wire.cache_hit_response(cached, limit), True
        # Decoded and checked once, here (a fraction of a millisecond): a value out of range,
        # an unknown name, an incompatible dtype or a pin outside its domain is refused at
        # once, not after waiting for a solver behind the cold solves queued before it.
        try:
            call = wire.solve_request_from_proto(request)
        except Exception as exc:
            raise RequestFailed(failure_from(exc, "Solve")) from None
        try:
            check_request(*call)
        except InvalidRequestError as exc:
            raise RequestFailed(failure_from(with_request_paths(exc), "Solve")) from None
        outcome = await self.solvers.run(call, deadline)
        if outcome.failure is not None:
            raise RequestFailed(outcome.failure)
        if outcome.proven:
            self.cache.put(key, outcome.response)
        return outcome.response, False

    @rpc(pb.SolveRequest)
    async def Solve(
        self, request: pb.SolveRequest, context: grpc.aio.ServicerContext
    ) -> tuple[bytes, str]:
        """A repeat is answered from the cache with nothing but protobuf's own decoding and
        encoding."""
        deadline, by_default = self._deadline(context)
        try:
            async with asyncio.timeout(deadline - time.monotonic() if by_default else None):
                response, hit = await self._solve_one(request, deadline)
        except TimeoutError:
            raise self._default_deadline_passed() from None
        if len(response) > self.config.max_response_bytes:
            raise RequestFailed(
                Failure(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"the answer takes {len(response)} bytes, above the server's limit of "
                    f"{self.config.max_response_bytes} bytes per response "
                    "(max_response_bytes); ask for fewer candidates (options.top_k)",
                )
            )
        return response, "true" if hit else "false"

    @rpc(pb.SolveBatchRequest)
    async def SolveBatch(
        self, request: pb.SolveBatchRequest, context: grpc.aio.ServicerContext
    ) -> tuple[bytes, str]:
        count = len(request.requests)
        config = self.config
        if count > config.max_batch_size:
            raise RequestFailed(
                Failure(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"at most {config.max_batch_size} requests per SolveBatch (the server's "
                    f"max_batch_size); got {count}",
                )
            )
        deadline, by_default = self._deadline(context)
        budget = time.monotonic() + config.batch_budget_s
        end = min(budget, deadline if by_default else deadline - BATCH_REPLY_MARGIN_S)
        out_of_time = Failure(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            f"not solved: the SolveBatch ran out of time (its deadline, or the server's "
            f"{config.batch_budget_s:g} s per batch: batch_budget_s); send it again",
        )
        out_of_room = Failure(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"not solved: the answers before it fill the response limit of "
            f"{config.max_response_bytes} bytes (max_response_bytes); send it in another "
            "SolveBatch",
        )
        out_of_memory = Failure(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"not solved: the calls in progress hold the server's limit of "
            f"{config.max_inflight_bytes} bytes of requests and answers (max_inflight_bytes); "
            "send it again later",
        )
        share = _CALL_BYTES.get()
        parts: list[bytes] = []
        used = hits = 0
        cut: Failure | None = None
        for index, one in enumerate(request.requests):
            left_after = count - index - 1
            held = False  # whether the budget holds this item's bytes yet
            if cut is None and time.monotonic() >= end:
                cut = out_of_time
            if cut is not None:
                item = _failed_item(cut)
            else:
                try:
                    async with asyncio.timeout(end - time.monotonic()):
                        response, hit = await self._solve_one(one, end)
                except TimeoutError:
                    cut = out_of_time
                    item = _failed_item(cut)
                except asyncio.CancelledError as exc:
                    if exc.args != (_DRAINED,):
                        raise  # the client is gone: nobody to answer
                    # The drain's grace period ended: keep the answers found, say so for
                    # the rest.
                    task = asyncio.current_task()
                    assert task is not None
                    task.uncancel()
                    cut = self._shutting_down()
                    item = _failed_item(cut)
                except Exception as exc:  # one bad problem must not fail the batch
                    item = _failed_item(failure_from(exc, "SolveBatch"))
                else:
                    hits += hit
                    item = wire.answered_item(response)
                framed = len(wire.batch_entry(item))
                if used + framed + left_after * RESERVED_ITEM_BYTES > config.max_response_bytes:
                    cut = out_of_room
                    item = _failed_item(cut)
                elif cut is None and not (held := share.take_answer(framed)):
                    cut = out_of_memory
                    item = _failed_item(cut)
            part = wire.batch_entry(item)
            if not held:  # an item saying why it is not answered: a few hundred bytes
                share.take_answer(len(part), force=True)
            used += len(part)
            parts.append(part)
        return b"".join(parts), f"{hits}/{count}"

    # ---- hardware ------------------------------------------------------------------------

    @rpc(pb.ListHardwareRequest)
    async def ListHardware(
        self, request: pb.ListHardwareRequest, context: grpc.aio.ServicerContext
    ) -> tuple[bytes, str]:
        return self._hardware_list, "-"

    @rpc(pb.GetHardwareRequest)
    async def GetHardware(
        self, request: pb.GetHardwareRequest, context: grpc.aio.ServicerContext
    ) -> tuple[pb.GetHardwareResponse, str]:
        _checked(request)
        if not request.name.strip():
            raise InvalidRequestError(
                [FieldViolation("name", "required: a catalog name or alias such as 'a100'")]
            )
        try:
            spec = get_hardware(request.name)
        except UnknownHardwareError as exc:
            violation = FieldViolation("name", exc.violations[0].description)
            raise RequestFailed(
                Failure(grpc.StatusCode.NOT_FOUND, violation.description, (violation,))
            ) from None
        except InvalidRequestError as exc:  # an ambiguous name (sm80): this request's `name`
            raise InvalidRequestError(
                [FieldViolation("name", v.description) for v in exc.violations]
            ) from None
        response = pb.GetHardwareResponse(
            hardware=wire.spec_to_proto(spec), catalog_version=CATALOG_VERSION
        )
        return response, "-"

    # ---- portfolios ----------------------------------------------------------------------

    @rpc(pb.PortfolioRequest)
    async def Portfolio(
        self, request: pb.PortfolioRequest, context: grpc.aio.ServicerContext
    ) -> tuple[pb.PortfolioResponse, str]:
        """The portfolio program (solver/portfolio.py) in a thread, so the event loop keeps
        answering; its wall-clock limit never outlives the call."""
        _checked(request)
        portfolio, hardware = wire.portfolio_request_from_proto(request)
        remaining = context.time_remaining()
        if remaining is not None:
            budget = max(float(remaining) - PORTFOLIO_REPLY_MARGIN_S, 1e-3)
            portfolio = portfolio.model_copy(
                update={"time_limit_s": min(portfolio.time_limit_s, budget)}
            )
        answer = await asyncio.to_thread(solve_portfolio, portfolio, hardware)
        return wire.portfolio_to_proto(answer), "-"

    # ---- models --------------------------------------------------------------------------

    @rpc(pb.EstimateMemoryRequest)
    async def EstimateMemory(
        self, request: pb.EstimateMemoryRequest, context: grpc.aio.ServicerContext
    ) -> tuple[pb.EstimateMemoryResponse, str]:
        _checked(request)
        problem, block_m, block_n, hardware, kernel, parameters = wire.memory_request_from_proto(
            request
        )
        spec = get_hardware(hardware) if isinstance(hardware, str) else hardware
        try:
            estimate = estimate_memory(problem, block_m, block_n, spec, kernel, parameters)
        except InvalidRequestError as exc:
            raise _memory_request_paths(exc) from None
        return wire.estimate_to_proto(estimate), "-"

    @rpc(pb.OccupancyRequest)
    async def Occupancy(
        self, request: pb.OccupancyRequest, context: grpc.aio.ServicerContext
    ) -> tuple[pb.OccupancyResponse, str]:
        _checked(request)
        hardware = wire.hardware_from_proto(request.hardware)
        device = hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)
        if isinstance(device, RocmDevice):
            launch = wire.rocm_occupancy_query_from_proto(request, device)
            report = rocm_occupancy_report(device.rocm, launch)
            return wire.rocm_occupancy_to_proto(report), "-"
        spec = occupancy_device(device)
        query = wire.occupancy_query_from_proto(request, spec)
        result = occupancy(
            spec.sm, query.threads, query.regs, query.smem_bytes, query.carveout_percent
        )
        return wire.occupancy_to_proto(result), "-"
