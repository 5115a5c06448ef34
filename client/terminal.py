"""The terminal `tilesolve-cli` writes to: how wide its text may be, whether it is coloured,
and a table as lines for it (`table_lines`; the layout itself: `table_layout.py`).

Width: `$COLUMNS` when it is a positive integer, else the terminal's width when stdout is a
terminal, else `DEFAULT_WIDTH` (80 columns: a pipe or a file gets text any terminal shows).
`--wide` lifts the limit (`set_wide`): one line per table row, nothing wrapped.
Colour: only when stdout is a terminal and `NO_COLOR` is unset (https://no-color.org); never in
a pipe, a file or a JSON document (JSON never passes through here).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .table_layout import layout

DEFAULT_WIDTH = 80
# `--wide`: what "unlimited" means to a table (one line per row, nothing wrapped).
_UNLIMITED = 100_000

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


BOLD, RESET = "\x1b[1m", "\x1b[0m"  # ANSI SGR: only where `colour()` says


def table_lines(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: frozenset[int] = frozenset(),
    wrap: frozenset[int] = frozenset(),
    first_row_style: str = "",
    columns: int | None = None,
) -> list[str]:
    """A plain table as lines (`table_layout.layout`): a header (bold on a terminal), a rule
    of '-', the rows, at most `columns` wide (default: `width()`) where the free-text columns
    in `wrap` can make it fit; columns in `right` are right-aligned (numbers). Nothing is ever
    cut short: a table its other columns alone make wider is printed at the width it needs.
    `first_row_style` "bold": the first row bold too, on a terminal."""
    lines, heights = layout(headers, rows, width=columns or width(), right=right, wrap=wrap)
    if not colour():
        return lines
    bold_rows = heights[0] + 1 + (heights[1] if first_row_style == "bold" and rows else 0)
    bold = set(range(heights[0])) | set(range(heights[0] + 1, bold_rows))
    return [f"{BOLD}{line}{RESET}" if k in bold and line else line for k, line in enumerate(lines)]
