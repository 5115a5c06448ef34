"""`tilesolve-cli simulate`: run FlashAttention-2's forward algorithm with one tile on random
data and report its error against exact attention (`tilesolve.solver.apps.simulate`).

    tilesolve-cli simulate --seq-len 1000 --head-dim 64 --causal --block-m 128 --block-n 64

Always in-process (numpy; no server needed or asked). Exit 0 when the error is within the
dtype's tolerance, 1 when it is not, 2 for bad input (the memory cap included).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from .cli_common import (
    EXIT_INFEASIBLE,
    EXIT_OK,
    SHAPE_FIELDS,
    CliInputError,
    ErrorLine,
    add_shape_arguments,
    add_subcommand,
    bounded_int,
    given_fields,
    print_json,
    print_lines,
    violations_from_pydantic,
)

if TYPE_CHECKING:
    from tilesolve.solver import SimulationResult

# simulate has no --phase or --dropout (the forward pass without dropout): SHAPE_FIELDS only.
_MAX_SEED = (1 << 63) - 1
_MAX_LOGIT_SCALE = 100.0  # tilesolve.solver.apps.simulate.MAX_LOGIT_SCALE (not imported: startup)

SIMULATE_EPILOG = """\
exit codes:
  0  the tiled result is within the dtype's tolerance of the float64 reference
  1  it is not (the output shows by how much)
  2  invalid input, or arrays beyond the 2 GiB memory cap (stderr names the field)
  4  internal error (a bug: please report it with the command line)
"""


def add_simulate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `simulate` on the CLI's subcommands."""
    p = add_subcommand(
        subparsers,
        "simulate",
        "run the tiled forward algorithm (FlashAttention-2) on random data and compare it "
        "with exact float64 attention; exit 1 if the error exceeds the dtype's tolerance",
        cmd_simulate,
    )
    p.epilog = SIMULATE_EPILOG
    prob = p.add_argument_group("problem (as for solve)")
    add_shape_arguments(prob)
    tile = p.add_argument_group("tile and data")
    tile.add_argument("--block-m", required=True, metavar="N", help="query rows per block")
    tile.add_argument("--block-n", required=True, metavar="N", help="key/value rows per step")
    tile.add_argument(
        "--seed", default="0", metavar="N", help="seed of the random Q, K, V (default 0)"
    )
    tile.add_argument(
        "--logit-scale",
        default="1",
        metavar="X",
        help="multiply Q by X, so the scaled logits have standard deviation X "
        f"(default 1, at most {_MAX_LOGIT_SCALE:g}; 16 gives logits near +-100)",
    )
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON document")
    return p


def _logit_scale(text: str) -> float | ErrorLine:
    allowed = f"must be a number > 0 and <= {_MAX_LOGIT_SCALE:g}"
    try:
        value = float(text.strip())
    except ValueError:
        return ErrorLine("logit_scale", f"{allowed}; got {text!r} (--logit-scale)")
    if not (math.isfinite(value) and 0 < value <= _MAX_LOGIT_SCALE):
        return ErrorLine("logit_scale", f"{allowed}; got {value:g} (--logit-scale)")
    return value


def cmd_simulate(args: argparse.Namespace) -> int:
    """Parse, simulate, print; exit 0 within tolerance, 1 outside it."""
    from pydantic import ValidationError

    from tilesolve.solver import AttentionProblem, simulate

    violations: list[ErrorLine] = []
    problem = None
    try:
        problem = AttentionProblem.model_validate(
            given_fields(args, SHAPE_FIELDS) | {"causal": args.causal}
        )
    except ValidationError as exc:
        violations.extend(violations_from_pydantic(exc, AttentionProblem))
    parsed = [
        bounded_int("block_m", args.block_m, 1, 4096, " (query rows per block)"),
        bounded_int("block_n", args.block_n, 1, 4096, " (key/value rows per step)"),
        bounded_int("seed", args.seed, 0, _MAX_SEED),
        _logit_scale(args.logit_scale),
    ]
    violations.extend(v for v in parsed if isinstance(v, ErrorLine))
    if violations:
        raise CliInputError(violations)
    assert problem is not None
    block_m, block_n, seed, logit_scale = parsed
    assert isinstance(block_m, int) and isinstance(block_n, int) and isinstance(seed, int)
    assert isinstance(logit_scale, float)

    # InvalidRequestError (the memory cap) is reported by the CLI's runner: exit 2.
    result = simulate(problem, block_m, block_n, seed=seed, logit_scale=logit_scale)
    if args.json:
        print_json(result.model_dump(mode="json"))
    else:
        print_lines(simulate_report(result))
    if not result.within_tolerance:
        print(
            f"error: the tiled result is {result.max_abs_error:.3g} from the reference, "
            f"beyond the tolerance {result.tolerance:.3g}",
            file=sys.stderr,
        )
        return EXIT_INFEASIBLE
    return EXIT_OK


def _problem_line(result: SimulationResult) -> str:
    p = result.problem
    parts = [
        f"batch {p.batch}",
        f"heads {p.heads}" + (f" (kv {p.kv_heads_eff})" if p.kv_heads_eff != p.heads else ""),
        f"seq_len {p.seq_len}"
        + (f" (kv {p.seq_len_kv_eff})" if p.seq_len_kv_eff != p.seq_len else ""),
        f"head_dim {p.head_dim}"
        + (f" (v {p.head_dim_v_eff})" if p.head_dim_v_eff != p.head_dim else ""),
        p.dtype.value,
    ]
    if p.causal:
        parts.append("causal")
    return ", ".join(parts)


def simulate_report(result: SimulationResult) -> list[str]:
    """The table `simulate` prints."""
    r = result
    verdict = "PASS (within tolerance)" if r.within_tolerance else "FAIL (beyond tolerance)"
    tiles = "match" if r.all_blocks_visited_as_modelled else "MISMATCH"
    written = r.output_dtype.value
    return [
        f"FlashAttention-2 forward, tile {r.block_m}x{r.block_n}, seed {r.seed}, "
        f"logit scale {r.logit_scale:g}",
        f"problem: {_problem_line(r)}",
        "",
        "error against exact float64 attention on the same rounded inputs",
        f"  max abs error             {r.max_abs_error:.3e}   (the output as written, {written})",
        f"  max abs error, FP32       {r.max_abs_error_fp32:.3e}   (before that rounding)",
        f"  max rel error             {r.max_rel_error:.3e}   "
        f"(of max |reference| = {r.max_abs_reference:.3g})",
        f"  mean abs error            {r.mean_abs_error:.3e}",
        f"  tolerance                 {r.tolerance:.3e}   = 2 x (u_P + u_out + 2 x logit) x max|V|",
        f"    u_P {r.unit_roundoff:.3g}, u_out {r.output_unit_roundoff:.3g}, "
        f"logit {r.logit_error_estimate:.2g}, max|V| {r.tolerance_scale:.3g}",
        f"  result                    {verdict}",
        "",
        "K/V tiles per (batch, head)",
        f"  visited                   {r.blocks_visited}",
        f"  modelled                  {r.blocks_expected}   ({tiles}, per query block)",
        f"  fully masked rows         {r.fully_masked_rows}   (output 0)",
        "",
        f"online-softmax rescales    {r.rescales}   (row steps where the running max rose, "
        "all heads)",
        f"largest |logit|            {r.max_abs_logit:.3g}   (q.k / sqrt(head_dim))",
    ]
