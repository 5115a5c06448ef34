"""FlashAttention-3's backward (`--phase backward --kernel fa3`, issue 27): ranked answers on
every Hopper part for head dims 64-256, fp16 and bf16, causal and not; Hopper's default
backward (and `--phase both` with fa3 for both passes, in-process and over gRPC); every
backward tile FA3 ships feasible when pinned; FA3's own legality, resources and cost worked
by hand; CP-SAT equal to the exhaustive oracle; the bad inputs; the published throughput as
a check of the predictions."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tilesolve import wire
from tilesolve.solver import (
    AttentionProblem,
    Config,
    InvalidRequestError,
    SolveAnswer,
    SolveOptions,
    get_hardware,
    solve,
)
from tilesolve.solver.candidates import build_candidate_table
from tilesolve.solver.families.fa3.backward import Fa3Backward
from tilesolve.solver.families.fa3.backward_resources import (
    BWD_CONSUMER_FIXED_REGS,
    SETMAXNREG_BUDGETS,
    fa3_backward_resources,
)
from tilesolve.solver.families.fa3.backward_shape import backward_params
from tilesolve.solver.occupancy import occupancy_arrays
from tilesolve.solver.registry import find_family
from tilesolve.solver.validate import check_config
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from command_line import run as cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from backward_table import fa3_shipped_pins as shipped_pins

DATA = Path(__file__).resolve().parent / "data"
SHIPPED = json.loads((DATA / "fa3_backward_tiles.json").read_text())
PUBLISHED = json.loads((DATA / "fa3_published_backward_tflops.json").read_text())
HOPPER = ("h100-sxm", "h100-pcie", "h200")
HEAD_DIMS = (64, 96, 128, 192, 256)
STRUCTURE = tuple(p.name for p in backward_params()[3:])


def paper_problem(
    head_dim: int, causal: bool = False, seq_len: int = 4096, dtype: str = "bf16"
) -> AttentionProblem:
    """The FA3 paper's benchmark shape, backward: 16k tokens per batch, hidden 2048."""
    return AttentionProblem(
        batch=16384 // seq_len,
        heads=2048 // head_dim,
        seq_len=seq_len,
        head_dim=head_dim,
        dtype=dtype,
        causal=causal,
        phase="backward",
    )


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = cli(capsys, *argv)
    return code, json.loads(out) if out.strip() else {}


def flags(problem: AttentionProblem) -> list[str]:
    out = ["--batch", str(problem.batch), "--heads", str(problem.heads)]
    out += ["--seq-len", str(problem.seq_len), "--head-dim", str(problem.head_dim)]
    out += ["--dtype", problem.dtype.value, "--phase", "backward"]
    return out + (["--causal"] if problem.causal else [])


# ---- answers on every Hopper part -------------------------------------------------------------


@pytest.mark.parametrize("hardware", HOPPER)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
def test_fa3_backward_answers_on_hopper(
    capsys: pytest.CaptureFixture[str], hardware: str, dtype: str, causal: bool
) -> None:
    for head_dim in HEAD_DIMS:
        problem = paper_problem(head_dim, causal, dtype=dtype)
        argv = ["solve", "--hardware", hardware, "--kernel", "fa3", *flags(problem)]
        code, answer = cli_json(capsys, *argv, "--json", "--top-k", "3")
        assert code == 0 and answer["status"] == "optimal", (hardware, head_dim)
        assert answer["kernel"] == "fa3" and answer["problem"]["phase"] == "backward"
        assert answer["kernel_reason"].startswith("fa3, as requested: FlashAttention-3 backward")
        times = [c["predicted_time_us"] for c in answer["candidates"]]
        assert len(times) == 3 and times == sorted(times)
        for c in answer["candidates"]:
            assert c["num_warps"] in (12, 16) and c["threads_per_block"] == 32 * c["num_warps"]
            assert c["block_m"] % 16 == 0 and c["block_n"] % 16 == 0 and c["block_m"] >= 64
            assert set(c["parameters"]) == {"block_m", "block_n", "num_warps", *STRUCTURE}
            used = {r["name"]: r for r in c["resources"]}
            assert used["shared_memory"]["used"] <= used["shared_memory"]["capacity"] == 232448
            assert used["registers"]["used"] <= used["registers"]["capacity"]
            assert used["register_file"]["used"] <= used["register_file"]["capacity"] == 65536
            assert c["blocks_per_sm"] == 1
            assert c["figures"]["iteration_tensor_cycles"] > 0
            assert any("consumer warpgroups" in r for r in c["reasons"])


def test_fa3_is_the_backward_on_hopper_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --kernel, Hopper's default fa3 answers the backward pass itself, and --phase
    both answers forward and backward with fa3."""
    problem = paper_problem(128, causal=True)
    for hardware in HOPPER:
        code, answer = cli_json(capsys, "solve", "--hardware", hardware, *flags(problem), "--json")
        assert code == 0 and answer["kernel"] == "fa3"
        assert "the default kernel" in answer["kernel_reason"]
        assert "standing in" not in answer["kernel_reason"]
        both = [a for a in flags(problem) if a not in ("--phase", "backward")]
        code, doc = cli_json(
            capsys, "solve", "--hardware", hardware, *both, "--phase", "both", "--json"
        )
        assert code == 0 and doc["phase"] == "both"
        assert doc["forward"]["kernel"] == "fa3" and doc["backward"]["kernel"] == "fa3"
        assert doc["backward"]["problem"]["phase"] == "backward"


def test_phase_both_over_grpc_uses_fa3_for_both(
    capsys: pytest.CaptureFixture[str], target: str, stub: pb_grpc.TileSolveServiceStub
) -> None:
    problem = paper_problem(64)
    both = [a for a in flags(problem) if a not in ("--phase", "backward")]
    argv = ["solve", "--hardware", "h200", *both, "--phase", "both", "--json"]
    code, remote = cli_json(capsys, *argv, "--server", target)
    assert code == 0 and remote["forward"]["kernel"] == remote["backward"]["kernel"] == "fa3"
    _, local = cli_json(capsys, *argv)
    assert remote["backward"]["candidates"] == local["backward"]["candidates"]
    response = stub.Solve(wire.solve_request_to_proto(problem, "h200", SolveOptions()), timeout=60)
    assert response.status == pb.SOLVE_STATUS_OPTIMAL and response.kernel == "fa3"
    answer, _ = wire.answer_from_proto(response)
    assert answer.candidates == solve(problem, "h200", SolveOptions()).candidates


# ---- FA3's shipped backward tiles -------------------------------------------------------------


def test_the_shipped_tiles_file_says_what_the_source_says() -> None:
    """Each row's fields are its template arguments (run_mha_bwd_dispatch<Arch, T, kBlockM,
    kBlockN, kHeadDim, ..., Stages_dO, Stages_dS, SdP_swapAB, dKV_swapAB, dQ_swapAB,
    NumMmaWarpGroups, AtomLayoutMSdP, AtomLayoutNdKV, AtomLayoutMdQ, V_in_regs>)."""
    assert {row["head_dim"] for row in SHIPPED} == set(HEAD_DIMS)
    for row in SHIPPED:
        args = row["template_arguments"].split("<", 1)[1].rstrip(">").split(", ")
        assert [int(a) for a in args[2:5]] == [row["block_m"], row["block_n"], row["head_dim"]]
        numbers = args[8:]
        as_int = [1 if a == "true" else 0 if a == "false" else int(a) for a in numbers]
        expected = [
            row["stages_do"],
            row["stages_ds"],
            row["sdp_swap_ab"],
            row["dkv_swap_ab"],
            row["dq_swap_ab"],
            row["num_mma_warpgroups"],
            row["atom_layout_m_sdp"],
            row["atom_layout_n_dkv"],
            row["atom_layout_m_dq"],
            row["v_in_regs"],
        ]
        assert as_int == expected, row["line"]
        assert row["num_warps"] == 4 * (row["num_mma_warpgroups"] + 1)


@pytest.mark.parametrize("hardware", HOPPER)
@pytest.mark.parametrize("row", SHIPPED, ids=lambda r: f"d{r['head_dim']}-line{r['line']}")
def test_every_tile_fa3_ships_is_feasible_when_pinned(hardware: str, row: dict[str, Any]) -> None:
    causal_values = (False, True) if row["causal"] == "both" else (row["causal"],)
    for causal in causal_values:
        for dtype in ("fp16", "bf16"):
            problem = paper_problem(row["head_dim"], causal, dtype=dtype)
            answer = solve(problem, hardware, shipped_pins(row))
            assert answer.status.value == "optimal", (hardware, row["line"], causal, answer)
            c = answer.candidates[0]
            assert (c.block_m, c.block_n, c.num_warps) == (
                row["block_m"],
                row["block_n"],
                row["num_warps"],
            )


def test_fa3_tiles_rank_high_on_the_paper_shape() -> None:
    """A measurement, not a calibration: the model ranks FA3's own tile first for most of the
    paper's shapes from 2k tokens and within its top 3 always (docs/model.md 18.5)."""
    first = top3 = total = 0
    for row in SHIPPED:
        if row["line"] == 317:  # the softcap tile: the problem has no softcap
            continue
        causal_values = (False, True) if row["causal"] == "both" else (row["causal"],)
        for causal in causal_values:
            for seq_len in (2048, 8192):
                problem = paper_problem(row["head_dim"], causal, seq_len)
                answer = solve(problem, "h100-sxm", SolveOptions(kernel="fa3", top_k=10))
                tiles = list(dict.fromkeys((c.block_m, c.block_n) for c in answer.candidates))
                tile = (row["block_m"], row["block_n"])
                total += 1
                first += tiles[0] == tile
                top3 += tile in tiles[:3]
    assert top3 == total and first >= 0.8 * total, (first, top3, total)


# ---- legality, resources and cost by hand -----------------------------------------------------


def _table(problem: AttentionProblem, hardware: str = "h100-sxm") -> Any:
    family = find_family("fa3", problem.phase)
    assert isinstance(family, Fa3Backward)
    return build_candidate_table(family, get_hardware(hardware), problem, SolveOptions())


def _row(table: Any, **values: int) -> int:
    hit = np.ones(len(table), dtype=np.bool_)
    for name, value in values.items():
        hit &= table.cfg[name] == value
    (index,) = np.flatnonzero(hit)
    return int(index)


FA3_D128 = {  # flash_bwd_launch_template.h line 353: 80 x 128, hdim 128, not causal
    "block_m": 80,
    "block_n": 128,
    "num_warps": 12,
    "sdp_swap_ab": 1,
    "dkv_swap_ab": 0,
    "dq_swap_ab": 1,
    "sdp_split_m": 0,
    "dkv_split_n": 1,
    "dq_split_m": 0,
    "v_in_regs": 0,
    "stages_do": 2,
    "stages_ds": 2,
}


def test_the_80x128_tile_by_hand() -> None:
    """bf16, head dim 128, FA3's 80 x 128 on two consumer warpgroups (256 threads):
    shared memory K 32,768 + V 32,768 + dQ staging 80·128·4 = 40,960 + Q 2·80·128·2 = 40,960
    + dO 40,960 + LSE and dPsum 2·(128 + 80)·4 = 1,664 + dS 2·80·128·2 = 40,960 at a 1 KiB
    boundary (P stays in registers: dK/dV are RS) = 231,424, and the pipelines 96: 231,520 B,
    FA3's "we only need 227KB" (epilogue_bwd.hpp); registers dK+dV 2·128·128/256 = 128,
    S/dP 2·80·128/256 = 80 + the LSE of 80/4 = 20 query rows per thread, 12 fixed: 240, the
    whole setmaxnreg budget."""
    table = _table(paper_problem(128))
    res = fa3_backward_resources(table)
    i = _row(table, **FA3_D128)
    assert res.shape_ok[i] and res.mma_dkv_rs[i] == 1 and res.mma_dq_rs[i] == 0
    assert int(res.smem_bytes[i]) == 231_520 <= 232_448
    assert int(res.smem.kv[i]) == 65_536 and int(res.smem.dq[i]) == 40_960
    assert int(res.regs.resident[i]) == 128 and int(res.regs.sdp_phase[i]) == 100
    assert int(res.regs_demand[i]) == 128 + 100 + BWD_CONSUMER_FIXED_REGS == 240
    assert int(res.regs_cap[i]) == SETMAXNREG_BUDGETS[2][1] == 240
    assert int(res.inner_rank[i]) == 0  # the model runs FA3's structure for this tile
    # one query row more per warpgroup column and it no longer fits: 96 x 128 wants 260
    bigger = _row(table, **{**FA3_D128, "block_m": 96})
    assert res.regs_demand[bigger] > 240 and not table.feasible[bigger]
    # the same tile under a causal mask: the mask's 4 registers do not fit (FA3 runs 64 x 128)
    causal = _table(paper_problem(128, causal=True))
    j = _row(causal, **FA3_D128)
    assert int(fa3_backward_resources(causal).regs_demand[j]) == 244 and not causal.feasible[j]


def test_layout_rules_by_hand() -> None:
    """A wgmma's M side is a multiple of 64 per warpgroup along it: 80 query rows need S/dP
    and dQ swapped (block_n, the head dim on M), FA3's choice; V in registers needs
    SdP_swapAB."""
    table = _table(paper_problem(128))
    ok = fa3_backward_resources(table).shape_ok
    assert ok[_row(table, **FA3_D128)]
    assert not ok[_row(table, **{**FA3_D128, "sdp_swap_ab": 0})]  # M = 80 rows
    assert not ok[_row(table, **{**FA3_D128, "sdp_swap_ab": 0, "v_in_regs": 1})]
    assert not ok[_row(table, **{**FA3_D128, "dq_swap_ab": 0})]  # dQ: M = 80 rows
    assert ok[_row(table, **{**FA3_D128, "dq_split_m": 1})]  # swapped: 2 x 40 query columns
    family = find_family("fa3", table.problem.phase)
    assert family is not None
    options = SolveOptions()
    good = Config.of(**FA3_D128)
    assert check_config(family, table.hardware, table.problem, options, good) == []
    bad = Config.of(**{**FA3_D128, "sdp_swap_ab": 0})
    assert any(
        p.startswith("fa3_shape")
        for p in check_config(family, table.hardware, table.problem, options, bad)
    )


def test_the_batched_check_agrees_with_the_table_and_with_one_at_a_time() -> None:
    """The validator checks the returned configurations together (`check_all`): for a mix of
    the table's rows (feasible, illegal layouts, over shared memory or registers, inner
    variants the model does not run) it finds a broken rule exactly where the table does, and
    the same rules for each configuration as a check of that configuration alone."""
    table = _table(paper_problem(128, causal=True))
    family = table.family
    assert isinstance(family, Fa3Backward)
    res = fa3_backward_resources(table)
    legal = np.flatnonzero(res.shape_ok)
    picked = [
        *np.flatnonzero(table.feasible)[:6],
        *legal[res.inner_rank[legal] == 1][:6],  # variants the model does not run
        *legal[res.smem_bytes[legal] > res.smem_limit_bytes][:4],
        *legal[res.spill_regs[legal] > 0][:4],
        *np.flatnonzero(~res.shape_ok)[:4],
    ]
    kinds = {"inner": 0, "smem": 0, "regs": 0}
    configs = [table.cfg.config(int(i)) for i in picked]
    request = (table.hardware, table.problem, SolveOptions())
    together = family.check_all(*request, configs)
    for i, config, found in zip(picked, configs, together, strict=True):
        assert bool(found) == (not table.feasible[i]), (family.label(config), found)
        assert found == family.check_all(*request, [config])[0]
        kinds["inner"] += any(p.startswith("gemm_layout") for p in found)
        kinds["smem"] += any(p.startswith("shared_memory") for p in found)
        kinds["regs"] += any(p.startswith("registers") for p in found)
    assert table.feasible[picked[0]] and all(kinds.values()), kinds


def test_residency_evaluated_per_distinct_pair_is_the_whole_evaluation() -> None:
    """The occupancy of the whole space, evaluated once per distinct (threads, shared memory)
    pair, is the occupancy calculator's over every configuration, field by field."""
    table = _table(paper_problem(192, causal=True), "h100-pcie")
    res = fa3_backward_resources(table)
    sm = get_hardware("h100-pcie").sm
    assert sm is not None
    launch = np.minimum(sm.max_regs_per_thread, sm.regs_per_sm // res.threads) // 8 * 8
    smem = np.minimum(res.smem_bytes, sm.smem_per_block_optin_bytes)
    whole = occupancy_arrays(sm, res.threads, launch, smem)
    assert len(np.unique(smem)) > 10  # many distinct pairs, not one
    for f in dataclasses.fields(whole):
        assert np.array_equal(getattr(res.occupancy, f.name), getattr(whole, f.name)), f.name


def test_the_cost_of_one_iteration_by_hand() -> None:
    """80 x 128 at head dim 128 on h100-sxm: the five GEMMs 10·80·128·128 / 3786 = 3,462
    cycles on wgmma; the exp (80·128/16 = 640) hides under the dP GEMM (692), so only the
    FP32 elementwise work is exposed: 80·128·4/128 = 320 cycles."""
    table = _table(paper_problem(128, seq_len=16384))
    i = _row(table, **FA3_D128)
    figures = table.perf.figures
    rate = 989.4e12 / (132 * 1.98e9)  # h100-sxm's dense bf16 peak per SM and cycle
    assert figures["iteration_tensor_cycles"][i] == pytest.approx(10 * 80 * 128 * 128 / rate)
    alu = get_hardware("h100-sxm").throughput.fp32_ops_per_clk_per_sm  # 128 FP32 ops/clk
    assert figures["iteration_elementwise_cycles"][i] == pytest.approx(80 * 128 * 4 / alu)
    assert figures["iteration_cycles"][i] > figures["iteration_tensor_cycles"][i]


# ---- the engines, bad input, the published throughput ----------------------------------------


def test_cpsat_equals_the_exhaustive_oracle(compare_engines: Callable[..., SolveAnswer]) -> None:
    rng = np.random.default_rng(27)
    for _ in range(12):
        d = int(rng.choice((64, 96, 128, 192, 256)))
        problem = AttentionProblem(
            batch=int(rng.integers(1, 5)),
            heads=int(rng.choice((4, 8, 16))),
            kv_heads=int(rng.choice((1, 4))),
            seq_len=int(rng.integers(200, 9000)),
            seq_len_kv=int(rng.integers(200, 9000)),
            head_dim=d,
            causal=bool(rng.integers(0, 2)),
            phase="backward",
        )
        options = SolveOptions(kernel="fa3", top_k=4)
        if rng.integers(0, 3) == 0:
            options = options.model_copy(update={"max_smem": 200_000})
        if rng.integers(0, 3) == 0:
            options = options.model_copy(update={"parameter_pins": {"stages_do": 1}})
        compare_engines(problem, str(rng.choice(HOPPER)), options)


@pytest.mark.parametrize(
    ("argv", "field", "words"),
    [
        (["--hardware", "a100-80gb"], "kernel", "compute capability 9.0"),
        (["--hardware", "h100-sxm", "--dtype", "fp8"], "dtype", "16-bit only"),
        (["--hardware", "h100-sxm", "--dropout", "0.1"], "dropout", "no dropout"),
        (["--hardware", "h100-sxm", "--head-dim", "260"], "head_dim", "up to 256"),
        (["--hardware", "h100-sxm", "--num-warps", "8"], "num_warps", "allowed: 12, 16"),
        (["--hardware", "h100-sxm", "--param", "stages_do=3"], "param", "allowed: 1, 2"),
    ],
)
def test_bad_fa3_backward_input_exits_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], field: str, words: str
) -> None:
    base = ["solve", "--kernel", "fa3", "--phase", "backward", "--seq-len", "4096"]
    if "--head-dim" not in argv:
        base += ["--head-dim", "128"]
    code, out, err = cli(capsys, *base, *argv)
    assert code == 2 and out == "" and f"error: {field}:" in err and words in err, err


def test_refusals_name_the_families_that_run_it() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        solve(paper_problem(128, dtype="fp8"), "h100-sxm", SolveOptions(kernel="fa3"))
    assert "16-bit only" in str(caught.value)


def _published_points() -> list[Any]:
    points = []
    for series in PUBLISHED["series"]:
        for seq_len, value in zip(PUBLISHED["seq_lens"], series["tflops"], strict=True):
            points.append(
                pytest.param(series, seq_len, value, id=f"d{series['head_dim']}-{seq_len}")
            )
    return points


@pytest.mark.parametrize(("series", "seq_len", "published"), _published_points())
def test_predictions_follow_the_published_backward_throughput(
    series: dict[str, Any], seq_len: int, published: float
) -> None:
    """FA3's own tile, pinned, within 25% of the FA3 paper's backward throughput."""
    row = next(
        r for r in SHIPPED if r["head_dim"] == series["head_dim"] and r["causal"] in ("both", False)
    )
    problem = paper_problem(series["head_dim"], series["causal"], seq_len, series["dtype"])
    predicted = solve(problem, "h100-sxm", shipped_pins(row)).candidates[0].predicted_tflops
    assert abs(predicted / published - 1) <= 0.25, (predicted, published)


def test_predictions_rise_with_seq_len_as_published() -> None:
    for series in PUBLISHED["series"]:
        row = next(
            r
            for r in SHIPPED
            if r["head_dim"] == series["head_dim"] and r["causal"] in ("both", False)
        )
        values = [
            solve(paper_problem(series["head_dim"], False, s), "h100-sxm", shipped_pins(row))
            .candidates[0]
            .predicted_tflops
            for s in PUBLISHED["seq_lens"]
        ]
        assert values == sorted(values), values
