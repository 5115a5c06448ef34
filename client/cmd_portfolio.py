"""`tilesolve-cli portfolio`: the few configurations to compile for a weighted mix of shapes.

    tilesolve-cli portfolio --hardware a100 --shapes mix.csv --max-configs 3 [--max-slowdown 10]

Reads the shapes file (`client/inputs.py`), evaluates every problem's feasible configurations
(in parallel: `--workers`, `--dask-scheduler`), and solves the facility-location program of
`tilesolve.solver.apps.portfolio` in-process, or asks a server's `Portfolio` RPC with `--server`.
Exit 0 with a portfolio, 1 when no K configurations meet the bound (the smallest K that would
is printed), 2 for bad input (naming the file's line and field), 3 for an unreachable server or
scheduler, or limits that passed before any portfolio was found.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from .cli_common import (
    EXIT_INFEASIBLE,
    EXIT_OK,
    CliInputError,
    ErrorLine,
    add_subcommand,
    catalog_device,
    print_json,
    print_lines,
    violations_from_pydantic,
)
from .cli_remote import add_remote_arguments, asking, remote_settings
from .progress import add_quiet_argument

if TYPE_CHECKING:
    from tilesolve.solver.apps.portfolio import PortfolioAnswer, PortfolioRequest

    from .inputs import Shapes

_PROBLEM_PATH = re.compile(r"^problems\[(\d+)\](?:\.problem)?\.?(.*)$")


def add_parallel_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("parallel evaluation (in-process runs only)")
    group.add_argument(
        "--workers",
        metavar="N",
        help="local processes evaluating the problems (default: the usable CPUs; small inputs "
        "run in this process)",
    )
    group.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS",
        help="evaluate on a Dask distributed cluster instead, e.g. tcp://127.0.0.1:8786 "
        "(pip install 'tilesolve[dask]')",
    )
    add_quiet_argument(group)


def parallel_settings(args: argparse.Namespace, remote: bool) -> tuple[int | None, str | None]:
    """(--workers, --dask-scheduler), checked."""
    from .cli_common import bounded_int

    violations = []
    workers: int | None = None
    if args.workers is not None:
        found = bounded_int("workers", args.workers, 1, 256)
        if isinstance(found, ErrorLine):
            violations.append(found)
        else:
            workers = found
    scheduler = args.dask_scheduler
    if scheduler is not None and (not scheduler or any(c.isspace() for c in scheduler)):
        violations.append(
            ErrorLine(
                "dask_scheduler",
                f"must be an address such as tcp://127.0.0.1:8786; got {scheduler!r}",
            )
        )
    if remote and (workers is not None or scheduler is not None):
        violations.append(
            ErrorLine(
                "server",
                "--workers and --dask-scheduler apply to in-process runs; with --server the "
                "server evaluates the problems",
            )
        )
    if workers is not None and scheduler is not None:
        violations.append(ErrorLine("workers", "give --workers or --dask-scheduler, not both"))
    if violations:
        raise CliInputError(violations)
    return workers, scheduler


def add_portfolio_parser(subparsers: Any) -> None:
    """Register `portfolio` on the CLI's subparsers."""
    p = add_subcommand(
        subparsers,
        "portfolio",
        "choose at most K configurations for a weighted mix of shapes (a kernel portfolio)",
        cmd_portfolio,
    )
    p.add_argument("--hardware", required=True, metavar="NAME", help="catalog name or alias")
    p.add_argument("--kernel", metavar="NAME", help="kernel family (default: the hardware's)")
    p.add_argument(
        "--shapes",
        required=True,
        metavar="FILE",
        help="CSV or JSON: one problem per row/object, the problem's fields by name, plus "
        "weight or count",
    )
    p.add_argument("--max-configs", required=True, metavar="K", help="at most K configurations")
    rules = p.add_argument_group("bounds, caps and pins")
    rules.add_argument(
        "--max-slowdown",
        metavar="PCT",
        help="no problem more than PCT percent slower than its own optimum",
    )
    rules.add_argument(
        "--max-smem", metavar="BYTES", help="footprint: no kernel uses more shared memory"
    )
    rules.add_argument(
        "--max-regs", metavar="N", help="footprint: no kernel uses more registers per thread"
    )
    rules.add_argument(
        "--max-resource",
        action="append",
        metavar="NAME=VALUE",
        help="footprint cap on any resource the family reports (repeatable)",
    )
    rules.add_argument(
        "--pin",
        action="append",
        metavar="NAME=VALUE,...",
        help="a configuration that must be included, every parameter given, e.g. "
        "block_m=128,block_n=64,num_warps=4,num_stages=1 (repeatable)",
    )
    how = p.add_argument_group("solving")
    how.add_argument(
        "--work-limit",
        dest="work_limit_s",
        metavar="SECONDS",
        help="CP-SAT's deterministic time limit (default 60; the same on any machine)",
    )
    how.add_argument(
        "--time-limit",
        dest="time_limit_s",
        metavar="SECONDS",
        help="wall-clock safety limit (default 300)",
    )
    how.add_argument(
        "--max-problems",
        metavar="N",
        help="refuse a shapes file with more problems (default and most: 5000)",
    )
    add_parallel_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    add_remote_arguments(p)


def pairs(flag: str, texts: list[str] | None, separator: str = ",") -> list[dict[str, int]]:
    """`NAME=VALUE[,NAME=VALUE...]` groups as dicts (CliInputError naming the flag)."""
    out = []
    bad = []
    for text in texts or []:
        group: dict[str, int] = {}
        for part in text.split(separator):
            name, sep, value = part.strip().partition("=")
            try:
                number = int(value.strip())
            except ValueError:
                number = None
            if not sep or not name.strip() or number is None:
                bad.append(
                    ErrorLine(flag, f"must be NAME=VALUE with an integer VALUE; got {part!r}")
                )
                continue
            group[name.strip()] = number
        out.append(group)
    if bad:
        raise CliInputError(bad)
    return out


def parse_percent(text: str | None) -> float | ErrorLine | None:
    if text is None:
        return None
    allowed = "must be a percentage from 0 to 10000 (--max-slowdown 10 means 10% slower)"
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        return ErrorLine("max_slowdown", f"{allowed}; got {text!r}")
    if not 0 <= value <= 10000:
        return ErrorLine("max_slowdown", f"{allowed}; got {text!r}")
    return value / 100.0


def _field_for(path: str, shapes: Shapes) -> str:
    """`problems[3].problem.head_dim` as `FILE:LINE: head_dim`."""
    match = _PROBLEM_PATH.match(path)
    if match and int(match.group(1)) < len(shapes.lines):
        field = match.group(2) or "problem"
        return f"{shapes.where(int(match.group(1)))}: {field}"
    return path


def portfolio_request(args: argparse.Namespace, shapes: Shapes) -> PortfolioRequest:
    from pydantic import ValidationError

    from tilesolve.solver.apps.portfolio import PortfolioRequest

    violations: list[ErrorLine] = []
    slowdown = parse_percent(args.max_slowdown)
    if isinstance(slowdown, ErrorLine):
        violations.append(slowdown)
        slowdown = None
    caps: dict[str, Any] = {}
    for name, text in (("shared_memory", args.max_smem), ("registers", args.max_regs)):
        if text is not None:
            caps[name] = text.strip()
    for group in pairs("max_resource", args.max_resource):
        caps.update(group)
    data: dict[str, Any] = {
        "problems": shapes.problems,
        "max_configs": args.max_configs.strip(),
        "kernel": args.kernel,
        "max_slowdown": slowdown,
        "max_resources": caps,
        "pinned": pairs("pin", args.pin),
    }
    for field in ("work_limit_s", "time_limit_s"):
        if getattr(args, field) is not None:
            data[field] = getattr(args, field).strip()
    if violations:
        raise CliInputError(violations)
    try:
        return PortfolioRequest.model_validate(data)
    except ValidationError as exc:
        out = []
        for v in violations_from_pydantic(exc, PortfolioRequest):
            field = v.field
            if field.startswith("max_resources."):
                field = {"shared_memory": "max_smem", "registers": "max_regs"}.get(
                    field.split(".", 1)[1], "max_resource"
                )
            out.append(ErrorLine(field, v.description))
        raise CliInputError(out) from None


def cmd_portfolio(args: argparse.Namespace) -> int:
    from tilesolve.solver import InvalidRequestError
    from tilesolve.solver.apps.portfolio import MAX_PORTFOLIO_PROBLEMS, solve_portfolio

    from .cli_common import bounded_int
    from .parallel import evaluator
    from .progress import Meter, shown

    remote = remote_settings(args)
    workers, scheduler = parallel_settings(args, remote is not None)
    most = MAX_PORTFOLIO_PROBLEMS
    if args.max_problems is not None:
        found = bounded_int("max_problems", args.max_problems, 1, MAX_PORTFOLIO_PROBLEMS)
        if isinstance(found, ErrorLine):
            raise CliInputError([found])
        most = found
    spec = catalog_device(args.hardware) if remote is None else None
    from .inputs import read_shapes  # here: the CLI imports this module for its parser

    shapes = read_shapes(args.shapes, most)
    request = portfolio_request(args, shapes)
    try:
        if remote is not None:
            from .remote_portfolio import portfolio

            budget = request.time_limit_s + 30.0
            with asking(remote, budget) as client:
                answer = portfolio(client, request, args.hardware, timeout_s=budget)
        else:
            assert spec is not None
            with (
                Meter("shapes evaluated", shown(args.quiet)) as meter,
                evaluator(workers, scheduler, meter) as map_fn,
            ):
                answer = solve_portfolio(request, spec, map_fn=map_fn)
    except InvalidRequestError as exc:
        raise CliInputError(
            [ErrorLine(_field_for(v.field, shapes), v.description) for v in exc.violations]
        ) from None
    except CliInputError as exc:  # a server's field violations, by request path
        raise CliInputError(
            [ErrorLine(_field_for(v.field, shapes), v.description) for v in exc.lines]
        ) from None
    return _print_answer(args, answer, shapes)


def _print_answer(args: argparse.Namespace, answer: PortfolioAnswer, shapes: Shapes) -> int:
    code = EXIT_INFEASIBLE if answer.status == "infeasible" else EXIT_OK
    if args.json:
        document = answer.model_dump(mode="json")
        document["problem_sources"] = [shapes.where(i) for i in range(len(shapes.lines))]
        print_json(document)
    else:
        print_lines(portfolio_report(answer, shapes))
    return code


def _pct(fraction: float) -> str:
    return f"{fraction * 100:+.2f}%"


def portfolio_report(answer: PortfolioAnswer, shapes: Shapes) -> list[str]:
    """The portfolio as text: the configurations, what they serve, and the loss. Problems
    and configurations are numbered from 1 here (the JSON's `problem` indices are 0-based)."""
    n = len(shapes.problems)
    total_weight = sum(wp.weight for wp in shapes.problems)
    status: str = answer.status
    if answer.status == "feasible":
        status = f"feasible (gap {answer.gap * 100:.2f}%, stopped by the {answer.stopped_by})"
    lines = [
        f"portfolio: {answer.hardware} | kernel {answer.kernel} | {n} problems (total weight "
        f"{total_weight:g}) | at most {answer.max_configs} "
        f"configuration{'' if answer.max_configs == 1 else 's'} | {status} | "
        f"{answer.solve_ms / 1e3:.2f} s",
        f"program: {answer.candidate_configs} distinct feasible configurations, "
        f"{answer.assignment_variables} assignment variables",
    ]
    if answer.status == "infeasible":
        lines.append(f"no portfolio: {answer.explanation}")
        if answer.smallest_feasible_max_configs is not None:
            lines.append(
                f"smallest K that works: {answer.smallest_feasible_max_configs} "
                f"(--max-configs {answer.smallest_feasible_max_configs})"
            )
        for p in answer.unserved_problems[:10]:
            lines.append(f"  unserved: problem {p + 1} ({shapes.where(p)})")
        return lines
    lines += [
        "",
        "  #  configuration         problems  weight  seq_len range      head dims  pinned",
        "  -  --------------------  --------  ------  -----------------  ---------  ------",
    ]
    for c in answer.configurations:
        share = c.weight / total_weight if total_weight else 0.0
        seq = f"{c.seq_len_min}-{c.seq_len_max}" if c.seq_len_min is not None else "(serves none)"
        dims = ",".join(str(d) for d in c.head_dims) or "-"
        lines.append(
            f"  {c.index}  {c.label:<20}  {len(c.problems):>8}  {share * 100:>5.1f}%  "
            f"{seq:<17}  {dims:<9}  {'yes' if c.pinned else 'no'}"
        )
    lines += [
        "",
        "loss against each problem's own optimum:",
        f"  weighted total  {_pct(answer.loss)}  ({answer.weighted_time_us:.1f} us against "
        f"{answer.optimal_weighted_time_us:.1f} us, weight x modelled time)",
    ]
    if answer.worst_problem is not None:
        worst = answer.assignments[answer.worst_problem]
        config = answer.configurations[worst.config - 1]
        lines.append(
            f"  worst case      {_pct(answer.worst_loss)}  (problem {worst.problem + 1}, "
            f"{shapes.where(worst.problem)}: {config.label} {worst.time_us:.1f} us, its own "
            f"optimum {worst.optimal_label} {worst.optimal_time_us:.1f} us)"
        )
    return lines
