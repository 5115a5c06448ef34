"""The flex family's interfaces: `--format flex` (the kernel_options dict, checked against the
templates' rules), the block-mask options on the CLI and over gRPC, and the Python helper
`tilesolve.client.flex.kernel_options` on tensor-like objects."""

from __future__ import annotations

import json
from dataclasses import dataclass

import grpc
import pytest

from tilesolve import wire
from tilesolve.client import flex
from tilesolve.client.block_mask_options import BLOCK_MASK_OPTIONS
from tilesolve.client.cli import main
from tilesolve.solver import AttentionProblem, SolveOptions, solve
from tilesolve.solver.problem import BLOCK_MASK_FIELDS
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

FORWARD = {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"}
BACKWARD = {"BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2", "num_warps", "num_stages"}
DECODE = {"BLOCK_N", "num_warps", "num_stages", "SPLIT_KV"}
SOLVE = ["solve", "--hardware", "rtx-4090", "--kernel", "flex", "--seq-len", "2048"]


def _template_rules_hold(options: dict[str, int], block_size: int = 128) -> None:
    """What flex_attention's lowering and the templates' static asserts require."""
    for name, value in options.items():
        assert value > 0, (name, value)
        if name.startswith("BLOCK_") or name == "num_warps":
            assert value & (value - 1) == 0, (name, value)  # powers of two
        if name.startswith("BLOCK_"):
            assert block_size % value == 0, (name, value)
    if "BLOCK_M1" in options:
        assert options["BLOCK_N1"] % options["BLOCK_M1"] == 0
        assert options["BLOCK_M2"] % options["BLOCK_N2"] == 0


def _cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, int]:
    code = main([*SOLVE, *args, "--format", "flex"])
    assert code == 0
    out: dict[str, int] = json.loads(capsys.readouterr().out)
    return out


def test_format_flex_forward_and_backward(capsys: pytest.CaptureFixture[str]) -> None:
    forward = _cli_json(capsys, "--head-dim", "128", "--causal")
    assert set(forward) == FORWARD
    _template_rules_hold(forward)
    backward = _cli_json(capsys, "--head-dim", "192", "--head-dim-v", "128", "--phase", "backward")
    assert set(backward) == BACKWARD
    _template_rules_hold(backward)


def test_format_flex_both_prefixes_each_pass(capsys: pytest.CaptureFixture[str]) -> None:
    both = _cli_json(capsys, "--head-dim", "64", "--phase", "both", "--sparse-block-size", "64")
    assert set(both) == {f"fwd_{k}" for k in FORWARD} | {f"bwd_{k}" for k in BACKWARD}
    _template_rules_hold({k[4:]: v for k, v in both.items() if k.startswith("fwd_")}, 64)
    _template_rules_hold({k[4:]: v for k, v in both.items() if k.startswith("bwd_")}, 64)


def test_format_flex_decode_has_split_kv(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            *SOLVE[:-1],
            "1",
            "--seq-len-kv",
            "8192",
            "--heads",
            "16",
            "--kv-heads",
            "4",
            "--head-dim",
            "128",
            "--phase",
            "decode",
            "--format",
            "flex",
        ]
    )
    assert code == 0
    options = json.loads(capsys.readouterr().out)
    assert set(options) == DECODE
    _template_rules_hold(options)


def test_format_flex_refuses_another_family(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["solve", "--hardware", "l4", "--kernel", "fa2", "--seq-len", "512",
                 "--head-dim", "64", "--format", "flex"])  # fmt: skip
    assert code == 2
    assert "format" in capsys.readouterr().err


def test_block_mask_options_reach_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*SOLVE, "--head-dim", "64", "--causal", "--window", "256", "--json"])
    assert code == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["options"]["window"] == 256
    assert "sparse_block_size" not in answer["options"]  # absent unless given


def test_the_cli_and_the_schema_name_the_same_block_mask_fields() -> None:
    assert BLOCK_MASK_OPTIONS == BLOCK_MASK_FIELDS


def test_a_pinned_tile_that_does_not_fit_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*SOLVE, "--head-dim", "256", "--block-m", "128", "--block-n", "128",
                 "--num-stages", "3", "--json"])  # fmt: skip
    assert code == 1
    (note,) = json.loads(capsys.readouterr().out)["notes"]
    assert "rtx-4090 allows 101376 bytes per block" in note and "nearest that fits" in note
    needs = int(note.split("needs ")[1].split(" bytes")[0])
    assert needs > 101376


def test_flex_over_grpc(stub: pb_grpc.TileSolveServiceStub) -> None:
    problem = AttentionProblem(seq_len=4096, head_dim=128, causal=True, heads=8)
    options = SolveOptions(kernel="flex", window=512, sparse_block_size=64)
    response = stub.Solve(wire.solve_request_to_proto(problem, "l4", options), timeout=30)
    local = solve(problem, "l4", options)
    assert response.kernel == "flex"
    best = response.candidates[0]
    assert dict(best.parameters) == local.candidates[0].parameters
    bad = SolveOptions(kernel="fa2", window=64)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Solve(wire.solve_request_to_proto(problem, "l4", bad), timeout=30)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "window" in (caught.value.details() or "")


@dataclass
class FakeTensor:
    """What the helper reads of a torch tensor: shape, dtype, device."""

    shape: tuple[int, ...]
    dtype: str = "torch.bfloat16"
    device: object = None


@dataclass
class FakeBlockMask:
    BLOCK_SIZE: tuple[int, int] = (128, 128)


def test_helper_returns_prefixed_training_options() -> None:
    q = FakeTensor((2, 16, 4096, 128))
    kv = FakeTensor((2, 4, 4096, 128))
    options = flex.kernel_options(q, kv, kv, block_mask=FakeBlockMask(), hardware="h100-sxm",
                                  causal=True)  # fmt: skip
    assert set(options) == {f"fwd_{k}" for k in FORWARD} | {f"bwd_{k}" for k in BACKWARD}
    expected = solve(
        AttentionProblem(
            batch=2, heads=16, kv_heads=4, seq_len=4096, head_dim=128, dtype="bf16", causal=True
        ),
        "h100-sxm",
        SolveOptions(kernel="flex", top_k=1, sparse_block_size=128),
    )
    assert options["fwd_BLOCK_M"] == expected.candidates[0].block_m


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: flex.kernel_options(FakeTensor((2, 8, 64)), FakeTensor((2, 8, 64, 64)),
                                     FakeTensor((2, 8, 64, 64)), hardware="l4"), "query"),
        (lambda: flex.kernel_options(FakeTensor((1, 8, 64, 64), "torch.float8_e4m3fn"),
                                     FakeTensor((1, 8, 64, 64)), FakeTensor((1, 8, 64, 64)),
                                     hardware="l4"), "query.dtype"),
        (lambda: flex.kernel_options(FakeTensor((1, 8, 64, 64)), FakeTensor((1, 8, 64, 64)),
                                     FakeTensor((1, 8, 64, 64)), hardware="l4",
                                     phase="sideways"), "phase"),
        (lambda: flex.kernel_options(FakeTensor((1, 8, 64, 64)), FakeTensor((1, 8, 64, 64)),
                                     FakeTensor((1, 8, 64, 64))), "hardware"),
        (lambda: flex.kernel_options(FakeTensor((1, 8, 64, 64)), FakeTensor((1, 8, 64, 64)),
                                     FakeTensor((1, 8, 64, 64)), hardware="l4",
                                     block_mask=FakeBlockMask((128, 64))), "BLOCK_SIZE"),
    ],
)  # fmt: skip
def test_helper_errors_name_the_argument(call: object, named: str) -> None:
    with pytest.raises(flex.FlexOptionsError) as caught:
        call()  # type: ignore[operator]
    assert named in str(caught.value)


def test_memory_reports_a_pinned_flex_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    """`memory --kernel flex --param ...`: the configuration's shared memory against the limit,
    the same figure the solver reports for that configuration."""
    pins = {"block_m1": 32, "block_n1": 64, "block_m2": 64, "block_n2": 32, "num_stages": 3}
    args = ["memory", "--hardware", "rtx-4090", "--kernel", "flex", "--seq-len", "4096",
            "--head-dim", "128", "--phase", "backward", "--tile", "64", "--json"]  # fmt: skip
    for name, value in pins.items():
        args += ["--param", f"{name}={value}"]
    assert main(args) == 0
    estimate = json.loads(capsys.readouterr().out)
    smem = next(u for u in estimate["family_resources"] if u["name"] == "shared_memory")
    assert smem["capacity"] == 101376
    problem = AttentionProblem(seq_len=4096, head_dim=128, phase="backward")
    options = SolveOptions(kernel="flex", parameter_pins={**pins, "num_warps": 4})
    answer = solve(problem, "rtx-4090", options)
    assert answer.candidates[0].smem_bytes == smem["used"] == estimate["family_smem_bytes"]
    assert main([*args, "--param", "block_q=3"]) == 2
    assert "block_q" in capsys.readouterr().err


def test_memory_params_over_grpc_match_in_process(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory --kernel flex --param ... --server`: the EstimateMemory RPC carries the
    parameters (EstimateMemoryRequest.parameters), so the server's family_resources and
    family_parameters are the in-process ones; a bad parameter is exit 2 either way."""
    args = ["memory", "--hardware", "rtx-4090", "--kernel", "flex", "--seq-len", "4096",
            "--head-dim", "128", "--phase", "backward", "--tile", "64", "--json",
            "--param", "block_m1=32", "--param", "block_n1=64", "--param", "block_m2=64",
            "--param", "block_n2=32", "--param", "num_stages=3"]  # fmt: skip
    assert main(args) == 0
    local = json.loads(capsys.readouterr().out)
    assert main([*args, "--server", target]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert remote["family_resources"] == local["family_resources"]
    assert remote["family_parameters"] == local["family_parameters"]
    assert local["family_parameters"]["num_stages"] == 3
    assert main([*args, "--param", "num_stages=2"]) == 2  # given twice: refused
    capsys.readouterr()
    assert main([*args[:-2], "--param", "block_q=3", "--server", target]) == 2
    assert "block_q" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kernel", "phase"),
    [("fa2", "forward"), ("flashinfer", "forward"), ("fa2", "backward"), ("flex", "forward")],
)
@pytest.mark.parametrize("page_size", [256, 7])
def test_memory_refuses_a_page_size_pin_naming_it_in_process_and_over_grpc(
    kernel: str, phase: str, page_size: int, target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory` reports contiguous K/V: a page_size pin is no parameter of any family there
    (exit 2 naming it and the family's parameters), even where the family's decode path has a
    paged-KV rule that the value breaks (fa2, flashinfer: that rule's refusal came first)."""
    args = ["memory", "--hardware", "h100-sxm", "--kernel", kernel, "--phase", phase,
            "--seq-len", "4096", "--head-dim", "128", "--tile", "64",
            "--param", f"page_size={page_size}"]  # fmt: skip
    for extra in ([], ["--server", target]):
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert f"{kernel} has no parameter 'page_size'; its parameters: " in err, err
