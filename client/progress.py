"""Progress of the long commands (`table`, `portfolio`, `calibrate`) and of the long benchmark
scripts on a terminal: a rich progress bar on stderr while the work runs; nothing when stderr
is not a terminal (a pipe, a file, a build log) or with `--quiet`. The bar counts the units
done so far against all those handed out so far (a command may evaluate several batches: one
per device). Nothing here writes to stdout."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

Item = TypeVar("Item")
QUIET_HELP = "no progress bar (one is drawn on stderr only when it is a terminal)"


def add_quiet_argument(parser: Any) -> None:
    """`--quiet`: no progress bar (on an `argparse` parser or argument group)."""
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)


def shown(quiet: bool) -> bool:
    """Whether a bar is drawn: stderr is a terminal (not TERM=dumb) and not --quiet."""
    return not quiet and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


class Meter:
    """Problems handed out (`add`) and done (`advance`), drawn as a bar labelled `label`
    when `enabled`; otherwise it only counts. Use it as a context manager."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self.total = 0
        self.done = 0
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Meter:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=sys.stderr),
                transient=True,  # the bar goes when the work is done; the answer stays
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.done)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def add(self, count: int) -> None:
        self.total += count
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, total=self.total)

    def advance(self, count: int) -> None:
        self.done += count
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done)

    def show(self, done: int, total: int) -> None:
        """Set the bar at `done` of `total` (for work that reports where it stands)."""
        self.add(total - self.total)
        self.advance(done - self.done)

    def note(self, line: str) -> None:
        """A line of text on stderr: above the bar when one is drawn, else as it is."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line, file=sys.stderr, flush=True)


def tracked(items: Iterable[Item], label: str, quiet: bool, total: int) -> Iterator[Item]:
    """`items`, one at a time, counted on a bar labelled `label` (of `total`) when `shown`."""
    with Meter(label, shown(quiet)) as meter:
        meter.add(total)
        for item in items:
            yield item
            meter.advance(1)
