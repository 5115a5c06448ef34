"""`occupancy` on a rocm device: the launch query and its report (AMD's rules, docs/model.md
19.2), the CLI (`--regs` VGPRs, `--smem` LDS, `--agprs`, `--sgprs`, `--waves-per-eu`), and the
Occupancy RPC's rocm fields on a real loopback server."""

from __future__ import annotations

import json

import grpc
import pytest

from tests.command_line import run
from tests.loopback import call_error, violations
from tilesolve.solver import InvalidRequestError, get_hardware
from tilesolve.solver.hardware import RocmDevice
from tilesolve.solver.occupancy_rocm_query import RocmOccupancyQuery, rocm_occupancy_report
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc


def _mi300x() -> RocmDevice:
    spec = get_hardware("mi300x")
    assert isinstance(spec, RocmDevice)
    return spec


def test_the_workload_guides_example() -> None:
    """170 VGPRs round to 176 (granule 8): 2 waves per SIMD; waves_per_eu = 3 caps the wave at
    168 and 3 fit (ROCm MI300X workload guide), with 2 registers a lane spilled."""
    spec = _mi300x()
    plain = rocm_occupancy_report(
        spec.rocm, RocmOccupancyQuery.on(spec, {"threads": 256, "vgprs": 170})
    )
    assert (plain.allocated_vgprs, plain.vgpr_waves_per_simd, plain.workgroups_per_cu) == (
        176,
        2,
        2,
    )
    assert plain.limiter == "vgprs" and plain.waves_per_simd == 2.0
    capped = rocm_occupancy_report(
        spec.rocm, RocmOccupancyQuery.on(spec, {"threads": 256, "vgprs": 170, "waves_per_eu": 3})
    )
    assert (capped.vgpr_cap, capped.allocated_vgprs, capped.spilled_vgprs) == (168, 168, 8)
    assert capped.workgroups_per_cu == 3


def test_lds_binds_at_its_granule() -> None:
    """64 KiB per CU on gfx942, 512-byte granule: 20,000 B allocate 20,480 and 3 fit."""
    spec = _mi300x()
    q = RocmOccupancyQuery.on(spec, {"threads": 64, "vgprs": 32, "lds_bytes": 20000})
    report = rocm_occupancy_report(spec.rocm, q)
    assert report.allocated_lds_bytes == 20480 and report.limit_lds == 3
    assert report.workgroups_per_cu == 3 and report.limiter == "lds"


def test_the_query_names_each_bad_field_with_the_devices_range() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        RocmOccupancyQuery.on(_mi300x(), {"threads": 2048, "vgprs": 300, "lds_bytes": 70000})
    found = {v.field: v.description for v in caught.value.violations}
    assert set(found) == {"threads", "vgprs", "lds_bytes"}
    assert "1 to 1024" in found["threads"] and "0 to 65536" in found["lds_bytes"]


def test_the_cli_answers_on_a_rocm_device(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "occupancy", "--hardware", "mi300x", "--threads", "256", "--regs", "170",
        "--smem", "32768", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 0
    assert doc["blocks_per_sm"] == doc["workgroups_per_cu"] == 2
    assert doc["limiter"] == "vgprs" and doc["allocated_vgprs_per_lane"] == 176
    code, out, _ = run(capsys, "occupancy", "--hardware", "mi355x", "--threads", "1024",
                       "--regs", "256", "--agprs", "256")  # fmt: skip
    assert code == 1 and "cannot launch" in out  # 16 waves of 512 registers do not fit


def test_the_cli_refuses_flags_of_the_other_kind(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "occupancy", "--hardware", "mi300x", "--threads", "64",
                       "--regs", "32", "--carveout", "50")  # fmt: skip
    assert code == 2 and "carveout" in err
    code, _, err = run(capsys, "occupancy", "--hardware", "h100-sxm", "--threads", "64",
                       "--regs", "32", "--smem", "0", "--waves-per-eu", "2")  # fmt: skip
    assert code == 2 and "waves-per-eu" in err and "rocm" in err
    code, _, err = run(capsys, "occupancy", "--hardware", "h100-sxm", "--threads", "64")
    assert code == 2 and "--regs" in err and "--smem" in err


def test_the_rpc_answers_on_a_rocm_device(stub: pb_grpc.TileSolveServiceStub) -> None:
    response = stub.Occupancy(
        pb.OccupancyRequest(
            hardware=pb.HardwareRef(name="mi300x"), threads=256, regs=170, waves_per_eu=3
        ),
        timeout=10,
    )
    assert response.blocks_per_sm == 3 and response.limiter == "vgprs"
    assert response.rocm.vgpr_cap == 168 and response.rocm.spilled_vgprs == 8
    assert response.rocm.waves_per_cu == 12 and response.rocm.max_waves_per_cu == 32


def test_the_rpc_names_bad_rocm_fields(stub: pb_grpc.TileSolveServiceStub) -> None:
    error = call_error(
        stub.Occupancy,
        pb.OccupancyRequest(
            hardware=pb.HardwareRef(name="mi300x"), threads=64, regs=300, carveout_percent=10
        ),
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "carveout_percent" in violations(error)
    error = call_error(
        stub.Occupancy,
        pb.OccupancyRequest(hardware=pb.HardwareRef(name="mi300x"), threads=64, regs=300),
    )
    assert "regs" in violations(error)
    error = call_error(
        stub.Occupancy,
        pb.OccupancyRequest(
            hardware=pb.HardwareRef(name="a100"), threads=64, regs=32, smem_bytes=0, agprs=4
        ),
    )
    assert "rocm" in violations(error)["agprs"]


def test_the_cli_asks_a_server_alike(capsys: pytest.CaptureFixture[str], target: str) -> None:
    argv = ["occupancy", "--hardware", "mi355x", "--threads", "512", "--regs", "128",
            "--smem", "81920", "--json"]  # fmt: skip
    code, local, _ = run(capsys, *argv)
    code_remote, remote, _ = run(capsys, *argv, "--server", target)
    assert code == code_remote == 0
    assert json.loads(local) == json.loads(remote)
