"""Progress of the long commands (`table`, `portfolio`) on a terminal: a rich progress bar
on stderr while problems are evaluated; nothing when stderr is not a terminal (a pipe, a
file, a build log) or with `--quiet`. The bar counts the problems evaluated so far against
all those handed out so far (a command may evaluate several batches: one per device)."""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


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
            self._task = self._bar.add_task(self.label, total=0)
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
