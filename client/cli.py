"""`tilesolve-cli`: ask the solver from the shell, in-process or from a tilesolve server.

    tilesolve-cli solve --hardware h100-sxm --head-dim 128 --seq-len 8192 --causal
    tilesolve-cli hardware list
    tilesolve-cli occupancy --hardware a100 --threads 128 --regs 96 --smem 49152
    tilesolve-cli solve --hardware a100 --head-dim 128 --seq-len 4096 --server 127.0.0.1:50051

Numbers are read as text and handed to the solver's pydantic schemas, so every bad value is
reported by the schema that owns it, naming the field and what is allowed. Results go to
stdout (a table, or exactly one JSON document with `--json`); errors go to stderr. The solver
(numpy, pydantic, and lazily ortools) is imported only by the commands that use it, so
`--help` starts fast. Exit codes are the contract in DESIGN.md ("Exit codes"), plus 4.

With `--server HOST:PORT` every command asks the server through `tilesolve.client.remote`
(imported, with grpc, only then) and prints exactly what the in-process command prints, except
`solve_ms`, which is the server's. The request is still checked here first (same messages);
what only the server can judge (its catalog, the kernel family's rules) comes back as field
violations, printed the same way. An unreachable server or a passed deadline exits 3.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from tilesolve.solver import (
        AttentionProblem,
        HardwareSpec,
        Occupancy,
        SolveAnswer,
        SolveOptions,
    )

    from .remote import HardwareSummary, TileSolveClient, TilesolveRpcError

EXIT_OK = 0
EXIT_INFEASIBLE = 1
EXIT_INVALID = 2
EXIT_UNAVAILABLE = 3  # server unreachable, or the deadline passed before any answer
EXIT_INTERNAL = 4
_EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for SIGPIPE

EXIT_CODES_EPILOG = """\
exit codes:
  0  an answer was printed
  1  no feasible configuration (the output explains why and what is nearest);
     for simulate: the error exceeds the dtype's tolerance
  2  invalid input or unknown name (stderr names the field and the allowed values)
  3  server unreachable, or the time limit passed before any configuration was found
  4  internal error (a bug: please report it with the command line)
"""

MAX_SMEM_BYTES = 1 << 24  # 16 MiB: beyond any shared memory a block can have
MAX_ISA_REGS = 255

# Flags whose dest is not simply the flag with '-' -> '_'.
_FLAG_FOR_FIELD = {"time_limit_s": "--time-limit", "timeout_s": "--timeout"}

DEFAULT_TIMEOUT_S = 30.0  # --timeout; `solve` allows at least its --time-limit plus 10 s
MAX_TIMEOUT_S = 3600.0


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


class CliExit(Exception):
    """A failure reported as one line on stderr with its own exit code (server trouble)."""

    def __init__(self, code: int, line: str):
        self.code = code
        self.line = line
        super().__init__(line)


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


# ---- remote mode ---------------------------------------------------------------------------

_REMOTE_ONLY_FLAGS = (
    ("tls", "--tls"),
    ("tls_ca", "--tls-ca"),
    ("tls_cert", "--tls-cert"),
    ("tls_key", "--tls-key"),
    ("timeout_s", "--timeout"),
)

# Request paths of the service -> the CLI's field names (as the in-process errors print them).
_WIRE_FIELD_PREFIXES = ("problem.", "options.")
_WIRE_FIELDS = {
    "hardware.name": "hardware",
    "name": "hardware",  # GetHardwareRequest.name
    "smem_bytes": "smem",
    "carveout_percent": "carveout",
}


@dataclass(frozen=True)
class Remote:
    """Where and how to reach a tilesolve server (`--server` and its companions)."""

    target: str
    timeout_s: float | None
    tls: bool
    root_ca: bytes | None
    client_cert: bytes | None
    client_key: bytes | None


def _read_file(field: str, path: str) -> bytes | Violation:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        return Violation(field, f"cannot read {path!r}: {exc.strerror or exc} ({_flag(field)})")


def remote_settings(args: argparse.Namespace) -> Remote | None:
    """The server to ask, or None for in-process; CliInputError for unusable flags."""
    server = getattr(args, "server", None)
    if server is None:
        given = [flag for dest, flag in _REMOTE_ONLY_FLAGS if getattr(args, dest, None)]
        if given:
            raise CliInputError(
                [
                    Violation(
                        "server",
                        f"{', '.join(given)} only apply to a server; add --server HOST:PORT "
                        "(without it the command runs in-process)",
                    )
                ]
            )
        return None
    violations: list[Violation] = []
    target = server.strip()
    if not target:
        violations.append(Violation("server", "must be HOST:PORT, e.g. 127.0.0.1:50051"))
    timeout_s: float | None = None
    if args.timeout_s is not None:
        allowed = f"must be a number of seconds > 0 and <= {MAX_TIMEOUT_S:g} (--timeout)"
        try:
            timeout_s = float(args.timeout_s.strip())
        except ValueError:
            violations.append(Violation("timeout_s", f"{allowed}; got {args.timeout_s!r}"))
        else:
            if not 0 < timeout_s <= MAX_TIMEOUT_S:
                violations.append(Violation("timeout_s", f"{allowed}; got {timeout_s:g}"))
    files: dict[str, bytes | None] = {}
    for field in ("tls_ca", "tls_cert", "tls_key"):
        path = getattr(args, field)
        read = None if path is None else _read_file(field, path)
        if isinstance(read, Violation):
            violations.append(read)
        files[field] = read if isinstance(read, bytes) else None
    if (args.tls_cert is None) != (args.tls_key is None):
        missing = "tls_key" if args.tls_key is None else "tls_cert"
        violations.append(
            Violation(missing, "mutual TLS needs both --tls-cert and --tls-key (PEM files)")
        )
    if violations:
        raise CliInputError(violations)
    return Remote(
        target=target,
        timeout_s=timeout_s,
        tls=bool(args.tls) or any(files.values()),
        root_ca=files["tls_ca"],
        client_cert=files["tls_cert"],
        client_key=files["tls_key"],
    )


def _cli_field(path: str) -> str:
    """'problem.head_dim' -> 'head_dim', 'hardware.name' -> 'hardware'."""
    for prefix in _WIRE_FIELD_PREFIXES:
        if path.startswith(prefix):
            path = path[len(prefix) :]
            break
    return _WIRE_FIELDS.get(path, path)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def server_violations(error: TilesolveRpcError, default_field: str) -> list[Violation]:
    """A server's INVALID_ARGUMENT / NOT_FOUND as the CLI's field violations."""
    if error.violations:
        return [Violation(_cli_field(v.field), v.description) for v in error.violations]
    message = error.message
    field = default_field
    head, sep, rest = message.partition(": ")
    if sep and _cli_field(head) in (default_field, "hardware"):  # "hardware: unknown ..."
        field, message = _cli_field(head), rest
    return [Violation(field, message)]


def _from_rpc(error: TilesolveRpcError, remote: Remote, timeout_s: float) -> Exception:
    """The CLI's error for a failed call: exit 2 (bad input), 3 (server trouble) or 4."""
    import grpc

    code = error.code
    detail = f"{code.name}: {_one_line(error.message)}"
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return CliInputError(server_violations(error, "request"))
    if code is grpc.StatusCode.NOT_FOUND:
        return CliInputError(server_violations(error, "hardware"))
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        if error.message.startswith("time_limit_s:"):  # the solver's own limit, as in-process
            return CliExit(EXIT_UNAVAILABLE, f"error: {_one_line(error.message)}")
        return CliExit(
            EXIT_UNAVAILABLE,
            f"error: server: no answer from {remote.target} within {timeout_s:g} s ({detail}); "
            "raise --timeout",
        )
    if code is grpc.StatusCode.UNAVAILABLE:
        return CliExit(EXIT_UNAVAILABLE, f"error: server: cannot reach {remote.target} ({detail})")
    if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS):
        return CliExit(
            EXIT_INTERNAL, f"internal error (please report): server {remote.target}: {detail}"
        )
    return CliExit(EXIT_UNAVAILABLE, f"error: server: {remote.target} refused the call ({detail})")


@contextmanager
def asking(remote: Remote, timeout_s: float | None = None) -> Iterator[TileSolveClient]:
    """A client for `remote`; a failed call leaves as the CLI's CliInputError or CliExit."""
    from .remote import TileSolveClient, TilesolveRpcError

    budget = remote.timeout_s or timeout_s or DEFAULT_TIMEOUT_S
    try:
        with TileSolveClient(
            remote.target,
            timeout_s=budget,
            tls=remote.tls,
            root_ca=remote.root_ca,
            client_cert=remote.client_cert,
            client_key=remote.client_key,
        ) as client:
            yield client
    except TilesolveRpcError as exc:
        raise _from_rpc(exc, remote, budget) from exc


def _remote_spec(
    client: TileSolveClient, name: str, violations: list[Violation]
) -> HardwareSpec | None:
    """The server's entry for `name`; an unknown name heads `violations` (reported together
    with the others, in the in-process order). If the server cannot be asked, input already
    known to be bad wins."""
    from .remote import DeadlineError, InvalidArgumentError, NotFoundError, UnavailableError

    try:
        return client.hardware_spec(name)
    except (NotFoundError, InvalidArgumentError) as exc:
        violations[:0] = server_violations(exc, "hardware")
        return None
    except (UnavailableError, DeadlineError):
        if violations:
            raise CliInputError(violations) from None
        raise


def _summary_dict(summary: HardwareSummary) -> dict[str, object]:
    """A server's catalog entry as the `hardware list --json` object (`hardware_summary`)."""
    units = summary.compute_units
    return {
        "name": summary.name,
        "display_name": summary.display_name,
        "vendor": summary.vendor,
        "arch": summary.arch,
        "compute_capability": summary.compute_capability,
        "sm_count": units if summary.arch == "cuda" else None,
        "ai_core_count": units if summary.arch == "ascend" else None,
        "default_kernel": summary.default_kernel,
        "aliases": list(summary.aliases),
    }


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

    remote = remote_settings(args)
    violations: list[Violation] = []
    spec = None
    if remote is None:
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
    pictures = args.plot is not None or args.explain
    not_local: list[Violation] = []
    if pictures:
        violations.extend(_plot_violations(args.plot))
        if remote is not None:  # the heatmap is computed here, from the local catalog
            try:
                spec = _resolve_hardware(args.hardware)
            except CliInputError as exc:
                not_local = [
                    Violation(
                        v.field,
                        f"{v.description} (--plot and --explain compute the heatmap "
                        "in-process, from the local catalog)",
                    )
                    for v in exc.violations
                ]
    if remote is not None:
        code = _solve_remote(args, remote, violations, problem, options)
        if not_local:  # the server knows the name (it answered), this catalog does not
            raise CliInputError(not_local)
    else:
        if violations:
            raise CliInputError(violations)
        assert spec is not None and problem is not None and options is not None
        # InvalidRequestError (family rules) and DeadlineExceededError are reported by _run.
        code = _print_answer(args, solve(problem, spec, options), spec)
    if pictures:
        assert spec is not None and problem is not None and options is not None
        _draw_pictures(args, problem, spec, options)
    return code


def _plot_violations(plot: str | None) -> list[Violation]:
    """What stops `--plot FILE` from being written, checked before solving: the suffix,
    matplotlib (the optional `plot` extra), the file's folder."""
    if plot is None:
        return []
    from .plots import PlotUnavailableError, plot_format, require_matplotlib

    path = Path(plot)
    try:
        plot_format(path)
    except ValueError as exc:
        return [Violation("plot", f"{exc} (--plot)")]
    try:
        require_matplotlib()
    except PlotUnavailableError as exc:
        return [Violation("plot", str(exc))]
    folder = path.parent
    if not folder.is_dir():
        return [Violation("plot", f"folder {str(folder)!r} does not exist (--plot)")]
    return []


def _draw_pictures(
    args: argparse.Namespace,
    problem: AttentionProblem,
    spec: HardwareSpec,
    options: SolveOptions,
) -> None:
    """`--explain` and `--plot`, after the answer: the heatmap of the same request, always
    computed in-process. With --json the text heatmap goes to stderr (stdout stays one JSON
    document)."""
    from tilesolve.solver.heatmap import heatmap_grid

    from .plots import plot_solve_heatmap, solve_plot_title, text_heatmap

    grid = heatmap_grid(problem, spec, options)
    if args.explain:
        text = text_heatmap(grid)
        if args.json:
            print(text, file=sys.stderr)
        else:
            _print_lines(["", text])
    if args.plot is not None:
        path = Path(args.plot)
        try:
            plot_solve_heatmap(grid, path, solve_plot_title(problem, grid))
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise CliInputError(
                [Violation("plot", f"cannot write {args.plot!r}: {reason}")]
            ) from exc
        sys.stdout.flush()
        print(f"plot: heatmap written to {args.plot}", file=sys.stderr)


def _solve_remote(
    args: argparse.Namespace,
    remote: Remote,
    violations: list[Violation],
    problem: AttentionProblem | None,
    options: SolveOptions | None,
) -> int:
    """`solve` on a server: the hardware name is the server's to resolve (its catalog), and
    the family's rules come back as field violations; everything is reported together."""
    time_limit_s = options.time_limit_s if options is not None else 0.0
    with asking(remote, max(DEFAULT_TIMEOUT_S, time_limit_s + 10.0)) as client:
        spec = _remote_spec(client, args.hardware, violations)
        if violations:
            raise CliInputError(violations)
        assert spec is not None and problem is not None and options is not None
        answer = client.solve(problem, args.hardware, options)
    return _print_answer(args, answer, spec)


def _print_answer(args: argparse.Namespace, answer: SolveAnswer, spec: HardwareSpec) -> int:
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
    from .render import hardware_list_report, hardware_summary

    remote = remote_settings(args)
    summaries: list[dict[str, object]]
    if remote is None:
        from tilesolve.solver import CATALOG_VERSION, load_catalog

        summaries = [hardware_summary(load_catalog()[name]) for name in sorted(load_catalog())]
        catalog_version = CATALOG_VERSION
    else:
        with asking(remote) as client:
            catalog = client.hardware_catalog()
        summaries = [_summary_dict(h) for h in sorted(catalog.hardware, key=lambda h: h.name)]
        catalog_version = catalog.catalog_version
    if args.json:
        _print_json(summaries)
    else:
        _print_lines(hardware_list_report(summaries, catalog_version))
    return EXIT_OK


def cmd_hardware_show(args: argparse.Namespace) -> int:
    from .render import hardware_show_report, ordered_sources

    remote = remote_settings(args)
    if remote is None:
        spec = _resolve_hardware(args.name)
    else:
        with asking(remote) as client:
            spec = client.hardware_spec(args.name)
    if args.json:
        _print_json(spec.model_dump(mode="json") | {"sources": ordered_sources(spec)})
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


def _not_cuda(spec: HardwareSpec, cuda_names: Sequence[str]) -> CliInputError:
    return CliInputError(
        [
            Violation(
                "hardware",
                f"{spec.name} is an {spec.arch} device; occupancy (resident blocks per "
                "SM) is a CUDA notion, allowed: a CUDA device such as " + ", ".join(cuda_names),
            )
        ]
    )


def cmd_occupancy(args: argparse.Namespace) -> int:

    remote = remote_settings(args)
    if remote is None:
        from tilesolve.solver import occupancy

        spec = _resolve_hardware(args.hardware)
        if spec.sm is None:
            raise _not_cuda(spec, [n for n, s in _catalog_items() if s.arch == "cuda"])
        threads, regs, smem, carveout = _occupancy_launch(args, spec)
        occ = occupancy(spec.sm, threads, regs, smem, carveout)
    else:
        with asking(remote) as client:
            spec = client.hardware_spec(args.hardware)
            if spec.sm is None:
                cuda = sorted(h.name for h in client.hardware() if h.arch == "cuda")
                raise _not_cuda(spec, cuda)
            threads, regs, smem, carveout = _occupancy_launch(args, spec)
            occ = client.occupancy(
                spec.name, threads, regs, smem, None if carveout < 0 else carveout
            )
    _print_occupancy(args, spec, occ, threads, regs, smem, carveout)
    return EXIT_OK


def _occupancy_launch(args: argparse.Namespace, spec: HardwareSpec) -> tuple[int, int, int, int]:
    """(threads, regs, smem, carveout) checked against the device's limits."""
    sm, _ = spec.cuda
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
    return threads, regs, smem, carveout


def _print_occupancy(
    args: argparse.Namespace,
    spec: HardwareSpec,
    occ: Occupancy,
    threads: int,
    regs: int,
    smem: int,
    carveout: int,
) -> None:
    from .render import occupancy_report

    sm, _ = spec.cuda
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


def add_shape_arguments(group: Any, seq_len_help: str | None = None) -> None:
    """The problem options solve, memory and simulate share (all read as text: the schema
    validates them). `seq_len_help` set means --seq-len is optional with that help."""
    group.add_argument("--batch", metavar="N", help="sequences in the batch (default 1)")
    group.add_argument("--heads", metavar="N", help="query heads (default 1)")
    group.add_argument("--kv-heads", metavar="N", help="key/value heads (default: --heads)")
    if seq_len_help is None:
        group.add_argument(
            "--seq-len", required=True, metavar="N", help="query tokens per sequence"
        )
    else:
        group.add_argument("--seq-len", metavar="N", help=seq_len_help)
    group.add_argument("--seq-len-kv", metavar="N", help="key/value tokens (default: --seq-len)")
    group.add_argument("--head-dim", required=True, metavar="D", help="Q/K head dimension")
    group.add_argument("--head-dim-v", metavar="D", help="V/O head dimension (default: --head-dim)")
    group.add_argument(
        "--dtype", choices=("fp16", "bf16", "fp8"), help="element type (default fp16)"
    )
    group.add_argument("--causal", action="store_true", help="causal (bottom-right) mask")


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
    add_shape_arguments(prob)
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
        "--explain",
        action="store_true",
        help="after the answer, print a text heatmap of predicted TFLOP/s over (BLOCK_M, "
        "BLOCK_N), infeasible tiles named by the constraint that removes them (with --json: "
        "on stderr)",
    )
    out.add_argument(
        "--plot",
        metavar="FILE",
        help="after the answer, draw that heatmap to FILE (.png or .svg; needs matplotlib: "
        "pip install 'tilesolve[plot]'); with --server the heatmap is computed in-process "
        "from the same request",
    )
    _add_remote(p)


def _add_remote(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "server (optional; without --server the command runs in-process)"
    )
    group.add_argument(
        "--server", metavar="HOST:PORT", help="ask this tilesolve server instead of solving here"
    )
    group.add_argument(
        "--tls", action="store_true", help="connect with TLS (the system's root certificates)"
    )
    group.add_argument(
        "--tls-ca", metavar="FILE", help="PEM root certificate(s) to trust (implies --tls)"
    )
    group.add_argument(
        "--tls-cert", metavar="FILE", help="PEM client certificate, for mutual TLS (with --tls-key)"
    )
    group.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    group.add_argument(
        "--timeout",
        dest="timeout_s",
        metavar="SECONDS",
        help=f"deadline of each call to the server, retries included (default "
        f"{DEFAULT_TIMEOUT_S:g}; for solve at least --time-limit + 10)",
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
    _add_remote(listing)
    show = _subparser(inner, "show", "every field of one device, with sources", cmd_hardware_show)
    show.add_argument("name", metavar="NAME", help="catalog name or alias")
    show.add_argument("--json", action="store_true", help="print the full description as JSON")
    _add_remote(show)


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
    _add_remote(p)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tilesolve-cli",
        description="Choose FlashAttention tile sizes for an accelerator (solved in-process, "
        "or by a tilesolve server with --server HOST:PORT).",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_solve(subparsers)
    _add_hardware(subparsers)
    _add_occupancy(subparsers)
    from .cmd_memory import add_memory_parser  # here: cmd_memory imports this module

    add_memory_parser(subparsers)
    from .cmd_simulate import add_simulate_parser  # here: cmd_simulate imports this module

    add_simulate_parser(subparsers)
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
    except CliExit as exc:
        print(exc.line, file=sys.stderr)
        return exc.code
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
