"""'Did you mean' for a mistyped name (a device, a family, a dtype, a subcommand, an option):
the standard library's difflib, the one place that decides how close is close enough."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# difflib's similarity ratio (0 to 1) a known name must reach to be suggested.
CUTOFF = 0.6


def closest(word: str, choices: Iterable[str], meaning: Mapping[str, str] | None = None) -> str:
    """The known name closest to `word` (compared case-insensitively), or '' when none is
    close; `meaning` maps an alias to the name it stands for (the suggestion is that name)."""
    import difflib  # here: only a mistyped name pays for it

    folded = {choice.lower(): choice for choice in choices}
    match = difflib.get_close_matches(word.strip().lower(), list(folded), n=1, cutoff=CUTOFF)
    if not match:
        return ""
    found = folded[match[0]]
    return (meaning or {}).get(found, found)


def did_you_mean(
    word: str, choices: Iterable[str], meaning: Mapping[str, str] | None = None
) -> str:
    """' (did you mean X?)' for the closest known name, or ''."""
    found = closest(word, choices, meaning)
    return f" (did you mean {found}?)" if found else ""


def close_names(
    word: str, choices: Iterable[str], meaning: Mapping[str, str] | None = None, n: int = 3
) -> list[str]:
    """Up to `n` known names close to `word` (case-insensitively; an alias counts as the name
    it stands for in `meaning`), closest first, each once."""
    import difflib

    folded = {choice.lower(): choice for choice in choices}
    found: list[str] = []
    for match in difflib.get_close_matches(
        word.strip().lower(), list(folded), n=3 * n, cutoff=CUTOFF
    ):
        name = (meaning or {}).get(folded[match], folded[match])
        if name not in found:
            found.append(name)
    return found[:n]
