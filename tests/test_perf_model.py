"""The cost model's shared helpers (solver/cost.py) and the CUDA forward cost
(solver/families/cuda/forward.py), each against figures worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tilesolve.solver import (
    AttentionProblem,
    CudaDevice,
    Phase,
    SolveOptions,
    get_hardware,
    solve,
)
from tilesolve.solver.candidates import build_candidate_table
from tilesolve.solver.cost import (
    KV_WINDOW_TILES,
    LSE_BYTES_PER_ROW,
    forward_hbm_bytes,
    kv_reuse,
    padding_waste,
    wave_schedule,
)
from tilesolve.solver.model_constants import DEFAULT_MODEL_CONSTANTS
from tilesolve.solver.registry import get_family


def _ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_wave_schedule_counts_rounds_and_the_tail() -> None:
    waves = wave_schedule(_ints(216, 109, 54), _ints(108, 108, 108))
    assert list(waves.count) == [2.0, 2.0, 1.0]
    assert list(waves.last_wave_ctas) == [108.0, 1.0, 54.0]
    assert waves.tail_efficiency[0] == 1.0
    assert waves.tail_efficiency[1] == pytest.approx(109 / 216)
    assert waves.exact[2] == 0.5


def test_hbm_bytes_count_q_o_and_the_kv_reads() -> None:
    p = AttentionProblem(batch=2, heads=8, kv_heads=2, seq_len=1000, head_dim=64)
    q = 2 * 8 * 1000 * 64 * 2
    o = 2 * 8 * 1000 * (64 * 2 + LSE_BYTES_PER_ROW)
    kv = 2 * 2 * 1000 * 128 * 2  # one read of every KV head
    assert forward_hbm_bytes(p, 64, 64, np.ones(1))[0] == q + o + kv
    assert forward_hbm_bytes(p, 64, 64, np.full(1, 8.0))[0] == q + o + 8 * kv


L2_A100 = 40 * 1024 * 1024


def _reuse(p: AttentionProblem, block_m: int, block_n: int, slots: int) -> tuple[float, float]:
    n_m = -(-p.seq_len // block_m)
    kv_head = float(p.seq_len_kv_eff) * 256 * 2
    tile = np.array([block_n * 256 * 2.0])
    r = kv_reuse(p, kv_head, tile, _ints(n_m), np.array([float(n_m)]), _ints(slots), L2_A100)
    return float(r.dram_reads_per_kv_head[0]), float(r.dram_fraction[0])


def test_in_step_query_blocks_share_a_window_not_the_whole_head() -> None:
    """131k tokens: a head's K/V (64 MiB) cannot stay in L2, but the query blocks that run
    together walk it in step, so each cohort reads it from DRAM once."""
    long = AttentionProblem(batch=1, heads=32, seq_len=131072, head_dim=128)
    reads, fraction = _reuse(long, 128, 64, 108)
    cohorts = -(-1024 // 108)
    # once per cohort of 108 in-step blocks (not once per query block), less the share of the
    # two in-flight heads' K/V (128 MiB) that half of L2 (20 MiB) keeps between cohorts
    whole_miss = 1 - 20 / 128
    assert reads == pytest.approx(1 + (cohorts - 1) * whole_miss)
    assert fraction == pytest.approx(reads / 1024)
    short = AttentionProblem(batch=1, heads=1, seq_len=4096, head_dim=128)
    assert _reuse(short, 128, 64, 216) == (1.0, pytest.approx(1 / 32))


def test_windows_that_overflow_l2_go_to_dram() -> None:
    """Thousands of heads in flight: their windows no longer fit in L2."""
    many = AttentionProblem(batch=64, heads=64, seq_len=64, seq_len_kv=65536, head_dim=128)
    n_m, slots = 1, 4096
    kv_head = 65536 * 256 * 2.0
    tile = np.array([64 * 256 * 2.0])
    assert KV_WINDOW_TILES * tile[0] * slots > L2_A100
    r = kv_reuse(many, kv_head, tile, _ints(n_m), np.ones(1), _ints(slots), L2_A100)
    assert r.dram_fraction[0] == 1.0 and r.dram_reads_per_kv_head[0] == 1.0


def test_padding_waste_of_2050_tokens() -> None:
    p = AttentionProblem(seq_len=2050, seq_len_kv=2048, head_dim=64)
    computed = np.array([2112.0 * 2048.0])  # block_m 64 pads 2050 to 2112
    assert padding_waste(p, computed)[0] == pytest.approx(1 - 2050 / 2112)


@pytest.mark.parametrize("hardware", ["a100-80gb", "h100-sxm", "rtx-4090", "l4"])
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_forward_time_respects_its_floors(hardware: str, causal: bool) -> None:
    """No configuration beats the DRAM floor or the tensor peak; causal work is cheaper."""
    spec = get_hardware(hardware)
    assert isinstance(spec, CudaDevice)
    p = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128, causal=causal)
    table = build_candidate_table(get_family("fa2", Phase.FORWARD, spec), spec, p, SolveOptions())
    seconds = table.perf.time_us * 1e-6
    bandwidth = spec.memory.dram_bandwidth_gb_per_s * 1e9
    assert np.all(table.perf.hbm_bytes / seconds <= bandwidth * (1 + 1e-9))
    assert np.all(table.perf.tflops <= spec.throughput.tensor_fp16_dense_tflops)
    assert np.all((table.perf.overlap >= 0) & (table.perf.overlap <= 1))
    if causal:
        full = build_candidate_table(
            get_family("fa2", Phase.FORWARD, spec),
            spec,
            p.model_copy(update={"causal": False}),
            SolveOptions(),
        )
        assert np.all(table.perf.time_us < full.perf.time_us)


# ---- the symptoms the shared corrections remove (issue: model corrections) -----------------


def test_memory_bound_problems_reach_a_realistic_share_of_hbm() -> None:
    p = AttentionProblem(batch=32, heads=32, seq_len=1, seq_len_kv=8192, head_dim=128)
    answer = solve(p, "h100-sxm", SolveOptions(kernel="fa2", top_k=5))
    spec = get_hardware("h100-sxm")
    for c in answer.candidates:
        achieved = c.hbm_bytes / (c.predicted_time_us * 1e-6)
        assert achieved <= 0.95 * spec.memory.dram_bandwidth_gb_per_s * 1e9
    best = answer.candidates[0]
    assert (best.block_m, best.block_n, best.num_warps) != (16, 16, 1)
    assert best.num_warps in (4, 8) and best.block_n >= 128
    assert any("equivalent within the model's resolution" in n for n in answer.notes)


LAUNCH_CASES = [
    (h, k) for h in ("a100-80gb", "h100-sxm", "rtx-4090", "l4") for k in ("fa2", "triton")
]


@pytest.mark.parametrize(("hardware", "kernel"), [*LAUNCH_CASES, ("t4", "triton")])
def test_no_kernel_is_faster_than_a_launch(hardware: str, kernel: str) -> None:
    p = AttentionProblem(seq_len=1, head_dim=64)
    spec = get_hardware(hardware)
    table = build_candidate_table(get_family(kernel, Phase.FORWARD, spec), spec, p, SolveOptions())
    launch_us = DEFAULT_MODEL_CONSTANTS.kernel_launch_us
    assert float(table.perf.time_us.min()) >= launch_us >= 2.0


@pytest.mark.parametrize("hardware", ["a100-80gb", "rtx-4090"])
@pytest.mark.parametrize("rows", [16, 48])
@pytest.mark.parametrize(("batch", "heads"), [(1, 1), (1, 32), (4, 32), (16, 32)])
def test_tiny_kv_tiles_do_not_win_short_queries(
    hardware: str, rows: int, batch: int, heads: int
) -> None:
    """16-wide KV tiles cost 256 iterations over 4k keys; they no longer win. (One split: with
    split-KV a block walks only its share of the keys, see tests/test_decode.py.)"""
    p = AttentionProblem(batch=batch, heads=heads, seq_len=rows, seq_len_kv=4096, head_dim=128)
    one_split = SolveOptions(kernel="fa2", top_k=1, parameter_pins={"num_splits": 1})
    best = solve(p, hardware, one_split).candidates[0]
    assert best.block_n is not None and best.block_n > 16


def test_long_contexts_keep_their_throughput_on_l4() -> None:
    """A head's query blocks walk K/V in step: only a window must stay in L2."""
    tflops = {}
    for tokens in (8192, 32768, 131072):
        p = AttentionProblem(batch=1, heads=32, seq_len=tokens, head_dim=256)
        tflops[tokens] = solve(p, "l4", SolveOptions(top_k=1)).candidates[0].predicted_tflops
    assert tflops[131072] >= 0.9 * tflops[8192]
    assert tflops[32768] >= 0.9 * tflops[8192]


@pytest.mark.parametrize("hardware", ["v100", "t4"])
def test_triton_below_sm80_runs_on_fma_without_pipelining(hardware: str) -> None:
    spec = get_hardware(hardware)
    assert isinstance(spec, CudaDevice)
    for head_dim in (64, 128):
        p = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=head_dim)
        answer = solve(p, hardware, SolveOptions(kernel="triton", top_k=5))
        assert {c.num_stages for c in answer.candidates} == {1}
        best = answer.candidates[0]
        assert best.predicted_tflops <= spec.throughput.fp32_tflops
        assert "FMA" in best.bottleneck


def test_triton_on_hopper_does_not_overlap_softmax_with_wgmma() -> None:
    """The wgmma path waits for S before the softmax: the pipes add up within a block, so the
    tutorial kernel stays well below the tensor peak (about 400 TFLOP/s at d 128)."""
    spec = get_hardware("h100-sxm")
    assert isinstance(spec, CudaDevice)
    peak = spec.throughput.tensor_fp16_dense_tflops
    by_length = []
    for tokens in (512, 2048, 16384):
        p = AttentionProblem(batch=16384 // tokens, heads=16, seq_len=tokens, head_dim=128)
        best = solve(p, spec, SolveOptions(kernel="triton", top_k=1)).candidates[0]
        by_length.append(best.predicted_tflops)
    assert by_length == sorted(by_length)  # the trend over length: rising
    assert 0.3 * peak < by_length[-1] < 0.5 * peak


def test_cuda_forward_reports_its_iteration_figures() -> None:
    p = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128)
    best = solve(p, "a100-80gb", SolveOptions(top_k=1)).candidates[0]
    figures = best.figures
    pipes = [figures[f"iteration_{name}_cycles"] for name in ("tensor", "smem", "sfu", "alu")]
    assert figures["iteration_compute_cycles"] >= max(pipes) > 0
    assert figures["tile_load_cycles"] > 0 and 0 <= figures["kv_dram_fraction"] <= 1
