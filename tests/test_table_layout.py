"""The CLI's plain tables (`client/table_layout.py`, through `terminal.table_lines`): the look,
alignment, and how a table fits a width by narrowing only its free-text columns."""

from __future__ import annotations

import pytest

from tilesolve.client import terminal
from tilesolve.client.table_layout import (
    FOLDED_WORD,
    floor_width,
    layout,
    narrowed_widths,
    table_width,
    wrapped_words,
)


def test_columns_rule_and_alignment() -> None:
    lines, heights = layout(
        ("rank", "tile", "time us"),
        [["1", "64x128 w4", "82.9"], ["10", "64x64 w2", "1083.6"]],
        width=80,
        right=frozenset({0, 2}),
    )
    assert lines == [
        "rank  tile       time us",
        "----- ---------- -------",
        "   1  64x128 w4     82.9",
        "  10  64x64 w2    1083.6",
    ]
    assert heights == [1, 1, 1]


def test_a_multi_line_header_sits_on_its_rule_and_a_cell_keeps_its_lines() -> None:
    lines, heights = layout(("name", "SMs/\ncores"), [["a100\n(80GB)", "108"]], width=80)
    assert lines == [
        "        SMs/",
        "name    cores",
        "------- -----",
        "a100    108",
        "(80GB)",
    ]
    assert heights == [2, 2]


def test_only_free_text_columns_wrap_to_fit() -> None:
    reason = "shared memory per block within the opt-in maximum"
    lines, _ = layout(
        ("constraint", "removed", "rule"),
        [["shared_memory", "5", reason]],
        width=40,
        right=frozenset({1}),
        wrap=frozenset({2}),
    )
    assert max(len(line) for line in lines) <= 40
    assert lines[2].startswith("shared_memory        5  ")
    # the rule's words are all there, in order, none cut
    assert " ".join(line[24:].strip() for line in lines[2:]) == reason


def test_the_widest_free_text_column_narrows_first() -> None:
    # 10 + 30 + 20 and two gaps of 2 = 64: to 54 the 30 gives way alone, to 45 both, the
    # leftmost of the equal columns first (the right one keeps the odd character)
    assert narrowed_widths([10, 30, 20], [10, 4, 4], frozenset({1, 2}), 54) == [10, 20, 20]
    assert narrowed_widths([10, 30, 20], [10, 4, 4], frozenset({1, 2}), 45) == [10, 15, 16]
    # a column at its floor gives no more: the other one takes the rest
    assert narrowed_widths([10, 30, 20], [10, 4, 18], frozenset({1, 2}), 40) == [10, 8, 18]
    # a fixed column never narrows
    assert narrowed_widths([30, 20], [30, 4], frozenset({1}), 20) == [30, 4]


def test_a_table_too_wide_at_its_floors_is_printed_at_the_width_it_needs() -> None:
    widths = narrowed_widths([40, 30], [40, 8], frozenset({1}), 20)
    assert widths == [40, 8]
    assert table_width(widths) == 50
    lines, _ = layout(
        ("id", "note"), [["x" * 40, "a few short words here"]], width=20, wrap=frozenset({1})
    )
    assert lines[2] == "x" * 40 + "  a few"  # the fixed column is never cut


def test_a_column_floor_is_its_longest_word_up_to_folded_word() -> None:
    assert floor_width(["a bb ccc"]) == 3
    assert floor_width(["x" * 40]) == FOLDED_WORD


def test_wrapped_words() -> None:
    assert wrapped_words("the tile shape is one the family's", 14) == [
        "the tile shape",
        "is one the",
        "family's",
    ]
    # a word longer than the column starts its own line and is folded
    assert wrapped_words("see cudaOccSubPartitionsPerMultiprocessor", 16) == [
        "see",
        "cudaOccSubPartit",
        "ionsPerMultiproc",
        "essor",
    ]
    assert wrapped_words("", 10) == [""]


@pytest.mark.parametrize("coloured", [False, True])
def test_bold_header_and_first_row_only_in_colour(
    monkeypatch: pytest.MonkeyPatch, coloured: bool
) -> None:
    monkeypatch.setattr(terminal, "colour", lambda: coloured)
    lines = terminal.table_lines(
        ("a", "b"), [["1", "2"], ["3", "4"]], first_row_style="bold", columns=80
    )
    bold = [line.startswith(terminal.BOLD) for line in lines]
    assert bold == ([True, False, True, False] if coloured else [False] * 4)
    plain = [line.replace(terminal.BOLD, "").replace(terminal.RESET, "") for line in lines]
    assert plain == ["a  b", "-- -", "1  2", "3  4"]
