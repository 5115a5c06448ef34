"""The memory model (seed 003): its figures, the `memory` command, and `EstimateMemory`.

The seed's own numbers are the oracle for the materialised matrix, the tile counts, the score
tile, the working set and the ratio; the HBM counts are checked against their formulas written
out again here, and the causal K/V count against a brute-force loop over the query blocks.
The RPC and `memory --server` are checked against the in-process model on a real server.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from typing import Any

import grpc
import pytest

from tilesolve import wire
from tilesolve.client.remote import (
    AsyncTileSolveClient,
    InvalidArgumentError,
    NotFoundError,
    TileSolveClient,
)
from tilesolve.solver import (
    AttentionProblem,
    InvalidRequestError,
    MemoryEstimate,
    estimate_memory,
    get_hardware,
    memory_sweep,
)
from tilesolve.solver.apps.memory import floor_sum, kv_rows_read
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from command_line import run

KIB = 1024
MIB = 1024 * 1024
SEED_003 = ["memory", "--seq-len", "4096", "--tile", "128", "--head-dim", "128"]


def seed(seq_len: int = 4096, head_dim: int = 128, **fields: Any) -> AttentionProblem:
    return AttentionProblem(seq_len=seq_len, head_dim=head_dim, **fields)


# ---- seed 003's figures ----------------------------------------------------------------------


def test_seed_003_figures() -> None:
    e = estimate_memory(seed(), 128, 128)
    assert e.score_matrix_bytes == 33554432 == 32 * MIB
    assert e.tiles_1d == e.tiles_1d_kv == 32
    assert e.score_tiles == 1024
    assert e.score_tile_bytes == 32768 == 32 * KIB
    assert e.working_set_bytes == 163840 == 160 * KIB
    assert e.materialization_ratio == 1024
    assert e.roofline is None


def test_seed_003_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *SEED_003, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["score_matrix_bytes"] == 33554432
    assert doc["tiles_1d"] == 32
    assert doc["score_tiles"] == 1024
    assert doc["score_tile_bytes"] == 32768
    assert doc["working_set_bytes"] == 163840
    assert doc["materialization_ratio"] == 1024
    for field in ("hbm_bytes_naive", "hbm_bytes_tiled", "arithmetic_intensity"):
        assert doc[field] > 0
    assert doc == estimate_memory(seed(), 128, 128).model_dump(mode="json")


def test_seed_003_tile_tradeoff() -> None:
    """Seed 003's Q2/Q3: smaller tiles, smaller working set, more tiles, a larger ratio."""
    rows = {t: estimate_memory(seed(), t, t) for t in (64, 128, 256)}
    assert [rows[t].working_set_bytes // KIB for t in (64, 128, 256)] == [72, 160, 384]
    assert [rows[t].score_tiles for t in (64, 128, 256)] == [4096, 1024, 256]
    assert [rows[t].score_tile_bytes // KIB for t in (64, 128, 256)] == [8, 32, 128]
    assert rows[64].materialization_ratio > rows[256].materialization_ratio
    assert all(r.working_set_bytes > r.score_tile_bytes for r in rows.values())


def test_seed_003_score_matrix_per_seq_len() -> None:
    for n, mib in ((1024, 2), (2048, 8), (4096, 32)):
        assert estimate_memory(seed(n), 64, 64).score_matrix_bytes == mib * MIB
    # batch and heads scale the matrix, not the per-(batch, head) ratio
    big = estimate_memory(seed(batch=4, heads=8), 128, 128)
    assert big.score_matrix_bytes == 32 * 32 * MIB
    assert big.materialization_ratio == 1024


def test_non_square_tile_and_unequal_lengths() -> None:
    p = seed(1000, 96, seq_len_kv=3000, head_dim_v=64, dtype="fp8")
    e = estimate_memory(p, 64, 32)
    assert (e.tiles_1d, e.tiles_1d_kv, e.score_tiles) == (16, 94, 16 * 94)
    assert e.score_matrix_bytes == 1000 * 3000
    assert e.score_tile_bytes == 64 * 32
    assert e.working_set_bytes == 64 * 96 + 32 * 96 + 32 * 64 + 64 * 32 + 64 * 64
    assert e.materialization_ratio == pytest.approx(1000 * 3000 / (64 * 32))


# ---- HBM traffic and intensity -------------------------------------------------------------


def test_hbm_counts_follow_their_formulas() -> None:
    b, h, hkv, sq, sk, d, dv, e = 2, 8, 2, 1000, 1500, 128, 64, 2
    p = AttentionProblem(
        batch=b, heads=h, kv_heads=hkv, seq_len=sq, seq_len_kv=sk, head_dim=d, head_dim_v=dv
    )
    est = estimate_memory(p, 128, 64)
    naive = b * h * e * (sq * d + sk * d + sq * sk * 4 + sk * dv + sq * dv)
    q_o = b * h * (sq * d * e + sq * (dv * e + 4))
    assert est.hbm_bytes_naive == naive
    assert est.hbm_bytes_tiled == q_o + b * h * sk * (d + dv) * e * est.tiles_1d
    assert est.hbm_bytes_tiled_l2 == q_o + b * hkv * sk * (d + dv) * e
    assert est.flops == p.flops
    assert est.arithmetic_intensity == pytest.approx(p.flops / est.hbm_bytes_tiled_l2)
    assert est.arithmetic_intensity_naive == pytest.approx(p.flops / naive)
    assert est.arithmetic_intensity_tiled_no_l2 == pytest.approx(p.flops / est.hbm_bytes_tiled)
    assert est.hbm_bytes_tiled_l2 < est.hbm_bytes_tiled < est.hbm_bytes_naive


def test_larger_query_blocks_reread_kv_less() -> None:
    small, large = (estimate_memory(seed(8192), t, 64) for t in (64, 256))
    assert large.hbm_bytes_tiled < small.hbm_bytes_tiled
    assert large.hbm_bytes_tiled_l2 == small.hbm_bytes_tiled_l2


def _brute_rows(sq: int, sk: int, bm: int, bn: int, causal: bool) -> int:
    total = 0
    for i in range(-(-sq // bm)):
        if not causal:
            total += sk
            continue
        need = min(sq, (i + 1) * bm) + sk - sq
        if need > 0:
            total += min(sk, bn * -(-need // bn))
    return total


def test_causal_kv_rows_match_a_loop_over_query_blocks() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        sq, sk = rng.randint(1, 400), rng.randint(1, 400)
        bm, bn = rng.randint(1, 80), rng.randint(1, 80)
        for causal in (False, True):
            assert kv_rows_read(sq, sk, bm, bn, causal) == _brute_rows(sq, sk, bm, bn, causal)
    assert kv_rows_read(1 << 24, 1 << 24, 1, 1, True) == (1 << 24) * ((1 << 24) + 1) // 2


def test_floor_sum() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        n, m, a, b = (
            rng.randint(0, 60),
            rng.randint(1, 60),
            rng.randint(0, 200),
            rng.randint(0, 200),
        )
        assert floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n))


def test_causal_halves_flops_and_kv_rereads() -> None:
    full, causal = (estimate_memory(seed(8192, causal=c), 128, 128) for c in (False, True))
    assert causal.flops == pytest.approx(full.flops / 2, rel=1e-3)
    assert causal.hbm_bytes_tiled < full.hbm_bytes_tiled
    assert causal.hbm_bytes_tiled_l2 == full.hbm_bytes_tiled_l2  # the last block sees all keys
    assert causal.hbm_bytes_naive == full.hbm_bytes_naive  # naive materialises it all


# ---- roofline ------------------------------------------------------------------------------


def test_roofline_on_a100() -> None:
    e = estimate_memory(seed(), 128, 128, get_hardware("a100"))
    roof = e.roofline
    assert roof is not None
    assert roof.hardware == "a100-80gb"
    assert roof.peak_tflops == 312.0 and roof.peak_kind == "fp16 dense tensor"
    assert roof.dram_bandwidth_gb_per_s == 2039.0
    assert roof.ridge_point_flops_per_byte == pytest.approx(312e12 / 2039e9)
    assert roof.ridge_point_flops_per_byte == pytest.approx(153.0, abs=0.1)
    bandwidth = 2039e9
    for attainable, intensity in (
        (roof.attainable_tflops, e.arithmetic_intensity),
        (roof.attainable_tflops_tiled_no_l2, e.arithmetic_intensity_tiled_no_l2),
        (roof.attainable_tflops_naive, e.arithmetic_intensity_naive),
    ):
        assert attainable == pytest.approx(min(312.0, intensity * bandwidth / 1e12))
    assert roof.attainable_tflops_naive < roof.peak_tflops  # naive is memory-bound
    assert roof.bound == "compute"
    tiny = estimate_memory(seed(64, 64), 64, 64, "a100").roofline
    assert tiny is not None and tiny.bound == "memory"


def test_roofline_peak_follows_the_dtype() -> None:
    h100 = estimate_memory(seed(dtype="fp8"), 128, 128, "h100-sxm").roofline
    assert h100 is not None and h100.peak_kind == "fp8 dense tensor"
    assert h100.peak_tflops == get_hardware("h100-sxm").throughput.tensor_fp8_dense_tflops  # type: ignore[union-attr]
    a100 = estimate_memory(seed(dtype="fp8"), 128, 128, "a100").roofline
    assert a100 is not None and a100.peak_tflops == 312.0 and "no fp8" in a100.peak_kind
    ascend = estimate_memory(seed(), 128, 128, "ascend-910b").roofline
    assert ascend is not None and ascend.peak_kind == "fp16 cube"


# ---- the family's shared memory ------------------------------------------------------------


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize(("bm", "bn"), [(128, 128), (128, 64), (64, 128), (16, 16)])
def test_fa2_family_smem(d: int, bm: int, bn: int) -> None:
    e = estimate_memory(seed(head_dim=d), bm, bn)
    assert e.family_smem_bytes == 2 * d * (bm + 2 * bn)
    assert e.family_smem_note is None


def test_fa2_family_smem_uses_the_padded_head_dim() -> None:
    e = estimate_memory(seed(head_dim=72), 128, 64)
    assert e.family_smem_bytes == 2 * 96 * (128 + 2 * 64)  # fa2 compiles head_dim 96


def test_family_smem_absent_when_the_family_cannot_run_it() -> None:
    fp8 = estimate_memory(seed(dtype="fp8"), 128, 128)
    assert (
        fp8.family_smem_bytes is None and fp8.family_smem_note and "dtype" in fp8.family_smem_note
    )
    t4 = estimate_memory(seed(), 128, 128, "t4")
    assert t4.family_smem_bytes is None and "compute capability" in (t4.family_smem_note or "")
    fa3 = estimate_memory(seed(), 128, 128, "a100", kernel="fa3")
    assert fa3.family_smem_bytes is None and "compute capability 9.0" in (
        fa3.family_smem_note or ""
    )
    no_backward = estimate_memory(seed(phase="backward"), 128, 128, "a100", kernel="flashinfer")
    assert no_backward.family_smem_bytes is None
    assert "flashinfer' has no backward model yet" in (no_backward.family_smem_note or "")
    triton = estimate_memory(seed(dtype="fp8"), 128, 64, "h100", kernel="triton")
    # fp8 (1 byte), one stage: the loop is not pipelined, so Q stays while K, then V (64 x 128
    # each) passes through one buffer at a time (docs/model.md 16.7).
    assert triton.family_smem_bytes == 128 * 128 + 64 * 128


# ---- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block_m", "block_n", "fields"),
    [(0, 64, {"block_m"}), (64, 4097, {"block_n"}), (-1, 0, {"block_m", "block_n"})],
)
def test_bad_tile_names_the_field(block_m: int, block_n: int, fields: set[str]) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        estimate_memory(seed(), block_m, block_n)
    assert {v.field for v in caught.value.violations} == fields


def test_bad_kernel_and_phase_name_the_field() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        estimate_memory(seed(phase="decode"), 64, 64, kernel="cutlass")
    assert {v.field for v in caught.value.violations} == {"kernel", "phase"}


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (
            ["--seq-len", "4096", "--block-m", "0", "--block-n", "64", "--head-dim", "128"],
            "block_m",
        ),
        (["--seq-len", "4096", "--tile", "0", "--head-dim", "128"], "tile"),
        (["--seq-len", "0", "--tile", "128", "--head-dim", "128"], "seq_len"),
        (["--seq-len", "4096", "--tile", "128", "--head-dim", "-1"], "head_dim"),
        (["--seq-len", "4096", "--tile", "128", "--head-dim", "128", "--batch", "0"], "batch"),
        (["--seq-len", "4096", "--head-dim", "128"], "tile"),
        (["--seq-len", "4096", "--tile", "64", "--block-m", "64", "--head-dim", "128"], "tile"),
        (["--seq-len", "4096", "--block-m", "64", "--head-dim", "128"], "block_n"),
        (["--tile", "64", "--head-dim", "128"], "seq_len"),
        (["--seq-len", "64", "--tile", "64", "--head-dim", "128", "--hardware", "x"], "hardware"),
        (["--seq-len", "64", "--tile", "64", "--head-dim", "128", "--tiles", "4"], "sweep"),
        (["--sweep", "--seq-lens", "0,64", "--head-dim", "128"], "seq_lens"),
        (["--sweep", "--tiles", "64,x", "--head-dim", "128"], "tiles"),
        (["--sweep", "--head-dim", "128", "--block-m", "64"], "block_m"),
    ],
)
def test_cli_bad_input_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], argv: list[str], field: str
) -> None:
    code, out, err = run(capsys, "memory", *argv)
    assert code == 2
    assert out == ""
    assert f"error: {field}: " in err, err
    assert "Traceback" not in err


def test_sweep_rejects_bad_lists() -> None:
    for seq_lens, tiles, field in (([], [64], "seq_lens"), ([64], [0], "tiles")):
        with pytest.raises(InvalidRequestError) as caught:
            memory_sweep(seq_lens, tiles, 128)
        assert caught.value.violations[0].field == field
    with pytest.raises(InvalidRequestError) as caught:
        memory_sweep([64], [64], 0)
    assert caught.value.violations[0].field == "head_dim"


# ---- the table and the sweep ---------------------------------------------------------------


def test_table_has_units_and_the_roofline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *SEED_003, "--hardware", "a100")
    assert code == 0
    assert "32 MiB" in out and "160 KiB" in out and "32 KiB" in out
    assert "1024x" in out
    assert "roofline (a100-80gb)" in out and "153.0 FLOP/B" in out and "compute-bound" in out
    code, plain, _ = run(capsys, *SEED_003)
    assert code == 0 and "roofline" not in plain


def test_sweep_table_is_seed_003s(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "memory", "--sweep", "--head-dim", "128")
    assert code == 0, err
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["seq_len", "tile"])
    rows = [line.split() for line in lines[header + 2 : header + 11]]
    assert [(int(r[0]), int(r[1])) for r in rows] == [
        (n, t) for n in (1024, 2048, 4096) for t in (64, 128, 256)
    ]
    by_key = {(int(r[0]), int(r[1])): r[2:] for r in rows}
    # 1-D tiles, score tiles, score tile KiB, working set KiB, score matrix MiB, ratio
    assert by_key[(4096, 64)] == ["64", "4096", "8", "72", "32", "4096"]
    assert by_key[(4096, 128)] == ["32", "1024", "32", "160", "32", "1024"]
    assert by_key[(4096, 256)] == ["16", "256", "128", "384", "32", "256"]
    assert by_key[(1024, 128)] == ["8", "64", "32", "160", "2", "64"]


def test_sweep_json_equals_memory_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["memory", "--sweep", "--seq-lens", "512,3000", "--tiles", "32,96", "--head-dim", "64"]
    code, out, _ = run(capsys, *argv, "--batch", "2", "--hardware", "h100", "--json")
    assert code == 0
    expected = memory_sweep([512, 3000], [32, 96], 64, batch=2, hardware="h100")
    assert json.loads(out) == [e.model_dump(mode="json") for e in expected]


def test_plot_without_the_plot_module_says_how_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setitem(sys.modules, "tilesolve.client.plots", None)  # import fails
    code, out, err = run(capsys, *SEED_003, "--plot", str(tmp_path / "m.png"))
    assert code == 2 and out == ""
    assert err.startswith("error: plot: ") and "pip install 'tilesolve[plot]'" in err


# ---- gRPC ----------------------------------------------------------------------------------


CASES: list[tuple[AttentionProblem, int, int, str | None, str]] = [
    (seed(), 128, 128, None, "fa2"),
    (seed(), 128, 128, "a100", "fa2"),
    (seed(1000, 96, seq_len_kv=3000, heads=8, kv_heads=2, causal=True), 64, 32, "h100", "triton"),
    (seed(4096, 64, dtype="fp8", batch=3), 256, 16, "l4", "fa2"),
    (seed(100, 100), 7, 300, None, "fa3"),
    (seed(512, 128, head_dim_v=64), 64, 64, "ascend-910b", "fa2"),
]


@pytest.mark.parametrize(("problem", "bm", "bn", "hardware", "kernel"), CASES)
def test_estimate_memory_rpc_equals_in_process(
    target: str,
    problem: AttentionProblem,
    bm: int,
    bn: int,
    hardware: str | None,
    kernel: str,
) -> None:
    with TileSolveClient(target, timeout_s=20) as client:
        remote = client.estimate_memory(problem, bm, bn, hardware, kernel)
    local = estimate_memory(problem, bm, bn, hardware, kernel)
    assert isinstance(remote, MemoryEstimate)
    assert remote == local


def test_estimate_memory_rpc_with_an_inline_spec(target: str) -> None:
    spec = get_hardware("a100").model_copy(update={"name": "my-chip"})
    with TileSolveClient(target, timeout_s=20) as client:
        remote = client.estimate_memory(seed(), 128, 64, spec)
    assert remote.roofline is not None and remote.roofline.hardware == "my-chip"
    assert remote == estimate_memory(seed(), 128, 64, spec)


def test_estimate_memory_rpc_errors(target: str) -> None:
    with TileSolveClient(target, timeout_s=20) as client:
        with pytest.raises(InvalidArgumentError) as bad:
            client.estimate_memory(AttentionProblem.model_construct(seq_len=0, head_dim=128), 0, 64)
        fields = {v.field for v in bad.value.violations}
        assert "problem.seq_len" in fields
        with pytest.raises(InvalidArgumentError) as bad_tile:
            client.estimate_memory(seed(phase="decode"), 0, 5000)
        assert {v.field for v in bad_tile.value.violations} == {
            "block_m",
            "block_n",
            "problem.phase",
        }
        with pytest.raises(NotFoundError) as unknown:
            client.estimate_memory(seed(), 64, 64, "no-such-chip")
        assert "a100-80gb" in unknown.value.message


def test_estimate_memory_raw_stub(target: str) -> None:
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.TileSolveServiceStub(channel)
        request = wire.memory_request_to_proto(seed(), 128, 128, "a100")
        response = stub.EstimateMemory(request, timeout=10)
        assert response.kernel == "fa2" and response.kernel_enum == pb.KERNEL_FAMILY_FA2
        assert response.roofline.bound == "compute"
        assert response.family_smem_bytes == 98304
        no_kernel = pb.EstimateMemoryRequest(
            problem=pb.AttentionProblem(seq_len=4096, head_dim=128), block_m=128, block_n=128
        )
        assert stub.EstimateMemory(no_kernel, timeout=10).kernel == "fa2"
        # An old client naming the family by the deprecated enum is still understood.
        legacy = pb.EstimateMemoryRequest(
            problem=pb.AttentionProblem(seq_len=4096, head_dim=128),
            block_m=128,
            block_n=128,
            kernel_enum=pb.KERNEL_FAMILY_TRITON,
        )
        assert stub.EstimateMemory(legacy, timeout=10).kernel == "triton"


def test_async_client_estimate_memory(target: str) -> None:
    async def ask() -> MemoryEstimate:
        async with AsyncTileSolveClient(target, timeout_s=20) as client:
            return await client.estimate_memory(seed(), 128, 128, "h100")

    assert asyncio.run(ask()) == estimate_memory(seed(), 128, 128, "h100")


@pytest.mark.parametrize(
    "argv",
    [
        [*SEED_003],
        [*SEED_003, "--json"],
        [*SEED_003, "--hardware", "a100", "--kernel", "triton"],
        [
            "memory",
            "--seq-len",
            "1000",
            "--block-m",
            "64",
            "--block-n",
            "32",
            "--head-dim",
            "96",
            "--causal",
            "--heads",
            "4",
            "--kv-heads",
            "2",
            "--hardware",
            "h100",
            "--json",
        ],
        ["memory", "--sweep", "--head-dim", "128"],
        ["memory", "--sweep", "--head-dim", "64", "--hardware", "a100", "--json"],
    ],
)
def test_memory_server_output_is_identical(
    capsys: pytest.CaptureFixture[str], target: str, argv: list[str]
) -> None:
    local = run(capsys, *argv)
    remote = run(capsys, *argv, "--server", target)
    assert local[0] == 0
    assert remote == local


def test_memory_server_errors_are_the_same_lines(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    argv = ["memory", "--seq-len", "64", "--tile", "0", "--head-dim", "128", "--hardware", "zz"]
    local = run(capsys, *argv)
    remote = run(capsys, *argv, "--server", target)
    assert local[0] == 2 and remote == local
    assert "error: hardware: " in local[2] and "error: tile: " in local[2]
