"""Evaluating many problems at once for `table` and `portfolio`: local processes
(`--workers N`) or a Dask distributed cluster (`--dask-scheduler ADDRESS`).

Both are `map` functions over the solver's pure, module-level per-problem functions
(`tilesolve.solver.apps.dispatch_table.solve_cell`,
`tilesolve.solver.apps.portfolio.candidate_set`): the items are cut into chunks, evaluated
anywhere, and gathered back in input order, so the output is the same bytes however many
workers computed it. Dask is imported only for `--dask-scheduler`
(`pip install 'tilesolve[dask]'`); its workers must run the same tilesolve, which is checked
(model and catalog versions) before any work is sent.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from tilesolve.heap import keep_heap

from .cli_common import EXIT_UNAVAILABLE, CliExit, CliInputError, ErrorLine
from .progress import Meter

T = TypeVar("T")
R = TypeVar("R")
MapFn = Callable[[Callable[[T], R], Sequence[T]], list[R]]

# Below this many items per worker a process is not worth starting: spawning one and importing
# the solver costs about a second, what solving ~1,000 table cells costs; a 1,000-cell table
# ran 7% slower on two processes than on one (benchmarks/README.md).
MIN_ITEMS_PER_WORKER = 1000
CHUNKS_PER_WORKER = 4
DASK_CONNECT_TIMEOUT_S = 10


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _chunks(items: Sequence[T], count: int) -> list[list[T]]:
    size = max(1, -(-len(items) // max(count, 1)))
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def run_chunk(fn: Callable[[T], R], chunk: list[T]) -> list[R]:
    """Evaluate one chunk in order (what each worker runs)."""
    return [fn(item) for item in chunk]


class ProcessMap:
    """`map` over a pool of up to `workers` local processes (spawned: no state is inherited).
    Small inputs run in this process: see MIN_ITEMS_PER_WORKER."""

    def __init__(
        self,
        workers: int,
        min_items_per_worker: int = MIN_ITEMS_PER_WORKER,
        meter: Meter | None = None,
    ):
        self.workers = workers
        self.min_items_per_worker = max(1, min_items_per_worker)
        self.meter = meter or Meter("", enabled=False)
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            # each worker solves many problems: its C heap is kept between them (tilesolve.heap)
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=context, initializer=keep_heap
            )
        return self._pool

    def __call__(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        workers = min(self.workers, len(items) // self.min_items_per_worker)
        self.meter.add(len(items))
        out: list[R] = []
        if workers <= 1:
            for item in items:
                out.append(fn(item))
                self.meter.advance(1)
            return out
        chunks = _chunks(items, workers * CHUNKS_PER_WORKER)
        pool = self._executor()
        for part in pool.map(run_chunk, [fn] * len(chunks), chunks):
            out.extend(part)
            self.meter.advance(len(part))
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def _versions() -> tuple[str, str]:
    from tilesolve.solver import CATALOG_VERSION, MODEL_VERSION

    return MODEL_VERSION, CATALOG_VERSION


class DaskMap:
    """`map` on a Dask distributed cluster: chunks become tasks, gathered in order."""

    def __init__(self, client: Any, meter: Meter | None = None):
        self.client = client
        workers = len(client.scheduler_info().get("workers", {})) or 1
        self.workers = workers
        self.meter = meter or Meter("", enabled=False)

    def __call__(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if not items:
            return []
        self.meter.add(len(items))
        chunks = _chunks(items, self.workers * CHUNKS_PER_WORKER)
        futures = self.client.map(run_chunk, [fn] * len(chunks), chunks, pure=False)
        out: list[R] = []
        for future in futures:  # in order, each as it is done
            part = self.client.gather(future)
            out.extend(part)
            self.meter.advance(len(part))
        return out


def _dask_client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise CliInputError(
            [
                ErrorLine(
                    "dask_scheduler",
                    "needs Dask's distributed scheduler: pip install 'tilesolve[dask]'",
                )
            ]
        ) from None
    try:
        return Client(  # type: ignore[no-untyped-call]
            address, timeout=DASK_CONNECT_TIMEOUT_S, set_as_default=False
        )
    except (OSError, TimeoutError, ValueError) as exc:
        raise CliExit(
            EXIT_UNAVAILABLE,
            f"error: dask_scheduler: cannot reach {address} ({type(exc).__name__}: {exc})",
        ) from None


@contextmanager
def evaluator(
    workers: int | None, dask_scheduler: str | None, meter: Meter | None = None
) -> Iterator[MapFn[Any, Any]]:
    """The map function the command's options ask for, closed when the command ends; it
    reports the problems it evaluates to `meter` (a progress bar)."""
    if dask_scheduler is not None:
        client = _dask_client(dask_scheduler)
        try:
            found = client.submit(_versions, pure=False).result()
            if tuple(found) != _versions():
                raise CliInputError(
                    [
                        ErrorLine(
                            "dask_scheduler",
                            f"the cluster's workers run model {found[0]}, catalog {found[1]}; "
                            f"this tilesolve is model {_versions()[0]}, catalog "
                            f"{_versions()[1]}: install the same tilesolve on the workers",
                        )
                    ]
                )
            yield DaskMap(client, meter)
        finally:
            client.close()
        return
    pool = ProcessMap(workers if workers is not None else usable_cpus(), meter=meter)
    try:
        yield pool
    finally:
        pool.close()
