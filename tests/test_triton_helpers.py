"""tilesolve.client.triton: answers as triton.Config lists, the early_config_prune hook, and
`solve --format triton`. The logic is tested against stand-ins with triton.Config's documented
attributes (kwargs, num_warps, num_stages) everywhere, and against the real triton.Config and
autotune contract where Triton is installed (the dev extra installs it on Linux; no GPU needed).
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from tilesolve.client import triton as ts
from tilesolve.client.cli import main
from tilesolve.solver import AttentionProblem, InvalidRequestError, SolveOptions, solve
from tilesolve.solver.solve import prepare


@dataclass
class FakeConfig:
    """triton.Config's documented attributes."""

    kwargs: dict[str, Any]
    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


PROBLEM = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128, causal=True)


def _user_configs(make: Any) -> list[Any]:
    return [
        make({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
        for bm in (64, 128)
        for bn in (32, 64, 128)
        for w in (4, 8)
        for s in (2, 3, 4)
    ]


def _model_order(hardware: str = "h200") -> list[tuple[int, int, int, int]]:
    table = prepare(PROBLEM, hardware, SolveOptions(kernel="triton"))
    c = table.common
    return [
        (
            int(c["block_m"][i]),
            int(c["block_n"][i]),
            int(c["num_warps"][i]),
            int(c["num_stages"][i]),
        )
        for i in table.ranked_feasible()
    ]


def test_keep_top_keeps_the_models_first_of_the_users_configs() -> None:
    configs = _user_configs(FakeConfig)
    prune = ts.early_config_prune_for("h200", problem=lambda args, kw: PROBLEM, top_k=3)
    kept = prune(configs, {"Q": None})
    order = _model_order()
    user = {ts.DEFAULT_NAMES.tile_of(c) for c in configs}
    expected = [t for t in order if t in user][:3]
    assert [ts.DEFAULT_NAMES.tile_of(c) for c in kept] == expected
    assert all(k in configs for k in kept)  # the user's own objects, not copies
    assert prune.last_problem == PROBLEM
    # cached per problem: a second call gives the same
    assert prune(configs, {}) == kept


def test_a_tile_with_several_configurations_takes_its_best_ones_place() -> None:
    """On MI300X the triton family's knobs (waves_per_eu, kpack, the MFMA edge) make several
    configurations of one (BLOCK_M, BLOCK_N, num_warps, num_stages): the hook orders the tile
    by the first of them in the model's ranking, so the model's pick is kept first whatever
    its knobs' other values rank."""
    problem = AttentionProblem(batch=2, heads=32, seq_len=8192, head_dim=64, dtype="bf16")
    prune = ts.early_config_prune_for("mi300x", problem=problem, top_k=1, cache=False)
    order = prune.order(problem)
    table = prepare(problem, "mi300x", SolveOptions(kernel="triton"))
    c = table.common
    first: dict[tuple[int, int, int, int], float] = {}
    repeated = 0
    for position, i in enumerate(table.ranked_feasible()):
        tile = tuple(int(c[k][i]) for k in ("block_m", "block_n", "num_warps", "num_stages"))
        repeated += tile in first
        first.setdefault(tile, float(position))  # type: ignore[arg-type]
    assert repeated > 0 and order == first
    best = min(order, key=order.__getitem__)
    assert order[best] == 0.0
    users = [FakeConfig({"BLOCK_M": t[0], "BLOCK_N": t[1]}, t[2], t[3]) for t in order]
    kept = prune(users[::-1], {})
    assert [ts.DEFAULT_NAMES.tile_of(k) for k in kept] == [best]


def test_unknown_and_rejected_configs_fill_in_only_when_needed() -> None:
    order = {(64, 64, 4, 2): 0.0, (128, 64, 4, 2): 1.0}
    outside = FakeConfig({"BLOCK_M": 48, "BLOCK_N": 64})  # not a tile the model places
    nameless = FakeConfig({"BM": 64})
    a = FakeConfig({"BLOCK_M": 128, "BLOCK_N": 64}, num_stages=2)
    b = FakeConfig({"BLOCK_M": 64, "BLOCK_N": 64}, num_stages=2)
    dup = FakeConfig({"BLOCK_M": 64, "BLOCK_N": 64}, num_stages=2)
    assert ts.keep_top([outside, a, nameless, b, dup], order, 1) == [b]
    assert ts.keep_top([outside, a, nameless, b, dup], order, 2) == [b, a]
    assert ts.keep_top([outside, a, nameless, b], order, 3) == [b, a, outside]
    assert ts.keep_top([outside], order, 2) == [outside]  # never empty
    with pytest.raises(ValueError):
        ts.keep_top([a], order, 0)


def test_meta_names_are_configurable() -> None:
    names = ts.MetaNames("BLOCK_SIZE_M", "BLOCK_SIZE_N", num_stages="NUM_STAGES")
    config = FakeConfig({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "NUM_STAGES": 2}, num_stages=9)
    assert names.tile_of(config) == (128, 64, 4, 2)
    assert names.kwargs((128, 64, 8, 3)) == {
        "BLOCK_SIZE_M": 128,
        "BLOCK_SIZE_N": 64,
        "NUM_STAGES": 3,
    }
    assert ts.DEFAULT_NAMES.tile_of(config) is None


def test_problem_from_tensors_reads_shapes_dtype_and_the_causal_flag() -> None:
    q = types.SimpleNamespace(shape=(2, 16, 1024, 64), dtype="torch.bfloat16")
    k = types.SimpleNamespace(shape=(2, 4, 2048, 64), dtype="torch.bfloat16")
    read = ts.problem_from_tensors()
    p = read({"Q": q, "K": k}, {"STAGE": 3})
    assert (p.batch, p.heads, p.kv_heads, p.seq_len, p.seq_len_kv, p.head_dim) == (
        2,
        16,
        4,
        1024,
        2048,
        64,
    )
    assert p.causal and p.dtype.value == "bf16"
    assert not read({"Q": q, "K": k}, {"STAGE": 1}).causal
    assert read({"Q": q, "K": k, "CAUSAL": True}, {}).causal
    bshd = ts.problem_from_tensors(layout="bshd")
    q2 = types.SimpleNamespace(shape=(2, 1024, 16, 64), dtype="torch.float16")
    k2 = types.SimpleNamespace(shape=(2, 2048, 4, 64), dtype="torch.float16")
    p2 = bshd({"Q": q2, "K": k2}, {})
    assert (p2.heads, p2.kv_heads, p2.seq_len, p2.causal, p2.dtype.value) == (
        16,
        4,
        1024,
        False,
        "fp16",
    )


def test_float32_tensors_are_fp32_and_the_triton_family_refuses_them_by_name() -> None:
    """float32 was read as fp16 once: now the prune hook raises the family's dtype refusal."""
    q = types.SimpleNamespace(shape=(1, 8, 1024, 64), dtype="torch.float32")
    assert ts.problem_from_tensors()({"Q": q, "K": q}, {}).dtype.value == "fp32"
    hook = ts.early_config_prune_for("h100-sxm", cache=False)
    with pytest.raises(InvalidRequestError) as info:
        hook([], {"Q": q, "K": q})
    [violation] = info.value.violations
    assert violation.field == "dtype"
    assert "allowed: fp16, bf16, fp8" in violation.description and "flex" in violation.description


def test_a_tensor_dtype_that_is_no_attention_dtype_is_refused_naming_the_allowed_ones() -> None:
    q = types.SimpleNamespace(shape=(1, 8, 1024, 64), dtype="torch.float64")
    with pytest.raises(InvalidRequestError, match=r"dtype: tensor dtype 'torch.float64' .*float32"):
        ts.problem_from_tensors()({"Q": q, "K": q}, {})


def _exec_source(source: str, triton_module: Any) -> list[Any]:
    ast.parse(source)
    namespace: dict[str, Any] = {}
    code = compile(source.replace("import triton\n", ""), "<configs>", "exec")
    exec(code, {"triton": triton_module}, namespace)
    configs: list[Any] = namespace["configs"]
    return configs


def test_config_source_is_python_defining_the_ranked_configs() -> None:
    answer = solve(PROBLEM, "h200", SolveOptions(kernel="triton", top_k=4))
    fake = types.SimpleNamespace(Config=FakeConfig)
    configs = _exec_source(ts.config_source(answer), fake)
    assert [ts.DEFAULT_NAMES.tile_of(c) for c in configs] == [
        (c.block_m, c.block_n, c.num_warps, c.num_stages) for c in answer.candidates
    ]
    fa3 = solve(PROBLEM, "h200", SolveOptions(kernel="fa3"))
    with pytest.raises(ValueError, match="cannot hold"):
        ts.config_source(fa3)


def test_cli_format_triton(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["solve", "--hardware", "h200", "--kernel", "triton", "--head-dim", "128"]
    args += ["--seq-len", "4096", "--top-k", "3", "--format", "triton"]
    assert main([*args, "--triton-names", "BM,BN"]) == 0
    out = capsys.readouterr().out
    configs = _exec_source(out, types.SimpleNamespace(Config=FakeConfig))
    assert len(configs) == 3 and set(configs[0].kwargs) == {"BM", "BN"}
    assert main([*args, "--json"]) == 2
    assert "two outputs" in capsys.readouterr().err
    assert main([*args, "--triton-names", "1x,BN"]) == 2
    assert "two or four Python identifiers" in capsys.readouterr().err
    assert main([*args[:4], "fa3", *args[5:]]) == 2
    assert "names another family" in capsys.readouterr().err
    assert main([*args[:-2], "--json", "--format", "json"]) == 0
    assert '"candidates"' in capsys.readouterr().out


def test_ranked_prune_from_a_plan() -> None:
    prune = ts.ranked_prune({(64, 64, 4, 2): 1.0, (128, 64, 4, 2): 0.0}, top_k=1)
    a = FakeConfig({"BLOCK_M": 64, "BLOCK_N": 64}, num_stages=2)
    b = FakeConfig({"BLOCK_M": 128, "BLOCK_N": 64}, num_stages=2)
    assert prune([a, b], {}) == [b]


# ---- against the real Triton ----------------------------------------------------------------


def test_real_triton_config_and_autotune_contract() -> None:
    triton = pytest.importorskip("triton")
    import triton.language as tl

    configs = ts.configs("h200", PROBLEM, top_k=3)
    assert all(isinstance(c, triton.Config) for c in configs)
    answer = solve(PROBLEM, "h200", SolveOptions(kernel="triton", top_k=3))
    assert [
        (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in configs
    ] == [(c.block_m, c.block_n, c.num_warps, c.num_stages) for c in answer.candidates]
    from_source = _exec_source(ts.config_source(answer), triton)
    assert [c.all_kwargs() for c in from_source] == [c.all_kwargs() for c in configs]

    @triton.jit
    def kernel(
        Q, K, N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
    ) -> None:  # pragma: no cover
        pass

    user = _user_configs(triton.Config)
    prune = ts.early_config_prune_for(
        "h200", problem=lambda args, kw: PROBLEM.model_copy(update={"seq_len": args["N_CTX"]})
    )
    tuner = triton.autotune(
        configs=user, key=["N_CTX"], prune_configs_by={"early_config_prune": prune}
    )(kernel)
    # What autotune does on a new key (runtime/autotuner.py: run -> prune_configs):
    # early_config_prune(self.configs, self.nargs, **kwargs).
    tuner.nargs = {"Q": None, "K": None, "N_CTX": 4096}
    kept = tuner.prune_configs({})
    assert len(kept) == 3 and all(c in user for c in kept)
    order = _model_order()
    assert [ts.DEFAULT_NAMES.tile_of(c) for c in kept] == [
        t for t in order if t in {ts.DEFAULT_NAMES.tile_of(c) for c in user}
    ][:3]
