"""The AMD Instinct catalog entries (issue 26): the `rocm` device kind's schema, the MI300X,
MI325X and MI355X figures against the sourced reference (tests/data/hardware_blackwell_amd.json),
the MI350X as the MI355X's die at its own clock, the unconfirmed marks and the conflicts kept
visible, and bad inline devices refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tilesolve.solver import AttentionProblem, InvalidRequestError, SolveOptions, solve
from tilesolve.solver.hardware import RocmDevice, get_hardware, load_catalog, parse_hardware

ROCM_NAMES = sorted(n for n, spec in load_catalog().items() if spec.arch == "rocm")
REFERENCE = Path(__file__).resolve().parent / "data" / "hardware_blackwell_amd.json"
BY_NAME = {
    "mi300x": "AMD Instinct MI300X",
    "mi325x": "AMD Instinct MI325X",
    "mi355x": "AMD Instinct MI355X",
}


def _rocm(name: str) -> RocmDevice:
    spec = get_hardware(name)
    assert isinstance(spec, RocmDevice)
    return spec


def _reference(name: str) -> dict[str, Any]:
    devices = json.loads(REFERENCE.read_text(encoding="utf-8"))["devices"]
    (entry,) = [d for d in devices if d["name"] == BY_NAME[name]]
    return dict(entry)


def _dump(name: str) -> dict[str, Any]:
    data: dict[str, Any] = get_hardware(name).model_dump(mode="json")
    return data


def test_the_instinct_parts_are_rocm_devices() -> None:
    assert ROCM_NAMES == ["mi300x", "mi325x", "mi350x", "mi355x"]
    targets = [_rocm(n).rocm.gfx_target for n in ROCM_NAMES]
    assert targets == ["gfx942", "gfx942", "gfx950", "gfx950"]
    for name in ROCM_NAMES:
        assert _rocm(name).vendor == "amd" and _rocm(name).default_kernel == "ck"


@pytest.mark.parametrize("name", ["mi300x", "mi325x", "mi355x"])
def test_figures_agree_with_the_sourced_reference(name: str) -> None:
    ref = _reference(name)
    occ = ref["occupancy"]
    spec = _rocm(name)
    r = spec.rocm
    assert r.cu_count == ref["cu_count"]["value"]
    assert r.engine_clock_mhz == ref["peak_engine_clock_mhz"]["value"]
    assert r.wavefront_lanes == occ["wavefront_size"]["value"]
    assert r.lds_per_cu_bytes == occ["lds_per_cu"]["value"]
    assert r.lds_per_workgroup_bytes == occ["lds_per_workgroup_max"]["value"]
    assert r.lds_alloc_granule_bytes == occ["lds_alloc_granularity_bytes"]["value"]
    assert r.simds_per_cu == occ["simds_per_cu"]["value"]
    assert r.max_waves_per_simd == occ["max_waves_per_simd"]["value"]
    assert r.vgprs_per_simd_lane == occ["vgprs_per_lane_total"]["value"]
    assert r.vgpr_alloc_granule_regs == occ["vgpr_alloc_granule"]["value"]
    assert r.max_workgroup_threads == occ["max_workgroup_threads"]["value"]
    # the VGPR file per CU: SIMDs x entries x lanes x 4 bytes
    kib = r.simds_per_cu * r.vgprs_per_simd_lane * r.wavefront_lanes * 4 // 1024
    assert kib == occ["vgpr_file_per_cu_kib"]["value"]
    assert spec.memory.l2_bytes == ref["l2_bytes"]["value"]
    assert r.infinity_cache_bytes == ref["infinity_cache_mall_bytes"]["value"]
    assert spec.memory.memory_bytes == ref["hbm_capacity_gb"]["value"] << 30
    assert spec.memory.dram_bandwidth_gb_per_s == ref["hbm_bandwidth_tbs"]["value"] * 1000
    assert r.mfma_bf16_dense_tflops == pytest.approx(ref["dense_bf16_tflops"]["value"])
    assert r.mfma_fp8_dense_tflops == pytest.approx(ref["dense_fp8_tflops"]["value"])
    if "xcd_count" in ref:
        assert r.xcd_count == ref["xcd_count"]["value"]


@pytest.mark.parametrize("name", ["mi300x", "mi325x", "mi355x"])
def test_unconfirmed_marks_match_the_sources(name: str) -> None:
    """A figure whose source is not 'sourced' in the reference is marked unconfirmed (or
    named 'derived' in its source), and `unconfirmed_fields` lists exactly the marked ones."""
    spec = _rocm(name)
    marked = {k for k, text in spec.sources.items() if text.startswith("unconfirmed:")}
    assert set(spec.rocm.unconfirmed_fields) == marked
    ref = _reference(name)
    if ref["peak_engine_clock_mhz"]["status"] != "sourced":
        text = spec.sources["rocm.engine_clock_mhz"]
        assert text.startswith(("unconfirmed:", "derived:"))
    # the VGPR granule conflict (LLVM 8, ROCm guide 16) is kept in view
    assert "rocm.vgpr_alloc_granule_regs" in spec.rocm.unconfirmed_fields
    assert "16" in spec.sources["rocm.vgpr_alloc_granule_regs"] and "granule" in spec.notes


def test_the_fp8_formats_differ_by_target() -> None:
    assert _rocm("mi300x").rocm.fp8_format == "e4m3fnuz"
    assert _rocm("mi355x").rocm.fp8_format == "e4m3"


# What the MI350X may differ in from the MI355X, whose die it is: the clock and the rates that
# scale with it, and which of those are marked unconfirmed
CLOCKED = {
    "engine_clock_mhz",
    "mfma_fp16_dense_tflops",
    "mfma_bf16_dense_tflops",
    "mfma_fp8_dense_tflops",
    "valu_fp32_tflops",
    "unconfirmed_fields",
}


def test_the_mi350x_is_the_mi355x_die_at_its_own_clock() -> None:
    """The MI350X (solver/catalog/mi350x.toml) is the MI355X's die at 2.2 GHz against 2.4: every
    figure but the clocked ones is the MI355X's, and the clocked rates are its per-CU rates at
    2.2 GHz (256 CU x 4096 BF16 FLOP/clk/CU x 2.2 GHz = 2306.9 TFLOP/s, AMD's 2.3 PFLOP/s)."""
    mi350x, mi355x = _rocm("mi350x"), _rocm("mi355x")
    assert mi350x.memory == mi355x.memory
    assert mi350x.rocm.model_dump(exclude=CLOCKED) == mi355x.rocm.model_dump(exclude=CLOCKED)
    r = mi350x.rocm
    assert r.engine_clock_mhz == 2200.0 and mi355x.rocm.engine_clock_mhz == 2400.0
    per_clock = r.cu_count * 4096 * r.engine_clock_mhz * 1e6 / 1e12
    assert r.mfma_bf16_dense_tflops == pytest.approx(per_clock, rel=1e-4)
    assert r.mfma_fp16_dense_tflops == r.mfma_bf16_dense_tflops
    assert r.mfma_fp8_dense_tflops == pytest.approx(2 * per_clock, rel=1e-4)
    assert r.valu_fp32_tflops == pytest.approx(mi355x.rocm.valu_fp32_tflops * 2.2 / 2.4, rel=1e-3)
    marked = {k for k, text in mi350x.sources.items() if text.startswith("unconfirmed:")}
    assert set(r.unconfirmed_fields) == marked
    # the BF16 rate is AMD's own figure; the clock, FP8 and the vector rate are not
    assert "rocm.mfma_bf16_dense_tflops" not in marked
    derived = {"rocm.engine_clock_mhz", "rocm.mfma_fp8_dense_tflops", "rocm.valu_fp32_tflops"}
    assert derived <= marked
    assert r.fp8_format == "e4m3" and "granule" in mi350x.notes


def test_the_mi350x_answers_below_the_mi355x_by_its_clock() -> None:
    """The same kernel on the slower clock: never faster, and at most by the clock's ratio slower
    than the MI355X where the kernel is bound by the CU (a long non-causal prefill)."""
    problem = AttentionProblem(batch=2, heads=16, seq_len=8192, head_dim=128, dtype="bf16")
    for kernel in ("ck", "triton"):
        fast = solve(problem, "mi355x", SolveOptions(kernel=kernel)).candidates[0]
        slow = solve(problem, "mi350x", SolveOptions(kernel=kernel)).candidates[0]
        ratio = slow.predicted_tflops / fast.predicted_tflops
        assert 2.2 / 2.4 - 0.02 <= ratio <= 1.0, (kernel, ratio)


def test_the_mi355x_bf16_conflict_is_in_its_notes() -> None:
    spec = _rocm("mi355x")
    assert "2516.6" in spec.notes and "2500" in spec.notes


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cu_count", 300),  # not a multiple of 8 XCDs
        ("lds_per_workgroup_bytes", 1 << 20),  # more than the CU has
        ("lds_alloc_granule_bytes", 1000),  # 64 KiB is not a whole number of them
        ("max_arch_vgprs_per_wave", 300),  # 300 + 256 AGPRs > 512
        ("fp8_format", None),  # an fp8 rate without its format
        ("mfma_nonk_dims", [32, 16]),
        ("wavefront_lanes", 48),  # 1024 threads is not a whole number of waves
    ],
)
def test_inconsistent_inline_devices_are_refused(field: str, value: Any) -> None:
    data = _dump("mi300x")
    data["rocm"][field] = value
    with pytest.raises(pydantic.ValidationError):
        parse_hardware(data)


def test_l2_must_be_the_xcds_l2s_together() -> None:
    data = _dump("mi300x")
    data["memory"]["l2_bytes"] = 16 << 20
    with pytest.raises(pydantic.ValidationError, match="l2_per_xcd_bytes"):
        parse_hardware(data)


def test_an_inline_rocm_device_missing_a_field_names_it() -> None:
    data = _dump("mi300x")
    del data["rocm"]["lds_per_cu_bytes"]
    with pytest.raises(pydantic.ValidationError) as caught:
        parse_hardware(data)
    assert [e["loc"] for e in caught.value.errors()] == [("rocm", "lds_per_cu_bytes")]


def test_a_rocm_section_on_a_cuda_device_is_refused() -> None:
    data = _dump("h100-sxm")
    data["rocm"] = _dump("mi300x")["rocm"]
    with pytest.raises(pydantic.ValidationError):
        parse_hardware(data)


def test_an_inline_rocm_device_solves_like_the_catalog_entry() -> None:
    data = _dump("mi300x")
    data["name"] = "my-mi300x"
    problem = AttentionProblem(seq_len=2048, head_dim=128)
    inline = solve(problem, parse_hardware(data))
    catalog = solve(problem, "mi300x")
    assert [c.parameters for c in inline.candidates] == [c.parameters for c in catalog.candidates]


def test_a_cuda_family_on_a_rocm_device_names_what_runs_there() -> None:
    """The device rules refuse fa2, fa3, fa4, flashinfer and ascend on a rocm device, and the
    refusal names the families that run there (ck, and the ROCm kernels of flex and triton)."""
    for kernel in ("fa2", "fa3", "fa4", "flashinfer", "ascend"):
        with pytest.raises(InvalidRequestError) as caught:
            solve(
                AttentionProblem(seq_len=1024, head_dim=128), "mi300x", SolveOptions(kernel=kernel)
            )
        (violation,) = caught.value.violations
        assert violation.field == "kernel"
        assert "rocm device" in violation.description
        assert violation.description.endswith(
            "(families that run this problem on mi300x: ck, flex, triton)"
        )


def test_ck_on_a_cuda_device_names_what_runs_there() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        solve(AttentionProblem(seq_len=1024, head_dim=128), "h100-sxm", SolveOptions(kernel="ck"))
    (violation,) = caught.value.violations
    assert violation.field == "kernel" and "runs on rocm devices" in violation.description
    assert "fa3" in violation.description and "ck" not in violation.description.split(":")[-1]
