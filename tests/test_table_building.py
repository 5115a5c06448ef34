"""The helpers that build a candidate table quickly, each against the plain computation it
replaces: the product's order, the leading sub-product, power-of-two alignment, the tie-break
order from one packed key, the inner choice over the candidates alone, and the fa3 backward
structure derived once per choice of the parameters before its stages."""

from __future__ import annotations

import itertools
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tilesolve.solver.candidates import _combined_order, tie_break_order
from tilesolve.solver.families.ascend.cost import _bottlenecks as ascend_bottlenecks
from tilesolve.solver.families.cuda.backward import inner_rank
from tilesolve.solver.families.fa3.backward_shape import (
    STAGE_PARAMS,
    _derive_structure,
    backward_params,
    backward_structure,
)
from tilesolve.solver.families.fa3.cost import _bottlenecks as fa3_bottlenecks
from tilesolve.solver.problem import SolveOptions
from tilesolve.solver.space import ConfigArrays, Param, align_up, ceil_div

PARAMS = (
    Param("a", (16, 32, 64), ""),
    Param("b", (1, 2), ""),
    Param("c", (7,), ""),
    Param("d", (0, 1, 2, 5), ""),
)


def test_product_is_itertools_product_in_declaration_order() -> None:
    cfg = ConfigArrays.product(PARAMS)
    rows = list(zip(*(cfg[p.name].tolist() for p in PARAMS), strict=True))
    assert rows == list(itertools.product(*(p.domain for p in PARAMS)))
    assert cfg.product_of == PARAMS


def test_leading_gives_the_smaller_product_and_each_rows_index_in_it() -> None:
    cfg = ConfigArrays.product(PARAMS)
    found = cfg.leading(("c", "d"))
    assert found is not None
    lead, rows = found
    assert lead.names == ("a", "b")
    for name in lead.names:
        assert np.array_equal(lead[name][rows], cfg[name])


@pytest.mark.parametrize("trailing", [("b",), ("a", "b", "c", "d"), ("b", "d"), ()])
def test_leading_refuses_what_is_not_a_trailing_part_of_a_product(
    trailing: tuple[str, ...],
) -> None:
    assert ConfigArrays.product(PARAMS).leading(trailing) is None


def test_leading_refuses_configurations_that_are_not_a_product() -> None:
    cfg = ConfigArrays.product(PARAMS).take(np.arange(5))
    assert cfg.leading(("d",)) is None


def test_align_up_is_the_ceiling_multiple() -> None:
    x = np.arange(0, 5000, 7, dtype=np.int64)
    for align in (1, 16, 128, 1024):
        assert np.array_equal(align_up(x, align), ceil_div(x, align) * align)
    with pytest.raises(ValueError, match="power of two"):
        align_up(x, 96)


def _keys(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    return [
        rng.integers(0, 4, n),  # few values: many ties
        -rng.integers(0, 300, n),  # negative keys (Ascend's)
        rng.integers(100_000, 100_010, n),
    ]


def test_packed_tie_break_order_is_lexsorts() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 2, 50, 4000):
        keys = _keys(rng, n)
        expected = np.lexsort([*reversed(keys)])
        order = _combined_order(keys, n)
        assert order is not None
        assert np.array_equal(order, expected)
        position = tie_break_order(keys, n)
        assert np.array_equal(np.argsort(position), expected)
    assert np.array_equal(tie_break_order([], 4), np.arange(4))


def test_packed_tie_break_order_falls_back_where_it_cannot_pack() -> None:
    n = 100
    rng = np.random.default_rng(3)
    floats: list[Any] = [rng.random(n)]  # a family's key of the wrong kind
    wide: list[Any] = [rng.integers(0, 2**40, n), rng.integers(0, 2**20, n)]
    assert _combined_order(floats, n) is None
    assert _combined_order(wide, n) is None
    for keys in (floats, wide):
        assert np.array_equal(np.argsort(tie_break_order(keys, n)), np.lexsort([*reversed(keys)]))


def _inner_rank_by_groups(
    cfg: ConfigArrays,
    inner: tuple[str, ...],
    options: SolveOptions,
    aligned: Any,
    fits: Any,
    time_us: Any,
) -> Any:
    """The inner choice one outer group at a time, in plain Python."""
    outer = [n for n in cfg.names if n not in inner]
    rank = np.ones(len(cfg), dtype=np.int64)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in range(len(cfg)):
        groups.setdefault(tuple(int(cfg[n][i]) for n in outer), []).append(i)
    for members in groups.values():
        candidates = [
            i
            for i in members
            if aligned[i]
            and all(
                cfg[n][i] == options.parameter_pins[n] for n in inner if n in options.parameter_pins
            )
        ]
        if candidates:
            best = min(candidates, key=lambda i: (not fits[i], round(time_us[i] * 1000.0), i))
            rank[best] = 0
    return rank


@pytest.mark.parametrize("pins", [{}, {"d": 2}, {"b": 2, "d": 5}])
def test_inner_rank_over_the_candidates_alone_is_the_per_group_choice(pins: dict[str, int]) -> None:
    cfg = ConfigArrays.product(PARAMS)
    rng = np.random.default_rng(11)
    n = len(cfg)
    aligned = rng.random(n) < 0.4
    fits = rng.random(n) < 0.7
    time_us = np.round(rng.random(n) * 5.0, 2)  # ties in whole nanoseconds
    options = SolveOptions(parameter_pins=pins)
    inner = ("b", "d")
    got = inner_rank(cfg, inner, options, aligned, fits, time_us)
    assert np.array_equal(got, _inner_rank_by_groups(cfg, inner, options, aligned, fits, time_us))
    none = inner_rank(cfg, inner, options, np.zeros(n, dtype=np.bool_), fits, time_us)
    assert (none == 1).all()


@pytest.mark.parametrize("head_dim", [64, 96, 128, 192, 256])
def test_fa3_backward_structure_over_its_space_is_the_rowwise_derivation(head_dim: int) -> None:
    cfg = ConfigArrays.product(backward_params())
    assert cfg.names[-len(STAGE_PARAMS) :] == STAGE_PARAMS
    fast, plain = backward_structure(cfg, head_dim), _derive_structure(cfg, head_dim)
    for f in fields(plain):
        a, b = getattr(fast, f.name), getattr(plain, f.name)
        if hasattr(b, "ok"):  # a GemmLayout
            for g in fields(b):
                assert np.array_equal(getattr(a, g.name), getattr(b, g.name)), (f.name, g.name)
        else:
            assert np.array_equal(a, b), f.name
    rows = np.flatnonzero(plain.ok)[::7]
    taken, derived = plain.take(rows), _derive_structure(cfg.take(rows), head_dim)
    assert np.array_equal(taken.ok, derived.ok)
    assert np.array_equal(taken.dkv.wg_n, derived.dkv.wg_n)


def _grid(rng: np.random.Generator, n: int, scale: float = 1.0) -> Any:
    """Values on a coarse grid, so that the comparisons meet ties and near-ties."""
    return np.round(rng.random(n) * 8.0) * scale


def test_fa3_bottleneck_words_are_the_first_rule_that_holds() -> None:
    rng = np.random.default_rng(21)
    n = 3000
    tensor, softmax, fixed = _grid(rng, n), _grid(rng, n), _grid(rng, n)
    smem, core = _grid(rng, n), _grid(rng, n)
    rounds, compute, cycles = _grid(rng, n), _grid(rng, n), _grid(rng, n) + 1.0
    dram, waves = _grid(rng, n), _grid(rng, n, 0.125)
    got = fa3_bottlenecks(tensor, softmax, fixed, smem, core, rounds, compute, cycles, dram, waves)
    names = (
        "tensor cores (wgmma)",
        "softmax exp (SFU) not hidden by the GEMMs",
        "per-iteration overhead",
    )
    expected = []
    for i in range(n):
        if dram[i] >= cycles[i] * 0.999:
            expected.append("HBM bandwidth")
        elif waves[i] < 0.5:
            expected.append("too few query tiles to fill the SMs")
        elif rounds[i] > compute[i] * 1.0001:
            expected.append("K/V load latency")
        elif smem[i] > core[i]:
            expected.append("shared-memory bandwidth")
        else:
            expected.append(names[int(np.argmax([tensor[i], softmax[i], fixed[i]]))])
    assert got == expected
    assert len(set(got)) == 7  # every rule was reached


def test_ascend_bottleneck_words_are_the_first_rule_that_holds() -> None:
    rng = np.random.default_rng(22)
    n = 4000
    rd = SimpleNamespace(
        **{f: _grid(rng, n) for f in ("cube", "mte2", "mte1", "fix", "vload", "vec", "vstore")},
        aic=_grid(rng, n),
        aiv=_grid(rng, n),
        chain=_grid(rng, n, 2.0),
        l2_bytes=_grid(rng, n),
    )
    rates = SimpleNamespace(l2_total=2.0)
    period, stages = _grid(rng, n) + 1.0, rng.integers(1, 4, n).astype(np.float64)
    active, kernel, dram = _grid(rng, n, 0.25), _grid(rng, n) + 1.0, _grid(rng, n)
    waves = _grid(rng, n, 0.125)
    got = ascend_bottlenecks(rd, period, stages, active, rates, kernel, dram, waves)  # type: ignore[arg-type]
    aic_names = (
        "MTE2 loads into L1 (K, V, P)",
        "MTE1 (L1 -> L0A/L0B)",
        "cube unit",
        "FIXPIPE (S and O out of L0C)",
    )
    aiv_names = ("vector loads (S, O into UB)", "vector unit (softmax)", "vector stores (P)")
    expected = []
    for i in range(n):
        l2 = rd.l2_bytes[i] * active[i] / rates.l2_total
        if dram[i] >= kernel[i] * 0.999:
            expected.append("HBM bandwidth")
        elif waves[i] < 0.5:
            expected.append("too few blocks to fill the AI cores")
        elif stages[i] < 2:
            expected.append("no pipelining (single-buffered): cube and vector wait on each other")
        elif l2 >= period[i] * 0.999:
            expected.append("L2 bandwidth (the cube-vector exchange)")
        elif rd.chain[i] / stages[i] >= period[i] * 0.999 and rd.chain[i] / stages[i] > max(
            rd.aic[i], rd.aiv[i]
        ):
            expected.append("cube-vector hand-off latency")
        elif rd.aic[i] >= rd.aiv[i]:
            pipes = [rd.mte2[i], rd.mte1[i], rd.cube[i], rd.fix[i]]
            expected.append(aic_names[int(np.argmax(pipes))])
        else:
            pipes = [rd.vload[i], rd.vec[i], rd.vstore[i]]
            expected.append(aiv_names[int(np.argmax(pipes))])
    assert got == expected
    assert len(set(got)) >= 10
