"""The cost model's shared helpers (solver/cost.py) and the CUDA forward cost
(solver/families/cuda_forward.py), each against figures worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tilesolve.solver import AttentionProblem, CudaDevice, Phase, SolveOptions, get_hardware
from tilesolve.solver.candidates import build_table
from tilesolve.solver.cost import (
    LSE_BYTES_PER_ROW,
    forward_hbm_bytes,
    kv_dram_miss,
    padding_waste,
    wave_schedule,
)
from tilesolve.solver.families import get_family


def _ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_wave_schedule_counts_rounds_and_the_tail() -> None:
    waves = wave_schedule(_ints(216, 109, 54), _ints(108, 108, 108))
    assert list(waves.count) == [2.0, 2.0, 1.0]
    assert list(waves.last_wave_ctas) == [108.0, 1.0, 54.0]
    assert waves.tail_efficiency[0] == 1.0
    assert waves.tail_efficiency[1] == pytest.approx(109 / 216)
    assert waves.exact[2] == 0.5


def test_hbm_bytes_without_misses_read_everything_once() -> None:
    p = AttentionProblem(batch=2, heads=8, kv_heads=2, seq_len=1000, head_dim=64)
    got = forward_hbm_bytes(p, 64, 64, _ints(8), np.zeros(1))
    q = 2 * 8 * 1000 * 64 * 2
    o = 2 * 8 * 1000 * (64 * 2 + LSE_BYTES_PER_ROW)
    kv = 2 * 2 * 1000 * 128 * 2  # once per KV head
    assert got[0] == q + o + kv
    # every query block re-reads K/V when none of it stays in L2
    assert forward_hbm_bytes(p, 64, 64, _ints(8), np.ones(1))[0] == q + o + 8 * kv


def test_dram_miss_grows_with_the_kv_footprint() -> None:
    small = AttentionProblem(seq_len=1024, head_dim=128)
    big = AttentionProblem(batch=64, heads=64, seq_len=65536, head_dim=128)
    l2 = 40 * 1024 * 1024
    for p, expect_zero in ((small, True), (big, False)):
        kv_head = float(p.seq_len_kv_eff) * 256 * 2
        miss = kv_dram_miss(p, kv_head, _ints(8), _ints(216), l2)[0]
        assert bool(miss == 0.0) is expect_zero and 0.0 <= miss <= 1.0


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
    table = build_table(get_family("fa2", Phase.FORWARD, spec), spec, p, SolveOptions())
    seconds = table.perf.time_us * 1e-6
    bandwidth = spec.memory.dram_bandwidth_gb_per_s * 1e9
    assert np.all(table.perf.hbm_bytes / seconds <= bandwidth * (1 + 1e-9))
    assert np.all(table.perf.tflops <= spec.throughput.tensor_fp16_dense_tflops)
    assert np.all((table.perf.overlap >= 0) & (table.perf.overlap <= 1))
    if causal:
        full = build_table(
            get_family("fa2", Phase.FORWARD, spec),
            spec,
            p.model_copy(update={"causal": False}),
            SolveOptions(),
        )
        assert np.all(table.perf.time_us < full.perf.time_us)
