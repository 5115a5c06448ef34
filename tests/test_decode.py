"""Decode, split-KV, GQA packing and paged KV (docs/model.md section 13): the issue's decode
example and its sweep, the split-KV cost pieces by hand, the forward families unchanged where
nothing splits, chunked prefill, bad input, the engines' agreement, --json and gRPC."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
import pytest

from tilesolve import wire
from tilesolve.solver import (
    AttentionProblem,
    CudaDevice,
    InvalidRequestError,
    Phase,
    SolveAnswer,
    SolveOptions,
    get_hardware,
    solve,
)
from tilesolve.solver.candidates import build_candidate_table, evaluation
from tilesolve.solver.cost import L2_USABLE_FRACTION
from tilesolve.solver.dispatch import ByDevice
from tilesolve.solver.families.cuda.timing import cuda_rates
from tilesolve.solver.registry import get_family
from tilesolve.solver.space import ConfigArrays
from tilesolve.solver.split_kv import (
    DECODE_MAX_QUERY_ROWS,
    PAGE_ADDRESS_CYCLES,
    UnitRates,
    combine_cost,
    num_splits_domain,
    paged_lookup_cycles,
    split_problem,
    take_rows,
    visible_keys,
)
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from command_line import run
from loopback import violations

DECODE = Phase.DECODE
# The example: Llama-style GQA decode against a 32k cache.
EXAMPLE = [
    "solve", "--hardware", "h100-sxm", "--kernel", "fa2", "--head-dim", "128", "--seq-len", "1",
    "--seq-len-kv", "32768", "--heads", "32", "--kv-heads", "8",
]  # fmt: skip


def decode(**fields: Any) -> AttentionProblem:
    base: dict[str, Any] = {"heads": 32, "kv_heads": 8, "seq_len": 1, "seq_len_kv": 32768}
    return AttentionProblem(**{**base, "head_dim": 128, "phase": DECODE, **fields})


def kv_bytes(p: AttentionProblem) -> float:
    return float(p.batch * p.kv_heads_eff * p.seq_len_kv_eff * 2 * p.head_dim * p.dtype.bytes)


# ---- the decode example ----------------------------------------------------------------


def test_the_decode_example_splits_packs_and_streams_near_the_bandwidth(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, *EXAMPLE, "--phase", "decode", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["status"] == "optimal"
    best = answer["candidates"][0]
    assert best["num_splits"] > 1 and best["parameters"]["num_splits"] == best["num_splits"]
    assert best["pack_gqa"] is True and best["parameters"]["pack_gqa"] == 1
    assert best["page_size"] is None and "page_size" not in best["parameters"]
    assert best["block_n"] >= 64
    spec = get_hardware("h100-sxm")
    ideal_us = kv_bytes(decode()) / (spec.memory.dram_bandwidth_gb_per_s * 1e9) * 1e6
    assert 1.0 * ideal_us <= best["predicted_time_us"] <= 1.8 * ideal_us
    # the forward phase of the same shape (one query row against the cache) splits too
    code, out, _ = run(capsys, *EXAMPLE, "--json")
    forward = json.loads(out)["candidates"][0]
    assert code == 0 and forward["num_splits"] > 1 and forward["pack_gqa"] is True


SWEEP = [
    (hardware, head_dim, batch, kv_heads)
    for hardware in ("h100-sxm", "a100-80gb")
    for head_dim in (64, 128)
    for batch in (1, 2, 3, 4, 8, 13, 16, 17, 32, 64)
    for kv_heads in (8, 32)
]


@pytest.mark.parametrize(("hardware", "head_dim", "batch", "kv_heads"), SWEEP)
def test_decode_splits_when_the_grid_underfills(
    hardware: str, head_dim: int, batch: int, kv_heads: int
) -> None:
    """Split-KV when batch x kv_heads is below the SM count, none when it fills the SMs twice
    over (between, FA2's 64-row split-KV tile leaves a partial wave that the model weighs
    against the combine kernel); GQA packed; K/V tiles of 64 keys or more; within 1.0-1.8x
    of the K/V bytes at the peak bandwidth (100 MB and up)."""
    problem = decode(batch=batch, kv_heads=kv_heads, head_dim=head_dim)
    spec = get_hardware(hardware)
    assert isinstance(spec, CudaDevice)
    options = SolveOptions(kernel="fa2", engine="exhaustive", top_k=1)
    best = solve(problem, spec, options).candidates[0]
    assert best.num_splits is not None
    grid, sms = batch * kv_heads, spec.throughput.sm_count
    if grid < sms or grid >= 2 * sms:
        assert (best.num_splits > 1) == (grid < sms)
    assert best.pack_gqa is (True if kv_heads < 32 else None)
    assert best.block_n is not None and best.block_n >= 64
    cache = kv_bytes(problem)
    if cache >= 100e6:
        ideal_us = cache / (spec.memory.dram_bandwidth_gb_per_s * 1e9) * 1e6
        assert 1.0 * ideal_us <= best.predicted_time_us <= 1.8 * ideal_us


@pytest.mark.parametrize("head_dim", [32, 64, 96, 128, 160, 192, 256])
@pytest.mark.parametrize("hardware", ["a100-80gb", "rtx-4090", "h100-sxm"])
def test_fa2_decode_names_only_its_split_kv_kernels_tile(hardware: str, head_dim: int) -> None:
    """FlashAttention-2's decode kernel is one template instance per head dim
    (run_mha_fwd_splitkv_dispatch, flash_fwd_launch_template.h v2.8.3 lines 164-170): 64 query
    rows, 256 keys up to head dim 64, 128 up to 128, 64 above; 4 warps."""
    block_n = 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64
    for seq_len, kv_heads in ((1, 8), (1, 32), (16, 32)):
        problem = decode(head_dim=head_dim, seq_len=seq_len, kv_heads=kv_heads)
        answer = solve(problem, hardware, SolveOptions(kernel="fa2", top_k=10))
        assert answer.candidates
        assert {(c.block_m, c.block_n, c.num_warps) for c in answer.candidates} == {
            (64, block_n, 4)
        }


def test_decode_before_and_after() -> None:
    """The example was a forward problem of 0.08 waves (326 us on model 0.2.0); decode splits
    it over the SMs and reads each KV head's cache once per group."""
    spec = get_hardware("h100-sxm")
    one_split = SolveOptions(kernel="fa2", top_k=1, parameter_pins={"num_splits": 1})
    unsplit = solve(decode(), spec, one_split).candidates[0]
    best = solve(decode(), spec, SolveOptions(kernel="fa2", top_k=1)).candidates[0]
    assert best.predicted_time_us * 4 < unsplit.predicted_time_us
    assert "busy SMs" in unsplit.bottleneck or "fill" in unsplit.bottleneck


# ---- the split-KV pieces by hand ------------------------------------------------------------


def test_the_split_problem_packs_the_group_and_divides_the_keys() -> None:
    p = decode(batch=3, seq_len=2, seq_len_kv=1000)
    packed = split_problem(p, 4, True)
    assert (packed.batch, packed.heads, packed.kv_heads) == (12, 8, 8)
    assert (packed.seq_len, packed.seq_len_kv, packed.causal) == (8, 250, False)
    plain = split_problem(p, 3, False)
    assert (plain.batch, plain.heads, plain.seq_len, plain.seq_len_kv) == (9, 32, 2, 334)
    # a split's tiles are the kernel's: ceil(ceil(Sk/S)/bn) == ceil(ceil(Sk/bn)/S)
    for keys, s, bn in ((1000, 3, 64), (32768, 16, 128), (4097, 8, 256), (77, 4, 16)):
        assert math.ceil(math.ceil(keys / s) / bn) == math.ceil(math.ceil(keys / bn) / s)


def test_causal_rows_see_the_mean_visible_keys() -> None:
    assert visible_keys(AttentionProblem(seq_len=1, seq_len_kv=4096, head_dim=64)) == 4096
    causal = AttentionProblem(seq_len=4, seq_len_kv=10, head_dim=64, causal=True)
    assert visible_keys(causal) == math.ceil((7 + 8 + 9 + 10) / 4)  # rows see 7, 8, 9, 10 keys


def test_num_splits_domain_is_powers_of_two_up_to_the_kv_tiles() -> None:
    assert num_splits_domain(decode(seq_len_kv=32768), 16) == (1, 2, 4, 8, 16, 32, 64, 128)
    assert num_splits_domain(decode(seq_len_kv=100), 16) == (1, 2, 4)  # 7 tiles
    assert num_splits_domain(decode(seq_len_kv=16), 16) == (1,)


def test_combine_cost_by_hand() -> None:
    rates = UnitRates(
        units=100,
        dram_bytes_per_s=2e12,
        l2_bytes_per_s=6e12,
        l2_bytes=40 << 20,
        l2_round_trip_s=200e-9,
        block_start_s=100e-9,
        launch_us=3.0,
    )
    p = decode(batch=1, heads=32, kv_heads=8, head_dim=128)
    splits = np.array([1, 16], dtype=np.int64)
    combine = combine_cost(p, splits, 128, rates, rows_per_block=4)
    rows = 32
    partial = 16 * rows * (4 * 128 + 4)  # FP32 O and LSE per row per split, from L2
    out = rows * (2 * 128 + 4)
    busy = 8 / 100  # 8 combine blocks of 4 rows on 100 units
    transfer = max(partial / (6e12 * busy), out / (2e12 * busy))
    expected = 3.0 + (100e-9 + 2 * 200e-9 + transfer) * 1e6  # the launch, then the work
    assert combine.time_us[0] == 0.0 and combine.hbm_bytes[0] == 0.0
    assert combine.time_us[1] == pytest.approx(expected)
    assert partial <= L2_USABLE_FRACTION * rates.l2_bytes and combine.hbm_bytes[1] == out


def test_page_table_lookups_are_one_round_trip_plus_address_work_per_page() -> None:
    cfg = ConfigArrays({"block_n": np.array([128, 128, 32]), "page_size": np.array([16, 256, 16])})
    cycles = paged_lookup_cycles(cfg, cfg["block_n"], 200.0)
    assert list(np.asarray(cycles)) == [200 + 8 * PAGE_ADDRESS_CYCLES, 200 + PAGE_ADDRESS_CYCLES,
                                        200 + 2 * PAGE_ADDRESS_CYCLES]  # fmt: skip
    contiguous = ConfigArrays({"block_n": np.array([128])})
    assert paged_lookup_cycles(contiguous, contiguous["block_n"], 200.0) == 0.0


def test_take_rows_keeps_scalars_and_slices_nested_arrays() -> None:
    spec = get_hardware("a100-80gb")
    family = get_family("fa2", Phase.FORWARD, spec)
    p = AttentionProblem(seq_len=128, head_dim=64)
    table = build_candidate_table(family, spec, p, SolveOptions())
    idx = np.array([3, 7, 11])
    sub: Any = take_rows(table.res, idx, len(table))
    res: Any = table.res
    assert list(sub.smem_bytes) == list(res.smem_bytes[idx])
    assert list(sub.occupancy.blocks_per_sm) == list(res.occupancy.blocks_per_sm[idx])
    assert sub.smem_limit_bytes == res.smem_limit_bytes


def test_busy_sm_bound_and_combine_are_in_the_time() -> None:
    spec = get_hardware("a100-80gb")
    assert isinstance(spec, CudaDevice)
    rates = cuda_rates(spec)
    p = decode(batch=1)
    answer = solve(p, spec, SolveOptions(kernel="fa2", engine="exhaustive", top_k=1))
    best = answer.candidates[0]
    figures = best.figures
    assert figures["combine_us"] > rates.launch_us
    assert best.predicted_time_us == pytest.approx(
        figures["main_kernel_us"] + figures["combine_us"]
    )
    # the main kernel is never faster than its bytes over the busy SMs' share of the bandwidth
    busy = figures["busy_unit_fraction"]
    assert figures["main_kernel_us"] >= (best.hbm_bytes / (rates.dram_bytes_per_s * busy)) * 1e6


# ---- the forward families where nothing splits ------------------------------------------------


@pytest.mark.parametrize("kernel", ["fa2", "triton"])
@pytest.mark.parametrize(
    "problem",
    [
        AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128, causal=True),
        AttentionProblem(batch=2, heads=8, kv_heads=2, seq_len=1000, head_dim=64, dropout=0.1),
        AttentionProblem(batch=1, heads=32, seq_len=1, head_dim=128),
    ],
)
def test_forward_without_a_longer_cache_is_the_plain_model(
    kernel: str, problem: AttentionProblem
) -> None:
    """seq_len_kv == seq_len: the registered family declares no split decision, states none
    of the split path's rules, and its times are bit for bit the forward cost model's."""
    spec = get_hardware("h100-sxm")
    assert isinstance(spec, CudaDevice)
    registered: Any = get_family(kernel, Phase.FORWARD, spec)
    table = build_candidate_table(registered, spec, problem, SolveOptions())
    assert table.cfg.names == ("block_m", "block_n", "num_warps", "num_stages")
    # a registration over several kernels (triton: CUDA and ROCm) hands the device to one
    family: Any = registered.on(spec) if isinstance(registered, ByDevice) else registered
    plain = family.forward_perf(spec, problem, table.cfg, table.res)
    assert np.array_equal(table.perf.time_us, plain.time_us)
    # triton has no `registers` constraint: ptxas spills and the spill is costed (model.md 16.7)
    registers = [] if family.max_spill_regs is None else ["registers"]
    assert [c.name for c in table.constraints] == [
        "alignment",
        "threads",
        "pins",
        "shared_memory",
        "max_smem",
        *registers,
        "occupancy",
        "divisibility",
    ]


def test_one_split_of_a_full_grid_is_the_forward_model() -> None:
    """The split model calls the forward model: with one split, no packing and a grid that
    fills the SMs, a prefill against a longer cache costs what the plain model says."""
    spec = get_hardware("a100-80gb")
    p = AttentionProblem(batch=8, heads=16, seq_len=2048, seq_len_kv=8192, head_dim=128)
    family = get_family("fa2", Phase.FORWARD, spec)
    table = build_candidate_table(family, spec, p, SolveOptions())
    one = np.flatnonzero(table.cfg["num_splits"] == 1)
    tiles = ConfigArrays({name: table.cfg[name][one] for name in table.cfg.names[:4]})
    plain = family.evaluate(evaluation(family, spec, p, SolveOptions(), tiles))
    assert np.array_equal(table.perf.time_us[one], plain.time_us)


# ---- chunked prefill --------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["fa2", "triton", "flashinfer"])
def test_chunked_prefill_splits_where_the_grid_underfills(kernel: str) -> None:
    spec = get_hardware("h100-sxm")
    options = SolveOptions(kernel=kernel, engine="exhaustive", top_k=1)
    small = AttentionProblem(heads=8, seq_len=64, seq_len_kv=8192, head_dim=128, causal=True)
    assert (solve(small, spec, options).candidates[0].num_splits or 1) > 1
    full = AttentionProblem(
        batch=8, heads=32, seq_len=1024, seq_len_kv=4096, head_dim=128, causal=True
    )
    assert solve(full, spec, options).candidates[0].num_splits == 1


# ---- paged KV -------------------------------------------------------------------------------


def test_page_size_is_a_parameter_and_a_field(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *EXAMPLE, "--phase", "decode", "--page-size", "512", "--json")
    answer = json.loads(out)
    assert code == 0
    assert {c["page_size"] for c in answer["candidates"]} == {512}
    assert all(c["parameters"]["page_size"] == 512 for c in answer["candidates"])
    assert "paged_kv" in [step["constraint"] for step in answer["funnel"]]
    # auto: the smallest page that costs no time (a tile never spans two 256-key pages)
    code, out, _ = run(capsys, *EXAMPLE, "--phase", "decode", "--page-size", "auto", "--json")
    assert code == 0 and json.loads(out)["candidates"][0]["page_size"] == 256
    assert json.loads(out)["options"]["choose_page_size"] is True


def test_smaller_pages_cost_more_lookups_than_a_tile_with_one_page() -> None:
    spec = get_hardware("h100-sxm")
    times = []
    for page in (16, 64, 128):
        pins = {"page_size": page, "num_splits": 16}
        options = SolveOptions(kernel="flashinfer", block_m=16, block_n=128, parameter_pins=pins)
        times.append(solve(decode(), spec, options))
    loads = [a.candidates[0].figures["tile_load_cycles"] for a in times]
    us = [a.candidates[0].predicted_time_us for a in times]
    assert loads[0] > loads[1] > loads[2] and us[0] >= us[1] >= us[2]
    assert "8 page-table lookup(s)" in " ".join(times[0].candidates[0].reasons)


@pytest.mark.parametrize(
    ("argv", "field", "words"),
    [
        (["--page-size", "100"], "param", "multiple of 256"),
        (["--page-size", "0"], "param", "multiple of 256"),
        (["--page-size", "256", "--kernel", "triton"], "param", "fa2, fa3, flashinfer"),
        (["--page-size", "auto", "--kernel", "triton"], "choose_page_size", "fa2, fa3, flashinfer"),
        (["--page-size", "big"], "page_size", "auto"),
        (["--page-size", "24", "--kernel", "flashinfer"], "param", "power of two"),
    ],
)
def test_bad_page_sizes_exit_2_naming_the_rule(
    capsys: pytest.CaptureFixture[str], argv: list[str], field: str, words: str
) -> None:
    base = ["solve", "--hardware", "h100-sxm", "--kernel", "fa2", "--head-dim", "128"]
    base += ["--seq-len", "1"]
    base += ["--seq-len-kv", "8192", "--heads", "32", "--kv-heads", "8"]
    code, out, err = run(capsys, *base, *argv)
    assert code == 2 and out == "", err
    assert err.startswith(f"error: {field}:") and words in err, err


# ---- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "field", "words"),
    [
        (["--num-splits", "0"], "param", "allowed: 1, 2, 4, 8, 16, 32, 64, 128"),
        (["--num-splits", "256"], "param", "allowed: 1, 2, 4, 8, 16, 32, 64, 128"),
        (["--num-splits", "3"], "param", "allowed: 1, 2, 4"),
        (["--num-splits", "4", "--param", "num_splits=8"], "num_splits", "contradicts"),
        (["--seq-len", "2", "--seq-len-kv", "1"], "seq_len", "seq_len <= seq_len_kv"),
        (["--seq-len", "65", "--seq-len-kv", "4096"], "seq_len", "1 to 64 query rows"),
        (["--dropout", "0.1"], "dropout", "no dropout"),
        (["--kernel", "fa3", "--dropout", "0.1"], "dropout", "no dropout"),
        (["--kernel", "triton"], "phase", "allowed for triton: backward, forward"),
        (["--hardware", "ascend-910b"], "kernel", "ascend"),
    ],
)
def test_bad_decode_input_exits_2_with_the_reason(
    capsys: pytest.CaptureFixture[str], argv: list[str], field: str, words: str
) -> None:
    code, out, err = run(capsys, *EXAMPLE, "--phase", "decode", *argv)
    assert code == 2 and out == "", err
    assert any(line.startswith(f"error: {field}:") and words in line for line in err.splitlines())


def test_a_pinned_split_count_beyond_a_tiles_keys_is_infeasible_not_invalid() -> None:
    """num_splits 128 is in the domain of FlashInfer's decode (its smallest K/V tile has 8192
    / 128 keys or fewer) but leaves 256-key tiles' splits empty: pinning it with block_n 256
    is an infeasible request."""
    options = SolveOptions(
        kernel="flashinfer", block_n=256, parameter_pins={"num_splits": 256 // 2}
    )
    answer = solve(decode(seq_len_kv=8192), "h100-sxm", options)
    assert answer.status == "infeasible"
    assert "split_tiles" in answer.infeasibility.conflicting_constraints  # type: ignore[union-attr]


def test_decode_rows_are_a_sequences_packed_rows() -> None:
    spec = get_hardware("h100-sxm")
    with pytest.raises(InvalidRequestError):
        solve(decode(seq_len=DECODE_MAX_QUERY_ROWS + 1), spec, SolveOptions(kernel="fa2"))
    answer = solve(decode(seq_len=DECODE_MAX_QUERY_ROWS), spec, SolveOptions(kernel="fa2"))
    assert answer.candidates and all(c.block_m <= 64 for c in answer.candidates)  # type: ignore[operator]


# ---- the engines agree ----------------------------------------------------------------------


def random_decode(rng: np.random.Generator) -> tuple[AttentionProblem, str, SolveOptions]:
    heads = int(rng.choice([8, 16, 32, 64]))
    kv_heads = int(rng.choice([d for d in (1, 2, 8, heads) if heads % d == 0]))
    sk = int(rng.integers(16, 70000))
    problem = AttentionProblem(
        batch=int(rng.integers(1, 65)),
        heads=heads,
        kv_heads=kv_heads,
        seq_len=int(rng.choice([1, 1, 1, 2, 4, 8, 16, 64])),
        seq_len_kv=sk,
        head_dim=int(rng.choice([64, 128, 256])),
        dtype=str(rng.choice(["fp16", "bf16"])),
        causal=bool(rng.random() < 0.3),
        phase=DECODE,
    )
    problem = AttentionProblem.model_validate(
        {**problem.model_dump(), "seq_len": min(problem.seq_len, sk)}
    )
    roll = rng.random()
    kernel = str(rng.choice(["fa2", "flashinfer"]))
    pins: dict[str, int] = {}
    if roll < 0.15:
        pins["num_splits"] = int(rng.choice([1, 2, 8]))
    if 0.15 <= roll < 0.3:
        pins["page_size"] = 512 if kernel == "fa2" else int(rng.choice([16, 64]))
    options = SolveOptions(
        kernel=kernel,
        top_k=int(rng.integers(1, 6)),
        parameter_pins=pins,
        choose_page_size=bool(0.3 <= roll < 0.4),
        max_smem=int(rng.integers(4, 64)) * 1024 if 0.4 <= roll < 0.55 else None,
        min_blocks_per_sm=int(rng.integers(1, 5)) if 0.55 <= roll < 0.65 else None,
    )
    hardware = str(rng.choice(["a100-80gb", "h100-sxm", "l4", "rtx-4090", "a10"]))
    return problem, hardware, options


@pytest.mark.parametrize("seed", range(4))
def test_cpsat_equals_exhaustive_on_random_decode_problems(
    seed: int, compare_engines: Callable[..., SolveAnswer | None]
) -> None:
    rng = np.random.default_rng(100 + seed)
    compared = 0
    for _ in range(12):
        problem, hardware, options = random_decode(rng)
        if compare_engines(problem, hardware, options, allow_invalid=True):
            compared += 1
    assert compared >= 8


# ---- JSON and gRPC --------------------------------------------------------------------------


def test_decode_over_grpc_carries_the_split_fields(stub: pb_grpc.TileSolveServiceStub) -> None:
    options = SolveOptions(kernel="fa2", choose_page_size=True)
    request = wire.solve_request_to_proto(decode(), "h100-sxm", options)
    assert request.problem.phase == pb.PHASE_DECODE and request.options.choose_page_size
    response = stub.Solve(request, timeout=60)
    best = response.candidates[0]
    assert best.HasField("num_splits") and best.num_splits > 1
    assert best.HasField("pack_gqa") and best.pack_gqa
    assert best.HasField("page_size") and best.page_size == 256
    assert best.parameters["num_splits"] == best.num_splits
    answer, _ = wire.answer_from_proto(response)
    local = solve(decode(), "h100-sxm", options)
    assert answer.candidates[0].parameters == local.candidates[0].parameters
    # a forward answer without splits has none of the fields
    plain = wire.solve_request_to_proto(AttentionProblem(seq_len=512, head_dim=64), "a100")
    first = stub.Solve(plain, timeout=60).candidates[0]
    assert not first.HasField("num_splits") and not first.HasField("page_size")


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        (SolveOptions(kernel="fa2", parameter_pins={"page_size": 300}), "options.parameter_pins",
         "multiple of 256"),
        (SolveOptions(kernel="triton", choose_page_size=True), "options.choose_page_size",
         "fa2, fa3, flashinfer"),
        (SolveOptions(kernel="fa2", parameter_pins={"num_splits": 0}), "options.parameter_pins",
         "allowed: 1, 2, 4"),
    ],
)  # fmt: skip
def test_bad_decode_requests_are_invalid_argument(
    stub: pb_grpc.TileSolveServiceStub, options: SolveOptions, field: str, words: str
) -> None:
    phase = DECODE if options.kernel == "fa2" else Phase.FORWARD
    problem = decode(phase=phase)
    request = wire.solve_request_to_proto(problem, "h100-sxm", options)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Solve(request, timeout=60)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(caught.value)
    assert field in found and words in found[field], found


@pytest.mark.parametrize(
    ("extra", "field", "phases"),
    [
        (["--num-splits", "4"], "num_splits", "the forward pass has"),
        (["--param", "num_splits=4"], "num_splits", "the forward pass has"),
        (["--phase", "backward", "--num-splits", "4"], "num_splits", "the backward pass has"),
        (["--phase", "both", "--num-splits", "2"], "num_splits", "forward and backward passes"),
        (["--phase", "backward", "--page-size", "256"], "page_size", "backward pass reads no"),
        (["--phase", "both", "--page-size", "auto"], "page_size", "backward pass reads no"),
    ],
)
def test_split_and_page_options_on_a_pass_without_them_exit_2_naming_the_phases(
    capsys: pytest.CaptureFixture[str], extra: list[str], field: str, phases: str
) -> None:
    argv = ["solve", "--hardware", "a100-80gb", "--head-dim", "128", "--seq-len", "4096"]
    code, out, err = run(capsys, *argv, *extra)
    assert code == 2 and out == ""
    assert f"{field}:" in err and phases in err and "--phase decode" in err
    assert "has no parameter" not in err


def test_split_options_where_the_pass_has_them_are_answered(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["solve", "--hardware", "a100-80gb", "--head-dim", "128", "--json", "--top-k", "1"]
    for extra in (
        ["--seq-len", "1", "--seq-len-kv", "8192", "--phase", "decode", "--num-splits", "4"],
        ["--seq-len", "512", "--seq-len-kv", "16384", "--num-splits", "4"],
    ):
        code, out, _ = run(capsys, *argv, *extra)
        assert code == 0
        assert json.loads(out)["candidates"][0]["parameters"]["num_splits"] == 4


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize(("seq_len", "kv_heads"), [(1, 8), (1, 32), (16, 8), (64, 32)])
def test_flashinfer_decode_names_only_the_layouts_it_dispatches(
    head_dim: int, seq_len: int, kv_heads: int
) -> None:
    """FlashInfer's tensor-core template derives its warps and MMA rows from CTA_TILE_Q (128:
    4 query warps x 2 MMA rows, 64: 4 x 1, 16: 1 query warp and 4 on the keys); its CUDA-core
    decode kernel has one layout. Every decode answer names one of those."""
    problem = decode(head_dim=head_dim, seq_len=seq_len, kv_heads=kv_heads)
    answer = solve(problem, "a100-80gb", SolveOptions(kernel="flashinfer", top_k=20))
    assert answer.candidates
    for c in answer.candidates:
        p = c.parameters
        if p.get("decode_kernel") == 1:
            continue
        layout = (4 // p["warps_kv"], p["mma_q"])
        assert layout in {(4, 2), (4, 1), (1, 1)}, c
        assert c.block_m == 16 * layout[0] * layout[1] in (128, 64, 16)
