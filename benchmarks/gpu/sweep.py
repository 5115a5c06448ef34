"""Time every configuration of a sweep plan on this machine's GPU and write a CSV row per
configuration as it is measured; then compare Triton's autotuner over the model's top-k with
the autotuner over every configuration.

    python benchmarks/gpu/sweep.py PLAN.json --out measurements.csv [--workers 14]
        [--time-budget 270] [--no-autotune] [--shapes s0,s1]

Runs with Python, PyTorch and Triton only (no tilesolve, no network): the plan
(`make_plan.py`, made where tilesolve is installed) holds the shapes, the configurations and
the model's ranking of them. For each shape:

1. compile: every configuration is compiled (one warm-up launch) in `--workers` processes at
   once, filling Triton's on-disk cache; a configuration that fails is recorded with its
   status (out_of_resources, compile_error, launch_error) and the error's first line;
2. measure: each compiled configuration runs once and its output is checked against a
   float32 reference (wrong_result beyond the dtype's tolerance), then is timed with
   `triton.testing.do_bench` (warm-up, repeats, L2 flushed before every repeat; the median);
3. autotune: a fresh `triton.autotune` over the configurations that compiled, once with the
   plan's ranking as `early_config_prune` keeping the top-k (tilesolve.client.triton's
   `ranked_prune`), once over all of them: time spent and the configuration chosen.

Rows are appended and flushed as they are measured; a rerun with the same --out skips what the
CSV (and its .autotune.json) already holds, so an interrupted sweep resumes. `--time-budget`
stops starting new work after that many seconds (a resumable stop).

Without a GPU the same code runs on Triton's interpreter (TRITON_INTERPRET=1, CPU tensors,
wall-clock timing), which is how it is tested here: `tests/test_sweep.py`.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

PLAN_FORMAT = "tilesolve-sweep-plan/1"
HERE = Path(__file__).resolve().parent
TileKey = tuple[int, int, int, int]

# The CSV: the columns tilesolve's readers need (tilesolve.client.measurements) first, then
# the record of where and how it was measured.
COLUMNS = (
    "hardware",
    "kernel",
    "batch",
    "heads",
    "kv_heads",
    "seq_len",
    "seq_len_kv",
    "head_dim",
    "head_dim_v",
    "dtype",
    "causal",
    "block_m",
    "block_n",
    "num_warps",
    "num_stages",
    "status",
    "time_us",
    "shape_id",
    "compile_s",
    "repeats",
    "max_abs_error",
    "device_name",
    "compute_capability",
    "driver",
    "cuda",
    "torch",
    "triton",
    "python",
    "date",
    "plan_model_version",
    "error",
)
SHAPE_FIELDS = (
    "batch",
    "heads",
    "kv_heads",
    "seq_len",
    "seq_len_kv",
    "head_dim",
    "head_dim_v",
    "dtype",
    "causal",
)
# Largest |error| of the output against the float32 reference, per unit of max |V| (the
# inputs are standard normal): a few units of the dtype's rounding, as tilesolve's simulator
# derives them (docs/numerics.md).
TOLERANCE = {"fp16": 1e-2, "bf16": 6e-2}


# ---- the plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanShape:
    id: str
    fields: dict[str, Any]  # batch, heads, kv_heads, seq_len, seq_len_kv, head_dim, ...
    configs: list[TileKey]  # in the plan's order
    rank: dict[TileKey, int]  # the model's position among its feasible configurations

    def label(self) -> str:
        f = self.fields
        mask = " causal" if f["causal"] else ""
        return (
            f"{self.id}: b{f['batch']} h{f['heads']}/{f['kv_heads']} s{f['seq_len']}/"
            f"{f['seq_len_kv']} d{f['head_dim']}/{f['head_dim_v']} {f['dtype']}{mask}"
        )


@dataclass(frozen=True)
class Plan:
    hardware: str
    kernel: str
    device_match: str
    model_version: str
    warmup_ms: float
    rep_ms: float
    top_k: int
    shapes: list[PlanShape]


def load_plan(path: str | Path) -> Plan:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("format") != PLAN_FORMAT:
        raise ValueError(f"{path}: not a sweep plan (format {data.get('format')!r})")
    shapes = []
    for s in data["shapes"]:
        configs = [tuple(int(v) for v in c) for c in s["configs"]]
        ranks = s.get("model_rank") or [None] * len(configs)
        rank = {c: int(r) for c, r in zip(configs, ranks, strict=True) if r is not None}
        fields = {k: s[k] for k in SHAPE_FIELDS}
        shapes.append(PlanShape(str(s["id"]), fields, configs, rank))  # type: ignore[arg-type]
    timing = data.get("timing", {})
    return Plan(
        hardware=data["hardware"],
        kernel=data.get("kernel", "triton"),
        device_match=data.get("device_match", ""),
        model_version=data.get("model_version", ""),
        warmup_ms=float(timing.get("warmup_ms", 10)),
        rep_ms=float(timing.get("rep_ms", 40)),
        top_k=int(data.get("autotune", {}).get("top_k", 3)),
        shapes=shapes,
    )


# ---- outcomes and backends -----------------------------------------------------------------


@dataclass
class Outcome:
    status: str  # ok, out_of_resources, compile_error, launch_error, wrong_result
    time_us: float | None = None
    compile_s: float | None = None
    repeats: int | None = None
    max_abs_error: float | None = None
    error: str = ""


def classify(exc: BaseException) -> str:
    """A failure's status, from the exception Triton or PyTorch raised."""
    names = {t.__name__ for t in type(exc).__mro__}
    text = str(exc)
    if "OutOfResources" in names or "out of resource" in text.lower():
        return "out_of_resources"
    if names & {"CompilationError", "CompileTimeAssertionFailure", "PTXASError", "MLIRError"}:
        return "compile_error"
    if "CUDA" in text or "launch" in text.lower() or "AcceleratorError" in names:
        return "launch_error"
    return "compile_error"


def first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return " ".join(text[:1])[:300]


class Backend(Protocol):
    """What the sweep needs of a machine (the GPU one below; tests give a fake)."""

    def environment(self) -> dict[str, str]: ...

    def compile(self, shape: PlanShape, tile: TileKey) -> Outcome: ...

    def measure(
        self, shape: PlanShape, tile: TileKey, warmup_ms: float, rep_ms: float
    ) -> Outcome: ...

    def autotune(
        self, shape: PlanShape, tiles: Sequence[TileKey], prune: Callable[..., Any] | None
    ) -> dict[str, Any]: ...

    def release(self, shape: PlanShape) -> None: ...


class TritonBackend:
    """The kernel of `flash_attention.py` on this machine's GPU (or, without one, on Triton's
    interpreter with CPU tensors and wall-clock timing)."""

    def __init__(self, seed: int = 0) -> None:
        import torch

        self.torch = torch
        self.seed = seed
        self.cuda = torch.cuda.is_available()
        self.device = "cuda" if self.cuda else "cpu"
        self._tensors: dict[str, Any] = {}
        self.kernel = _load_kernel_module()

    def environment(self) -> dict[str, str]:
        import triton

        torch = self.torch
        env = {
            "torch": torch.__version__,
            "triton": triton.__version__,
            "python": platform.python_version(),
            "cuda": str(torch.version.cuda or ""),
            "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if self.cuda:
            props = torch.cuda.get_device_properties(0)
            env["device_name"] = props.name
            env["compute_capability"] = f"{props.major}.{props.minor}"
            env["driver"] = _driver_version()
        else:
            env["device_name"] = "cpu (Triton interpreter)"
            env["compute_capability"] = ""
            env["driver"] = ""
        return env

    def _inputs(self, shape: PlanShape, with_reference: bool) -> dict[str, Any]:
        cached = self._tensors.get(shape.id)
        if cached is not None and (cached.get("ref") is not None or not with_reference):
            return cached
        torch = self.torch
        f = shape.fields
        dtype = torch.bfloat16 if f["dtype"] == "bf16" else torch.float16
        gen = torch.Generator(device="cpu").manual_seed(self.seed)

        def normal(*size: int) -> Any:
            return torch.randn(*size, generator=gen).to(dtype).to(self.device)

        q = normal(f["batch"], f["heads"], f["seq_len"], f["head_dim"])
        k = normal(f["batch"], f["kv_heads"], f["seq_len_kv"], f["head_dim"])
        v = normal(f["batch"], f["kv_heads"], f["seq_len_kv"], f["head_dim_v"])
        ref = None
        if with_reference:
            ref = self._reference(q, k, v, bool(f["causal"]))
        self._tensors[shape.id] = {"q": q, "k": k, "v": v, "ref": ref}
        return self._tensors[shape.id]

    def _reference(self, q: Any, k: Any, v: Any, causal: bool) -> Any:
        """float32 attention, one (batch, head) slice at a time to bound memory."""
        torch = self.torch
        out = torch.empty((*q.shape[:3], v.shape[3]), dtype=torch.float32, device=q.device)
        group = q.shape[1] // k.shape[1]
        for b in range(q.shape[0]):
            for h in range(q.shape[1]):
                o, _ = self.kernel.reference(
                    q[b : b + 1, h : h + 1],
                    k[b : b + 1, h // group : h // group + 1],
                    v[b : b + 1, h // group : h // group + 1],
                    causal,
                )
                out[b, h] = o[0, 0]
        return out

    def _run(self, shape: PlanShape, tile: TileKey) -> Any:
        t = self._inputs(shape, False)
        bm, bn, warps, stages = tile
        out, _ = self.kernel.attention_forward(
            t["q"],
            t["k"],
            t["v"],
            causal=bool(shape.fields["causal"]),
            block_m=bm,
            block_n=bn,
            num_warps=warps,
            num_stages=stages,
        )
        return out

    def _sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def compile(self, shape: PlanShape, tile: TileKey) -> Outcome:
        started = time.perf_counter()
        try:
            self._run(shape, tile)
            self._sync()
        except Exception as exc:
            return Outcome(
                classify(exc), compile_s=time.perf_counter() - started, error=first_line(exc)
            )
        return Outcome("ok", compile_s=time.perf_counter() - started)

    def measure(self, shape: PlanShape, tile: TileKey, warmup_ms: float, rep_ms: float) -> Outcome:
        t = self._inputs(shape, True)
        try:
            out = self._run(shape, tile)
            self._sync()
        except Exception as exc:
            return Outcome(classify(exc), error=first_line(exc))
        scale = float(t["v"].float().abs().max())
        err = float((out.float() - t["ref"]).abs().nan_to_num(float("inf")).max()) / max(
            scale, 1e-6
        )
        if err > TOLERANCE.get(shape.fields["dtype"], 1e-2):
            return Outcome(
                "wrong_result", max_abs_error=err, error=f"max |error| / max|V| = {err:.3g}"
            )
        try:
            median_ms, repeats = self._time(lambda: self._run(shape, tile), warmup_ms, rep_ms)
        except Exception as exc:
            return Outcome(classify(exc), max_abs_error=err, error=first_line(exc))
        return Outcome("ok", time_us=median_ms * 1e3, repeats=repeats, max_abs_error=err)

    def _time(self, fn: Callable[[], Any], warmup_ms: float, rep_ms: float) -> tuple[float, int]:
        """The median of repeated runs, in ms: do_bench on a GPU (L2 flushed before each
        repeat), wall-clock repeats on the interpreter."""
        if self.cuda:
            from triton.testing import do_bench

            try:
                times = do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
                return statistics.median(times), len(times)
            except (AssertionError, TypeError, ValueError):  # a Triton without "all"
                return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")), 0
        times = []
        for _ in range(3):
            started = time.perf_counter()
            fn()
            times.append((time.perf_counter() - started) * 1e3)
        return statistics.median(times), len(times)

    def autotune(
        self, shape: PlanShape, tiles: Sequence[TileKey], prune: Callable[..., Any] | None
    ) -> dict[str, Any]:
        import triton

        t = self._inputs(shape, False)
        configs = [
            triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
            for bm, bn, w, s in tiles
        ]
        started = time.perf_counter()
        bench = None if self.cuda else _wall_clock_bench
        _, tuner = self.kernel.autotuned_forward(
            t["q"], t["k"], t["v"], bool(shape.fields["causal"]), configs, prune, bench
        )
        self._sync()
        wall = time.perf_counter() - started
        best = tuner.best_config
        timings = getattr(tuner, "configs_timings", None) or {}
        return {
            "configs_given": len(configs),
            "configs_benchmarked": len(timings) if timings else 1,
            "wall_s": wall,
            "bench_s": getattr(tuner, "bench_time", None),
            "chosen": [
                best.kwargs["BLOCK_M"],
                best.kwargs["BLOCK_N"],
                best.num_warps,
                best.num_stages,
            ],
        }

    def release(self, shape: PlanShape) -> None:
        self._tensors.pop(shape.id, None)
        if self.cuda:
            self.torch.cuda.empty_cache()


def _wall_clock_bench(fn: Callable[[], Any], quantiles: Sequence[float] | None = None) -> Any:
    """The autotuner's benchmark on the interpreter (no GPU): wall-clock runs."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e3)
    median = statistics.median(times)
    return [median] * len(quantiles) if quantiles else median


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _load_kernel_module() -> Any:
    spec = importlib.util.spec_from_file_location("flash_attention", HERE / "flash_attention.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("flash_attention", module)
    spec.loader.exec_module(module)
    return module


def load_triton_helpers() -> Any:
    """tilesolve.client.triton, installed or (on a GPU host without tilesolve's dependencies)
    loaded by path from this repository: it imports only the standard library at load time."""
    try:
        from tilesolve.client import triton as helpers

        return helpers
    except ImportError:
        path = HERE.parents[1] / "client" / "triton.py"
        spec = importlib.util.spec_from_file_location("tilesolve_triton_helpers", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module


# ---- compiling in parallel ----------------------------------------------------------------

_WORKER: TritonBackend | None = None


def _worker_init() -> None:
    global _WORKER
    _WORKER = TritonBackend()


def _worker_compile(shape: PlanShape, tile: TileKey) -> tuple[TileKey, Outcome]:
    assert _WORKER is not None
    try:
        return tile, _WORKER.compile(shape, tile)
    except Exception as exc:  # never let one configuration break the pool
        return tile, Outcome(classify(exc), error=first_line(exc))


def compile_parallel(
    shape: PlanShape, tiles: Sequence[TileKey], workers: int
) -> dict[TileKey, Outcome]:
    """Compile `tiles` in `workers` processes (each with its own CUDA context); whatever a
    broken pool leaves is compiled here, one by one."""
    import multiprocessing

    results: dict[TileKey, Outcome] = {}
    try:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init) as pool:
            for tile, outcome in pool.map(_worker_compile, [shape] * len(tiles), tiles):
                results[tile] = outcome
    except Exception as exc:
        print(f"  parallel compilation stopped ({first_line(exc)}); going on serially", flush=True)
    return results


# ---- the sweep ----------------------------------------------------------------------------


@dataclass
class Sweep:
    plan: Plan
    out: Path
    backend: Backend
    workers: int = 0  # 0: compile in this process
    budget_s: float | None = None
    autotune: bool = True
    started: float = field(default_factory=time.perf_counter)
    written: int = 0

    @property
    def autotune_path(self) -> Path:
        return self.out.with_suffix(self.out.suffix + ".autotune.json")

    def out_of_time(self) -> bool:
        return self.budget_s is not None and time.perf_counter() - self.started > self.budget_s

    def done(self) -> set[tuple[str, TileKey]]:
        """(shape id, tile) already in the CSV: a resumed sweep skips them."""
        if not self.out.exists():
            return set()
        with open(self.out, encoding="utf-8", newline="") as handle:
            return {
                (
                    row["shape_id"],
                    (
                        int(row["block_m"]),
                        int(row["block_n"]),
                        int(row["num_warps"]),
                        int(row["num_stages"]),
                    ),
                )
                for row in csv.DictReader(handle)
            }

    def _append(self, rows: Iterable[dict[str, Any]]) -> None:
        new = not self.out.exists() or self.out.stat().st_size == 0
        with open(self.out, "a", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            if new:
                writer.writeheader()
            for row in rows:
                writer.writerow(row)
                self.written += 1
            handle.flush()
            os.fsync(handle.fileno())

    def row(
        self, env: dict[str, str], shape: PlanShape, tile: TileKey, o: Outcome
    ) -> dict[str, Any]:
        f = shape.fields
        bm, bn, w, s = tile
        return {
            "hardware": self.plan.hardware,
            "kernel": self.plan.kernel,
            **{k: f[k] for k in SHAPE_FIELDS if k != "causal"},
            "causal": "true" if f["causal"] else "false",
            "block_m": bm,
            "block_n": bn,
            "num_warps": w,
            "num_stages": s,
            "status": o.status,
            "time_us": "" if o.time_us is None else f"{o.time_us:.3f}",
            "shape_id": shape.id,
            "compile_s": "" if o.compile_s is None else f"{o.compile_s:.2f}",
            "repeats": "" if o.repeats is None else o.repeats,
            "max_abs_error": "" if o.max_abs_error is None else f"{o.max_abs_error:.3g}",
            **{k: env.get(k, "") for k in ("device_name", "compute_capability", "driver", "cuda")},
            **{k: env.get(k, "") for k in ("torch", "triton", "python", "date")},
            "plan_model_version": self.plan.model_version,
            "error": o.error.replace("\n", " ")[:300],
        }

    def run(self, shape_ids: Sequence[str] | None = None) -> bool:
        """Sweep the plan's shapes; True when everything asked for is done."""
        env = self.backend.environment()
        done = self.done()
        complete = True
        for shape in self.plan.shapes:
            if shape_ids and shape.id not in shape_ids:
                continue
            todo = [t for t in shape.configs if (shape.id, t) not in done]
            print(
                f"{shape.label()}: {len(shape.configs)} configurations, {len(todo)} to measure",
                flush=True,
            )
            if todo and not self._measure_shape(env, shape, todo):
                complete = False
                break
            if self.autotune and not self._autotune_shape(shape):
                complete = False
                break
            self.backend.release(shape)
        return complete

    def _measure_shape(self, env: dict[str, str], shape: PlanShape, todo: list[TileKey]) -> bool:
        compiled: dict[TileKey, Outcome] = {}
        if self.workers > 1:
            t0 = time.perf_counter()
            compiled = compile_parallel(shape, todo, self.workers)
            print(
                f"  compiled {len(compiled)} in {time.perf_counter() - t0:.1f} s "
                f"({self.workers} processes)",
                flush=True,
            )
        for tile in todo:
            if self.out_of_time():
                print(
                    f"  time budget of {self.budget_s:g} s spent: stopping (rerun to resume)",
                    flush=True,
                )
                return False
            outcome = compiled.get(tile)
            if outcome is None:
                outcome = self.backend.compile(shape, tile)
            if outcome.status == "ok":
                compile_s = outcome.compile_s
                outcome = self.backend.measure(shape, tile, self.plan.warmup_ms, self.plan.rep_ms)
                outcome.compile_s = compile_s
            self._append([self.row(env, shape, tile, outcome)])
        return True

    def _autotune_shape(self, shape: PlanShape) -> bool:
        results = json.loads(self.autotune_path.read_text()) if self.autotune_path.exists() else {}
        if shape.id in results:
            return True
        if self.out_of_time():
            return False
        measured = self._measured(shape)
        ran = list(measured)
        if len(ran) < 2:
            return True
        helpers = load_triton_helpers()
        names = helpers.MetaNames()
        ranking = {t: float(r) for t, r in shape.rank.items()}
        prune = helpers.ranked_prune(ranking, self.plan.top_k, names)
        entry: dict[str, Any] = {"label": shape.label(), "top_k": self.plan.top_k}
        times = [t for t in measured.values() if t is not None]
        entry["best_measured_us"] = min(times) if times else None
        try:
            for name, hook in (("model_top_k", prune), ("all", None)):
                result = self.backend.autotune(shape, ran, hook)
                chosen = tuple(int(v) for v in result["chosen"])
                result["chosen_measured_us"] = measured.get(chosen)  # type: ignore[call-overload]
                entry[name] = result
        except Exception as exc:
            entry["error"] = first_line(exc)
            traceback.print_exc()
        results[shape.id] = entry
        self.autotune_path.write_text(json.dumps(results, indent=2) + "\n")
        print(
            f"  autotune: {json.dumps({k: v for k, v in entry.items() if k != 'label'})}",
            flush=True,
        )
        return True

    def _measured(self, shape: PlanShape) -> dict[TileKey, float | None]:
        """The shape's configurations that compiled and ran in the sweep (ok or wrong_result),
        with their measured median (None for a wrong result)."""
        out: dict[TileKey, float | None] = {}
        with open(self.out, encoding="utf-8", newline="") as handle:
            for r in csv.DictReader(handle):
                if r["shape_id"] == shape.id and r["status"] in ("ok", "wrong_result"):
                    tile = (
                        int(r["block_m"]),
                        int(r["block_n"]),
                        int(r["num_warps"]),
                        int(r["num_stages"]),
                    )
                    out[tile] = float(r["time_us"]) if r["status"] == "ok" else None
        return out


def _default_workers(cuda: bool) -> int:
    return max(1, (os.cpu_count() or 2) - 2) if cuda else 0


def device_matches(plan: Plan, device_name: str) -> bool:
    return not plan.device_match or plan.device_match.lower() in device_name.lower()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plan", help="the plan (make_plan.py)")
    parser.add_argument("--out", required=True, help="the CSV to write (appended, resumed)")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes compiling in parallel (default: CPUs - 2 with a GPU, none without)",
    )
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS")
    parser.add_argument("--no-autotune", action="store_true")
    parser.add_argument("--shapes", help="comma-separated shape ids (default: all)")
    parser.add_argument(
        "--force", action="store_true", help="run even if the GPU is not the plan's device"
    )
    args = parser.parse_args(argv)
    plan = load_plan(args.plan)
    backend = TritonBackend()
    env = backend.environment()
    if backend.cuda and not device_matches(plan, env["device_name"]) and not args.force:
        print(
            f"error: the plan is for {plan.hardware} (device name containing "
            f"{plan.device_match!r}); this GPU is {env['device_name']!r} (--force to run anyway)",
            file=sys.stderr,
        )
        return 2
    print(
        f"device: {env['device_name']} | torch {env['torch']} | triton {env['triton']}", flush=True
    )
    sweep = Sweep(
        plan,
        Path(args.out),
        backend,
        workers=args.workers if args.workers is not None else _default_workers(backend.cuda),
        budget_s=args.time_budget,
        autotune=not args.no_autotune,
    )
    complete = sweep.run(args.shapes.split(",") if args.shapes else None)
    elapsed = time.perf_counter() - sweep.started
    print(
        f"{sweep.written} rows written to {args.out} in {elapsed:.0f} s; "
        + ("complete" if complete else "incomplete: rerun to resume")
    )
    return 0 if complete else 3


if __name__ == "__main__":
    sys.exit(main())
