"""How long a one-off `tilesolve-cli solve` takes, side by side with the cost of starting
Python with numpy and pydantic (issue 24's yardstick), measured in one run.

    python benchmarks/cli_startup.py [--runs 7] [--json]

Four commands, interleaved run by run so that a busy machine slows all of them alike:
  baseline   python -c "import numpy, pydantic"
  first      tilesolve-cli solve ... with an empty answer cache (the solver is loaded)
  repeated   the same question again: answered from the on-disk cache
  first*     `first` with the libraries' own defaults for what the CLI's process sets for
             itself (client/startup.py): OPENBLAS_NUM_THREADS at the number of cores (OpenBLAS's
             default) and PYDANTIC_DISABLE_PLUGINS empty (pydantic scans for plugins), so
             that the CLI keeps them; no target, it says what those settings buy
Each run gets its own cache folder (XDG_CACHE_HOME), so `first` is always a first question
and `repeated` always a repeat. Prints the median wall time of each and the ratios to the
baseline (targets: first <= 2.5x, repeated <= 1.5x); exit 1 when a target is missed.

Bytecode: numpy and pydantic are measured with the bytecode pip compiled when it installed
them. So that tilesolve is measured alike, its packages' bytecode is compiled first (what
`pip install` of a wheel does, and what Python writes on a first import unless
PYTHONDONTWRITEBYTECODE is set, as it is in some CI and sandbox shells, where every run would
otherwise compile tilesolve's sources again: about 0.2-0.4 s). `--no-compile` skips that, and
the output says which was measured.

`--imports` says where a first question's time goes instead: it runs the baseline and the
first question under `python -X importtime` and sums, per package, the import time of the
modules the baseline does not load (each module's own time, the median over the runs); what
is left of the first question's wall time is the work itself (parsing, the solve, rendering)
and the interpreter's start-up. Import times under -X importtime run a little slower than
plain imports, so the rows are shares, not an exact sum.

`--instructions` counts instead of timing: the baseline and a first question run once each under
`valgrind --tool=callgrind` (when valgrind is installed), which counts the instructions the
process executes, all threads together. The count does not move with the machine's load, so it
compares two trees, or a change, on a busy shared machine where wall times scatter by 30%; it
is not the target (a wall-time ratio), and it weighs dynamic loading (relocations, mapping)
by instructions where the clock also sees page faults and I/O.
"""

from __future__ import annotations

import argparse
import collections
import compileall
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from callgrind import instructions

QUESTION = ["solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"]
TARGETS = {"first": 2.5, "repeated": 1.5}
PACKAGES = ("tilesolve", "tilesolve.solver", "tilesolve.client", "tilesolve.server")


def _cli() -> list[str]:
    """The console script beside this interpreter, else `python -m tilesolve.client.cli`."""
    script = Path(sys.executable).with_name("tilesolve-cli")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tilesolve.client.cli"]


def compile_bytecode() -> None:
    """Compile the installed tilesolve packages' bytecode (into their __pycache__ folders)."""
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(folder, quiet=1)


def _wall_s(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def library_defaults() -> dict[str, str]:
    """The environment under which the CLI leaves numpy's BLAS threads and pydantic's plugin
    scan as the libraries have them (`first*`)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"OPENBLAS_NUM_THREADS": str(cores or 1), "PYDANTIC_DISABLE_PLUGINS": ""}


def measure(runs: int) -> dict[str, list[float]]:
    """Wall seconds of each command, `runs` times, interleaved."""
    times: dict[str, list[float]] = {"baseline": [], "first": [], "repeated": [], "first*": []}
    baseline = [sys.executable, "-c", "import numpy, pydantic"]
    question = [*_cli(), *QUESTION]
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            env = os.environ | {"XDG_CACHE_HOME": cache}
            times["baseline"].append(_wall_s(baseline, env))
            times["first"].append(_wall_s(question, env))
            times["repeated"].append(_wall_s(question, env))
        with tempfile.TemporaryDirectory() as cache:
            env = os.environ | {"XDG_CACHE_HOME": cache} | library_defaults()
            times["first*"].append(_wall_s(question, env))
    return times


def _import_times(argv: list[str], env: dict[str, str]) -> tuple[dict[str, int], float]:
    """Each module's own import time (us) in one run of `argv` under -X importtime, and the
    run's wall seconds."""
    start = time.perf_counter()
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall_s = time.perf_counter() - start
    own: dict[str, int] = {}
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            self_us, _, name = line.removeprefix("import time:").split("|")
            own[name.strip()] = int(self_us)
    return own, wall_s


def _group(module: str) -> str:
    """The row a module's time is summed in: tilesolve's subpackages (solver.families by
    kernel folder), other packages by their top-level name."""
    parts = module.split(".")
    if parts[0] != "tilesolve" or len(parts) < 3:
        return parts[0]
    return ".".join(parts[:4] if parts[2] == "families" and len(parts) > 3 else parts[:3])


def import_breakdown(runs: int) -> None:
    """Print the first question's import time by package, beyond the baseline's modules."""
    python = sys.executable
    baseline_modules: set[str] = set()
    own: dict[str, list[int]] = collections.defaultdict(list)
    walls: list[float] = []
    base_walls: list[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            env = os.environ | {"XDG_CACHE_HOME": cache}
            base, base_wall_s = _import_times([python, "-c", "import numpy, pydantic"], env)
            baseline_modules |= set(base)
            base_walls.append(base_wall_s)
            first, wall_s = _import_times([python, "-m", "tilesolve.client.cli", *QUESTION], env)
            walls.append(wall_s)
            for name, us in first.items():
                own[name].append(us)
    groups: collections.Counter[str] = collections.Counter()
    for name, values in own.items():
        if name not in baseline_modules:
            groups[_group(name)] += int(statistics.median(values))
    total_ms = sum(groups.values()) / 1e3
    first_s, base_s = statistics.median(walls), statistics.median(base_walls)
    print(f"{runs} runs under -X importtime, median wall: baseline {base_s:.3f} s, ", end="")
    print(f"first {first_s:.3f} s")
    print(f"  imports beyond the baseline's modules: {total_ms:.1f} ms, by package:")
    for group, us in groups.most_common():
        if us >= 500:
            print(f"  {us / 1e3:7.1f} ms  {group}")
    rest = sum(us for us in groups.values() if us < 500) / 1e3
    print(f"  {rest:7.1f} ms  (packages under 0.5 ms each)")


def instruction_counts() -> dict[str, int]:
    """The baseline's and a first question's instruction counts (`--instructions`)."""
    with tempfile.TemporaryDirectory() as cache:
        env = os.environ | {"XDG_CACHE_HOME": cache}
        return {
            "baseline": instructions([sys.executable, "-c", "import numpy, pydantic"], env),
            "first": instructions([*_cli(), *QUESTION], env),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command (default 7)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="do not compile tilesolve's bytecode first (see the module docstring)",
    )
    parser.add_argument(
        "--imports",
        action="store_true",
        help="where a first question's time goes: import time by package (see the docstring)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions under valgrind's callgrind instead of timing (see the docstring)",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind (apt install valgrind)")
    if not args.no_compile:
        compile_bytecode()
    if args.imports:
        import_breakdown(args.runs)
        return 0
    if args.instructions:
        counts = instruction_counts()
        ratio = counts["first"] / counts["baseline"]
        if args.json:
            print(json.dumps({"instructions": counts, "ratio": ratio}))
        else:
            print("instructions (valgrind --tool=callgrind, all threads):")
            print(f"  baseline  {counts['baseline']:>15,}  python -c 'import numpy, pydantic'")
            print(f"  first     {counts['first']:>15,}  {ratio:.2f}x the baseline")
        return 0
    bytecode = "as found" if args.no_compile else "compiled first"
    times = measure(args.runs)
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratios = {name: medians[name] / medians["baseline"] for name in (*TARGETS, "first*")}
    met = all(ratios[name] <= target for name, target in TARGETS.items())
    if args.json:
        document = {"median_s": medians, "ratio": ratios, "targets": TARGETS, "met": met}
        print(json.dumps(document | {"tilesolve_bytecode": bytecode}))
    else:
        print(f"{args.runs} runs each, median wall time ({' '.join(QUESTION)}):")
        print(f"  tilesolve's bytecode {bytecode}")
        print(f"  baseline  {medians['baseline']:.3f} s  python -c 'import numpy, pydantic'")
        for name, target in TARGETS.items():
            verdict = "ok" if ratios[name] <= target else "MISSED"
            print(
                f"  {name:<9} {medians[name]:.3f} s  {ratios[name]:.2f}x the baseline "
                f"(target <= {target}x: {verdict})"
            )
        print(
            f"  first*    {medians['first*']:.3f} s  {ratios['first*']:.2f}x the baseline "
            "(no target: first without the CLI's start-up settings, client/startup.py)"
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
