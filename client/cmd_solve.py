"""`tilesolve-cli solve`: rank the tile configurations of an attention problem, in-process or
on a server; `--explain` and `--plot` add the heatmap of the same request, computed in-process.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .block_mask_options import BLOCK_MASK_OPTIONS, add_block_mask_arguments
from .cli_common import (
    EXIT_INFEASIBLE,
    EXIT_OK,
    PROBLEM_FIELDS,
    CliInputError,
    ErrorLine,
    add_shape_arguments,
    add_subcommand,
    catalog_device,
    flag_for,
    given_fields,
    plot_violations,
    print_json,
    print_lines,
    violations_from_pydantic,
)
from .cli_remote import (
    DEFAULT_TIMEOUT_S,
    Remote,
    add_remote_arguments,
    asking,
    cli_field,
    remote_settings,
    remote_spec,
    server_violations,
)
from .cmd_solve_measured import (
    add_format_argument,
    add_profile_argument,
    apply_profile,
    format_violations,
    print_formatted,
    print_formatted_both,
)
from .field_help import FieldChoices, FieldHelp

if TYPE_CHECKING:
    from tilesolve.solver import AttentionProblem, HardwareSpec, SolveAnswer, SolveOptions

# `--phase both`: one training shape's forward and backward passes, in this order.
BOTH = "both"
TRAINING_PHASES = ("forward", "backward")
# The schema's phases, and `both`.
PHASE_CHOICES = FieldChoices("problem", "phase", extra=(BOTH,))

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
    *BLOCK_MASK_OPTIONS,
)


# ---- parsing -------------------------------------------------------------------------------


def add_solve_parser(subparsers: Any) -> None:
    """Register `solve` on the CLI's subparsers."""
    p = add_subcommand(
        subparsers, "solve", "rank the tile configurations of an attention problem", cmd_solve
    )
    hw = p.add_argument_group("hardware and kernel")
    hw.add_argument("--hardware", required=True, metavar="NAME", help="catalog name or alias")
    hw.add_argument(
        "--kernel",
        metavar="NAME",
        help=FieldHelp(
            "options",
            "kernel",
            "e.g. fa2, triton or flashinfer; an unknown name lists the families that run on "
            "the device",
        ),
    )
    add_profile_argument(hw)
    prob = p.add_argument_group("problem")
    add_shape_arguments(prob)
    prob.add_argument(
        "--phase",
        choices=PHASE_CHOICES,
        metavar="PHASE",
        action=_PhaseAction,
        help=FieldHelp(
            "problem",
            "phase",
            f"{BOTH}: the forward and the backward pass of one training shape in one call "
            "(the exit code is the worse of the two)",
        ),
    )
    prob.add_argument(
        "--dropout",
        nargs="?",
        const="0.1",
        metavar="P",
        help=FieldHelp("problem", "dropout", "the flag alone: 0.1"),
    )
    how = p.add_argument_group("solving")
    how.add_argument("--top-k", metavar="K", help=FieldHelp("options", "top_k"))
    how.add_argument(
        "--engine",
        choices=FieldChoices("options", "engine"),
        metavar="ENGINE",
        help=FieldHelp("options", "engine"),
    )
    how.add_argument(
        "--time-limit",
        dest="time_limit_s",
        metavar="SECONDS",
        help=FieldHelp("options", "time_limit_s"),
    )
    rules = p.add_argument_group("pins and caps")
    rules.add_argument(
        "--require-divisible",
        action="store_true",
        help=FieldHelp("options", "require_divisible", "no padding"),
    )
    rules.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="pin any parameter the family declares (repeatable), e.g. --param num_stages=2; "
        "an unknown name lists the family's parameters",
    )
    for pin in ("block_m", "block_n", "num_warps", "num_stages"):
        rules.add_argument(flag_for(pin), metavar="N", help=FieldHelp("options", pin))
    rules.add_argument(
        "--num-splits",
        metavar="N",
        help="pin split-KV's num_splits (shorthand for --param num_splits=N; decode, and "
        "forward with --seq-len-kv longer than --seq-len)",
    )
    rules.add_argument(
        "--page-size",
        metavar="N|auto",
        help="paged KV cache: N keys per page (shorthand for --param page_size=N), or auto to "
        "let the solver choose among the family's page sizes; absent: contiguous K/V",
    )
    rules.add_argument("--max-smem", metavar="BYTES", help=FieldHelp("options", "max_smem"))
    rules.add_argument(
        "--min-blocks-per-sm", metavar="N", help=FieldHelp("options", "min_blocks_per_sm")
    )
    add_block_mask_arguments(p)
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON document")
    add_format_argument(out)
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
    out.add_argument(
        "--no-cache",
        action="store_true",
        help="solve even if this question was answered before (default: a repeated question "
        "is answered from $XDG_CACHE_HOME/tilesolve, else ~/.cache/tilesolve, keyed by the "
        "options and the model and catalog versions)",
    )
    p.set_defaults(cacheable=True)
    add_remote_arguments(p)


class _PhaseAction(argparse.Action):
    """--phase, remembering every value given: two different ones are refused (a decode step
    has no backward pass; a training step asks for `--phase both`)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        given = [*(getattr(namespace, "phases_given", None) or []), str(values)]
        namespace.phases_given = given
        setattr(namespace, self.dest, values)


def _phase_violations(args: argparse.Namespace) -> list[ErrorLine]:
    given = sorted(set(getattr(args, "phases_given", None) or []))
    if len(given) <= 1:
        return []
    if "decode" in given and ("backward" in given or BOTH in given):
        why = (
            "decode has no backward pass (a decode step is inference, one query against the KV "
            "cache); for a training shape's forward and backward give --phase both"
        )
    else:
        why = f"give one of {', '.join(PHASE_CHOICES)}; for forward and backward: --phase both"
    return [ErrorLine("phase", f"given more than once ({', '.join(given)}): {why}")]


# ---- the command ---------------------------------------------------------------------------


def parameter_pins(given: list[str] | None) -> dict[str, int] | list[ErrorLine]:
    """`--param NAME=VALUE ...` as {name: value}, or what is wrong with them. The family
    judges the names and values (the solver lists its parameters and their domains)."""
    pins: dict[str, int] = {}
    bad: list[ErrorLine] = []
    for text in given or []:
        name, sep, value = text.strip().partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            bad.append(ErrorLine("param", f"must be NAME=VALUE, e.g. num_stages=2; got {text!r}"))
            continue
        try:
            number = int(value)
        except ValueError:
            bad.append(ErrorLine("param", f"{name}: the value must be an integer; got {value!r}"))
            continue
        if pins.get(name, number) != number:
            bad.append(
                ErrorLine("param", f"{name} is given twice ({pins[name]} and {number}); give one")
            )
            continue
        pins[name] = number
    return bad or pins


def split_shorthands(
    args: argparse.Namespace, pins: dict[str, int]
) -> dict[str, bool] | list[ErrorLine]:
    """`--num-splits N` and `--page-size N` as pins (added to `pins`), `--page-size auto` as
    the choose_page_size option; a shorthand that contradicts a --param is bad input. The
    family judges the values (its domain, its page rule)."""
    bad: list[ErrorLine] = []
    options: dict[str, bool] = {}
    for flag, name in (("--num-splits", "num_splits"), ("--page-size", "page_size")):
        text = getattr(args, name)
        if text is None:
            continue
        text = text.strip()
        if name == "page_size" and text.lower() == "auto":
            options["choose_page_size"] = True
            continue
        try:
            value = int(text)
        except ValueError:
            also = " or auto" if name == "page_size" else ""
            bad.append(ErrorLine(name, f"must be an integer{also}; got {text!r} ({flag})"))
            continue
        if pins.get(name, value) != value:
            bad.append(
                ErrorLine(
                    name,
                    f"{flag} {value} contradicts --param {name}={pins[name]}; give one value",
                )
            )
            continue
        pins[name] = value
    return bad or options


def split_phase_violations(
    problem: AttentionProblem, options: SolveOptions, both: bool
) -> list[ErrorLine]:
    """num_splits and page_size asked of a pass that has no such decision: num_splits is
    decode's and a forward's against a longer K/V (split-KV), page_size decode's and the
    forward's (a paged KV cache); the backward has neither."""
    phases = ("forward", "backward") if both else (problem.phase.value,)
    longer_kv = problem.seq_len_kv_eff > problem.seq_len
    bad: list[ErrorLine] = []
    if "num_splits" in options.parameter_pins:
        without = [
            phase
            for phase in phases
            if not (phase == "decode" or (phase == "forward" and longer_kv))
        ]
        if without:
            passes = "pass has" if len(without) == 1 else "passes have"
            bad.append(
                ErrorLine(
                    "num_splits",
                    f"the {' and '.join(without)} {passes} no split-KV decision here: "
                    "num_splits is decided in --phase decode and in --phase forward with "
                    "--seq-len-kv longer than --seq-len",
                )
            )
    if ("page_size" in options.parameter_pins or options.choose_page_size) and "backward" in phases:
        bad.append(
            ErrorLine(
                "page_size",
                "the backward pass reads no paged KV cache: page_size is decided in "
                "--phase decode and --phase forward",
            )
        )
    return bad


def cmd_solve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from tilesolve.solver import AttentionProblem, SolveOptions, solve

    remote = remote_settings(args)
    violations: list[ErrorLine] = []
    spec = None
    if remote is None:
        try:
            spec = catalog_device(args.hardware)
        except CliInputError as exc:
            violations.extend(exc.lines)
    # --profile (a calibrated device) and --format triton: cmd_solve_measured.py
    spec = apply_profile(args, spec, remote is not None, violations)
    violations.extend(format_violations(args))
    violations.extend(_phase_violations(args))
    both = args.phase == BOTH
    problem_input = given_fields(args, PROBLEM_FIELDS) | {"causal": args.causal}
    if both:
        problem_input.pop("phase")
    options_input = given_fields(args, _OPTION_FIELDS) | {
        "require_divisible": args.require_divisible
    }
    pins = parameter_pins(args.param)
    if isinstance(pins, list):
        violations.extend(pins)
    else:
        shorthand = split_shorthands(args, pins)
        if isinstance(shorthand, list):
            violations.extend(shorthand)
        else:
            options_input["parameter_pins"] = pins
            options_input.update(shorthand)
    problem = options = None
    try:
        problem = AttentionProblem.model_validate(problem_input)
    except ValidationError as exc:
        violations.extend(violations_from_pydantic(exc, AttentionProblem))
    try:
        options = SolveOptions.model_validate(options_input)
    except ValidationError as exc:
        violations.extend(violations_from_pydantic(exc, SolveOptions))
    if problem is not None and options is not None:
        violations.extend(split_phase_violations(problem, options, both))
    pictures = args.plot is not None or args.explain
    not_local: list[ErrorLine] = []
    if pictures and both:
        violations.append(
            ErrorLine(
                "phase",
                "--explain and --plot draw one pass; give --phase forward or --phase backward",
            )
        )
    elif pictures:
        violations.extend(plot_violations(args.plot))
        if remote is not None:  # the heatmap is computed here, from the local catalog
            try:
                spec = catalog_device(args.hardware)
            except CliInputError as exc:
                not_local = [
                    ErrorLine(
                        v.field,
                        f"{v.description} (--plot and --explain compute the heatmap "
                        "in-process, from the local catalog)",
                    )
                    for v in exc.lines
                ]
    if both:
        return _solve_both(args, remote, spec, violations, problem, options)
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


def _draw_pictures(
    args: argparse.Namespace,
    problem: AttentionProblem,
    spec: HardwareSpec,
    options: SolveOptions,
) -> None:
    """`--explain` and `--plot`, after the answer: the heatmap of the same request, always
    computed in-process. With --json the text heatmap goes to stderr (stdout stays one JSON
    document)."""
    from tilesolve.solver.apps.heatmap import heatmap_grid

    from .plots import plot_solve_heatmap, solve_plot_title, text_heatmap

    grid = heatmap_grid(problem, spec, options)
    if args.explain:
        text = text_heatmap(grid)
        if args.json:
            print(text, file=sys.stderr)
        else:
            print_lines(["", text])
    if args.plot is not None:
        path = Path(args.plot)
        try:
            plot_solve_heatmap(grid, path, solve_plot_title(problem, grid))
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise CliInputError(
                [ErrorLine("plot", f"cannot write {args.plot!r}: {reason}")]
            ) from exc
        sys.stdout.flush()
        print(f"plot: heatmap written to {args.plot}", file=sys.stderr)


def _solve_remote(
    args: argparse.Namespace,
    remote: Remote,
    violations: list[ErrorLine],
    problem: AttentionProblem | None,
    options: SolveOptions | None,
) -> int:
    """`solve` on a server: the hardware name is the server's to resolve (its catalog), and
    the family's rules come back as field violations; everything is reported together."""
    time_limit_s = options.time_limit_s if options is not None else 0.0
    with asking(remote, max(DEFAULT_TIMEOUT_S, time_limit_s + 10.0)) as client:
        spec = remote_spec(client, args.hardware, violations)
        if violations:
            raise CliInputError(violations)
        assert spec is not None and problem is not None and options is not None
        answer, cache_hit = client.solve_with_meta(problem, args.hardware, options)
    return _print_answer(args, answer, spec, cache_hit)


def _print_answer(
    args: argparse.Namespace, answer: SolveAnswer, spec: HardwareSpec, cache_hit: bool = False
) -> int:
    _time_limit_note(answer)
    if print_formatted(args, answer):
        pass
    elif args.json:
        print_json(answer.model_dump(mode="json") | {"cache_hit": cache_hit})
    else:
        from .render import solve_report

        print_lines(solve_report(answer, spec, cache_hit))
    return _exit_code(answer)


def _time_limit_note(answer: SolveAnswer) -> None:
    if answer.status.value == "feasible":
        print(
            "note: CP-SAT reached its time limit before proving the ranking "
            "(raise --time-limit or use --engine exhaustive)",
            file=sys.stderr,
        )


def _exit_code(answer: SolveAnswer) -> int:
    return EXIT_INFEASIBLE if answer.status.value == "infeasible" else EXIT_OK


# ---- --phase both ---------------------------------------------------------------------------


def _solve_both(
    args: argparse.Namespace,
    remote: Remote | None,
    spec: HardwareSpec | None,
    violations: list[ErrorLine],
    problem: AttentionProblem | None,
    options: SolveOptions | None,
) -> int:
    """The forward and the backward pass of one training shape: in-process one after the
    other, on a server as one SolveBatch of two. A pass that refuses the request (invalid
    input) refuses both, naming the pass; otherwise both answers are printed and the exit
    code is the worse of the two."""
    from tilesolve.solver import InvalidRequestError, Phase, solve

    if remote is None and violations:
        raise CliInputError(violations)
    problems = (
        []
        if problem is None
        else [problem.model_copy(update={"phase": Phase(phase)}) for phase in TRAINING_PHASES]
    )
    results: list[tuple[SolveAnswer, bool]] = []
    refused: list[ErrorLine] = []
    if remote is None:
        assert spec is not None and options is not None
        for one in problems:
            try:
                results.append((solve(one, spec, options), False))
            except InvalidRequestError as exc:
                refused.extend(_pass_violation(one, v.field, v.description) for v in exc.violations)
    else:
        time_limit_s = options.time_limit_s if options is not None else 0.0
        with asking(remote, max(DEFAULT_TIMEOUT_S, 2.0 * time_limit_s + 10.0)) as client:
            spec = remote_spec(client, args.hardware, violations)
            if violations:
                raise CliInputError(violations)
            assert spec is not None and options is not None
            batch = client.solve_batch_with_meta([(p, args.hardware, options) for p in problems])
            for one, result in zip(problems, batch, strict=True):
                if isinstance(result, tuple):
                    results.append(result)
                elif result.code.name in ("INVALID_ARGUMENT", "NOT_FOUND"):
                    refused.extend(
                        _pass_violation(one, v.field, v.description)
                        for v in server_violations(result, "request")
                    )
                else:
                    raise result  # server trouble: `asking` turns it into exit 3 or 4
    if refused:
        raise CliInputError(refused)
    assert spec is not None
    for answer, _ in results:
        _time_limit_note(answer)
    (forward, forward_hit), (backward, backward_hit) = results
    if print_formatted_both(args, forward, backward):
        pass
    elif args.json:
        print_json(
            {
                "phase": BOTH,
                "forward": forward.model_dump(mode="json") | {"cache_hit": forward_hit},
                "backward": backward.model_dump(mode="json") | {"cache_hit": backward_hit},
            }
        )
    else:
        from .render import solve_report

        print_lines(
            [
                "forward pass",
                *solve_report(forward, spec, forward_hit),
                "",
                "backward pass",
                *solve_report(backward, spec, backward_hit),
            ]
        )
    return max(_exit_code(forward), _exit_code(backward))


def _pass_violation(problem: AttentionProblem, field: str, description: str) -> ErrorLine:
    """A pass's refusal, naming the pass."""
    return ErrorLine(cli_field(field), f"{problem.phase.value} pass: {description}")
