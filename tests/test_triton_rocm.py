"""The triton family on AMD Instinct (rocm) devices: one registration over two device kinds, the
AMD knobs as declared parameters with their domains and refusals, the VGPR cap that
waves_per_eu and the launch set, and the answers on each part (docs/model.md 19.10)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from tests.command_line import run
from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware, solve
from tilesolve.solver.errors import InvalidRequestError
from tilesolve.solver.families.triton_compiler.flash_loops import forward_kernel
from tilesolve.solver.families.triton_compiler.lds_amd import (
    amd_lds_bytes,
    chain_crosses,
    default_nonkdim,
)
from tilesolve.solver.families.triton_compiler.loops import AttentionKernel
from tilesolve.solver.families.triton_compiler.registers_amd import (
    AmdRegisterEstimate,
    amd_register_estimate,
    launch_cap,
    loop_terms,
)
from tilesolve.solver.families.triton_compiler.target import CompilerTarget
from tilesolve.solver.families.triton_compiler.wave_layout_amd import ChainedDotLayout
from tilesolve.solver.problem import Phase
from tilesolve.solver.registry import families_on, find_family
from tilesolve.solver.solve import prepare

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = AttentionProblem(batch=2, heads=16, seq_len=4096, head_dim=128)


def _solve(hardware: str, problem: AttentionProblem = PROBLEM, **options: object):  # type: ignore[no-untyped-def]
    return solve(problem, hardware, SolveOptions(kernel="triton", **options))  # type: ignore[arg-type]


def test_one_triton_registration_runs_on_cuda_and_rocm() -> None:
    family = find_family("triton", Phase.FORWARD)
    assert family is not None and family.device_kinds == ("cuda", "rocm")
    assert "triton" in families_on(get_hardware("mi300x"))
    assert "triton" in families_on(get_hardware("h100-sxm"))
    cuda = _solve("h100-sxm")
    assert "waves_per_eu" not in cuda.candidates[0].parameters


@pytest.mark.parametrize("hardware", ["mi300x", "mi325x", "mi350x", "mi355x"])
def test_triton_ranks_configurations_with_the_amd_knobs(hardware: str) -> None:
    answer = _solve(hardware, top_k=3)
    assert answer.candidates
    for c in answer.candidates:
        assert set(c.parameters) == {
            "block_m",
            "block_n",
            "num_warps",
            "num_stages",
            "waves_per_eu",
            "matrix_instr_nonkdim",
            "kpack",
        }
        k = c.parameters["matrix_instr_nonkdim"]
        assert c.parameters["block_m"] % k == 0 and c.parameters["block_n"] % k == 0
        assert c.predicted_tflops is not None and c.predicted_tflops > 0


def test_kpack_2_exists_on_gfx942_only() -> None:
    assert _solve("mi300x", parameter_pins={"kpack": 2}).candidates
    with pytest.raises(InvalidRequestError) as caught:
        _solve("mi355x", parameter_pins={"kpack": 2})
    text = " ".join(f"{v.field}: {v.description}" for v in caught.value.violations)
    assert "kpack" in text and "1" in text


@pytest.mark.parametrize(("name", "value"), [("waves_per_eu", 5), ("matrix_instr_nonkdim", 8)])
def test_out_of_domain_knobs_name_the_field_and_the_allowed_values(name: str, value: int) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _solve("mi300x", parameter_pins={name: value})
    text = " ".join(f"{v.field}: {v.description}" for v in caught.value.violations)
    assert name in text
    allowed = {"waves_per_eu": "2", "matrix_instr_nonkdim": "32"}[name]
    assert allowed in text


def test_the_vgpr_cap_follows_the_launch_and_waves_per_eu() -> None:
    warps = np.array([1, 4, 8, 16, 4, 4])
    waves_per_eu = np.array([0, 0, 0, 0, 3, 4])
    # 512 up to 4 waves (one a SIMD), 256 at 8, 128 at 16; w = 3 gives alignDown(512 / 3, 8)
    assert launch_cap(warps, waves_per_eu).tolist() == [512, 512, 256, 128, 168, 128]


def test_waves_per_eu_caps_the_registers_of_a_pinned_tile() -> None:
    pins = {"block_m": 128, "block_n": 64, "num_warps": 4, "num_stages": 2}
    free = _solve("mi300x", parameter_pins={"waves_per_eu": 0}, **pins).candidates[0]
    capped = _solve("mi300x", parameter_pins={"waves_per_eu": 4}, **pins).candidates[0]
    vgprs = {r.name: r for r in capped.resources}["vgprs"]
    assert vgprs.capacity == 128 and vgprs.used <= 128
    assert {r.name: r for r in free.resources}["vgprs"].capacity == 512


def test_p_crosses_the_waves_through_lds_where_the_mfma_layouts_differ() -> None:
    """Triton's default picks 32x32 when a dot's smaller result dim is >= 32: a 64-row block
    with 16 keys runs its first dot on 16x16 and its second (64 x 128) on 32x32, so P crosses;
    with 32 keys both are 32x32 and 2 waves of 32 rows keep P; 4 waves of 16 rows do not; one
    wave never crosses."""
    bm = np.array([64, 64, 64, 64])
    bn = np.array([16, 32, 32, 16])
    loop = forward_kernel(bm, bn, 128, 128, 2).loops[0]
    warps = np.array([2, 2, 4, 1])
    assert chain_crosses(loop, warps, np.zeros(4, np.int64)).tolist() == [True, False, True, False]
    # matrix_instr_nonkdim = 16 sets both dots: 4 waves of 16 rows each own an MFMA row tile
    assert chain_crosses(loop, warps, np.full(4, 16)).tolist() == [False, False, False, False]


def _row_kernel(r: dict[str, str]) -> tuple[dict[str, np.ndarray], AttentionKernel]:
    """A compiled row's tile (one candidate) and the triton family's forward kernel of it, at
    the head dim the kernel's tiles use (tl.arange needs a power of two >= 16)."""
    one = {k: np.array([int(r[k])]) for k in ("block_m", "block_n", "num_warps", "num_stages")}
    d = max(16, 1 << (int(r["head_dim"]) - 1).bit_length())
    return one, forward_kernel(one["block_m"], one["block_n"], d, d, 2)


def _knob_rows() -> list[dict[str, str]]:
    """amd_knobs.csv's rows that compiled (the knob sample and aiter's defaults)."""
    with (ROOT / "benchmarks/data/compiler/amd_knobs.csv").open(newline="") as f:
        return [r for r in csv.DictReader(f) if r["status"] == "ok"]


def _estimate(r: dict[str, str]) -> AmdRegisterEstimate:
    """The model's VGPR+AGPR estimate of a compiled row, at the row's knobs."""
    one, kernel = _row_kernel(r)
    return amd_register_estimate(
        kernel,
        CompilerTarget.amd(r["target"]),
        one["num_warps"],
        one["num_stages"],
        np.array([int(r["waves_per_eu"])]),
        np.array([int(r["matrix_instr_nonkdim"])]),
        r.get("causal") == "1",
    )


def test_the_lds_rules_meet_the_knob_sample() -> None:
    """The knobs compiled (amd_knobs.csv): every row within 2% of the compiled LDS."""
    rows = _knob_rows()
    assert len(rows) >= 40
    for r in rows:
        one, kernel = _row_kernel(r)
        model = amd_lds_bytes(
            kernel,
            CompilerTarget.amd(r["target"]),
            one["num_warps"],
            one["num_stages"],
            np.array([int(r["matrix_instr_nonkdim"])]),
        )
        compiled = int(r["shared_bytes"])
        assert abs(int(model[0]) - compiled) <= 0.02 * compiled, r


def test_a_crossing_chain_sits_in_the_one_stage_arena() -> None:
    """At one stage the chained tile P, where it crosses the waves, passes through LDS like an
    operand: every compiled one-stage AMD forward row whose P crosses (and is the largest tile)
    asks for P's bytes, as the model states (docs/model.md 19.10, model 0.25.0)."""
    path = ROOT / "benchmarks/data/compiler/triton_resources.csv"
    with path.open(newline="") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if r["status"] == "ok"
            and r["kernel"] == "fwd"
            and r["target"].startswith("gfx")
            and r["num_stages"] == "1"
        ]
    checked = 0
    for r in rows:
        one, kernel = _row_kernel(r)
        (loop,) = kernel.loops
        if not chain_crosses(loop, one["num_warps"], np.zeros(1, np.int64))[0]:
            continue
        p_bytes = int(r["block_m"]) * int(r["block_n"]) * 2
        d = int(loop.chain.out_cols)
        if p_bytes <= max(int(r["block_m"]), int(r["block_n"])) * d * 2:
            continue  # an operand is at least as large: P does not decide the arena
        model = amd_lds_bytes(
            kernel, CompilerTarget.amd(r["target"]), one["num_warps"], one["num_stages"]
        )
        assert int(r["shared_bytes"]) == p_bytes == int(model[0]), r["key"]
        checked += 1
    assert checked >= 5


def _compiled_amd_rows() -> list[dict[str, str]]:
    """The knob sample and the data set's AMD forward rows that compiled."""
    rows = _knob_rows()
    with (ROOT / "benchmarks/data/compiler/triton_resources.csv").open(newline="") as f:
        rows += [
            r | {"waves_per_eu": "0", "matrix_instr_nonkdim": "0"}
            for r in csv.DictReader(f)
            if r["status"] == "ok" and r["kernel"] == "fwd" and r["target"].startswith("gfx")
        ]
    return rows


def test_aiters_triton_defaults_spill_where_the_compiler_says() -> None:
    """aiter's shipped Triton forward defaults compiled (amd_knobs.csv's expert rows: 128 x 64,
    4 waves, waves_per_eu 2): the model's spill verdict is the compiler's at every head dim,
    the spill at d 256 included (docs/model.md 19.8)."""
    rows = [r for r in _knob_rows() if r["sample"] != "knob"]
    assert len(rows) == 6
    for r in rows:
        est = _estimate(r)
        assert (int(est.spilled[0]) > 0) == (int(r["vgpr_spills"]) > 0), r
    assert {r["head_dim"] for r in rows if int(r["vgpr_spills"]) > 0} == {"256"}


def test_a_causal_spill_sits_where_the_compiler_puts_it() -> None:
    """The causal kernels compiled near their caps (amd_causal_loops.csv: each of the two
    loops' scratch accesses an iteration): the unmasked loop, which holds no mask indices,
    spills where the model's live state without them passes the cap (`unmasked_spilled`), on
    more rows than the kernel-wide spill says, and with fewer bytes over what it moves
    (docs/model.md 19.10, model 0.32.0)."""
    with (ROOT / "benchmarks/data/compiler/amd_causal_loops.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    assert len(rows) >= 80
    by_loop = by_kernel = 0
    bytes_loop = bytes_kernel = compiled_bytes = 0
    only_masked = 0
    for r in rows:
        est = _estimate(r | {"matrix_instr_nonkdim": "0"})
        loop, kernel = int(est.unmasked_spilled[0]), int(est.spilled[0])
        assert loop <= kernel
        spills = int(r["unmasked_scratch"]) > 0
        by_loop += (loop > 0) == spills
        by_kernel += (kernel > 0) == spills
        bytes_loop += 8 * loop
        bytes_kernel += 8 * kernel
        compiled_bytes += int(r["unmasked_scratch_bytes"])
        if int(r["vgpr_spills"]) > 0 and not spills:
            only_masked += 1
    assert only_masked >= 3  # the compiler keeps a small spill out of the unmasked loop
    assert by_loop >= 0.95 * len(rows) and by_loop > by_kernel
    assert abs(bytes_loop - compiled_bytes) < abs(bytes_kernel - compiled_bytes)


def test_the_causal_tiles_unmasked_loop_runs_without_the_masked_loops_spill() -> None:
    """aiter's 128 x 64 at waves_per_eu 2, causal d 128 on MI300X: the estimate puts the masked
    loop over the cap and the unmasked loop under it, so the round (the unmasked loop's
    iteration) is the non-causal kernel's: the spill is charged to the diagonal blocks only."""
    pins = {"block_m": 128, "block_n": 64, "num_warps": 4, "num_stages": 1}
    pins |= {"waves_per_eu": 2, "matrix_instr_nonkdim": 32, "kpack": 1}
    opts = SolveOptions(kernel="triton", engine="exhaustive", parameter_pins=pins)
    plain = AttentionProblem(batch=2, heads=16, seq_len=8192, head_dim=128, dtype="bf16")
    causal = plain.model_copy(update={"causal": True})
    tables, picked = {}, {}
    for name, problem in (("causal", causal), ("plain", plain)):
        table = prepare(problem, "mi300x", opts)
        cfg = table.cfg
        (picked[name],) = np.flatnonzero(
            table.feasible & np.all([cfg[k] == v for k, v in pins.items()], axis=0)
        )
        tables[name] = table
    res = tables["causal"].res
    i = picked["causal"]
    assert int(res.regs.spilled[i]) > 0 and int(res.regs.unmasked_spilled[i]) == 0
    rounds = {k: float(t.perf.figures["round_us"][picked[k]]) for k, t in tables.items()}
    assert rounds["causal"] == pytest.approx(rounds["plain"])


def test_the_vgpr_split_meets_the_compiled_rows() -> None:
    """Where a compiled kernel uses AGPRs, its architectural VGPRs sit at the split the model
    states (all of the cap up to 256, half of it with gfx950's asynchronous copies), within
    LLVM's last granule."""
    used = 0
    for r in _compiled_amd_rows():
        if int(r["agprs"]) == 0:
            continue
        est = _estimate(r)
        assert int(est.arch_cap[0]) - 8 < int(r["vgprs"]) <= int(est.arch_cap[0]), r
        used += 1
    assert used >= 20


def test_the_wave_layout_terms() -> None:
    """A wave holds at least one MFMA row tile of S and Q (copies where the block has fewer rows
    than waves x 16); the second dot splits O over dv once the rows run out; gfx950's
    asynchronous copies stage nothing in registers, gfx942's stream pipeliner does."""
    warps = np.array([1, 2, 4])
    loop = forward_kernel(np.full(3, 16), np.full(3, 64), 128, 128, 2).loops[0]
    gfx942 = CompilerTarget.amd("gfx942")
    terms = loop_terms(loop, gfx942, warps, np.full(3, 2), np.zeros(3, np.int64))
    assert terms["S"].tolist() == [terms["S"][0]] * 3  # 16 rows: every wave holds them all
    assert (terms["O"] * warps).tolist() == [terms["O"][0]] * 3  # O split over dv
    big = forward_kernel(np.full(3, 128), np.full(3, 64), 128, 128, 2).loops[0]
    terms = loop_terms(big, gfx942, warps, np.full(3, 2), np.zeros(3, np.int64))
    assert (terms["S"] * warps).tolist() == [terms["S"][0]] * 3  # rows shared out, no copies
    stages = np.array([1, 2, 3])
    gfx950 = loop_terms(big, CompilerTarget.amd("gfx950"), warps, stages, np.zeros(3, np.int64))
    assert gfx950["staged"].tolist()[1:] == [0.0, 0.0] and gfx950["staged"][0] > 0
    assert (loop_terms(big, gfx942, warps, stages, np.zeros(3, np.int64))["staged"] > 0).all()


# The 16-bit MFMA instructions' K depth by target and edge: v_mfma_f32_32x32x8 and 16x16x16 on
# gfx942 (CDNA3), 32x32x16 and 16x16x32 on gfx950 (CDNA4), the instructions the compiled loops
# of amd_load_cover.csv issue
MFMA_DEPTH = {("gfx942", 32): 8, ("gfx942", 16): 16, ("gfx950", 32): 16, ("gfx950", 16): 32}


def _loop_mfmas(target: str, bm: int, bn: int, w: int, d: int) -> float:
    """MFMA instructions a wave issues in one iteration, by the wave layout (Triton's default
    instruction, as the model states it, for both dots)."""
    m1 = int(default_nonkdim(np.array([bm]), np.array([bn]))[0])
    m2 = int(default_nonkdim(np.array([bm]), np.array([d]))[0])
    layout = ChainedDotLayout.of(
        np.array([float(bm)]),
        np.array([float(d)]),
        np.array([float(w)]),
        np.array([float(m1)]),
        np.array([float(m2)]),
    )
    first = layout.rows_first[0] * bn * d / (m1 * m1 * MFMA_DEPTH[target, m1])
    second = layout.rows_second[0] * layout.cols_second[0] * bn / (m2 * m2 * MFMA_DEPTH[target, m2])
    return float(first + second)


def test_the_wave_layout_gives_every_compiled_loops_mfma_count() -> None:
    """Per wave, the MFMAs of the layout's rows and columns (copies included) are exactly the
    MFMAs of every compiled forward loop of amd_load_cover.csv; the unique work spread over the
    waves, what the cost charged before model 0.29.0, misses the rows whose waves outnumber the
    MFMA row tiles (128 x 64 with 8 waves on 32x32 MFMAs: every S row twice)."""
    path = ROOT / "benchmarks/data/compiler/amd_load_cover.csv"
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    copied = 0
    for r in rows:
        t, d = r["target"], int(r["head_dim"])
        bm, bn, w = int(r["block_m"]), int(r["block_n"]), int(r["num_warps"])
        assert _loop_mfmas(t, bm, bn, w, d) == int(r["loop_mfmas"]), r
        unique_per_wave = _loop_mfmas(t, bm, bn, 1, d) / w if bm >= 32 else None
        copied += unique_per_wave is not None and unique_per_wave != int(r["loop_mfmas"])
    assert len(rows) >= 100 and copied >= 40


def test_waves_beyond_the_mfma_rows_are_legal_and_pay_their_copies() -> None:
    """PyTorch FlexAttention's ROCm default at d 256 (32 x 64, 8 waves, the 32x32 MFMA) compiles
    (docs/model.md 19.10) and is feasible; its MFMA time is 4.5x the one-wave tile's: S eight
    times over (every wave all 32 rows), O once (the waves split dv)."""
    problem = AttentionProblem(batch=2, heads=8, seq_len=8192, head_dim=256, dtype="bf16")
    pins = {"block_m": 32, "block_n": 64, "matrix_instr_nonkdim": 32, "num_stages": 1}
    opts = SolveOptions(kernel="triton", engine="exhaustive", parameter_pins=pins)
    table = prepare(problem, "mi300x", opts)
    cfg, f = table.cfg, table.perf.figures
    pinned = table.feasible & (cfg["waves_per_eu"] == 0) & (cfg["kpack"] == 1)
    (eight,) = np.flatnonzero(pinned & (cfg["num_warps"] == 8))
    (one,) = np.flatnonzero(pinned & (cfg["num_warps"] == 1))
    assert f["mfma_us"][eight] / f["mfma_us"][one] == pytest.approx(4.5)


def test_the_reasons_name_the_waves_copies() -> None:
    """A tile whose waves outnumber its MFMA row tiles says so in its reasons (PyTorch's flex
    default shape: 128 x 64, 8 waves, 32x32 MFMAs computes S twice); one wave a row tile says
    nothing of copies."""

    def reasons(warps: int) -> list[str]:
        pins = {"block_m": 128, "block_n": 64, "num_warps": warps, "num_stages": 1}
        pins["matrix_instr_nonkdim"] = 32
        answer = _solve("mi300x", top_k=1, parameter_pins=pins)
        return answer.candidates[0].reasons

    eight = [r for r in reasons(8) if "MFMA row tile" in r]
    assert eight and "2x the scores' work" in eight[0], eight
    assert not [r for r in reasons(4) if "MFMA row tile" in r]


def test_fp8_runs_on_both_generations() -> None:
    fp8 = AttentionProblem(batch=2, heads=16, seq_len=4096, head_dim=128, dtype="fp8")
    for hardware in ("mi300x", "mi355x"):
        assert _solve(hardware, fp8).candidates


def test_the_backward_on_rocm_is_refused_naming_the_forward() -> None:
    back = AttentionProblem(batch=2, heads=16, seq_len=4096, head_dim=128, phase="backward")
    with pytest.raises(InvalidRequestError) as caught:
        _solve("mi300x", back)
    (violation,) = caught.value.violations
    assert violation.field == "kernel" and "forward" in violation.description


def test_triton_on_an_ascend_device_names_both_kinds() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        _solve("ascend-910b")
    assert any("cuda and rocm" in v.description for v in caught.value.violations)


def test_both_engines_agree_on_rocm() -> None:
    small = AttentionProblem(batch=1, heads=8, seq_len=2048, head_dim=64, causal=True)
    cpsat = _solve("mi355x", small, top_k=5)
    exhaustive = _solve("mi355x", small, top_k=5, engine="exhaustive")
    assert [c.parameters for c in cpsat.candidates] == [c.parameters for c in exhaustive.candidates]


def test_format_triton_prints_the_amd_knobs_in_the_kwargs(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """`--format triton` on a rocm device: each triton.Config's kwargs hold BLOCK_M, BLOCK_N
    and the three knobs as Triton's AMD backend reads them; the same from a server."""
    argv = ["solve", "--hardware", "mi300x", "--kernel", "triton", "--head-dim", "128",
            "--seq-len", "4096", "--top-k", "3", "--format", "triton"]  # fmt: skip
    code, local, _ = run(capsys, *argv)
    assert code == 0
    configs = [line for line in local.splitlines() if "triton.Config(" in line]
    assert len(configs) == 3
    for line in configs:
        for key in ("'BLOCK_M'", "'waves_per_eu'", "'matrix_instr_nonkdim'", "'kpack'"):
            assert key in line
    code, remote, _ = run(capsys, *argv, "--server", target)
    assert code == 0 and remote == local
