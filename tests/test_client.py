"""The Python client and the remote CLI against a real tilesolve server.

Each server is started in the test process on a free loopback port (`loopback.serving`; the
module's plaintext one is conftest's `server`), plaintext, TLS and mutual TLS, with
certificates made here. Nothing is mocked: answers are
compared with the in-process solver and the in-process CLI, which they must equal except for
`solve_ms` (the server's own time).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tilesolve import wire
from tilesolve.client.cli import ErrorLine, server_violations
from tilesolve.client.remote import (
    DEFAULT_BACKOFF_S,
    DEFAULT_MAX_BACKOFF_S,
    DEFAULT_RETRIES,
    AsyncTileSolveClient,
    DeadlineError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    TileSolveClient,
    TilesolveRpcError,
    UnavailableError,
    service_config,
)
from tilesolve.server.app import TileSolveServer
from tilesolve.solver import (
    CATALOG_VERSION,
    AttentionProblem,
    SolveAnswer,
    SolveOptions,
    get_hardware,
    occupancy,
    solve,
)
from tilesolve.v1 import tilesolve_pb2 as pb

import loopback
from command_line import run as cli
from contracts import REQUIRED_HARDWARE_NAMES
from harness import ServerProcess, free_port
from loopback import address_of
from pki import Pki, make_pki

MAX_BATCH = 8
QUICK_START = ["solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"]
OCCUPANCY = ["occupancy", "--hardware", "a100", "--threads", "128", "--regs", "96"]


@pytest.fixture(scope="module")
def server_settings() -> dict[str, Any]:
    """The module's server (conftest's `server`, `target`) takes batches of MAX_BATCH."""
    return {"max_batch_size": MAX_BATCH}


@pytest.fixture
def client(target: str) -> Iterator[TileSolveClient]:
    with TileSolveClient(target, timeout_s=20) as c:
        yield c


def _without_solve_ms(answer: SolveAnswer) -> dict[str, Any]:
    return answer.model_dump(mode="json", exclude={"solve_ms"})


# ---- the synchronous client ---------------------------------------------------------------


def test_solve_equals_in_process(client: TileSolveClient) -> None:
    problem = AttentionProblem(seq_len=4096, head_dim=128, causal=True, heads=16, kv_heads=4)
    options = SolveOptions(top_k=4)
    remote = client.solve(problem, "h100", options)
    local = solve(problem, "h100", options)
    assert remote.candidates == local.candidates
    assert _without_solve_ms(remote) == _without_solve_ms(local)
    assert remote.solve_ms > 0


def test_infeasible_is_an_answer(client: TileSolveClient) -> None:
    problem = AttentionProblem(seq_len=4096, head_dim=128)
    options = SolveOptions(max_smem=4096)
    remote = client.solve(problem, "a100", options)
    assert remote.status.value == "infeasible"
    assert _without_solve_ms(remote) == _without_solve_ms(solve(problem, "a100", options))


def test_inline_hardware_description(client: TileSolveClient) -> None:
    spec = get_hardware("a100").model_copy(update={"name": "my-chip", "aliases": ()})
    problem = AttentionProblem(seq_len=2048, head_dim=64)
    remote = client.solve(problem, spec)
    assert remote.hardware == "my-chip"
    assert remote.candidates == solve(problem, spec).candidates


def test_inline_hardware_description_with_a_zero_field(client: TileSolveClient) -> None:
    problem = AttentionProblem(seq_len=1024, head_dim=64)
    assert client.solve(problem, get_hardware("t4")).candidates == solve(problem, "t4").candidates


def test_repeat_is_a_cache_hit(client: TileSolveClient) -> None:
    problem = AttentionProblem(seq_len=3072, head_dim=96, batch=3)  # asked nowhere else
    first, hit = client.solve_with_meta(problem, "a100-40gb")
    assert not hit and not client.last_cache_hit
    again, hit = client.solve_with_meta(problem, "a100-40gb")
    assert hit and client.last_cache_hit
    assert again.candidates == first.candidates
    client.solve(problem, "a100-40gb")
    assert client.last_cache_hit


def test_batch_with_a_bad_problem_in_the_middle(client: TileSolveClient) -> None:
    good = AttentionProblem(seq_len=1024, head_dim=64)
    bad = AttentionProblem.model_construct(seq_len=1024, head_dim=0)  # skips local validation
    results = client.solve_batch(
        [
            (good, "a100", None),
            (bad, "a100", None),
            (good, "h100", SolveOptions(top_k=2)),
            (good, "no-such-chip", None),
        ]
    )
    assert len(results) == 4
    first, middle, third, last = results
    assert isinstance(first, SolveAnswer) and first.candidates == solve(good, "a100").candidates
    assert isinstance(middle, InvalidArgumentError)
    assert middle.code is grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in middle.violations] == ["problem.head_dim"]
    assert isinstance(third, SolveAnswer) and len(third.candidates) == 2
    assert isinstance(last, NotFoundError) and "h100-sxm" in last.message


def test_batch_over_the_limit_is_resource_exhausted(client: TileSolveClient) -> None:
    problem = AttentionProblem(seq_len=1024, head_dim=64)
    with pytest.raises(ResourceExhaustedError) as caught:
        client.solve_batch([(problem, "a100", None)] * (MAX_BATCH + 1))
    assert str(MAX_BATCH) in caught.value.message


def test_hardware_catalog(client: TileSolveClient) -> None:
    catalog = client.hardware_catalog()
    names = {h.name for h in catalog.hardware}
    assert set(REQUIRED_HARDWARE_NAMES) <= names
    assert catalog.catalog_version == CATALOG_VERSION
    assert catalog.max_batch_size == MAX_BATCH
    assert {h.name for h in client.hardware()} == names
    a100 = next(h for h in catalog.hardware if h.name == "a100-80gb")
    assert a100.compute_capability == "8.0" and a100.compute_units == 108 and "a100" in a100.aliases
    ascend = next(h for h in catalog.hardware if h.name == "ascend-910b")
    assert ascend.compute_capability is None and ascend.arch == "ascend"


def test_hardware_spec_resolves_aliases(client: TileSolveClient) -> None:
    spec = client.hardware_spec("h100")
    assert spec.name == "h100-sxm"
    assert spec == get_hardware("h100")
    assert client.hardware_spec("t4") == get_hardware("t4")  # a zero field (reserved smem)
    # Ascend: optional rates absent (310P3) or present (910B), a repeated string, a bool.
    for name in ("910b2", "310p"):
        assert client.hardware_spec(name) == get_hardware(name)


def test_occupancy(client: TileSolveClient) -> None:
    occ = client.occupancy("a100", 128, 96, 49152)
    assert occ.blocks_per_sm == 3
    sm = get_hardware("a100").sm
    assert sm is not None
    assert occ == occupancy(sm, 128, 96, 49152)
    assert client.occupancy("a100", 128, 32, 0, carveout_percent=0) == occupancy(sm, 128, 32, 0, 0)


def test_invalid_problem_is_invalid_argument_with_violations(client: TileSolveClient) -> None:
    bad = AttentionProblem.model_construct(seq_len=0, head_dim=0)
    with pytest.raises(InvalidArgumentError) as caught:
        client.solve(bad, "a100")
    error = caught.value
    assert error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert {v.field for v in error.violations} == {"problem.head_dim", "problem.seq_len"}
    assert isinstance(error, TilesolveRpcError)


def test_family_rule_is_invalid_argument(client: TileSolveClient) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        client.solve(
            AttentionProblem(seq_len=1024, head_dim=64), "a100", SolveOptions(kernel="fa3")
        )
    assert [v.field for v in caught.value.violations] == ["options.kernel"]


def test_unknown_hardware_is_not_found(client: TileSolveClient) -> None:
    with pytest.raises(NotFoundError) as caught:
        client.solve(AttentionProblem(seq_len=1024, head_dim=64), "no-such-chip")
    assert "a100-80gb" in caught.value.message
    with pytest.raises(NotFoundError):
        client.hardware_spec("no-such-chip")
    with pytest.raises(NotFoundError):
        client.occupancy("no-such-chip", 128, 32, 0)


def test_short_deadline_is_a_deadline_error(client: TileSolveClient) -> None:
    problem = AttentionProblem(seq_len=5000, head_dim=80, batch=7)  # not cached
    with pytest.raises(DeadlineError) as caught:
        client.solve(problem, "l4", timeout_s=0.001)
    assert caught.value.code is grpc.StatusCode.DEADLINE_EXCEEDED


# ---- waiting and retries -------------------------------------------------------------------


def _get_hardware_server(get: Callable[..., Any]) -> grpc.Server:
    """A gRPC server (unbound, unstarted) whose TileSolveService has GetHardware only."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler = grpc.method_handlers_generic_handler(
        "tilesolve.v1.TileSolveService",
        {
            "GetHardware": grpc.unary_unary_rpc_method_handler(
                get,
                request_deserializer=pb.GetHardwareRequest.FromString,
                response_serializer=pb.GetHardwareResponse.SerializeToString,
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    return server


class Flaky:
    """A TileSolveService that fails GetHardware with `code` `failures` times, then answers;
    it records each attempt's `grpc-previous-rpc-attempts` header (None on the first)."""

    def __init__(self, failures: int, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE):
        self.failures, self.code = failures, code
        self.attempts: list[str | None] = []
        self.times: list[float] = []
        self.server = _get_hardware_server(self._get)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _get(self, request: pb.GetHardwareRequest, context: grpc.ServicerContext) -> Any:
        headers = dict(context.invocation_metadata())
        self.attempts.append(headers.get("grpc-previous-rpc-attempts"))
        self.times.append(time.monotonic())
        if len(self.attempts) <= self.failures:
            context.abort(self.code, f"attempt {len(self.attempts)} fails")
        return pb.GetHardwareResponse(hardware=wire.spec_to_proto(get_hardware(request.name)))


def test_unavailable_is_retried_by_grpc_with_backoff_up_to_five_attempts() -> None:
    flaky = Flaky(failures=3)
    try:
        with TileSolveClient(f"127.0.0.1:{flaky.port}", backoff_s=0.05, timeout_s=20) as c:
            assert c.hardware_spec("a100").name == "a100-80gb"
        assert flaky.attempts == [None, "1", "2", "3"]  # 4 attempts, the last answered
        gaps = [b - a for a, b in itertools.pairwise(flaky.times)]
        assert max(gaps) < 2.0  # jittered backoff: up to 0.05, 0.1, 0.2 s (and the RPC)
    finally:
        flaky.server.stop(0)
    always = Flaky(failures=100)
    try:
        c = TileSolveClient(f"127.0.0.1:{always.port}", backoff_s=0.01, timeout_s=20)
        with c, pytest.raises(UnavailableError) as caught:
            c.hardware_spec("a100")
        assert "attempt 5 fails" in caught.value.message
        assert len(always.attempts) == 5  # gRPC's cap: 1 + DEFAULT_RETRIES
    finally:
        always.server.stop(0)


def test_other_codes_are_not_retried_and_retries_can_be_turned_off() -> None:
    flaky = Flaky(failures=100, code=grpc.StatusCode.NOT_FOUND)
    try:
        c = TileSolveClient(f"127.0.0.1:{flaky.port}", timeout_s=20)
        with c, pytest.raises(NotFoundError):
            c.hardware_spec("a100")
        assert flaky.attempts == [None]
    finally:
        flaky.server.stop(0)
    once = Flaky(failures=1)
    try:
        c = TileSolveClient(f"127.0.0.1:{once.port}", retries=0, timeout_s=20)
        with c, pytest.raises(UnavailableError):
            c.hardware_spec("a100")
        assert once.attempts == [None]
    finally:
        once.server.stop(0)
    with pytest.raises(ValueError, match="retries must be from 0 to 4"):
        TileSolveClient("127.0.0.1:1", retries=5)


def test_the_retry_policy_is_a_grpc_service_config() -> None:
    config = json.loads(service_config(DEFAULT_RETRIES, DEFAULT_BACKOFF_S, DEFAULT_MAX_BACKOFF_S))
    (method,) = config["methodConfig"]
    assert method["name"] == [{"service": "tilesolve.v1.TileSolveService"}]
    assert method["retryPolicy"] == {
        "maxAttempts": 5,
        "initialBackoff": "0.200s",
        "maxBackoff": "2.000s",
        "backoffMultiplier": 2.0,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    assert "retryPolicy" not in json.loads(service_config(0, 0.1, 1))["methodConfig"][0]


def test_an_unreachable_server_is_waited_for_then_unavailable() -> None:
    port = free_port()  # nothing listens there
    with TileSolveClient(f"127.0.0.1:{port}", ready_timeout_s=0.5, timeout_s=10) as c:
        started = time.monotonic()
        with pytest.raises(UnavailableError) as caught:
            c.hardware()
        elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 3
    assert caught.value.code is grpc.StatusCode.UNAVAILABLE
    assert caught.value.target == f"127.0.0.1:{port}"
    assert caught.value.message.startswith("no connection within 0.5 s: failed to connect")
    # The call's own deadline bounds the wait too.
    with TileSolveClient(f"127.0.0.1:{port}", timeout_s=0.3) as c:
        started = time.monotonic()
        with pytest.raises(UnavailableError):
            c.hardware()
        assert time.monotonic() - started < 2
    # Without wait_for_ready a call fails at once (gRPC's retries take well under a second).
    with TileSolveClient(f"127.0.0.1:{port}", wait_for_ready=False, backoff_s=0.01) as c:
        started = time.monotonic()
        with pytest.raises(UnavailableError):
            c.hardware_spec("a100")
        assert time.monotonic() - started < 2


def test_errors_other_than_unavailable_are_not_retried(client: TileSolveClient) -> None:
    with pytest.raises(NotFoundError):
        client.hardware_spec("no-such-chip")


def test_a_call_waits_for_a_server_that_comes_up_late() -> None:
    port = free_port()
    box: dict[str, TileSolveServer] = {}

    def start_later() -> None:
        time.sleep(1.0)
        box["server"] = loopback.start(port=port)

    thread = threading.Thread(target=start_later)
    thread.start()
    try:
        with TileSolveClient(f"127.0.0.1:{port}") as c:  # the defaults
            started = time.monotonic()
            assert c.hardware_spec("a100").name == "a100-80gb"
            assert time.monotonic() - started > 0.5  # it did wait
    finally:
        thread.join()
        if "server" in box:
            box["server"].stop(0)


# ---- the asyncio client -------------------------------------------------------------------


def test_async_client(target: str) -> None:
    problem = AttentionProblem(seq_len=2048, head_dim=128, causal=True)

    async def ask() -> tuple[SolveAnswer, list[Any], Any, Any, TilesolveRpcError]:
        async with AsyncTileSolveClient(target, timeout_s=20) as c:
            answer = await c.solve(problem, "a100")
            batch = await c.solve_batch(
                [
                    (problem, "a100", None),
                    (AttentionProblem.model_construct(seq_len=64, head_dim=0), "a100", None),
                ]
            )
            spec = await c.hardware_spec("4090")
            occ = await c.occupancy("a100", 128, 96, 49152)
            try:
                await c.solve(problem, "no-such-chip")
            except TilesolveRpcError as exc:
                error = exc
            names = {h.name for h in await c.hardware()}
            assert set(REQUIRED_HARDWARE_NAMES) <= names
            return answer, batch, spec, occ, error

    answer, batch, spec, occ, error = asyncio.run(ask())
    assert answer.candidates == solve(problem, "a100").candidates
    assert isinstance(batch[0], SolveAnswer) and isinstance(batch[1], InvalidArgumentError)
    assert spec.name == "rtx-4090"
    assert occ.blocks_per_sm == 3
    assert isinstance(error, NotFoundError)


def test_async_client_waits_then_unavailable() -> None:
    async def ask() -> UnavailableError:
        async with AsyncTileSolveClient(f"127.0.0.1:{free_port()}", ready_timeout_s=0.3) as c:
            with pytest.raises(UnavailableError) as caught:
                await c.hardware()
            return caught.value

    started = time.monotonic()
    error = asyncio.run(ask())
    assert 0.2 < time.monotonic() - started < 3
    assert error.message.startswith("no connection within 0.3 s: ")


# ---- several replicas ----------------------------------------------------------------------


class Replica:
    """A real gRPC server on `host` with the standard health service and a GetHardware that
    answers a100's entry and counts its calls (which replica took a call)."""

    def __init__(self, host: str):
        self.calls = 0
        self.server = _get_hardware_server(self._get)
        # The blocking form of Watch: grpcio-health-checking's non-blocking Watch sends its
        # first answer under the servicer's lock, and a client that closes at that moment
        # (as one refused at once does) deadlocks the server's event thread on that lock.
        self.health = health.HealthServicer(experimental_non_blocking=False)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.serving(True)
        self.port = self.server.add_insecure_port(f"{host}:0")
        self.target = f"{host}:{self.port}"
        self.server.start()

    def serving(self, up: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if up else _NOT_SERVING
        for name in ("", "tilesolve.v1.TileSolveService"):
            self.health.set(name, status)

    def _get(self, request: pb.GetHardwareRequest, context: grpc.ServicerContext) -> Any:
        self.calls += 1
        return pb.GetHardwareResponse(hardware=wire.spec_to_proto(get_hardware(request.name)))


_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _calls_per_replica(client: TileSolveClient, replicas: list[Replica], n: int) -> list[int]:
    before = [r.calls for r in replicas]
    for _ in range(n):
        assert client.hardware_spec("a100").name == "a100-80gb"
    return [r.calls - b for r, b in zip(replicas, before, strict=True)]


def _until(condition: Callable[[], bool], limit_s: float = 5.0) -> None:
    """Try `condition` until it holds (AssertionError after `limit_s`)."""
    end = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < end, "the condition did not hold within the limit"


def test_a_list_balances_round_robin_and_skips_a_replica_not_serving() -> None:
    replicas = [Replica("127.0.0.1"), Replica("127.0.0.2")]
    try:
        with TileSolveClient(",".join(r.target for r in replicas), timeout_s=10) as c:
            assert c.balanced
            # Once both connections are up (the first calls go to the first one ready),
            # round robin alternates.
            _until(lambda: min(_calls_per_replica(c, replicas, 2)) > 0)
            assert _calls_per_replica(c, replicas, 20) == [10, 10]
            replicas[1].serving(False)  # as a draining server does
            # The health service's Watch stream tells the client; until it has, a call may
            # still go to the second replica. Then it takes none.
            _until(lambda: _calls_per_replica(c, replicas, 4)[1] == 0)
            assert _calls_per_replica(c, replicas, 20) == [20, 0]
            replicas[1].serving(True)
            _until(lambda: _calls_per_replica(c, replicas, 4)[1] > 0)
            assert _calls_per_replica(c, replicas, 20) == [10, 10]  # back in the rotation
            # None serving: a call waits for one (ready_timeout_s), then UnavailableError.
            for replica in replicas:
                replica.serving(False)
        with (
            TileSolveClient([r.target for r in replicas], ready_timeout_s=0.5, timeout_s=5) as c,
            pytest.raises(UnavailableError, match=r"no connection within 0\.5 s"),
        ):
            c.hardware_spec("a100")
        # A single address is one server, as before: no health checking, so a server that
        # is not SERVING (still answering while it drains) is still asked.
        with TileSolveClient(replicas[0].target, timeout_s=5) as c:
            assert not c.balanced and c.hardware_spec("a100").name == "a100-80gb"
    finally:
        for replica in replicas:
            replica.server.stop(0)


def test_dns_target_reaches_every_address_of_the_name(server: TileSolveServer) -> None:
    with TileSolveClient(f"dns:///localhost:{server.port}", timeout_s=20) as c:
        assert c.balanced and c.hardware_spec("t4").name == "t4"
        problem = AttentionProblem(seq_len=1024, head_dim=64)
        assert c.solve(problem, "a100").candidates == solve(problem, "a100").candidates

    async def ask() -> str:
        async with AsyncTileSolveClient(f"dns:///localhost:{server.port}") as c:
            return (await c.hardware_spec("t4")).name

    assert asyncio.run(ask()) == "t4"


# ---- TLS and mutual TLS -------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pytest.importorskip("cryptography")
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_server(pki: Pki) -> Iterator[str]:
    """The address of a TLS server."""
    with loopback.serving(tls_cert=pki.server_cert, tls_key=pki.server_key) as running:
        yield address_of(running)


@pytest.fixture(scope="module")
def mtls_server(pki: Pki) -> Iterator[str]:
    """The address of a server that requires client certificates (mutual TLS)."""
    with loopback.serving(
        tls_cert=pki.server_cert, tls_key=pki.server_key, tls_client_ca=pki.ca_file
    ) as running:
        yield address_of(running)


def test_tls_with_the_root_ca(pki: Pki, tls_server: str) -> None:
    with TileSolveClient(tls_server, root_ca=pki.ca) as c:
        assert c.hardware_spec("a100").name == "a100-80gb"
    localhost = "localhost:" + tls_server.rpartition(":")[2]
    with TileSolveClient(
        localhost, tls=True, root_ca=pki.ca, server_name_override="localhost"
    ) as c:
        assert c.occupancy("a100", 128, 96, 49152).blocks_per_sm == 3


def test_tls_without_the_root_ca_fails(tls_server: str) -> None:
    with (
        TileSolveClient(tls_server, tls=True, ready_timeout_s=1) as c,
        pytest.raises(UnavailableError),
    ):
        c.hardware()
    with (
        TileSolveClient(tls_server, ready_timeout_s=1) as c,  # plaintext to TLS
        pytest.raises(UnavailableError),
    ):
        c.hardware()


def test_mutual_tls(pki: Pki, mtls_server: str) -> None:
    with TileSolveClient(
        mtls_server, root_ca=pki.ca, client_cert=pki.client_cert, client_key=pki.client_key
    ) as c:
        assert c.solve(AttentionProblem(seq_len=1024, head_dim=64), "a100").candidates
    with (
        TileSolveClient(mtls_server, root_ca=pki.ca, retries=0) as c,  # no client cert
        pytest.raises(UnavailableError),
    ):
        c.hardware()


def test_tls_over_a_list_checks_each_replica_against_the_first_entry(
    pki: Pki, tls_server: str
) -> None:
    """An ipv4: list has no name of its own: the first entry is the name every replica's
    certificate must hold (here 127.0.0.1, both servers' certificate)."""
    with loopback.serving(tls_cert=pki.server_cert, tls_key=pki.server_key) as second:
        replicas = [tls_server, address_of(second)]
        with TileSolveClient(replicas, root_ca=pki.ca, timeout_s=10) as c:
            assert [c.hardware_spec("a100").name for _ in range(4)] == ["a100-80gb"] * 4
        with TileSolveClient(
            replicas, root_ca=pki.ca, server_name_override="localhost", timeout_s=10
        ) as c:
            assert c.hardware_spec("a100").name == "a100-80gb"


def test_client_cert_needs_its_key() -> None:
    with pytest.raises(ValueError, match="client_key"):
        TileSolveClient("127.0.0.1:1", client_cert=b"x")


# ---- the remote CLI -----------------------------------------------------------------------


def both(
    capsys: pytest.CaptureFixture[str], target: str, *argv: str
) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """(in-process, remote: the server at `target`) results of one command line."""
    return cli(capsys, *argv), cli(capsys, *argv, "--server", target)


_SOLVE_MS = re.compile(r"\| \d+(\.\d+)? ms")
_CACHED = re.compile(r"\| cached \(solved in (\d+\.\d) ms originally\)")


def _timeless(text: str) -> str:
    """A solve report without its time: fresh (`| 6.2 ms`) or cached (another test may have
    asked the module's server the same question first)."""
    return _CACHED.sub("", _SOLVE_MS.sub("", text))


def test_cli_solve_json_equals_in_process(capsys: pytest.CaptureFixture[str], target: str) -> None:
    argv = [*QUICK_START, "--causal", "--heads", "8", "--top-k", "3", "--json"]
    (code, out, _), (rcode, rout, rerr) = both(capsys, target, *argv)
    assert code == rcode == 0, rerr
    local, remote = json.loads(out), json.loads(rout)
    assert remote.pop("solve_ms") > 0
    local.pop("solve_ms")
    assert local.pop("cache_hit") is False and remote.pop("cache_hit") in (False, True)
    assert remote == local
    assert list(remote) == list(local)  # same document, same key order


def test_cli_solve_table_equals_in_process(capsys: pytest.CaptureFixture[str], target: str) -> None:
    (code, out, _), (rcode, rout, rerr) = both(capsys, target, *QUICK_START, "--wide")
    assert code == rcode == 0, rerr
    assert _SOLVE_MS.search(rout.splitlines()[0]) or _CACHED.search(rout.splitlines()[0])
    assert _timeless(rout) == _SOLVE_MS.sub("", out)


def test_cli_cached_answer_says_so(capsys: pytest.CaptureFixture[str], target: str) -> None:
    """Solved twice: the second answer comes from the server's cache, and says so."""
    argv = [*QUICK_START, "--seq-len", "2999", "--heads", "3", "--server", target]
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    first = json.loads(out)
    assert first["cache_hit"] is False and list(first)[-1] == "cache_hit"
    code, out, _ = cli(capsys, *argv, "--json")
    again = json.loads(out)
    assert code == 0 and again["cache_hit"] is True
    assert again["solve_ms"] == first["solve_ms"]  # the original solve's time, repeated
    code, out, _ = cli(capsys, *argv, "--wide")  # the header on one line
    header = out.splitlines()[0]
    assert code == 0 and not _SOLVE_MS.search(header)
    cached = _CACHED.search(header)
    assert cached and cached.group(1) == f"{first['solve_ms']:.1f}", header
    # in-process: never cached
    code, out, _ = cli(capsys, *argv[:-2], "--json")
    assert code == 0 and json.loads(out)["cache_hit"] is False
    code, out, _ = cli(capsys, *argv[:-2], "--wide")
    assert "cached" not in out.splitlines()[0] and _SOLVE_MS.search(out.splitlines()[0])


def test_cli_infeasible_exits_1_remotely(capsys: pytest.CaptureFixture[str], target: str) -> None:
    argv = [*QUICK_START, "--max-smem", "4096", "--wide"]  # --wide: the header on one line
    (code, out, _), (rcode, rout, _) = both(capsys, target, *argv)
    assert code == rcode == 1
    assert _timeless(rout) == _SOLVE_MS.sub("", out)
    assert "nearest relaxation" in rout


@pytest.mark.parametrize(
    "argv",
    [
        ["hardware", "list"],
        ["hardware", "list", "--json"],
        ["hardware", "show", "a100", "--json"],
        ["hardware", "show", "t4"],
        [*OCCUPANCY, "--smem", "49152", "--json"],
        [*OCCUPANCY, "--smem", "49152", "--carveout", "50"],
    ],
)
def test_cli_other_commands_identical_remotely(
    capsys: pytest.CaptureFixture[str], target: str, argv: list[str]
) -> None:
    local, remote = both(capsys, target, *argv)
    assert local[0] == 0, local[2]
    assert remote == local


def test_cli_occupancy_that_cannot_fit_exits_1_remotely(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    launch = ["occupancy", "--hardware", "a100", "--threads", "1024", "--regs", "255"]
    for argv in ([*launch, "--smem", "0"], [*launch, "--smem", "0", "--json"]):
        local, remote = both(capsys, target, *argv)
        assert remote == local
        assert remote[0] == 1 and remote[2] == ""
    assert json.loads(remote[1])["blocks_per_sm"] == 0


@pytest.mark.parametrize(
    "argv",
    [
        [*QUICK_START, "--head-dim", "0"],  # caught before asking, as in-process
        [*QUICK_START, "--batch", "1000", "--seq-len", "16000000"],  # the size cap: `problem`
        [*QUICK_START, "--kernel", "fa3"],  # the family's rule: judged by the server
        [*QUICK_START, "--block-m", "96"],  # outside fa2's domain: the server lists it
        [*QUICK_START, "--kernel", "triton", "--param", "num_stages=9"],
        [*QUICK_START, "--param", "warps_kv=2"],  # not a parameter of fa2
        [*QUICK_START, "--block-m", "64", "--param", "block_m=128"],
        [*QUICK_START, "--param", "block_m=abc"],  # caught before asking, as in-process
        [*QUICK_START, "--hardware", "ascend-910b", "--dtype", "fp8"],
        [*QUICK_START, "--hardware", "nope", "--top-k", "x"],  # the server's catalog + local
        ["hardware", "show", "nope"],
        ["hardware", "show", "sm86"],  # shared by a10 and rtx-3090: refused, naming both
        [*QUICK_START, "--hardware", "sm89"],
        [*OCCUPANCY, "--hardware", "sm80", "--smem", "0"],
        ["occupancy", "--hardware", "ascend-910", "--threads", "128", "--regs", "8", "--smem", "0"],
        [*OCCUPANCY, "--smem", "-1"],
    ],
)
def test_cli_invalid_input_identical_remotely(
    capsys: pytest.CaptureFixture[str], target: str, argv: list[str]
) -> None:
    local, remote = both(capsys, target, *argv)
    assert local[0] == 2
    assert remote == local
    assert remote[2].startswith("error: ")


def test_size_cap_from_the_server_is_reported_under_problem(client: TileSolveClient) -> None:
    huge = AttentionProblem.model_construct(batch=1000, seq_len=16_000_000, head_dim=128)
    with pytest.raises(InvalidArgumentError) as caught:
        client.solve(huge, "a100")  # skips local validation: the server judges it
    [violation] = server_violations(caught.value, "request")
    assert violation.field == "problem"
    assert violation.description.startswith("batch x heads x seq_len x seq_len_kv = 1000 x 1")


def test_cli_head_dim_0_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    code, out, err = cli(capsys, *QUICK_START, "--head-dim", "0", "--server", target)
    assert code == 2 and out == ""
    assert err.startswith("error: head_dim:")


def test_server_field_paths_become_cli_fields(client: TileSolveClient) -> None:
    """What the server alone reports names the CLI's fields (`problem.head_dim` -> head_dim)."""
    bad = AttentionProblem.model_construct(seq_len=1024, head_dim=0)
    with pytest.raises(InvalidArgumentError) as caught:
        client.solve(bad, "a100", SolveOptions(kernel="fa3"))
    fields = [v.field for v in server_violations(caught.value, "request")]
    assert "head_dim" in fields
    with pytest.raises(NotFoundError) as missing:
        client.hardware_spec("nope")
    assert [v.field for v in server_violations(missing.value, "hardware")] == ["hardware"]
    assert server_violations(
        InvalidArgumentError(grpc.StatusCode.INVALID_ARGUMENT, "hardware.name: required"),
        "request",
    ) == [ErrorLine("hardware", "required")]


def test_cli_unreachable_server_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (QUICK_START, ["hardware", "list"], [*OCCUPANCY, "--smem", "0"]):
        code, out, err = cli(capsys, *argv, "--server", "127.0.0.1:1", "--timeout", "0.5")
        assert code == 3 and out == ""
        assert err.startswith("error: server: cannot reach 127.0.0.1:1 (UNAVAILABLE: no connection")
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_cli_server_address_forms_reach_the_server(
    capsys: pytest.CaptureFixture[str], host: str
) -> None:
    """HOST:PORT with an IPv4 address or a hostname, and [IPV6]:PORT, are all accepted."""
    if host == "[::1]":
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback here")
    with loopback.serving(host=host.strip("[]")) as running:
        local = cli(capsys, "hardware", "show", "t4", "--json")
        target = f"{host}:{running.port}"
        assert cli(capsys, "hardware", "show", "t4", "--json", "--server", target) == local


def test_cli_deadline_exits_3(capsys: pytest.CaptureFixture[str], target: str) -> None:
    argv = [*QUICK_START, "--seq-len", "6001", "--batch", "5"]  # not cached
    code, out, err = cli(capsys, *argv, "--server", target, "--timeout", "0.001")
    assert code == 3 and out == ""
    assert err.startswith(f"error: server: no answer from {target} within 0.001 s")


def test_cli_remote_flags_need_a_server(capsys: pytest.CaptureFixture[str]) -> None:
    for extra in (["--tls"], ["--timeout", "5"], ["--tls-ca", "ca.pem"]):
        code, out, err = cli(capsys, "hardware", "list", *extra)
        assert code == 2 and out == ""
        assert err.startswith("error: server:")
    code, _, err = cli(capsys, "hardware", "list", "--server", "127.0.0.1:1", "--timeout", "0")
    assert code == 2 and err.startswith("error: timeout_s:")
    code, _, err = cli(capsys, "hardware", "list", "--server", "x:1", "--tls-ca", "/nonexistent")
    assert code == 2 and err.startswith("error: tls_ca: cannot read")


def test_cli_over_tls_and_mutual_tls(
    capsys: pytest.CaptureFixture[str], pki: Pki, tls_server: str, mtls_server: str
) -> None:
    local = cli(capsys, "hardware", "show", "h100", "--json")
    tls = ["--server", tls_server, "--tls-ca", str(pki.ca_file)]
    assert cli(capsys, "hardware", "show", "h100", "--json", *tls) == local
    mtls = [
        *("--server", mtls_server, "--tls-ca", str(pki.ca_file)),
        *("--tls-cert", str(pki.client_cert_file), "--tls-key", str(pki.client_key_file)),
    ]
    assert cli(capsys, "hardware", "show", "h100", "--json", *mtls) == local
    argv = ["hardware", "list", "--server", mtls_server, "--tls", "--timeout", "1"]
    code, _, err = cli(capsys, *argv)
    assert code == 3 and "cannot reach" in err


def test_cli_reaches_a_list_of_replicas(capsys: pytest.CaptureFixture[str], target: str) -> None:
    with loopback.serving(host="127.0.0.2") as second:
        local = cli(capsys, "hardware", "show", "t4", "--json")
        replicas = f"{target},{address_of(second)}"
        assert cli(capsys, "hardware", "show", "t4", "--json", "--server", replicas) == local
        dns = f"dns:///localhost:{target.rpartition(':')[2]}"
        assert cli(capsys, "hardware", "show", "t4", "--json", "--server", dns) == local


@pytest.mark.parametrize(
    ("server", "why"),
    [
        ("127.0.0.1:1,127.0.0.1:99999,127.0.0.3:1", "entry 2 of 3 ('127.0.0.1:99999'): the port"),
        ("127.0.0.1:1,,127.0.0.2:1", "entry 2 of 3 (''): it is empty"),
        ("127.0.0.1:1,127.0.0.1:1", "entry 2 of 2 ('127.0.0.1:1'): it repeats entry 1"),
        ("127.0.0.1:1,[::1]:1", "entry 2 of 2 ('[::1]:1'): an IPv6 address in a list of IPv4"),
        ("localhost:1,localhost:2", "entry 1 of 2 ('localhost:1'): 'localhost' is a hostname"),
        ("grpc://127.0.0.1:1,127.0.0.2:1", "entry 1 of 2 ('grpc://127.0.0.1:1'): leave out"),
        ("dns://10.0.0.1/name:1", "a DNS server of its own"),
        ("dns:///name", "dns:///NAME:PORT (three slashes)"),
    ],
)
def test_cli_bad_replica_lists_exit_2_naming_the_entry(
    capsys: pytest.CaptureFixture[str], server: str, why: str
) -> None:
    code, out, err = cli(capsys, "hardware", "list", "--server", server)
    assert (code, out) == (2, "")
    assert err.startswith("error: server: ") and why in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_server_gone_for_good_fails_the_next_call_within_the_ready_timeout() -> None:
    """After its server is killed, a one-server client's next call waits ready_timeout_s for a
    connection, not the call's whole deadline (it used to wait all of timeout_s)."""
    server = ServerProcess("--drain-delay", "0")
    try:
        with TileSolveClient(server.target, timeout_s=20, ready_timeout_s=1) as client:
            assert client.hardware()
            server.proc.kill()
            server.wait(timeout=10)
            time.sleep(0.3)  # the channel sees the connection end
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="no connection within 1 s"):
                client.hardware()
            waited = time.monotonic() - started
    finally:
        server.stop()
    assert waited < 4


def test_the_async_client_too_fails_within_the_ready_timeout_once_its_server_is_gone() -> None:
    server = ServerProcess("--drain-delay", "0")

    async def scenario() -> float:
        async with AsyncTileSolveClient(server.target, timeout_s=20, ready_timeout_s=1) as c:
            assert await c.hardware()
            server.proc.kill()
            server.wait(timeout=10)
            await asyncio.sleep(0.3)
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="no connection within 1 s"):
                await c.hardware()
            return time.monotonic() - started

    try:
        waited = asyncio.run(scenario())
    finally:
        server.stop()
    assert waited < 4
