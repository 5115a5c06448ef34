"""`tilesolve-cli memory`: the memory model of seed 003 for one problem and tile, or its
comparison table over several sequence lengths and tile sizes (`--sweep`).

    tilesolve-cli memory --seq-len 4096 --tile 128 --head-dim 128
    tilesolve-cli memory --seq-len 4096 --block-m 128 --block-n 64 --head-dim 128 --hardware a100
    tilesolve-cli memory --sweep --seq-lens 1024,2048,4096 --tiles 64,128,256 --head-dim 128

The problem options, error lines and exit codes are `solve`'s (tilesolve.client.cli_common): the
problem is validated by the solver's schema, every bad field is one `error: <field>: ...` line,
exit 2. With `--server HOST:PORT` the figures come from the server's `EstimateMemory` RPC and
the output is the same. `--plot FILE` draws the working set and, with `--hardware`, the
roofline (matplotlib, the optional `plot` extra), always in-process.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .cli_common import (
    EXIT_OK,
    SHAPE_FIELDS,
    CliInputError,
    ErrorLine,
    add_shape_arguments,
    add_subcommand,
    bounded_int,
    catalog_device,
    flag_for,
    given_fields,
    plot_violations,
    print_json,
    print_lines,
    violations_from_pydantic,
)
from .cli_remote import Remote, add_remote_arguments, asking, remote_settings, remote_spec
from .cmd_solve import parameter_pins

if TYPE_CHECKING:
    from tilesolve.solver import AttentionProblem, HardwareSpec, MemoryEstimate

MAX_TILE = 4096  # the memory model's bound on block_m and block_n
MAX_LIST_VALUES = 64  # values per --seq-lens / --tiles list
DEFAULT_SEQ_LENS = "1024,2048,4096"  # seed 003's comparison
DEFAULT_TILES = "64,128,256"

_KIB = 1024
_MIB = 1024 * 1024


# ---- parsing -------------------------------------------------------------------------------


def add_memory_parser(subparsers: Any) -> None:
    """Register `memory` on the CLI's subparsers."""
    p = add_subcommand(
        subparsers,
        "memory",
        "the memory model: score matrix, tile counts, working set, HBM traffic, roofline",
        cmd_memory,
    )
    prob = p.add_argument_group("problem")
    add_shape_arguments(prob, seq_len_note="required unless --sweep")
    prob.add_argument(
        "--phase",
        choices=("forward", "backward"),
        help="forward (default) or backward: the backward kernels' working set, HBM traffic "
        "with the dQ atomics, and FLOPs",
    )
    tile = p.add_argument_group("tile (--tile N, or --block-m and --block-n)")
    tile.add_argument("--tile", metavar="N", help="a square tile: block_m = block_n = N")
    tile.add_argument("--block-m", metavar="N", help="query rows per tile")
    tile.add_argument("--block-n", metavar="N", help="key/value rows per tile")
    tile.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="fix any parameter of --kernel's family for its figures (repeatable), e.g. "
        "--param num_stages=3, or a flex backward tile's --param block_m1=64 ...; in-process "
        "only",
    )
    model = p.add_argument_group("kernel and hardware")
    model.add_argument(
        "--kernel",
        metavar="NAME",
        help="family whose shared memory / buffers are reported beside the working set, by its "
        "registered name (default fa2; on an Ascend device, its default family: ascend)",
    )
    model.add_argument(
        "--hardware", metavar="NAME", help="catalog name or alias: adds the roofline"
    )
    sweep = p.add_argument_group("sweep (seed 003's comparison table)")
    sweep.add_argument(
        "--sweep",
        action="store_true",
        help="one row per (seq_len, square tile) instead of one problem",
    )
    sweep.add_argument(
        "--seq-lens",
        metavar="LIST",
        help=f"comma-separated seq_lens (default: --seq-len, else {DEFAULT_SEQ_LENS})",
    )
    sweep.add_argument(
        "--tiles",
        metavar="LIST",
        help=f"comma-separated square tile sizes (default: --tile, else {DEFAULT_TILES})",
    )
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON document")
    out.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw the working set and, with --hardware, the roofline to FILE (.png or "
        ".svg; needs matplotlib: pip install 'tilesolve[plot]'); not with --sweep",
    )
    add_remote_arguments(p)


def _int_list(field: str, text: str, hi: int) -> list[int] | ErrorLine:
    """'1024,2048' as integers from 1 to `hi`, or a violation naming the field."""
    allowed = f"must be a comma-separated list of 1 to {MAX_LIST_VALUES} integers from 1 to {hi}"
    items = [item.strip() for item in text.split(",")]
    try:
        values = [int(item) for item in items]
    except ValueError:
        return ErrorLine(field, f"{allowed}; got {text!r} ({flag_for(field)})")
    bad = [v for v in values if not 1 <= v <= hi]
    if bad or not 1 <= len(values) <= MAX_LIST_VALUES:
        shown = ", ".join(str(v) for v in bad) if bad else f"{len(values)} values"
        return ErrorLine(field, f"{allowed}; got {shown} ({flag_for(field)})")
    return values


def _tile(args: argparse.Namespace) -> tuple[int, int] | list[ErrorLine]:
    """(block_m, block_n) from --tile or --block-m/--block-n, or what is wrong."""
    if args.tile is not None:
        if args.block_m is not None or args.block_n is not None:
            return [ErrorLine("tile", "give either --tile N or --block-m and --block-n, not both")]
        side = bounded_int("tile", args.tile, 1, MAX_TILE, " (rows of a square tile)")
        return [side] if isinstance(side, ErrorLine) else (side, side)
    if args.block_m is None and args.block_n is None:
        return [ErrorLine("tile", "required: --tile N (a square tile) or --block-m and --block-n")]
    parsed: list[int | ErrorLine] = []
    for field in ("block_m", "block_n"):
        text = getattr(args, field)
        if text is None:
            other = "--block-n" if field == "block_m" else "--block-m"
            parsed.append(ErrorLine(field, f"is required with {other} ({flag_for(field)})"))
        else:
            parsed.append(bounded_int(field, text, 1, MAX_TILE))
    bad = [p for p in parsed if isinstance(p, ErrorLine)]
    if bad:
        return bad
    block_m, block_n = (p for p in parsed if not isinstance(p, ErrorLine))
    return block_m, block_n


def _problem(
    args: argparse.Namespace, violations: list[ErrorLine], **override: Any
) -> AttentionProblem | None:
    """The problem from the options (with `override`), its violations appended."""
    from pydantic import ValidationError

    from tilesolve.solver import AttentionProblem

    data = given_fields(args, (*SHAPE_FIELDS, "phase")) | {"causal": args.causal} | override
    try:
        return AttentionProblem.model_validate(data)
    except ValidationError as exc:
        for v in violations_from_pydantic(exc, AttentionProblem):
            if v not in violations:  # a sweep validates the same options once per seq_len
                violations.append(v)
        return None


def _plot_check(plot: str | None) -> list[ErrorLine]:
    """What stops `--plot FILE`: no plot module or matplotlib, a bad suffix or folder."""
    if plot is None:
        return []
    try:
        from .plots import plot_memory  # noqa: F401  (the function --plot calls)
    except ImportError as exc:
        return [
            ErrorLine("plot", f"plotting is unavailable ({exc}); pip install 'tilesolve[plot]'")
        ]
    return plot_violations(plot)


# ---- the command ---------------------------------------------------------------------------


def cmd_memory(args: argparse.Namespace) -> int:
    remote = remote_settings(args)
    if args.sweep:
        return _cmd_sweep(args, remote)
    violations: list[ErrorLine] = []
    problem = _problem(args, violations)
    tile = _tile(args)
    if isinstance(tile, list):
        violations.extend(tile)
    for given, flag in ((args.seq_lens, "--seq-lens"), (args.tiles, "--tiles")):
        if given is not None:
            violations.append(ErrorLine("sweep", f"{flag} needs --sweep"))
    violations.extend(_plot_check(args.plot))
    kernel = args.kernel
    parameters = _parameters(args, violations)
    if remote is None:
        spec = _local_spec(args.hardware, violations)
        if violations:
            raise CliInputError(violations)
        assert problem is not None and not isinstance(tile, list)
        from tilesolve.solver import estimate_memory

        estimate = estimate_memory(problem, tile[0], tile[1], spec, kernel, parameters)
    else:
        with asking(remote) as client:
            spec = None
            if args.hardware is not None:
                spec = remote_spec(client, args.hardware, violations)
            if violations:
                raise CliInputError(violations)
            assert problem is not None and not isinstance(tile, list)
            estimate = client.estimate_memory(
                problem, tile[0], tile[1], args.hardware, kernel, parameters
            )
    if args.json:
        print_json(estimate.model_dump(mode="json"))
    else:
        print_lines(memory_report(estimate))
    if args.plot is not None:
        _draw(args.plot, problem, tile[0], tile[1], spec)
    return EXIT_OK


def _parameters(args: argparse.Namespace, violations: list[ErrorLine]) -> dict[str, int]:
    """`--param NAME=VALUE ...` (the family judges names and values, in-process or on the
    server: EstimateMemoryRequest.parameters)."""
    if not args.param:
        return {}
    pins = parameter_pins(args.param)
    if isinstance(pins, list):
        violations.extend(pins)
        return {}
    return pins


def _local_spec(name: str | None, violations: list[ErrorLine]) -> HardwareSpec | None:
    if name is None:
        return None
    try:
        return catalog_device(name)
    except CliInputError as exc:
        violations[:0] = exc.lines  # hardware first, as `solve` reports it
        return None


def _draw(
    plot: str, problem: AttentionProblem, block_m: int, block_n: int, spec: HardwareSpec | None
) -> None:
    from .plots import plot_memory

    try:
        plot_memory(problem, block_m, block_n, spec, Path(plot))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CliInputError([ErrorLine("plot", f"cannot write {plot!r}: {reason}")]) from exc
    sys.stdout.flush()
    if spec is None:
        print(
            "note: the roofline panel needs --hardware (a roofline is a device's); "
            "drew the working set only",
            file=sys.stderr,
        )
    print(f"plot: memory model written to {plot}", file=sys.stderr)


def _cmd_sweep(args: argparse.Namespace, remote: Remote | None) -> int:
    from tilesolve.solver.problem import MAX_SEQ_LEN

    violations: list[ErrorLine] = []
    seq_text = args.seq_lens or args.seq_len or DEFAULT_SEQ_LENS
    tile_text = args.tiles or args.tile or DEFAULT_TILES
    seq_lens = _int_list("seq_lens", seq_text, MAX_SEQ_LEN)
    tiles = _int_list("tiles", tile_text, MAX_TILE)
    for parsed in (seq_lens, tiles):
        if isinstance(parsed, ErrorLine):
            violations.append(parsed)
    for field in ("seq_len_kv", "block_m", "block_n"):
        if getattr(args, field) is not None:
            violations.append(
                ErrorLine(
                    field,
                    f"--sweep uses square tiles over seq_len = seq_len_kv; leave out "
                    f"{flag_for(field)} (use --seq-lens and --tiles)",
                )
            )
    if args.plot is not None:
        violations.append(ErrorLine("plot", "--plot draws one problem and tile, not a --sweep"))
    problems: list[AttentionProblem] = []
    for seq_len in seq_lens if isinstance(seq_lens, list) else [1]:
        problem = _problem(args, violations, seq_len=str(seq_len))
        if problem is not None:
            problems.append(problem)
    kernel = args.kernel
    if remote is None:
        spec = _local_spec(args.hardware, violations)
        if violations:
            raise CliInputError(violations)
        assert isinstance(seq_lens, list) and isinstance(tiles, list)
        from tilesolve.solver import memory_sweep

        base = problems[0]
        estimates = memory_sweep(
            seq_lens,
            tiles,
            base.head_dim,
            base.dtype,
            base.batch,
            base.heads,
            kv_heads=base.kv_heads,
            head_dim_v=base.head_dim_v,
            causal=base.causal,
            hardware=spec,
            kernel=kernel,
            phase=base.phase,
        )
    else:
        with asking(remote) as client:
            if args.hardware is not None:
                remote_spec(client, args.hardware, violations)
            if violations:
                raise CliInputError(violations)
            assert isinstance(tiles, list)
            estimates = [
                client.estimate_memory(problem, t, t, args.hardware, kernel)
                for problem in problems
                for t in tiles
            ]
    if args.json:
        print_json([e.model_dump(mode="json") for e in estimates])
    else:
        print_lines(sweep_report(estimates))
    return EXIT_OK


# ---- rendering -----------------------------------------------------------------------------


def _num(value: float) -> str:
    """An integer as is, anything else with at most two decimals (2 -> '2', 0.5 -> '0.5')."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def size(value: float) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1: '160 KiB', '4.02 MiB'."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    amount = float(value)
    unit = 0
    while amount >= 1024 and unit < len(units) - 1:
        amount /= 1024
        unit += 1
    if amount >= 100 or unit == 0:
        text = f"{amount:.0f}"
    elif amount >= 10:
        text = f"{amount:.1f}"
    else:
        text = f"{amount:.2f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} {units[unit]}"


def _exact(value: int) -> str:
    """'32 MiB (33,554,432 B)', or just '512 B'."""
    return size(value) if value < 1024 else f"{size(value)} ({value:,} B)"


def _flops(value: float) -> str:
    for scale, unit in (
        (1e15, "PFLOP"),
        (1e12, "TFLOP"),
        (1e9, "GFLOP"),
        (1e6, "MFLOP"),
        (1e3, "kFLOP"),
    ):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} FLOP"


def _problem_line(estimate: MemoryEstimate) -> str:
    from .render import problem_summary

    return problem_summary(cast(Any, estimate))  # it reads only `.problem`


def memory_report(estimate: MemoryEstimate) -> list[str]:
    """The single-estimate table: materialised matrix, tiling, traffic, roofline."""
    from .render import table, wrap

    e = estimate
    backward = e.problem.phase.value == "backward"
    kernel_line = f"{e.kernel} shared memory"
    stage = "its standard layout" if backward else "shallowest K/V pipeline"
    family = (
        f"{_exact(e.family_smem_bytes)}  (the kernel's dynamic shared memory, {stage})"
        if e.family_smem_bytes is not None
        else f"n/a ({e.family_smem_note})"
    )
    family_lines = _family_resource_lines(e)
    if e.family_smem_bytes is None and family_lines:
        family = "n/a (the family has no shared memory; its buffers are below)"
    tiles_held = (
        "(Q, dO, K, V, P, dS tiles; FP32 dK, dV, dQ; LSE, D)"
        if backward
        else "(Q, K, V, score and output tiles)"
    )
    lines = [
        f"memory model | tile {e.block_m}x{e.block_n} | kernel {e.kernel}",
        f"problem: {_problem_line(e)}",
        "",
        "naive attention materialises the score matrix (batch x heads x seq_len x seq_len_kv "
        f"x {e.dtype_bytes} B):",
        f"  score matrix           {_exact(e.score_matrix_bytes)}",
        "",
        "tiling, per (batch, head):",
        f"  tiles per axis         {e.tiles_1d} query x {e.tiles_1d_kv} key/value",
        f"  score tiles            {e.score_tiles}",
        f"  one score tile         {_exact(e.score_tile_bytes)}",
        f"  working set            {_exact(e.working_set_bytes)}  {tiles_held}",
        f"  {kernel_line:<22} {family}",
        f"  materialisation ratio  {_num(e.materialization_ratio)}x  "
        "(full score matrix / one score tile)",
        *family_lines,
        f"  saved for backward     {_exact(e.saved_lse_bytes)}  "
        "(the FP32 log-sum-exp the forward pass keeps, with O)",
    ]
    if e.dq_atomic_bytes is not None:
        lines.append(
            f"  dQ atomics             {_exact(e.dq_atomic_bytes)}  "
            "(FP32 adds into the dQ accumulator, to L2)"
        )
    pass_name = "backward" if backward else "forward"
    lines += [
        "",
        f"HBM traffic and arithmetic intensity ({_flops(e.flops)} of useful {pass_name} work):",
    ]
    roof = e.roofline
    headers = ["traffic", "HBM", "FLOP/B"]
    if roof is not None:
        headers.append("attainable TFLOP/s")
    rows = []
    for label, traffic, intensity, attainable in (
        ("naive", e.hbm_bytes_naive, e.arithmetic_intensity_naive, "naive"),
        (
            "tiled, no L2 reuse",
            e.hbm_bytes_tiled,
            e.arithmetic_intensity_tiled_no_l2,
            "tiled_no_l2",
        ),
        ("tiled, L2 reuse", e.hbm_bytes_tiled_l2, e.arithmetic_intensity, ""),
    ):
        row = [label, size(traffic), f"{intensity:.1f}"]
        if roof is not None:
            name = "attainable_tflops" + (f"_{attainable}" if attainable else "")
            row.append(f"{getattr(roof, name):.1f}")
        rows.append(row)
    lines.extend("  " + line for line in table(headers, rows, right=frozenset({1, 2, 3})))
    if roof is not None:
        lines += [
            "",
            f"roofline ({roof.hardware}): peak {_num(roof.peak_tflops)} TFLOP/s "
            f"({roof.peak_kind}), DRAM {_num(roof.dram_bandwidth_gb_per_s)} GB/s, ridge point "
            f"{roof.ridge_point_flops_per_byte:.1f} FLOP/B: the tiled kernel is "
            f"{roof.bound}-bound",
        ]
    return [piece for line in lines for piece in wrap(line, "")]


def _family_resource_lines(e: MemoryEstimate) -> list[str]:
    """The family's resources for the tile, one line each (empty when there are none)."""
    if not e.family_resources:
        return []
    others = ", ".join(
        f"{k}={v}" for k, v in e.family_parameters.items() if k not in ("block_m", "block_n")
    )
    at = f" at {others}" if others else ""
    out = ["", f"{e.kernel} resources for this tile{at} (the model's fastest fitting choice):"]
    for u in e.family_resources:
        if u.unit.startswith("bytes"):
            per = u.unit[len("bytes") :].lstrip("/ ").strip()
            used = f"{size(u.used)} of {size(u.capacity)}"
            share = f" ({u.used / u.capacity:.0%})" if u.capacity else ""
            tail = f"  per {per}" if per else ""
            over = "  OVER CAPACITY" if u.used > u.capacity else ""
            out.append(f"  {u.name:<22} {used}{share}{tail}{over}")
        else:
            out.append(f"  {u.name:<22} {u.used} of {u.capacity} {u.unit}")
    return out


SWEEP_HEADERS = (  # two lines each where one would widen the table past 80 columns
    "seq_len",
    "tile",
    "1-D\ntiles",
    "score\ntiles",
    "score tile\nKiB",
    "working set\nKiB",
    "score matrix\nMiB",
    "ratio",
)


def sweep_rows(estimates: Sequence[MemoryEstimate]) -> list[list[str]]:
    return [
        [
            str(e.problem.seq_len),
            str(e.block_m) if e.block_m == e.block_n else f"{e.block_m}x{e.block_n}",
            str(e.tiles_1d),
            str(e.score_tiles),
            _num(e.score_tile_bytes / _KIB),
            _num(e.working_set_bytes / _KIB),
            _num(e.score_matrix_bytes / _MIB),
            _num(e.materialization_ratio),
        ]
        for e in estimates
    ]


def sweep_report(estimates: Sequence[MemoryEstimate]) -> list[str]:
    """Seed 003's comparison: one row per (seq_len, tile)."""
    from .render import join_parts, table, wrap

    first = estimates[0]
    parts = [
        "seq_len = seq_len_kv swept" if part.startswith("seq_len ") else part
        for part in _problem_line(first).split(", ")
    ]
    return [
        *join_parts(["memory model sweep", f"kernel {first.kernel}", ", ".join(parts)]),
        "",
        *table(SWEEP_HEADERS, sweep_rows(estimates), right=frozenset(range(len(SWEEP_HEADERS)))),
        "",
        *wrap(
            "score matrix: what naive attention materialises (batch x heads x seq_len^2 x "
            f"{first.dtype_bytes} B); working set: the Q, K, V, score and output tiles; ratio: "
            "score matrix / one score tile, per (batch, head).",
            "",
        ),
        "Smaller tiles: a smaller working set, but more tiles to schedule.",
    ]
