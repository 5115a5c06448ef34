"""What every `tilesolve-cli` command shares: exit codes, bad input as `error: <field>: ...`
lines (`ErrorLine`), printing, and the pieces of the parser.

Numbers are read as text and handed to the solver's pydantic schemas, so every bad value is
reported by the schema that owns it, naming the field and what is allowed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .field_help import FieldChoices, FieldHelp, SchemaHelpFormatter

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from tilesolve.solver import HardwareSpec

EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_INVALID = 2
EXIT_UNAVAILABLE = 3  # server unreachable, or the deadline passed before any answer
EXIT_INTERNAL = 4

EXIT_CODES_EPILOG = """\
exit codes:
  0  an answer was printed
  1  no feasible configuration (the output explains why and what is nearest);
     for occupancy: not one block of the launch fits on an SM (0 blocks per SM);
     for simulate: the error exceeds the dtype's tolerance
  2  invalid input or unknown name (stderr names the field and the allowed values)
  3  server unreachable, or the time limit passed before any configuration was found
  4  internal error (a bug: please report it with the command line)
"""

# Flags whose dest is not simply the flag with '-' -> '_'.
_FLAG_FOR_FIELD = {
    "time_limit_s": "--time-limit",
    "timeout_s": "--timeout",
    "parameter_pins": "--param",
}


@dataclass(frozen=True)
class ErrorLine:
    """One bad input, as the CLI prints it: `error: <field>: <description>`. `field` is the
    user's word for the input (a flag's name, `FILE:LINE`, `server`); the solver's and the
    server's `FieldViolation`s name request paths and become these lines (`cli_field`)."""

    field: str
    description: str


class CliInputError(Exception):
    """Input the command cannot use; every line is reported, then exit 2."""

    def __init__(self, lines: Sequence[ErrorLine]):
        self.lines = list(lines)
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in self.lines))


class CliExit(Exception):
    """A failure reported as one line on stderr with its own exit code (server trouble)."""

    def __init__(self, code: int, line: str):
        self.code = code
        self.line = line
        super().__init__(line)


# ---- error conversion ----------------------------------------------------------------------


def flag_for(field: str) -> str:
    return _FLAG_FOR_FIELD.get(field, "--" + field.replace("_", "-"))


def violations_from_pydantic(error: ValidationError, model: type[BaseModel]) -> list[ErrorLine]:
    """pydantic's errors as field violations saying what is allowed (the solver's one
    converter), each with the flag that sets the field."""
    from tilesolve.solver.violations import violations_from_validation

    out = []
    for v in violations_from_validation(error, model):
        description = v.description
        if v.field in model.model_fields:
            description += f" ({flag_for(v.field)})"
        out.append(ErrorLine(v.field, description))
    return out


# ---- checks the commands share -----------------------------------------------------------


def bounded_int(field: str, text: str, lo: int, hi: int, what: str = "") -> int | ErrorLine:
    """`text` as an integer in lo..hi, or a violation naming the field and the range."""
    allowed = f"must be an integer from {lo} to {hi}{what}"
    try:
        value = int(text.strip())
    except ValueError:
        return ErrorLine(field, f"{allowed}; got {text!r} ({flag_for(field)})")
    if not lo <= value <= hi:
        return ErrorLine(field, f"{allowed}; got {value} ({flag_for(field)})")
    return value


def catalog_device(name: str) -> HardwareSpec:
    from tilesolve.solver import InvalidRequestError, get_hardware

    try:
        return get_hardware(name)
    except InvalidRequestError as exc:
        raise CliInputError([ErrorLine(v.field, v.description) for v in exc.violations]) from exc


def plot_violations(plot: str | None) -> list[ErrorLine]:
    """What stops `--plot FILE` from being written, checked before solving: the suffix,
    matplotlib (the optional `plot` extra), the file's folder."""
    if plot is None:
        return []
    from .plots import PlotUnavailableError, plot_format, require_matplotlib

    path = Path(plot)
    try:
        plot_format(path)
    except ValueError as exc:
        return [ErrorLine("plot", f"{exc} (--plot)")]
    try:
        require_matplotlib()
    except PlotUnavailableError as exc:
        return [ErrorLine("plot", str(exc))]
    folder = path.parent
    if not folder.is_dir():
        return [ErrorLine("plot", f"folder {str(folder)!r} does not exist (--plot)")]
    return []


# ---- output --------------------------------------------------------------------------------


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")


def print_lines(lines: Sequence[str]) -> None:
    sys.stdout.write("\n".join(lines) + "\n")


# ---- parsing -------------------------------------------------------------------------------

# The problem's shape options, which solve, memory and simulate all take (add_shape_arguments),
# and the problem options of solve, which adds the phase and dropout.
SHAPE_FIELDS = (
    "batch",
    "heads",
    "kv_heads",
    "seq_len",
    "seq_len_kv",
    "head_dim",
    "head_dim_v",
    "dtype",
)
PROBLEM_FIELDS = (*SHAPE_FIELDS, "phase", "dropout")


def given_fields(args: argparse.Namespace, fields: Sequence[str]) -> dict[str, Any]:
    """The fields the user gave, as typed text (stripped); the schema parses and bounds them."""
    out: dict[str, Any] = {}
    for name in fields:
        value = getattr(args, name)
        if value is not None:
            out[name] = value.strip() if isinstance(value, str) else value
    return out


def add_subcommand(
    subparsers: Any, name: str, help_text: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=EXIT_CODES_EPILOG,
        formatter_class=SchemaHelpFormatter,
        allow_abbrev=False,
    )
    parser.set_defaults(handler=handler)
    parser.add_argument(
        "--wide",
        action="store_true",
        help="tables at their full width, one line per row, nothing wrapped (default: text "
        "fits $COLUMNS, else the terminal, else 80 columns)",
    )
    return parser


def add_shape_arguments(group: Any, seq_len_note: str | None = None) -> None:
    """The problem options solve, memory and simulate share, their help from the schema (all
    read as text: the schema validates them). `seq_len_note` set makes --seq-len optional,
    the note saying when it is needed."""
    group.add_argument("--batch", metavar="N", help=FieldHelp("problem", "batch"))
    group.add_argument("--heads", metavar="N", help=FieldHelp("problem", "heads"))
    group.add_argument("--kv-heads", metavar="N", help=FieldHelp("problem", "kv_heads"))
    group.add_argument(
        "--seq-len",
        required=seq_len_note is None,
        metavar="N",
        help=FieldHelp("problem", "seq_len", seq_len_note or ""),
    )
    group.add_argument("--seq-len-kv", metavar="N", help=FieldHelp("problem", "seq_len_kv"))
    group.add_argument(
        "--head-dim", required=True, metavar="D", help=FieldHelp("problem", "head_dim")
    )
    group.add_argument("--head-dim-v", metavar="D", help=FieldHelp("problem", "head_dim_v"))
    group.add_argument(
        "--dtype",
        choices=FieldChoices("problem", "dtype"),
        metavar="DTYPE",
        help=FieldHelp("problem", "dtype"),
    )
    group.add_argument("--causal", action="store_true", help=FieldHelp("problem", "causal"))
