"""How a failed request becomes a gRPC status: the solver's error taxonomy mapped to codes.

Invalid input is INVALID_ARGUMENT with a `google.rpc.BadRequest` detail (one field violation
per bad field, paths as in the request: `problem.head_dim`); unknown hardware is NOT_FOUND,
listing the known names; a solve that runs out of time is DEADLINE_EXCEEDED, one whose call was
cancelled CANCELLED (not logged: its client decides how often); anything else is INTERNAL,
with the traceback logged on the server. The same `Failure` value feeds both a whole-call
abort and one `SolveBatchItem`, and is cut to size on the way out (`bounded`, `limits.py`):
nothing a client sent comes back unbounded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NoReturn

import grpc
from grpc_status import rpc_status

from tilesolve import wire
from tilesolve.solver import AttentionProblem, FieldViolation, SolveOptions
from tilesolve.solver.errors import (
    DeadlineExceededError,
    InvalidRequestError,
    ModelInvariantError,
    SolveCancelledError,
    UnknownHardwareError,
)

from .limits import MAX_MESSAGE_BYTES, MAX_NAME_CHARS, clip, clip_violations

logger = logging.getLogger("tilesolve.server")

_PROBLEM_FIELDS = frozenset(AttentionProblem.model_fields)
_OPTION_FIELDS = frozenset(SolveOptions.model_fields)


@dataclass(frozen=True)
class Failure:
    """A request's outcome when it is not an answer: a gRPC code, a message, bad fields."""

    code: grpc.StatusCode
    message: str
    violations: tuple[FieldViolation, ...] = ()

    @property
    def code_number(self) -> int:
        """The google.rpc.Code number (3 for INVALID_ARGUMENT, ...)."""
        number: int = self.code.value[0]
        return number


class RequestFailed(Exception):
    """A failure the server decides itself (a batch too large, a deadline already spent)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def request_path(field: str) -> str:
    """A solver field name as a SolveRequest path: `head_dim` -> `problem.head_dim`,
    `kernel` -> `options.kernel`; paths that already start at the request stay as they are."""
    if field in _PROBLEM_FIELDS:
        return f"problem.{field}"
    if field in _OPTION_FIELDS:
        return f"options.{field}"
    return field


def with_request_paths(exc: InvalidRequestError) -> InvalidRequestError:
    """The solver's family checks name bare fields; a request names them by their path."""
    if isinstance(exc, UnknownHardwareError):
        return exc  # its one violation is already named "hardware"
    return InvalidRequestError(
        [FieldViolation(request_path(v.field), v.description) for v in exc.violations]
    )


def _joined(violations: tuple[FieldViolation, ...]) -> str:
    return "; ".join(f"{v.field}: {v.description}" for v in violations)


def failure_from(exc: Exception, method: str) -> Failure:
    """Classify an exception raised while serving `method` (logging the unexpected ones)."""
    if isinstance(exc, RequestFailed):
        return exc.failure
    if isinstance(exc, UnknownHardwareError):
        violations = tuple(exc.violations)
        known = ", ".join(exc.known)
        return Failure(
            grpc.StatusCode.NOT_FOUND,
            f"unknown hardware {clip(exc.name, MAX_NAME_CHARS)!r}; known names: {known}",
            violations,
        )
    if isinstance(exc, InvalidRequestError):
        violations = tuple(exc.violations)
        return Failure(grpc.StatusCode.INVALID_ARGUMENT, _joined(violations), violations)
    if isinstance(exc, DeadlineExceededError):
        return Failure(grpc.StatusCode.DEADLINE_EXCEEDED, str(exc))
    if isinstance(exc, SolveCancelledError):  # its call was cancelled: nobody reads this
        return Failure(grpc.StatusCode.CANCELLED, str(exc))
    if isinstance(exc, ModelInvariantError):
        logger.error("model invariant broken in %s", method, exc_info=exc)
        return Failure(grpc.StatusCode.INTERNAL, f"internal error (a bug; please report): {exc}")
    logger.error("unexpected error in %s", method, exc_info=exc)
    return Failure(
        grpc.StatusCode.INTERNAL,
        f"internal error (a bug; please report): {type(exc).__name__}: {exc}",
    )


def bounded(failure: Failure) -> Failure:
    """`failure` with its message and violations cut to the sizes of `limits.py`."""
    return Failure(
        failure.code, clip(failure.message, MAX_MESSAGE_BYTES), clip_violations(failure.violations)
    )


async def abort(context: grpc.aio.ServicerContext, failure: Failure) -> NoReturn:
    """End the call with `failure` (cut to size); field violations travel as a
    google.rpc.BadRequest in the `grpc-status-details-bin` trailer."""
    failure = bounded(failure)
    if failure.violations:
        status = rpc_status.to_status(
            wire.status_to_proto(failure.code_number, failure.message, failure.violations)
        )
        await context.abort(status.code, status.details, status.trailing_metadata)
    else:
        await context.abort(failure.code, failure.message)
    raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises
