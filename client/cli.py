"""`tilesolve-cli`: ask the solver from the shell, in-process.

    tilesolve-cli solve --hardware h100-sxm --head-dim 128 --seq-len 8192 --causal
    tilesolve-cli hardware list
    tilesolve-cli occupancy --hardware a100 --threads 128 --regs 96 --smem 49152

Numbers are read as text and handed to the solver's pydantic schemas, so every bad value is
reported by the schema that owns it, naming the field and what is allowed. Results go to
stdout (a table, or exactly one JSON document with `--json`); errors go to stderr. The solver
(numpy, pydantic, and lazily ortools) is imported only by the commands that use it, so
`--help` starts fast. Exit codes are the contract in DESIGN.md ("Exit codes"), plus 4.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from tilesolve.solver import HardwareSpec

EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_INVALID = 2
EXIT_UNAVAILABLE = 3  # server unreachable, or the deadline passed before any answer
EXIT_INTERNAL = 4
_EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for SIGPIPE

EXIT_CODES_EPILOG = """\
exit codes:
  0  an answer was printed
  1  no feasible configuration (the output still explains why and what is nearest)
  2  invalid input or unknown name (stderr names the field and the allowed values)
  3  server unreachable, or the time limit passed before any configuration was found
  4  internal error (a bug: please report it with the command line)
"""

MAX_SMEM_BYTES = 1 << 24  # 16 MiB: beyond any shared memory a block can have
MAX_ISA_REGS = 255

# Flags whose dest is not simply the flag with '-' -> '_'.
_FLAG_FOR_FIELD = {"time_limit_s": "--time-limit"}

_REMOTE_MESSAGE = "remote mode arrives with the gRPC service; omit --server to solve in-process"


@dataclass(frozen=True)
class Violation:
    """One bad input, as printed: `error: <field>: <description>`."""

    field: str
    description: str


class CliInputError(Exception):
    """Input the command cannot use; every violation is reported, then exit 2."""

    def __init__(self, violations: Sequence[Violation]):
        self.violations = list(violations)
        super().__init__("; ".join(f"{v.field}: {v.description}" for v in self.violations))


# ---- error conversion ----------------------------------------------------------------------


def _flag(field: str) -> str:
    return _FLAG_FOR_FIELD.get(field, "--" + field.replace("_", "-"))


def _allowed_range(model: type[BaseModel], field: str) -> str | None:
    """'an integer from 1 to 1024' from the field's type and bounds, or None if unknown."""
    info = model.model_fields.get(field)
    if info is None:
        return None
    annotation = str(info.annotation)
    kind = "an integer" if "int" in annotation else "a number"
    lo = hi = ""
    for meta in info.metadata:
        for attr, text in (("ge", ">="), ("gt", ">")):
            if getattr(meta, attr, None) is not None:
                lo = f"{text} {_number(getattr(meta, attr))}"
        for attr, text in (("le", "<="), ("lt", "<")):
            if getattr(meta, attr, None) is not None:
                hi = f"{text} {_number(getattr(meta, attr))}"
    if lo.startswith(">=") and hi.startswith("<="):
        return f"{kind} from {lo[3:]} to {hi[3:]}"
    bounds = " and ".join(b for b in (lo, hi) if b)
    return f"{kind} {bounds}" if bounds else kind


def _number(value: float) -> str:
    """A bound as written: 16777216 stays 16777216, 0.0 becomes 0."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _guess_field(model: type[BaseModel], message: str) -> str | None:
    """The field a model-level rule is about: the first field name its message mentions."""
    best: tuple[int, str] | None = None
    for name in model.model_fields:
        match = re.search(rf"\b{re.escape(name)}\b", message)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), name)
    return best[1] if best else None


_NUMBER_ERRORS = {
    "int_parsing",
    "int_type",
    "int_from_float",
    "float_parsing",
    "float_type",
    "finite_number",
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
}


def violations_from_pydantic(error: ValidationError, model: type[BaseModel]) -> list[Violation]:
    """pydantic's errors as field violations saying what is allowed."""
    out = []
    for item in error.errors():
        loc = ".".join(str(part) for part in item["loc"])
        kind = item["type"]
        given = item.get("input")
        message = str(item["msg"])
        if kind == "value_error":
            message = message.removeprefix("Value error, ")
        field = loc or _guess_field(model, message) or model.__name__
        if kind in _NUMBER_ERRORS:
            allowed = _allowed_range(model, loc) if loc else None
            description = (
                f"must be {allowed}; got {given!r}" if allowed else f"{message}; got {given!r}"
            )
        elif kind in ("enum", "literal_error"):
            expected = item.get("ctx", {}).get("expected", "")
            description = f"must be one of {expected}; got {given!r}"
        elif kind == "missing":
            description = "is required"
        else:
            description = message
        if field in model.model_fields:
            description += f" ({_flag(field)})"
        out.append(Violation(field, description))
    return out


def _report_violations(violations: Sequence[Violation]) -> int:
    for v in violations:
        print(f"error: {v.field}: {v.description}", file=sys.stderr)
    return EXIT_INVALID


def _print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")


def _print_lines(lines: Sequence[str]) -> None:
    sys.stdout.write("\n".join(lines) + "\n")


def _resolve_hardware(name: str) -> HardwareSpec:
    from tilesolve.solver import InvalidRequestError, get_hardware

    try:
        return get_hardware(name)
    except InvalidRequestError as exc:
        raise CliInputError([Violation(v.field, v.description) for v in exc.violations]) from exc


# ---- solve ---------------------------------------------------------------------------------

_PROBLEM_FIELDS = (
    "batch",
    "heads",
    "kv_heads",
    "seq_len",
    "seq_len_kv",
    "head_dim",
    "head_dim_v",
    "dtype",
    "phase",
    "dropout",
)
_OPTION_FIELDS = (
    "kernel",
    "top_k",
    "engine",
    "block_m",
    "block_n",
    "num_warps",
    "num_stages",
    "max_smem",
    "min_blocks_per_sm",
    "time_limit_s",
)


def _given(args: argparse.Namespace, fields: Sequence[str]) -> dict[str, Any]:
    """The fields the user gave, as typed text (stripped); the schema parses and bounds them."""
    out: dict[str, Any] = {}
    for name in fields:
        value = getattr(args, name)
        if value is not None:
            out[name] = value.strip() if isinstance(value, str) else value
    return out


def cmd_solve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from tilesolve.solver import AttentionProblem, SolveOptions, solve

    violations: list[Violation] = []
    spec = None
    try:
        spec = _resolve_hardware(args.hardware)
    except CliInputError as exc:
        violations.extend(exc.violations)
    problem_input = _given(args, _PROBLEM_FIELDS) | {"causal": args.causal}
    options_input = _given(args, _OPTION_FIELDS) | {"require_divisible": args.require_divisible}
    problem = options = None
    try:
        problem = AttentionProblem.model_validate(problem_input)
    except ValidationError as exc:
        violations.extend(violations_from_pydantic(exc, AttentionProblem))
    try:
        options = SolveOptions.model_validate(options_input)
    except ValidationError as exc:
        violations.extend(violations_from_pydantic(exc, SolveOptions))
    if args.server is not None:
        violations.append(Violation("server", _REMOTE_MESSAGE))
    if violations:
        raise CliInputError(violations)
    assert spec is not None and problem is not None and options is not None

    # InvalidRequestError (family rules) and DeadlineExceededError are reported by _run.
    answer = solve(problem, spec, options)
    if answer.status.value == "feasible":
        print(
            "note: CP-SAT reached its time limit before proving the ranking "
            "(raise --time-limit or use --engine exhaustive)",
            file=sys.stderr,
        )
    if args.json:
        _print_json(answer.model_dump(mode="json"))
    else:
        from .render import solve_report

        _print_lines(solve_report(answer, spec))
    return EXIT_INFEASIBLE if answer.status.value == "infeasible" else EXIT_OK


# ---- hardware ------------------------------------------------------------------------------


def cmd_hardware_list(args: argparse.Namespace) -> int:
    from tilesolve.solver import CATALOG_VERSION, load_catalog

    from .render import hardware_list_report, hardware_summary

    specs = [load_catalog()[name] for name in sorted(load_catalog())]
    if args.json:
        _print_json([hardware_summary(spec) for spec in specs])
    else:
        _print_lines(hardware_list_report(specs, CATALOG_VERSION))
    return EXIT_OK


def cmd_hardware_show(args: argparse.Namespace) -> int:
    from .render import hardware_show_report

    spec = _resolve_hardware(args.name)
    if args.json:
        _print_json(spec.model_dump(mode="json"))
    else:
        _print_lines(hardware_show_report(spec))
    return EXIT_OK


# ---- occupancy -----------------------------------------------------------------------------


def _bounded_int(field: str, text: str, lo: int, hi: int, what: str = "") -> int | Violation:
    """`text` as an integer in lo..hi, or a violation naming the field and the range."""
    allowed = f"must be an integer from {lo} to {hi}{what}"
    try:
        value = int(text.strip())
    except ValueError:
        return Violation(field, f"{allowed}; got {text!r} ({_flag(field)})")
    if not lo <= value <= hi:
        return Violation(field, f"{allowed}; got {value} ({_flag(field)})")
    return value


def cmd_occupancy(args: argparse.Namespace) -> int:
    from tilesolve.solver import occupancy

    from .render import occupancy_report

    spec = _resolve_hardware(args.hardware)
    if spec.sm is None:
        raise CliInputError(
            [
                Violation(
                    "hardware",
                    f"{spec.name} is an {spec.arch} device; occupancy (resident blocks per "
                    "SM) is a CUDA notion, allowed: a CUDA device such as "
                    + ", ".join(n for n, s in _catalog_items() if s.arch == "cuda"),
                )
            ]
        )
    sm = spec.sm
    regs_max = min(sm.max_regs_per_thread, MAX_ISA_REGS)
    parsed = [
        _bounded_int(
            "threads",
            args.threads,
            1,
            sm.max_threads_per_block,
            f" (the most threads per block on {spec.name})",
        ),
        _bounded_int("regs", args.regs, 0, regs_max, " (registers per thread)"),
        _bounded_int("smem", args.smem, 0, MAX_SMEM_BYTES, " bytes of dynamic shared memory"),
        _bounded_int(
            "carveout", args.carveout, -1, 100, " (percent of the SM's shared memory; -1 default)"
        ),
    ]
    bad = [p for p in parsed if isinstance(p, Violation)]
    if bad:
        raise CliInputError(bad)
    threads, regs, smem, carveout = (int(p) for p in parsed if not isinstance(p, Violation))

    occ = occupancy(sm, threads, regs, smem, carveout)
    if args.json:
        _print_json(
            {
                "hardware": spec.name,
                "threads_per_block": threads,
                "regs_per_thread": regs,
                "dynamic_smem_bytes": smem,
                "carveout_percent": carveout,
                "blocks_per_sm": occ.blocks_per_sm,
                "limiter": occ.limiters[0].value if occ.limiters else None,
                "limiters": [x.value for x in occ.limiters],
                "limit_warps": occ.limit_warps,
                "limit_registers": occ.limit_registers,
                "limit_shared_memory": occ.limit_shared_memory,
                "limit_blocks": occ.limit_blocks,
                "occupancy": occ.occupancy_fraction,
                "warps_per_block": occ.warps_per_block,
                "active_warps_per_sm": occ.active_warps_per_sm,
                "max_warps_per_sm": occ.max_warps_per_sm,
                "regs_per_block": occ.regs_per_block,
                "smem_per_block_bytes": occ.smem_per_block_bytes,
                "reserved_smem_per_block_bytes": sm.reserved_smem_per_block_bytes,
                "smem_per_sm_config_bytes": occ.smem_per_sm_config_bytes,
            }
        )
    else:
        _print_lines(occupancy_report(spec, occ, threads, regs, smem, carveout))
    return EXIT_OK


def _catalog_items() -> list[tuple[str, HardwareSpec]]:
    from tilesolve.solver import load_catalog

    return sorted(load_catalog().items())


# ---- the parser ----------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's exit-code table as written."""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors in the CLI's one-line `error:` form instead of a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INVALID, f"error: {message} (see '{self.prog} --help')\n")


def _subparser(
    subparsers: Any, name: str, help_text: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=EXIT_CODES_EPILOG,
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    parser.set_defaults(handler=handler)
    return parser


def _add_solve(subparsers: Any) -> None:
    p = _subparser(
        subparsers, "solve", "rank the tile configurations of an attention problem", cmd_solve
    )
    hw = p.add_argument_group("hardware and kernel")
    hw.add_argument("--hardware", required=True, metavar="NAME", help="catalog name or alias")
    hw.add_argument(
        "--kernel",
        choices=("fa2", "triton", "fa3", "ascend"),
        help="kernel family (default: the hardware's default kernel)",
    )
    prob = p.add_argument_group("problem")
    prob.add_argument("--batch", metavar="N", help="sequences in the batch (default 1)")
    prob.add_argument("--heads", metavar="N", help="query heads (default 1)")
    prob.add_argument("--kv-heads", metavar="N", help="key/value heads (default: --heads)")
    prob.add_argument("--seq-len", required=True, metavar="N", help="query tokens per sequence")
    prob.add_argument("--seq-len-kv", metavar="N", help="key/value tokens (default: --seq-len)")
    prob.add_argument("--head-dim", required=True, metavar="D", help="Q/K head dimension")
    prob.add_argument("--head-dim-v", metavar="D", help="V/O head dimension (default: --head-dim)")
    prob.add_argument(
        "--dtype", choices=("fp16", "bf16", "fp8"), help="element type (default fp16)"
    )
    prob.add_argument("--causal", action="store_true", help="causal (bottom-right) mask")
    prob.add_argument(
        "--phase", choices=("forward", "backward", "decode"), help="phase (default forward)"
    )
    prob.add_argument(
        "--dropout",
        nargs="?",
        const="0.1",
        metavar="P",
        help="dropout probability (flag alone: 0.1; default 0)",
    )
    how = p.add_argument_group("solving")
    how.add_argument("--top-k", metavar="K", help="configurations to rank (default 5)")
    how.add_argument(
        "--engine", choices=("cpsat", "exhaustive"), help="cpsat (default) or the exhaustive oracle"
    )
    how.add_argument(
        "--time-limit", dest="time_limit_s", metavar="SECONDS", help="CP-SAT limit (default 10)"
    )
    rules = p.add_argument_group("pins and caps")
    rules.add_argument(
        "--require-divisible",
        action="store_true",
        help="seq_len and seq_len_kv must be multiples of block_m / block_n (no padding)",
    )
    rules.add_argument("--block-m", metavar="N", help="pin BLOCK_M")
    rules.add_argument("--block-n", metavar="N", help="pin BLOCK_N")
    rules.add_argument("--num-warps", metavar="N", help="pin warps per block")
    rules.add_argument("--num-stages", metavar="N", help="pin K/V pipeline stages")
    rules.add_argument("--max-smem", metavar="BYTES", help="cap on dynamic shared memory per block")
    rules.add_argument(
        "--min-blocks-per-sm", metavar="N", help="require this many resident blocks per SM"
    )
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON document")
    out.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="solve on a tilesolve server (not available yet: solves in-process without it)",
    )


def _add_hardware(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "hardware",
        help="the hardware catalog",
        description="the hardware catalog",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    inner = p.add_subparsers(dest="hardware_command", metavar="{list,show}", required=True)
    listing = _subparser(inner, "list", "list the catalog devices", cmd_hardware_list)
    listing.add_argument("--json", action="store_true", help="print a JSON list")
    show = _subparser(inner, "show", "every field of one device, with sources", cmd_hardware_show)
    show.add_argument("name", metavar="NAME", help="catalog name or alias")
    show.add_argument("--json", action="store_true", help="print the full description as JSON")


def _add_occupancy(subparsers: Any) -> None:
    p = _subparser(
        subparsers,
        "occupancy",
        "resident blocks per SM of one CUDA launch (NVIDIA's occupancy calculation)",
        cmd_occupancy,
    )
    p.add_argument("--hardware", required=True, metavar="NAME", help="a CUDA catalog device")
    p.add_argument("--threads", required=True, metavar="T", help="threads per block")
    p.add_argument("--regs", required=True, metavar="R", help="registers per thread")
    p.add_argument(
        "--smem",
        required=True,
        metavar="BYTES",
        help="dynamic shared memory per block (the reserved part is added)",
    )
    p.add_argument(
        "--carveout",
        default="-1",
        metavar="PCT",
        help="preferred shared-memory carveout, percent (default -1: the largest)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tilesolve-cli",
        description="Choose FlashAttention tile sizes for an accelerator (solved in-process).",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_solve(subparsers)
    _add_hardware(subparsers)
    _add_occupancy(subparsers)
    return parser


# ---- entry point ---------------------------------------------------------------------------


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has already printed
        return exc.code if isinstance(exc.code, int) else EXIT_INVALID
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_INVALID

    from tilesolve.solver import InvalidRequestError, TilesolveError
    from tilesolve.solver.errors import DeadlineExceededError

    try:
        result: int = handler(args)
        return result
    except CliInputError as exc:
        return _report_violations(exc.violations)
    except InvalidRequestError as exc:
        return _report_violations([Violation(v.field, v.description) for v in exc.violations])
    except DeadlineExceededError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except TilesolveError as exc:  # e.g. a model invariant broken: a bug, not bad input
        print(f"internal error (please report): {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script passes it to `sys.exit`)."""
    try:
        return _run(argv)
    except BrokenPipeError:
        # stdout's reader went away (`| head`): silence the flush at interpreter exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return _EXIT_BROKEN_PIPE
    except Exception as exc:
        print(f"internal error (please report): {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
