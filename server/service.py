"""The `tilesolve.v1.TileSolveService` servicer: decode, solve, encode — nothing more.

Every method is a thin adapter over `tilesolve.solver` through the `tilesolve.wire` codec.
Errors become statuses in `errors.py`; answers are cached in `cache.py`; each call writes one
structured log line (method, status code, latency, cache hit, peer) on the `tilesolve.server`
logger, aborted calls included.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import grpc
from google.protobuf.message import DecodeError

from tilesolve import wire
from tilesolve.solver import (
    CATALOG_VERSION,
    MODEL_VERSION,
    AttentionProblem,
    CudaDevice,
    FieldViolation,
    HardwareSpec,
    InvalidRequestError,
    SolveOptions,
    Status,
    UnknownHardwareError,
    estimate_memory,
    get_hardware,
    load_catalog,
    occupancy,
    solve,
)
from tilesolve.solver.portfolio import solve_portfolio
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from .cache import LruCache, answer_key
from .errors import Failure, RequestFailed, abort, failure_from, with_request_paths
from .profile import with_profile

logger = logging.getLogger("tilesolve.server")

# Time kept back from the call's deadline to validate, explain, encode and send the answer:
# a fixed part plus a part per requested candidate, seconds.
DEADLINE_MARGIN_S = 0.05
DEADLINE_MARGIN_PER_CANDIDATE_S = 0.002
# Occupancy request bounds beyond the device's own limits.
MAX_ISA_REGS = 255  # registers one thread can address
MAX_SMEM_BYTES = 1 << 24  # 16 MiB: beyond any shared memory a block can have

S = TypeVar("S")
Q = TypeVar("Q")
R = TypeVar("R")


def _cache_note(response: object) -> str:
    if isinstance(response, bytes):  # a serialized answer straight from the request cache
        return "true"
    if isinstance(response, pb.SolveResponse):
        return "true" if response.cache_hit else "false"
    if isinstance(response, pb.SolveBatchResponse):
        hits = sum(1 for item in response.items if item.response.cache_hit)
        return f"{hits}/{len(response.items)}"
    return "-"


def _outcome(context: grpc.ServicerContext, failed: bool) -> str:
    """The status the client gets: the aborted code, or OK unless the call ended meanwhile."""
    code = context.code()
    if code is not None:
        return str(code.name)
    if failed:
        return "UNKNOWN"
    if not context.is_active():  # the client cancelled, or its deadline passed
        return "DEADLINE_EXCEEDED" if context.time_remaining() == 0 else "CANCELLED"
    return "OK"


def logged(
    method: Callable[[S, Q, grpc.ServicerContext], R],
) -> Callable[[S, Q, grpc.ServicerContext], R]:
    """Write one line per call: `rpc method=Solve code=OK latency_ms=3.214 cache_hit=false
    peer=ipv4:127.0.0.1:51234` — also when the call is aborted."""
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: S, request: Q, context: grpc.ServicerContext) -> R:
        started = time.perf_counter()
        response: R | None = None
        failed = True
        try:
            response = method(self, request, context)
            failed = False
            return response
        finally:
            code_name = _outcome(context, failed)
            logger.info(
                "rpc method=%s code=%s latency_ms=%.3f cache_hit=%s peer=%s",
                name,
                code_name,
                (time.perf_counter() - started) * 1e3,
                _cache_note(response),
                context.peer(),
            )

    return wrapper


def _answer(context: grpc.ServicerContext, method: str, compute: Callable[[], R]) -> R:
    """`compute()`, or the call aborted with the status its exception maps to."""
    try:
        return compute()
    except Exception as exc:  # every failure becomes a status; none escapes to grpc
        failure = failure_from(exc, method)
    abort(context, failure)


def _time_limit(options: SolveOptions, context: grpc.ServicerContext) -> float:
    """The CP-SAT limit: the request's, or the call's remaining time less a margin if shorter."""
    remaining = context.time_remaining()
    if remaining is None:
        return options.time_limit_s
    margin = DEADLINE_MARGIN_S + DEADLINE_MARGIN_PER_CANDIDATE_S * options.top_k
    budget = float(remaining) - margin
    if budget <= 0:
        raise RequestFailed(
            Failure(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"the call's deadline leaves {max(float(remaining), 0.0) * 1e3:.1f} ms, less "
                f"than the {margin * 1e3:.0f} ms the server needs to answer; allow more time",
            )
        )
    return min(options.time_limit_s, budget)


def _summary(spec: HardwareSpec) -> pb.HardwareSummary:
    return pb.HardwareSummary(
        name=spec.name,
        display_name=spec.display_name,
        vendor=spec.vendor,
        arch=spec.arch,
        compute_capability=spec.sm.compute_capability if isinstance(spec, CudaDevice) else "",
        compute_units=spec.compute_units,
        default_kernel=spec.default_kernel,
        aliases=list(spec.aliases),
    )


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


def _bounded(field: str, value: int, lo: int, hi: int, what: str) -> list[FieldViolation]:
    if lo <= value <= hi:
        return []
    return [FieldViolation(field, f"must be an integer from {lo} to {hi}{what}; got {value}")]


class TileSolveServicer(pb_grpc.TileSolveServiceServicer):
    """Answers `tilesolve.v1.TileSolveService` from the in-process solver."""

    def __init__(
        self, cache_size: int = 4096, max_batch_size: int = 1000, profile: CudaDevice | None = None
    ) -> None:
        # A calibrated device (tilesolve-server --profile) for requests naming its device.
        self.profile = profile
        # Serialized SolveResponses: immutable, so a hit never shares a message with a call.
        self.cache: LruCache[bytes] = LruCache(cache_size)
        # The fast path: a request's exact bytes -> its serialized answer (cache_hit set), so
        # a repeated request is answered without decoding, validating or encoding anything.
        # A miss here (e.g. the same request serialized in another field order) falls back
        # to `cache`, keyed on the decoded, canonical request.
        self.request_cache: LruCache[bytes] = LruCache(cache_size)
        self.max_batch_size = max_batch_size
        catalog = load_catalog()
        self._hardware_list = pb.ListHardwareResponse(
            hardware=[_summary(catalog[name]) for name in sorted(catalog)],
            catalog_version=CATALOG_VERSION,
            model_version=MODEL_VERSION,
            max_batch_size=max_batch_size,
        )

    # ---- solving -------------------------------------------------------------------------

    def _solve_one(
        self, request: pb.SolveRequest, context: grpc.ServicerContext
    ) -> pb.SolveResponse:
        """One SolveRequest to its SolveResponse; raises the solver's errors."""
        problem, hardware, options = wire.solve_request_from_proto(request)
        hardware = with_profile(hardware, self.profile)
        key = answer_key(problem, hardware, options)
        cached = self.cache.get(key)
        if cached is not None:
            response = pb.SolveResponse.FromString(cached)
            response.options.time_limit_s = options.time_limit_s
            response.cache_hit = True
            return response
        limited = options.model_copy(update={"time_limit_s": _time_limit(options, context)})
        try:
            answer = solve(problem, hardware, limited)
        except InvalidRequestError as exc:
            raise with_request_paths(exc) from None
        # The echo is the request as sent (defaults filled in), not the deadline-cut limit.
        response = wire.answer_to_proto(answer.model_copy(update={"options": options}))
        if answer.status is not Status.FEASIBLE:  # proven: independent of the time limit
            self.cache.put(key, response.SerializeToString())
        return response

    @logged
    def Solve(self, request: bytes, context: grpc.ServicerContext) -> pb.SolveResponse | bytes:
        """`request` arrives serialized (see app.py): a repeat is answered from its bytes."""
        return _answer(context, "Solve", lambda: self._solve_serialized(request, context))

    def _solve_serialized(
        self, raw: bytes, context: grpc.ServicerContext
    ) -> pb.SolveResponse | bytes:
        hit = self.request_cache.get(raw)
        if hit is not None:
            return hit
        try:
            request = pb.SolveRequest.FromString(raw)
        except DecodeError:
            raise RequestFailed(
                Failure(grpc.StatusCode.INVALID_ARGUMENT, "the request is not a SolveRequest")
            ) from None
        response = self._solve_one(request, context)
        if response.status != pb.SOLVE_STATUS_FEASIBLE:  # proven: cacheable
            repeat = pb.SolveResponse()
            repeat.CopyFrom(response)
            repeat.cache_hit = True
            self.request_cache.put(raw, repeat.SerializeToString())
        return response

    @logged
    def SolveBatch(
        self, request: pb.SolveBatchRequest, context: grpc.ServicerContext
    ) -> pb.SolveBatchResponse:
        return _answer(context, "SolveBatch", lambda: self._solve_batch(request, context))

    def _solve_batch(
        self, request: pb.SolveBatchRequest, context: grpc.ServicerContext
    ) -> pb.SolveBatchResponse:
        count = len(request.requests)
        if count > self.max_batch_size:
            raise RequestFailed(
                Failure(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"at most {self.max_batch_size} requests per SolveBatch (the server's "
                    f"max_batch_size); got {count}",
                )
            )
        items = []
        for one in request.requests:
            try:
                response = self._solve_one(one, context)
            except Exception as exc:  # one bad problem must not fail the batch
                failure = failure_from(exc, "SolveBatch")
                items.append(
                    pb.SolveBatchItem(
                        code=failure.code_number,
                        message=failure.message,
                        field_violations=[
                            pb.FieldViolation(field=v.field, description=v.description)
                            for v in failure.violations
                        ],
                    )
                )
            else:
                items.append(pb.SolveBatchItem(code=0, response=response))
        return pb.SolveBatchResponse(items=items)

    # ---- hardware ------------------------------------------------------------------------

    @logged
    def ListHardware(
        self, request: pb.ListHardwareRequest, context: grpc.ServicerContext
    ) -> pb.ListHardwareResponse:
        return self._hardware_list

    @logged
    def GetHardware(
        self, request: pb.GetHardwareRequest, context: grpc.ServicerContext
    ) -> pb.GetHardwareResponse:
        return _answer(context, "GetHardware", lambda: self._get_hardware(request))

    @staticmethod
    def _get_hardware(request: pb.GetHardwareRequest) -> pb.GetHardwareResponse:
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
        return pb.GetHardwareResponse(
            hardware=wire.spec_to_proto(spec), catalog_version=CATALOG_VERSION
        )

    # ---- models --------------------------------------------------------------------------

    @logged
    def EstimateMemory(
        self, request: pb.EstimateMemoryRequest, context: grpc.ServicerContext
    ) -> pb.EstimateMemoryResponse:
        return _answer(context, "EstimateMemory", lambda: self._estimate_memory(request))

    @staticmethod
    def _estimate_memory(request: pb.EstimateMemoryRequest) -> pb.EstimateMemoryResponse:
        problem, block_m, block_n, hardware, kernel = wire.memory_request_from_proto(request)
        spec = get_hardware(hardware) if isinstance(hardware, str) else hardware
        try:
            estimate = estimate_memory(problem, block_m, block_n, spec, kernel)
        except InvalidRequestError as exc:
            raise _memory_request_paths(exc) from None
        return wire.estimate_to_proto(estimate)

    @logged
    def Occupancy(
        self, request: pb.OccupancyRequest, context: grpc.ServicerContext
    ) -> pb.OccupancyResponse:
        return _answer(context, "Occupancy", lambda: self._occupancy(request))

    @staticmethod
    def _occupancy(request: pb.OccupancyRequest) -> pb.OccupancyResponse:
        hardware = wire.hardware_from_proto(request.hardware)
        spec = hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)
        if not isinstance(spec, CudaDevice):
            cuda = ", ".join(n for n, s in load_catalog().items() if s.arch == "cuda")
            raise InvalidRequestError(
                [
                    FieldViolation(
                        "hardware",
                        f"{spec.name} is an {spec.arch} device; occupancy (resident blocks per "
                        f"SM) is a CUDA notion; allowed: a CUDA device such as {cuda}",
                    )
                ]
            )
        sm = spec.sm
        carveout = request.carveout_percent if request.HasField("carveout_percent") else -1
        violations = [
            *_bounded(
                "threads",
                request.threads,
                1,
                sm.max_threads_per_block,
                f" (the most threads per block on {spec.name})",
            ),
            *_bounded(
                "regs",
                request.regs,
                0,
                min(sm.max_regs_per_thread, MAX_ISA_REGS),
                " (registers per thread)",
            ),
            *_bounded(
                "smem_bytes",
                request.smem_bytes,
                0,
                MAX_SMEM_BYTES,
                " (bytes of dynamic shared memory per block)",
            ),
            *_bounded(
                "carveout_percent",
                carveout,
                -1,
                100,
                " (percent of the SM's shared memory; absent or -1: the largest)",
            ),
        ]
        if violations:
            raise InvalidRequestError(violations)
        result = occupancy(sm, request.threads, request.regs, request.smem_bytes, carveout)
        return wire.occupancy_to_proto(result)

    # ---- portfolios ----------------------------------------------------------------------

    @logged
    def Portfolio(
        self, request: pb.PortfolioRequest, context: grpc.ServicerContext
    ) -> pb.PortfolioResponse:
        return _answer(context, "Portfolio", lambda: self._portfolio(request, context))

    @staticmethod
    def _portfolio(
        request: pb.PortfolioRequest, context: grpc.ServicerContext
    ) -> pb.PortfolioResponse:
        portfolio, hardware = wire.portfolio_request_from_proto(request)
        remaining = context.time_remaining()
        if remaining is not None:  # the wall-clock limit never outlives the call
            budget = max(float(remaining) - DEADLINE_MARGIN_S, 1e-3)
            portfolio = portfolio.model_copy(
                update={"time_limit_s": min(portfolio.time_limit_s, budget)}
            )
        return wire.portfolio_to_proto(solve_portfolio(portfolio, hardware))
