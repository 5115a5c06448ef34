"""Decode for the fa3 and Ascend families (docs/model.md 13.9 and 13.10): FlashAttention-3's
split / PackGQA / paged paths on Hopper and CANN's IncreFlashAttention on Ascend — the issue's
decode example and its sweep with fa3, fa3 as Hopper's decode default, its forward answers
unchanged without a longer cache, FA3's pack and page rules; Ascend's S2 tile, core split and
page size, its block_size rules, the in-kernel combine; CP-SAT = exhaustive; --json and gRPC."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np
import pytest

from tilesolve import wire
from tilesolve.solver import (
    AscendDevice,
    AttentionProblem,
    Config,
    CudaDevice,
    InvalidRequestError,
    Phase,
    SolveAnswer,
    SolveOptions,
    get_hardware,
    solve,
)
from tilesolve.solver.candidates import build_candidate_table, evaluation
from tilesolve.solver.families.ascend.cost import ASCEND_LAUNCH_US
from tilesolve.solver.families.ascend.decode import (
    SYNC_ALL_CYCLES,
    core_split_domain,
    s2_domain,
)
from tilesolve.solver.families.fa3.cost import evaluate as fa3_forward_model
from tilesolve.solver.families.fa3.split import fa3_combine_rows, paged_tile_load_cycles
from tilesolve.solver.registry import get_family
from tilesolve.solver.space import ConfigArrays
from tilesolve.solver.split_kv import PAGE_ADDRESS_CYCLES
from tilesolve.solver.validate import check_config
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from command_line import run
from loopback import violations

DECODE = Phase.DECODE
# The issue's example, with FlashAttention-3 (Hopper's default family).
EXAMPLE = [
    "solve", "--hardware", "h100-sxm", "--kernel", "fa3", "--head-dim", "128", "--seq-len", "1",
    "--seq-len-kv", "32768", "--heads", "32", "--kv-heads", "8",
]  # fmt: skip
ASCEND = [
    "solve", "--hardware", "ascend-910b", "--head-dim", "128", "--seq-len", "1",
    "--seq-len-kv", "32768", "--heads", "32", "--kv-heads", "8", "--phase", "decode",
]  # fmt: skip


def decode(**fields: Any) -> AttentionProblem:
    base: dict[str, Any] = {"heads": 32, "kv_heads": 8, "seq_len": 1, "seq_len_kv": 32768}
    return AttentionProblem(**{**base, "head_dim": 128, "phase": DECODE, **fields})


def kv_bytes(p: AttentionProblem) -> float:
    return float(p.batch * p.kv_heads_eff * p.seq_len_kv_eff * 2 * p.head_dim * p.dtype.bytes)


def peak_us(p: AttentionProblem, hardware: str) -> float:
    return kv_bytes(p) / (get_hardware(hardware).memory.dram_bandwidth_gb_per_s * 1e9) * 1e6


# FA3 does not split a grid of 80% of the SMs or more (num_splits_heuristic, hopper/heuristics.h
# line 29)
FA3_NO_SPLIT_SM_FRACTION = 0.8

# what fa3's bottleneck names when the wgmma and exp of a tile outlast its K/V load (cost.py)
COMPUTE_BOTTLENECKS = ("tensor cores (wgmma)", "softmax exp (SFU) not hidden by the GEMMs")

# ---- fa3: the issue's decode example -----------------------------------------------------------


def test_the_decode_example_with_fa3(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *EXAMPLE, "--phase", "decode", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["status"] == "optimal" and answer["kernel"] == "fa3"
    assert "FlashAttention-3 decode" in answer["kernel_reason"]
    assert "PackGQA" in answer["kernel_reason"]
    best = answer["candidates"][0]
    assert best["num_splits"] > 1 and best["parameters"]["num_splits"] == best["num_splits"]
    assert best["pack_gqa"] is True and best["parameters"]["pack_gqa"] == 1
    # FA3's decode kernel is its forward instance: tile_size_fwd_sm90 gives 128 x 176 for head
    # dim 128, 16-bit, no mask, TMA (hopper/tile_size.h line 33)
    assert best["page_size"] is None and (best["block_m"], best["block_n"]) == (128, 176)
    ideal_us = peak_us(decode(), "h100-sxm")
    assert 1.0 * ideal_us <= best["predicted_time_us"] <= 1.8 * ideal_us
    assert any("FlashAttention-3 split path with PackGQA" in r for r in best["reasons"])
    # one query row against a longer cache in the forward phase splits too
    code, out, _ = run(capsys, *EXAMPLE, "--json")
    forward = json.loads(out)["candidates"][0]
    assert code == 0 and forward["num_splits"] > 1 and forward["pack_gqa"] is True


# FA3's decode tiles, 16-bit, no local window or softcap (hopper/tile_size.h lines 22-39 at
# 0251105a): (head dim, causal, paged) -> (kBlockM, kBlockN); a decode step's paged cache is
# always read without TMA (get_pagedkv_tma: no more packed rows than kBlockM).
FA3_DECODE_TILES = [
    (64, False, False, (192, 192)),
    (64, True, False, (192, 128)),
    (64, False, True, (192, 128)),
    (96, False, False, (192, 144)),
    (96, False, True, (192, 128)),
    (128, False, False, (128, 176)),
    (128, True, False, (128, 128)),
    (192, False, False, (128, 112)),  # head_dim_v 192 > 128
    (192, False, True, (128, 96)),
    (256, False, False, (128, 80)),
]


@pytest.mark.parametrize(("head_dim", "causal", "paged", "tile"), FA3_DECODE_TILES)
def test_fa3_decode_names_only_its_instance_tile(
    head_dim: int, causal: bool, paged: bool, tile: tuple[int, int]
) -> None:
    """Every fa3 decode answer is the one tile FA3's forward template is built with for the
    head dim, mask and paged load; a pinned other tile is infeasible, naming the rule."""
    pins = {"page_size": 64} if paged else {}
    for seq_len, kv_heads in ((1, 8), (4, 32)):
        problem = decode(head_dim=head_dim, seq_len=seq_len, kv_heads=kv_heads, causal=causal)
        options = SolveOptions(kernel="fa3", top_k=10, parameter_pins=pins)
        answer = solve(problem, "h100-sxm", options)
        assert answer.candidates
        assert {(c.block_m, c.block_n) for c in answer.candidates} == {tile}
    other = SolveOptions(kernel="fa3", block_m=64, parameter_pins=pins)
    answer = solve(decode(head_dim=head_dim, causal=causal), "h100-sxm", other)
    assert answer.status == "infeasible"
    assert "fa3_decode_tile" in answer.infeasibility.conflicting_constraints  # type: ignore[union-attr]


def test_decode_on_hopper_defaults_to_fa3_and_fa2_stays_selectable() -> None:
    spec = get_hardware("h100-sxm")
    answer = solve(decode(), spec, SolveOptions(top_k=1))
    assert answer.kernel == "fa3" and "the default kernel of h100-sxm" in answer.kernel_reason
    fa2 = solve(decode(), spec, SolveOptions(kernel="fa2", top_k=1))
    assert fa2.kernel == "fa2"
    # both stream the cache near the bandwidth; within 10% of each other (docs/model.md 13.9)
    ratio = answer.candidates[0].predicted_time_us / fa2.candidates[0].predicted_time_us
    assert 0.9 < ratio < 1.1


SWEEP = [
    (hardware, head_dim, batch, kv_heads)
    for hardware in ("h100-sxm", "h200")
    for head_dim in (64, 128)
    for batch in (1, 2, 3, 4, 8, 13, 16, 17, 32, 64)
    for kv_heads in (8, 32)
]


@pytest.mark.parametrize(("hardware", "head_dim", "batch", "kv_heads"), SWEEP)
def test_fa3_decode_splits_where_the_grid_underfills(
    hardware: str, head_dim: int, batch: int, kv_heads: int
) -> None:
    """Split-KV whenever batch x kv_heads is below 80% of the SM count (FA3's own heuristic
    does not split from 80% on; between, either); at or above the SM count, no split when the
    last wave of one-CTA-per-SM blocks is full or nearly (60% or more), and a split when it is
    a short tail (under 10%): one CTA per SM is too slow to stream a whole head alone
    (docs/model.md 13.9). GQA packed, FA3's decode instance (192 x 192 at head dim 64,
    128 x 176 at 128), and for caches of 100 MB or more within 1.0-1.8x of the K/V bytes at the
    peak bandwidth at head dim 128; at head dim 64 the 192-row instance computes the wgmma and
    exp of 192 rows for 4 or 1 real ones, which on h200's 4.8 TB/s takes longer than the tile's
    K/V bytes: compute-bound, within 2.4x there (1.8x on h100-sxm)."""
    problem = decode(batch=batch, kv_heads=kv_heads, head_dim=head_dim)
    spec = get_hardware(hardware)
    assert isinstance(spec, CudaDevice)
    best = solve(problem, spec, SolveOptions(kernel="fa3", engine="exhaustive", top_k=1))
    c = best.candidates[0]
    sms, blocks = spec.throughput.sm_count, batch * kv_heads
    assert c.num_splits is not None
    last_wave = (blocks % sms) / sms
    if blocks < FA3_NO_SPLIT_SM_FRACTION * sms:
        assert c.num_splits > 1
    elif blocks < sms:
        pass  # FA3 does not split here, the model may (13.9)
    elif last_wave == 0 or last_wave >= 0.6:
        assert c.num_splits == 1
    elif last_wave < 0.1:
        assert c.num_splits > 1
    assert c.pack_gqa is (True if kv_heads < 32 else None)
    assert (c.block_m, c.block_n) == ((192, 192) if head_dim == 64 else (128, 176))
    if kv_bytes(problem) >= 100e6:
        ideal_us = peak_us(problem, hardware)
        compute_bound = head_dim == 64 and hardware == "h200"
        assert 1.0 * ideal_us <= c.predicted_time_us <= (2.4 if compute_bound else 1.8) * ideal_us
        if compute_bound:
            assert c.bottleneck in (
                "tensor cores (wgmma)",
                "softmax exp (SFU) not hidden by the GEMMs",
            )


def test_fa3_splits_exactly_below_the_sm_count_on_the_issues_h100_sweep() -> None:
    """On h100-sxm (132 SMs) fa3 splits every shape of the issue's sweep below 80% of the SM
    count. At or above the SM count it splits only where the last wave is under 20% full:
    17 x 8 = 136 blocks (a second wave of 4 CTAs) at both head dims, and some of 416 and 544
    blocks (last waves of 20 and 16 CTAs), which the 128- and 192-row instances make slow
    to stream a whole head alone (docs/model.md 13.9)."""
    spec = get_hardware("h100-sxm")
    assert isinstance(spec, CudaDevice)
    sms = spec.throughput.sm_count
    above = []
    for head_dim in (64, 128):
        for batch in (1, 2, 3, 4, 8, 13, 16, 17, 32, 64):
            for kv_heads in (8, 32):
                problem = decode(batch=batch, kv_heads=kv_heads, head_dim=head_dim)
                options = SolveOptions(kernel="fa3", engine="exhaustive", top_k=1)
                c = solve(problem, spec, options).candidates[0]
                blocks = batch * kv_heads
                assert (c.num_splits or 1) > 1 or blocks >= FA3_NO_SPLIT_SM_FRACTION * sms
                if (c.num_splits or 1) > 1 and blocks >= sms:
                    above.append((head_dim, blocks))
    assert {(64, 136), (128, 136)} <= set(above)
    assert all((blocks % sms) / sms < 0.2 for _, blocks in above)


# ---- fa3: what did not change, and its rules --------------------------------------------------


@pytest.mark.parametrize(
    "problem",
    [
        AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128, causal=True),
        AttentionProblem(batch=2, heads=8, kv_heads=2, seq_len=1000, head_dim=64),
        AttentionProblem(batch=1, heads=32, seq_len=1, head_dim=128),
        AttentionProblem(batch=2, heads=8, seq_len=2048, head_dim=256, dtype="fp8"),
    ],
)
def test_fa3_forward_without_a_longer_cache_is_the_plain_model(problem: AttentionProblem) -> None:
    """seq_len_kv == seq_len: the fa3 family declares no split decision, states none of the
    split path's rules, and its times are bit for bit its forward cost model's."""
    spec = get_hardware("h100-sxm")
    family = get_family("fa3", Phase.FORWARD, spec)
    table = build_candidate_table(family, spec, problem, SolveOptions())
    assert "num_splits" not in table.cfg and "pack_gqa" not in table.cfg
    plain = fa3_forward_model(evaluation(family, spec, problem, SolveOptions()))
    assert np.array_equal(table.perf.time_us, plain.time_us)
    assert [c.name for c in table.constraints] == [
        "fa3_shape",
        "threads",
        "pins",
        "shared_memory",
        "max_smem",
        "registers",
        "occupancy",
        "divisibility",
    ]


def test_fa3_packs_gqa_on_its_split_path() -> None:
    """FA3 compiles the split path with PackGQA only: pack_gqa = 0 with 2 splits is
    infeasible (fa3_pack_gqa); with one split it is a choice."""
    spec = get_hardware("h100-sxm")
    pins = {"pack_gqa": 0, "num_splits": 2}
    answer = solve(decode(batch=16), spec, SolveOptions(kernel="fa3", parameter_pins=pins))
    assert answer.status == "infeasible"
    assert "fa3_pack_gqa" in answer.infeasibility.conflicting_constraints  # type: ignore[union-attr]
    one = {"pack_gqa": 0, "num_splits": 1}
    answer = solve(decode(batch=64), spec, SolveOptions(kernel="fa3", parameter_pins=one))
    assert answer.candidates and answer.candidates[0].pack_gqa is False
    family = get_family("fa3", DECODE, spec)
    best = solve(decode(), spec, SolveOptions(kernel="fa3", top_k=1)).candidates[0]
    bad = Config.of(**{**best.parameters, "pack_gqa": 0})
    assert any(
        v.startswith("fa3_pack_gqa")
        for v in check_config(family, spec, decode(), SolveOptions(kernel="fa3"), bad)
    )


def test_fa3_paged_lookups_tma_or_row_gather() -> None:
    """A page that holds whole tiles: one lookup per tile (TMA); otherwise a lookup per 16-row
    producer pass (the row gather), and GQA packed."""
    spec = get_hardware("h100-sxm")
    assert isinstance(spec, CudaDevice)
    cfg = ConfigArrays(
        {"block_n": np.array([128, 128, 176]), "page_size": np.array([256, 16, 352])}
    )
    rtt = spec.throughput.l2_hit_latency_cycles
    cycles = np.asarray(paged_tile_load_cycles(cfg, spec))
    assert list(cycles) == [rtt + PAGE_ADDRESS_CYCLES, rtt + 8 * PAGE_ADDRESS_CYCLES,
                            rtt + PAGE_ADDRESS_CYCLES]  # fmt: skip
    assert paged_tile_load_cycles(ConfigArrays({"block_n": np.array([64])}), spec) == 0.0
    pins = {"page_size": 16, "pack_gqa": 0, "num_splits": 1}
    gather = SolveOptions(kernel="fa3", block_n=128, parameter_pins=pins)
    answer = solve(decode(batch=64), spec, gather)
    assert answer.status == "infeasible"  # a 16-key page is gathered row by row: packed only
    # FA3 takes the TMA path only for more packed rows than its TMA instance's 128 (get_pagedkv_tma,
    # hopper/flash_api.cpp lines 415-424): a decode step's 4 never, so its paged tile is the
    # non-TMA instance's 128 x 128 (tile_size.h line 33), even on pages that hold 176-key tiles
    paged = {"page_size": 176, "num_splits": 1}
    answer = solve(decode(batch=64), spec, SolveOptions(kernel="fa3", parameter_pins=paged))
    assert {(c.block_m, c.block_n) for c in answer.candidates} == {(128, 128)}
    tma = SolveOptions(kernel="fa3", block_n=176, parameter_pins=paged)
    answer = solve(decode(batch=64), spec, tma)
    assert answer.status == "infeasible"
    assert "fa3_decode_tile" in answer.infeasibility.conflicting_constraints  # type: ignore[union-attr]
    answer = solve(decode(), spec, SolveOptions(kernel="fa3", parameter_pins={"page_size": 256}))
    best = answer.candidates[0]
    assert best.page_size == 256 and any("paged KV" in r for r in best.reasons)
    p = decode()
    assert fa3_combine_rows(p, 128) == 8 and fa3_combine_rows(p, 64) == 16


# ---- Ascend: IncreFlashAttention ---------------------------------------------------------------


def test_ascend_decode_answers_with_its_s2_tile_core_split_and_page_size(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, *ASCEND, "--page-size", "auto", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["status"] == "optimal" and answer["kernel"] == "ascend"
    assert "CANN IncreFlashAttention" in answer["kernel_reason"]
    best = answer["candidates"][0]
    assert best["block_n"] in s2_domain(None)  # the S2 tile
    assert best["num_splits"] > 1  # 8 (batch, KV head) blocks on 24 cube cores: a core split
    assert best["page_size"] in (16, 32, 64, 128, 256, 512)
    assert best["block_n"] % best["page_size"] == 0
    assert best["pack_gqa"] is True and best["num_warps"] is None
    text = " ".join(best["reasons"])
    assert f"S2 tile {best['block_n']} keys" in text and "core split" in text
    assert f"block_size {best['page_size']}" in text
    assert any("IncreFlashAttention" in note for note in answer["notes"])
    # the same in text
    code, out, _ = run(capsys, *ASCEND, "--page-size", "128", "--top-k", "1")
    assert code == 0 and "IncreFlashAttention" in out and "the S2 tile" in out
    assert "num_splits=" in out and "page_size=128" in out


@pytest.mark.parametrize("hardware", ["ascend-910b", "ascend-310p3"])
@pytest.mark.parametrize(("batch", "kv_heads"), [(1, 1), (1, 8), (2, 8), (4, 1), (3, 8), (8, 12)])
def test_ascend_splits_s2_across_cores_when_batch_x_kv_heads_is_small(
    hardware: str, batch: int, kv_heads: int
) -> None:
    """Below the cube cores' count the model splits S2 across cores; with as many blocks as
    cores (or a multiple) it does not. Time within 1.0-1.8x of the peak for 100 MB or more."""
    spec = get_hardware(hardware)
    assert isinstance(spec, AscendDevice)
    problem = decode(batch=batch, heads=kv_heads * 4, kv_heads=kv_heads)
    best = solve(problem, spec, SolveOptions(engine="exhaustive", top_k=1)).candidates[0]
    blocks, units = batch * kv_heads, spec.ascend.aic_count
    if blocks < units:
        assert (best.num_splits or 1) > 1
    if blocks % units == 0:
        assert best.num_splits == 1
    if kv_bytes(problem) >= 100e6:
        assert best.predicted_time_us <= 1.8 * peak_us(problem, hardware)


def test_ascend_core_splits_can_fill_24_cores() -> None:
    p = decode()
    assert core_split_domain(p, 24) == (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
    assert core_split_domain(p, 8) == (1, 2, 4, 8, 16, 32, 64, 128)
    assert core_split_domain(decode(seq_len_kv=600), 24) == (1, 2, 3, 4)  # 5 S2 tiles of 128


def test_ascend_combine_is_in_the_kernel() -> None:
    """IFA merges the parts after a barrier across its cores, in the same kernel: the combine
    costs the barrier and its traffic, not a second 18 us launch."""
    spec = get_hardware("ascend-910b")
    assert isinstance(spec, AscendDevice)
    best = solve(decode(), spec, SolveOptions(top_k=1)).candidates[0]
    barrier_us = SYNC_ALL_CYCLES / spec.ascend.cube_clock_mhz
    assert barrier_us < best.figures["combine_us"] < ASCEND_LAUNCH_US
    assert best.predicted_time_us == pytest.approx(
        best.figures["main_kernel_us"] + best.figures["combine_us"]
    )


@pytest.mark.parametrize(
    ("page", "words"),
    [
        ("600", "at most 512"),
        ("24", "a multiple of 16"),
        ("0", "at most 512 and a multiple of 16"),
        ("1024", "at most 512"),
    ],
)
def test_ascend_page_size_rules_exit_2_naming_the_rule(
    capsys: pytest.CaptureFixture[str], page: str, words: str
) -> None:
    code, out, err = run(capsys, *ASCEND, "--page-size", page)
    assert code == 2 and out == "", err
    assert err.startswith("error: param:") and "block_size" in err and words in err, err


def test_ascend_s2_tiles_are_whole_pages() -> None:
    """IFA floors its S2 tile to whole pages: a 48-key page gives S2 tiles of 48-key pages."""
    assert s2_domain(48) == (96, 240, 480, 1008, 2016, 4080, 8160)
    assert s2_domain(128) == s2_domain(None)
    answer = solve(decode(), "ascend-910b", SolveOptions(parameter_pins={"page_size": 48}))
    assert answer.candidates
    assert all(c.block_n is not None and c.block_n % 48 == 0 for c in answer.candidates)
    auto = solve(decode(), "ascend-910b", SolveOptions(choose_page_size=True, top_k=20))
    assert all(c.block_n % c.page_size == 0 for c in auto.candidates)  # type: ignore[operator]
    assert "ifa_paged" in [step.constraint for step in auto.funnel]


@pytest.mark.parametrize(
    ("problem", "hardware", "field", "words"),
    [
        (decode(seq_len=17), "ascend-910b", "seq_len", "1 to 16 query rows"),
        (decode(seq_len=2, seq_len_kv=1), "ascend-910b", "seq_len", "seq_len <= seq_len_kv"),
        (decode(), "ascend-910", "phase", "does not exist on ascend-910"),
        (decode(dtype="bf16"), "ascend-310p3", "dtype", "allowed: fp16"),
    ],
)
def test_bad_ascend_decode_input_is_invalid(
    problem: AttentionProblem, hardware: str, field: str, words: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        solve(problem, hardware, SolveOptions())
    assert any(v.field == field and words in v.description for v in caught.value.violations)


def test_ascend_validator_states_the_decode_rules() -> None:
    spec = get_hardware("ascend-910b")
    family = get_family("ascend", DECODE, spec)
    options = SolveOptions(parameter_pins={"page_size": 256})
    good = solve(decode(), spec, options).candidates[0].parameters
    assert check_config(family, spec, decode(), options, Config.of(**good)) == []
    bad = Config.of(**{**good, "num_splits": 128, "block_n": 8192})
    broken = check_config(family, spec, decode(), options, bad)
    assert any(v.startswith("split_tiles") for v in broken), broken


# ---- the engines agree --------------------------------------------------------------------------


def random_decode(rng: np.random.Generator) -> tuple[AttentionProblem, str, SolveOptions]:
    heads = int(rng.choice([8, 16, 32, 64]))
    kv_heads = int(rng.choice([d for d in (1, 2, 8, heads) if heads % d == 0]))
    sk = int(rng.integers(16, 70000))
    ascend = bool(rng.random() < 0.5)
    rows = int(rng.choice([1, 1, 1, 2, 4, 8, 16] + ([] if ascend else [64])))
    problem = AttentionProblem(
        batch=int(rng.integers(1, 65)),
        heads=heads,
        kv_heads=kv_heads,
        seq_len=min(rows, sk),
        seq_len_kv=sk,
        head_dim=int(rng.choice([64, 128, 256])),
        dtype=str(rng.choice(["fp16", "bf16"])),
        causal=bool(rng.random() < 0.3),
        phase=DECODE,
    )
    hardware = str(rng.choice(["ascend-910b", "ascend-310p3"] if ascend else ["h100-sxm", "h200"]))
    roll = rng.random()
    pins: dict[str, int] = {}
    if roll < 0.15:
        pins["num_splits"] = int(rng.choice([1, 2, 3, 8] if ascend else [1, 2, 8]))
    if 0.15 <= roll < 0.3:
        pins["page_size"] = int(rng.choice([16, 48, 128, 512] if ascend else [16, 64, 256]))
    options = SolveOptions(
        kernel="ascend" if ascend else "fa3",
        top_k=int(rng.integers(1, 6)),
        parameter_pins=pins,
        choose_page_size=bool(0.3 <= roll < 0.4),
        max_smem=int(rng.integers(64, 200)) * 1024 if 0.4 <= roll < 0.5 and not ascend else None,
    )
    return problem, hardware, options


@pytest.mark.parametrize("seed", range(4))
def test_cpsat_equals_exhaustive_on_random_fa3_and_ascend_decode_problems(
    seed: int, compare_engines: Callable[..., SolveAnswer | None]
) -> None:
    rng = np.random.default_rng(300 + seed)
    compared = 0
    for _ in range(12):
        problem, hardware, options = random_decode(rng)
        if compare_engines(problem, hardware, options, allow_invalid=True):
            compared += 1
    assert compared >= 8


# ---- gRPC ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hardware", "kernel", "page"),
    [("h100-sxm", None, 256), ("ascend-910b", None, 128), ("ascend-310p3", "ascend", 64)],
)
def test_decode_over_grpc_carries_the_split_fields(
    stub: pb_grpc.TileSolveServiceStub, hardware: str, kernel: str | None, page: int
) -> None:
    options = SolveOptions(kernel=kernel, parameter_pins={"page_size": page})
    problem = decode(kv_heads=2) if hardware == "ascend-310p3" else decode()  # 2 of 8 cores
    request = wire.solve_request_to_proto(problem, hardware, options)
    assert request.problem.phase == pb.PHASE_DECODE
    response = stub.Solve(request, timeout=60)
    best = response.candidates[0]
    assert best.HasField("num_splits") and best.num_splits > 1
    assert best.HasField("pack_gqa") and best.pack_gqa
    assert best.HasField("page_size") and best.page_size == page
    assert best.parameters["num_splits"] == best.num_splits
    assert best.parameters["block_n"] == best.block_n
    assert response.kernel == ("fa3" if hardware == "h100-sxm" else "ascend")
    answer, _ = wire.answer_from_proto(response)
    local = solve(problem, hardware, options)
    assert answer.candidates[0].parameters == local.candidates[0].parameters
    assert answer.kernel_reason == local.kernel_reason


def test_bad_ascend_page_size_over_grpc_is_invalid_argument(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    options = SolveOptions(parameter_pins={"page_size": 520})
    request = wire.solve_request_to_proto(decode(), "ascend-910b", options)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Solve(request, timeout=60)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    found = violations(caught.value)
    assert "at most 512" in found.get("options.parameter_pins", ""), found
