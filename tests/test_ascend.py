"""The `ascend` family (issue 9): the DaVinci AI core's buffers, the cube/vector cost model,
the per-device kernels, seq_len divisibility and padding on every family, the memory model's
buffers, bad input, and the answer over the CLI (`--json`) and a real loopback gRPC server.

The buffer figures below are worked out by hand from docs/model.md section 10.2; the cost
checks use section 10.3's formulas written out again here.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
import pytest

from tilesolve import wire
from tilesolve.solver import (
    AttentionProblem,
    Config,
    InvalidRequestError,
    SolveAnswer,
    SolveOptions,
    estimate_memory,
    get_hardware,
    parse_hardware,
    solve,
)
from tilesolve.solver.candidates import build_candidate_table
from tilesolve.solver.registry import find_family
from tilesolve.solver.validate import check_config
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from command_line import run

ASCEND = ("ascend-910b", "ascend-910", "ascend-310p3")
BUFFERS = ("l1", "l0a", "l0b", "l0c", "ub")
KIB = 1024


def _family() -> Any:
    family = find_family("ascend")
    assert family is not None
    return family


# ---- the Done-when solve, on every Ascend device ----------------------------------------------


@pytest.mark.parametrize("hardware", ASCEND)
def test_solve_ranks_s1_s2_tiles_with_buffers_binding_and_funnel(
    capsys: pytest.CaptureFixture[str], hardware: str
) -> None:
    code, out, err = run(
        capsys, "solve", "--hardware", hardware, "--head-dim", "128", "--seq-len", "4096", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kernel"] == "ascend" and doc["status"] == "optimal"
    assert doc["kernel_reason"].startswith(f"ascend, the default kernel of {hardware}")
    assert len(doc["candidates"]) == 5
    split = hardware == "ascend-910b"
    for c in doc["candidates"]:
        assert c["block_m"] % 32 == 0 and c["block_n"] % 32 == 0
        assert c["num_warps"] is None and c["smem_bytes"] is None
        assert set(c["parameters"]) == {"block_m", "block_n", "num_stages", "d_split", "vec_rows"}
        names = [r["name"] for r in c["resources"]]
        assert names == [*BUFFERS, *(["workspace"] if split else [])]
        for r in c["resources"]:
            assert 0 < r["used"] <= r["capacity"] and r["unit"].startswith("bytes")
        assert {"cube_us", "vector_us", "l2_us", "round_us"} <= set(c["figures"])
        assert c["predicted_tflops"] > 0 and c["reasons"]
    funnel = [step["constraint"] for step in doc["funnel"]]
    assert funnel[:3] == ["alignment", "vector_slice", "pins"]
    assert funnel[3:8] == ["l1", "l0a", "l0b", "l0c", "ub"] and funnel[-1] == "divisibility"
    assert ("workspace" in funnel) == split
    assert doc["funnel"][0]["removed"] > 0  # the rule of 32 removes CANN's 16-multiples
    assert doc["binding_constraints"]  # a buffer bounds the winner
    assert any(note.startswith("confidence: ") for note in doc["notes"])


def test_text_answer_shows_the_buffers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "solve", "--hardware", "910b", "--head-dim", "128", "--seq-len", "4096"
    )
    assert code == 0
    assert "resources (used of capacity):" in out and "ub " in out and "workspace" in out
    assert "FlashAttentionScore" in out and "funnel (" in out


def test_answer_over_grpc_equals_in_process(target: str) -> None:
    problem = AttentionProblem(batch=2, heads=8, seq_len=4096, head_dim=128)
    options = SolveOptions(engine="exhaustive")
    local = solve(problem, "ascend-910b", options)
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.TileSolveServiceStub(channel)
        response = stub.Solve(wire.solve_request_to_proto(problem, "ascend-910b", options), 30)
    assert response.kernel == "ascend"
    best = response.candidates[0]
    assert not best.HasField("num_warps") and best.HasField("block_m")
    assert [r.name for r in best.resources] == [*BUFFERS, "workspace"]
    remote, _ = wire.answer_from_proto(response)
    assert [c.parameters for c in remote.candidates] == [c.parameters for c in local.candidates]
    assert [c.resources for c in remote.candidates] == [c.resources for c in local.candidates]
    assert remote.funnel == local.funnel and remote.notes == local.notes
    assert remote.binding_constraints == local.binding_constraints


def test_cli_over_server_equals_in_process(capsys: pytest.CaptureFixture[str], target: str) -> None:
    argv = ["solve", "--hardware", "ascend-310p3", "--head-dim", "64", "--seq-len", "3000"]
    local = json.loads(run(capsys, *argv, "--json")[1])
    remote = json.loads(run(capsys, *argv, "--json", "--server", target)[1])
    for doc in (local, remote):
        doc.pop("solve_ms")
        doc.pop("cache_hit")
    assert remote == local


# ---- the model's choices and figures ----------------------------------------------------------


def test_910b_picks_canns_tile_for_a_long_multi_head_problem() -> None:
    """FlashAttentionScore issues S1 = 128 rows by S2 = 1024 columns (eight 128x128 cube
    blocks); the model reaches the same tile from the buffers and rates alone."""
    problem = AttentionProblem(batch=1, heads=32, seq_len=4096, head_dim=128)
    best = solve(problem, "ascend-910b").candidates[0]
    assert (best.block_m, best.block_n) == (128, 1024)
    assert best.bottleneck == "L2 bandwidth (the cube-vector exchange)"


def test_buffers_of_128x1024_by_hand() -> None:
    """128 x 1024, two stages, 8-row vector slices, no head-dim split, d = 128 fp16, 910B."""
    problem = AttentionProblem(seq_len=4096, head_dim=128)
    options = SolveOptions(
        parameter_pins={
            "block_m": 128,
            "block_n": 1024,
            "num_stages": 2,
            "vec_rows": 8,
            "d_split": 1,
        },
        top_k=1,
    )
    best = solve(problem, "ascend-910b", options).candidates[0]
    used = {r.name: (r.used, r.capacity) for r in best.resources}
    assert used["l1"] == (128 * 128 * 2 + 2 * (128 * 256 * 2 + 128 * 128 * 2), 512 * KIB)
    assert used["l0a"] == (2 * 128 * 128 * 2, 64 * KIB)  # double-buffered Q or P block
    assert used["l0b"] == (2 * 128 * 128 * 2, 64 * KIB)
    assert used["l0c"] == (2 * 128 * 128 * 4, 128 * KIB)  # two fp32 128x128 base blocks
    ub = 2 * 8 * (1024 * 4 + 1024 * 2 + 128 * 4) + 8 * 1024 * 4 + 64 * 128 * 4 + 64 * 3 * 32
    assert used["ub"] == (ub, 192 * KIB) and ub == 178_176
    ws = 2 * (128 * 1024 * 6 + 128 * 128 * 4)
    assert used["workspace"] == (ws, 192 * 1024 * KIB // 2 // 24)
    # L2 traffic of one round: K and V, then S (fp32) and P written and read, O' both ways.
    assert best.figures["l2_bytes_per_round"] == 1024 * 256 * 2 + ws
    assert best.figures["cube_sustained_fraction"] == pytest.approx(314.5 / 353.9)


def test_cube_time_by_hand() -> None:
    """cube_us = rounds per cube core x bm * bn * (d + dv) / (4096 MAC x 1.8 GHz x 314.5/353.9)."""
    problem = AttentionProblem(batch=1, heads=24, seq_len=2048, head_dim=128)
    pins = {"block_m": 128, "block_n": 1024, "num_stages": 2, "vec_rows": 8, "d_split": 1}
    best = solve(problem, "ascend-910b", SolveOptions(parameter_pins=pins)).candidates[0]
    rounds_per_core = 24 * (2048 // 128) * (2048 // 1024) / 24
    mac_per_ns = 4096 * 1.8 * 314.5 / 353.9
    expected = rounds_per_core * 128 * 1024 * 256 / mac_per_ns * 1e-3
    assert best.figures["cube_us"] == pytest.approx(expected)
    assert best.waves == pytest.approx(24 * 16 / 24)


def test_ub_binds_s2_on_910b() -> None:
    """At 8 rows per vector pass a 1536-column S2 tile no longer fits 192 KiB of UB with
    double buffers: S2 = 1024 is the largest, as in CANN."""
    family = _family()
    hw = get_hardware("ascend-910b")
    problem = AttentionProblem(seq_len=8192, head_dim=128)
    for bn, fits in ((1024, True), (1536, False)):
        config = Config.of(block_m=128, block_n=bn, num_stages=2, d_split=1, vec_rows=8)
        broken = family.check(hw, problem, SolveOptions(), config)
        assert (broken == []) == fits, broken
        if not fits:
            assert broken[0].startswith("ub: ")


def test_l0c_and_l0a_limit_block_m_with_double_buffering() -> None:
    """A 256-row S1 tile needs 256 KiB of L0C for two 256x128 fp32 blocks (910B has 128)
    and 128 KiB of L0A for two P blocks: it fits only single-buffered."""
    family = _family()
    hw = get_hardware("ascend-910b")
    problem = AttentionProblem(seq_len=8192, head_dim=128)
    double = Config.of(block_m=256, block_n=1024, num_stages=2, d_split=1, vec_rows=8)
    broken = family.check(hw, problem, SolveOptions(), double)
    assert any(b.startswith("l0a: ") for b in broken) and any(b.startswith("l0c: ") for b in broken)
    single = Config.of(block_m=256, block_n=512, num_stages=1, d_split=1, vec_rows=8)
    assert family.check(hw, problem, SolveOptions(), single) == []


@pytest.mark.parametrize("hardware", ASCEND)
@pytest.mark.parametrize(
    "problem",
    [
        AttentionProblem(batch=2, heads=8, seq_len=3000, head_dim=128),
        AttentionProblem(seq_len=1000, seq_len_kv=5000, head_dim=256, head_dim_v=128, causal=True),
        AttentionProblem(batch=3, heads=6, kv_heads=2, seq_len=777, head_dim=72),
    ],
)
def test_validator_agrees_with_the_table(hardware: str, problem: AttentionProblem) -> None:
    """`check` (scalar, independent) and the constraint objects accept the same configurations."""
    family = _family()
    hw = get_hardware(hardware)
    table = build_candidate_table(family, hw, problem, SolveOptions())
    for i in range(len(table)):
        config = table.cfg.config(i)
        broken = check_config(family, hw, problem, SolveOptions(), config)
        assert (broken == []) == bool(table.feasible[i]), (family.label(config), broken)


def test_coupled_parts_have_no_workspace() -> None:
    for hardware in ("ascend-910", "ascend-310p3"):
        answer = solve(AttentionProblem(seq_len=2048, head_dim=128), hardware)
        assert [r.name for r in answer.candidates[0].resources] == list(BUFFERS)
        assert "workspace" not in [step.constraint for step in answer.funnel]
        assert "no FlashAttentionScore" in answer.kernel_reason


def test_kernel_named_per_device() -> None:
    reasons = {
        hw: solve(AttentionProblem(seq_len=1024, head_dim=64), hw).kernel_reason for hw in ASCEND
    }
    assert "FlashAttentionScore (torch_npu.npu_fusion_attention)" in reasons["ascend-910b"]
    assert "MindSpore's TIK FlashAttention" in reasons["ascend-910"]
    assert "ATB's NZ-layout FlashAttention" in reasons["ascend-910"]
    assert "PromptFlashAttention's coupled-core path" in reasons["ascend-310p3"]
    asked = solve(
        AttentionProblem(seq_len=1024, head_dim=64), "ascend-910b", SolveOptions(kernel="ascend")
    )
    assert asked.kernel_reason.startswith("ascend, as requested: ")


def test_confidence_note_names_the_unconfirmed_inputs() -> None:
    for hardware in ASCEND:
        answer = solve(AttentionProblem(seq_len=2048, head_dim=128), hardware)
        note = next(n for n in answer.notes if n.startswith("confidence: "))
        core = get_hardware(hardware).ascend
        assert core is not None
        assert "ascend.vector_fp16_elements_per_cycle" in note
        assert "ascend.l1_bytes" in note or "ascend.l1_bytes" not in core.unconfirmed_fields
        assert all(
            f in core.unconfirmed_fields for f in note.split(": ")[2].split("; ")[0].split(", ")
        )
    coupled = solve(AttentionProblem(seq_len=2048, head_dim=128), "ascend-910")
    assert "no measured GEMM rate" in next(n for n in coupled.notes if "confidence" in n)


def test_bf16_runs_on_910b() -> None:
    answer = solve(AttentionProblem(seq_len=2048, head_dim=128, dtype="bf16"), "ascend-910b")
    assert answer.candidates


def test_throughput_rises_from_1k_to_32k_tokens_on_910b() -> None:
    """batch 1, one head, d 128: few blocks keep few cores busy at short lengths."""
    tflops = []
    for seq_len in (1024, 2048, 4096, 8192, 16384, 32768):
        problem = AttentionProblem(seq_len=seq_len, head_dim=128)
        answer = solve(problem, "ascend-910b", SolveOptions(engine="exhaustive", top_k=1))
        tflops.append(answer.candidates[0].predicted_tflops)
    assert all(b > a for a, b in itertools.pairwise(tflops)), tflops
    assert tflops[-1] < 353.9  # below the cube peak


def test_causal_skips_blocks() -> None:
    base = AttentionProblem(batch=2, heads=16, seq_len=8192, head_dim=128)
    full = solve(base, "ascend-910b").candidates[0].predicted_time_us
    causal = solve(base.model_copy(update={"causal": True}), "ascend-910b").candidates[0]
    assert 0.4 * full < causal.predicted_time_us < 0.75 * full


def test_padding_waste_is_a_modelled_cost_without_the_flag() -> None:
    """CANN pads S1 and S2 to 16 inside the kernel: 2050 tokens waste about 14 of 2064."""
    answer = solve(AttentionProblem(seq_len=2050, head_dim=128), "ascend-910b")
    waste = answer.candidates[0].padding_waste
    assert waste == pytest.approx(1 - (2050 * 2050) / (2064 * 2064), rel=1e-6)


# ---- CP-SAT and exhaustive agree ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_cpsat_equals_exhaustive_on_random_ascend_problems(
    seed: int, compare_engines: Callable[..., SolveAnswer | None]
) -> None:
    rng = np.random.default_rng(100 + seed)
    compared = infeasible = 0
    for _ in range(12):
        hardware = str(rng.choice(ASCEND))
        heads = int(rng.choice([1, 4, 8, 32]))
        problem = AttentionProblem(
            batch=int(rng.integers(1, 5)),
            heads=heads,
            kv_heads=int(rng.choice([h for h in (1, 2, heads) if heads % h == 0])),
            seq_len=int(rng.integers(64, 20000)),
            seq_len_kv=int(rng.integers(64, 20000)) if rng.random() < 0.3 else None,
            head_dim=int(rng.choice([64, 80, 96, 128, 256])),
            causal=bool(rng.random() < 0.5),
            dtype="bf16" if hardware == "ascend-910b" and rng.random() < 0.3 else "fp16",
        )
        roll = rng.random()
        pins: dict[str, int] = {}
        if roll < 0.25:
            pins["block_m"] = int(rng.choice([32, 64, 128, 256]))
        elif roll < 0.4:
            pins["num_stages"] = 1
        options = SolveOptions(
            top_k=int(rng.integers(1, 7)),
            require_divisible=bool(rng.random() < 0.2),
            parameter_pins=pins,
        )
        answer = compare_engines(problem, hardware, options)
        assert answer is not None
        compared += 1
        infeasible += answer.status == "infeasible"
    assert compared == 12 and infeasible >= 1


# ---- seq_len divisibility and padding, on every family ------------------------------------------


@pytest.mark.parametrize(
    ("hardware", "kernel"),
    [("a100-80gb", "fa2"), ("h100-sxm", "triton"), ("ascend-910b", "ascend")],
)
def test_2050_with_require_divisible_on_every_family(
    capsys: pytest.CaptureFixture[str], target: str, hardware: str, kernel: str
) -> None:
    argv = ["solve", "--hardware", hardware, "--kernel", kernel, "--head-dim", "128"]
    argv += ["--seq-len", "2050", "--require-divisible"]
    code, out, _ = run(capsys, *argv)
    assert code == 1
    flat = " ".join(out.split())  # as read, whatever the terminal's width wrapped
    for text in ("64 -> 2112 (2.9%)", "128 -> 2176 (5.8%)", "256 -> 2304 (11.0%)"):
        assert text in flat
    assert "nearest lengths a feasible tile divides:" in flat and "2048 (trim 2" in flat
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 1
    why = json.loads(out)["infeasibility"]
    assert "divisibility" in why["conflicting_constraints"]
    padding = {p["block"]: (p["padded_seq_len"], p["waste_fraction"]) for p in why["padding"]}
    assert padding[64] == (2112, pytest.approx(62 / 2112))
    assert padding[128] == (2176, pytest.approx(126 / 2176))
    assert padding[256] == (2304, pytest.approx(254 / 2304))
    if kernel == "ascend":
        assert min(padding) == 32 and all(block % 32 == 0 for block in padding)
    lengths = [(d["seq_len"], d["seq_len_kv"]) for d in why["divisible_lengths"]]
    assert lengths[0] == (2048, 2048) and lengths[1][0] > 2050
    for d in why["divisible_lengths"]:
        assert d["seq_len"] % d["block_m"] == 0 and d["seq_len_kv"] % d["block_n"] == 0
    # the same on the wire
    problem = AttentionProblem(seq_len=2050, head_dim=128)
    options = SolveOptions(kernel=kernel, require_divisible=True)
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.TileSolveServiceStub(channel)
        response = stub.Solve(wire.solve_request_to_proto(problem, hardware, options), 30)
    assert response.status == pb.SOLVE_STATUS_INFEASIBLE
    wire_padding = {p.block: p.padded_seq_len for p in response.infeasibility.padding}
    assert wire_padding[64] == 2112 and wire_padding[256] == 2304
    assert response.infeasibility.divisible_lengths[0].seq_len == 2048


def test_divisible_lengths_for_unequal_lengths() -> None:
    problem = AttentionProblem(seq_len=1000, seq_len_kv=3000, head_dim=128)
    answer = solve(problem, "ascend-910b", SolveOptions(require_divisible=True))
    assert answer.infeasibility is not None
    below, above = answer.infeasibility.divisible_lengths
    assert below.seq_len <= 1000 and below.seq_len_kv <= 3000
    assert above.seq_len >= 1000 and above.seq_len_kv >= 3000
    assert above.seq_len % above.block_m == 0 and above.seq_len_kv % above.block_n == 0


# ---- the memory model ---------------------------------------------------------------------------


def test_memory_reports_the_buffers_on_an_ascend_device(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    argv = ["memory", "--hardware", "ascend-910b", "--seq-len", "4096", "--head-dim", "128"]
    argv += ["--block-m", "128", "--block-n", "1024"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "kernel ascend" in out.splitlines()[0]
    for name in BUFFERS:
        assert f"\n  {name} " in out
    code, doc_text, _ = run(capsys, *argv, "--json")
    doc = json.loads(doc_text)
    assert doc["kernel"] == "ascend" and doc["family_smem_bytes"] is None
    names = [r["name"] for r in doc["family_resources"]]
    assert names == [*BUFFERS, "workspace"]
    assert doc["family_parameters"]["block_m"] == 128
    assert run(capsys, *argv, "--json", "--server", target) == (code, doc_text, "")
    assert run(capsys, *argv, "--server", target)[1] == out


def test_memory_without_hardware_uses_a_reference_ascend_device() -> None:
    estimate = estimate_memory(
        AttentionProblem(seq_len=4096, head_dim=128), 64, 512, None, "ascend"
    )
    assert [r.name for r in estimate.family_resources][:5] == list(BUFFERS)
    cuda = estimate_memory(AttentionProblem(seq_len=4096, head_dim=128), 128, 64, "a100")
    assert cuda.kernel == "fa2" and cuda.family_smem_bytes == 65536
    assert [r.name for r in cuda.family_resources] == ["shared_memory", "registers", "threads"]


# ---- bad input ----------------------------------------------------------------------------------

BASE = ["solve", "--head-dim", "128", "--seq-len", "4096"]


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        (["--hardware", "a100", "--kernel", "ascend"], "kernel", "fa2, flashinfer, flex, triton"),
        (["--hardware", "ascend-910b", "--kernel", "fa2"], "kernel", "run this problem on"),
        (["--hardware", "ascend-910", "--kernel", "triton"], "kernel", ": ascend"),
        (["--hardware", "ascend-910b", "--dtype", "fp8"], "dtype", "allowed: fp16, bf16"),
        (["--hardware", "ascend-310p3", "--dtype", "fp8"], "dtype", "allowed: fp16"),
        (["--hardware", "ascend-910", "--dtype", "bf16"], "dtype", "allowed: fp16"),
        (["--hardware", "ascend-310p3", "--dtype", "bf16"], "dtype", "allowed: fp16"),
        (["--hardware", "ascend-910b", "--head-dim", "800"], "head_dim", "up to 768"),
        (["--hardware", "ascend-910", "--head-dim", "320"], "head_dim", "up to 304"),
        (["--hardware", "ascend-310p3", "--head-dim", "640"], "head_dim", "up to 512"),
        (["--hardware", "ascend-910b", "--head-dim-v", "256"], "head_dim_v", "<= head_dim"),
        (["--hardware", "ascend-910b", "--phase", "decode"], "seq_len", "1 to 64 query rows"),
        (
            ["--hardware", "ascend-910", "--phase", "decode", "--seq-len", "1"],
            "phase",
            "IncreFlashAttention, the decode kernel modelled, does not exist on ascend-910",
        ),
        (
            ["--hardware", "ascend-910b", "--phase", "decode", "--seq-len", "17"],
            "seq_len",
            "IncreFlashAttention takes 1 to 16 query rows",
        ),
        (["--hardware", "ascend-910b", "--num-warps", "4"], "num_warps", "ascend has no"),
        (["--hardware", "ascend-910b", "--param", "vec_rows=12"], "param", "allowed: 8, 16"),
    ],
)
def test_bad_input_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], extra: list[str], field: str, words: str
) -> None:
    code, out, err = run(capsys, *BASE, *extra)
    assert code == 2 and out == ""
    assert f"error: {field}: " in err and words in err, err


def test_decode_on_ascend_is_incre_flash_attention() -> None:
    """Decode on an Ascend device is CANN's IncreFlashAttention (docs/model.md 13.10; its
    own tests are in tests/test_decode_fa3_ascend.py); 910A has no such kernel."""
    step = AttentionProblem(seq_len=1, seq_len_kv=4096, head_dim=128, phase="decode")
    assert "IncreFlashAttention" in solve(step, "910b").kernel_reason
    with pytest.raises(InvalidRequestError) as info:
        solve(step, "910a")
    assert "does not exist on ascend-910" in str(info.value)


def _dump(name: str) -> dict[str, Any]:
    return get_hardware(name).model_dump(mode="json")


def test_inline_spec_missing_required_ascend_fields_is_refused_naming_them() -> None:
    data = _dump("ascend-910b")
    del data["ascend"]["aiv_count"], data["ascend"]["cube_clock_mhz"]
    with pytest.raises(Exception) as info:
        parse_hardware(data)
    text = str(info.value)
    assert "aiv_count" in text and "cube_clock_mhz" in text


def test_inline_spec_missing_model_rates_is_refused_naming_them(target: str) -> None:
    data = _dump("ascend-910b")
    data["name"] = "my-npu"
    dropped = ("vector_fp16_elements_per_cycle", "l2_write_bytes_per_cycle")
    for field in dropped:
        data["ascend"][field] = None
    data["ascend"]["unconfirmed_fields"] = [
        f for f in data["ascend"]["unconfirmed_fields"] if f.split(".")[1] not in dropped
    ]
    spec = parse_hardware(data)
    problem = AttentionProblem(seq_len=2048, head_dim=128)
    with pytest.raises(InvalidRequestError) as info:
        solve(problem, spec)
    (violation,) = info.value.violations
    assert violation.field == "hardware.ascend"
    assert all(field in violation.description for field in dropped)
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.TileSolveServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Solve(wire.solve_request_to_proto(problem, spec, SolveOptions()), 30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert all(field in (caught.value.details() or "") for field in dropped)
