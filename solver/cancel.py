"""Stopping a solve from another thread: the server's answer to a cancelled call.

A `Cancellation` is handed to `solve(..., cancel=...)`. Setting it (`cancel()`, from any
thread) stops a CP-SAT search in progress at once (`CpSolver.stop_search`) and keeps the next
rank from starting; `solve` then raises `SolveCancelledError` instead of answering. `solve`
also looks at it between its steps and between chunks of the re-check of the ranked
configurations (`solve.VALIDATE_CHUNK`); building the candidate table runs to its end (it takes
milliseconds). `cancel()` may be called again: a search that started just as the flag was set
is stopped by the second call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Cancellation:
    """A flag that, once set, stays set; searches registered with `stopping` are stopped."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._stops: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._set.is_set()

    def cancel(self) -> None:
        with self._lock:
            self._set.set()
            stops = list(self._stops)
        for stop in stops:
            stop()

    @contextmanager
    def stopping(self, stop: Callable[[], None]) -> Iterator[None]:
        """While inside, `cancel()` also calls `stop` (a search's `stop_search`)."""
        with self._lock:
            self._stops.append(stop)
        try:
            yield
        finally:
            with self._lock:
                self._stops.remove(stop)
