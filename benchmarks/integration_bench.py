"""Build-integration targets (issue 14): a 1,000-cell dispatch table and a 200-shape portfolio.

    .venv/bin/python benchmarks/integration_bench.py [--repeats 3] [--json]

Each case runs the installed `tilesolve-cli` as a build system would (a new process: imports
included), single-process (`--workers 1`) and with `--workers 2`, interleaved, and reports the
median wall time of each and their ratio; it checks that both write the same bytes.

- table: hardware a100-80gb and h100-sxm x head_dim 64 and 128 x causal or not (fp16,
  forward, batch 4, 16 heads) x 125 seq_len buckets (256, 512, ..., 32000) = 1,000 cells, as a
  C++ header. Target: under 10 s on a 2-core machine. The same with fp16 and bf16 and 625
  buckets (64, 128, ..., 40000) = 10,000 cells shows where a second process starts to pay.
- portfolio: 200 forward shapes on a100-80gb (fa2), K = 4: head_dim 64 or 128, seq_len from
  128 to 32768, causal or not, batch 1..16, 16 or 32 heads, drawn from random.Random(200);
  weights are call counts round(1000 / rank) (Zipf). Target: proven optimal, or its gap
  reported, in under 30 s. The same mix with the triton family (~290 feasible configurations
  per shape instead of ~35) is the hard case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CLI = str(Path(sys.executable).parent / "tilesolve-cli")
SEQ_LENS = (128, 256, 512, 1000, 1024, 2048, 3000, 4096, 8192, 16384, 32768)

GRID = """\
hardware = ["a100-80gb", "h100-sxm"]
head_dim = [64, 128]
causal = [false, true]
seq_len = [{buckets}]
batch = 4
heads = 16
"""


def shapes_csv(count: int) -> str:
    rng = random.Random(200)
    rows = ["batch,heads,seq_len,head_dim,causal,count"]
    for rank in range(1, count + 1):
        rows.append(
            f"{rng.choice((1, 2, 4, 8, 16))},{rng.choice((16, 32))},{rng.choice(SEQ_LENS)},"
            f"{rng.choice((64, 128))},{str(rng.random() < 0.5).lower()},{round(1000 / rank)}"
        )
    return "\n".join(rows) + "\n"


def timed(argv: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
    return wall, done.stdout


def case(name: str, argv: list[str], repeats: int) -> dict[str, Any]:
    walls: dict[str, list[float]] = {"1": [], "2": []}
    outputs: dict[str, set[str]] = {"1": set(), "2": set()}
    for _ in range(repeats):
        for workers in ("1", "2"):
            wall, out = timed([*argv, "--workers", workers])
            walls[workers].append(wall)
            outputs[workers].add(out if "--json" not in argv else _without_times(out))
    one, two = statistics.median(walls["1"]), statistics.median(walls["2"])
    identical = len(outputs["1"] | outputs["2"]) == 1
    return {
        "case": name,
        "median_s_workers_1": one,
        "median_s_workers_2": two,
        "ratio_2_over_1": two / one,
        "identical_output": identical,
        "walls": walls,
        "last_output": next(iter(outputs["1"])),
    }


def _without_times(text: str) -> str:
    document = json.loads(text)
    document.pop("solve_ms", None)
    return json.dumps(document)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        grid = Path(tmp) / "grid.toml"
        buckets = ", ".join(str(s) for s in range(256, 32001, 256))
        grid.write_text(GRID.format(buckets=buckets))
        shapes = Path(tmp) / "mix.csv"
        shapes.write_text(shapes_csv(200))
        big = Path(tmp) / "big.toml"
        many = ", ".join(str(s) for s in range(64, 40001, 64))
        big.write_text('dtype = ["fp16", "bf16"]\n' + GRID.format(buckets=many))
        results = [
            case(
                "table 1000 cells",
                [CLI, "table", "--grid", str(grid), "--format", "cpp"],
                args.repeats,
            ),
            case(
                "table 10000 cells",
                [CLI, "table", "--grid", str(big), "--format", "cpp"],
                args.repeats,
            ),
            case(
                "portfolio 200 fa2 K=4",
                [
                    CLI,
                    "portfolio",
                    "--hardware",
                    "a100",
                    "--shapes",
                    str(shapes),
                    "--max-configs",
                    "4",
                    "--json",
                ],
                args.repeats,
            ),
            case(
                "portfolio 200 triton K=4",
                [
                    CLI,
                    "portfolio",
                    "--hardware",
                    "a100",
                    "--kernel",
                    "triton",
                    "--shapes",
                    str(shapes),
                    "--max-configs",
                    "4",
                    "--json",
                ],
                args.repeats,
            ),
        ]
    context = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if args.json:
        print(json.dumps({"context": context, "results": results}, indent=2))
        return 0
    print(f"python {context['python']}, {context['cpus']} CPUs, {context['platform']}")
    print(f"{'case':<26} {'workers 1 s':>11} {'workers 2 s':>11} {'2/1':>6}  same bytes  answer")
    for r in results:
        answer = ""
        if r["case"].startswith("portfolio"):
            doc = json.loads(r["last_output"])
            answer = (
                f"{doc['status']} gap {doc['gap']:.4f}, {len(doc['configurations'])} configs, "
                f"loss {doc['loss'] * 100:+.3f}%, worst {doc['worst_loss'] * 100:+.1f}%, "
                f"{doc['candidate_configs']} configs / {doc['assignment_variables']} vars"
            )
        else:
            first = r["last_output"].split("\n", 1)[0]
            meta = json.loads(first.split("tilesolve-table:", 1)[1])
            answer = f"{meta['entries']} entries"
        print(
            f"{r['case']:<26} {r['median_s_workers_1']:>11.2f} {r['median_s_workers_2']:>11.2f} "
            f"{r['ratio_2_over_1']:>6.2f}  {'yes' if r['identical_output'] else 'NO':<10}  {answer}"
        )
    table = results[0]
    ok_table = min(table["median_s_workers_1"], table["median_s_workers_2"]) < 10
    ok_portfolio = results[1]["median_s_workers_1"] < 30
    print(f"target: 1,000-cell table under 10 s: {'met' if ok_table else 'NOT met'}")
    print(f"target: 200-shape portfolio (K=4) under 30 s: {'met' if ok_portfolio else 'NOT met'}")
    return 0 if all(r["identical_output"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
