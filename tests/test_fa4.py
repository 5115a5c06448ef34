"""The fa4 family (FlashAttention-4 on Blackwell), issue 25's "done when" list: ranked answers on
the five Blackwell parts for head dims 64, 128, (192, 128) and 256, bf16 and fp8 on sm_100, causal
and not, with tensor memory among the resources on sm_100, over the CLI's --json and gRPC; FA4's
own configuration feasible and among the top picks; CP-SAT equal to the exhaustive oracle on both
kernels; the bad inputs; the resources and costs by hand; the predictions against published
measurements."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tilesolve import wire
from tilesolve.client.cli import main
from tilesolve.solver import (
    AttentionProblem,
    InvalidRequestError,
    SolveAnswer,
    SolveOptions,
    get_hardware,
    parse_hardware,
    solve,
)
from tilesolve.solver.families.fa4.cost import (
    EMULATED_EXP2_OPS,
    SOFTMAX_FP32_OPS_PER_SCORE,
    emulated_fraction,
)
from tilesolve.solver.families.fa4.forward import FlashAttention4
from tilesolve.solver.families.fa4.resources import SMEM_RESERVE_BYTES
from tilesolve.solver.hardware import CudaDevice
from tilesolve.solver.registry import find_family
from tilesolve.solver.solve import prepare
from tilesolve.solver.validate import check_config
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
SM100 = ("b200", "gb200", "b300")
SM120 = ("rtx-5090", "rtx-pro-6000")
HEAD_DIMS = ((64, 64), (128, 128), (192, 128), (256, 256))
KIB = 1024


def _load_table() -> ModuleType:
    """benchmarks/fa4_table.py, where FA4's own configuration is written down (a measurement the
    model is compared with, not an input of it)."""
    spec = importlib.util.spec_from_file_location("fa4_table", ROOT / "benchmarks/fa4_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


table = _load_table()


def bench_problem(
    d: int, dv: int, dtype: str, causal: bool, seq_len: int = 8192
) -> AttentionProblem:
    problem: AttentionProblem = table.picks_problem(d, dv, dtype, causal, seq_len)
    return problem


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def flags(problem: AttentionProblem) -> list[str]:
    out = ["--batch", str(problem.batch), "--heads", str(problem.heads)]
    out += ["--seq-len", str(problem.seq_len), "--head-dim", str(problem.head_dim)]
    out += ["--head-dim-v", str(problem.head_dim_v_eff), "--dtype", problem.dtype.value]
    return out + (["--causal"] if problem.causal else [])


def device(name: str) -> CudaDevice:
    spec = get_hardware(name)
    assert isinstance(spec, CudaDevice)
    return spec


# ---- ranked answers on every Blackwell part, over the CLI and gRPC ---------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("hardware", SM100)
def test_cli_ranks_fa4_tiles_on_sm100_with_tensor_memory(
    capsys: pytest.CaptureFixture[str], hardware: str, dtype: str, causal: bool
) -> None:
    for d, dv in HEAD_DIMS:
        problem = bench_problem(d, dv, dtype, causal)
        argv = ["solve", "--hardware", hardware, *flags(problem), "--json", "--top-k", "3"]
        code, answer = cli_json(capsys, *argv)
        assert code == 0 and answer["status"] == "optimal", (d, dv)
        assert answer["kernel"] == "fa4"  # the default family, asked for by no one
        assert answer["kernel_reason"].startswith(f"fa4, the default kernel of {hardware}")
        times = [c["predicted_time_us"] for c in answer["candidates"]]
        assert times == sorted(times) and len(times) >= 1
        for c in answer["candidates"]:
            used = {r["name"]: r for r in c["resources"]}
            assert used["tensor_memory"]["unit"] == "columns"
            assert used["tensor_memory"]["used"] <= used["tensor_memory"]["capacity"] == 512
            assert used["shared_memory"]["used"] <= used["shared_memory"]["capacity"] == 232448
            assert used["register_file"]["used"] <= 65536
            assert c["block_m"] == 128 and c["blocks_per_sm"] == 1
            assert c["num_warps"] == (12 if (d, dv) == (256, 256) else 16)
            assert set(c["parameters"]) == {
                "block_m",
                "block_n",
                "num_warps",
                "q_stage",
                "cta_group",
            }
            assert c["figures"]["kv_stages"] >= 2 and c["figures"]["tmem_columns"] > 0
            assert any("tensor memory" in r for r in c["reasons"])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hardware", SM120)
def test_cli_ranks_fa4_tiles_on_sm120_without_tensor_memory(
    capsys: pytest.CaptureFixture[str], hardware: str, causal: bool
) -> None:
    for d, dv in HEAD_DIMS:
        problem = bench_problem(d, dv, "bf16", causal)
        argv = ["solve", "--hardware", hardware, *flags(problem), "--json", "--top-k", "3"]
        code, answer = cli_json(capsys, *argv)
        assert code == 0 and answer["status"] == "optimal" and answer["kernel"] == "fa4"
        assert "sm_120" in answer["kernel_reason"]
        for c in answer["candidates"]:
            used = {r["name"]: r for r in c["resources"]}
            assert "tensor_memory" not in used
            assert used["shared_memory"]["used"] <= used["shared_memory"]["capacity"] == 101376
            assert set(c["parameters"]) == {"block_m", "block_n", "num_warps", "num_stages"}
            assert c["threads_per_block"] == 32 * c["num_warps"] <= 1024


@pytest.mark.parametrize("hardware", [*SM100, *SM120])
def test_the_same_answers_over_grpc(stub: pb_grpc.TileSolveServiceStub, hardware: str) -> None:
    for d, dv in HEAD_DIMS:
        for causal in (False, True):
            problem = bench_problem(d, dv, "bf16", causal)
            options = SolveOptions(top_k=3)
            request = wire.solve_request_to_proto(problem, hardware, options)
            response = stub.Solve(request, timeout=60)
            assert response.status == pb.SOLVE_STATUS_OPTIMAL and response.kernel == "fa4"
            answer, _ = wire.answer_from_proto(response)
            assert answer.candidates == solve(problem, hardware, options).candidates
            names = {r.name for r in response.candidates[0].resources}
            assert ("tensor_memory" in names) == (hardware in SM100)


@pytest.mark.parametrize("hardware", [*SM100, *SM120])
def test_triton_and_fa2_still_answer_on_blackwell(hardware: str) -> None:
    """The other CUDA families keep answering there with --kernel (triton's Blackwell model is
    issue 25's item 3, reported apart; flex has no family of its own in this tree)."""
    problem = bench_problem(128, 128, "bf16", False)
    for kernel in ("triton", "fa2"):
        answer = solve(problem, hardware, SolveOptions(kernel=kernel))
        assert answer.kernel == kernel and answer.status == "optimal" and answer.candidates


# ---- FA4's own configuration ----------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize(("d", "dv"), HEAD_DIMS)
def test_fa4s_own_configuration_is_feasible_when_pinned(
    d: int, dv: int, dtype: str, causal: bool
) -> None:
    """What FA4's interface runs is a configuration the model must find legal: where it is
    not, the model's resource statement is wrong."""
    for seq_len in (128, 512, 8192):
        problem = bench_problem(d, dv, dtype, causal, seq_len)
        choice = table.fa4_choice(problem, "b200")
        answer = solve(problem, "b200", SolveOptions(parameter_pins=choice, top_k=1))
        assert answer.status == "optimal", (seq_len, choice, answer.infeasibility)


def test_fa4s_own_configuration_is_among_the_top_picks_for_most_shapes() -> None:
    ranks = [row["fa4_rank"] for row in table.picks("b200")]
    assert len(ranks) == 16
    assert sum(1 for r in ranks if r is not None and r <= 3) >= 12, ranks
    assert all(r is not None for r in ranks), ranks


def test_fa4s_sm120_configuration_is_feasible_when_pinned_up_to_head_dim_192() -> None:
    """FA4's sm_120 default (128 x 64 above head dim 64, 4 warps, 1 stage) fits 99 KB up to
    (192, 128); at 256 it needs 64 + 32 + 32 KiB, which its can_implement would refuse (the
    interface does not call it): the model refuses it on shared memory too."""
    for d, dv in HEAD_DIMS:
        problem = bench_problem(d, dv, "bf16", False)
        choice = table.fa4_choice(problem, "rtx-5090")
        answer = solve(problem, "rtx-5090", SolveOptions(parameter_pins=choice, top_k=1))
        if d <= 192:
            assert answer.status == "optimal", (d, dv, answer.infeasibility)
            continue
        assert answer.status == "infeasible"
        table_ = prepare(problem, "rtx-5090", SolveOptions())
        config = next(
            table_.cfg.config(i)
            for i in range(len(table_.cfg))
            if table_.cfg.config(i).as_dict() == choice
        )
        broken = check_config(table_.family, table_.hardware, problem, SolveOptions(), config)
        assert any(b.startswith("shared_memory: 131072 > 101376") for b in broken), broken


# ---- the engines agree ------------------------------------------------------------------------

PROBLEMS_PER_SEED = 12


@pytest.mark.parametrize("seed", range(3))
def test_cpsat_equals_exhaustive_on_random_fa4_problems(
    seed: int, compare_engines: Callable[..., SolveAnswer | None]
) -> None:
    rng = np.random.default_rng(2500 + seed)
    compared = infeasible = 0
    for _ in range(PROBLEMS_PER_SEED):
        hardware = str(rng.choice([*SM100, *SM120]))
        sm100 = hardware in SM100
        d, dv = HEAD_DIMS[int(rng.integers(0, 4))] if rng.random() < 0.7 else (96, 96)
        heads = int(rng.choice([4, 8, 16, 32]))
        decode = rng.random() < 0.25
        seq_len_kv = int(rng.integers(256, 20000))
        problem = AttentionProblem(
            batch=int(rng.integers(1, 5)),
            heads=heads,
            kv_heads=int(rng.choice([k for k in (1, 2, heads) if heads % k == 0])),
            seq_len=int(rng.integers(1, 9)) if decode else int(rng.integers(1, 20000)),
            seq_len_kv=seq_len_kv if decode or rng.random() < 0.3 else None,
            head_dim=d,
            head_dim_v=dv,
            dtype=str(rng.choice(["bf16", "fp16", "fp8"] if sm100 else ["bf16", "fp16"])),
            causal=bool(rng.random() < 0.5),
            phase="decode" if decode else "forward",
        )
        roll = rng.random()
        options = SolveOptions(
            kernel="fa4",
            top_k=int(rng.integers(1, 7)),
            max_smem=int(rng.integers(40, 228)) * KIB if roll < 0.25 else None,
            min_blocks_per_sm=2 if 0.25 <= roll < 0.32 else None,
            parameter_pins={"q_stage": 2} if sm100 and 0.32 <= roll < 0.45 else {},
        )
        answer = compare_engines(problem, hardware, options, allow_invalid=True)
        if answer is None:
            continue
        compared += 1
        infeasible += answer.status == "infeasible"
    assert compared >= PROBLEMS_PER_SEED - 3 and infeasible < compared


def test_the_validator_restates_the_sm120_rules() -> None:
    """check_config agrees with the table on the sm_120 kernel (the registered case runs the
    sm_100 one)."""
    problem = AttentionProblem(batch=2, heads=8, seq_len=3000, head_dim=128, dtype="bf16")
    options = SolveOptions(kernel="fa4", max_smem=64 * KIB, min_blocks_per_sm=1)
    table_ = prepare(problem, "rtx-5090", options)
    request = (table_.family, table_.hardware, problem, options)
    for feasible in (True, False):
        indices = np.flatnonzero(table_.feasible == feasible)
        assert len(indices)
        for i in indices[:: max(1, len(indices) // 25)]:
            broken = check_config(*request, table_.cfg.config(int(i)))
            assert (not broken) == feasible, (
                table_.family.label(table_.cfg.config(int(i))),
                broken,
            )


# ---- the resources: tensor memory, registers, shared memory, 2-CTA -----------------------------


def test_tensor_memory_binds_two_q_tiles_of_wide_blocks() -> None:
    """2 x 160 + 2 x 128 = 576 columns > 512: tensor memory is the conflict."""
    problem = bench_problem(128, 128, "bf16", False)
    pins = {"q_stage": 2, "block_n": 160}
    answer = solve(problem, "b200", SolveOptions(parameter_pins=pins))
    assert answer.status == "infeasible" and answer.infeasibility is not None
    assert answer.infeasibility.conflicting_constraints == ["pins", "tensor_memory"]
    steps = [step.constraint for step in answer.funnel]
    assert steps.index("tensor_memory") < steps.index("shared_memory")


def test_the_softmax_registers_bind_before_tensor_memory_at_head_dim_64() -> None:
    """head_dim_v 64: 2 x 192 + 2 x 64 = 512 columns fit, but two softmax warpgroups of
    192 + 40 registers and the others' 64 + 32 exceed the 512 per thread of the file."""
    problem = bench_problem(64, 64, "bf16", False)
    pins = {"q_stage": 2, "block_n": 192}
    answer = solve(problem, "b200", SolveOptions(parameter_pins=pins))
    assert answer.infeasibility is not None
    assert answer.infeasibility.conflicting_constraints == ["pins", "registers"]
    fits = solve(problem, "b200", SolveOptions(parameter_pins={"q_stage": 2, "block_n": 160}))
    register_file = {r.name: r for r in fits.candidates[0].resources}["register_file"]
    assert register_file.used == (2 * 200 + 64 + 32) * 128  # softmax x2, correction, other


@pytest.mark.parametrize(
    ("d", "dv", "q", "cg", "stages"),
    [
        (128, 128, 2, 1, 3),  # (224 KiB - 64 - 64) / 32 KiB
        (128, 128, 2, 2, 6),  # half of every K/V tile per CTA
        (64, 64, 2, 1, 10),
        (128, 128, 1, 1, 5),
        (192, 128, 2, 1, 3),  # Q and O share 96 KiB; 2 stages of 48 KiB laid out unevenly: 3
        (192, 128, 2, 2, 5),
    ],
)
def test_the_ring_is_derived_as_fa4_derives_it(
    d: int, dv: int, q: int, cg: int, stages: int
) -> None:
    problem = bench_problem(d, dv, "bf16", False)
    pins = {"q_stage": q, "cta_group": cg, "block_n": 128}
    first = solve(problem, "b200", SolveOptions(parameter_pins=pins, top_k=1)).candidates[0]
    assert first.figures["kv_stages"] == stages
    s_q, s_o = q * 128 * d * 2, q * 128 * dv * 2
    q_o = max(s_q, s_o) if d == 192 else s_q + s_o
    per_stage = 128 * max(d, dv) * 2 // cg
    expected = min((224 * KIB - q_o) // per_stage, 32)  # flash_fwd_sm100.py's own formula
    assert stages == (3 if (d, dv, expected) == (192, 128, 2) else expected)
    assert first.smem_bytes is not None and first.smem_bytes <= 227 * KIB
    assert first.smem_bytes >= q_o + SMEM_RESERVE_BYTES


def test_two_ctas_only_where_fa4s_interface_allows_them() -> None:
    two = {"cta_group": 2}
    causal = solve(bench_problem(128, 128, "bf16", True), "b200", SolveOptions(parameter_pins=two))
    assert causal.infeasibility is not None
    assert causal.infeasibility.conflicting_constraints == ["fa4_shape", "pins"]
    short = bench_problem(128, 128, "bf16", False, seq_len=256)  # not more than 2 x 128 rows
    assert solve(short, "b200", SolveOptions(parameter_pins=two)).status == "infeasible"
    hd64 = bench_problem(64, 64, "bf16", False)
    assert solve(hd64, "b200", SolveOptions(parameter_pins=two)).status == "infeasible"
    assert solve(bench_problem(192, 128, "bf16", False), "b200", SolveOptions(parameter_pins=two))


def test_head_dim_256_runs_the_dedicated_kernel_only() -> None:
    answer = solve(bench_problem(256, 256, "bf16", True), "b200", SolveOptions(top_k=5))
    assert answer.feasible_count == 1
    (only,) = answer.candidates
    assert only.parameters == {
        "block_m": 128,
        "block_n": 128,
        "num_warps": 12,
        "cta_group": 2,
        "q_stage": 1,
    }
    assert {r.name: r.used for r in only.resources}["tensor_memory"] == 512


def test_one_cta_per_sm_and_its_relaxation() -> None:
    problem = bench_problem(128, 128, "bf16", False)
    answer = solve(problem, "b200", SolveOptions(min_blocks_per_sm=2))
    assert answer.infeasibility is not None
    assert answer.infeasibility.conflicting_constraints == ["occupancy"]


def test_a_device_without_tensor_memory_runs_no_sm100_kernel() -> None:
    data = device("b200").model_dump()
    data["name"] = "b200-without-tmem"
    del data["sm"]["tensor_memory_lanes"], data["sm"]["tensor_memory_columns"]
    with pytest.raises(InvalidRequestError, match="declares no tensor memory"):
        solve(
            bench_problem(128, 128, "bf16", False), parse_hardware(data), SolveOptions(kernel="fa4")
        )


# ---- the cost by hand ---------------------------------------------------------------------------


def test_the_exponential_split_balances_the_mufu_and_the_fma_pipe() -> None:
    scores, bn = np.array([128.0 * 128]), np.array([128.0])
    # B200: 16 exp2/clk against 128 FP32 lanes: (1024 - 256) / (1024 + 512) = 0.5
    assert emulated_fraction(scores, bn, 16, 128)[0] == pytest.approx(0.5)
    # B300's doubled MUFU: (512 - 256) / (512 + 512)
    assert emulated_fraction(scores, bn, 32, 128)[0] == pytest.approx(0.25)
    # a MUFU faster than the FMA pipe's softmax work: nothing emulated
    assert emulated_fraction(scores, bn, 64, 128)[0] == 0.0
    # block_n 32 is one fragment, which always uses the hardware exp2
    assert emulated_fraction(np.array([128.0 * 32]), np.array([32.0]), 16, 128)[0] == 0.0
    assert SOFTMAX_FP32_OPS_PER_SCORE == 2.0 and EMULATED_EXP2_OPS == 4.0


def test_tensor_and_softmax_cycles_by_hand() -> None:
    problem = bench_problem(128, 128, "bf16", False)
    pins = {"q_stage": 2, "cta_group": 2, "block_n": 128}
    first = solve(problem, "b200", SolveOptions(parameter_pins=pins, top_k=1)).candidates[0]
    rate = 2250e12 / (148 * 1980e6)  # dense BF16 per SM per cycle
    assert first.figures["tensor_cycles_per_tile"] == pytest.approx(2 * 128 * 128 * 256 / rate)
    # f balances the MUFU (16384 / 16 cycles) against the FMA pipe (2 and 4 ops per score over
    # its 128 lanes): about 0.5; then the softmax is the busier of the two, with the O rescale
    lanes = 75e12 / 2 / (148 * 1980e6)
    mufu, base, emulation = 16384 / 16, 16384 * 2 / lanes, 16384 * 4 / lanes
    f = (mufu - base) / (mufu + emulation)
    fp32 = (16384 * (2 + 4 * f) + 0.1 * 128 * 128) / lanes
    assert first.figures["exp2_emulated_fraction"] == pytest.approx(f) == pytest.approx(0.5, 1e-3)
    assert first.figures["softmax_cycles_per_tile"] == pytest.approx(max((1 - f) * mufu, fp32))


def test_fp8_runs_the_mmas_at_its_own_rate() -> None:
    pins = {"q_stage": 2, "cta_group": 1, "block_n": 128}
    bf16 = solve(bench_problem(128, 128, "bf16", False), "b200", SolveOptions(parameter_pins=pins))
    fp8 = solve(bench_problem(128, 128, "fp8", False), "b200", SolveOptions(parameter_pins=pins))
    t16 = bf16.candidates[0].figures["tensor_cycles_per_tile"]
    t8 = fp8.candidates[0].figures["tensor_cycles_per_tile"]
    assert t8 == pytest.approx(t16 / 2)
    assert fp8.candidates[0].predicted_tflops > bf16.candidates[0].predicted_tflops


def test_causal_tiles_skip_the_masked_keys() -> None:
    full = solve(bench_problem(128, 128, "bf16", False), "b200").candidates[0]
    causal = solve(bench_problem(128, 128, "bf16", True), "b200").candidates[0]
    assert 0.4 < causal.predicted_time_us / full.predicted_time_us < 0.65


def test_predictions_follow_the_published_measurements() -> None:
    """FA4's own configuration predicted within 25 % of every published point."""
    rows = table.published()
    assert len(rows) == 16
    for row in rows:
        assert abs(row["error"]) < 0.25, row


# ---- bad input ----------------------------------------------------------------------------------

SHAPE = ("--seq-len", "4096", "--batch", "2", "--heads", "16")


@pytest.mark.parametrize(
    ("hardware", "runs_there"),
    [
        ("h100-sxm", "fa2, fa3, flashinfer, flex, triton"),
        ("a100-80gb", "fa2, flashinfer, flex, triton"),
    ],
)
def test_fa4_elsewhere_is_refused_naming_what_runs_there(
    capsys: pytest.CaptureFixture[str], hardware: str, runs_there: str
) -> None:
    code = main(["solve", "--hardware", hardware, "--kernel", "fa4", *SHAPE, "--head-dim", "128"])
    err = capsys.readouterr().err
    assert code == 2 and "error: kernel:" in err and "compute capability 10.x" in err
    assert f"families that run this problem on {hardware}: {runs_there}" in err


def test_fa4_on_an_ascend_device_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["solve", "--hardware", "ascend-910b", "--kernel", "fa4", *SHAPE, "--head-dim", "64"]
    )
    assert code == 2 and "cuda devices" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("hardware", "extra", "field", "rule"),
    [
        ("b200", ("--head-dim", "160"), "head_dim", "(192, 128) or (256, 256)"),
        ("b200", ("--head-dim", "128", "--head-dim-v", "512"), "head_dim_v", "MLA"),
        ("b200", ("--head-dim", "72", "--dtype", "fp8"), "head_dim", "a multiple of 16"),
        ("b200", ("--head-dim", "128", "--dropout", "0.1"), "dropout", "no dropout"),
        ("rtx-5090", ("--head-dim", "128", "--dtype", "fp8"), "dtype", "only on sm_100"),
        ("rtx-5090", ("--head-dim", "100"), "head_dim", "a multiple of 8"),
        ("b200", ("--head-dim", "128", "--dtype", "fp4"), "--dtype", "invalid choice"),
    ],
)
def test_unsupported_problems_exit_2_with_the_rule(
    capsys: pytest.CaptureFixture[str], hardware: str, extra: tuple[str, ...], field: str, rule: str
) -> None:
    code = main(["solve", "--hardware", hardware, "--kernel", "fa4", *SHAPE, *extra])
    err = capsys.readouterr().err
    assert code == 2 and field in err and rule in err


def test_backward_with_fa4_names_what_is_modelled(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["solve", "--hardware", "b200", "--kernel", "fa4", "--phase", "backward", *SHAPE]
    code = main([*argv, "--head-dim", "128"])
    err = capsys.readouterr().err
    assert code == 2 and "error: phase:" in err
    assert "allowed for fa4: decode, forward" in err
    assert "families with a backward model on b200: fa2, flex, triton" in err


def test_backward_by_default_stands_in_with_a_family_that_has_one() -> None:
    problem = AttentionProblem(batch=2, heads=16, seq_len=8192, head_dim=128, phase="backward")
    answer = solve(problem, "b200")
    assert answer.kernel == "fa2" and "standing in for b200's default fa4" in answer.kernel_reason


def test_a_paged_cache_with_fa4_names_the_families_that_have_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["solve", "--hardware", "b200", "--kernel", "fa4", "--phase", "decode", "--seq-len", "1"]
    code = main([*argv, "--seq-len-kv", "4096", "--head-dim", "128", "--page-size", "auto"])
    err = capsys.readouterr().err
    assert code == 2 and "no paged-KV path" in err and "fa2, flashinfer" in err


# ---- decode -----------------------------------------------------------------------------------


def test_decode_splits_on_sm100_and_not_on_sm120() -> None:
    step = AttentionProblem(
        batch=2, heads=32, kv_heads=8, seq_len=1, seq_len_kv=32768, head_dim=128, phase="decode"
    )
    b200 = solve(step, "b200", SolveOptions(top_k=3))
    assert b200.kernel == "fa4" and b200.candidates[0].num_splits is not None
    assert b200.candidates[0].num_splits > 1  # 16 (sequence, KV head) pairs on 148 SMs
    rtx = solve(step, "rtx-5090", SolveOptions(top_k=3))
    assert rtx.kernel == "fa4" and all(c.num_splits == 1 for c in rtx.candidates)


def test_the_registered_family_hands_each_device_to_its_kernel() -> None:
    family = find_family("fa4")
    assert isinstance(family, FlashAttention4)
    problem = bench_problem(128, 128, "bf16", False)
    sm100 = {p.name for p in family.params(problem, get_hardware("b200"))}
    sm120 = {p.name for p in family.params(problem, get_hardware("rtx-5090"))}
    assert sm100 == {"block_m", "block_n", "num_warps", "q_stage", "cta_group"}
    assert sm120 == {"block_m", "block_n", "num_warps", "num_stages"}
