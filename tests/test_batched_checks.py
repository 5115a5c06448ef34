"""A family's `check_all` (the validator's re-check, vectorised over the ranked configurations)
says of each configuration exactly what its `check` says of it alone: for the families whose
`check` adds rules of their own (flex's block mask) as for the others, on configurations that
fit and configurations that break a rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware
from tilesolve.solver.candidates import build_candidate_table
from tilesolve.solver.solve import check_request

CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("a100-80gb", "flex", {"phase": "forward", "head_dim": 128}, {}),
    ("h100-sxm", "flex", {"phase": "forward", "head_dim": 64, "causal": True}, {"max_smem": 90000}),
    ("rtx-4090", "flex", {"phase": "backward", "head_dim": 128}, {}),
    ("a10", "flex", {"phase": "backward", "head_dim": 64, "causal": True}, {}),
    ("a100-80gb", "flex", {"phase": "decode", "head_dim": 128, "seq_len": 1}, {}),
    ("a100-80gb", "triton", {"phase": "backward", "head_dim": 64}, {}),
    ("h100-sxm", "fa3", {"phase": "backward", "head_dim": 128}, {}),
    ("a100-80gb", "fa2", {"phase": "forward", "head_dim": 128}, {}),
]


@pytest.mark.parametrize(("hardware", "kernel", "shape", "extra"), CASES)
def test_check_all_is_check_of_each(
    hardware: str, kernel: str, shape: dict[str, Any], extra: dict[str, Any]
) -> None:
    problem = AttentionProblem(
        **({"batch": 2, "heads": 16, "kv_heads": 4, "seq_len": 2048} | shape)
    )
    options = SolveOptions(kernel=kernel, **extra)
    checked = check_request(problem, hardware, options)
    table = build_candidate_table(checked.family, checked.hardware, problem, options)
    rng = np.random.default_rng(5)
    feasible = np.flatnonzero(table.feasible)
    others = np.flatnonzero(~table.feasible)
    rows = [
        *rng.choice(feasible, size=min(6, len(feasible)), replace=False),
        *rng.choice(others, size=min(6, len(others)), replace=False),
    ]
    configs = [table.cfg.config(int(i)) for i in rows]
    family, spec = checked.family, get_hardware(hardware)
    batched = family.check_all(spec, problem, options, configs)
    alone = [family.check(spec, problem, options, config) for config in configs]
    assert batched == alone
    assert any(alone) and not all(alone)  # both kinds were checked
