"""How the model ranks against the stopwatch: per shape of a sweep's CSV, the model's top-1 and
top-3 regret, Spearman's rank correlation between predicted and measured times, and the
feasibility confusion; a summary, the autotune comparison if the sweep wrote one, and a
picture of predicted against measured times. Runs anywhere tilesolve is installed.

    python benchmarks/gpu/analyze.py MEASUREMENTS.csv [--profile PROFILE.json] [--json]
        [--plot predicted_vs_measured.png] [--autotune MEASUREMENTS.csv.autotune.json]

Definitions (docs/model.md section 15): the model's pick is its first choice among the
measured configurations it calls feasible (its answer's order); top-1 regret = the pick's
measured time / the best measured time (of any configuration that ran); top-3 regret = the
best of the model's first three / the best; Spearman over the configurations that ran and that
the model calls feasible. With --profile the model is the calibrated one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tilesolve.client.measurements import MeasurementsError, read_measurements
from tilesolve.solver import HardwareSpec, InvalidRequestError, get_hardware
from tilesolve.solver.apps.calibrate import parse_profile, profile_device
from tilesolve.solver.apps.measured import (
    STATUS_OK,
    Measurement,
    Summary,
    analyse,
    by_shape,
    predict_shape,
)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report_lines(summary: Summary, model: str) -> list[str]:
    lines = [
        f"model {model}",
        f"{'shape':<34} {'rows':>4} {'ran':>4} {'pick':<16} {'best':<16} {'top-1':>6} "
        f"{'top-3':>6} {'rho':>6}  feasibility (ran/failed: model ok | model no)",
    ]
    for r in summary.shapes:
        c = r.confusion
        pick = "-" if r.pick is None else r.pick.label()
        best = "-" if r.best_tile is None else r.best_tile.label()
        lines.append(
            f"{r.shape.label():<34} {r.rows:>4} {r.timed:>4} {pick:<16} {best:<16} "
            f"{_fmt(r.top1_regret):>6} {_fmt(r.top3_regret):>6} {_fmt(r.spearman):>6}  "
            f"{c.feasible_ran}/{c.feasible_failed} | {c.infeasible_ran}/{c.infeasible_failed}"
        )
    lines.append(
        f"{'mean':<34} {'':>4} {'':>4} {'':<16} {'':<16} {_fmt(summary.mean('top1_regret')):>6} "
        f"{_fmt(summary.mean('top3_regret')):>6} {_fmt(summary.mean('spearman')):>6}"
    )
    for r in summary.shapes:
        c = r.confusion
        if c.failed_tiles:
            lines.append(
                f"  {r.shape.label()}: model-feasible but failed: {', '.join(c.failed_tiles[:8])}"
            )
        if c.ran_tiles:
            lines.append(
                f"  {r.shape.label()}: rejected by the model but ran: {', '.join(c.ran_tiles[:8])}"
            )
    return lines


def autotune_lines(autotune: dict[str, Any]) -> list[str]:
    """Autotune over the model's top-k against autotune over every configuration that
    compiled: seconds spent benchmarking, and the measured time of each one's choice over the
    best measured time (the sweep's medians)."""
    lines = [
        "",
        f"{'autotune':<40} {'k':>3} {'top-k s':>8} {'all s':>8} {'top-k pick':>11} {'all pick':>9}",
    ]
    for entry in autotune.values():
        label = str(entry.get("label", ""))
        if "error" in entry:
            lines.append(f"{label:<40} error: {entry['error']}")
            continue
        best = entry.get("best_measured_us")

        def ratio(result: dict[str, Any], best: float | None = best) -> str:
            t = result.get("chosen_measured_us")
            return "-" if t is None or not best else f"{t / best:.3f}"

        top, every = entry["model_top_k"], entry["all"]
        lines.append(
            f"{label:<40} {entry['top_k']:>3} {_fmt(top.get('bench_s'), 1):>8} "
            f"{_fmt(every.get('bench_s'), 1):>8} {ratio(top):>11} {ratio(every):>9}"
        )
    return lines


def plot(summary_rows: list[Measurement], specs: dict[str, HardwareSpec], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    lo, hi = float("inf"), 0.0
    for shape, group in by_shape(summary_rows).items():
        pred = predict_shape(shape, specs[shape.hardware])
        xs, ys = [], []
        for m in group:
            t = pred.time_us(m.tile)
            if m.status == STATUS_OK and m.time_us and t and pred.feasible(m.tile):
                xs.append(t)
                ys.append(m.time_us)
        if xs:
            ax.scatter(xs, ys, s=12, alpha=0.7, label=shape.label())
            lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
    if hi > 0:
        ax.plot(
            [lo, hi],
            [lo, hi],
            color="grey",
            linewidth=1,
            linestyle="--",
            label="measured = predicted",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted time (us)")
    ax.set_ylabel("measured time (us)")
    ax.set_title("tilesolve: predicted against measured, per configuration")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("measurements")
    parser.add_argument("--profile", help="a calibration profile: judge the calibrated model")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", metavar="FILE", help="predicted vs measured (.png or .svg)")
    parser.add_argument("--autotune", metavar="FILE", help="the sweep's .autotune.json")
    args = parser.parse_args(argv)
    try:
        rows = read_measurements(args.measurements)
    except MeasurementsError as exc:
        for line in exc.lines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    specs: dict[str, HardwareSpec] = {
        name: get_hardware(name) for name in {m.shape.hardware for m in rows}
    }
    model = "catalog"
    if args.profile:
        try:
            device = profile_device(
                parse_profile(json.loads(Path(args.profile).read_text())), args.profile
            )
        except InvalidRequestError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        specs[device.name] = device
        model = f"calibrated ({args.profile})"
    summary = analyse(rows, specs)
    autotune = json.loads(Path(args.autotune).read_text()) if args.autotune else None
    if args.json:
        doc: dict[str, Any] = {"model": model, **summary.as_dict()}
        if autotune is not None:
            doc["autotune"] = autotune
        print(json.dumps(doc, indent=2))
    else:
        print("\n".join(report_lines(summary, model)))
        if autotune is not None:
            print("\n".join(autotune_lines(autotune)))
    if args.plot:
        plot(rows, specs, Path(args.plot))
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
