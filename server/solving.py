"""Where cold solves run, away from the event loop that answers everything else.

`solve_job` turns one SolveRequest, decoded and validated on the event loop (a
`wire.SolveCall`: pydantic models, pickled to a solver process as they are), into an
`Outcome`: the answer, serialized once (and whether it is proven, so that the cache may keep
those bytes), or a `Failure`. It runs in one of two pools:

- `ProcessSolvers` (`tilesolve-server`'s default): `workers` solver processes forked from a
  multiprocessing forkserver that has imported the solver once, each reniced by
  `SOLVER_NICENESS`, so that the server's own process (gRPC, health checks, cache hits) keeps
  its CPU and its interpreter lock while every solver is busy. A job is one message down a
  pipe and one back; a cancelled job is stopped inside the process (`Cancellation`: CP-SAT's
  `stop_search`, then no further rank), and a process that has not answered
  `KILL_AFTER_S` seconds after its job was cancelled is killed and replaced, as is one
  that dies.
- `ThreadSolvers` (`ServerConfig`'s default, for servers made inside a Python process such as
  the tests): `workers` threads of this process, solving with whatever kernel families the
  process has registered; the request is handed over as it is; cancellation is the same
  `Cancellation`, there is nothing to kill.

Both take jobs first come, first served: `run` waits for a free solver, so cold solves queue
behind each other and nothing else does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Protocol

import grpc

import tilesolve.solver.ip_model  # noqa: F401  (ortools: loaded once, before any fork)
from tilesolve import wire
from tilesolve.heap import keep_heap
from tilesolve.solver import (
    AttentionProblem,
    CudaDevice,
    InvalidRequestError,
    SolveOptions,
    Status,
    solve,
)
from tilesolve.solver.cancel import Cancellation

from .errors import Failure, RequestFailed, failure_from, with_request_paths
from .profile import with_profile

logger = logging.getLogger("tilesolve.server")

# Time kept back from the call's deadline to validate, explain, encode and send the answer:
# a fixed part plus a part per requested candidate, seconds.
DEADLINE_MARGIN_S = 0.05
DEADLINE_MARGIN_PER_CANDIDATE_S = 0.002
SOLVER_NICENESS = 10  # solver processes yield the CPU to the server's own process
KILL_AFTER_S = 2.0  # a cancelled job still running after this long: its process is replaced
_RECANCEL_EVERY_S = 0.05  # a cancel that raced the start of a CP-SAT search is sent again


@dataclass(frozen=True)
class Outcome:
    """What one job produced: a serialized SolveResponse, or a failure."""

    response: bytes = b""
    # Whether the answer is proven (optimal or infeasible: it does not depend on the time
    # limit), so that the cache may keep `response` for a repeat of the request.
    proven: bool = False
    failure: Failure | None = None


CANCELLED = Outcome(failure=Failure(grpc.StatusCode.CANCELLED, "the call was cancelled"))


def time_limit(options: SolveOptions, deadline: float | None) -> float:
    """The CP-SAT limit: the request's, or what the deadline (time.monotonic) leaves less a
    margin for answering, if that is shorter."""
    if deadline is None:
        return options.time_limit_s
    remaining = deadline - time.monotonic()
    margin = DEADLINE_MARGIN_S + DEADLINE_MARGIN_PER_CANDIDATE_S * options.top_k
    budget = remaining - margin
    if budget <= 0:
        raise RequestFailed(
            Failure(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"the call's deadline leaves {max(remaining, 0.0) * 1e3:.1f} ms, less "
                f"than the {margin * 1e3:.0f} ms the server needs to answer; allow more time",
            )
        )
    return min(options.time_limit_s, budget)


def solve_job(
    call: wire.SolveCall,
    deadline: float | None,
    cancel: Cancellation,
    profile: CudaDevice | None = None,
) -> Outcome:
    """Solve one decoded SolveRequest and encode its answer. With a calibration profile, a
    request naming its device is solved on the calibrated device."""
    try:
        if cancel.cancelled:
            return CANCELLED
        problem, hardware, options = call
        hardware = with_profile(hardware, profile)
        limited = options.model_copy(update={"time_limit_s": time_limit(options, deadline)})
        try:
            answer = solve(problem, hardware, limited, cancel=cancel)
        except InvalidRequestError as exc:
            raise with_request_paths(exc) from None
        # The echo is the request as sent (defaults filled in), not the deadline-cut limit.
        response = wire.answer_to_proto(answer.model_copy(update={"options": options}))
        # FEASIBLE is unproven: another time limit might have found a better ranking.
        return Outcome(response.SerializeToString(), proven=answer.status is not Status.FEASIBLE)
    except Exception as exc:  # every failure becomes a status; none escapes the job
        return Outcome(failure=failure_from(exc, "Solve"))


class Solvers(Protocol):
    """A pool that runs `solve_job`s; `run` is cancelled when the call is."""

    async def run(self, call: wire.SolveCall, deadline: float | None) -> Outcome: ...

    async def close(self) -> None: ...


def _keep_cancelling(done: Callable[[], bool], cancel: Callable[[], None]) -> None:
    """Cancel now, and again every _RECANCEL_EVERY_S until `done()` (the job ended)."""
    loop = asyncio.get_running_loop()

    def again() -> None:
        if not done():
            cancel()
            loop.call_later(_RECANCEL_EVERY_S, again)

    again()


# ---- threads ----------------------------------------------------------------------------


class ThreadSolvers:
    """`workers` solving threads in this process."""

    def __init__(self, workers: int, profile: CudaDevice | None = None) -> None:
        self.workers = workers
        self._profile = profile
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="tilesolve-solver")
        self._slots = asyncio.Semaphore(workers)

    async def run(self, call: wire.SolveCall, deadline: float | None) -> Outcome:
        await self._slots.acquire()
        cancel = Cancellation()
        try:
            job = asyncio.get_running_loop().run_in_executor(
                self._pool, solve_job, call, deadline, cancel, self._profile
            )
        except BaseException:
            self._slots.release()
            raise
        # The slot is free when the thread is, not when the caller stops waiting.
        job.add_done_callback(lambda _: self._slots.release())
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            _keep_cancelling(job.done, cancel.cancel)
            raise

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


# ---- processes --------------------------------------------------------------------------


def _worker_main(
    jobs: Connection, results: Connection, niceness: int, profile: CudaDevice | None = None
) -> None:
    """A solver process: this thread reads jobs and cancellations; one thread solves."""
    # The server blocks SIGTERM/SIGINT in every thread (main.py) and the mask survives the
    # forkserver's exec: undo it. A terminal's ^C reaches the whole process group; the server
    # decides when its solvers stop.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s[solver %(process)d] %(message)s",
    )
    if niceness:
        with contextlib.suppress(OSError):
            os.nice(niceness)
    # This process solves problem after problem; the forkserver it was forked from was started
    # by exec, so the server's own setting (main.py) did not reach it.
    keep_heap()
    try:  # the first solve of a fresh process pays for lazy set-up; pay it before any call
        solve(AttentionProblem(seq_len=1024, head_dim=64), "a100")
    except Exception:
        logger.exception("solver warm-up failed")
    tokens: dict[int, Cancellation] = {}
    lock = threading.Lock()
    work: queue.SimpleQueue[tuple[int, wire.SolveCall, float | None]] = queue.SimpleQueue()

    def solving() -> None:
        while True:
            job_id, call, deadline = work.get()
            with lock:
                cancel = tokens[job_id]
            outcome = solve_job(call, deadline, cancel, profile)
            try:
                results.send(("done", job_id, outcome))
            except OSError:
                os._exit(0)  # the server is gone
            with lock:
                del tokens[job_id]

    threading.Thread(target=solving, name="solving", daemon=True).start()
    while True:
        with lock:
            stopping = [t for t in tokens.values() if t.cancelled]
        try:
            if not jobs.poll(_RECANCEL_EVERY_S if stopping else None):
                for token in stopping:
                    token.cancel()
                continue
            message = jobs.recv()
        except (EOFError, OSError):
            os._exit(0)  # the server is gone (killed, or its end closed): stop at once
        if message[0] == "solve":
            _, job_id, call, deadline = message
            with lock:
                tokens[job_id] = Cancellation()
            work.put((job_id, call, deadline))
        elif message[0] == "cancel":
            with lock:
                cancelled = tokens.get(message[1])
            if cancelled is not None:
                cancelled.cancel()
        else:  # "exit"
            os._exit(0)


@dataclass(eq=False)
class _Worker:
    process: Any  # multiprocessing.Process
    jobs: Connection
    results: Connection
    job: tuple[int, asyncio.Future[Outcome]] | None = None
    dead: bool = False


def _context() -> Any:
    context = multiprocessing.get_context("forkserver")
    # Effective for the forkserver this process starts first; every solver process is then
    # forked from one that has imported the solver, ortools and the catalog once.
    context.set_forkserver_preload(["tilesolve.server.solving"])
    return context


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def _stop_signals_kept() -> Iterator[None]:
    """Starting the forkserver's resource tracker unblocks SIGTERM and SIGINT in the calling
    thread (multiprocessing.resource_tracker), and a signal already pending (sent while the
    server was starting) is then delivered at once, with its default action: death, not a
    drain. Around it: in the main thread such a signal is caught and made pending again
    afterwards, for `serve`'s sigwait; in any thread the mask is put back as it was."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    caught: list[int] = []
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for number in _STOP_SIGNALS:
            previous[number] = signal.signal(number, lambda received, _: caught.append(received))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for number, handler in previous.items():
            signal.signal(number, handler)
        for received in caught:
            os.kill(os.getpid(), received)  # blocked again: pending until sigwait takes it


class ProcessSolvers:
    """`workers` solver processes; see the module's docstring."""

    def __init__(
        self, workers: int, niceness: int = SOLVER_NICENESS, profile: CudaDevice | None = None
    ) -> None:
        self.workers = workers
        self._niceness = niceness
        self._profile = profile
        self._context = _context()
        self._ids = itertools.count(1)
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._all: set[_Worker] = set()
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Spawned now, before any call: a server that cannot start its solvers fails to start.
        self._spawned = [self._spawn() for _ in range(workers)]

    def _spawn(self) -> _Worker:
        with _stop_signals_kept():
            return self._start_worker()

    def _start_worker(self) -> _Worker:
        jobs_r, jobs_w = self._context.Pipe(duplex=False)
        results_r, results_w = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=_worker_main,
            args=(jobs_r, results_w, self._niceness, self._profile),
            name="tilesolve-solver",
            daemon=True,
        )
        process.start()
        jobs_r.close()  # the child's ends: closed here, so that its death reads as EOF
        results_w.close()
        return _Worker(process, jobs_w, results_r)

    def _adopt(self, worker: _Worker) -> None:
        """On the loop: read the worker's results in a thread; it is idle."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._all.add(worker)
        threading.Thread(
            target=self._read, args=(worker, loop), name="tilesolve-solver-reader", daemon=True
        ).start()
        self._idle.put_nowait(worker)

    async def start(self) -> None:
        for worker in self._spawned:
            self._adopt(worker)
        self._spawned = []

    def _read(self, worker: _Worker, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                message = worker.results.recv()
            except (EOFError, OSError):
                with contextlib.suppress(RuntimeError):  # the server's loop has closed
                    loop.call_soon_threadsafe(self._died, worker)
                return
            try:
                loop.call_soon_threadsafe(self._done, worker, message)
            except RuntimeError:  # the server's loop has closed
                return

    def _done(self, worker: _Worker, message: tuple[str, int, Outcome]) -> None:
        _, job_id, outcome = message
        if worker.job is None or worker.job[0] != job_id:
            return
        future = worker.job[1]
        worker.job = None
        if not future.done():
            future.set_result(outcome)
        if not worker.dead and not self._closing:
            self._idle.put_nowait(worker)

    def _died(self, worker: _Worker) -> None:
        if worker.dead:
            return
        worker.dead = True
        self._all.discard(worker)
        worker.process.join(timeout=1)
        if worker.job is not None and not worker.job[1].done():
            worker.job[1].set_result(
                Outcome(
                    failure=Failure(
                        grpc.StatusCode.INTERNAL,
                        f"the solver process exited (status {worker.process.exitcode}) while "
                        "solving this request",
                    )
                )
            )
        worker.job = None
        for end in (worker.jobs, worker.results):
            end.close()
        if not self._closing:
            asyncio.get_running_loop().create_task(self._replace())

    async def _replace(self) -> None:
        try:
            worker = await asyncio.get_running_loop().run_in_executor(None, self._spawn)
        except Exception:
            logger.exception("could not start a solver process")
            return
        if self._closing:
            worker.process.kill()
            return
        self._adopt(worker)

    def _overdue(self, worker: _Worker, job_id: int) -> None:
        """A cancelled job still running KILL_AFTER_S later: kill its process (replaced)."""
        if worker.job is not None and worker.job[0] == job_id and not worker.dead:
            logger.warning(
                "solver process %d ignored a cancellation; killing it", worker.process.pid
            )
            worker.process.kill()

    async def run(self, call: wire.SolveCall, deadline: float | None) -> Outcome:
        while True:
            worker = await self._idle.get()
            if not worker.dead:
                break
        job_id = next(self._ids)
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        worker.job = (job_id, future)
        # If it died between jobs, its reader reports that (failing this job) and replaces it.
        self._send(worker, ("solve", job_id, call, deadline))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():
                _keep_cancelling(future.done, lambda: self._send(worker, ("cancel", job_id)))
                asyncio.get_running_loop().call_later(KILL_AFTER_S, self._overdue, worker, job_id)
            raise

    @staticmethod
    def _send(worker: _Worker, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError):
            worker.jobs.send(message)

    async def close(self) -> None:
        """Stop every solver process (a job in progress is abandoned)."""
        self._closing = True
        workers = list(self._all) + self._spawned
        for worker in workers:
            self._send(worker, ("exit",))

        def reap() -> None:
            for worker in workers:
                worker.process.join(timeout=1)
                if worker.process.is_alive():
                    worker.process.kill()
                    worker.process.join(timeout=1)

        await asyncio.get_running_loop().run_in_executor(None, reap)
        for worker in workers:
            if worker.job is not None and not worker.job[1].done():
                worker.job[1].set_result(CANCELLED)
