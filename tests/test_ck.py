"""The `ck` family (issue 26): CK tile FMHA forward on the rocm devices. CK's template rules as
legality, the LDS of each pipeline worked out by hand from CK's policies (docs/model.md
19.4), registers and occupancy, the cost model's structure (docs/model.md 19.5), bad input,
and the answer over the CLI and a real loopback gRPC server."""

from __future__ import annotations

import json
from typing import Any

import grpc
import numpy as np
import pytest

from tilesolve import wire
from tilesolve.solver import AttentionProblem, InvalidRequestError, SolveOptions, solve
from tilesolve.solver.candidates import CandidateTable, build_candidate_table
from tilesolve.solver.cost import causal_iterations
from tilesolve.solver.families.ck.cost import cross_lane_steps, single_buffer_wait
from tilesolve.solver.families.ck.resources import CkResources, lds_bytes, registers
from tilesolve.solver.families.ck.shape import Dims, Pipeline, qualified_head_dim
from tilesolve.solver.families.rocm.device import MFMA_SUSTAINED
from tilesolve.solver.families.rocm.schedule import (
    DRAM_LATENCY_CYCLES,
    L2_LATENCY_CYCLES,
    LDS_SUSTAINED,
    SHUFFLE_BYTES_PER_LANE,
    WORKGROUP_OVERLAP,
    Iteration,
    KvTraffic,
    cu_round,
    grid_cycles,
    independent_streams,
    kv_traffic,
)
from tilesolve.solver.hardware import RocmDevice, get_hardware
from tilesolve.solver.registry import find_family
from tilesolve.solver.space import Config
from tilesolve.solver.validate import check_config
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from command_line import run

PROBLEM = AttentionProblem(batch=4, heads=32, seq_len=8192, head_dim=128, dtype="bf16")


def _problem(**changes: Any) -> AttentionProblem:
    return AttentionProblem(**{**PROBLEM.model_dump(), **changes})


def _family() -> Any:
    family = find_family("ck")
    assert family is not None
    return family


def _lds(dims: Dims, pipeline: Pipeline, bm: int, bn: int, bk0: int, bn1: int, w: int) -> int:
    columns = [np.array([x], dtype=np.int64) for x in (bm, bn, bk0, bn1, w, int(pipeline))]
    return int(lds_bytes(dims, *columns)[0])


def _table(
    hardware: str, problem: AttentionProblem = PROBLEM, pins: dict[str, int] | None = None
) -> CandidateTable:
    options = SolveOptions(kernel="ck", parameter_pins=pins or {})
    return build_candidate_table(_family(), get_hardware(hardware), problem, options)


def _resources(table: CandidateTable) -> CkResources:
    assert isinstance(table.res, CkResources)
    return table.res


def _config(**values: int) -> Config:
    chosen = {"block_m": 128, "block_n": 128, "block_k0": 32, "block_n1": 128}
    chosen.update({"num_warps": 4, "mfma": 32, "pipeline": int(Pipeline.QR)})
    chosen.update(values)
    names = [p.name for p in _family().params(PROBLEM, get_hardware("mi300x"))]
    return Config(tuple((name, chosen[name]) for name in names))


def _check(hardware: str, problem: AttentionProblem = PROBLEM, **values: int) -> list[str]:
    return check_config(
        _family(), get_hardware(hardware), problem, SolveOptions(kernel="ck"), _config(**values)
    )


# ---- the shape and CK's template rules --------------------------------------------------------


def test_head_dims_pad_to_ck_qualified_lengths() -> None:
    """ceil_to_qualified_tile_length: 48 stays, 96 -> 128, 160 -> 256, 192 stays."""
    got = [qualified_head_dim(d) for d in (48, 64, 80, 96, 128, 160, 192, 256)]
    assert got == [48, 64, 128, 128, 128, 256, 192, 256]


def test_a_typical_instance_is_legal() -> None:
    assert _check("mi300x") == []


@pytest.mark.parametrize(
    ("values", "rule"),
    [
        ({"block_k0": 128}, "kK0"),  # 128 / 128 = 1 chunk: k0_loops >= 2 fails
        ({"block_n1": 256}, "kN1"),  # wider than head_dim_v 128
        ({"block_m": 64, "num_warps": 4}, "warps"),  # 64 rows over 4 warps of 32-row MFMAs
        ({"mfma": 32, "block_n": 32, "block_n1": 32, "pipeline": 3}, "trload"),  # gfx942
    ],
)
def test_template_rules_refuse(values: dict[str, int], rule: str) -> None:
    broken = _check("mi300x", **values)
    assert broken and all(b.startswith("ck_template") for b in broken), broken
    assert rule in " ".join(broken)


def test_fp8_takes_the_32x32_mfma_on_qr_qr_async_or_qs() -> None:
    """CK's codegen generates fp8 (fp8bf16) instances on qr_async above d 64 (fmha_fwd.py
    get_pipelines): model 0.21.0 refused them, which made CK's own fp8 tiles infeasible."""
    fp8 = _problem(dtype="fp8")
    assert _check("mi300x", fp8) == []
    assert _check("mi300x", fp8, mfma=16, block_m=64)
    assert _check("mi300x", fp8, pipeline=int(Pipeline.QR_ASYNC)) == []
    assert _check("mi355x", fp8, pipeline=int(Pipeline.QR_ASYNC_TRLOAD))


def test_qr_async_reads_k_in_kk1_slices() -> None:
    """qr_async's asynchronous K copy is laid out kN0 x kK1 (the custom policy's AsyncCopy
    distribution and LDS descriptors) and gemm0 reads a kN0 x kK0 slice of it: kK0 above kK1
    (32) reads past what was copied, so CK's own tiles have kK0 <= kK1 (= above d 32; docs/model.md
    19.3). qr, whose K goes through registers in kK0 chunks, takes a wider kK0 while the tile
    fits the LDS buffer sized for kK1."""
    async_pipe = int(Pipeline.QR_ASYNC)
    broken = _check("mi300x", pipeline=async_pipe, block_k0=64)
    assert broken and "qr_async" in " ".join(broken), broken
    assert _check("mi300x", pipeline=async_pipe, block_k0=32) == []
    assert _check("mi300x", pipeline=async_pipe, block_k0=16) == []
    # CK's own d 32 instance: qr_async at kK0 16 under kK1 32 (fmha_fwd.py's d 32 tile,
    # (128, 64, 16, 32, 32, 32) with 2 warps, on qr_async without bias)
    d32 = _problem(head_dim=32)
    ck_d32 = {"block_m": 128, "block_n": 64, "block_k0": 16, "block_n1": 32, "num_warps": 2}
    assert _check("mi300x", d32, pipeline=async_pipe, **ck_d32) == []
    # one kK0 chunk of the head dim: qr_async takes it (static_assert(1 <= k0_loops)), qr does
    # not (it prefetches chunk i + 1 during gemm0 on chunk i: 2 <= k0_loops)
    one_chunk = {**ck_d32, "block_k0": 32}
    assert _check("mi300x", d32, pipeline=async_pipe, **one_chunk) == []
    assert "kK0" in " ".join(_check("mi300x", d32, pipeline=int(Pipeline.QR), **one_chunk))
    # qr takes kK0 above kK1 only while its kN0 x kK0 K tile fits the LDS buffer CK sizes for
    # kK1 (max(K at kK1, V's chunk), in elements): 128 keys at kK0 64 need 64 x 129 - 8 = 8248,
    # the buffer holds max(4120, 4608); 64 keys need 4152, which fits
    qr = int(Pipeline.QR)
    assert "K tile" in " ".join(_check("mi300x", pipeline=qr, block_k0=64, block_n=128))
    assert _check("mi300x", pipeline=qr, block_k0=64, block_n=64) == []
    table = _table("mi300x", pins={"pipeline": async_pipe})
    assert not table.feasible[table.cfg["block_k0"] > 32].any()
    assert table.feasible[table.cfg["block_k0"] == 32].any()


def test_a_narrow_qr_async_chunk_copies_k_again() -> None:
    """With kK0 16 the copy still moves kN0 x kK1 = 32 columns a chunk while the window steps
    16: every K element reaches LDS twice. The 16-column tile's LDS bytes are its 32-column
    twin's plus one more write of K (kN0 d e), and its MFMA work is the same."""
    table = _table("mi300x", pins={"pipeline": int(Pipeline.QR_ASYNC), "block_m": 128})
    cfg = table.cfg
    f = table.perf.figures
    same = (cfg["block_n"] == 64) & (cfg["block_n1"] == 128) & (cfg["mfma"] == 32)
    same &= (cfg["num_warps"] == 4) & table.feasible
    (narrow,) = np.flatnonzero(same & (cfg["block_k0"] == 16))
    (wide,) = np.flatnonzero(same & (cfg["block_k0"] == 32))
    k_bytes = 64 * 128 * 2  # kN0 x d, bf16
    kv_tile = 2 * k_bytes  # K and V (kN1 = d)
    steps = float(cross_lane_steps(np.array([128.0]), np.array([32.0]), np.array([4.0]), 64)[0])
    wide_bytes = 5 * kv_tile + steps * 64 * SHUFFLE_BYTES_PER_LANE  # (w + 1) reads and writes
    assert f["lds_us"][narrow] / f["lds_us"][wide] == pytest.approx(1 + k_bytes / wide_bytes)
    assert f["mfma_us"][narrow] == f["mfma_us"][wide]


def test_trload_is_gfx950s_for_equal_power_of_two_head_dims() -> None:
    assert _check("mi355x", pipeline=int(Pipeline.QR_ASYNC_TRLOAD)) == []
    mla = _problem(head_dim=192, head_dim_v=128)
    assert _check("mi355x", mla, pipeline=int(Pipeline.QR_ASYNC_TRLOAD), block_k0=64)


def test_the_table_and_the_validator_agree_on_every_configuration() -> None:
    table = _table("mi355x")
    family = _family()
    spec = get_hardware("mi355x")
    for i in range(0, len(table.cfg), 97):
        broken = check_config(family, spec, PROBLEM, table.options, table.cfg.config(i))
        assert bool(table.feasible[i]) == (not broken), (table.label(i), broken)


# ---- LDS, registers, occupancy ----------------------------------------------------------------


def test_lds_of_each_pipeline_by_hand() -> None:
    """fp16, d = dv = 128, kM0 128, kN0 128, kK0 32, kN1 128, 4 warps, kK1 32:
    K chunk (sync) 32 x 129 - 8 = 4120 elements (kK1 wide; the descriptor's last pad is not
    allocated);
    V chunk (32/8) x (128/8) x (64 + 8) = 4608; async K chunk 128 x 32 / 128 x (128 + 8) = 4352.
    qr: 1 x 4608 x 2 = 9216 B; qr_async: 3 x 4608 x 2 = 27648 B;
    qs: 9216 + ceil16((32 x 129 - 8) x 2) = 9216 + 8240 = 17456 B (the compiler's figure,
    benchmarks/data/compiler/ck_fmha.csv)."""
    dims = Dims(128, 128, 2)
    assert _lds(dims, Pipeline.QR, 128, 128, 32, 128, 4) == 9216
    assert _lds(dims, Pipeline.QR_ASYNC, 128, 128, 32, 128, 4) == 27648
    assert _lds(dims, Pipeline.QS, 128, 128, 32, 128, 4) == 17456
    # K's buffer is kK1 wide whatever kK0 (MakeKLdsBlockDescriptor): kK0 64 leaves V the larger
    assert _lds(dims, Pipeline.QR, 128, 128, 64, 128, 4) == 9216
    # K outgrows V with 256 keys: 32 x 257 - 8 = 8216 elements = 16432 B (the compiler's figure)
    assert _lds(dims, Pipeline.QR, 128, 256, 16, 128, 4) == 16432


def test_trload_keeps_one_buffer_each_when_decoding_two_when_prefilling() -> None:
    """qr_async_trload (docs/model.md 19.4). Decode path (kM0 <= 64, or d 256): the policy's
    max(Q, K + V), one buffer each; K over the whole head dim above 64 query rows (kKLoadOnce).
    Prefill path (kM0 > 64 and d < 256, fmha_fwd_kernel.hpp's PrefillCase): two K buffers over
    the whole head dim and two V buffers, Q read through the first before them.
    bf16, d = dv = 128, kN0 64, kN1 128:
    kM0 64, kK0 32: max(64 x 128, 64 x 32 + 64 x 128) x 2 = max(8192, 10240) x 2 = 20480 B;
    kM0 128: max(128 x 128, 2 x 64 x 128 + 2 x 64 x 128) x 2 = 65536 B (kK0 does not matter);
    kM0 256: the same 65536 B (Q, 256 x 128, fills it exactly);
    d 256, kM0 128, kN0 64, kN1 256: max(128 x 256, 64 x 256 + 64 x 256) x 2 = 65536 B."""
    dims = Dims(128, 128, 2)
    assert _lds(dims, Pipeline.QR_ASYNC_TRLOAD, 64, 64, 32, 128, 4) == 20480
    assert _lds(dims, Pipeline.QR_ASYNC_TRLOAD, 128, 64, 32, 128, 4) == 65536
    assert _lds(dims, Pipeline.QR_ASYNC_TRLOAD, 128, 64, 64, 128, 4) == 65536
    assert _lds(dims, Pipeline.QR_ASYNC_TRLOAD, 256, 64, 32, 128, 8) == 65536
    assert _lds(Dims(256, 256, 2), Pipeline.QR_ASYNC_TRLOAD, 128, 64, 32, 256, 4) == 65536
    table = _table("mi355x", pins={"pipeline": int(Pipeline.QR_ASYNC_TRLOAD)})
    stages = _family().common_fields(table.cfg)["num_stages"]
    assert np.all(stages[table.cfg["pipeline"] == Pipeline.QR_ASYNC_TRLOAD] == 1)


def test_trloads_prefill_path_holds_its_b_operands_in_registers() -> None:
    """trload's block GEMMs take B from registers (BlockGemmARegBRegCRegV1): each wave holds a
    whole K chunk (kN0 x kK0) and V chunk (kK1 x kN1), two of each on the prefill path, and no
    V prefetch (V goes straight to LDS). CK's gfx950 d 128 tile, 128 x 64, kK0 32, 4 waves, bf16:
    O 128 x 128 / 256 = 64, Q 128 x 128 x 2 / 1024 = 32, S 32 and P 16 (live together), B 2 x
    max(64 x 32, 32 x 128) x 2 / 256 = 64, fixed 16 + d / kK0 = 20: 228, two waves a SIMD (its
    kBlockPerCu 2)."""
    dims = Dims(128, 128, 2)
    rocm = get_hardware("mi355x").rocm  # type: ignore[union-attr]
    cols = [np.array([x], dtype=np.int64) for x in (128, 64, 32, 128, 4, 3, 32)]
    assert int(registers(rocm, dims, *cols).demand[0]) == 228


def test_lds_is_allocated_in_the_parts_granule() -> None:
    for name, granule in (("mi300x", 512), ("mi355x", 1280)):
        res = _resources(_table(name))
        assert np.all(res.lds_allocated % granule == 0)
        assert np.all(res.lds_allocated >= res.lds)
        assert np.all(res.lds_allocated - res.lds < granule)


def test_gfx950s_larger_lds_admits_what_gfx942s_refuses() -> None:
    """A qs 256 x 256 tile of head dim 256 with kK0 128 needs 65776 B of Q's chunk ((128 x 257
    - 8) x 2) beside 18432 B of V's: over MI300X's 64 KiB, within MI355X's 160 KiB."""
    problem = _problem(head_dim=256)
    pins = {"block_m": 256, "block_n": 256, "block_n1": 256, "block_k0": 128, "num_warps": 8}
    pins["pipeline"] = int(Pipeline.QS)
    small = _table("mi300x", problem, pins)
    large = _table("mi355x", problem, pins)
    i = int(np.flatnonzero(small.satisfied["pins"])[0])
    j = int(np.flatnonzero(large.satisfied["pins"])[0])
    assert _resources(small).lds[i] == 65776 + 18432
    assert not small.satisfied["lds"][i] and large.satisfied["lds"][j]


def test_occupancy_follows_the_register_estimate() -> None:
    """More rows per warp keep more accumulators live: fewer waves per SIMD."""
    table = _table("mi300x")
    res = _resources(table)
    cfg = table.cfg
    base = (cfg["block_n"] == 64) & (cfg["block_k0"] == 32) & (cfg["block_n1"] == 128)
    base &= (cfg["num_warps"] == 4) & (cfg["mfma"] == 32) & (cfg["pipeline"] == 0)
    small = int(np.flatnonzero(base & (cfg["block_m"] == 128))[0])
    large = int(np.flatnonzero(base & (cfg["block_m"] == 256))[0])
    assert res.regs.demand[large] > res.regs.demand[small]
    assert res.occupancy.waves_per_cu[large] <= res.occupancy.waves_per_cu[small]


def test_the_register_estimate_by_hand() -> None:
    """docs/model.md 19.4. bf16, d = dv = 128, 128 x 128, kK0 32, kN1 128, 4 waves of 32 rows:
    O 32 x 128 / 64 = 64, Q 32 x 128 x 2 / 256 = 32, S 32 x 128 / 64 = 64 and P 32 (live
    together), the B fragments 2 x 4, fixed 16 + d / kK0 = 20; qr_async prefetches V through
    registers, 128 x 32 x 2 / (4 x 256) = 8: 228 (CK's gfx942 d 128 tile: the compiler's 230,
    two workgroups a CU within its launch bound of 256); qr prefetches K too, 8 more, holds a
    whole V chunk of B tiles, 128 x 32 x 2 / 256 = 32, and its fixed part is 20 + 4: 272 (the
    compiler's 296, one workgroup a CU); qs holds no Q but prefetches Q's kK0 chunk beside K's,
    8: 272 - 32 + 8 = 248 (the compiler's 268). Model 0.30.0, max(S, P) and 32 fixed: 208,
    216 and 192 (docs/model.md 19.4)."""
    table = _table("mi300x")
    res = _resources(table)
    cfg = table.cfg
    tile = (cfg["block_m"] == 128) & (cfg["block_n"] == 128) & (cfg["block_k0"] == 32)
    tile &= (cfg["block_n1"] == 128) & (cfg["num_warps"] == 4) & (cfg["mfma"] == 32)
    qr_async = int(np.flatnonzero(tile & (cfg["pipeline"] == int(Pipeline.QR_ASYNC)))[0])
    qr = int(np.flatnonzero(tile & (cfg["pipeline"] == int(Pipeline.QR)))[0])
    assert res.regs.demand[qr_async] == 228
    assert res.regs.demand[qr] == 272
    qs = int(np.flatnonzero(tile & (cfg["pipeline"] == int(Pipeline.QS)))[0])
    assert res.regs.demand[qs] == 248
    assert res.occupancy.workgroups_per_cu[qr_async] == 2


def test_a_workgroups_waves_are_one_instruction_stream() -> None:
    """docs/model.md 19.5: g = r min(w, SIMDs) / SIMDs streams a SIMD can overlap. 8 waves, one
    workgroup: the two waves a SIMD pass the same barriers, one stream; 4 waves, two
    workgroups: two; 2 waves, four workgroups (each on two SIMDs): two; 1 wave, 8: two."""
    device = get_hardware("mi355x")
    assert isinstance(device, RocmDevice)
    warps = np.array([8.0, 4.0, 2.0, 1.0, 4.0])
    r = np.array([1.0, 2.0, 4.0, 8.0, 1.0])
    assert independent_streams(device, warps, r).tolist() == [1.0, 2.0, 2.0, 2.0, 1.0]


def test_the_round_overlaps_only_independent_streams() -> None:
    """T(r) by hand (mi355x): M = 1000, V = 600, L = 140 cycles a workgroup's iteration, S = 300.
    L' = 140 / 0.7 = 200. One workgroup of 8 waves (g = 1, s = 1): everything serial,
    1000 + 600 + 200 + 300 = 2100. Two workgroups of 4 waves (g = 2, phi = beta / 2 with the
    fitted beta 0.65: 0.325): the top 2000 plus 0.675 of the rest (1200 + 400) and of the
    stalls: 2000 + 1080 + 202.5 = 3282.5, for two iterations (at beta 1, model 0.32.0: 2950).
    Model 0.21.0 gave the 8-wave workgroup the overlap of two streams (2 waves a SIMD)."""
    device = get_hardware("mi355x")
    assert isinstance(device, RocmDevice)
    one = np.ones(1)
    it = Iteration(1000.0 * one, 600.0 * one, 140.0 * one, 300.0 * one, 0.0 * one, 0.0 * one)
    assert LDS_SUSTAINED == MFMA_SUSTAINED
    eight = cu_round(device, it, 8.0 * one, 1.0 * one)
    assert float(eight[0]) == pytest.approx(2100.0)
    assert WORKGROUP_OVERLAP == 0.65
    four = cu_round(device, it, 4.0 * one, 2.0 * one)
    assert float(four[0]) == pytest.approx(3282.5)


# ---- the model's figures ------------------------------------------------------------------------


def test_mi355x_runs_faster_than_mi300x_and_fp8_faster_than_bf16() -> None:
    slow = solve(PROBLEM, "mi300x").candidates[0]
    fast = solve(PROBLEM, "mi355x").candidates[0]
    assert fast.predicted_tflops > 1.3 * slow.predicted_tflops
    fp8 = solve(_problem(dtype="fp8"), "mi355x").candidates[0]
    assert fp8.predicted_tflops > fast.predicted_tflops


def test_predictions_stay_below_the_mfma_peak() -> None:
    for name in ("mi300x", "mi325x", "mi350x", "mi355x"):
        spec = get_hardware(name)
        peak = spec.rocm.mfma_bf16_dense_tflops  # type: ignore[union-attr]
        best = solve(PROBLEM, name).candidates[0]
        assert 0.2 * peak < best.predicted_tflops < 0.8 * peak, (name, best.predicted_tflops)


def test_a_short_problem_is_limited_by_filling_the_cus() -> None:
    short = AttentionProblem(batch=1, heads=2, seq_len=256, head_dim=128)
    best = solve(short, "mi300x").candidates[0]
    assert "fill the CUs" in best.bottleneck or "HBM" in best.bottleneck


def test_a_single_k_buffer_waits_out_the_latency_its_chunk_does_not_cover() -> None:
    """qr, qs and trload (one K buffer) wait max(0, latency - cover) per K load; qr_async (three
    buffers) none. mi355x bf16: R_mfma = 2500e12 / (256 x 2.4e9) = 4069 FLOP per CU cycle, 0.7
    sustained. 64 x 64 tile, kK0 32, 4 waves: a chunk's gemm0 is 2 x 64 x 64 x 32 = 262144 FLOP,
    92 cycles; d / kK0 = 4 loads of an L2 hit (500 cycles): 4 x (500 - 92) = 1632 cycles. With
    2 waves the workgroup has half the CU's MFMA rate: 4 x (500 - 184) = 1264. kM0 128 trload
    runs the prefill path, its K loaded an iteration ahead into the second buffer: no wait."""
    device = get_hardware("mi355x")
    rocm = device.rocm  # type: ignore[union-attr]
    dims = Dims(128, 128, 2)
    r_mfma = 2500e12 / (256 * 2.4e9)
    traffic = KvTraffic(np.zeros(4), np.zeros(4))

    def wait(pipe: Pipeline, bm: float, warps: float) -> float:
        f = [np.full(4, x, dtype=np.float64) for x in (bm, 64.0, 32.0, 128.0, warps)]
        pipes = np.full(4, int(pipe), dtype=np.int64)
        out = single_buffer_wait(rocm, pipes, dims, *f, r_mfma, traffic)
        return float(out[0])

    cover = 2 * 64 * 64 * 32 / (r_mfma * MFMA_SUSTAINED)
    assert wait(Pipeline.QR, 64, 4) == pytest.approx(4 * (L2_LATENCY_CYCLES - cover))
    assert wait(Pipeline.QR_ASYNC_TRLOAD, 64, 4) == pytest.approx(4 * (L2_LATENCY_CYCLES - cover))
    assert wait(Pipeline.QS, 64, 2) == pytest.approx(4 * (L2_LATENCY_CYCLES - 2 * cover))
    assert wait(Pipeline.QR_ASYNC, 64, 4) == 0.0
    assert wait(Pipeline.QR_ASYNC_TRLOAD, 128, 4) == 0.0  # the prefill path: loaded ahead
    # d 256 keeps trload's single buffer: K's whole head dim, loaded after gemm0 and covered by
    # gemm1 (2 x 128 x 64 x 256 = 4194304 FLOP, 1472 cycles): no wait either
    d256 = Dims(256, 256, 2)
    f = [np.full(1, x, dtype=np.float64) for x in (128.0, 64.0, 32.0, 256.0, 4.0)]
    pipes = np.full(1, int(Pipeline.QR_ASYNC_TRLOAD), dtype=np.int64)
    assert (
        float(
            single_buffer_wait(rocm, pipes, d256, *f, r_mfma, KvTraffic(np.zeros(1), np.zeros(1)))[
                0
            ]
        )
        == 0.0
    )


def test_the_row_reductions_cross_lanes_as_the_mfma_layout_spreads_a_row() -> None:
    """The softmax's row max and row sum, reduced across lanes every iteration (docs/model.md
    19.5): a row of a 32x32 result tile spans 2 lanes (1 shuffle stage), of a 16x16 tile 4 (2
    stages); a lane holds kM0 / (w m) rows of its wave. 128 rows, 32x32: 2 x 4 x 1 = 8 wave-wide
    steps a workgroup; 16x16: 2 x 8 x 2 = 32, whatever the waves; each costs one VALU op and a
    ds_bpermute_b32 of 256 bytes, so the 16x16 instruction costs more VALU and LDS per row."""
    bm = np.array([128.0, 128.0, 64.0, 128.0])
    mfma = np.array([32.0, 16.0, 32.0, 32.0])
    warps = np.array([4.0, 4.0, 4.0, 2.0])
    lanes = get_hardware("mi300x").rocm.wavefront_lanes  # 64
    assert cross_lane_steps(bm, mfma, warps, lanes).tolist() == [8.0, 32.0, 4.0, 8.0]
    table = _table("mi300x")
    ev_valu = table.perf.figures["valu_us"]
    cfg = table.cfg
    same = (cfg["block_m"] == 128) & (cfg["block_n"] == 64) & (cfg["block_k0"] == 32)
    same &= (cfg["block_n1"] == 128) & (cfg["num_warps"] == 4) & (cfg["pipeline"] == 1)
    m32 = int(np.flatnonzero(same & (cfg["mfma"] == 32))[0])
    m16 = int(np.flatnonzero(same & (cfg["mfma"] == 16))[0])
    assert ev_valu[m16] > ev_valu[m32]
    assert table.perf.time_us[m16] > table.perf.time_us[m32]


def test_short_sequences_read_k_and_v_from_hbm_long_ones_from_l2() -> None:
    """The HBM share of the K/V tile reads (docs/model.md 19.11): B8 H64 S256, 64 x 32 tiles,
    causal: the 4 query blocks of a head walk about 2 + 4 + 6 + 8 key blocks (the causal
    count's closed form, 21.5 of 8), 2.7 heads' worth of K/V, and the head is read once from
    HBM (the Infinity Cache holds the rest): 8 / 21.5 = 0.37. At S 8192 the query blocks share
    a head's K/V in L2: under 2%."""
    device = get_hardware("mi355x")
    assert isinstance(device, RocmDevice)
    one = [np.array([x], dtype=np.int64) for x in (64, 32, 3)]
    short = AttentionProblem(
        batch=8, heads=64, seq_len=256, head_dim=128, dtype="bf16", causal=True
    )
    long = _problem(seq_len=8192, causal=True)
    tile = np.array([32 * 256 * 2.0])
    total = causal_iterations(np.array([4]), np.array([64.0]), np.array([32.0]), np.array([8]), 0)
    assert total[0][0] == pytest.approx(21.5)
    assert kv_traffic(device, short, 2.0, tile, *one).hbm_share[0] == pytest.approx(8 / 21.5)
    assert kv_traffic(device, long, 2.0, tile, *one).hbm_share[0] < 0.02


def test_every_workgroup_opens_with_an_hbm_latency() -> None:
    """A non-causal grid of one wave: the round's work, the workgroup's own traffic, and the
    prologue's HBM latency (DRAM_LATENCY_CYCLES), once however many workgroups share the CU."""
    device = get_hardware("mi355x")
    assert isinstance(device, RocmDevice)
    problem = AttentionProblem(batch=1, heads=4, seq_len=1024, head_dim=128, dtype="bf16")
    bm, bn = np.array([128], dtype=np.int64), np.array([128], dtype=np.int64)

    def kernel(resident: int) -> float:
        grid = grid_cycles(
            device,
            problem,
            bm,
            bn,
            np.ones(1, dtype=np.int64),
            np.array([resident], dtype=np.int64),
            lambda r: np.asarray(1000.0 * r),
            np.array([300.0]),
            64.0,
        )
        return float(grid.kernel[0])

    # 32 workgroups on 256 CUs: one wave, the last at one workgroup per CU
    assert kernel(1) == pytest.approx(8 * 1000.0 + 300.0 + DRAM_LATENCY_CYCLES)
    assert kernel(2) == pytest.approx(8 * 1000.0 + 300.0 + DRAM_LATENCY_CYCLES)


def test_causal_does_about_half_the_work() -> None:
    causal = _problem(causal=True)
    full = solve(PROBLEM, "mi300x").candidates[0]
    half = solve(causal, "mi300x").candidates[0]
    assert 0.4 * full.predicted_time_us < half.predicted_time_us < 0.75 * full.predicted_time_us


def test_both_engines_rank_alike() -> None:
    options = {"top_k": 5}
    cpsat = solve(PROBLEM, "mi325x", SolveOptions(engine="cpsat", **options))
    exhaustive = solve(PROBLEM, "mi325x", SolveOptions(engine="exhaustive", **options))
    assert [c.parameters for c in cpsat.candidates] == [c.parameters for c in exhaustive.candidates]


# ---- bad input ---------------------------------------------------------------------------------


def _refusal(problem: AttentionProblem, hardware: str = "mi300x") -> dict[str, str]:
    with pytest.raises(InvalidRequestError) as caught:
        solve(problem, hardware, SolveOptions(kernel="ck"))
    return {v.field: v.description for v in caught.value.violations}


def test_head_dims_over_256_are_refused_naming_the_field() -> None:
    refused = _refusal(_problem(head_dim=512))
    assert "head_dim" in refused and "256" in refused["head_dim"]


def test_fp8_on_a_part_without_fp8_mfma_names_the_dtypes() -> None:
    data = get_hardware("mi300x").model_dump(mode="json")
    data["name"] = "no-fp8"
    data["rocm"]["mfma_fp8_dense_tflops"] = None
    data["rocm"]["fp8_format"] = None
    data["rocm"]["unconfirmed_fields"] = [
        f for f in data["rocm"]["unconfirmed_fields"] if "fp8" not in f
    ]
    spec = type(get_hardware("mi300x")).model_validate(data)
    with pytest.raises(InvalidRequestError) as caught:
        solve(_problem(dtype="fp8"), spec)
    (violation,) = caught.value.violations
    assert violation.field == "dtype" and "allowed: fp16, bf16" in violation.description


def test_an_undeclared_parameter_pin_lists_the_parameters() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        solve(PROBLEM, "mi300x", SolveOptions(parameter_pins={"waves_per_eu": 2}))
    text = " ".join(v.description for v in caught.value.violations)
    assert "pipeline" in text and "block_k0" in text


def test_a_pin_outside_the_pipeline_domain_lists_the_values() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        solve(PROBLEM, "mi300x", SolveOptions(parameter_pins={"pipeline": 7}))
    (violation,) = caught.value.violations
    assert violation.field == "parameter_pins"
    assert "0, 1, 2, 3" in violation.description


# ---- the answer over the CLI and gRPC ------------------------------------------------------------


def test_cli_solves_on_each_instinct_part(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("mi300x", "mi325x", "mi350x", "mi355x"):
        code, out, err = run(
            capsys, "solve", "--hardware", name, "--head-dim", "128", "--seq-len", "4096", "--json"
        )
        assert code == 0, err
        doc = json.loads(out)
        assert doc["kernel"] == "ck" and doc["candidates"]
        names = [r["name"] for r in doc["candidates"][0]["resources"]]
        assert names == ["lds", "vgprs", "threads", "workgroups_per_cu"]


def test_cli_refuses_fa2_on_mi300x_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "solve", "--hardware", "mi300x", "--kernel", "fa2", "--head-dim", "128",
        "--seq-len", "1024",
    )  # fmt: skip
    assert code == 2 and "ck" in err


def test_answer_over_grpc_equals_in_process(target: str) -> None:
    options = SolveOptions(engine="exhaustive")
    local = solve(PROBLEM, "mi355x", options)
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.TileSolveServiceStub(channel)
        response = stub.Solve(wire.solve_request_to_proto(PROBLEM, "mi355x", options), 30)
    assert response.kernel == "ck"
    remote, _ = wire.answer_from_proto(response)
    assert [c.parameters for c in remote.candidates] == [c.parameters for c in local.candidates]
    assert [c.resources for c in remote.candidates] == [c.resources for c in local.candidates]
    assert remote.notes == local.notes
