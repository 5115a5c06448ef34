"""Calibration (issue 15): the model's free constants as a record, fitting them to measured
times, profiles on the CLI and the server, and bad input.

The measurements are synthetic: tilesolve's own model with ranking-relevant constants
perturbed stands in for the GPU (a global scale would leave every ranking as it was, so it
would prove nothing). No GPU is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tilesolve import wire
from tilesolve.client.measurements import write_measurements
from tilesolve.server.cache import request_key
from tilesolve.solver import AttentionProblem, CudaDevice, Phase, SolveOptions, get_hardware, solve
from tilesolve.solver.apps.calibrate import (
    FREE_CONSTANT_NAMES,
    MIN_ROWS_PER_CONSTANT,
    calibrate,
    split_shapes,
    synthetic_measurements,
    with_constants,
)
from tilesolve.solver.apps.measured import Measurement, Shape, Tile, predict_shape, sample_tiles
from tilesolve.solver.candidates import build_candidate_table
from tilesolve.solver.model_constants import ModelConstants
from tilesolve.solver.registry import get_family
from tilesolve.solver.solve import MODEL_VERSION, model_version
from tilesolve.solver.space import ConfigArrays
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from command_line import run

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC_CSV = ROOT / "benchmarks/data/synthetic_h200.csv"

# Ranking-relevant perturbation: less mma.sync overlap, more wgmma overlap, a longer softmax
# chain, lower achieved rates (not a global scale). The chain is 1,200 cycles (700 before the
# triton family's compiler model, MODEL_VERSION 0.8.0, 800 before the registers on Triton's warp
# layouts, 0.15.0: under each newer model the shorter chain moved the held-out ranking too
# little, Spearman 0.984 at 800 and 0.979 at 1,000, for the improvement to show beyond the
# measurement noise; 1,100 to 1,400 all do).
TRUTH = {
    "instruction_level_parallelism": 3.0,
    "wgmma_instruction_level_parallelism": 2.5,
    "softmax_chain_cycles": 1200.0,
    "iteration_fixed_instructions": 110.0,
    "matrix_efficiency": 0.8,
    "memory.dram_achievable_fraction": 0.8,
    "memory.l2_achievable_fraction": 0.7,
    "throughput.mma_sync_efficiency": 0.4,
}
SHAPES = [
    Shape("h200", "triton", 4, 16, 16, 4096, 4096, 128, 128, "bf16", True),
    Shape("h200", "triton", 8, 16, 16, 2048, 2048, 64, 64, "fp16", False),
    Shape("h200", "triton", 2, 32, 8, 8192, 8192, 128, 128, "fp16", True),
    Shape("h200", "triton", 16, 8, 8, 1024, 1024, 128, 128, "bf16", False),
    Shape("h200", "triton", 1, 16, 16, 16384, 16384, 64, 64, "fp16", True),
    Shape("h200", "triton", 32, 8, 8, 512, 512, 64, 64, "bf16", False),
]


def _tiles(shape: Shape) -> list[Tile]:
    return sample_tiles(predict_shape(shape, get_hardware(shape.hardware)), 12, 48)


@pytest.fixture(scope="module")
def synthetic() -> list[Measurement]:
    return synthetic_measurements(SHAPES, _tiles, TRUTH, noise=0.02, seed=3)


# ---- the record of constants -------------------------------------------------------------


# Each constant perturbed alone, and the CUDA registrations whose answers it must move (every
# use reached): the forward model's own constants move the FlashAttention forward families
# (and their split-KV decode); the mma latency also the backward chains; block start and launch
# every CUDA model, fa3 and the split-KV combine included. The others must not move.
PERTURBED = {
    "matrix_efficiency": 0.8,
    "instruction_level_parallelism": 4.0,
    "wgmma_instruction_level_parallelism": 2.0,
    "iteration_fixed_instructions": 80.0,
    "softmax_chain_cycles": 600.0,
    "mma_latency_cycles": 50.0,
    "block_start_cycles": 600.0,
    "kernel_launch_us": 5.0,
}
FORWARD = {"matrix_efficiency", "instruction_level_parallelism", "iteration_fixed_instructions"}
FORWARD |= {"softmax_chain_cycles", "mma_latency_cycles", "block_start_cycles"}
FORWARD |= {"kernel_launch_us"}
READS = {
    ("fa2", "forward"): FORWARD,
    ("triton", "forward"): FORWARD | {"wgmma_instruction_level_parallelism"},
    ("flashinfer", "forward"): FORWARD,
    ("fa2", "decode"): FORWARD,
    ("flashinfer", "decode"): FORWARD,
    ("fa3", "forward"): {"block_start_cycles", "kernel_launch_us"},
    ("fa3", "decode"): {"block_start_cycles", "kernel_launch_us"},
    ("fa2", "backward"): {"mma_latency_cycles", "block_start_cycles", "kernel_launch_us"},
    ("triton", "backward"): {"mma_latency_cycles", "block_start_cycles", "kernel_launch_us"},
}


def _case(phase: str) -> AttentionProblem:
    if phase == "decode":
        return AttentionProblem(
            batch=2, heads=32, kv_heads=8, seq_len=1, seq_len_kv=8192, head_dim=128, phase=phase
        )
    return AttentionProblem(batch=2, heads=16, seq_len=2048, head_dim=128, phase=phase)


@pytest.mark.parametrize("key", sorted(READS), ids="-".join)
def test_a_calibrated_constant_reaches_every_use(key: tuple[str, str]) -> None:
    """A device calibrated with one constant changed moves the times of exactly the families
    that read it (flashinfer's, fa3's, the backward's and the combine's uses included; they
    read module copies of the defaults before)."""
    name, phase = key
    spec = get_hardware("h100-sxm")
    assert isinstance(spec, CudaDevice)
    problem = _case(phase)
    family = get_family(name, problem.phase, spec)
    base = build_candidate_table(family, spec, problem, SolveOptions()).perf.time_us
    moved = set()
    for field, value in PERTURBED.items():
        calibrated = spec.model_copy(update={"calibration": ModelConstants(**{field: value})})
        times = build_candidate_table(family, calibrated, problem, SolveOptions()).perf.time_us
        if not np.array_equal(times, base):
            moved.add(field)
    assert moved == READS[key]


def test_flashinfer_subtracts_the_calibrated_mma_latency() -> None:
    """Warps along KV each run the dependent chain over their own slice of the keys: the
    forward chain counts d + block_n k-steps, and flashinfer takes off block_n (1 - 1/warps_kv)
    of them at the device's mma latency, so with that latency calibrated to 0 nothing is taken
    off (it used to subtract the default 33 cycles from a calibrated chain)."""
    spec = get_hardware("a100-80gb")
    assert isinstance(spec, CudaDevice)
    family: Any = get_family("flashinfer", Phase.FORWARD, spec)
    problem = AttentionProblem(seq_len=2048, head_dim=128)
    cfg = family.kernel_view(
        ConfigArrays(
            {
                "warps_kv": np.array([1, 2, 4]),
                "mma_q": np.array([1, 1, 1]),
                "mma_kv": np.array([2, 2, 2]),
            }
        )
    )
    for latency in (0.0, 33.0, 66.0):
        device = spec.model_copy(update={"calibration": ModelConstants(mma_latency_cycles=latency)})
        chain = np.asarray(family.kernel_extras(cfg, problem, device).chain_cycles)
        bn = cfg.block_n.astype(np.float64)
        expected = -latency * (bn - bn / cfg["warps_kv"]) / 16
        assert np.array_equal(chain, expected)
    assert chain[0] == 0.0 and chain[2] < chain[1] < 0.0


def test_a_catalog_device_dumps_without_calibration_and_keeps_the_model_version() -> None:
    spec = get_hardware("h200")
    assert isinstance(spec, CudaDevice) and spec.calibration is None
    assert "calibration" not in spec.model_dump() and "calibration" not in spec.model_dump_json()
    assert model_version(spec) == MODEL_VERSION
    # a device carrying the default record answers exactly like the catalog one
    same = spec.model_copy(update={"calibration": ModelConstants()})
    problem = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128, causal=True)
    options = SolveOptions(kernel="triton", top_k=3)
    a, b = solve(problem, spec, options), solve(problem, same, options)
    assert [c.predicted_time_us for c in a.candidates] == [
        c.predicted_time_us for c in b.candidates
    ]
    assert b.model_version.startswith(MODEL_VERSION + "+cal.")


def test_split_is_by_shape_and_deterministic() -> None:
    training, held = split_shapes(SHAPES)
    assert len(held) == 2 and not set(training) & set(held)
    assert split_shapes(list(reversed(SHAPES))) == (training, held)
    assert split_shapes(SHAPES[:2]) == ([sorted(SHAPES[:2])[0]], [sorted(SHAPES[:2])[1]])
    assert split_shapes(SHAPES[:1]) == (SHAPES[:1], [])


# ---- the Done-when test ------------------------------------------------------------------


def test_calibrate_improves_spearman_on_held_out_shapes(synthetic: list[Measurement]) -> None:
    """Rows from a model with ranking-relevant constants perturbed: the uncalibrated model
    ranks the held-out shapes visibly worse, the calibrated one nearly as the truth does."""
    result = calibrate(synthetic, "h200")
    before = result.before_held_out.mean("spearman")
    after = result.after_held_out.mean("spearman")
    assert before is not None and after is not None
    assert before < 0.975, "the perturbation must move the ranking"
    assert after > before + 0.02
    assert after > 0.98
    # every held-out shape the perturbation moved (before < 0.98) improves, one it left ranked
    # as well as the 2% noise allows stays there; no held-out shape was fitted
    for b, a in zip(result.before_held_out.shapes, result.after_held_out.shapes, strict=True):
        assert a.spearman is not None and b.spearman is not None
        assert a.spearman > b.spearman if b.spearman < 0.98 else a.spearman > 0.975
    assert any(b.spearman is not None and b.spearman < 0.98 for b in result.before_held_out.shapes)
    assert not set(result.training) & set(result.held_out)
    assert result.fit.rms_log_error_after < 0.5 * result.fit.rms_log_error_before
    # the constants that drive the ranking move towards the truth
    fitted = result.fit.values
    assert fitted["instruction_level_parallelism"] < 5.0
    assert fitted["softmax_chain_cycles"] > 500.0
    assert result.device.calibration is not None
    assert model_version(result.device).startswith(MODEL_VERSION + "+cal.")


def test_a_global_scale_changes_no_ranking(synthetic: list[Measurement]) -> None:
    """Why the perturbation above is not a scale: times all multiplied by 1.7 keep the model's
    Spearman on every shape exactly."""
    scaled = [
        Measurement(
            m.row, m.shape, m.tile, m.status, None if m.time_us is None else m.time_us * 1.7
        )
        for m in synthetic
    ]
    a = calibrate(synthetic, "h200", ["kernel_launch_us", "matrix_efficiency"], holdout_every=0)
    b = calibrate(scaled, "h200", ["kernel_launch_us", "matrix_efficiency"], holdout_every=0)
    rho_a = [r.spearman for r in a.before_training.shapes]
    rho_b = [r.spearman for r in b.before_training.shapes]
    assert rho_a == rho_b


# ---- the CLI -------------------------------------------------------------------------------


def _write(path: Path, rows: list[Measurement]) -> str:
    write_measurements(path, rows)
    return str(path)


def test_cli_calibrate_writes_a_profile_that_solve_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "h200.json"
    code, out, err = run(
        capsys,
        "calibrate",
        str(SYNTHETIC_CSV),
        "--hardware",
        "h200-sxm",
        "-o",
        str(profile),
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["hardware"] == "h200" and doc["base_model_version"] == MODEL_VERSION
    held = doc["fit"]["held_out"]
    assert held["after"]["spearman"] > held["before"]["spearman"]
    assert len(doc["fit"]["held_out_shapes"]) == 2
    assert set(doc["fit"]["fitted"]) == set(FREE_CONSTANT_NAMES)
    assert doc["fit"]["measurements"]["rows"] == 432
    saved = json.loads(profile.read_text())
    assert saved["model_version"] == doc["model_version"]

    args = ["solve", "--hardware", "h200", "--kernel", "triton", "--head-dim", "128"]
    args += ["--seq-len", "4096", "--batch", "4", "--heads", "16", "--json"]
    code, out, _ = run(capsys, *args, "--profile", str(profile))
    calibrated = json.loads(out)
    code2, out2, _ = run(capsys, *args)
    plain = json.loads(out2)
    assert code == code2 == 0
    assert calibrated["model_version"] == doc["model_version"] != plain["model_version"]
    assert plain["model_version"] == MODEL_VERSION
    times = [c["predicted_time_us"] for c in calibrated["candidates"]]
    assert times != [c["predicted_time_us"] for c in plain["candidates"]]

    # the text report names the fit; a profile for another device is refused
    code, out, err = run(capsys, *args[:-1], "--hardware", "h100-sxm", "--profile", str(profile))
    assert code == 2 and "fitted on h200, not h100-sxm" in err and out == ""
    # and with --server it is the server's to load
    code, _, err = run(capsys, *args, "--profile", str(profile), "--server", "127.0.0.1:1")
    assert code == 2 and "tilesolve-server --profile" in err


def test_cli_calibrate_text_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "calibrate",
        str(SYNTHETIC_CSV),
        "--hardware",
        "h200",
        "-o",
        str(tmp_path / "p.json"),
    )
    assert code == 0
    assert "held out, before" in out and "held out, after" in out
    assert "softmax_chain_cycles" in out and "+cal." in out


# ---- bad input -------------------------------------------------------------------------------


HEADER = (
    "hardware,batch,heads,seq_len,head_dim,dtype,causal,block_m,block_n,num_warps,num_stages,"
    "status,time_us"
)


def test_missing_columns_are_named_with_row_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.csv"
    path.write_text(
        "hardware,batch,heads,seq_len,head_dim,dtype,causal,block_m,block_n\nh200,1,1,1,1,fp16,true,16,16\n"
    )
    code, out, err = run(capsys, "calibrate", str(path), "--hardware", "h200")
    assert code == 2 and out == ""
    for column in ("num_warps", "num_stages", "status", "time_us"):
        assert f"row 1, column {column}: missing" in err


def test_bad_cells_are_named_by_row_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.csv"
    path.write_text(
        HEADER
        + ",kv_heads"
        + "\nh200,4,16,4096,128,bf16,true,64,64,4,2,ok,812.5,16"
        + "\nh200,4,16,4096,128,bf16,true,64,32,4,2,ok,-3,16"
        + "\nh900,4,16,4096,128,bf16,true,64,32,4,2,ok,900,16"
        + "\nh200,4,16,4096,128,bf16,true,64,128,4,2,ok,0,16"
        + "\nh200,4,16,4096,128,bf16,maybe,64,128,4,3,done,12,16"
        + "\nh200,4,16,4096,128,bf16,true,64,128,4,3,ok,12,5\n"
    )
    code, out, err = run(capsys, "calibrate", str(path), "--hardware", "h200")
    assert code == 2 and out == ""
    assert "row 3, column time_us: must be a positive number of microseconds; got -3" in err
    assert "row 4, column hardware: unknown hardware 'h900'" in err
    assert "row 5, column time_us" in err
    assert "row 6, column causal" in err and "row 6, column status" in err
    assert "row 7, column kv_heads: " in err  # 5 KV heads do not divide 16 heads
    assert "row 2" not in err


def test_failed_rows_need_no_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.csv"
    path.write_text(HEADER + "\nh200,4,16,4096,128,bf16,true,256,256,8,5,out_of_resources,\n")
    code, _, err = run(capsys, "calibrate", str(path), "--hardware", "h200")
    assert code == 2 and "too few rows to fit 11 constants" in err  # read fine, then too few


def test_too_few_rows_say_how_many_are_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], synthetic: list[Measurement]
) -> None:
    few = [m for m in synthetic if m.status == "ok"][:10]
    path = _write(tmp_path / "few.csv", few)
    code, out, err = run(capsys, "calibrate", path, "--hardware", "h200")
    needed = MIN_ROWS_PER_CONSTANT * len(FREE_CONSTANT_NAMES)
    assert code == 2 and out == ""
    assert f"{needed} timed rows" in err and "are needed" in err
    code, _, err = run(
        capsys,
        "calibrate",
        path,
        "--hardware",
        "h200",
        "--fit",
        "matrix_efficiency,kernel_launch_us",
        "-o",
        str(tmp_path / "two.json"),
    )
    assert code == 0, err


def test_calibrate_option_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = str(SYNTHETIC_CSV)
    code, _, err = run(capsys, "calibrate", csv_path, "--hardware", "nope")
    assert code == 2 and "unknown hardware 'nope'" in err
    code, _, err = run(capsys, "calibrate", csv_path, "--hardware", "ascend-910b")
    assert code == 2 and "not a CUDA device" in err
    code, _, err = run(capsys, "calibrate", csv_path, "--hardware", "h200", "--fit", "warp_speed")
    assert code == 2 and "unknown constant(s) warp_speed" in err
    code, _, err = run(capsys, "calibrate", csv_path, "--hardware", "a100")
    assert code == 2 and "has no rows for a100-80gb" in err
    code, _, err = run(capsys, "calibrate", str(tmp_path / "none.csv"), "--hardware", "h200")
    assert code == 2 and "none.csv" in err


def _profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "p.json"
    code, _, err = run(
        capsys, "calibrate", str(SYNTHETIC_CSV), "--hardware", "h200", "-o", str(path)
    )
    assert code == 0, err
    return path


def test_a_profile_of_another_model_or_a_broken_one_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.loads(_profile(tmp_path, capsys).read_text())
    args = ["solve", "--hardware", "h200", "--head-dim", "128", "--seq-len", "4096"]
    cases: list[tuple[dict[str, Any], str]] = [
        (good | {"base_model_version": "0.0.1"}, "fitted against model 0.0.1"),
        (good | {"catalog_version": "1999.1.1"}, "fitted against catalog 1999.1.1"),
        (good | {"overrides": {"sm.regs_per_sm": 1.0}}, "overrides sm.regs_per_sm"),
        ({"format": "nonsense"}, "is not a tilesolve profile"),
    ]
    for i, (doc, words) in enumerate(cases):
        path = tmp_path / f"bad{i}.json"
        path.write_text(json.dumps(doc))
        code, out, err = run(capsys, *args, "--profile", str(path))
        assert code == 2 and out == "" and words in err, err
    (tmp_path / "x.json").write_text("{")
    code, _, err = run(capsys, *args, "--profile", str(tmp_path / "x.json"))
    assert code == 2 and "not JSON" in err


# ---- the server ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = synthetic_measurements(SHAPES, _tiles, TRUTH, noise=0.02, seed=3)
    result = calibrate(rows, "h200")
    from tilesolve.solver.apps.calibrate import profile_of

    path = tmp_path_factory.mktemp("profile") / "h200.json"
    path.write_text(json.dumps(profile_of(result, "triton", {"file": "x"}).model_dump(mode="json")))
    return path


@pytest.fixture(scope="module")
def server_settings(profile_file: Path) -> dict[str, Any]:
    """The module's server (conftest's `server`, `stub`) answers with the profile."""
    return {"workers": 2, "profile": profile_file}


def test_server_profile_answers_its_device_calibrated(stub: pb_grpc.TileSolveServiceStub) -> None:
    def ask(hardware: str) -> pb.SolveResponse:
        return stub.Solve(
            pb.SolveRequest(
                hardware=pb.HardwareRef(name=hardware),
                problem=pb.AttentionProblem(seq_len=4096, head_dim=128, batch=4, heads=16),
                options=pb.SolveOptions(kernel="triton"),
            ),
            timeout=30,
        )

    calibrated = ask("h200-sxm")
    assert calibrated.model_version.startswith(MODEL_VERSION + "+cal.")
    assert calibrated.hardware == "h200"
    repeat = ask("h200")
    assert repeat.cache_hit and repeat.model_version == calibrated.model_version
    other = ask("a100")
    assert other.model_version == MODEL_VERSION
    answer, _ = wire.answer_from_proto(calibrated)
    plain = solve(
        AttentionProblem(seq_len=4096, head_dim=128, batch=4, heads=16),
        "h200",
        SolveOptions(kernel="triton"),
    )
    assert [c.predicted_time_us for c in answer.candidates] != [
        c.predicted_time_us for c in plain.candidates
    ]


def test_a_profile_changes_the_cache_key() -> None:
    problem, options = AttentionProblem(seq_len=4096, head_dim=128), SolveOptions()
    base = get_hardware("h200")
    assert isinstance(base, CudaDevice)
    calibrated = with_constants(base, {"softmax_chain_cycles": 500.0})
    other = with_constants(base, {"softmax_chain_cycles": 600.0})
    request = wire.solve_request_to_proto(problem, "h200", options)
    salts = [b"", model_version(calibrated).encode(), model_version(other).encode()]
    assert len({request_key(request, salt) for salt in salts}) == 3


def test_server_refuses_a_bad_profile(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "p.json"
    path.write_text(
        json.dumps({"hardware": "h200", "base_model_version": "0.0.1", "catalog_version": "x"})
    )
    result = subprocess.run(
        [sys.executable, "-m", "tilesolve.server.main", "--profile", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "fitted against model 0.0.1" in result.stderr
