"""`tilesolve-cli`: ask the solver from the shell, in-process or from a tilesolve server.

    tilesolve-cli solve --hardware h100-sxm --head-dim 128 --seq-len 8192 --causal
    tilesolve-cli hardware list
    tilesolve-cli occupancy --hardware a100 --threads 128 --regs 96 --smem 49152
    tilesolve-cli solve --hardware a100 --head-dim 128 --seq-len 4096 --server 127.0.0.1:50051

This module is the entry point: it builds the parser from the commands' modules (`cmd_solve`,
`cmd_hardware`, `cmd_occupancy`, `cmd_memory`, `cmd_simulate`) and turns their errors into exit
codes. Results go to stdout (a table, or exactly one JSON document with `--json`); errors go to
stderr. The solver (numpy, pydantic, and lazily ortools) is imported only by the commands that
use it, so `--help` starts fast; a command's own `--help` reads the options' ranges and values
from the solver's schemas (`field_help`). Exit codes are the contract in docs/cli.md ("Exit
codes").
What the commands share is in `cli_common`; `--server` is `cli_remote`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import answer_cache, startup, terminal
from .cli_common import (
    EXIT_CODES_EPILOG,
    EXIT_INFEASIBLE,
    EXIT_INTERNAL,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    CliExit,
    CliInputError,
    ErrorLine,
)
from .cli_remote import cli_field, server_violations
from .cmd_calibrate import add_calibrate_parser
from .cmd_hardware import add_hardware_parser
from .cmd_memory import add_memory_parser
from .cmd_occupancy import add_occupancy_parser
from .cmd_portfolio import add_portfolio_parser
from .cmd_simulate import add_simulate_parser
from .cmd_solve import add_solve_parser
from .cmd_table import add_table_parser
from .field_help import SchemaHelpFormatter
from .suggest import unknown_option, with_suggestion

# The entry point, and the names tests and callers use from here.
__all__ = ["ErrorLine", "build_parser", "main", "server_violations"]

_EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for SIGPIPE


# ---- the parser ----------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors in the CLI's one-line `error:` form instead of a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INVALID, f"error: {with_suggestion(message)} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tilesolve-cli",
        description="Choose FlashAttention tile sizes for an accelerator (solved in-process, "
        "or by a tilesolve server with --server HOST:PORT).",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=SchemaHelpFormatter,
        allow_abbrev=False,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_solve_parser(subparsers)
    add_hardware_parser(subparsers)
    add_occupancy_parser(subparsers)
    add_memory_parser(subparsers)
    add_simulate_parser(subparsers)
    add_portfolio_parser(subparsers)
    add_table_parser(subparsers)
    add_calibrate_parser(subparsers)
    return parser


# ---- entry point ---------------------------------------------------------------------------


def _report(lines: Sequence[ErrorLine]) -> int:
    for v in lines:
        print(f"error: {v.field}: {v.description}", file=sys.stderr)
    return EXIT_INVALID


def _run(argv: Sequence[str] | None, own_process: bool) -> int:
    """One CLI call. `own_process`: the call is this process's own command line (the console
    script): it uses the answer cache and sets the process's start-up variables (`startup`)."""
    parser = build_parser()
    given = sys.argv[1:] if argv is None else list(argv)
    unknown = unknown_option(parser, given)
    if unknown is not None:  # before argparse, which would report a missing option instead
        print(f"error: {unknown}", file=sys.stderr)
        return EXIT_INVALID
    try:
        args = parser.parse_args(given)
    except SystemExit as exc:  # --help, or a usage error argparse has already printed
        return exc.code if isinstance(exc.code, int) else EXIT_INVALID
    terminal.set_wide(bool(getattr(args, "wide", False)))
    if own_process:  # before the handler loads numpy and pydantic's schemas
        startup.configure_process(args.command)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_INVALID

    key = answer_cache.cache_key(args) if own_process else None
    cached = answer_cache.lookup(key) if key is not None else None
    if cached is not None:  # a repeated question: its output, without loading the solver
        return cached.replay()

    from tilesolve.solver import InvalidRequestError, TilesolveError
    from tilesolve.solver.errors import DeadlineExceededError

    try:
        with answer_cache.recording() as (out, err):
            result: int = handler(args)
        if key is not None and result in (EXIT_OK, EXIT_INFEASIBLE):
            answer_cache.store(
                key, answer_cache.CachedRun(result, out.copy.getvalue(), err.copy.getvalue())
            )
        return result
    except CliInputError as exc:
        return _report(exc.lines)
    except CliExit as exc:
        print(exc.line, file=sys.stderr)
        return exc.code
    except InvalidRequestError as exc:
        # The solver names its fields; the CLI names the flag's word (`--param` -> param).
        return _report([ErrorLine(cli_field(v.field), v.description) for v in exc.violations])
    except DeadlineExceededError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except TilesolveError as exc:  # e.g. a model invariant broken: a bug, not bad input
        print(f"internal error (please report): {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script passes it to `sys.exit`). The
    console script (argv None: the process's own command line) uses the answer cache
    (`answer_cache`) and sets its process's start-up variables (`startup`); a call with an
    argument list from Python does neither."""
    try:
        code = _run(argv, own_process=argv is None)
        if argv is None:
            startup.before_exit()
        return code
    except BrokenPipeError:
        # stdout's reader went away (`| head`): silence the flush at interpreter exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return _EXIT_BROKEN_PIPE
    except Exception as exc:
        print(f"internal error (please report): {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        terminal.set_wide(False)  # one call's --wide (main may be called again in-process)


if __name__ == "__main__":
    sys.exit(main())
