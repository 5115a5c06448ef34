"""The flex family (FlexAttention's Triton templates): answers on every sm80+ device, the
templates' legality, the block mask's iterations worked by hand, and its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from tilesolve.solver import (
    AttentionProblem,
    InvalidRequestError,
    SolveOptions,
    get_hardware,
    hardware_names,
    solve,
)
from tilesolve.solver.families.flex.mask import block_counts, iterations_for
from tilesolve.solver.families.flex.template import flex_head_dims
from tilesolve.solver.space import ConfigArrays

SM80_PLUS = [
    name
    for name in hardware_names()
    if get_hardware(name).arch == "cuda"
    and (get_hardware(name).sm.cc_major, get_hardware(name).sm.cc_minor) >= (8, 0)
]
HEAD_DIMS = [(64, None), (96, None), (128, None), (192, 128), (256, None)]


def _answer(hardware: str, options: SolveOptions | None = None, **problem: object) -> object:
    fields = {"seq_len": 2048, "head_dim": 128, **problem}
    return solve(AttentionProblem(**fields), hardware, options or SolveOptions(kernel="flex"))


@pytest.mark.parametrize("hardware", SM80_PLUS)
def test_every_sm80_device_answers_within_its_shared_memory(hardware: str) -> None:
    limit = get_hardware(hardware).sm.smem_per_block_optin_bytes
    for head_dim, head_dim_v in HEAD_DIMS:
        for dtype in ("fp16", "bf16"):
            answer = _answer(
                hardware, head_dim=head_dim, head_dim_v=head_dim_v, dtype=dtype, causal=True
            )
            assert answer.status.value == "optimal", (hardware, head_dim, dtype)
            for candidate in answer.candidates:
                smem = next(u for u in candidate.resources if u.name == "shared_memory")
                assert smem.used <= limit
                assert 128 % candidate.block_m == 0
                assert 128 % candidate.block_n == 0


def test_head_dims_round_to_powers_of_two_separately() -> None:
    problem = AttentionProblem(seq_len=128, head_dim=192, head_dim_v=128)
    assert flex_head_dims(problem) == (256, 128)
    assert flex_head_dims(AttentionProblem(seq_len=128, head_dim=96)) == (128, 128)


def test_causal_block_counts_by_hand() -> None:
    """512 x 512 causal at block size 128: query block q lists q + 1 K/V blocks, the diagonal
    one partial; the full query blocks (0..2) list 1 + 2 + 3, the last 4."""
    problem = AttentionProblem(seq_len=512, head_dim=64, causal=True)
    counts = block_counts(problem, SolveOptions())
    assert (counts.nonempty, counts.partial) == (6.0, 3.0)
    assert (counts.last_nonempty, counts.last_partial, counts.last_rows) == (4.0, 1.0, 128)
    cfg = ConfigArrays({"block_m": np.array([64]), "block_n": np.array([32])})
    it = iterations_for(problem, SolveOptions(), cfg, np.array([16]))
    assert it is not None
    # (6 + 4) listed blocks x 2 programs x 4 iterations each; 4 partial x 2 x 4
    assert float(it.total[0]) == 80.0
    assert float(it.diagonal[0]) == 32.0


def test_window_block_counts_by_hand() -> None:
    """A causal window of 128 at block size 128: every query block after the first lists its
    diagonal block and the one before, both partial."""
    problem = AttentionProblem(seq_len=512, head_dim=64, causal=True)
    counts = block_counts(problem, SolveOptions(window=128))
    assert (counts.nonempty, counts.partial) == (5.0, 5.0)
    assert (counts.last_nonempty, counts.last_partial) == (2.0, 2.0)


def test_sparsity_shortens_the_predicted_time() -> None:
    dense = _answer("a100-80gb", seq_len=8192)
    causal = _answer("a100-80gb", seq_len=8192, causal=True)
    window = _answer(
        "a100-80gb", SolveOptions(kernel="flex", window=512), seq_len=8192, causal=True
    )
    sparse = _answer("a100-80gb", SolveOptions(kernel="flex", block_density=0.1), seq_len=8192)
    times = [a.candidates[0].predicted_time_us for a in (dense, causal, window, sparse)]
    assert times[0] > times[1] > times[2]
    assert times[3] < times[1]


def test_a_score_mod_costs_time() -> None:
    plain = _answer("h100-sxm", seq_len=8192)
    modded = _answer("h100-sxm", SolveOptions(kernel="flex", score_mod_ops=20.0), seq_len=8192)
    assert modded.candidates[0].predicted_time_us > plain.candidates[0].predicted_time_us


def test_a_smaller_block_mask_caps_the_tiles() -> None:
    answer = _answer("a100-80gb", SolveOptions(kernel="flex", sparse_block_size=32, top_k=10))
    assert all(c.block_m <= 32 and c.block_n <= 32 for c in answer.candidates)


@pytest.mark.parametrize(
    ("problem", "options", "field"),
    [
        ({"dtype": "fp8"}, {}, "dtype"),
        ({"head_dim": 8}, {}, "head_dim"),
        ({"head_dim": 512}, {}, "head_dim"),
        ({"dropout": 0.1}, {}, "dropout"),
        ({}, {"sparse_block_size": 24}, "sparse_block_size"),
        ({}, {"window": 64, "block_density": 0.5}, "block_density"),
    ],
)
def test_bad_input_names_the_rule(problem: dict, options: dict, field: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _answer("a100-80gb", SolveOptions(kernel="flex", **options), **problem)
    assert field in [v.field for v in caught.value.violations]


def test_older_devices_are_refused() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _answer("t4")
    assert "8.0" in caught.value.violations[0].description


def test_other_families_refuse_block_mask_options() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _answer("a100-80gb", SolveOptions(kernel="triton", window=64))
    assert caught.value.violations[0].field == "window"


def test_a_pinned_tile_that_does_not_divide_the_block_mask_is_infeasible() -> None:
    answer = _answer("a100-80gb", SolveOptions(kernel="flex", block_m=128, sparse_block_size=64))
    assert answer.status.value == "infeasible"
    assert any(step.constraint == "sparse_block" for step in answer.funnel)


def test_engines_agree_on_masked_problems(compare_engines) -> None:  # type: ignore[no-untyped-def]
    for options in (
        SolveOptions(kernel="flex", window=256),
        SolveOptions(kernel="flex", block_density=0.3, sparse_block_size=64),
    ):
        problem = AttentionProblem(seq_len=3000, head_dim=96, causal=True, heads=8)
        compare_engines(problem, "l4", options)


@pytest.mark.parametrize("hardware", ["a100-80gb", "rtx-4090", "h100-sxm", "l4", "b200"])
def test_backward_answers_obey_the_templates_asserts(hardware: str) -> None:
    limit = get_hardware(hardware).sm.smem_per_block_optin_bytes
    for head_dim, head_dim_v in HEAD_DIMS:
        answer = _answer(
            hardware, head_dim=head_dim, head_dim_v=head_dim_v, causal=True, phase="backward"
        )
        assert answer.status.value == "optimal", (hardware, head_dim)
        for c in answer.candidates:
            p = c.parameters
            assert p["block_n1"] % p["block_m1"] == 0
            assert p["block_m2"] % p["block_n2"] == 0
            assert all(128 % p[t] == 0 for t in ("block_m1", "block_n1", "block_m2", "block_n2"))
            assert (c.block_m, c.block_n) == (p["block_m1"], p["block_n1"])
            assert c.smem_bytes is not None and c.smem_bytes <= limit


def test_decode_packs_the_group_and_splits() -> None:
    answer = _answer("h100-sxm", seq_len=1, seq_len_kv=8192, heads=32, kv_heads=8, phase="decode")
    assert answer.status.value == "optimal"
    best = answer.candidates[0].parameters
    assert best["block_m"] == 16  # 1 row x group 4 -> 4, raised to 16
    assert best["num_splits"] >= 1 and 128 % best["block_n"] == 0


def test_decode_refuses_a_group_that_is_not_a_power_of_two() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _answer("h100-sxm", seq_len=1, seq_len_kv=4096, heads=12, kv_heads=4, phase="decode")
    assert "kv_heads" in [v.field for v in caught.value.violations]


@pytest.mark.parametrize(
    ("seq_len", "heads", "size", "legal"),
    [(2, 64, 128, True), (4, 64, 128, False), (4, 64, 256, True), (4, 16, 48, False),
     (1, 16, 48, True)],
)  # fmt: skip
def test_decode_packed_rows_meet_the_block_mask(
    seq_len: int, heads: int, size: int, legal: bool
) -> None:
    """FlexDecoding's lowering raises ValueError unless the block mask's BLOCK_SIZE is a
    multiple of BLOCK_M = max(next_pow2(seq_len x group), 16): never offered when illegal,
    refused naming the packed rows and the block size."""
    problem = {"seq_len": seq_len, "seq_len_kv": 8192, "heads": heads, "kv_heads": 1,
               "phase": "decode"}  # fmt: skip
    options = SolveOptions(kernel="flex", sparse_block_size=size, top_k=20)
    if legal:
        answer = _answer("h100-sxm", options, **problem)
        assert answer.candidates
        assert all(size % c.parameters["block_m"] == 0 for c in answer.candidates)
        return
    with pytest.raises(InvalidRequestError) as caught:
        _answer("h100-sxm", options, **problem)
    violation = caught.value.violations[0]
    assert violation.field == "seq_len"
    assert f"{seq_len * heads} query rows" in violation.description
    assert str(size) in violation.description
    pinned = options.model_copy(update={"parameter_pins": {"num_warps": 4}})
    with pytest.raises(InvalidRequestError):
        _answer("h100-sxm", pinned, **problem)


def test_backward_engines_agree_with_a_window(compare_engines) -> None:  # type: ignore[no-untyped-def]
    problem = AttentionProblem(seq_len=2048, head_dim=64, causal=True, phase="backward")
    compare_engines(problem, "rtx-3090", SolveOptions(kernel="flex", window=256))
