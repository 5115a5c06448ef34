"""`tilesolve-cli table`: a dispatch table over a grid, as JSON, a C++17 header or a Python
module (`tilesolve.solver.apps.dispatch_table`), for build systems.

    tilesolve-cli table --grid grid.toml --format cpp --output tiles.h
    tilesolve-cli table --grid grid.toml --check tiles.h        # 0 current, 1 stale, 2 invalid
    tilesolve-cli table --grid grid.toml --max-configs 4 ...    # entries from a K-portfolio

`--output` is rewritten only when its bytes change, so a build that depends on it does not
rebuild for nothing; `--stamp FILE` writes just what decides the table (versions, the grid's
hash, the settings), also only on change, which is what `cmake/TileSolve.cmake` depends on.
With `--server` every cell is solved by the server through chunked `SolveBatch` calls (and the
portfolio by its `Portfolio` RPC); the table is byte-identical to the in-process one when the
server runs the same model and catalog (the versions in the table are the server's).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cli_common import (
    EXIT_INFEASIBLE,
    EXIT_OK,
    CliInputError,
    ErrorLine,
    add_subcommand,
)
from .cli_remote import Remote, add_remote_arguments, asking, cli_field, remote_settings
from .cmd_portfolio import add_parallel_arguments, parallel_settings, parse_percent
from .files import MIB, check_nesting, output_folder, read_text, replace_file

if TYPE_CHECKING:
    from tilesolve.solver import FieldViolation
    from tilesolve.solver.apps.dispatch_table import CellResult, Format, Grid

_SUFFIX_FORMAT = {
    ".json": "json",
    ".h": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".py": "python",
}
SERVER_CHUNK = 200  # problems per SolveBatch call (at most the server's max_batch_size)
TABLE_MAX_BYTES = 64 * MIB  # a table to --check: the largest grid's, with room to spare


def add_table_parser(subparsers: Any) -> None:
    """Register `table` on the CLI's subparsers."""
    p = add_subcommand(
        subparsers,
        "table",
        "a dispatch table over a grid of shapes: JSON, a C++17 header or a Python module",
        cmd_table,
    )
    p.add_argument("--grid", required=True, metavar="FILE", help="the grid: a .toml or .json file")
    p.add_argument(
        "--hardware",
        metavar="NAMES",
        help="comma-separated devices, replacing the grid's list",
    )
    p.add_argument(
        "--format",
        choices=("json", "cpp", "python"),
        help="output format (default: from --output's suffix, .h/.hpp cpp, .py python; else json)",
    )
    p.add_argument("--output", metavar="FILE", help="write here (only if changed); default stdout")
    p.add_argument(
        "--mkdir",
        action="store_true",
        help="create the folder of --output or --stamp if it is missing (default: a missing "
        "folder is an error naming it)",
    )
    p.add_argument(
        "--namespace",
        metavar="NAME",
        help="C++ namespace of the header (default tilesolve_table)",
    )
    p.add_argument(
        "--max-configs",
        metavar="K",
        help="use at most K configurations per device (a portfolio over the grid's cells)",
    )
    p.add_argument(
        "--max-slowdown",
        metavar="PCT",
        help="with --max-configs: no cell more than PCT percent slower than its optimum",
    )
    p.add_argument(
        "--check",
        metavar="FILE",
        help="exit 0 if FILE is current for the grid, 1 if stale (saying what changed), "
        "2 if FILE or the grid is invalid; FILE's own format and settings are used",
    )
    p.add_argument(
        "--stamp",
        metavar="FILE",
        help="only write what decides the table (versions, grid hash, settings) to FILE, if "
        "changed (what cmake/TileSolve.cmake depends on)",
    )
    add_parallel_arguments(p)
    add_remote_arguments(p)


# ---- settings ------------------------------------------------------------------------------


def _format_for(args: argparse.Namespace) -> Format:
    if args.format is not None:
        chosen: Format = args.format
        return chosen
    if args.output is not None:
        found = _SUFFIX_FORMAT.get(Path(args.output).suffix.lower(), "json")
        return found  # type: ignore[return-value]
    return "json"


def _namespace(text: str | None) -> str:
    import re

    name = text or "tilesolve_table"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*", name):
        raise CliInputError(
            [ErrorLine("namespace", f"must be a C++ identifier (a::b allowed); got {name!r}")]
        )
    return name


def _max_configs(text: str | None) -> int | None:
    from .cli_common import bounded_int

    if text is None:
        return None
    found = bounded_int("max_configs", text, 1, 5000)
    if isinstance(found, ErrorLine):
        raise CliInputError([found])
    return found


def _hardware(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise CliInputError(
            [ErrorLine("hardware", f"must be comma-separated names, none empty; got {text!r}")]
        )
    return names


# ---- computing -----------------------------------------------------------------------------


def _local_document(
    grid: Grid,
    max_configs: int | None,
    slowdown: float | None,
    workers: int | None,
    scheduler: str | None,
    quiet: bool,
) -> dict[str, Any]:
    from tilesolve.solver.apps.dispatch_table import build_dispatch_table, build_portfolio_table

    from .parallel import evaluator
    from .progress import Meter, shown

    for name in grid.hardware:  # unknown names: exit 2 before any work
        from .cli_common import catalog_device

        catalog_device(name)
    with (
        Meter("table cells evaluated", shown(quiet)) as meter,
        evaluator(workers, scheduler, meter) as map_fn,
    ):
        if max_configs is None:
            return build_dispatch_table(grid, map_fn=map_fn)
        return build_portfolio_table(grid, max_configs, max_slowdown=slowdown, map_fn=map_fn)[0]


def _remote_document(
    grid: Grid, max_configs: int | None, slowdown: float | None, remote: Remote
) -> dict[str, Any]:
    """The same document, every cell solved by the server (chunked SolveBatch calls)."""
    from tilesolve.solver.apps.dispatch_table import (
        cell_from_answer,
        cell_options,
        cells,
        portfolio_request,
        portfolio_results,
        portfolio_summary,
        table_document,
    )
    from tilesolve.solver.apps.portfolio import PortfolioAnswer

    from .remote import TilesolveRpcError
    from .remote_portfolio import portfolio

    grid_cells = cells(grid)
    options = cell_options(grid)
    results: list[CellResult | list[FieldViolation]] = []
    with asking(remote, 600.0) as client:
        catalog = client.hardware_catalog()
        chunk = max(1, min(SERVER_CHUNK, catalog.max_batch_size))
        for start in range(0, len(grid_cells), chunk):
            part = grid_cells[start : start + chunk]
            answers = client.solve_batch([(c.problem, c.hardware, options) for c in part])
            for answer in answers:
                if isinstance(answer, TilesolveRpcError):
                    from tilesolve.solver import FieldViolation

                    results.append(
                        [
                            FieldViolation(cli_field(v.field), v.description)
                            for v in answer.violations
                        ]
                        or [FieldViolation("hardware", answer.message)]
                    )
                else:
                    results.append(cell_from_answer(answer))
        summary = None
        if max_configs is not None and not any(isinstance(r, list) for r in results):
            found: dict[str, PortfolioAnswer] = {}
            for name in grid.hardware:
                request = portfolio_request(grid, grid_cells, name, max_configs, slowdown)
                found[name] = portfolio(client, request, name)
            results = portfolio_results(grid, grid_cells, found, results)
            summary = portfolio_summary(found, max_configs, slowdown)
    return table_document(
        grid,
        grid_cells,
        results,
        summary,
        model_version=catalog.model_version,
        catalog_version=catalog.catalog_version,
    )


def _versions(remote: Remote | None) -> tuple[str, str]:
    if remote is None:
        from tilesolve.solver import CATALOG_VERSION, MODEL_VERSION

        return MODEL_VERSION, CATALOG_VERSION
    with asking(remote) as client:
        catalog = client.hardware_catalog()
    return catalog.model_version, catalog.catalog_version


def _write_if_changed(path: str, text: str, field: str) -> bool:
    """Replace `path` atomically (files.replace_file) when its bytes differ; True when it was
    written."""
    target = Path(path)
    try:
        if target.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        replace_file(target, text)
    except OSError as exc:
        raise CliInputError(
            [ErrorLine(field, f"cannot write {path!r}: {exc.strerror or exc}")]
        ) from None
    return True


# ---- the command ---------------------------------------------------------------------------


def cmd_table(args: argparse.Namespace) -> int:
    from tilesolve.solver import InvalidRequestError
    from tilesolve.solver.apps.dispatch_table import (
        TableFileError,
        check_table,
        emit,
        read_metadata,
    )

    remote = remote_settings(args)
    workers, scheduler = parallel_settings(args, remote is not None)
    for path, field in ((args.output, "output"), (args.stamp, "stamp")):
        if path is not None:
            output_folder(path, field, args.mkdir, "--mkdir")
    from .inputs import read_grid  # here: the CLI imports this module for its parser

    grid = read_grid(args.grid, _hardware(args.hardware))
    unstated = [name for name in ("batch", "heads") if name not in grid.model_fields_set]
    if unstated:
        print(
            f"note: {args.grid} gives no {' or '.join(unstated)}: every cell is solved for "
            f"batch {grid.batch} and heads {grid.heads}, which leaves most of a GPU's SMs idle "
            "and picks tiles for that; give the workload's batch and heads in the grid",
            file=sys.stderr,
        )
    fmt = _format_for(args)
    namespace = _namespace(args.namespace)
    max_configs = _max_configs(args.max_configs)
    slowdown = parse_percent(args.max_slowdown)
    if isinstance(slowdown, ErrorLine):
        raise CliInputError([slowdown])
    if slowdown is not None and max_configs is None:
        raise CliInputError([ErrorLine("max_slowdown", "needs --max-configs")])
    existing = None
    if args.check is not None:
        existing = read_text(args.check, "check", TABLE_MAX_BYTES)
        # What read_metadata parses as JSON: a JSON table whole, another its first line.
        parsed = existing if existing.lstrip().startswith("{") else existing.split("\n", 1)[0]
        check_nesting(args.check, parsed, "json")
        try:
            metadata = read_metadata(existing)
        except TableFileError as exc:
            raise CliInputError([ErrorLine("check", f"{args.check}: {exc}")]) from None
        fmt = metadata["format"]
        namespace = _namespace(metadata.get("namespace"))
        kept = metadata.get("portfolio") or {}
        max_configs = kept.get("max_configs")
        slowdown = kept.get("max_slowdown")
    if args.stamp is not None:
        model, catalog = _versions(remote)
        stamp = {
            "model_version": model,
            "catalog_version": catalog,
            "grid_sha256": grid.sha256(),
            "format": fmt,
            "namespace": namespace,
            "max_configs": max_configs,
            "max_slowdown": slowdown,
            "server": remote.target if remote is not None else None,
        }
        _write_if_changed(args.stamp, json.dumps(stamp, indent=2) + "\n", "stamp")
        return EXIT_OK
    try:
        if remote is not None:
            document = _remote_document(grid, max_configs, slowdown, remote)
        else:
            document = _local_document(grid, max_configs, slowdown, workers, scheduler, args.quiet)
    except InvalidRequestError as exc:
        raise CliInputError(
            [ErrorLine(f"{args.grid}: {v.field}", v.description) for v in exc.violations]
        ) from None
    text = emit(document, fmt, namespace)
    if existing is not None:
        changes = check_table(existing, text)
        if not changes:
            print(f"current: {args.check}")
            return EXIT_OK
        print(f"stale: {args.check} (regenerate it with tilesolve-cli table)")
        for line in changes:
            print(f"  {line}")
        return EXIT_INFEASIBLE
    infeasible = sum(1 for e in document["entries"] if e["status"] == "infeasible")
    if infeasible:
        print(f"note: {infeasible} cells have no feasible configuration", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
    elif _write_if_changed(args.output, text, "output"):
        print(f"table: wrote {args.output} ({len(document['entries'])} entries)", file=sys.stderr)
    else:
        print(f"table: {args.output} is current", file=sys.stderr)
    return EXIT_OK
