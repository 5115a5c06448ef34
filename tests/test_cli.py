"""`tilesolve-cli` against its contract (docs/cli.md, the CLI reference, and its "Exit codes").

Most tests call `main([...])` in-process and read stdout/stderr with capsys; a few run the
installed console script in a subprocess to check what a shell sees (exit status, no traceback,
no ortools import for commands that do not solve). No test hard-codes the model's answer: the
table is checked against the JSON, and CP-SAT against the exhaustive oracle.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from tilesolve.client.cli import main
from tilesolve.solver import AttentionProblem, DType, Engine, Phase, SolveOptions
from tilesolve.solver.occupancy import OccupancyQuery
from tilesolve.solver.violations import allowed_range

from command_line import run
from contracts import REQUIRED_HARDWARE_NAMES

QUICK_START = ["solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"]
DESIGN_HARDWARE = REQUIRED_HARDWARE_NAMES
CANDIDATE_FIELDS = (
    "rank",
    "block_m",
    "block_n",
    "num_warps",
    "num_stages",
    "smem_bytes",
    "regs_per_thread",
    "blocks_per_sm",
    "occupancy_limiter",
    "predicted_time_us",
    "predicted_tflops",
    "overlap",
    "reasons",
)
ANSWER_FIELDS = (
    "candidates",
    "funnel",
    "binding_constraints",
    "engine",
    "solve_ms",
    "model_version",
    "hardware",
)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, _ = run(capsys, *argv, "--json")
    return code, json.loads(out)  # json.loads rejects anything after the one document


def table_rank1(out: str) -> tuple[int, int, int, int]:
    """(block_m, block_n, warps, stages) of the table row ranked 1 ('64x128 w4 s2')."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "tile"])
    row = lines[header + 2].split()
    assert row[0] == "1", lines[header + 2]
    block_m, block_n = (int(x) for x in row[1].split("x"))
    assert row[2].startswith("w") and row[3].startswith("s"), row
    return block_m, block_n, int(row[2][1:]), int(row[3][1:])


def tile_key(candidate: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        candidate["block_m"],
        candidate["block_n"],
        candidate["num_warps"],
        candidate["num_stages"],
    )


def json_rank1(answer: dict[str, Any]) -> tuple[int, int, int, int]:
    top = answer["candidates"][0]
    assert top["rank"] == 1
    return tile_key(top)


def assert_error(err: str, field: str) -> None:
    """stderr has an `error: <field>: ...` line and no traceback."""
    assert any(line.startswith(f"error: {field}:") for line in err.splitlines()), err
    assert "Traceback" not in err


# ---- solve ---------------------------------------------------------------------------------


def test_quick_start_table_agrees_with_json_and_the_oracle(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, *QUICK_START)
    assert code == 0, err
    assert out.splitlines()[0].startswith("NVIDIA A100 80GB SXM4")
    code, cpsat = run_json(capsys, *QUICK_START)
    assert code == 0
    code, oracle = run_json(capsys, *QUICK_START, "--engine", "exhaustive")
    assert code == 0
    assert table_rank1(out) == json_rank1(cpsat) == json_rank1(oracle)
    assert [tile_key(c) for c in cpsat["candidates"]] == [tile_key(c) for c in oracle["candidates"]]


def test_table_shows_every_column_funnel_and_binding(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *QUICK_START, "--engine", "exhaustive")
    assert code == 0
    for column in ("rank", "tile", "smem KiB", "regs", "blocks/SM", "TFLOP/s", "time us"):
        assert column in out
    assert "overlap" in out
    assert "binding constraints" in out
    assert "funnel" in out
    for constraint in ("alignment", "shared_memory", "registers", "occupancy"):
        assert constraint in out
    assert all(len(line) <= 160 for line in out.splitlines()), max(out.splitlines(), key=len)


def test_table_lines_stay_narrow_for_a_long_problem(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        *("solve", "--hardware", "h100-sxm", "--head-dim", "128", "--seq-len", "8192"),
        *("--causal", "--heads", "32", "--kv-heads", "8", "--batch", "4", "--dropout"),
        *("--seq-len-kv", "16384", "--engine", "exhaustive", "--min-blocks-per-sm", "2"),
        *("--kernel", "fa2"),  # FA3, Hopper's default, has no dropout
    )
    assert code == 0
    assert all(len(line) <= 160 for line in out.splitlines()), max(out.splitlines(), key=len)


def _reason_column(out: str) -> dict[int, str]:
    """rank -> the text under its row (extra parameters, then the top reason), joined."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "tile"])
    reasons: dict[int, str] = {}
    rank = 0
    for line in lines[header + 2 :]:
        if not line.strip():
            break
        if line[:6].strip():  # a row of its own
            rank = int(line.split()[0])
            reasons[rank] = ""
        else:  # a line under the row
            reasons[rank] = " ".join([reasons[rank], line.strip()]).strip()
    return reasons


@pytest.mark.parametrize(
    "argv",
    [
        [*QUICK_START, "--top-k", "10"],
        [
            *("solve", "--hardware", "h100-sxm", "--head-dim", "128", "--seq-len", "8192"),
            *("--batch", "4", "--heads", "16", "--causal", "--top-k", "3"),
        ],
    ],
)
def test_reasons_are_never_cut(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, answer = run_json(capsys, *argv, "--engine", "exhaustive")
    assert code == 0
    code, out, _ = run(capsys, *argv, "--engine", "exhaustive")
    assert code == 0
    assert "..." not in out
    assert all(len(line) <= 160 for line in out.splitlines()), max(out.splitlines(), key=len)
    shown = _reason_column(out)
    common = ("block_m", "block_n", "num_warps", "num_stages")
    assert shown == {
        c["rank"]: " ".join(
            [*(f"{k}={v}" for k, v in c["parameters"].items() if k not in common), c["reasons"][0]]
        )
        for c in answer["candidates"]
    }
    flat = " ".join(out.split())
    for binding in answer["binding_constraints"]:
        assert " ".join(f"{binding['constraint']}: {binding['detail']}".split()) in flat


def test_json_has_every_design_field(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = run_json(capsys, *QUICK_START, "--engine", "exhaustive")
    assert code == 0
    for field in ANSWER_FIELDS:
        assert field in answer, field
    assert answer["hardware"] == "a100-80gb"
    assert answer["engine"] == "exhaustive"
    assert 1 <= len(answer["candidates"]) <= 5  # top-k defaults to 5
    for rank, candidate in enumerate(answer["candidates"], start=1):
        assert candidate["rank"] == rank
        for field in CANDIDATE_FIELDS:
            assert field in candidate, field
        assert candidate["reasons"]
    times = [c["predicted_time_us"] for c in answer["candidates"]]
    assert times == sorted(times)
    for step in answer["funnel"]:
        assert {"constraint", "removed", "remaining"} <= set(step)


def test_defaults_follow_design(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = run_json(capsys, *QUICK_START, "--engine", "exhaustive")
    assert code == 0
    problem, options = answer["problem"], answer["options"]
    assert (problem["batch"], problem["heads"], problem["dtype"], problem["phase"]) == (
        1,
        1,
        "fp16",
        "forward",
    )
    assert problem["kv_heads"] in (None, 1)
    assert problem["seq_len_kv"] in (None, 4096)
    assert problem["head_dim_v"] in (None, 128)
    assert problem["dropout"] == 0 and problem["causal"] is False
    assert options["top_k"] == 5


def test_options_reach_the_solver(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = run_json(
        capsys,
        *QUICK_START,
        *("--engine", "exhaustive", "--dropout", "--causal", "--top-k", "3", "--dtype", "bf16"),
        *("--heads", " 8 ", "--kv-heads", "2", "--max-smem", "100000", "--require-divisible"),
    )
    assert code == 0
    problem, options = answer["problem"], answer["options"]
    assert problem["dropout"] == pytest.approx(0.1)  # the flag alone means 0.1
    assert problem["causal"] is True and problem["dtype"] == "bf16"
    assert (problem["heads"], problem["kv_heads"]) == (8, 2)
    assert options["top_k"] == 3 and options["max_smem"] == 100000
    assert options["require_divisible"] is True
    assert len(answer["candidates"]) <= 3
    assert all(c["smem_bytes"] <= 100000 for c in answer["candidates"])


def test_pins_are_honoured(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = run_json(capsys, *QUICK_START, "--engine", "exhaustive", "--block-m", "64")
    assert code == 0
    assert {c["block_m"] for c in answer["candidates"]} == {64}


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--head-dim", "0"], "head_dim"),
        (["--head-dim", "-5"], "head_dim"),
        (["--head-dim", "abc"], "head_dim"),
        (["--seq-len", "99999999999"], "seq_len"),
        (["--heads", "8", "--kv-heads", "3"], "kv_heads"),
        (["--block-m", "0"], "block_m"),
        (["--top-k", "0"], "top_k"),
        (["--dropout", "1.5"], "dropout"),
        (["--time-limit", "soon"], "time_limit_s"),
        (["--max-smem", "-1"], "max_smem"),
        (["--kernel", "fa3"], "kernel"),
        (["--phase", "decode"], "seq_len"),  # decode: 1 to 64 query rows
        (["--hardware", "ascend-910b", "--dtype", "fp8"], "dtype"),
        (["--hardware", "ascend-910", "--dtype", "bf16"], "dtype"),
        (["--hardware", "ascend-910b", "--head-dim", "1000"], "head_dim"),
        (["--hardware", "ascend-910b", "--phase", "decode"], "seq_len"),  # 1 to 16 rows
        (["--tls"], "server"),  # a server option without --server
    ],
)
def test_invalid_input_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], extra: list[str], field: str
) -> None:
    code, out, err = run(capsys, *QUICK_START, *extra)
    assert code == 2
    assert out == ""
    assert_error(err, field)


def test_bad_numbers_say_what_is_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *QUICK_START, "--head-dim", "abc")
    assert code == 2
    assert "integer" in err and "1 to 1024" in err and "'abc'" in err
    code, _, err = run(capsys, *QUICK_START, "--heads", "8", "--kv-heads", "3")
    assert "1, 2, 4, 8" in err  # the divisors of heads


@pytest.mark.parametrize(
    "argv",
    [
        [*QUICK_START, "--batch", "1000", "--seq-len", "16000000"],
        ["memory", "--batch", "1000", "--seq-len", "16000000", "--head-dim", "128", "--tile", "64"],
    ],
)
def test_problem_size_cap_blames_the_problem_and_says_why(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert_error(err, "problem")  # not `batch`: no one field is too large
    assert len(err.splitlines()) == 1
    text = err.removeprefix("error: problem: ")
    assert text.startswith("batch x heads x seq_len x seq_len_kv = 1000 x 1 x 16000000 x 16000000")
    assert "2^50" in text and "typo, not a workload" in text and "catalogued GPU" in text


def test_every_violation_is_reported_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, *QUICK_START, "--head-dim", "0", "--top-k", "x", "--hardware", "nope"
    )
    assert code == 2
    for field in ("head_dim", "top_k", "hardware"):
        assert_error(err, field)


def test_unreachable_server_exits_3_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Remote mode itself is tested against a real server in test_client.py."""
    code, out, err = run(capsys, *QUICK_START, "--server", "127.0.0.1:1", "--timeout", "0.5")
    assert code == 3
    assert out == ""
    assert err.startswith("error: server: cannot reach 127.0.0.1:1") and "Traceback" not in err


@pytest.mark.parametrize(
    ("server", "why"),
    [
        ("127.0.0.1:99999", "the port 99999 is outside 1 to 65535"),  # was: another port
        ("127.0.0.1:0", "the port 0 is outside 1 to 65535"),
        ("localhost", "the port is missing"),  # was: port 443
        ("localhost:", "the port is missing"),
        ("http://127.0.0.1:50051", "leave out the scheme 'http://'"),  # was: a DNS error
        ("grpc://127.0.0.1:50051", "leave out the scheme 'grpc://'"),
        ("127.0.0.1:http", "the port 'http' is not a number"),
        ("127.0.0.1:+80", "the port '+80' is not a number"),
        (":50051", "the host is empty"),
        ("", "it is empty"),
        ("127.0.0.1 :50051", "whitespace"),
        (" 127.0.0.1:50051", "whitespace"),
        ("::1:50051", "in brackets"),
        ("[::1]", "must be followed by :PORT"),
        ("[nonsense]:50051", "not an IPv6 address"),
        ("300.1.2.3:50051", "not an IPv4 address"),
        ("bad..host:50051", "not a hostname"),
        ("under/score:50051", "not a hostname"),
    ],
)
def test_server_address_must_be_host_colon_port(
    capsys: pytest.CaptureFixture[str], server: str, why: str
) -> None:
    code, out, err = run(capsys, "hardware", "list", f"--server={server}")
    assert (code, out) == (2, "")
    assert_error(err, "server")
    assert "HOST:PORT or [IPV6]:PORT" in err and "1 to 65535" in err  # the allowed form
    assert why in err
    assert len(err.splitlines()) == 1


def test_server_address_help_states_the_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "solve", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "HOST:PORT or [IPV6]:PORT" in text and "1 to 65535" in text and "http://" in text


def test_unknown_hardware_lists_known_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, *QUICK_START, "--hardware", "nope")
    assert code == 2
    assert_error(err, "hardware")
    for name in DESIGN_HARDWARE:
        assert name in err


@pytest.mark.parametrize(
    "argv",
    [
        [*QUICK_START, "--dtype", "fp4"],  # argparse choices
        [*QUICK_START, "--no-such-option"],
        ["solve", "--hardware", "a100", "--head-dim", "128"],  # --seq-len missing
        ["hardware"],
        ["frobnicate"],
        [],
    ],
)
def test_usage_errors_exit_2_without_traceback(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    if "--dtype" in argv:
        assert "--dtype" in err and "fp16" in err


def test_infeasible_cap_exits_1_with_nearest_relaxation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, answer = run_json(capsys, *QUICK_START, "--max-smem", "4096")
    assert code == 1
    assert answer["status"] == "infeasible"
    assert answer["candidates"] == []
    assert "max_smem" in answer["infeasibility"]["conflicting_constraints"]
    assert "max-smem" in answer["infeasibility"]["nearest_relaxation"]
    code, out, _ = run(capsys, *QUICK_START, "--max-smem", "4096")
    assert code == 1
    assert "no feasible configuration" in out and "nearest relaxation" in out
    assert all(len(line) <= 160 for line in out.splitlines())


@pytest.mark.parametrize(
    ("flags", "field", "allowed"),
    [
        (("--block-m", "96"), "block_m", "16, 32, 64, 128, 256"),
        (("--num-warps", "3"), "num_warps", "1, 2, 4, 8, 16"),
        (("--num-stages", "2"), "num_stages", "allowed: 1"),
        (("--param", "block_n=48"), "param", "16, 32, 64, 128, 256"),
    ],
)
def test_pin_outside_the_domain_is_invalid_listing_the_domain(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], field: str, allowed: str
) -> None:
    code, out, err = run(capsys, *QUICK_START, *flags)
    assert code == 2 and out == ""
    assert_error(err, field)
    assert allowed in err and "outside fa2's domain" in err


def test_pin_inside_the_domain_that_nothing_satisfies_is_infeasible(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """16 rows with 16 warps is in the domain but breaks fa2's 16-rows-per-warp rule."""
    code, answer = run_json(capsys, *QUICK_START, "--block-m", "16", "--num-warps", "16")
    assert code == 1
    assert "pins" in answer["infeasibility"]["conflicting_constraints"]
    relaxation = answer["infeasibility"]["relaxation"]
    assert relaxation["target_kind"] == "parameter"
    assert relaxation["target"] in ("block_m", "num_warps")
    assert isinstance(relaxation["suggested_value"], int)


def test_param_pins_any_declared_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = run_json(capsys, *QUICK_START, "--kernel", "triton", "--param", "num_stages=3")
    assert code == 0
    assert {c["num_stages"] for c in answer["candidates"]} == {3}
    assert all(c["parameters"]["num_stages"] == 3 for c in answer["candidates"])
    assert answer["options"]["parameter_pins"] == {"num_stages": 3}


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (("--param", "warps_kv=2"), "its parameters: block_m, block_n, num_warps, num_stages"),
        (("--param", "block_m"), "must be NAME=VALUE"),
        (("--param", "block_m=abc"), "must be an integer"),
        (("--param", "=4"), "must be NAME=VALUE"),
        (("--param", "block_m=64", "--param", "block_m=128"), "given twice"),
        (("--block-m", "64", "--param", "block_m=128"), "contradicts --param block_m=128"),
    ],
)
def test_bad_param_is_exit_2(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], needle: str
) -> None:
    code, out, err = run(capsys, *QUICK_START, *flags)
    assert code == 2 and out == "", err
    assert needle in err and "Traceback" not in err


def test_time_limit_without_an_answer_is_not_reported_as_infeasible(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A CP-SAT run cut off before its first solution proves nothing: exit 3, not 1. A limit
    below the schema's 1 ms (a denormal, say) is refused: exit 2 naming the field."""
    code, out, err = run(capsys, *QUICK_START, "--time-limit", "0.00001", "--json")
    assert code == 2 and out == ""
    assert_error(err, "time_limit_s")
    code, out, err = run(capsys, *QUICK_START, "--time-limit", "0.001", "--json")
    assert code in (0, 3), err
    if code == 3:
        assert out == ""
        assert_error(err, "time_limit_s")
    else:
        assert json.loads(out)["status"] in ("optimal", "feasible")


def test_internal_errors_exit_4(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tilesolve.solver

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(tilesolve.solver, "solve", broken)
    code, _, err = run(capsys, *QUICK_START)
    assert code == 4
    assert "internal error" in err and "boom" in err and "Traceback" not in err


def test_help_lists_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["solve", "--help"], ["occupancy", "--help"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0
        for line in (
            "0  an answer",
            "1  no feasible",
            "for occupancy: not one block",
            "2  invalid input",
            "3  server",
            "4  internal",
        ):
            assert line in out
    _, out, _ = run(capsys, "solve", "--help")
    for flag in ("--seq-len-kv", "--head-dim-v", "--require-divisible", "--max-smem", "--server"):
        assert flag in out


# ---- hardware ------------------------------------------------------------------------------


def test_hardware_list_has_every_design_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "hardware", "list")
    assert code == 0
    for name in DESIGN_HARDWARE:
        assert name in out
    code, listing = run_json(capsys, "hardware", "list")
    assert code == 0
    names = {entry["name"] for entry in listing}
    assert set(DESIGN_HARDWARE) <= names
    a100 = next(e for e in listing if e["name"] == "a100-80gb")
    assert a100["compute_capability"] == "8.0" and "a100" in a100["aliases"]


def test_hardware_show_resolves_aliases_and_has_sources(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, spec = run_json(capsys, "hardware", "show", "a100")
    assert code == 0
    assert spec["name"] == "a100-80gb"
    assert spec["sm"]["compute_capability"] == "8.0"
    assert spec["sources"]
    code, out, _ = run(capsys, "hardware", "show", "a100")
    assert code == 0
    assert "smem_per_block_optin_bytes" in out and "PG13" in out


def test_sm_name_resolves_only_when_one_device_has_that_compute_capability(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, spec = run_json(capsys, "hardware", "show", "sm75")
    assert code == 0 and spec["name"] == "t4"
    for argv, sharing in (
        (["hardware", "show", "sm80"], "a100-40gb and a100-80gb"),
        (["solve", "--hardware", "sm90", "--head-dim", "128", "--seq-len", "4096"], "h100-pcie"),
        (
            ["occupancy", "--hardware", "sm89", "--threads", "128", "--regs", "32", "--smem", "0"],
            "l4, l40s and rtx-4090",
        ),
    ):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, ""), err
        assert_error(err, "hardware")
        assert "is ambiguous" in err and sharing in err


def test_hardware_show_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "hardware", "show", "nope")
    assert code == 2 and out == ""
    assert_error(err, "hardware")
    assert "a100-80gb" in err


# ---- occupancy -----------------------------------------------------------------------------

OCC = ["occupancy", "--hardware", "a100"]


def test_occupancy_a100_shared_memory_bound(capsys: pytest.CaptureFixture[str]) -> None:
    code, occ = run_json(capsys, *OCC, "--threads", "128", "--regs", "96", "--smem", "49152")
    assert code == 0
    assert occ["blocks_per_sm"] == 3
    assert occ["limiter"] == "shared_memory" and occ["limiters"] == ["shared_memory"]
    assert occ["limit_shared_memory"] == 3 and occ["limit_registers"] == 5
    assert occ["limit_warps"] == 16 and occ["limit_blocks"] == 32
    assert occ["smem_per_block_bytes"] == 49152 + 1024  # the reserved 1 KiB is added
    assert occ["active_warps_per_sm"] == 12
    assert occ["occupancy"] == pytest.approx(12 / 64)
    assert occ["regs_per_block"] == 96 * 128
    assert occ["smem_per_sm_config_bytes"] == 164 * 1024
    code, out, _ = run(capsys, *OCC, "--threads", "128", "--regs", "96", "--smem", "49152")
    assert code == 0 and "blocks per SM: 3 (limited by shared_memory)" in out


@pytest.mark.parametrize(
    ("launch", "limiter"),
    [
        (["--threads", "1024", "--regs", "255", "--smem", "0"], "registers"),
        (["--threads", "128", "--regs", "32", "--smem", "200000"], "shared_memory"),
    ],
)
def test_occupancy_of_a_launch_that_cannot_fit_exits_1(
    capsys: pytest.CaptureFixture[str], launch: list[str], limiter: str
) -> None:
    code, occ = run_json(capsys, *OCC, *launch)
    assert code == 1  # the JSON document is still printed
    assert occ["blocks_per_sm"] == 0 and occ["limiter"] == limiter
    code, out, err = run(capsys, *OCC, *launch)
    assert code == 1 and err == ""
    assert "blocks per SM: 0" in out
    assert "cannot launch on a100-80gb: not one block fits on an SM" in out
    assert "exit status 1" in out


def test_occupancy_carveout_changes_the_sm_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, occ = run_json(
        capsys, *OCC, "--threads", "128", "--regs", "32", "--smem", "0", "--carveout", "0"
    )
    assert code == 0
    assert occ["smem_per_sm_config_bytes"] == 8 * 1024  # smallest carveout holding 1 KiB


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--threads", "0", "--regs", "32", "--smem", "0"], "threads"),
        (["--threads", "2048", "--regs", "32", "--smem", "0"], "threads"),
        (["--threads", "many", "--regs", "32", "--smem", "0"], "threads"),
        (["--threads", "128", "--regs", "256", "--smem", "0"], "regs"),
        (["--threads", "128", "--regs", "-1", "--smem", "0"], "regs"),
        (["--threads", "128", "--regs", "32", "--smem", "-1"], "smem"),
        (["--threads", "128", "--regs", "32", "--smem", str(1 << 25)], "smem"),
        (["--threads", "128", "--regs", "32", "--smem", "0", "--carveout", "101"], "carveout"),
        (["--threads", "128", "--regs", "32", "--smem", "0", "--carveout", "-2"], "carveout"),
    ],
)
def test_occupancy_bad_inputs_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    code, out, err = run(capsys, *OCC, *args)
    assert code == 2 and out == ""
    assert_error(err, field)
    assert " to " in err  # the allowed range


def test_occupancy_needs_a_cuda_device(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["occupancy", "--hardware", "ascend-910b", "--threads", "128", "--regs", "32"]
    code, _, err = run(capsys, *argv, "--smem", "0")
    assert code == 2
    assert_error(err, "hardware")
    assert "CUDA" in err


# ---- the installed console script ----------------------------------------------------------


def _script() -> str | None:
    beside = Path(sys.executable).parent / "tilesolve-cli"
    return str(beside) if beside.exists() else shutil.which("tilesolve-cli")


needs_script = pytest.mark.skipif(_script() is None, reason="tilesolve-cli is not installed")


def _shell(*argv: str) -> subprocess.CompletedProcess[str]:
    script = _script()
    assert script is not None
    return subprocess.run([script, *argv], capture_output=True, text=True, timeout=120, check=False)


@needs_script
def test_script_quick_start() -> None:
    table = _shell(*QUICK_START)
    assert table.returncode == 0, table.stderr
    as_json = _shell(*QUICK_START, "--json")
    assert as_json.returncode == 0
    assert table_rank1(table.stdout) == json_rank1(json.loads(as_json.stdout))


@needs_script
def test_script_bad_input_has_no_traceback() -> None:
    result = _shell(*QUICK_START, "--head-dim", "abc")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "head_dim" in result.stderr and "Traceback" not in result.stderr


@needs_script
def test_script_help_is_fast() -> None:
    result = _shell("--help")
    assert result.returncode == 0
    assert "exit codes" in result.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["hardware", "list"],
        ["hardware", "show", "h100"],
        ["occupancy", "--hardware", "a100", "--threads", "128", "--regs", "64", "--smem", "0"],
    ],
)
def test_commands_that_do_not_solve_leave_ortools_unimported(argv: list[str]) -> None:
    code = (
        "import sys, contextlib, io\n"
        "import tilesolve.client.cli as cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = cli.main({argv!r})\n"
        "print(rc, 'ortools' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["0", "False"], result.stderr


def _help_of(capsys: pytest.CaptureFixture[str], *command: str) -> dict[str, str]:
    """Each option's help text in `command --help`, white space folded."""
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=  -)", out):
        head, _, rest = block.strip().partition(" ")
        if head.startswith("--"):
            found[head] = " ".join(rest.split())
    return found


@pytest.mark.parametrize(
    ("command", "flag", "model", "field"),
    [
        ("solve", "--batch", AttentionProblem, "batch"),
        ("solve", "--seq-len", AttentionProblem, "seq_len"),
        ("solve", "--head-dim", AttentionProblem, "head_dim"),
        ("solve", "--dropout", AttentionProblem, "dropout"),
        ("solve", "--dtype", AttentionProblem, "dtype"),
        ("solve", "--phase", AttentionProblem, "phase"),
        ("solve", "--top-k", SolveOptions, "top_k"),
        ("solve", "--engine", SolveOptions, "engine"),
        ("solve", "--time-limit", SolveOptions, "time_limit_s"),
        ("solve", "--max-smem", SolveOptions, "max_smem"),
        ("memory", "--heads", AttentionProblem, "heads"),
        ("simulate", "--head-dim-v", AttentionProblem, "head_dim_v"),
        ("occupancy", "--regs", OccupancyQuery, "regs"),
        ("occupancy", "--smem", OccupancyQuery, "smem_bytes"),
    ],
)
def test_help_of_an_option_is_its_schema_fields(
    capsys: pytest.CaptureFixture[str],
    command: str,
    flag: str,
    model: type[BaseModel],
    field: str,
) -> None:
    """The description, the range (as the violation messages state it) or the enum's values,
    and the default, all read from the field (issue 20: none re-typed in the CLI)."""
    text = _help_of(capsys, command)[flag]
    info = model.model_fields[field]
    assert info.description and info.description[:-1] in text
    annotation = [a for a in get_args(info.annotation) if a is not type(None)] or [info.annotation]
    kind = annotation[0]
    if isinstance(kind, type) and issubclass(kind, Enum):
        assert f"one of {', '.join(m.value for m in kind)}" in text
        assert f"default {info.default.value}" in text
    else:
        range_text = allowed_range(model, field)
        assert range_text is not None and range_text in text
    if info.default not in (None, PydanticUndefined) and not isinstance(info.default, Enum):
        assert f"default {info.default:g}" in text


def test_enum_options_take_their_choices_from_the_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["solve", "--hardware", "a100", "--head-dim", "64", "--seq-len", "128"]
    for flag, values in (("--dtype", DType), ("--engine", Engine), ("--phase", Phase)):
        code = main([*argv, flag, "nonsense"])
        err = capsys.readouterr().err
        assert code == 2 and f"argument {flag}: invalid choice: 'nonsense'" in err
        assert all(repr(v.value) in err for v in values)


def test_top_level_help_imports_no_solver() -> None:
    """Help of a command reads the schemas; the parser and `--help` do not import them (the
    solver package itself is light: its names load on first use)."""
    code = (
        "import sys, contextlib, io\n"
        "import tilesolve.client.cli as cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = cli.main(['--help'])\n"
        "heavy = ('numpy', 'pydantic', 'tilesolve.solver.problem', 'tilesolve.solver.solve')\n"
        "print(rc, any(name in sys.modules for name in heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["0", "False"], result.stderr


def test_a_problem_below_one_wave_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """The defaults (batch 1, heads 1) leave most SMs idle: the answer says why."""
    code, answer = run_json(capsys, *QUICK_START)
    assert code == 0
    assert any("less than one wave" in note for note in answer["notes"])
    code, out, _ = run(capsys, *QUICK_START)
    assert "note: the problem fills less than one wave" in out
    code, answer = run_json(capsys, *QUICK_START, "--batch", "8", "--heads", "32")
    assert code == 0 and answer["notes"] == []
    # decode splits K/V across blocks to fill the SMs: the under-fill note would mislead
    decode = ["solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "1"]
    code, answer = run_json(capsys, *decode, "--seq-len-kv", "32768", "--phase", "decode")
    assert code == 0 and answer["candidates"][0]["num_splits"] > 1
    assert not any("less than one wave" in note for note in answer["notes"])


def test_answer_echoes_the_resolved_problem(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = run_json(capsys, *QUICK_START, "--heads", "8", "--kv-heads", "2")
    assert code == 0
    problem = answer["problem"]
    assert (problem["kv_heads"], problem["seq_len_kv"], problem["head_dim_v"]) == (2, 4096, 128)
    code, answer = run_json(capsys, *QUICK_START)
    assert answer["problem"]["kv_heads"] == 1


@pytest.mark.parametrize(
    ("flags", "field", "names"),
    [
        (("--hardware", "h100", "--kernel", "fa2", "--dtype", "fp8"), "dtype", "triton"),
        (("--hardware", "a100", "--kernel", "ascend"), "kernel", "fa2, flashinfer, flex, triton"),
        (("--hardware", "t4", "--kernel", "fa2"), "kernel", "triton"),
        (("--hardware", "a100", "--kernel", "nosuch"), "kernel", "fa2, flashinfer, flex, triton"),
    ],
)
def test_a_refused_family_names_the_families_that_run_here(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], field: str, names: str
) -> None:
    code, out, err = run(capsys, "solve", "--head-dim", "128", "--seq-len", "4096", *flags)
    assert code == 2 and out == ""
    assert_error(err, field)
    assert names in err


def test_the_answer_names_the_family_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, answer = run_json(capsys, *QUICK_START)
    assert code == 0 and answer["kernel"] == "fa2"
    assert answer["kernel_reason"].startswith("fa2, the default kernel of a100-80gb: ")
    code, answer = run_json(capsys, *QUICK_START, "--kernel", "triton")
    assert code == 0
    assert answer["kernel_reason"].startswith("triton, as requested: ")
    _, out, _ = run(capsys, *QUICK_START)
    assert "family: fa2, the default kernel of a100-80gb" in out
