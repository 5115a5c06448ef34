"""The tiled-attention simulator (`tilesolve.solver.apps.simulate`) and `tilesolve-cli simulate`.

The simulator runs FlashAttention-2's forward algorithm tile by tile and compares it with
exact float64 attention. These tests run it over many shapes (odd lengths, padding, causal
with either length longer, GQA, every dtype, tiles from 16 to 256 and odd ones), check that a
deliberately broken kernel fails (so the tolerance can fail), that the rounding to each element
type is the correctly rounded one, that the tile counts agree with the performance model, and
that oversized requests are refused before any array is allocated.
"""

from __future__ import annotations

import importlib
import itertools
import json
import tracemalloc
from typing import Any

import numpy as np
import pytest

from tilesolve.solver import AttentionProblem, InvalidRequestError, SimulationResult, simulate
from tilesolve.solver.apps.simulate import (
    kv_tiles_to_visit,
    modelled_kv_tiles,
    round_to_dtype,
    simulate_tiles,
)
from tilesolve.solver.cost import causal_iterations
from tilesolve.solver.problem import DType

from command_line import run

# The module, not the function `tilesolve.solver.apps.simulate` that shadows it as an attribute.
simulate_module = importlib.import_module("tilesolve.solver.apps.simulate")

# (problem fields, tiles): small arrays, many shapes.
CASES: list[tuple[dict[str, Any], list[tuple[int, int]]]] = [
    # every power-of-two tile from 16 to 256, square and not, on a non-multiple length
    (
        {"seq_len": 1000, "head_dim": 64},
        [(16, 16), (32, 64), (64, 32), (128, 128), (256, 256), (16, 256), (256, 16)],
    ),
    (
        {"seq_len": 1000, "head_dim": 64, "causal": True},
        [(16, 16), (32, 64), (64, 32), (128, 128), (256, 256), (16, 256), (256, 16)],
    ),
    # odd lengths, odd tiles
    ({"seq_len": 1, "head_dim": 32}, [(16, 16), (128, 64)]),
    ({"seq_len": 1, "head_dim": 32, "causal": True}, [(16, 16), (1, 1)]),
    ({"seq_len": 7, "head_dim": 16, "causal": True}, [(16, 16), (3, 5), (1, 1), (7, 7)]),
    ({"seq_len": 100, "head_dim": 48, "causal": True}, [(17, 5), (48, 80), (100, 100)]),
    ({"seq_len": 4097, "seq_len_kv": 97, "head_dim": 16}, [(256, 32), (64, 128)]),
    ({"seq_len": 33, "seq_len_kv": 4097, "head_dim": 16, "causal": True}, [(16, 256), (64, 64)]),
    # seq_len != seq_len_kv, causal both ways (more queries than keys: some rows see nothing)
    ({"seq_len": 100, "seq_len_kv": 7, "head_dim": 32, "causal": True}, [(16, 16), (64, 32)]),
    ({"seq_len": 300, "seq_len_kv": 130, "head_dim": 32, "causal": True}, [(64, 64), (32, 128)]),
    ({"seq_len": 130, "seq_len_kv": 300, "head_dim": 32, "causal": True}, [(64, 64), (128, 32)]),
    # GQA, MQA, batches, head_dim_v != head_dim
    (
        {"batch": 2, "heads": 4, "kv_heads": 2, "seq_len": 200, "head_dim": 32, "causal": True},
        [(64, 64), (32, 16)],
    ),
    ({"heads": 4, "kv_heads": 1, "seq_len": 150, "head_dim": 32}, [(64, 32)]),
    ({"seq_len": 200, "head_dim": 64, "head_dim_v": 32, "causal": True}, [(128, 64)]),
    # the other element types
    ({"seq_len": 500, "head_dim": 64, "dtype": "bf16"}, [(16, 16), (128, 64), (256, 256)]),
    (
        {"seq_len": 500, "head_dim": 64, "dtype": "bf16", "causal": True, "heads": 2},
        [(64, 128)],
    ),
    ({"seq_len": 500, "head_dim": 64, "dtype": "fp8"}, [(16, 16), (128, 128)]),
    (
        {"seq_len": 300, "seq_len_kv": 301, "head_dim": 128, "dtype": "fp8", "causal": True},
        [(64, 64)],
    ),
]


def _case_id(case: tuple[dict[str, Any], list[tuple[int, int]]]) -> str:
    return ",".join(f"{k}={v}" for k, v in case[0].items())


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_tiled_result_within_tolerance_and_tiles_as_modelled(
    case: tuple[dict[str, Any], list[tuple[int, int]]],
) -> None:
    fields, tiles = case
    problem = AttentionProblem(**fields)
    for result in simulate_tiles(problem, tiles, seed=3):
        tile = f"{result.block_m}x{result.block_n}"
        assert result.within_tolerance, (tile, result.max_abs_error, result.tolerance)
        assert result.max_abs_error <= result.tolerance
        assert result.all_blocks_visited_as_modelled, tile
        assert result.blocks_visited == result.blocks_expected
        assert np.isfinite(result.max_abs_error)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_large_logits_stay_within_tolerance(dtype: str) -> None:
    """Logits near +-100 (logit_scale 16): exp never overflows, whatever the tile."""
    problem = AttentionProblem(seq_len=700, head_dim=64, dtype=dtype, causal=True)
    results = simulate_tiles(problem, [(16, 16), (64, 64), (256, 256)], logit_scale=16.0)
    for result in results:
        assert result.max_abs_logit > 50
        assert result.within_tolerance, (result.block_n, result.max_abs_error, result.tolerance)


def test_tolerances_per_dtype_on_unit_scale_data() -> None:
    """The documented values: 2 (u_P + u_out) per unit of max|V|, plus a tiny FP32 term."""
    expected = {
        "fp16": 2 * (2**-11 + 2**-11),
        "bf16": 2 * (2**-8 + 2**-8),
        "fp8": 2 * (2**-4 + 2**-8),
    }
    for dtype, per_unit in expected.items():
        result = simulate(AttentionProblem(seq_len=64, head_dim=32, dtype=dtype), 16, 16)
        per_unit_here = result.tolerance / result.tolerance_scale
        assert per_unit <= per_unit_here <= 1.02 * per_unit  # the FP32 logit term is small
    assert expected["fp16"] == pytest.approx(1.95e-3, rel=1e-2)
    assert expected["bf16"] == pytest.approx(1.56e-2, rel=1e-2)


def test_a_kernel_that_skips_the_rescale_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the online-softmax rescale (alpha = 1) the answer is wrong, and it is caught."""
    problem = AttentionProblem(seq_len=500, head_dim=64, causal=True)
    assert simulate(problem, 64, 64).within_tolerance

    def no_rescale(m_prev: Any, m_cur: Any, scale_log2: Any) -> Any:
        return np.ones_like(m_cur)

    monkeypatch.setattr(simulate_module, "_rescale_factor", no_rescale)
    broken = simulate(problem, 64, 64)
    assert not broken.within_tolerance
    assert broken.max_abs_error > 10 * broken.tolerance
    # one K/V tile per row: nothing to rescale, so the broken kernel is still right
    assert simulate(problem, 64, 512).within_tolerance


def test_fully_masked_rows_are_zero() -> None:
    """seq_len > seq_len_kv, causal: the first rows see no key, and FA2 writes 0 for them."""
    problem = AttentionProblem(seq_len=50, seq_len_kv=10, head_dim=16, causal=True)
    q, k, v = simulate_module.random_inputs(problem, 0, 1.0)
    out32, written, visits, _ = simulate_module.tiled_forward(problem, q, k, v, 16, 16)
    assert np.all(written[0, 0, :40] == 0) and np.all(out32[0, 0, :40] == 0)
    assert np.all(np.any(written[0, 0, 40:] != 0, axis=1))
    assert visits.tolist() == [0, 0, 1, 1]  # query blocks 0 and 1 see nothing: never run
    result = simulate(problem, 16, 16)
    assert result.fully_masked_rows == 40 and result.within_tolerance


def test_visited_tiles_are_those_holding_a_visible_key() -> None:
    """Tiles counted from the explicit mask, the simulator's count, the model's formula, and
    the performance model's closed form (within half a tile per query block) all agree."""
    for sq, sk, bm, bn in itertools.product(
        [1, 7, 100, 300], [1, 9, 100, 300], [16, 64, 128], [16, 32, 128]
    ):
        problem = AttentionProblem(seq_len=sq, seq_len_kv=sk, head_dim=16, causal=True)
        rows = np.arange(sq)[:, None]
        mask = np.arange(sk)[None, :] <= rows + (sk - sq)
        n_m, n_kv = -(-sq // bm), -(-sk // bn)
        from_mask = [
            sum(bool(mask[i * bm : (i + 1) * bm, j * bn : (j + 1) * bn].any()) for j in range(n_kv))
            for i in range(n_m)
        ]
        assert kv_tiles_to_visit(problem, bm, bn).tolist() == from_mask, (sq, sk, bm, bn)
        assert modelled_kv_tiles(problem, bm, bn).tolist() == from_mask, (sq, sk, bm, bn)
        total, _ = causal_iterations(
            np.array([n_m]), np.array([bm], float), np.array([bn], float), np.array([n_kv]), sk - sq
        )
        assert abs(float(total[0]) - sum(from_mask)) <= 0.5 * n_m + 1e-9, (sq, sk, bm, bn)
    dense = AttentionProblem(seq_len=100, seq_len_kv=70, head_dim=16)
    assert modelled_kv_tiles(dense, 32, 16).tolist() == [5, 5, 5, 5]


def test_block_m_only_groups_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows never interact, and tiles a row does not see are no-ops for it, so block_m cannot
    change a row: with an order-independent FP32 matmul the outputs are identical. With BLAS,
    sums in a shape-dependent order may flip the rounding of a few P values (1 ulp of u_P)."""
    problem = AttentionProblem(seq_len=300, head_dim=32, causal=True)
    q, k, v = simulate_module.random_inputs(problem, 1, 1.0)
    a, _, _, _ = simulate_module.tiled_forward(problem, q, k, v, 16, 64)
    b, _, _, _ = simulate_module.tiled_forward(problem, q, k, v, 128, 64)
    assert np.max(np.abs(a - b)) <= 2.0**-11 * np.max(np.abs(v))

    def exact_then_rounded(x: Any, y: Any) -> Any:
        return np.matmul(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)

    monkeypatch.setattr(simulate_module, "_matmul", exact_then_rounded)
    a, _, _, _ = simulate_module.tiled_forward(problem, q, k, v, 16, 64)
    b, _, _, _ = simulate_module.tiled_forward(problem, q, k, v, 128, 64)
    c, _, _, _ = simulate_module.tiled_forward(problem, q, k, v, 64, 64)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_same_seed_same_numbers() -> None:
    problem = AttentionProblem(seq_len=200, head_dim=32, causal=True, dtype="bf16")
    first = simulate(problem, 64, 32, seed=7)
    assert simulate(problem, 64, 32, seed=7) == first
    other = simulate(problem, 64, 32, seed=8)
    assert other.max_abs_error != first.max_abs_error


def test_result_echoes_the_request() -> None:
    problem = AttentionProblem(seq_len=100, head_dim=32, dtype="fp8")
    result = simulate(problem, 32, 16, seed=5, logit_scale=2.5)
    assert isinstance(result, SimulationResult)
    assert (result.problem, result.block_m, result.block_n) == (problem, 32, 16)
    assert (result.seed, result.logit_scale) == (5, 2.5)
    assert result.output_dtype is DType.BF16  # FP8 kernels write BF16
    assert result.max_rel_error == pytest.approx(result.max_abs_error / result.max_abs_reference)


# ---- refusals ------------------------------------------------------------------------------


def _fields(exc: pytest.ExceptionInfo[InvalidRequestError]) -> list[str]:
    return [v.field for v in exc.value.violations]


@pytest.mark.parametrize(
    ("block_m", "block_n", "field"),
    [(0, 64, "block_m"), (4097, 64, "block_m"), (64, 0, "block_n"), (64, 5000, "block_n")],
)
def test_block_sizes_outside_1_to_4096_are_refused(block_m: int, block_n: int, field: str) -> None:
    with pytest.raises(InvalidRequestError) as exc:
        simulate(AttentionProblem(seq_len=10, head_dim=16), block_m, block_n)
    assert _fields(exc) == [field]
    assert "1 to 4096" in exc.value.violations[0].description


def test_other_bad_arguments_are_refused_together() -> None:
    problem = AttentionProblem(seq_len=10, head_dim=16, phase="backward", dropout=0.1)
    with pytest.raises(InvalidRequestError) as exc:
        simulate(problem, 16, 16, seed=-1, logit_scale=0.0)
    assert _fields(exc) == ["seed", "logit_scale", "phase", "dropout"]


def test_a_score_matrix_beyond_2_gib_is_refused_naming_seq_len() -> None:
    tracemalloc.start()
    with pytest.raises(InvalidRequestError) as exc:
        simulate(AttentionProblem(seq_len=20_000, head_dim=64), 128, 128)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 << 20  # refused before any array was allocated
    assert _fields(exc) == ["seq_len"]
    assert "the cap is 2 GiB" in exc.value.violations[0].description


def test_many_heads_beyond_the_cap_are_refused_naming_the_product() -> None:
    problem = AttentionProblem(batch=64, heads=64, seq_len=1000, head_dim=64)
    with pytest.raises(InvalidRequestError) as exc:
        simulate(problem, 64, 64)
    assert _fields(exc) == ["batch"]
    assert "batch x heads" in exc.value.violations[0].description
    assert "2 GiB" in exc.value.violations[0].description
    with pytest.raises(InvalidRequestError) as small_cap:
        simulate(AttentionProblem(seq_len=100, head_dim=16), 16, 16, max_bytes=1000)
    assert "the cap is 9.31e-07 GiB" in small_cap.value.violations[0].description


@pytest.mark.parametrize(
    ("fields", "tile"),
    [
        ({"seq_len": 1000, "head_dim": 64, "batch": 2, "heads": 4, "kv_heads": 2}, (64, 128)),
        ({"seq_len": 1, "head_dim": 64}, (2048, 2048)),  # one step's tiles dominate
        ({"seq_len": 200, "head_dim": 64, "dtype": "fp8"}, (4096, 256)),
    ],
)
def test_the_memory_plan_covers_the_measured_peak(
    fields: dict[str, Any], tile: tuple[int, int]
) -> None:
    tracemalloc.start()
    result = simulate(AttentionProblem(**fields), *tile)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak <= result.estimated_bytes


# ---- rounding ------------------------------------------------------------------------------


def _awkward_float32(rng: np.random.Generator) -> np.ndarray:
    """Random bit patterns, values at every scale, and exact ties of each grid."""
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    scales = [rng.standard_normal(20_000) * s for s in (1e-9, 1e-6, 1e-3, 1, 1e2, 1e4, 1e5)]
    ties = np.arange(-3000, 3000) + 0.5
    return np.concatenate(
        [
            bits.view(np.float32),
            *[x.astype(np.float32) for x in scales],
            *[(ties * 2.0**e).astype(np.float32) for e in (-24, -18, -10, -7, -3, 0, 4)],
            np.array([0.0, -0.0, 65504, 65519.99, 65520, 2**-24, 2**-25, 3 * 2**-26], np.float32),
        ]
    )


def test_fp16_rounding_is_ieee() -> None:
    x = _awkward_float32(np.random.default_rng(0))
    with np.errstate(over="ignore", invalid="ignore"):
        expected = x.astype(np.float16).astype(np.float32)
    got = round_to_dtype(x, DType.FP16)
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    assert same.all(), x[~same][:5]


def test_bf16_rounding_is_nearest_even() -> None:
    x = _awkward_float32(np.random.default_rng(1))
    x = x[np.isfinite(x) & (np.abs(x) < 3e38)]
    bits = x.view(np.uint32).astype(np.uint64)
    low = (bits & 0xFFFF0000).astype(np.uint32).view(np.float32).astype(np.float64)
    high = ((bits & 0xFFFF0000) + 0x10000).astype(np.uint32).view(np.float32).astype(np.float64)
    exact = x.astype(np.float64)
    d_low, d_high = np.abs(exact - low), np.abs(high - exact)
    even_low = ((bits >> 16) & 1) == 0
    expected = np.where(
        d_low < d_high, low, np.where(d_high < d_low, high, np.where(even_low, low, high))
    )
    np.testing.assert_array_equal(round_to_dtype(x, DType.BF16).astype(np.float64), expected)


def _e4m3_grid() -> tuple[np.ndarray, np.ndarray]:
    """Every finite OCP E4M3 (e4m3fn) value >= 0 and whether its code is even."""
    values, even = [], []
    for code in range(0x7F):  # 0x7F is NaN
        exponent, mantissa = code >> 3, code & 7
        if exponent == 0:
            values.append(mantissa / 8 * 2.0**-6)
        else:
            values.append((1 + mantissa / 8) * 2.0 ** (exponent - 7))
        even.append(code % 2 == 0)
    return np.array(values), np.array(even)


def test_fp8_rounding_is_nearest_even_on_the_e4m3_grid_and_saturates() -> None:
    grid, even = _e4m3_grid()
    assert grid.max() == 448.0 and grid[1] == 2.0**-9
    rng = np.random.default_rng(2)
    mids = (grid[1:] + grid[:-1]) / 2
    x = np.concatenate(
        [
            *[rng.standard_normal(5000) * s for s in (1e-3, 0.1, 1, 30, 300, 3000)],
            mids,
            -mids,
            grid,
            [464.0, 480.0, 1e6, -1e6, 1e-9],
        ]
    ).astype(np.float32)
    got = round_to_dtype(x, DType.FP8).astype(np.float64)
    mag = np.minimum(np.abs(x.astype(np.float64)), 448.0)
    distance = np.abs(mag[:, None] - grid[None, :])
    nearest = distance == distance.min(axis=1, keepdims=True)
    pick = np.where(
        nearest.sum(axis=1) == 1, nearest.argmax(axis=1), (nearest & even).argmax(axis=1)
    )
    expected = np.copysign(grid[pick], x)
    np.testing.assert_array_equal(got, expected)


# ---- the command line ----------------------------------------------------------------------

SMALL = ["simulate", "--seq-len", "300", "--head-dim", "32", "--block-m", "64", "--block-n", "32"]


def test_cli_table_within_tolerance_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *SMALL, "--causal", "--kv-heads", "1", "--heads", "2")
    assert code == 0, err
    assert "PASS" in out and "tolerance" in out and "modelled" in out
    assert "tile 64x32" in out and "heads 2 (kv 1)" in out and "causal" in out


def test_cli_json_is_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, *SMALL, "--dtype", "bf16", "--seed", "4", "--logit-scale", "8", "--json"
    )
    assert code == 0
    document = json.loads(out)
    expected = simulate(
        AttentionProblem(seq_len=300, head_dim=32, dtype="bf16"), 64, 32, seed=4, logit_scale=8.0
    )
    assert document == expected.model_dump(mode="json")
    for field in ("max_abs_error", "max_rel_error", "within_tolerance", "blocks_visited"):
        assert field in document


def test_cli_beyond_tolerance_exits_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(simulate_module, "_rescale_factor", lambda m, c, s: np.ones_like(c))
    code, out, err = run(capsys, *SMALL)
    assert code == 1
    assert "FAIL" in out and "beyond the tolerance" in err


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--block-m", "0"], "block_m"),
        (["--block-n", "4097"], "block_n"),
        (["--seed", "-1"], "seed"),
        (["--logit-scale", "0"], "logit_scale"),
        (["--logit-scale", "nan"], "logit_scale"),
        (["--kv-heads", "3", "--heads", "4"], "kv_heads"),
        (["--seq-len", "0"], "seq_len"),
    ],
)
def test_cli_bad_input_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str], extra: list[str], field: str
) -> None:
    code, out, err = run(capsys, *SMALL, *extra)
    assert code == 2 and out == ""
    assert f"error: {field}:" in err


def test_cli_memory_cap_exits_2_naming_the_cap(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "simulate", "--seq-len", "100000", "--head-dim", "64", "--block-m", "128",
        "--block-n", "128",
    )  # fmt: skip
    assert code == 2 and out == ""
    assert err.startswith("error: seq_len:") and "the cap is 2 GiB" in err


def test_cli_help_states_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "--help")
    assert code == 0
    assert "1  it is not" in out and "--block-m" in out and "--logit-scale" in out
