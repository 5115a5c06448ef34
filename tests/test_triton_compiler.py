"""The shared Triton compiler piece (`solver/families/triton_compiler`): the `allocate` call a
family makes with its loops, and the rules it states, checked by their structure (what a stage,
a loop or a lowering adds), not by figures copied from the model. The figures themselves are
checked against the compiled data set in tests/test_compiler_data.py."""

from __future__ import annotations

import numpy as np
import pytest

from tilesolve.solver.families.triton_compiler.allocation import allocate
from tilesolve.solver.families.triton_compiler.loops import (
    AttentionKernel,
    Chain,
    DotLoop,
    Operand,
    Size,
)
from tilesolve.solver.families.triton_compiler.target import CompilerTarget, DotPath

SM80 = CompilerTarget.cuda(8, 0)
SM90 = CompilerTarget.cuda(9, 0)
E = 2  # fp16


def forward_loop(rows: Size, keys: Size, d: int, accumulator_cols: int | None = None) -> DotLoop:
    """A FlashAttention forward loop as a template would describe it: Q resident, K and V
    streamed, P chained into the second dot."""
    return DotLoop(
        name="fwd",
        dots=2,
        operands=(
            Operand("Q", rows, d, resident=True, plain_uses=(0,)),
            Operand("K", keys, d, resident=False, plain_uses=(0,), loaded_before=0),
            Operand("V", keys, d, resident=False, plain_uses=(1,), loaded_before=1),
        ),
        chain=Chain(rows=rows, cols=keys, consumers=(1,), out_cols=d),
        accumulators=((rows, accumulator_cols or d),),
        scores=((rows, keys),),
    )


def arrays(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_each_stage_adds_one_buffer_of_each_streamed_operand() -> None:
    kernel = AttentionKernel((forward_loop(128, 64, 64),))
    stages = arrays(2, 3, 4, 5)
    for target in (SM80, SM90):
        got = allocate(kernel, target, np.full(4, 4, dtype=np.int64), stages).shared_bytes
        assert np.all(np.diff(got) == 2 * 64 * 64 * E), (target.name, got)


def test_warpgroup_mma_keeps_one_more_buffer_than_mma_sync() -> None:
    """mma.sync has read a tile into registers before the next copy lands in its slot (s - 1
    buffers); wgmma reads both operands from shared memory while it runs (s buffers)."""
    kernel = AttentionKernel((forward_loop(128, 64, 64),))
    warps, stages = arrays(4), arrays(3)
    sync = allocate(kernel, SM80, warps, stages)
    group = allocate(kernel, SM90, warps, stages)
    assert sync.dot_paths[0][0] == DotPath.MMA_SYNC and group.dot_paths[0][0] == DotPath.WGMMA
    assert group.shared_bytes[0] - sync.shared_bytes[0] == 2 * 64 * 64 * E


def test_loops_run_one_after_another_share_the_arena() -> None:
    small, large = forward_loop(64, 32, 64), forward_loop(128, 128, 64)
    warps, stages = arrays(4, 4), arrays(2, 3)
    both = allocate(AttentionKernel((small, large)), SM80, warps, stages).shared_bytes
    alone = [
        allocate(AttentionKernel((x,)), SM80, warps, stages).shared_bytes for x in (small, large)
    ]
    assert np.array_equal(both, np.maximum(*alone))


def test_registers_beyond_the_cap_spill_and_the_count_stops_at_the_cap() -> None:
    warps, stages = arrays(4, 4), arrays(2, 2)
    light = allocate(AttentionKernel((forward_loop(64, 32, 64),)), SM80, warps, stages)
    heavy = allocate(AttentionKernel((forward_loop(256, 128, 128, 256),)), SM80, warps, stages)
    assert light.registers is not None and heavy.registers is not None
    assert light.spills is not None and not light.spills.any()
    assert heavy.spills is not None and np.all(heavy.spills > 0)
    assert np.array_equal(heavy.registers.allocated, heavy.registers.cap)
    assert np.array_equal(heavy.registers.spilled, heavy.registers.live - heavy.registers.cap)


def test_amd_gives_lds_and_no_register_figures() -> None:
    kernel = AttentionKernel((forward_loop(128, 64, 128),))
    for gfx in ("gfx942", "gfx950"):
        alloc = allocate(kernel, CompilerTarget.amd(gfx), arrays(4), arrays(2))
        assert alloc.registers is None and alloc.spills is None
        assert alloc.dot_paths[0][0] == DotPath.MFMA and alloc.shared_bytes[0] > 0


def test_bad_descriptions_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="operand X: no dot reads it"):
        Operand("X", 16, 16, resident=True)
    with pytest.raises(ValueError, match="gfx942 or gfx950"):
        CompilerTarget.amd("gfx90a")
    kernel = AttentionKernel((forward_loop(64, 32, 64),))
    with pytest.raises(ValueError, match="warps and stages differ in length: 2 and 1"):
        allocate(kernel, SM80, arrays(4, 4), arrays(2))


def test_candidates_together_get_the_figures_each_gets_alone() -> None:
    """The rules are elementwise over the candidates (each lowering and stage rule evaluated
    only where some candidate takes it): every candidate of a mixed set gets the shared
    memory, registers and spill it gets alone."""
    rng = np.random.default_rng(3)
    n = 600
    rows = rng.choice(arrays(16, 32, 64, 128), n)
    keys = rng.choice(arrays(16, 32, 64, 128), n)
    other = rng.choice(arrays(32, 64, 128, 256), n)
    warps = rng.choice(arrays(2, 4, 8), n)
    stages = rng.choice(arrays(1, 2, 3, 4), n)
    kernel = AttentionKernel((forward_loop(rows, keys, 64), forward_loop(other, keys, 128)))
    for target in (SM80, SM90, CompilerTarget.cuda(10, 0), CompilerTarget.amd("gfx942")):
        together = allocate(kernel, target, warps, stages)
        for i in range(0, n, 7):
            alone = allocate(
                AttentionKernel(
                    (
                        forward_loop(int(rows[i]), int(keys[i]), 64),
                        forward_loop(int(other[i]), int(keys[i]), 128),
                    )
                ),
                target,
                warps[i : i + 1],
                stages[i : i + 1],
            )
            assert together.shared_bytes[i] == alone.shared_bytes[0], (target.name, i)
            if target.is_amd:
                assert together.registers is None and alone.registers is None
                continue
            assert together.registers is not None and alone.registers is not None
            for name in ("live", "cap", "allocated", "spilled"):
                got = getattr(together.registers, name)[i]
                assert got == getattr(alone.registers, name)[0], (target.name, i, name)
