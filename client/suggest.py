"""'Did you mean' for the command line: an unknown option (`--hardwre`) found before argparse
reports what is missing, and a mistyped choice or subcommand. The closeness rule is the
solver's (`tilesolve.solver.names`), imported only when something is mistyped."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def _options_and_commands(
    parser: argparse.ArgumentParser,
) -> tuple[set[str], dict[str, argparse.ArgumentParser]]:
    """A parser's option strings and its subcommands (argparse keeps both in `_actions`; it
    has no public accessor)."""
    options: set[str] = set()
    commands: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        options.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            commands.update(action.choices)
    return options, commands


def unknown_option(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The error line for the first `--option` in `argv` that its (sub)command does not
    take, with the closest it does take; None when every option is known."""
    options, commands = _options_and_commands(parser)
    for token in argv:
        if token == "--":
            return None
        if token in commands:  # a subcommand: its own options from here on
            parser = commands[token]
            options, commands = _options_and_commands(parser)
        elif commands and not token.startswith("-"):
            return None  # not a subcommand: argparse's invalid choice (with a suggestion)
        elif token.startswith("--"):
            name = token.split("=", 1)[0]
            if name not in options:
                from tilesolve.solver.names import did_you_mean

                known = sorted(o for o in options if o.startswith("--"))
                suggestion = did_you_mean(name, known)
                return f"unknown option {name}{suggestion} (see '{parser.prog} --help')"
    return None


def with_suggestion(message: str) -> str:
    """argparse's `invalid choice: 'x' (choose from ...)` with the closest choice added."""
    match = _INVALID_CHOICE.search(message)
    if match is None:
        return message
    from tilesolve.solver.names import did_you_mean

    choices = re.findall(r"'([^']*)'", match.group(2))
    return message + did_you_mean(match.group(1), choices)
