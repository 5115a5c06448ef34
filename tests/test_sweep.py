"""The GPU sweep harness's logic without a GPU (benchmarks/gpu/sweep.py with a fake backend),
and the analysis of a small CSV (regret, Spearman, feasibility confusion, the script's table,
JSON and plot). The harness's real backend runs on a GPU or on Triton's interpreter:
tests/test_gpu_kernel.py.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tilesolve.client.measurements import read_measurements
from tilesolve.solver import get_hardware
from tilesolve.solver.apps.measured import (
    Measurement,
    Shape,
    Tile,
    analyse,
    predict_shape,
    shape_report,
    spearman,
)

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "benchmarks/gpu"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(GPU))
    try:
        spec = importlib.util.spec_from_file_location(f"gpu_{name}", GPU / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(GPU))


sweep = _load("sweep")
make_plan = _load("make_plan")


class FakeBackend:
    """Times from the model itself; failures where the model rejects the configuration (big
    tiles out of shared memory), one wrong result, one launch error."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.compiled: list[tuple[str, Any]] = []
        self.autotuned: list[tuple[str, int, bool]] = []

    def environment(self) -> dict[str, str]:
        return {"device_name": "fake", "torch": "0", "triton": "0", "date": "2026-01-01"}

    def _pred(self, shape: Any) -> Any:
        f = shape.fields
        s = Shape(
            self.plan.hardware,
            "triton",
            f["batch"],
            f["heads"],
            f["kv_heads"],
            f["seq_len"],
            f["seq_len_kv"],
            f["head_dim"],
            f["head_dim_v"],
            f["dtype"],
            f["causal"],
        )
        return predict_shape(s, get_hardware(self.plan.hardware))

    def compile(self, shape: Any, tile: Any) -> Any:
        self.compiled.append((shape.id, tile))
        if tile == shape.configs[-1]:
            return sweep.Outcome("launch_error", error="RuntimeError: CUDA error")
        if not self._pred(shape).feasible(Tile(*tile)):
            return sweep.Outcome("out_of_resources", compile_s=0.1, error="OutOfResources: smem")
        return sweep.Outcome("ok", compile_s=0.5)

    def measure(self, shape: Any, tile: Any, warmup_ms: float, rep_ms: float) -> Any:
        if tile == shape.configs[1]:
            return sweep.Outcome("wrong_result", max_abs_error=0.5, error="max |error| 0.5")
        t = self._pred(shape).time_us(Tile(*tile))
        return sweep.Outcome("ok", time_us=t, repeats=10, max_abs_error=1e-3)

    def autotune(self, shape: Any, tiles: Sequence[Any], prune: Callable[..., Any] | None) -> Any:
        configs = [sweep.load_triton_helpers().MetaNames().kwargs(t) for t in tiles]
        objs = [
            type("C", (), {"kwargs": k, "num_warps": t[2], "num_stages": t[3]})()
            for k, t in zip(configs, tiles, strict=True)
        ]
        kept = prune(objs, {}) if prune else objs
        self.autotuned.append((shape.id, len(kept), prune is not None))
        best = kept[0]
        chosen = [best.kwargs["BLOCK_M"], best.kwargs["BLOCK_N"], best.num_warps, best.num_stages]
        return {"configs_benchmarked": len(kept), "bench_s": 0.1 * len(kept), "chosen": chosen}

    def release(self, shape: Any) -> None:
        pass


@pytest.fixture()
def plan_file(tmp_path: Path) -> Path:
    plan = make_plan.build_plan("h200", make_plan.DEFAULT_SHAPES[:2], top=4, size=12)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


def test_plan_holds_the_models_top_and_a_sample(plan_file: Path) -> None:
    plan = sweep.load_plan(plan_file)
    assert plan.hardware == "h200" and plan.device_match == "H200" and plan.top_k == 3
    assert len(plan.shapes) == 2 and all(len(s.configs) == 12 for s in plan.shapes)
    for s in plan.shapes:
        assert [s.rank.get(t) for t in s.configs[:4]] == [0, 1, 2, 3]
        assert len(set(s.configs)) == 12
    again = make_plan.build_plan("h200", make_plan.DEFAULT_SHAPES[:2], top=4, size=12)
    assert json.loads(plan_file.read_text()) == again  # reproducible
    assert sweep.device_matches(plan, "NVIDIA H200") and not sweep.device_matches(
        plan, "NVIDIA H100 80GB HBM3"
    )
    assert (
        make_plan.device_match("a100-80gb") == "A100"
        and make_plan.device_match("rtx-4090") == "4090"
    )


def test_sweep_writes_rows_as_measured_and_resumes(plan_file: Path, tmp_path: Path) -> None:
    plan = sweep.load_plan(plan_file)
    out = tmp_path / "m.csv"
    backend = FakeBackend(plan)
    first = sweep.Sweep(plan, out, backend, budget_s=0.0, autotune=False)
    assert not first.run()  # the budget is spent at once: nothing measured, resumable
    backend2 = FakeBackend(plan)
    assert sweep.Sweep(plan, out, backend2).run()
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 24 and tuple(rows[0]) == sweep.COLUMNS
    statuses = {r["status"] for r in rows}
    assert {"ok", "wrong_result", "launch_error"} <= statuses
    assert all(r["device_name"] == "fake" and r["plan_model_version"] for r in rows)
    # tilesolve reads the harness's CSV as it is
    measured = read_measurements(out)
    assert len(measured) == 24
    # autotune: the model's top-k against everything that compiled
    tuned = json.loads(first.autotune_path.read_text())
    assert set(tuned) == {"s0", "s1"}
    for entry in tuned.values():
        assert entry["model_top_k"]["configs_benchmarked"] == 3
        assert entry["all"]["configs_benchmarked"] > 3
        assert entry["best_measured_us"] > 0
    # a rerun resumes: nothing measured twice
    backend3 = FakeBackend(plan)
    assert sweep.Sweep(plan, out, backend3).run()
    assert backend3.compiled == [] and backend3.autotuned == []
    with open(out, newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 24


def test_interrupted_sweep_resumes_where_it_stopped(plan_file: Path, tmp_path: Path) -> None:
    plan = sweep.load_plan(plan_file)
    out = tmp_path / "m.csv"
    backend = FakeBackend(plan)
    run = sweep.Sweep(plan, out, backend, autotune=False)
    run.budget_s = 1e9
    calls = 0
    original = backend.measure

    def measure_then_stop(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 5:
            run.budget_s = 0.0  # as if the time ran out here
        return original(*args)

    backend.measure = measure_then_stop  # type: ignore[method-assign]
    assert not run.run()
    done = len(run.done())
    assert 0 < done < 24
    backend2 = FakeBackend(plan)
    assert sweep.Sweep(plan, out, backend2, autotune=False).run()
    assert len(backend2.compiled) == 24 - done


def test_failures_are_classified() -> None:
    class OutOfResources(Exception):
        pass

    class CompilationError(Exception):
        pass

    assert sweep.classify(OutOfResources("shared memory")) == "out_of_resources"
    assert sweep.classify(CompilationError("bad")) == "compile_error"
    assert sweep.classify(RuntimeError("CUDA error: an illegal memory access")) == "launch_error"
    assert sweep.classify(ValueError("x")) == "compile_error"
    assert sweep.first_line(RuntimeError("a\nb")) == "RuntimeError: a"


def test_the_harness_loads_the_triton_helpers_without_tilesolve() -> None:
    """On the GPU host tilesolve's dependencies are absent: client/triton.py loads by path."""
    code = (
        "import importlib.util, sys;"
        f"spec = importlib.util.spec_from_file_location('h', {str(ROOT / 'client/triton.py')!r});"
        "m = importlib.util.module_from_spec(spec); sys.modules['h'] = m;"
        "spec.loader.exec_module(m);"
        "bad = sorted(k for k in sys.modules if k.startswith(('tilesolve', 'pydantic', 'numpy')));"
        "p = m.ranked_prune({(64, 64, 4, 2): 0.0}, 1);"
        "print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr


# ---- analysis ------------------------------------------------------------------------------

SHAPE = Shape("h200", "triton", 4, 16, 16, 4096, 4096, 128, 128, "bf16", True)


def _rows(times: dict[Tile, float | None]) -> list[Measurement]:
    return [
        Measurement(i + 2, SHAPE, t, "ok" if v is not None else "out_of_resources", v)
        for i, t in enumerate(times)
        for v in [times[t]]
    ]


def test_regret_spearman_and_confusion_on_a_small_set() -> None:
    pred = predict_shape(SHAPE, get_hardware("h200"))
    ranked = pred.ranked_tiles()
    infeasible = next(
        pred.tile(i)
        for i in range(len(pred.table))
        if not pred.table.feasible[i] and pred.table.legal()[i]
    )
    first, second, third, fourth = ranked[:4]
    times = {first: 130.0, second: 100.0, third: 120.0, fourth: 150.0, infeasible: 90.0}
    report = shape_report(SHAPE, _rows(times), pred)
    assert report.pick == first and report.best_tile == infeasible
    assert report.top1_regret == pytest.approx(130.0 / 90.0)
    assert report.top3_regret == pytest.approx(100.0 / 90.0)
    # predicted order first<second<third<fourth (or ties); measured 130, 100, 120, 150
    expected = spearman([pred.time_us(t) or 0 for t in ranked[:4]], [130.0, 100.0, 120.0, 150.0])
    assert report.spearman == pytest.approx(expected)
    c = report.confusion
    assert (c.feasible_ran, c.feasible_failed, c.infeasible_ran, c.infeasible_failed) == (
        4,
        0,
        1,
        0,
    )
    assert c.ran_tiles[0].startswith(infeasible.label())
    # the pick failed: no top-1 regret, and the failure is counted against the model
    failed = shape_report(SHAPE, _rows({**times, first: None}), pred)
    assert failed.top1_regret is None and failed.pick_status == "out_of_resources"
    assert failed.confusion.feasible_failed == 1


def test_spearman() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)
    assert spearman([1, 2], [1, 2]) is None and spearman([1, 1, 1], [1, 2, 3]) is None


def test_analysis_script_table_json_and_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    csv_path = ROOT / "benchmarks/data/synthetic_h200.csv"
    script = [sys.executable, str(GPU / "analyze.py"), str(csv_path)]
    text = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "b4 h16 s4096 d128 bf16 causal" in text.stdout and "mean" in text.stdout
    plot = tmp_path / "p.png"
    doc = subprocess.run(
        [*script, "--json", "--plot", str(plot)], capture_output=True, text=True, timeout=120
    )
    assert doc.returncode == 0, doc.stderr
    data = json.loads(doc.stdout)
    assert len(data["shapes"]) == 6 and 0 < data["mean_spearman"] <= 1
    assert plot.stat().st_size > 10_000
    summary = analyse(read_measurements(csv_path), {"h200": get_hardware("h200")})
    assert summary.mean("spearman") == pytest.approx(data["mean_spearman"])
    bad = tmp_path / "bad.csv"
    bad.write_text("hardware\nh200\n")
    failed = subprocess.run(
        [sys.executable, str(GPU / "analyze.py"), str(bad)], capture_output=True, text=True
    )
    assert failed.returncode == 2 and "row 1, column batch: missing" in failed.stderr
