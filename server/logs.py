"""Log lines a client can cause, at a rate the server decides.

A client decides how many calls fail, are cancelled or never read their answers; a line per
such call (or a traceback, as gRPC writes for an answer it could not send) would let it fill
the disk and the log pipeline. `LineThrottle` is a logging filter with a token bucket per kind
of line: `burst` lines of a kind pass at once, then `rate_per_s`; the rest are counted, and the
next line of that kind that passes says how many were left out ("... [412 similar lines
suppressed]"). `flush` reports what is still counted (the drain calls it).

What it throttles (`install_throttle`):

- the servicer's per-call line for a call that did not end OK (`tilesolve.server`, by method
  and status code); lines of answered calls pass untouched: each is a call the server served;
- gRPC's `ExecuteBatchError raised in core by servicer method` (`grpc._cython.cygrpc`, by
  method), written with a traceback when a call ended before its answer could be sent (its
  client reset the stream or stopped reading); the traceback is dropped, it shows no fault of
  the servicer.

gRPC's C core writes its own lines to stderr, out of Python logging's reach; the one a client
triggers at will (a failed TLS handshake, at its INFO level) is kept out by
`tilesolve-server`, which runs with `GRPC_VERBOSITY=ERROR` unless the environment sets it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

# A kind of line: at most BURST at once, then RATE_PER_S a second.
BURST = 20
RATE_PER_S = 1.0
GRPC_CORE_LOGGER = "grpc._cython.cygrpc"
UNSENT_ANSWER = "ExecuteBatchError raised in core by servicer method"


@dataclass
class _Bucket:
    tokens: float
    updated: float
    suppressed: int = 0


class LineThrottle(logging.Filter):
    """A token bucket per kind of line (see the module's docstring). `kind(record)` names a
    record's kind, or None for a line that always passes."""

    def __init__(self, burst: int = BURST, rate_per_s: float = RATE_PER_S) -> None:
        super().__init__()
        self.burst = burst
        self.rate_per_s = rate_per_s
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._lock = threading.Lock()
        self._clock = time.monotonic

    def filter(self, record: logging.LogRecord) -> bool:
        kind = line_kind(record)
        if kind is None:
            return True
        if record.name == GRPC_CORE_LOGGER:
            record.exc_info = None  # the traceback of an answer its client did not take
            record.exc_text = None
            record.msg = f"{record.getMessage()}: its client reset the call or stopped reading"
            record.args = ()
        key = (record.name, kind)
        now = self._clock()
        with self._lock:
            bucket = self._buckets.setdefault(key, _Bucket(float(self.burst), now))
            bucket.tokens = min(
                float(self.burst), bucket.tokens + (now - bucket.updated) * self.rate_per_s
            )
            bucket.updated = now
            if bucket.tokens < 1.0:
                bucket.suppressed += 1
                return False
            bucket.tokens -= 1.0
            left_out, bucket.suppressed = bucket.suppressed, 0
        if left_out:
            record.msg = f"{record.getMessage()} [{left_out} similar lines suppressed]"
            record.args = ()
        return True

    def flush(self) -> None:
        """Log, for every kind with lines left out since its last line, how many."""
        with self._lock:
            counts = [(key, b.suppressed) for key, b in self._buckets.items() if b.suppressed]
            for key, _ in counts:
                self._buckets[key].suppressed = 0
        for (name, kind), count in counts:
            logging.getLogger(name).warning("%d similar lines suppressed: %s", count, kind)

    def suppressed(self) -> int:
        """Lines left out and not yet reported."""
        with self._lock:
            return sum(b.suppressed for b in self._buckets.values())


def line_kind(record: logging.LogRecord) -> str | None:
    """What a throttled line is about, or None for a line that is not throttled."""
    if record.name == GRPC_CORE_LOGGER:
        message = str(record.msg)
        return message.split("[", 1)[-1].rstrip("]") if UNSENT_ANSWER in message else None
    kind = getattr(record, "throttle", None)
    return str(kind) if kind is not None else None


THROTTLE = LineThrottle()


def install_throttle() -> LineThrottle:
    """Add the process's one `THROTTLE` to the loggers it reads (once, however often called)."""
    for name in ("tilesolve.server", GRPC_CORE_LOGGER):
        logger = logging.getLogger(name)
        if THROTTLE not in logger.filters:
            logger.addFilter(THROTTLE)
    return THROTTLE
