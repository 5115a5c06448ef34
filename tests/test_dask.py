"""Large sweeps on Dask: `table --dask-scheduler` on a real Dask LocalCluster (two worker
processes on loopback) writes byte-identical output to the local run, and an unreachable
scheduler is exit 3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tilesolve.client.cli import main

distributed = pytest.importorskip("distributed", reason="pip install -e '.[dev]' (dask extra)")

GRID = """\
hardware = ["a100", "h100"]
head_dim = [64, 128]
dtype = ["fp16", "bf16"]
causal = [false, true]
seq_len = [256, 1024, 4096, 16384]
batch = 2
heads = 32
"""


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    try:
        yield str(cluster.scheduler_address)
    finally:
        cluster.close()


def test_a_grid_on_a_dask_cluster_is_byte_identical_to_the_local_run(
    tmp_path: Path, scheduler: str, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    for fmt in ("cpp", "json"):
        local, remote = tmp_path / f"local.{fmt}", tmp_path / f"dask.{fmt}"
        argv = ["table", "--grid", str(grid), "--format", fmt]
        assert main([*argv, "--output", str(local)]) == 0
        assert main([*argv, "--output", str(remote), "--dask-scheduler", scheduler]) == 0
        assert local.read_bytes() == remote.read_bytes()
    assert main([*argv, "--max-configs", "3", "--output", str(local)]) == 0
    assert (
        main([*argv, "--max-configs", "3", "--output", str(remote), "--dask-scheduler", scheduler])
        == 0
    )
    assert local.read_bytes() == remote.read_bytes()
    capsys.readouterr()


def test_an_unreachable_scheduler_is_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    code = main(["table", "--grid", str(grid), "--dask-scheduler", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 3 and "error: dask_scheduler: cannot reach tcp://127.0.0.1:1" in err
