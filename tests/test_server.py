"""The gRPC server, tested against real servers on free loopback ports (no mocks).

Every RPC and error code through the generated stub; health checking and reflection through
their own stubs; TLS and mutual TLS with certificates made here; and `tilesolve-server` as a
process: SIGTERM with calls in flight loses none of them, and each call leaves one log line.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tilesolve import wire
from tilesolve.server.cache import ENTRY_OVERHEAD_BYTES, LruCache, request_key
from tilesolve.server.config import ServerConfig
from tilesolve.solver import AttentionProblem, get_hardware, solve
from tilesolve.solver.hardware import AscendCore
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from contracts import REQUIRED_HARDWARE_NAMES
from harness import ServerProcess
from loopback import address_of, call_error, serving, violations
from pki import Pki, make_pki

SERVICE = "tilesolve.v1.TileSolveService"


def request(
    hardware: str = "a100", options: pb.SolveOptions | None = None, **problem: int
) -> pb.SolveRequest:
    fields = {"seq_len": 4096, "head_dim": 128, **problem}
    return pb.SolveRequest(
        hardware=pb.HardwareRef(name=hardware),
        problem=pb.AttentionProblem(**fields),
        options=options,
    )


# ---- Solve -------------------------------------------------------------------------------


def test_solve_matches_the_in_process_solver(stub: pb_grpc.TileSolveServiceStub) -> None:
    response = stub.Solve(request("h100-sxm", batch=2, heads=16, causal=True), timeout=30)
    answer, _ = wire.answer_from_proto(response)
    local = solve(
        AttentionProblem(batch=2, heads=16, seq_len=4096, head_dim=128, causal=True), "h100-sxm"
    )
    assert response.status == pb.SOLVE_STATUS_OPTIMAL and response.proven_optimal
    assert answer.candidates == local.candidates
    assert answer.funnel == local.funnel
    assert response.hardware == "h100-sxm"
    assert response.model_version == local.model_version
    assert response.catalog_version == local.catalog_version


def test_a_repeated_solve_is_a_cache_hit_with_the_same_answer(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    first = stub.Solve(request(seq_len=3000, head_dim=64), timeout=30)
    # An alias and another time limit share the answer: neither decides a proven ranking.
    again = stub.Solve(
        request("A100-SXM4-80GB", pb.SolveOptions(time_limit_s=20), seq_len=3000, head_dim=64),
        timeout=30,
    )
    assert not first.cache_hit and again.cache_hit
    assert list(again.candidates) == list(first.candidates)
    assert again.solve_ms == first.solve_ms
    assert again.options.time_limit_s == 20  # the echo is this request's


def test_a_cold_solve_is_decoded_once_and_its_answer_encoded_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The event loop decodes and validates the request, the solver gets it typed, the answer
    is encoded once; a repeat decodes and encodes no answer: it is the very bytes first sent,
    with `cache_hit` and its own time limit appended (issue 20)."""
    calls: Counter[str] = Counter()

    def counting(name: str) -> Callable[..., Any]:
        real = getattr(wire, name)

        def counted(*args: Any) -> Any:
            calls[name] += 1
            return real(*args)

        return counted

    for name in ("solve_request_from_proto", "answer_to_proto"):
        monkeypatch.setattr(wire, name, counting(name))
    with serving(workers=1) as server, grpc.insecure_channel(address_of(server)) as channel:
        solve_bytes = channel.unary_unary(
            f"/{SERVICE}/Solve",
            request_serializer=pb.SolveRequest.SerializeToString,
            response_deserializer=None,  # the response's bytes as sent
        )
        cold = solve_bytes(request(seq_len=3001, head_dim=64), timeout=30)
        assert calls == {"solve_request_from_proto": 1, "answer_to_proto": 1}
        hit = solve_bytes(
            request(options=pb.SolveOptions(time_limit_s=20), seq_len=3001, head_dim=64),
            timeout=30,
        )
        assert calls == {"solve_request_from_proto": 1, "answer_to_proto": 1}
    assert hit.startswith(cold)
    expected = pb.SolveResponse.FromString(cold)
    assert not expected.cache_hit and expected.options.time_limit_s == 10
    expected.cache_hit = True
    expected.options.time_limit_s = 20
    assert pb.SolveResponse.FromString(hit) == expected


def test_infeasible_is_an_answer_with_its_explanation(stub: pb_grpc.TileSolveServiceStub) -> None:
    response = stub.Solve(request(options=pb.SolveOptions(max_smem=100)), timeout=30)
    assert response.status == pb.SOLVE_STATUS_INFEASIBLE
    assert not response.candidates
    assert "max_smem" in response.infeasibility.conflicting_constraints
    assert response.infeasibility.explanation and response.infeasibility.nearest_relaxation


def test_inline_hardware_spec_is_solved(stub: pb_grpc.TileSolveServiceStub) -> None:
    spec = wire.spec_to_proto(get_hardware("a100").model_copy(update={"name": "my-a100"}))
    response = stub.Solve(
        pb.SolveRequest(
            hardware=pb.HardwareRef(spec=spec),
            problem=pb.AttentionProblem(seq_len=4096, head_dim=128),
        ),
        timeout=30,
    )
    assert response.hardware == "my-a100"
    assert response.candidates[0].block_m > 0


@pytest.mark.parametrize(
    ("problem", "field"),
    [
        (pb.AttentionProblem(seq_len=4096, head_dim=0), "problem.head_dim"),
        (pb.AttentionProblem(seq_len=4096, head_dim=128, dtype=99), "problem.dtype"),  # type: ignore[arg-type]
        (pb.AttentionProblem(seq_len=-1, head_dim=128), "problem.seq_len"),
        (pb.AttentionProblem(seq_len=1 << 40, head_dim=128), "problem.seq_len"),
        (pb.AttentionProblem(seq_len=4096, head_dim=100), "problem.head_dim"),  # fa2's rule
        (pb.AttentionProblem(seq_len=4096, head_dim=128, phase=pb.PHASE_DECODE), "problem.seq_len"),
        (pb.AttentionProblem(head_dim=128), "problem.seq_len"),  # required
    ],
)
def test_invalid_problems_name_the_field(
    stub: pb_grpc.TileSolveServiceStub, problem: pb.AttentionProblem, field: str
) -> None:
    error = call_error(
        stub.Solve, pb.SolveRequest(hardware=pb.HardwareRef(name="a100"), problem=problem)
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in violations(error), violations(error)


@pytest.mark.parametrize("seconds", [5e-324, 1e-9, 0.000999, 0.0])
def test_a_tiny_or_denormal_time_limit_is_refused_naming_it(
    stub: pb_grpc.TileSolveServiceStub, seconds: float
) -> None:
    """time_limit_s below 1 ms (a denormal, a nanosecond, just under, zero) is INVALID_ARGUMENT
    naming the field (issue 22: they were accepted); 1 ms itself is accepted (an answer, or
    DEADLINE_EXCEEDED when CP-SAT finds nothing that soon: a documented outcome)."""
    error = call_error(stub.Solve, request(options=pb.SolveOptions(time_limit_s=seconds)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "options.time_limit_s" in violations(error), violations(error)
    try:
        answer = stub.Solve(request(options=pb.SolveOptions(time_limit_s=0.001)))
    except grpc.RpcError as cut_short:
        assert cut_short.code() == grpc.StatusCode.DEADLINE_EXCEEDED, cut_short
    else:
        assert answer.options.time_limit_s == 0.001


def test_kv_heads_must_divide_heads(stub: pb_grpc.TileSolveServiceStub) -> None:
    error = call_error(stub.Solve, request(heads=8, kv_heads=3))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(error)
    assert any(f.startswith("problem") and "kv_heads" in d for f, d in found.items()), found


def test_problem_size_cap_is_a_violation_of_the_problem(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    error = call_error(stub.Solve, request(batch=1000, seq_len=16_000_000))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(error)
    assert list(found) == ["problem"], found  # not problem.batch: no one field is too large
    product = "batch x heads x seq_len x seq_len_kv = 1000 x 1 x 16000000 x 16000000"
    assert found["problem"].startswith(product)  # without pydantic's "Value error, "
    assert "2^50" in found["problem"] and "typo, not a workload" in found["problem"]
    # a rule about one of the fields still names it
    found = violations(call_error(stub.Solve, request(heads=8, kv_heads=3)))
    assert list(found) == ["problem.kv_heads"], found


def test_missing_parts_and_bad_options_are_reported_together(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    error = call_error(stub.Solve, pb.SolveRequest(options=pb.SolveOptions(top_k=0)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert {"problem", "hardware", "options.top_k"} <= set(violations(error))


def test_family_violations_get_request_paths(stub: pb_grpc.TileSolveServiceStub) -> None:
    error = call_error(stub.Solve, request("t4", pb.SolveOptions(kernel="fa2")))
    assert "options.kernel" in violations(error)
    # The deprecated enum still names a family for old clients.
    legacy = call_error(
        stub.Solve, request("t4", pb.SolveOptions(kernel_enum=pb.KERNEL_FAMILY_FA2))
    )
    assert "options.kernel" in violations(legacy)
    error = call_error(stub.Solve, request("ascend-910", pb.SolveOptions(kernel="fa2")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "options.kernel" in violations(error)


def test_inline_spec_with_nonsense_numbers(stub: pb_grpc.TileSolveServiceStub) -> None:
    spec = wire.spec_to_proto(get_hardware("a100"))
    spec.sm.regs_per_sm = -5
    spec.memory.dram_bandwidth_gb_per_s = float("nan")
    error = call_error(
        stub.Solve,
        pb.SolveRequest(
            hardware=pb.HardwareRef(spec=spec),
            problem=pb.AttentionProblem(seq_len=4096, head_dim=128),
        ),
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(error)
    assert "hardware.spec.sm.regs_per_sm" in found, found
    assert all(f.startswith("hardware.spec.") for f in found), found


def test_unknown_hardware_is_not_found_listing_the_names(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    error = call_error(stub.Solve, request("nope"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "'nope'" in error.details() and "a100-80gb" in error.details()
    assert "hardware" in violations(error)


def test_short_deadlines_end_in_a_documented_outcome(
    channel: grpc.Channel, stub: pb_grpc.TileSolveServiceStub
) -> None:
    """DEADLINE_EXCEEDED, or an answer that says whether it is proven; never a hang."""
    slow = request(options=pb.SolveOptions(kernel="triton", top_k=100), seq_len=5000)
    error = call_error(stub.Solve, slow, timeout=0.001)
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED

    started = time.monotonic()
    try:
        cut = stub.Solve(slow, timeout=0.4)
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    else:
        assert cut.status in (pb.SOLVE_STATUS_FEASIBLE, pb.SOLVE_STATUS_OPTIMAL)
        assert cut.proven_optimal == (cut.status == pb.SOLVE_STATUS_OPTIMAL)
        if cut.status == pb.SOLVE_STATUS_FEASIBLE:  # unproven answers are never cached
            try:
                again = stub.Solve(slow, timeout=0.4)
            except grpc.RpcError as exc:  # a loaded machine may not find a rank this time
                assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            else:
                assert not again.cache_hit
    assert time.monotonic() - started < 5
    # The server keeps serving.
    assert stub.Solve(request(), timeout=30).candidates
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert health.status == health_pb2.HealthCheckResponse.SERVING


# ---- SolveBatch --------------------------------------------------------------------------


def test_batch_answers_in_order_and_one_bad_problem_does_not_fail_it(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    requests = [
        request(seq_len=1024),
        request(head_dim=0),
        request("nope"),
        request(seq_len=2048, head_dim=64),
    ]
    response = stub.SolveBatch(pb.SolveBatchRequest(requests=requests), timeout=60)
    codes = [item.code for item in response.items]
    assert codes == [0, grpc.StatusCode.INVALID_ARGUMENT.value[0], 5, 0]
    bad = response.items[1]
    assert [v.field for v in bad.field_violations] == ["problem.head_dim"]
    assert bad.message and not bad.HasField("response")
    assert "a100-80gb" in response.items[2].message
    assert response.items[0].response.problem.seq_len == 1024
    assert response.items[3].response.problem.head_dim == 64


def test_batch_over_the_limit_is_resource_exhausted_naming_it() -> None:
    with (
        serving(max_batch_size=50, workers=2) as server,
        grpc.insecure_channel(address_of(server)) as ch,
    ):
        small = pb_grpc.TileSolveServiceStub(ch)
        assert small.ListHardware(pb.ListHardwareRequest()).max_batch_size == 50
        error = call_error(
            small.SolveBatch, pb.SolveBatchRequest(requests=[request()] * 51), timeout=30
        )
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "50" in error.details() and "51" in error.details()
        # 50 identical problems are fine (and all but the first come from the cache).
        full = small.SolveBatch(pb.SolveBatchRequest(requests=[request()] * 50), timeout=60)
        assert [item.code for item in full.items] == [0] * 50
        assert sum(item.response.cache_hit for item in full.items) >= 49


# ---- hardware, memory, occupancy ---------------------------------------------------------


def test_sm_names_resolve_only_when_unambiguous(stub: pb_grpc.TileSolveServiceStub) -> None:
    t4 = stub.GetHardware(pb.GetHardwareRequest(name="sm75"), timeout=10)
    assert t4.hardware.name == "t4"
    error = call_error(stub.GetHardware, pb.GetHardwareRequest(name="sm80"), timeout=10)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(error)
    assert list(found) == ["name"] and "a100-40gb and a100-80gb" in found["name"], found
    error = call_error(stub.Solve, request("sm90"), timeout=30)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(error)
    assert list(found) == ["hardware"], found
    assert "h100-pcie, h100-sxm and h200" in found["hardware"]


def test_list_hardware(stub: pb_grpc.TileSolveServiceStub) -> None:
    response = stub.ListHardware(pb.ListHardwareRequest(), timeout=10)
    by_name = {h.name: h for h in response.hardware}
    assert set(REQUIRED_HARDWARE_NAMES) <= set(by_name)
    assert by_name["a100-80gb"].compute_units == 108
    assert by_name["a100-80gb"].compute_capability == "8.0"
    assert (
        by_name["ascend-910b"].compute_units > 0 and not by_name["ascend-910b"].compute_capability
    )
    assert response.max_batch_size == ServerConfig().max_batch_size == 1000
    assert response.model_version and response.catalog_version


def test_get_hardware(stub: pb_grpc.TileSolveServiceStub) -> None:
    response = stub.GetHardware(pb.GetHardwareRequest(name="a100"), timeout=10)
    assert response.hardware.name == "a100-80gb"
    assert response.hardware.sm.regs_per_sm == 65536
    assert response.hardware.sources
    error = call_error(stub.GetHardware, pb.GetHardwareRequest(name="nope"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "h100-sxm" in error.details() and "name" in violations(error)


@pytest.mark.parametrize("name", ["ascend-910b", "ascend-910", "ascend-310p3"])
def test_get_hardware_round_trips_an_ascend_device(
    stub: pb_grpc.TileSolveServiceStub, name: str
) -> None:
    response = stub.GetHardware(pb.GetHardwareRequest(name=name), timeout=10)
    core = response.hardware.ascend
    assert core.core_layout in ("split", "coupled") and core.aic_count > 0
    # Fields without a figure stay absent on the wire instead of reading as 0 (the coupled
    # parts exchange on chip and have no L2 write rate).
    assert core.HasField("l2_write_bytes_per_cycle") == (name == "ascend-910b")
    assert wire.spec_from_proto(response.hardware) == get_hardware(name)


def test_ascend_core_message_has_the_schema_fields() -> None:
    """The wire maps AscendCore through JSON with proto field names = pydantic field names."""
    proto_fields = [f.name for f in pb.AscendCore.DESCRIPTOR.fields]
    assert proto_fields == list(AscendCore.model_fields)


def test_inline_ascend_spec_missing_fields_names_them(stub: pb_grpc.TileSolveServiceStub) -> None:
    spec = wire.spec_to_proto(get_hardware("ascend-910b"))
    for field in ("core_layout", "aic_count", "cube_clock_mhz"):
        spec.ascend.ClearField(field)  # type: ignore[arg-type]
    error = call_error(
        stub.Solve,
        pb.SolveRequest(
            hardware=pb.HardwareRef(spec=spec),
            problem=pb.AttentionProblem(seq_len=4096, head_dim=128),
        ),
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(error)
    for field in ("core_layout", "aic_count", "cube_clock_mhz"):
        assert f"hardware.spec.ascend.{field}" in found, found


def test_estimate_memory(stub: pb_grpc.TileSolveServiceStub) -> None:
    response = stub.EstimateMemory(
        pb.EstimateMemoryRequest(
            problem=pb.AttentionProblem(seq_len=4096, head_dim=128), block_m=128, block_n=128
        ),
        timeout=10,
    )
    assert response.score_matrix_bytes == 32 * 1024 * 1024
    assert (response.tiles_1d, response.score_tiles) == (32, 1024)
    assert response.working_set_bytes == 160 * 1024
    assert not response.HasField("roofline")
    error = call_error(stub.EstimateMemory, pb.EstimateMemoryRequest())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert {"problem", "block_m", "block_n"} <= set(violations(error))


def test_occupancy(stub: pb_grpc.TileSolveServiceStub) -> None:
    response = stub.Occupancy(
        pb.OccupancyRequest(
            hardware=pb.HardwareRef(name="a100"), threads=128, regs=96, smem_bytes=49152
        ),
        timeout=10,
    )
    assert response.blocks_per_sm == 3
    assert response.limiter == "shared_memory"


def test_occupancy_rejects_bad_launches(stub: pb_grpc.TileSolveServiceStub) -> None:
    error = call_error(
        stub.Occupancy,
        pb.OccupancyRequest(
            hardware=pb.HardwareRef(name="a100"),
            threads=0,
            regs=300,
            smem_bytes=-1,
            carveout_percent=101,
        ),
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert set(violations(error)) == {"threads", "regs", "smem_bytes", "carveout_percent"}
    error = call_error(
        stub.Occupancy,
        pb.OccupancyRequest(hardware=pb.HardwareRef(name="ascend-910"), threads=128),
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "CUDA" in violations(error)["hardware"]
    error = call_error(stub.Occupancy, pb.OccupancyRequest(threads=128))
    assert "hardware" in violations(error)


# ---- health and reflection ---------------------------------------------------------------


@pytest.mark.parametrize("service", ["", SERVICE])
def test_health_is_serving(channel: grpc.Channel, service: str) -> None:
    response = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=service), timeout=5
    )
    assert response.status == health_pb2.HealthCheckResponse.SERVING


def _reflect(channel: grpc.Channel, **query: str) -> reflection_pb2.ServerReflectionResponse:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(**query)]), timeout=10
    )
    return next(iter(responses))


def test_reflection_lists_the_services_and_serves_the_descriptor(channel: grpc.Channel) -> None:
    listed = _reflect(channel, list_services="")
    names = {s.name for s in listed.list_services_response.service}
    assert {SERVICE, "grpc.health.v1.Health"} <= names

    found = _reflect(channel, file_containing_symbol=SERVICE)
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in found.file_descriptor_response.file_descriptor_proto
    ]
    ours = next(f for f in files if f.package == "tilesolve.v1")
    methods = {m.name for s in ours.service for m in s.method}
    assert {"Solve", "SolveBatch", "ListHardware", "GetHardware", "EstimateMemory"} <= methods


# ---- TLS and mutual TLS ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost, and a client certificate."""
    return make_pki(tmp_path_factory.mktemp("pki"))


def _list_hardware_over_tls(port: int, credentials: grpc.ChannelCredentials) -> int:
    with grpc.secure_channel(f"127.0.0.1:{port}", credentials) as ch:
        response = pb_grpc.TileSolveServiceStub(ch).ListHardware(
            pb.ListHardwareRequest(), timeout=10
        )
        return len(response.hardware)


def test_tls_server_accepts_a_tls_client(pki: Pki) -> None:
    with serving(workers=2, tls_cert=pki.server_cert, tls_key=pki.server_key) as server:
        trusting = grpc.ssl_channel_credentials(root_certificates=pki.ca)
        assert _list_hardware_over_tls(server.port, trusting) > 0
        with grpc.insecure_channel(address_of(server)) as plain:
            error = call_error(
                pb_grpc.TileSolveServiceStub(plain).ListHardware,
                pb.ListHardwareRequest(),
                timeout=5,
            )
            assert error.code() == grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_requires_a_client_certificate(pki: Pki) -> None:
    with serving(
        workers=2, tls_cert=pki.server_cert, tls_key=pki.server_key, tls_client_ca=pki.ca_file
    ) as server:
        anonymous = grpc.ssl_channel_credentials(root_certificates=pki.ca)
        with pytest.raises(grpc.RpcError) as caught:
            _list_hardware_over_tls(server.port, anonymous)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        identified = grpc.ssl_channel_credentials(
            root_certificates=pki.ca,
            private_key=pki.client_key,
            certificate_chain=pki.client_cert,
        )
        assert _list_hardware_over_tls(server.port, identified) > 0


def test_a_key_that_is_not_the_certificates_is_named(pki: Pki) -> None:
    """A server key that does not match its certificate exits 2 naming both files (gRPC's own
    words were "Failed to bind to address", exit 1: issue 22); so does a file that is not PEM."""
    cases = {
        "mismatch": (pki.server_cert, pki.client_key_file, "is not the private key of"),
        "not PEM": (Path(__file__), pki.server_key, "not a usable PEM"),
    }
    for cert, key, words in cases.values():
        result = subprocess.run(
            [sys.executable, "-m", "tilesolve.server.main", "--port", "0",
             "--tls-cert", str(cert), "--tls-key", str(key)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert words in lines[-1] and str(key) in lines[-1], lines
        assert "bind" not in result.stderr
    with pytest.raises(ValueError, match="is not the private key of"):
        ServerConfig(tls_cert=pki.server_cert, tls_key=pki.client_key_file).check()


# ---- the process: graceful shutdown and structured logs ----------------------------------


def test_sigterm_finishes_calls_in_flight_then_exits_0() -> None:
    server = ServerProcess("--workers", "2", "--grace", "20", "--drain-delay", "0")
    try:
        target = f"127.0.0.1:{server.port}"
        with grpc.insecure_channel(target) as ch:
            grpc.channel_ready_future(ch).result(timeout=10)
            stub = pb_grpc.TileSolveServiceStub(ch)
            outcomes: list[tuple[str, float]] = []

            def one(seq_len: int) -> None:
                # heavy enough to be in flight at the signal: triton against a longer K/V
                # (5,000 configurations with split-KV), 100 ranks
                triton = pb.SolveOptions(kernel="triton", top_k=100)
                longer = {"seq_len": seq_len, "seq_len_kv": 4 * seq_len}
                try:
                    response = stub.Solve(request(options=triton, **longer), timeout=60)
                    outcomes.append(("OK" if response.candidates else "EMPTY", time.monotonic()))
                except grpc.RpcError as exc:
                    outcomes.append((exc.code().name, time.monotonic()))

            threads = [threading.Thread(target=one, args=(4096 + 64 * i,)) for i in range(4)]
            for thread in threads:
                thread.start()
            time.sleep(0.1)
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            for thread in threads:
                thread.join(timeout=60)
        assert server.proc.wait(timeout=30) == 0
        assert [code for code, _ in outcomes] == ["OK"] * 4
        assert max(done for _, done in outcomes) > signalled, "no call was in flight"

        with grpc.insecure_channel(target) as ch:
            error = call_error(
                pb_grpc.TileSolveServiceStub(ch).ListHardware, pb.ListHardwareRequest(), timeout=5
            )
            assert error.code() == grpc.StatusCode.UNAVAILABLE

        time.sleep(0.1)  # the reader thread drains the last lines
        calls = [line for line in server.lines if "rpc method=" in line]
        assert len(calls) == 4, server.lines
        for line in calls:
            assert re.search(
                r"method=Solve code=OK latency_ms=\d+\.\d+ cache_hit=false peer=", line
            )
    finally:
        server.stop()


def test_one_log_line_per_call_also_for_errors() -> None:
    server = ServerProcess("--workers", "1", "--drain-delay", "0")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            stub = pb_grpc.TileSolveServiceStub(ch)
            stub.Solve(request(seq_len=512), timeout=30)
            stub.Solve(request(seq_len=512), timeout=30)
            call_error(stub.Solve, request(head_dim=0), timeout=30)
            call_error(stub.EstimateMemory, pb.EstimateMemoryRequest(), timeout=30)
        server.proc.send_signal(signal.SIGINT)
        assert server.proc.wait(timeout=30) == 0, server.lines
        time.sleep(0.1)
        calls = [line for line in server.lines if "rpc method=" in line]
        expected = [
            ("Solve", "OK", "false"),
            ("Solve", "OK", "true"),
            ("Solve", "INVALID_ARGUMENT", "-"),
            ("EstimateMemory", "INVALID_ARGUMENT", "-"),
        ]
        assert len(calls) == len(expected), server.lines
        for line, (method, code, hit) in zip(calls, expected, strict=True):
            pattern = rf"method={method} code={code} latency_ms=\d+\.\d+ cache_hit={hit} peer=\S+"
            assert re.search(pattern, line), line
    finally:
        server.stop()


@pytest.mark.parametrize(
    "args",
    [
        ["--port", "70000"],
        ["--workers", "-1"],
        ["--drain-delay", "nan"],
        ["--max-batch-size", "16384", "--max-response-bytes", "65536"],
        ["--tls-cert", __file__],
        ["--tls-client-ca", __file__],
        ["--tls-cert", "/no/such/file", "--tls-key", "/no/such/file"],
    ],
)
def test_bad_options_exit_2(args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tilesolve.server.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "error:" in result.stderr


@pytest.mark.parametrize("busy", [True, False])
def test_an_address_that_cannot_be_listened_on_is_one_line_and_exit_1(busy: bool) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        # busy: the port another process listens on; else a host that is not this machine's
        host = "127.0.0.1" if busy else "192.0.2.1"  # TEST-NET-1: never a local address
        result = subprocess.run(
            [sys.executable, "-m", "tilesolve.server.main", "--host", host, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no gRPC log, no traceback
    assert lines[0].startswith(f"tilesolve-server: error: cannot listen on {host}:{port}: ")
    if busy:
        assert "already in use" in lines[0]
    else:
        assert "not an address of this machine" in lines[0]
    assert "GRPC_VERBOSITY" not in result.stderr


def test_help_documents_the_exit_codes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tilesolve.server.main", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = " ".join(result.stdout.split())
    assert "1 cannot listen on --host:--port (the port is already in use" in text
    assert "2 invalid options" in text


def test_lru_cache_is_capped_in_bytes_and_evicts_the_least_recently_used() -> None:
    entry = 1 + 100 + ENTRY_OVERHEAD_BYTES  # a one-byte key and a 100-byte value
    cache = LruCache(4 * entry)
    for key in (b"a", b"b", b"c", b"d"):
        cache.put(key, key * 100)
    assert cache.get(b"a") == b"a" * 100  # now b is the least recently used
    cache.put(b"e", b"e" * 100)
    assert cache.get(b"b") is None and cache.get(b"e") == b"e" * 100 and len(cache) == 4
    assert cache.nbytes == 4 * entry and cache.evictions == 1
    assert (cache.hits, cache.misses) == (2, 1)
    cache.put(b"e", b"x" * 10)  # replacing an entry counts its new size only
    assert cache.nbytes == 3 * entry + 1 + 10 + ENTRY_OVERHEAD_BYTES
    cache.put(b"f", b"y" * entry)  # more than a quarter of the cap: not kept
    assert cache.get(b"f") is None and len(cache) == 4
    disabled = LruCache(0)
    disabled.put(b"a", b"1")
    assert disabled.get(b"a") is None and len(disabled) == 0


def test_cache_key_covers_what_decides_the_answer_and_nothing_else() -> None:
    base = request()
    key = request_key(base)
    alias = request("A100-SXM4-80GB", pb.SolveOptions(time_limit_s=1))
    assert key == request_key(alias)
    padded = pb.SolveRequest.FromString(base.SerializeToString() + b"\xfa\x3e\x03abc")
    assert padded.ByteSize() > base.ByteSize()  # it kept the unknown field 999 ...
    assert request_key(padded) == key  # ... which is not part of the key
    assert key != request_key(request("a100-40gb"))
    assert key != request_key(request(options=pb.SolveOptions(top_k=4)))
    assert key != request_key(request(causal=True))
    inline = pb.SolveRequest(
        hardware=pb.HardwareRef(spec=wire.spec_to_proto(get_hardware("a100"))),
        problem=base.problem,
    )
    assert key != request_key(inline)  # inline vs catalog


def test_ten_thousand_problems_are_refused_and_the_server_keeps_serving(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    huge = pb.SolveBatchRequest(requests=[request()] * 10_000)
    error = call_error(stub.SolveBatch, huge, timeout=30)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "1000" in error.details() and "10000" in error.details()
    assert stub.Solve(request(), timeout=30).status == pb.SOLVE_STATUS_OPTIMAL


def test_garbage_bytes_are_invalid_argument_and_nothing_crashes(
    channel: grpc.Channel, stub: pb_grpc.TileSolveServiceStub
) -> None:
    import random

    raw_solve = channel.unary_unary("/tilesolve.v1.TileSolveService/Solve")
    rng = random.Random(3)
    for size in (1, 7, 64, 1000):
        garbage = bytes(rng.randrange(256) for _ in range(size))
        try:
            raw_solve(garbage, timeout=30)
        except grpc.RpcError as error:
            assert error.code() in (grpc.StatusCode.INVALID_ARGUMENT,), error
    assert stub.Solve(request(), timeout=30).status == pb.SOLVE_STATUS_OPTIMAL
