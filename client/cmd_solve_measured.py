"""The options `solve` takes from measurement and calibration (docs/model.md section 15):
`--profile FILE` solves on the calibrated device a profile describes, `--format triton`
prints the answer as Python source defining a list of `triton.Config` (no Triton needed), and
`--format flex` as FlexAttention's kernel_options (`client/flex.py`).
Kept apart from `cmd_solve` so that its touch points there stay a few lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .cli_common import CliInputError, ErrorLine
from .files import MIB, check_nesting, read_text

if TYPE_CHECKING:
    from tilesolve.solver import CudaDevice, HardwareSpec, SolveAnswer

FORMATS = ("table", "json", "triton", "flex")
PROFILE_MAX_BYTES = 1 * MIB  # a profile is a few constants and their provenance


def add_profile_argument(group: Any) -> None:
    group.add_argument(
        "--profile",
        metavar="FILE",
        help="a calibration profile (tilesolve-cli calibrate): solve on the device with its "
        "fitted constants; the answer's model version names it. In-process only (a server "
        "loads one with tilesolve-server --profile)",
    )


def add_format_argument(group: Any) -> None:
    group.add_argument(
        "--format",
        choices=FORMATS,
        help="table (default), json (= --json), triton: Python source defining `configs`, "
        "a list of triton.Config of the triton family (the kernel it implies), best first, or "
        "flex: FlexAttention's kernel_options as JSON (--kernel flex; fwd_/bwd_ keys with "
        "--phase both)",
    )
    group.add_argument(
        "--triton-names",
        metavar="BM,BN[,WARPS,STAGES]",
        help="with --format triton: the kernel's meta-parameter names for BLOCK_M and BLOCK_N "
        "(default BLOCK_M,BLOCK_N), and optionally names under which num_warps and num_stages "
        "are also passed as meta-parameters",
    )


def load_profile(path: str) -> CudaDevice:
    """The calibrated device of a profile file; CliInputError (field `profile`) otherwise."""
    from tilesolve.solver import InvalidRequestError
    from tilesolve.solver.apps.calibrate import parse_profile, profile_device

    text = read_text(path, "profile", PROFILE_MAX_BYTES)
    check_nesting(path, text, "json")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliInputError(
            [ErrorLine("profile", f"{path} is not JSON: line {exc.lineno}: {exc.msg}")]
        ) from None
    try:
        return profile_device(parse_profile(data, path), path)
    except InvalidRequestError as exc:
        raise CliInputError([ErrorLine(v.field, v.description) for v in exc.violations]) from None


def apply_profile(
    args: argparse.Namespace,
    spec: HardwareSpec | None,
    remote: bool,
    violations: list[ErrorLine],
) -> HardwareSpec | None:
    """`spec`, or the calibrated device of `--profile` when it was fitted on `spec`'s device;
    a profile for another device, or with --server, is a violation."""
    path = getattr(args, "profile", None)
    if path is None:
        return spec
    if remote:
        violations.append(
            ErrorLine(
                "profile",
                "a profile is applied in-process; with --server, start the server with "
                "tilesolve-server --profile FILE",
            )
        )
        return spec
    try:
        device = load_profile(path)
    except CliInputError as exc:
        violations.extend(exc.lines)
        return spec
    if spec is None:
        return spec
    if device.name != spec.name:
        violations.append(
            ErrorLine(
                "profile",
                f"{path} was fitted on {device.name}, not {spec.name} (--hardware): a profile "
                "applies only to its own device",
            )
        )
        return spec
    return device


def _names(text: str | None) -> Any:
    from .triton import MetaNames

    if text is None:
        return MetaNames()
    parts = [p.strip() for p in text.split(",")]
    if len(parts) not in (2, 4) or not all(p.isidentifier() for p in parts):
        raise ValueError(text)
    if len(parts) == 2:
        return MetaNames(parts[0], parts[1])
    return MetaNames(parts[0], parts[1], parts[2], parts[3])


def format_violations(args: argparse.Namespace) -> list[ErrorLine]:
    fmt = getattr(args, "format", None)
    out = []
    if fmt is not None and fmt != "json" and args.json:
        out.append(ErrorLine("format", f"--json and --format {fmt} ask for two outputs; give one"))
    if fmt == "json":
        args.json = True
    if fmt == "triton" and args.phase == "both":
        out.append(ErrorLine("format", "--format triton prints one pass; give one --phase"))
    if fmt == "triton":
        out.extend(_triton_family(args))
    if getattr(args, "triton_names", None) is not None:
        if fmt != "triton":
            out.append(ErrorLine("triton_names", "goes with --format triton"))
        try:
            _names(args.triton_names)
        except ValueError:
            out.append(
                ErrorLine(
                    "triton_names",
                    "must be two or four Python identifiers separated by commas "
                    f"(BLOCK_M,BLOCK_N[,NUM_WARPS,NUM_STAGES]); got {args.triton_names!r}",
                )
            )
    return out


def _triton_family(args: argparse.Namespace) -> list[ErrorLine]:
    """--format triton asks for the triton family's tiles: it is the kernel unless --kernel
    names it already, and another --kernel is refused (its tiles are not triton.Configs)."""
    kernel = (args.kernel or "").strip()
    if not kernel:
        args.kernel = "triton"
        return []
    if kernel.lower() == "triton":
        return []
    return [
        ErrorLine(
            "format",
            f"--format triton prints the triton family's configurations; --kernel {kernel} "
            "names another family (give --kernel triton, or leave --kernel out)",
        )
    ]


def print_formatted(args: argparse.Namespace, answer: SolveAnswer) -> bool:
    """Print the answer as `--format triton` or `--format flex` asks (an answer without a
    configuration is left to the report, which explains it); False when another format
    applies."""
    fmt = getattr(args, "format", None)
    if fmt == "flex" and answer.candidates:
        from .flex import format_answer

        return _write_flex(lambda: format_answer(answer))
    if fmt != "triton":
        return False
    from .triton import config_source

    try:
        text = config_source(answer, _names(args.triton_names))
    except ValueError as exc:
        raise CliInputError([ErrorLine("format", str(exc))]) from None
    sys.stdout.write(text)
    return True


def print_formatted_both(
    args: argparse.Namespace, forward: SolveAnswer, backward: SolveAnswer
) -> bool:
    """`--format flex` with `--phase both`: one dict, fwd_/bwd_-prefixed (when both passes
    have a configuration); False otherwise."""
    if getattr(args, "format", None) != "flex" or not (forward.candidates and backward.candidates):
        return False
    from .flex import format_both

    return _write_flex(lambda: format_both(forward, backward))


def _write_flex(text: Callable[[], str]) -> bool:
    """Write `--format flex`'s JSON; the helper's refusal is bad input naming `format`."""
    from .flex import FlexOptionsError

    try:
        sys.stdout.write(text())
    except FlexOptionsError as exc:
        raise CliInputError([ErrorLine("format", str(exc))]) from None
    return True
