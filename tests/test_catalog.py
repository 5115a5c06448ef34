"""The hardware catalog: every entry loads, every number is cited, aliases resolve, and the
figures agree with the sourced reference (tests/data/hardware.json, a copy of
shared/reference/hardware.json)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tilesolve.solver import hardware
from tilesolve.solver.errors import InvalidRequestError, UnknownHardwareError
from tilesolve.solver.hardware import (
    AscendCore,
    AscendDevice,
    CudaDevice,
    HardwareSpec,
    get_hardware,
    hardware_names,
    load_catalog,
    parse_hardware,
)

from contracts import REQUIRED_HARDWARE_NAMES

REQUIRED_NAMES = REQUIRED_HARDWARE_NAMES

CATALOG_NAMES = sorted(load_catalog())


def _reference_path() -> Path | None:
    """hardware.json: $TILESOLVE_REFERENCE_DIR, else the copy in tests/data, else shared/."""
    repo = Path(__file__).resolve().parents[1]
    candidates = [
        repo / "tests" / "data",
        repo / "shared" / "reference",
        repo.parent / "shared" / "reference",
    ]
    env = os.environ.get("TILESOLVE_REFERENCE_DIR")
    if env:
        candidates.insert(0, Path(env))
    for folder in candidates:
        if (folder / "hardware.json").is_file():
            return folder / "hardware.json"
    return None


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    path = _reference_path()
    if path is None:
        pytest.skip("shared/reference/hardware.json is not present")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _ref_value(entry: dict[str, Any], key: str) -> Any:
    return entry[key]["value"]


# ---------------------------------------------------------------------------- 1. names load


@pytest.mark.parametrize("name", REQUIRED_NAMES)
def test_required_device_loads(name: str) -> None:
    assert name in hardware_names()
    spec = get_hardware(name)
    assert isinstance(spec, HardwareSpec)
    assert spec.name == name


def test_sections_match_arch() -> None:
    for spec in load_catalog().values():
        if isinstance(spec, CudaDevice):
            assert spec.vendor == "nvidia" and spec.arch == "cuda"
            assert not hasattr(spec, "ascend")
            # FlashAttention-3 is Hopper's (cc 9.0) kernel, FlashAttention-4 Blackwell's (10.x,
            # 12.x); FlashAttention-2 needs sm80+; Volta and Turing fall back to Triton.
            expected = "triton" if spec.sm.cc_major < 8 else "fa2"
            if spec.sm.compute_capability == "9.0":
                expected = "fa3"
            if spec.sm.cc_major in (10, 12):
                expected = "fa4"
            assert spec.default_kernel == expected, spec.name
        elif spec.arch == "rocm":  # AMD Instinct: its own checks in tests/test_rocm_catalog.py
            assert spec.vendor == "amd" and not hasattr(spec, "sm") and not hasattr(spec, "ascend")
            assert spec.default_kernel == "ck"
        else:
            assert isinstance(spec, AscendDevice)
            assert spec.vendor == "huawei" and spec.arch == "ascend"
            assert not hasattr(spec, "sm") and not hasattr(spec, "throughput")
            assert spec.default_kernel == "ascend"


def test_catalog_files_are_named_after_the_device() -> None:
    folder = Path(__file__).resolve().parents[1] / "solver" / "catalog"
    files = sorted(p.stem for p in folder.glob("*.toml"))
    assert files == CATALOG_NAMES


# ---------------------------------------------------------------------------- 2. sources

# Non-numeric fields a source may (and for Ascend devices must) cite besides the numbers.
CITED_NON_NUMERIC = {
    "sm.compute_capability",
    "ascend.core_layout",
    "ascend.cube_bf16_supported",
    "rocm.gfx_target",
    "rocm.fp8_format",
}


@pytest.mark.parametrize("name", CATALOG_NAMES)
def test_every_number_is_cited(name: str) -> None:
    spec = load_catalog()[name]
    paths = set(spec.numeric_field_paths())
    missing = sorted(p for p in paths if not spec.sources.get(p, "").strip())
    assert not missing, f"{name}: numbers without a source: {missing}"
    # A source may also cite a non-numeric field (the compute capability string), but every
    # key must name a field of a section this device has.
    fields = {
        f"{section}.{field}"
        for section in ("memory", "sm", "throughput", "ascend", "rocm")
        if getattr(spec, section, None) is not None
        for field in type(getattr(spec, section)).model_fields
    }
    stray = sorted(set(spec.sources) - fields)
    assert not stray, f"{name}: sources for fields that do not exist: {stray}"
    non_numeric = set(spec.sources) - paths
    assert non_numeric <= CITED_NON_NUMERIC, f"{name}: {sorted(non_numeric - CITED_NON_NUMERIC)}"


# ---------------------------------------------------------------------------- 3. aliases


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("A100-SXM4-80GB", "a100-80gb"),
        ("a100", "a100-80gb"),
        ("A100_SXM4_40GB", "a100-40gb"),
        ("H100", "h100-sxm"),
        ("h100-sxm5", "h100-sxm"),
        ("SM75", "t4"),  # sm<major><minor>: the one device of that compute capability
        ("sm_70", "v100"),
        ("sm103", "b300"),
        ("GB200", "gb200"),
        ("RTX-PRO-6000-Blackwell", "rtx-pro-6000"),
        ("H200", "h200"),
        ("RTX 4090", "rtx-4090"),
        ("GeForce-RTX-4090", "rtx-4090"),
        ("Tesla-T4", "t4"),
        ("910B2", "ascend-910b"),
        ("910", "ascend-910"),
        ("310P", "ascend-310p3"),
        ("  L4 ", "l4"),
        ("MI300X", "mi300x"),
        ("mi300", "mi300x"),
        ("Instinct-MI300X", "mi300x"),
        ("MI350X", "mi350x"),
        ("mi350", "mi350x"),
        ("mi355", "mi355x"),
    ],
)
def test_alias_resolves(alias: str, canonical: str) -> None:
    assert get_hardware(alias).name == canonical


@pytest.mark.parametrize(
    ("name", "sharing"),
    [
        ("sm80", ["a100-40gb", "a100-80gb"]),
        ("sm86", ["a10", "rtx-3090"]),
        ("SM89", ["l4", "l40s", "rtx-4090"]),
        ("sm_90", ["h100-pcie", "h100-sxm", "h200"]),
        ("sm100", ["b200", "gb200"]),
        ("sm120", ["rtx-5090", "rtx-pro-6000"]),
    ],
)
def test_sm_name_shared_by_several_devices_is_refused_naming_them(
    name: str, sharing: list[str]
) -> None:
    with pytest.raises(InvalidRequestError) as info:
        get_hardware(name)
    assert not isinstance(info.value, UnknownHardwareError)
    [violation] = info.value.violations
    assert violation.field == "hardware"
    assert f"{name!r} is ambiguous" in violation.description
    assert f"{', '.join(sharing[:-1])} and {sharing[-1]}" in violation.description


def test_sm_names_follow_the_catalogs_compute_capabilities() -> None:
    """An sm<major><minor> name resolves exactly when one catalog device has that capability,
    and no catalog file claims one as an alias."""
    by_capability: dict[str, list[str]] = {}
    for name, spec in load_catalog().items():
        assert not any(re.fullmatch(r"sm[-_]?\d+", a.lower()) for a in spec.aliases), name
        if isinstance(spec, CudaDevice):
            by_capability.setdefault(spec.sm.compute_capability, []).append(name)
    for capability, names in by_capability.items():
        sm_name = "sm" + capability.replace(".", "")
        if len(names) == 1:
            assert get_hardware(sm_name).name == names[0]
        else:
            with pytest.raises(InvalidRequestError, match="ambiguous"):
                get_hardware(sm_name)
    with pytest.raises(UnknownHardwareError):
        get_hardware("sm61")  # no catalog device of compute capability 6.1


def test_aliases_are_unique_across_files() -> None:
    owner: dict[str, str] = {}
    for name, spec in load_catalog().items():
        for key in (name, *spec.aliases):
            folded = key.strip().lower().replace("_", "-").replace(" ", "-")
            assert owner.setdefault(folded, name) == name, f"{key!r}: {owner[folded]} and {name}"


@pytest.mark.parametrize("name", CATALOG_NAMES)
def test_the_alias_index_reads_each_files_head_as_the_whole_file_says(name: str) -> None:
    # get_hardware looks names up in the files' top-level keys, parsed alone (issue 24)
    text = (Path(__file__).resolve().parents[1] / "solver" / "catalog" / f"{name}.toml").read_text()
    whole = tomllib.loads(text)
    head = hardware._catalog_head(name)
    assert head["name"] == whole["name"] == name
    assert head.get("aliases") == whole.get("aliases")
    assert head == {k: v for k, v in whole.items() if not isinstance(v, dict)}


def test_a_head_cut_inside_a_multi_line_value_is_read_from_the_whole_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = 'name = "x"\nnotes = """\n[not a table]\n"""\naliases = ["y"]\n[memory]\nl2_bytes = 1\n'
    monkeypatch.setattr(hardware, "_catalog_texts", lambda: {"x": text})
    assert hardware._catalog_head("x")["aliases"] == ["y"]


_ONE_QUESTION = """
import json
from tilesolve.solver import hardware as h
spec = h.get_hardware("A100")
print(json.dumps({"validated": h._catalog_device.cache_info().currsize,
                  "built": sorted(k for k, c in h.DEVICE_KINDS.items() if c.__pydantic_complete__),
                  "same": spec is h.load_catalog()["a100-80gb"]}))
"""


def test_a_lookup_validates_only_the_device_it_names() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _ONE_QUESTION], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # one device validated, only the CUDA schema built; the full catalog holds the same object
    assert json.loads(done.stdout) == {"validated": 1, "built": ["cuda"], "same": True}


def test_unknown_hardware_lists_known_names() -> None:
    with pytest.raises(UnknownHardwareError) as info:
        get_hardware("gtx-480-ti-nonexistent")
    message = str(info.value)
    assert "gtx-480-ti-nonexistent" in message
    for name in ("a100-80gb", "h100-sxm", "ascend-910b"):
        assert name in message
    assert info.value.known == hardware_names()


# ---------------------------------------------------------------------------- 4. reference

PRODUCT_KEYS = {
    "a100-80gb": "A100_80GB_SXM",
    "h100-sxm": "H100_SXM",
    "h200": "H200_SXM",
    "rtx-4090": "RTX_4090",
    "l4": "L4",
}


@pytest.mark.parametrize("name", sorted(PRODUCT_KEYS))
def test_product_figures_match_reference(name: str, reference: dict[str, Any]) -> None:
    ref = reference["products"][PRODUCT_KEYS[name]]
    spec = get_hardware(name)
    assert isinstance(spec, CudaDevice)
    sm, tp = spec.sm, spec.throughput
    assert sm.compute_capability == ref["cc"]
    assert tp.sm_count == _ref_value(ref, "sm_count")
    assert tp.boost_clock_mhz == pytest.approx(_ref_value(ref, "boost_clock_mhz"))
    assert spec.memory.dram_bandwidth_gb_per_s == pytest.approx(
        _ref_value(ref, "mem_bandwidth_gbs")
    )
    assert tp.tensor_fp16_dense_tflops == pytest.approx(
        _ref_value(ref, "fp16_tensor_fp32acc_dense_tflops")
    )


SM_REFERENCE_KEYS = {
    "warp_size": "warp_size_threads",
    "max_threads_per_block": "max_threads_per_block",
    "max_threads_per_sm": "max_threads_per_sm",
    "max_resident_blocks_per_sm": "max_blocks_per_sm",
    "regs_32bit_per_sm": "regs_per_sm",
    "max_regs_per_block": "max_regs_per_block",
    "max_regs_per_thread": "max_regs_per_thread",
    "reg_alloc_unit_regs": "reg_alloc_unit_regs",
    "reg_file_subpartitions": "reg_file_subpartitions",
    "max_smem_per_sm_bytes": "smem_per_sm_bytes",
    "max_smem_per_block_optin_bytes": "smem_per_block_optin_bytes",
    "default_smem_per_block_bytes": "smem_per_block_default_bytes",
    "smem_alloc_granularity_bytes": "smem_alloc_granularity_bytes",
    "reserved_smem_per_block_bytes": "reserved_smem_per_block_bytes",
    "smem_carveout_options_kb": "smem_carveout_options_kib",
}

CUDA_NAMES = [n for n in CATALOG_NAMES if load_catalog()[n].arch == "cuda"]


@pytest.mark.parametrize("name", CUDA_NAMES)
def test_sm_limits_match_reference(name: str, reference: dict[str, Any]) -> None:
    device = get_hardware(name)
    assert isinstance(device, CudaDevice)
    sm = device.sm
    if sm.compute_capability not in reference["compute_capabilities"]:
        pytest.skip(f"cc {sm.compute_capability}: pinned in tests/test_blackwell_catalog.py")
    ref = reference["compute_capabilities"][sm.compute_capability]
    for ref_key, field in SM_REFERENCE_KEYS.items():
        got = getattr(sm, field)
        want = ref[ref_key]["value"]
        if isinstance(got, tuple):
            got = list(got)
        assert got == want, f"{name} sm.{field}: {got} != reference {want}"


def test_derived_tensor_rate_per_sm() -> None:
    a100_device, h100_device = get_hardware("a100-80gb"), get_hardware("h100-sxm")
    assert isinstance(a100_device, CudaDevice) and isinstance(h100_device, CudaDevice)
    a100, h100 = a100_device.throughput, h100_device.throughput
    assert a100.tensor_flops_per_clk_per_sm(2) == pytest.approx(2048, rel=0.01)
    assert h100.tensor_flops_per_clk_per_sm(2) == pytest.approx(989.4e12 / (132 * 1.98e9), rel=0.01)
    assert h100.tensor_flops_per_clk_per_sm(2) == pytest.approx(3786, rel=0.01)
    # fp8 uses its own peak where one is given, the fp16 peak otherwise
    assert h100.tensor_flops_per_clk_per_sm(1) == pytest.approx(
        2 * h100.tensor_flops_per_clk_per_sm(2), rel=0.01
    )
    assert a100.tensor_flops_per_clk_per_sm(1) == a100.tensor_flops_per_clk_per_sm(2)


# ---------------------------------------------------------------------------- 5. inline specs


def _dump(name: str) -> dict[str, Any]:
    return get_hardware(name).model_dump()


def test_inline_copy_of_catalog_entry_validates() -> None:
    for name in ("a100-80gb", "ascend-910b"):
        again = parse_hardware(_dump(name))
        assert again == get_hardware(name)


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("sm", "max_threads_per_sm", -5),
        ("sm", "smem_per_block_optin_bytes", 200 * 1024),  # above the 164 KiB per SM
        ("sm", "smem_carveout_options_kib", (0, 64, 32, 164)),  # not increasing
        ("sm", "compute_capability", "eight"),
        ("throughput", "mma_sync_efficiency", 1.5),
        ("throughput", "sm_count", 0),
        ("memory", "dram_bandwidth_gb_per_s", -1.0),
    ],
)
def test_inline_nonsense_is_rejected(section: str, field: str, value: Any) -> None:
    data = _dump("a100-80gb")
    data[section][field] = value
    with pytest.raises(pydantic.ValidationError):
        parse_hardware(data)


def test_inline_cuda_without_sm_section_is_rejected() -> None:
    data = _dump("h100-sxm")
    data["sm"] = None
    with pytest.raises(pydantic.ValidationError):
        parse_hardware(data)


def test_inline_arch_names_the_device_kinds() -> None:
    data = _dump("l4")
    data["arch"] = "metal"
    with pytest.raises(pydantic.ValidationError) as caught:
        parse_hardware(data)
    (error,) = caught.value.errors()
    assert error["loc"] == ("arch",)
    assert all(f"'{kind}'" in str(error) for kind in ("cuda", "ascend", "rocm"))


def test_inline_ascend_sections_on_a_cuda_device_are_rejected() -> None:
    data = _dump("l4")
    data["ascend"] = _dump("ascend-910b")["ascend"]
    with pytest.raises(pydantic.ValidationError):
        parse_hardware(data)


def test_inline_unknown_field_is_rejected() -> None:
    data = _dump("l4")
    data["memory"]["hbm_stacks"] = 6
    with pytest.raises(pydantic.ValidationError):
        parse_hardware(data)


# ---------------------------------------------------------------------------- 6. Ascend

ASCEND_NAMES = [n for n in CATALOG_NAMES if load_catalog()[n].arch == "ascend"]

# Fields an Ascend FlashAttention model needs beyond the buffer sizes; every inline Ascend
# spec must give the required ones, a catalog entry gives the optional ones where known.
ASCEND_REQUIRED = (
    "core_layout",
    "aic_count",
    "aiv_count",
    "cube_clock_mhz",
    "vector_clock_mhz",
    "cube_fp16_macs_per_cycle",
    "cube_bf16_supported",
)
TRANSFER_RATES = (
    "gm_read_bytes_per_cycle",
    "gm_write_bytes_per_cycle",
    "l2_read_bytes_per_cycle",
    "l2_write_bytes_per_cycle",
    "l1_to_l0a_bytes_per_cycle",
    "l1_to_l0b_bytes_per_cycle",
    "l1_to_ub_bytes_per_cycle",
    "l0c_to_ub_bytes_per_cycle",
    "ub_to_l2_bytes_per_cycle",
    "ub_to_gm_bytes_per_cycle",
    "ub_to_l1_bytes_per_cycle",
)
ASCEND_OPTIONAL = (
    "standalone_vector_core_count",
    "vector_fp16_elements_per_cycle",
    "cube_fp16_gemm_measured_tflops",
    *TRANSFER_RATES,
)


def test_ascend_devices_are_the_required_three() -> None:
    assert ASCEND_NAMES == ["ascend-310p3", "ascend-910", "ascend-910b"]


def test_ascend_schema_has_the_model_fields() -> None:
    fields = AscendCore.model_fields
    for name in (*ASCEND_REQUIRED, *ASCEND_OPTIONAL, "unconfirmed_fields"):
        assert name in fields, name
        assert fields[name].description, f"{name} has no description"
    for name in ASCEND_REQUIRED:
        assert fields[name].is_required(), name
    for name in ASCEND_OPTIONAL:
        assert not fields[name].is_required() and fields[name].default is None, name


@pytest.mark.parametrize("name", ASCEND_NAMES)
def test_ascend_entry_carries_and_cites_the_model_fields(name: str) -> None:
    spec = get_hardware(name)
    core = spec.ascend
    assert core is not None
    for field in ASCEND_REQUIRED:
        assert getattr(core, field) is not None, field
        assert spec.sources.get(f"ascend.{field}", "").strip(), f"{name}: ascend.{field} uncited"
    for field in ASCEND_OPTIONAL:
        if getattr(core, field) is None:
            # No figure at all: the notes say which fields are missing.
            assert field in spec.notes, f"{name}: {field} is None but the notes do not say so"
        else:
            assert spec.sources.get(f"ascend.{field}", "").strip(), f"{name}: {field} uncited"


@pytest.mark.parametrize("name", ASCEND_NAMES)
def test_unconfirmed_fields_match_the_sources(name: str) -> None:
    spec = get_hardware(name)
    assert spec.ascend is not None
    marked = {
        key
        for key, text in spec.sources.items()
        if key.split(".")[0] in ("ascend", "memory") and text.startswith("unconfirmed:")
    }
    assert set(spec.ascend.unconfirmed_fields) == marked


def test_ascend_core_layouts() -> None:
    b, a, p = (get_hardware(n).ascend for n in ("ascend-910b", "ascend-910", "ascend-310p3"))
    assert b is not None and a is not None and p is not None
    assert (b.core_layout, b.aic_count, b.aiv_count, b.ai_core_count) == ("split", 24, 48, 24)
    assert b.standalone_vector_core_count is None
    assert (a.core_layout, a.aic_count, a.aiv_count, a.ai_core_count) == ("coupled", 32, 32, 32)
    assert (p.core_layout, p.aic_count, p.aiv_count, p.ai_core_count) == ("coupled", 8, 8, 8)
    assert p.standalone_vector_core_count == 7
    # BF16 is a 910B feature; the coupled parts run fp16 kernels only.
    assert b.cube_bf16_supported and not a.cube_bf16_supported and not p.cube_bf16_supported


def test_ascend_910b_rates_are_the_ini_figures() -> None:
    core = get_hardware("ascend-910b").ascend
    assert core is not None
    # hicann/pypto Ascend910B1.ini [AICoreMemoryRates], bytes per cycle.
    ini = {
        "gm_read_bytes_per_cycle": 32,
        "gm_write_bytes_per_cycle": 32,
        "l2_read_bytes_per_cycle": 110,
        "l2_write_bytes_per_cycle": 86,
        "l1_to_l0a_bytes_per_cycle": 512,
        "l1_to_l0b_bytes_per_cycle": 256,
        "l1_to_ub_bytes_per_cycle": 128,
        "l0c_to_ub_bytes_per_cycle": 256,
        "ub_to_l2_bytes_per_cycle": 64,
        "ub_to_gm_bytes_per_cycle": 64,
        "ub_to_l1_bytes_per_cycle": 128,
    }
    assert {f: getattr(core, f) for f in ini} == ini
    assert core.cube_fp16_macs_per_cycle == 4096 and core.vector_fp16_elements_per_cycle == 128
    assert core.cube_clock_mhz == core.vector_clock_mhz == 1800
    assert core.cube_fp16_gemm_measured_tflops == pytest.approx(0.889 * 353.9, rel=0.01)
    # the ini's per-core rates are unconfirmed for the 910B2 (they were read on the 910B1)
    assert {f"ascend.{f}" for f in ini} <= set(core.unconfirmed_fields)


@pytest.mark.parametrize("name", ASCEND_NAMES)
def test_ascend_peak_is_count_times_rate_times_clock(name: str) -> None:
    core = get_hardware(name).ascend
    assert core is not None
    implied = core.aic_count * core.cube_fp16_macs_per_cycle * 2 * core.cube_clock_mhz / 1e6
    assert implied == pytest.approx(core.cube_fp16_tflops, rel=0.01)
    assert core.cube_fp16_tflops_from_clock() == pytest.approx(implied)


def test_inline_ascend_spec_missing_fields_is_rejected_naming_them() -> None:
    data = _dump("ascend-910b")
    for field in ASCEND_REQUIRED:
        del data["ascend"][field]
    with pytest.raises(pydantic.ValidationError) as info:
        parse_hardware(data)
    missing = {
        ".".join(str(p) for p in e["loc"]) for e in info.value.errors() if e["type"] == "missing"
    }
    assert missing == {f"ascend.{field}" for field in ASCEND_REQUIRED}


def test_inline_ascend_spec_without_optional_figures_validates() -> None:
    data = _dump("ascend-910b")
    for field in ASCEND_OPTIONAL:
        data["ascend"].pop(field)
    data["ascend"]["unconfirmed_fields"] = ()
    core = parse_hardware(data).ascend
    assert core is not None
    assert all(getattr(core, f) is None for f in ASCEND_OPTIONAL)


@pytest.mark.parametrize(
    ("name", "changes", "message"),
    [
        ("ascend-910b", {"aic_count": 20}, "aic_count"),  # != ai_core_count 24
        ("ascend-910b", {"aiv_count": 50}, "multiple of aic_count"),
        ("ascend-910b", {"standalone_vector_core_count": 2}, "coupled parts only"),
        ("ascend-910", {"aiv_count": 64}, "aiv_count"),  # coupled: one vector unit per core
        ("ascend-910b", {"cube_clock_mhz": 1500.0}, "cube_fp16_tflops"),  # 295 vs 353.9
        ("ascend-910b", {"cube_fp16_tflops": 380.0}, "cube_fp16_tflops"),
        ("ascend-910b", {"cube_fp16_macs_per_cycle": 8192}, "cube_fp16_tflops"),
        ("ascend-910b", {"core_layout": "fused"}, "core_layout"),
        ("ascend-910b", {"l1_to_l0a_bytes_per_cycle": 0}, "l1_to_l0a_bytes_per_cycle"),
        ("ascend-910b", {"vector_clock_mhz": -1.0}, "vector_clock_mhz"),
        ("ascend-910b", {"unconfirmed_fields": ("ascend.l3_bytes",)}, "ascend.l3_bytes"),
        ("ascend-910b", {"unconfirmed_fields": ("sm.regs_per_sm",)}, "sm.regs_per_sm"),
        ("ascend-910", {"unconfirmed_fields": ("ascend.l2_write_bytes_per_cycle",)}, "None"),
        (
            "ascend-910b",
            {"unconfirmed_fields": ("ascend.cube_clock_mhz", "ascend.cube_clock_mhz")},
            "repeat",
        ),
    ],
)
def test_inline_ascend_inconsistency_is_rejected(
    name: str, changes: dict[str, Any], message: str
) -> None:
    data = _dump(name)
    data["ascend"].update(changes)
    with pytest.raises(pydantic.ValidationError) as info:
        parse_hardware(data)
    assert message in str(info.value)
