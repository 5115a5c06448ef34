"""The plain tables of `tilesolve-cli`'s text answers, laid out into lines: pure functions of
the cells and a width (no terminal, no colour, no third-party renderer).

The look: a header, a rule of '-' under each column, the rows; no borders. Each column is as
wide as its widest line (`natural_width`), followed by one space of padding except the last
column, and a space between columns: two spaces apart, the rule's dashes cover a column and its
padding. Numbers are right-aligned (`right`), the rest left-aligned; a multi-line cell keeps its
lines, top-aligned beside the other cells of its row (a multi-line header: bottom-aligned, on
the rule).

Fitting a width. Only the free-text columns (`wrap`) ever narrow: when the table is wider than
`width`, the widest of them is narrowed first, down to the next widest, then both together, and
so on (`narrowed_widths`), until the table fits or each has reached its floor: its longest
word, or `FOLDED_WORD` characters if a word is longer. Their cells are then wrapped between
words (`wrapped_words`; a word longer than the column starts a line and is folded). The other
columns never wrap or shorten: a table they alone make wider than `width` is printed at the
width it needs, and nothing is ever cut short.
"""

from __future__ import annotations

from collections.abc import Sequence

FOLDED_WORD = 16  # characters: the narrowest a free-text column gets before the table widens
PADDING = 1  # spaces after every column but the last
SEPARATOR = " "  # between a column's padding and the next column
RULE = "-"


def natural_width(cells: Sequence[str]) -> int:
    """The widest line of `cells` (a column's header and its cells), in characters."""
    return max((len(line) for cell in cells for line in cell.split("\n")), default=0)


def floor_width(cells: Sequence[str]) -> int:
    """The narrowest a free-text column may get: its longest word, at most FOLDED_WORD."""
    longest = max((len(word) for cell in cells for word in cell.split()), default=0)
    return min(longest, FOLDED_WORD)


def table_width(widths: Sequence[int]) -> int:
    """Characters a table of columns `widths` takes, padding and separators included."""
    return sum(widths) + (len(widths) - 1) * (PADDING + len(SEPARATOR)) if widths else 0


def narrowed_widths(
    natural: Sequence[int], floors: Sequence[int], wrap: frozenset[int], width: int
) -> list[int]:
    """Column widths whose table is at most `width` wide where the free-text columns (`wrap`)
    can give way: one character at a time from the widest of them (the leftmost of equals),
    never below its floor."""
    widths = list(natural)
    excess = table_width(widths) - width
    while excess > 0:
        movable = [i for i in wrap if widths[i] > floors[i]]
        if not movable:
            break
        widest = max(movable, key=lambda i: (widths[i], -i))
        widths[widest] -= 1
        excess -= 1
    return widths


def wrapped_words(text: str, width: int) -> list[str]:
    """`text` wrapped between words into lines of at most `width` characters; a word longer
    than that starts a line of its own and is folded every `width` characters."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        while len(word) > width:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:width])
            word = word[width:]
        if current and len(current) + 1 + len(word) <= width:
            current += " " + word
        else:
            if current:
                lines.append(current)
            current = word
    if current or not lines:
        lines.append(current)
    return lines


def cell_lines(cell: str, width: int, wraps: bool) -> list[str]:
    """A cell's lines in a column `width` characters wide: its own lines, and for a free-text
    column each of them wrapped between words (`wrapped_words`)."""
    lines = cell.split("\n")
    if not wraps:
        return lines
    return [piece for line in lines for piece in wrapped_words(line, max(width, 1))]


def _aligned(text: str, width: int, right: bool) -> str:
    return text.rjust(width) if right else text.ljust(width)


def _row_lines(
    cells: Sequence[str],
    widths: Sequence[int],
    right: frozenset[int],
    wrap: frozenset[int],
    bottom: bool = False,
) -> list[str]:
    """One table row as lines: each column's cell lines side by side, top-aligned (`bottom`:
    aligned on the last line, as the header sits on its rule)."""
    columns = [cell_lines(cell, widths[i], i in wrap) for i, cell in enumerate(cells)]
    height = max(len(lines) for lines in columns)
    if bottom:
        columns = [[""] * (height - len(lines)) + lines for lines in columns]
    gap = " " * PADDING + SEPARATOR
    out = []
    for k in range(height):
        parts = [
            _aligned(lines[k] if k < len(lines) else "", widths[i], i in right)
            for i, lines in enumerate(columns)
        ]
        out.append(gap.join(parts).rstrip())
    return out


def layout(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int,
    right: frozenset[int] = frozenset(),
    wrap: frozenset[int] = frozenset(),
) -> tuple[list[str], list[int]]:
    """The table as lines (header lines, the rule, then every row's lines; trailing spaces
    removed), and how many lines each row took (the header's first), so that a caller can
    style a row. `width` is the most characters a line may take where the free-text columns
    can make it fit (module docstring)."""
    columns = [[header, *(row[i] for row in rows)] for i, header in enumerate(headers)]
    natural = [natural_width(cells) for cells in columns]
    floors = [floor_width(cells) if i in wrap else natural[i] for i, cells in enumerate(columns)]
    widths = narrowed_widths(natural, floors, wrap, width)
    header = _row_lines(headers, widths, right, wrap, bottom=True)
    rule = SEPARATOR.join(
        RULE * (w + (PADDING if i < len(widths) - 1 else 0)) for i, w in enumerate(widths)
    )
    lines = [*header, rule]
    heights = [len(header)]
    for row in rows:
        row_lines = _row_lines(row, widths, right, wrap)
        heights.append(len(row_lines))
        lines.extend(row_lines)
    return lines, heights
