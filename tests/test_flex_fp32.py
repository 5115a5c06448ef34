"""fp32 through the whole interface (issue 23): the flex family answers every pass on every
sm80+ CUDA device of the catalog in fp16, bf16 and fp32 within the part's opt-in shared memory,
the same in-process, over gRPC and through the Python helper; every other family refuses fp32
naming the field, what it takes and that flex takes fp32; FLOAT32_PRECISION is 'ieee' unless
`tf32` is pinned."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import pytest

from tilesolve import wire
from tilesolve.client import flex
from tilesolve.client.cli import main
from tilesolve.solver import (
    AttentionProblem,
    CudaDevice,
    InvalidRequestError,
    SolveOptions,
    get_hardware,
    hardware_names,
    solve,
)
from tilesolve.solver.problem import DType
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

HEAD_DIMS = ((64, 64), (96, 96), (128, 128), (192, 128), (256, 256))
DTYPES = ("fp16", "bf16", "fp32")
PHASES = ("forward", "backward", "decode")
BATCH_LIMIT = 50  # SolveBatch's most requests per call


def sm80_devices() -> list[CudaDevice]:
    out = []
    for name in hardware_names():
        spec = get_hardware(name)
        if isinstance(spec, CudaDevice) and spec.sm.cc_major >= 8:
            out.append(spec)
    return out


def sweep_problem(phase: str, dtype: str, d: int, dv: int) -> AttentionProblem:
    if phase == "decode":
        return AttentionProblem(
            batch=4, heads=16, kv_heads=4, seq_len=1, seq_len_kv=4096, head_dim=d,
            head_dim_v=dv, dtype=dtype, phase=phase,
        )  # fmt: skip
    return AttentionProblem(
        batch=2, heads=8, seq_len=2048, head_dim=d, head_dim_v=dv, dtype=dtype, causal=True,
        phase=phase,
    )  # fmt: skip


@dataclass
class FakeTensor:
    shape: tuple[int, ...]
    dtype: str


TORCH_DTYPES = {"fp16": "torch.float16", "bf16": "torch.bfloat16", "fp32": "torch.float32"}


def test_every_pass_answers_on_every_sm80_device_within_the_opt_in_limit(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    """Done-when of issue 23: forward, backward, decode and both; fp16, bf16, fp32; head dims
    64, 96, 128, 192 (v 128) and 256; every sm80+ device. The answer fits the part, the gRPC
    answer and the helper's options are the in-process answer's."""
    devices = sm80_devices()
    assert len(devices) >= 10
    options = SolveOptions(kernel="flex", top_k=1)
    cases = [
        (device, phase, dtype, d, dv)
        for device in devices
        for dtype in DTYPES
        for d, dv in HEAD_DIMS
        for phase in PHASES
    ]
    local = {}
    for device, phase, dtype, d, dv in cases:
        answer = solve(sweep_problem(phase, dtype, d, dv), device.name, options)
        case = (device.name, phase, dtype, d)
        assert answer.candidates, case
        best = answer.candidates[0]
        assert best.smem_bytes is not None
        assert best.smem_bytes <= device.sm.smem_per_block_optin_bytes, case
        local[case] = best.parameters
    for start in range(0, len(cases), BATCH_LIMIT):
        chunk = cases[start : start + BATCH_LIMIT]
        requests = [
            wire.solve_request_to_proto(sweep_problem(p, t, d, dv), dev.name, options)
            for dev, p, t, d, dv in chunk
        ]
        batch = stub.SolveBatch(pb.SolveBatchRequest(requests=requests), timeout=120)
        for (dev, p, t, d, _), item in zip(chunk, batch.items, strict=True):
            assert dict(item.response.candidates[0].parameters) == local[(dev.name, p, t, d)]
    for device in devices:
        for dtype in DTYPES:
            for d, dv in HEAD_DIMS:
                q = FakeTensor((2, 8, 2048, d), TORCH_DTYPES[dtype])
                v = FakeTensor((2, 8, 2048, dv), TORCH_DTYPES[dtype])
                both = flex.kernel_options(q, q, v, hardware=device.name, causal=True)
                forward = local[(device.name, "forward", dtype, d)]
                backward = local[(device.name, "backward", dtype, d)]
                assert both["fwd_BLOCK_M"] == forward["block_m"]
                assert both["bwd_BLOCK_N1"] == backward["block_n1"]
                assert both["bwd_num_stages"] == backward["num_stages"]


@pytest.mark.parametrize("kernel", ["fa2", "triton", "fa3", "flashinfer"])
def test_other_families_refuse_fp32_naming_flex(
    kernel: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["solve", "--hardware", "h100-sxm", "--kernel", kernel, "--seq-len", "1024",
            "--head-dim", "128", "--dtype", "fp32"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "dtype" in err and "flex" in err and "fp16" in err


def test_fp32_refusal_over_grpc_names_the_field(stub: pb_grpc.TileSolveServiceStub) -> None:
    problem = AttentionProblem(seq_len=1024, head_dim=128, dtype="fp32")
    request = wire.solve_request_to_proto(problem, "a100-80gb", SolveOptions(kernel="fa2"))
    assert request.problem.dtype == pb.DATA_TYPE_FP32
    with pytest.raises(grpc.RpcError) as caught:
        stub.Solve(request, timeout=30)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "dtype" in (caught.value.details() or "") and "flex" in (caught.value.details() or "")
    fine = wire.solve_request_to_proto(problem, "a100-80gb", SolveOptions(kernel="flex"))
    assert stub.Solve(fine, timeout=30).candidates


def test_the_cli_takes_fp32_in_any_case(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["solve", "--hardware", "l4", "--kernel", "flex", "--seq-len", "1024",
            "--head-dim", "64", "--json"]  # fmt: skip
    assert main([*args, "--dtype", "FP32"]) == 0
    assert '"fp32"' in capsys.readouterr().out
    assert main([*args, "--dtype", "fp23"]) == 2
    assert "fp32" in capsys.readouterr().err


def test_fp32_tiles_are_four_bytes_an_element() -> None:
    """At tf32 (mma.sync) an fp32 forward tile takes twice the fp16 one's shared memory, and
    at 'ieee' (FMA dots) its own rule's figure, which the pin of tf32 changes."""
    pins = {"block_m": 128, "block_n": 32, "num_warps": 4, "num_stages": 2}
    problem = AttentionProblem(seq_len=4096, head_dim=64)

    def smem(dtype: DType, **extra: int) -> int:
        options = SolveOptions(kernel="flex", parameter_pins={**pins, **extra})
        answer = solve(problem.model_copy(update={"dtype": dtype}), "a100-80gb", options)
        assert answer.candidates[0].smem_bytes is not None
        return answer.candidates[0].smem_bytes

    assert smem(DType.FP32, tf32=1) == 2 * smem(DType.FP16)
    ieee = smem(DType.FP32)
    # Q, K, V and P in fp32 and one fp32 per row (as compiled: 66,048 bytes)
    assert ieee == 4 * (128 * 64 + 32 * 64 + 32 * 64 + 128 * 32 + 128)


def test_float32_precision_is_ieee_unless_pinned() -> None:
    problem = AttentionProblem(seq_len=4096, head_dim=128, dtype="fp32")
    default = solve(problem, "h100-sxm", SolveOptions(kernel="flex", top_k=3))
    assert {c.parameters["tf32"] for c in default.candidates} == {0}
    tf32 = solve(problem, "h100-sxm", SolveOptions(kernel="flex", parameter_pins={"tf32": 1}))
    assert tf32.candidates[0].parameters["tf32"] == 1
    # the tensor cores at tf32 are faster than the FMA units
    assert tf32.candidates[0].predicted_time_us < default.candidates[0].predicted_time_us
    with pytest.raises(InvalidRequestError):
        solve(problem, "h100-sxm", SolveOptions(kernel="flex", parameter_pins={"tf32": 2}))
    fp16 = problem.model_copy(update={"dtype": DType.FP16})
    assert (
        "tf32" not in solve(fp16, "h100-sxm", SolveOptions(kernel="flex")).candidates[0].parameters
    )
