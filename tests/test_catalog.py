"""The hardware catalog: every entry loads, every number is cited, aliases resolve, and the
figures agree with the sourced reference (tests/data/hardware.json, a copy of
shared/reference/hardware.json)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tilesolve.solver.errors import InvalidRequestError, UnknownHardwareError
from tilesolve.solver.hardware import HardwareSpec, get_hardware, hardware_names, load_catalog

from contracts import DESIGN_HARDWARE_NAMES

REQUIRED_NAMES = DESIGN_HARDWARE_NAMES

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
        if spec.arch == "cuda":
            assert spec.vendor == "nvidia"
            assert spec.sm is not None and spec.throughput is not None and spec.ascend is None
            # FlashAttention-2 needs sm80+; Volta and Turing fall back to Triton.
            expected = "triton" if spec.sm.cc_major < 8 else "fa2"
            assert spec.default_kernel == expected, spec.name
        else:
            assert spec.vendor == "huawei"
            assert spec.ascend is not None and spec.sm is None and spec.throughput is None
            assert spec.default_kernel == "ascend"


def test_catalog_files_are_named_after_the_device() -> None:
    folder = Path(__file__).resolve().parents[1] / "solver" / "catalog"
    files = sorted(p.stem for p in folder.glob("*.toml"))
    assert files == CATALOG_NAMES


# ---------------------------------------------------------------------------- 2. sources


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
        for section in ("memory", "sm", "throughput", "ascend")
        if getattr(spec, section) is not None
        for field in type(getattr(spec, section)).model_fields
    }
    stray = sorted(set(spec.sources) - fields)
    assert not stray, f"{name}: sources for fields that do not exist: {stray}"
    non_numeric = sorted(set(spec.sources) - paths)
    assert non_numeric in ([], ["sm.compute_capability"]), f"{name}: {non_numeric}"


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
        ("sm100", "b200"),
        ("sm120", "rtx-5090"),
        ("H200", "h200"),
        ("RTX 4090", "rtx-4090"),
        ("GeForce-RTX-4090", "rtx-4090"),
        ("Tesla-T4", "t4"),
        ("910B2", "ascend-910b"),
        ("910", "ascend-910"),
        ("310P", "ascend-310p3"),
        ("  L4 ", "l4"),
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
        if spec.sm is not None:
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
    sm, tp = spec.cuda
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
    sm, _ = get_hardware(name).cuda
    ref = reference["compute_capabilities"][sm.compute_capability]
    for ref_key, field in SM_REFERENCE_KEYS.items():
        got = getattr(sm, field)
        want = ref[ref_key]["value"]
        if isinstance(got, tuple):
            got = list(got)
        assert got == want, f"{name} sm.{field}: {got} != reference {want}"


def test_derived_tensor_rate_per_sm() -> None:
    _, a100 = get_hardware("a100-80gb").cuda
    _, h100 = get_hardware("h100-sxm").cuda
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
        again = HardwareSpec.model_validate(_dump(name))
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
        HardwareSpec.model_validate(data)


def test_inline_cuda_without_sm_section_is_rejected() -> None:
    data = _dump("h100-sxm")
    data["sm"] = None
    with pytest.raises(pydantic.ValidationError):
        HardwareSpec.model_validate(data)


def test_inline_unknown_field_is_rejected() -> None:
    data = _dump("l4")
    data["memory"]["hbm_stacks"] = 6
    with pytest.raises(pydantic.ValidationError):
        HardwareSpec.model_validate(data)
