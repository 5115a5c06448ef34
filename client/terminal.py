"""The terminal `tilesolve-cli` writes to: how wide its text may be, whether it is coloured,
and rich's rendering of a table into lines.

Width: `$COLUMNS` when it is a positive integer, else the terminal's width when stdout is a
terminal, else `DEFAULT_WIDTH` (80 columns: a pipe or a file gets text any terminal shows).
`--wide` lifts the limit (`set_wide`): one line per table row, nothing wrapped.
Colour: only when stdout is a terminal and `NO_COLOR` is unset (https://no-color.org); never in
a pipe, a file or a JSON document (JSON never passes through here).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is loaded by what renders (a cached answer is replayed without it)
    from rich.box import Box
    from rich.console import RenderableType

DEFAULT_WIDTH = 80
# `--wide`: what "unlimited" means to rich (one line per row, nothing wrapped).
_UNLIMITED = 100_000


@cache
def _ruled() -> Box:
    """A header, a rule of '-' under it, rows: the tables of a plain-text report (no borders)."""
    from rich.box import Box

    return Box("    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True)


_wide = False


def set_wide(wide: bool) -> None:
    """`--wide`: tables and text at their full width for this process."""
    global _wide
    _wide = wide


def is_wide() -> bool:
    return _wide


def width() -> int:
    """The columns text may take (see the module docstring); `--wide`: unlimited."""
    if _wide:
        return _UNLIMITED
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        import shutil  # here: a pipe, the one-off question's usual reader, never needs it

        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def colour() -> bool:
    """Whether stdout gets colour: a terminal (not TERM=dumb), and NO_COLOR unset."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return sys.stdout.isatty()


def render(renderable: RenderableType, columns: int | None = None) -> list[str]:
    """`renderable` as lines of text at most `columns` wide (default: `width()`), coloured
    only where `colour()` says; trailing spaces removed."""
    from rich.console import Console

    buffer = io.StringIO()
    coloured = colour()
    console = Console(
        file=buffer,
        width=columns or width(),
        color_system="standard" if coloured else None,
        force_terminal=coloured,
        no_color=not coloured,
        highlight=False,
        markup=False,
        emoji=False,
    )
    console.print(renderable)
    return [line.rstrip() for line in buffer.getvalue().splitlines()]


FOLDED_WORD = 16  # characters: the narrowest a free-text column gets before the table widens


def table_lines(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: frozenset[int] = frozenset(),
    wrap: frozenset[int] = frozenset(),
    first_row_style: str = "",
    columns: int | None = None,
) -> list[str]:
    """A plain table as lines: a header (bold on a terminal), a rule of '-', the rows, at most
    `columns` wide (default: `width()`). Columns in `right` are right-aligned (numbers);
    the columns in `wrap` (free text) are the ones that wrap when the table is too wide (a word
    longer than FOLDED_WORD folds onto the next line); the others keep each cell on one line,
    and a table they alone make wider than `columns` is printed at the width they need rather
    than cut (nothing is ever cut short)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(
        box=_ruled(),
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        header_style="bold" if colour() else "",
    )
    needed = 0
    for i, header in enumerate(headers):
        table.add_column(
            header,
            justify="right" if i in right else "left",
            no_wrap=i not in wrap,
            overflow="fold",
        )
        cells = [header, *(row[i] for row in rows)]
        words = [w for cell in cells for w in cell.split()] if i in wrap else cells
        longest = max((len(line) for w in words for line in w.splitlines()), default=0)
        # a free-text column folds a word longer than FOLDED_WORD (a long alias) in two
        needed += (min(longest, FOLDED_WORD) if i in wrap else longest) + 2
    for k, row in enumerate(rows):
        table.add_row(*(Text(cell) for cell in row), style=first_row_style if k == 0 else "")
    return render(table, max(columns or width(), needed))
