"""benchmarks/amd_pingpong.py, the analysis of aiter's assembly FAv3 tiles under two readings of
their wave groups (docs/model.md 19.9): the substitution is scoped (the shipped model comes
back after it, also on an error) and the ping-pong reading is the faster one, by the overlap
it adds and no more."""

from __future__ import annotations

import pytest

from tilesolve.solver.families.ck import cost as ck_cost

from benchmark_module import load_benchmark

pingpong = load_benchmark("amd_pingpong")
ROWS = [
    p
    for p in pingpong.amd_published.points()
    if p.kernel == "aiter_asm" and p.head_dim == 128 and p.head_dim_v == 128
]


def test_the_reading_is_scoped_and_restored() -> None:
    shipped = ck_cost.cu_round
    with pingpong.reading(True):
        assert ck_cost.cu_round is pingpong.ping_pong_round
    assert ck_cost.cu_round is shipped
    with pytest.raises(RuntimeError), pingpong.reading(True):
        raise RuntimeError("inside")
    assert ck_cost.cu_round is shipped


@pytest.mark.parametrize("hardware", ["mi300x", "mi355x"])
def test_ping_pong_is_faster_by_at_most_the_parts_it_overlaps(hardware: str) -> None:
    point = next(p for p in ROWS if p.hardware == hardware and not p.causal)
    one = pingpong.predicted(point, False)
    two = pingpong.predicted(point, True)
    # the one-stream round is at most the sum of the three parts and the stalls, the ping-pong
    # round at least their largest: never more than three times faster
    assert one < two < 3.0 * one, (one, two)
