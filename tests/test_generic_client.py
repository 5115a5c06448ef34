"""A generic gRPC client with no tilesolve code (buf curl, through server reflection) can list
the services, check health, call Solve, and receive INVALID_ARGUMENT with field violations.

buf comes pinned from npm (`npm ci`, see package.json); CI installs it. Where it is absent the
test is skipped with the reason.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUF = ROOT / "node_modules" / ".bin" / "buf"


def _buf() -> str:
    if BUF.exists():
        return str(BUF)
    found = shutil.which("buf")
    if found is None:
        pytest.skip("buf is not installed (npm ci)")
    return found


@pytest.fixture(scope="module")
def address(target: str) -> str:
    """The module's server (conftest's `server`) as buf curl's URL."""
    return f"http://{target}"


def curl(address: str, *args: str, data: object | None = None) -> subprocess.CompletedProcess[str]:
    command = [_buf(), "curl", "--protocol", "grpc", "--http2-prior-knowledge", *args]
    if data is not None:
        command += ["--data", json.dumps(data)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_lists_services_through_reflection(address: str) -> None:
    result = curl(address, "--list-services", address)
    assert result.returncode == 0, result.stderr
    services = set(result.stdout.split())
    assert {"tilesolve.v1.TileSolveService", "grpc.health.v1.Health"} <= services


def test_health_check_is_serving(address: str) -> None:
    result = curl(address, f"{address}/grpc.health.v1.Health/Check", data={})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "SERVING"


def test_solve_answers_with_ranked_candidates(address: str) -> None:
    request = {"hardware": {"name": "a100"}, "problem": {"seqLen": 4096, "headDim": 128}}
    result = curl(address, f"{address}/tilesolve.v1.TileSolveService/Solve", data=request)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["status"] == "SOLVE_STATUS_OPTIMAL"
    assert (answer["kernel"], answer["engine"]) == ("fa2", "ENGINE_CPSAT")
    assert answer["kernelEnum"] == "KERNEL_FAMILY_FA2"  # the deprecated enum, for old clients
    assert [c["rank"] for c in answer["candidates"]] == [1, 2, 3, 4, 5]


def test_head_dim_zero_is_invalid_argument_with_a_field_violation(address: str) -> None:
    request = {"hardware": {"name": "a100"}, "problem": {"seqLen": 4096, "headDim": 0}}
    result = curl(address, f"{address}/tilesolve.v1.TileSolveService/Solve", data=request)
    assert result.returncode != 0
    error = json.loads(result.stderr)
    assert error["code"] == "invalid_argument"
    # buf curl prints Any details undecoded: decode the BadRequest ourselves.
    from google.rpc import error_details_pb2

    (detail,) = [d for d in error["details"] if d["type"] == "google.rpc.BadRequest"]
    bad_request = error_details_pb2.BadRequest.FromString(base64.b64decode(detail["value"] + "=="))
    assert [v.field for v in bad_request.field_violations] == ["problem.head_dim"]
