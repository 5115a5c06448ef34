"""The committed tilesolve.v1 code is exactly what the pinned generator makes from the proto."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools absent")
def test_generated_code_is_fresh(tmp_path: Path) -> None:
    # A separate process: grpc_tools' protoc and ortools both embed protobuf's C++ runtime,
    # and loading both into one process aborts.
    result = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for line in result.stdout.split():
        fresh = Path(line)
        committed = ROOT / "proto" / "tilesolve" / "v1" / fresh.name
        assert committed.read_bytes() == fresh.read_bytes(), (
            f"{committed.relative_to(ROOT)} is stale: run `python proto/generate.py`"
        )


def test_generated_code_imports_on_the_pinned_runtime() -> None:
    from tilesolve.v1 import tilesolve_pb2, tilesolve_pb2_grpc

    names = {s.name for s in tilesolve_pb2.DESCRIPTOR.services_by_name.values()}
    assert names == {"TileSolveService"}
    rpcs = {m.name for m in tilesolve_pb2.DESCRIPTOR.services_by_name["TileSolveService"].methods}
    assert rpcs >= {
        "Solve",
        "SolveBatch",
        "ListHardware",
        "GetHardware",
        "EstimateMemory",
        "Occupancy",
    }
    assert hasattr(tilesolve_pb2_grpc, "TileSolveServiceServicer")
