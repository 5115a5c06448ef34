"""`tilesolve-cli calibrate MEASUREMENTS.csv --hardware NAME`: fit the cost model's free
constants to measured times and write a profile that `solve --profile` and
`tilesolve-server --profile` load (docs/model.md section 15).

Shapes are split into training and held-out ones (every third in sorted order, never at
random); the report gives Spearman and top-1/top-3 regret before and after on both. Bad input
exits 2: a cell of the CSV (named by row and column), an unknown device, too few rows to fit
(saying how many are needed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cli_common import (
    EXIT_OK,
    CliInputError,
    ErrorLine,
    add_subcommand,
    catalog_device,
    print_json,
    print_lines,
)
from .files import replace_file
from .progress import Meter, add_quiet_argument, shown

if TYPE_CHECKING:
    from tilesolve.solver import HardwareSpec
    from tilesolve.solver.apps.calibrate import Calibration
    from tilesolve.solver.apps.measured import Measurement, Summary


def add_calibrate_parser(subparsers: Any) -> None:
    p = add_subcommand(
        subparsers,
        "calibrate",
        "fit the model's free constants to measured times (a sweep's CSV) and write a profile",
        cmd_calibrate,
    )
    p.add_argument(
        "measurements",
        metavar="MEASUREMENTS.csv",
        help="the sweep's CSV, or FlexAttention's autotune log (a .json file: "
        "TORCHINDUCTOR_FLEX_ATTENTION_LOGGING_FILE), whose forward choices become flex rows",
    )
    p.add_argument(
        "--hardware", required=True, metavar="NAME", help="the device the rows were measured on"
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="where to write the profile (default: tilesolve-profile-NAME.json)",
    )
    p.add_argument(
        "--fit",
        metavar="NAMES",
        help="comma-separated constants to fit (default: all; see docs/model.md 15)",
    )
    p.add_argument(
        "--holdout-every",
        metavar="N",
        default="3",
        help="hold out every N-th shape in sorted order (default 3; 0: none)",
    )
    p.add_argument(
        "--dtype",
        choices=("fp16", "bf16"),
        help="with an autotune log: the dtype of the logged calls (the log does not record it; "
        "required there)",
    )
    p.add_argument(
        "--causal",
        action="store_true",
        help="with an autotune log: the logged calls were causal (the log does not record it)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    add_quiet_argument(p)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from tilesolve.solver import CudaDevice
    from tilesolve.solver.apps.calibrate import FREE_CONSTANT_NAMES, calibrate, profile_of

    from .measurements import MeasurementsError, read_measurements

    violations: list[ErrorLine] = []
    spec = None
    try:
        spec = catalog_device(args.hardware)
    except CliInputError as exc:
        violations.extend(exc.lines)
    if spec is not None and not isinstance(spec, CudaDevice):
        violations.append(
            ErrorLine("hardware", f"{spec.name} is not a CUDA device: nothing to calibrate")
        )
    names = list(FREE_CONSTANT_NAMES)
    if args.fit is not None:
        names = [n.strip() for n in args.fit.split(",") if n.strip()]
        unknown = [n for n in names if n not in FREE_CONSTANT_NAMES]
        if unknown or not names:
            violations.append(
                ErrorLine(
                    "fit",
                    f"unknown constant(s) {', '.join(unknown) or '(none given)'}; allowed: "
                    + ", ".join(FREE_CONSTANT_NAMES),
                )
            )
    try:
        every = int(args.holdout_every)
        if not 0 <= every <= 1000:
            raise ValueError
    except ValueError:
        violations.append(
            ErrorLine(
                "holdout_every", f"must be an integer from 0 to 1000; got {args.holdout_every!r}"
            )
        )
        every = 3
    output = Path(args.output or f"tilesolve-profile-{spec.name if spec else 'device'}.json")
    if not output.parent.is_dir():
        violations.append(ErrorLine("output", f"folder {str(output.parent)!r} does not exist"))
    rows = []
    if str(args.measurements).endswith(".json"):
        rows = _autotune_rows(args, spec, violations)
    else:
        if args.dtype is not None or args.causal:
            violations.append(
                ErrorLine("dtype", "--dtype and --causal go with an autotune log (.json)")
            )
        try:
            rows = read_measurements(args.measurements)
        except MeasurementsError as exc:
            violations.extend(ErrorLine("measurements", line) for line in exc.lines())
    if violations:
        raise CliInputError(violations)
    assert spec is not None
    mine = [m for m in rows if m.shape.hardware == spec.name]
    others = sorted({m.shape.hardware for m in rows} - {spec.name})
    if not mine:
        raise CliInputError(
            [
                ErrorLine(
                    "hardware",
                    f"{args.measurements} has no rows for {spec.name} (it has rows for "
                    f"{', '.join(others)})",
                )
            ]
        )
    if others:
        print(
            f"note: ignored {len(rows) - len(mine)} rows measured on {', '.join(others)}",
            file=sys.stderr,
        )
    kernels = sorted({m.shape.kernel for m in mine})
    # InvalidRequestError (too few rows) is reported by the CLI's runner: exit 2.
    with Meter("calibration steps", shown(args.quiet)) as meter:
        result = calibrate(mine, spec.name, names, holdout_every=every, progress=meter.show)
    digest = hashlib.sha256(Path(args.measurements).read_bytes()).hexdigest()
    source = {"file": Path(args.measurements).name, "sha256": digest, "rows": len(mine)}
    profile = profile_of(result, ",".join(kernels), source)
    try:
        replace_file(output, json.dumps(profile.model_dump(mode="json"), indent=2) + "\n")
    except OSError as exc:
        raise CliInputError(
            [ErrorLine("output", f"cannot write {str(output)!r}: {exc.strerror or exc}")]
        ) from exc
    if args.json:
        print_json({"profile": str(output), **profile.model_dump(mode="json")})
    else:
        print_lines(report_lines(result, str(output), profile.model_version))
    return EXIT_OK


def _autotune_rows(
    args: argparse.Namespace, spec: HardwareSpec | None, violations: list[ErrorLine]
) -> list[Measurement]:
    """The forward rows of FlexAttention's autotune log (`flex_autotune`), on --hardware."""
    from .flex_autotune import AutotuneLogError, read_autotune_log

    if args.dtype is None:
        violations.append(
            ErrorLine("dtype", "an autotune log does not record the dtype: give --dtype")
        )
        return []
    if spec is None:
        return []
    try:
        imported = read_autotune_log(args.measurements, spec.name, args.dtype, args.causal)
    except AutotuneLogError as exc:
        violations.append(ErrorLine("measurements", f"{args.measurements}: {exc}"))
        return []
    except CliInputError as exc:
        violations.extend(exc.lines)
        return []
    if imported.skipped_backward:
        print(
            f"note: skipped {imported.skipped_backward} backward choices (calibration compares "
            "forward tiles)",
            file=sys.stderr,
        )
    return imported.rows


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _summary_row(label: str, s: Summary) -> str:
    return (
        f"  {label:<18} {_fmt(s.mean('spearman')):>8} {_fmt(s.mean('top1_regret')):>8} "
        f"{_fmt(s.mean('top3_regret')):>8}"
    )


def report_lines(result: Calibration, output: str, version: str) -> list[str]:
    fit = result.fit
    lines = [
        f"calibration of {result.hardware}: {fit.rows} timed rows fitted, "
        f"{len(result.training)} training shapes, {len(result.held_out)} held out",
        f"rms ln(predicted/measured) on the training rows: {fit.rms_log_error_before:.3f} -> "
        f"{fit.rms_log_error_after:.3f} ({fit.iterations} iterations)",
        "",
        f"  {'constant':<38} {'today':>10} {'fitted':>10}",
    ]
    for name, value in fit.values.items():
        lines.append(f"  {name:<38} {fit.start[name]:>10.4g} {value:>10.4g}")
    lines += ["", f"  {'shapes':<18} {'spearman':>8} {'top-1':>8} {'top-3':>8}   (mean per shape)"]
    lines.append(_summary_row("training, before", result.before_training))
    lines.append(_summary_row("training, after", result.after_training))
    if result.held_out:
        lines.append(_summary_row("held out, before", result.before_held_out))
        lines.append(_summary_row("held out, after", result.after_held_out))
    else:
        lines.append("  (no held-out shape: give two or more shapes to judge the fit)")
    lines += [
        "",
        "held out: " + ("; ".join(s.label() for s in result.held_out) or "none"),
        f"profile written to {output}; answers with it carry model version {version}",
    ]
    return lines
