"""CP-SAT and the exhaustive oracle return the same ranked top-k on hundreds of problems,
for every registered family (tests/conftest.py: `compare_engines`, `registered`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tilesolve.solver import AttentionProblem, SolveAnswer, SolveOptions, get_hardware

from conftest import FamilyCase

FA2_HARDWARE = ["a100-80gb", "a100-40gb", "h100-sxm", "h200", "l4", "rtx-4090", "a10", "l40s"]
HEAD_DIMS = [32, 40, 64, 80, 96, 128, 160, 192, 256]


def random_request(rng: np.random.Generator) -> tuple[AttentionProblem, str, SolveOptions]:
    heads = int(rng.choice([1, 4, 8, 16, 32]))
    kv_heads = int(rng.choice([d for d in (1, 2, 4, heads) if heads % d == 0]))
    seq_len = int(rng.integers(1, 20000))
    problem = AttentionProblem(
        batch=int(rng.integers(1, 9)),
        heads=heads,
        kv_heads=kv_heads,
        seq_len=seq_len,
        seq_len_kv=int(rng.integers(1, 20000)) if rng.random() < 0.3 else None,
        head_dim=int(rng.choice(HEAD_DIMS)),
        dtype=str(rng.choice(["fp16", "bf16"])),
        causal=bool(rng.random() < 0.5),
        dropout=0.1 if rng.random() < 0.2 else 0.0,
    )
    roll = rng.random()
    options = SolveOptions(
        top_k=int(rng.integers(1, 8)),
        require_divisible=bool(rng.random() < 0.15),
        max_smem=int(rng.integers(8, 200)) * 1024 if roll < 0.2 else None,
        min_blocks_per_sm=int(rng.integers(1, 4)) if 0.2 <= roll < 0.3 else None,
        block_m=int(rng.choice([32, 64, 128])) if 0.3 <= roll < 0.4 else None,
        num_warps=int(rng.choice([2, 4, 8])) if 0.4 <= roll < 0.45 else None,
    )
    return problem, str(rng.choice(FA2_HARDWARE)), options


@pytest.mark.parametrize("seed", range(6))
def test_cpsat_equals_exhaustive_on_random_fa2_problems(
    seed: int, compare_engines: Callable[..., SolveAnswer | None]
) -> None:
    rng = np.random.default_rng(seed)
    compared = 0
    for _ in range(50):
        problem, hardware, options = random_request(rng)
        # e.g. head_dim 40 is fine for fa2, but some draws are not
        if compare_engines(problem, hardware, options, "none", allow_invalid=True):
            compared += 1
    assert compared >= 40


@pytest.mark.parametrize("hardware", ["v100", "t4", "a100-80gb", "h100-sxm"])
def test_cpsat_equals_exhaustive_for_triton(
    hardware: str, compare_engines: Callable[..., SolveAnswer | None]
) -> None:
    rng = np.random.default_rng(7)
    for _ in range(8):
        problem = AttentionProblem(
            batch=int(rng.integers(1, 5)),
            heads=8,
            seq_len=int(rng.integers(100, 9000)),
            head_dim=int(rng.choice([32, 64, 96, 128])),
            causal=bool(rng.random() < 0.5),
        )
        compare_engines(problem, hardware, SolveOptions(kernel="triton", top_k=5))


@pytest.mark.parametrize("variant", ["plain", "pinned", "capped", "divisible"])
def test_cpsat_equals_exhaustive_for_every_registered_family(
    registered: FamilyCase, variant: str, compare_engines: Callable[..., SolveAnswer | None]
) -> None:
    """Each registration (tests/conftest.py: `registered`) ranks alike with both engines: as
    asked, with the winner's first parameter pinned to another value of its domain, with a
    shared-memory cap and two blocks per SM, and with seq_len divisibility (infeasible for
    many)."""
    options = SolveOptions(kernel=registered.name, top_k=5, choose_page_size=registered.paged)
    hardware, problem = registered.hardware, registered.problem
    if variant == "pinned":
        params = registered.family.request_params(problem, get_hardware(hardware), options)
        first = next(p for p in params if p.pinnable and len(p.domain) > 1)
        best = compare_engines(problem, hardware, options)
        assert best is not None and best.candidates
        other = next(v for v in first.domain if v != best.candidates[0].parameters[first.name])
        options = options.model_copy(update={"parameter_pins": {first.name: other}})
    elif variant == "capped":
        options = options.model_copy(update={"max_smem": 48 * 1024, "min_blocks_per_sm": 2})
    elif variant == "divisible":
        options = options.model_copy(update={"require_divisible": True})
    compare_engines(problem, hardware, options)
