"""The Blackwell parts of the catalog (issue 25): B200, GB200, B300 (compute capability 10.0 and
10.3) and RTX 5090, RTX PRO 6000 (12.0). Their figures against the sourced reference
(tests/data/hardware_blackwell_amd.json, a copy of shared/reference/hardware_blackwell_amd.json),
the occupancy rules as NVIDIA publishes them (one test per limit, on the catalog devices through
the occupancy calculator), tensor memory and the FP4 rate, the conflicts kept visible, and the
optional fields leaving every other device's description as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tilesolve import wire
from tilesolve.solver.hardware import CudaDevice, get_hardware, load_catalog, parse_hardware
from tilesolve.solver.occupancy import Limiter, occupancy

DATA = Path(__file__).resolve().parent / "data"
REFERENCE = json.loads((DATA / "hardware_blackwell_amd.json").read_text(encoding="utf-8"))
KIB = 1024

# catalog name -> the reference device's name
BLACKWELL = {
    "b200": "NVIDIA B200",
    "gb200": "NVIDIA GB200 (Blackwell GPU in Grace-Blackwell)",
    "b300": "NVIDIA B300 (Blackwell Ultra)",
    "rtx-5090": "NVIDIA GeForce RTX 5090",
    "rtx-pro-6000": "NVIDIA RTX PRO 6000 Blackwell (Workstation/Server)",
}
SM100_PARTS = ("b200", "gb200", "b300")
SM120_PARTS = ("rtx-5090", "rtx-pro-6000")

# reference occupancy key -> SmLimits field
SM_FIELDS = {
    "max_smem_per_sm": "smem_per_sm_bytes",
    "max_smem_per_block_optin": "smem_per_block_optin_bytes",
    "reserved_smem_per_block": "reserved_smem_per_block_bytes",
    "static_smem_per_block_default": "smem_per_block_default_bytes",
    "registers_per_sm": "regs_per_sm",
    "registers_per_block": "max_regs_per_block",
    "max_registers_per_thread": "max_regs_per_thread",
    "max_threads_per_sm": "max_threads_per_sm",
    "max_warps_per_sm": "max_warps_per_sm",
    "max_blocks_per_sm": "max_blocks_per_sm",
    "max_threads_per_block": "max_threads_per_block",
    "register_alloc_granularity": "reg_alloc_unit_regs",
    "smem_carveouts_kb": "smem_carveout_options_kib",
}


def reference(name: str) -> dict[str, Any]:
    entry = next(d for d in REFERENCE["devices"] if d["name"] == BLACKWELL[name])
    assert isinstance(entry, dict)
    return entry


def device(name: str) -> CudaDevice:
    spec = get_hardware(name)
    assert isinstance(spec, CudaDevice)
    return spec


# ---- every Blackwell part is in the catalog, with its compute capability --------------------


@pytest.mark.parametrize("name", sorted(BLACKWELL))
def test_the_part_is_catalogued_with_its_compute_capability(name: str) -> None:
    spec = device(name)
    assert spec.sm.compute_capability == reference(name)["cc"]
    assert spec.default_kernel == "fa4"


@pytest.mark.parametrize("name", sorted(BLACKWELL))
def test_sm_limits_match_the_sourced_reference(name: str) -> None:
    sm = device(name).sm
    occupancy_facts = reference(name)["occupancy"]
    compared = 0
    for key, field in SM_FIELDS.items():
        if key not in occupancy_facts:
            continue
        want = occupancy_facts[key]["value"]
        got = getattr(sm, field)
        assert (list(got) if isinstance(got, tuple) else got) == want, f"{name} {field}"
        compared += 1
    assert compared >= 8


@pytest.mark.parametrize("name", sorted(BLACKWELL))
def test_tensor_memory_on_sm100_only(name: str) -> None:
    sm = device(name).sm
    assert sm.tensor_memory_bytes == reference(name)["occupancy"]["tmem_per_sm"]["value"]
    if name in SM100_PARTS:
        assert (sm.tensor_memory_lanes, sm.tensor_memory_columns) == (128, 512)
    else:
        assert sm.tensor_memory_lanes is None and sm.tensor_memory_columns is None


@pytest.mark.parametrize("name", ["b200", "b300", "rtx-5090"])
def test_sourced_rates_match_the_reference(name: str) -> None:
    """Where the reference has a sourced figure, the catalog uses it."""
    ref, tp = reference(name), device(name).throughput
    pairs = (
        ("dense_bf16_tflops", tp.tensor_fp16_dense_tflops),
        ("dense_fp8_tflops", tp.tensor_fp8_dense_tflops),
        ("dense_fp4_tflops", tp.tensor_fp4_dense_tflops),
    )
    for key, got in pairs:
        if ref[key]["status"] in ("sourced", "uncertain"):
            assert got == pytest.approx(ref[key]["value"]), f"{name} {key}"


def test_fp4_rates_where_the_parts_have_them() -> None:
    for name in BLACKWELL:
        tp = device(name).throughput
        assert tp.tensor_fp4_dense_tflops is not None
        assert tp.tensor_fp8_dense_tflops is not None
        # FP4 at two to four times the FP8 rate (the PRO 6000's FP4 is a rounded estimate)
        assert tp.tensor_fp4_dense_tflops >= 1.9 * tp.tensor_fp8_dense_tflops
    for name, spec in load_catalog().items():
        if isinstance(spec, CudaDevice) and name not in BLACKWELL:
            assert spec.throughput.tensor_fp4_dense_tflops is None, name


def test_sm_counts_and_the_sm120_shared_memory() -> None:
    assert device("b200").throughput.sm_count == reference("b200")["sm_count"]["value"] == 148
    assert device("rtx-5090").throughput.sm_count == 170
    assert device("rtx-pro-6000").throughput.sm_count == 188
    assert device("b200").memory.l2_bytes == reference("b200")["l2_bytes"]["value"]


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("b200", ("126.5 MB", "65.5 MB", "1.86 GHz")),
        ("gb200", ("2.5 PF", "2.25 PF")),
        ("b300", ("160", "13.1, 14 and 15 PF")),
        ("rtx-5090", ("419", "838", "512 TMEM columns")),
        ("rtx-pro-6000", ("derived", "512 columns")),
    ],
)
def test_the_conflicts_are_visible_in_the_notes(name: str, words: tuple[str, ...]) -> None:
    notes = device(name).notes
    for word in words:
        assert word in notes, f"{name}: {word!r} not in the notes"


def test_unconfirmed_figures_are_marked() -> None:
    sources = device("b300").sources
    for field in ("throughput.sm_count", "throughput.sfu_ops_per_clk_per_sm", "memory.l2_bytes"):
        assert "unconfirmed" in sources[field], field
    assert (
        "derived, unconfirmed"
        in device("rtx-pro-6000").sources["throughput.tensor_fp16_dense_tflops"]
    )
    assert "unconfirmed" in device("gb200").sources["throughput.sm_count"]


# ---- the occupancy rules, one test per limit ------------------------------------------------
# compute capability 10.0 (B200): 2048 threads, 64 warps, 32 blocks, 228 KiB per SM, 227 KiB
# per block, 1 KiB reserved per block, 64K registers; 12.0 (RTX 5090): 1536, 48, 24, 100 KiB,
# 99 KiB. NVIDIA/cccl arch_traits.h, the Blackwell tuning guide.


def test_cc10_threads_per_sm_limit_2048() -> None:
    occ = occupancy(device("b200").sm, 1024, 16, 0)
    assert occ.blocks_per_sm == 2 and occ.limiters == (Limiter.WARPS,)


def test_cc10_warps_per_sm_limit_64() -> None:
    occ = occupancy(device("b200").sm, 128, 32, 0)
    assert occ.limit_warps == 16 and occ.max_warps_per_sm == 64


def test_cc10_blocks_per_sm_limit_32() -> None:
    occ = occupancy(device("b200").sm, 32, 32, 0)
    assert occ.blocks_per_sm == 32 and Limiter.BLOCKS in occ.limiters


def test_cc10_shared_memory_per_sm_228_kib() -> None:
    # 56 KiB + 1 KiB reserved per block: four fit in 228 KiB, not five
    occ = occupancy(device("b200").sm, 128, 32, 56 * KIB)
    assert occ.blocks_per_sm == 4 and occ.limiters == (Limiter.SHARED_MEMORY,)
    assert occ.smem_per_sm_config_bytes == 228 * KIB


def test_cc10_shared_memory_per_block_227_kib() -> None:
    assert occupancy(device("b200").sm, 128, 32, 227 * KIB).blocks_per_sm == 1
    assert occupancy(device("b200").sm, 128, 32, 227 * KIB + 1).blocks_per_sm == 0


def test_cc10_reserved_shared_memory_per_block_1_kib() -> None:
    occ = occupancy(device("b200").sm, 128, 32, 0)
    assert occ.smem_per_block_bytes == 1024 and occ.limit_shared_memory == 228


def test_cc10_carveouts() -> None:
    # 100 KiB dynamic + 1 KiB reserved at a 50 % carveout preference: the 132 KiB config
    occ = occupancy(device("b200").sm, 128, 32, 100 * KIB, carveout_percent=50)
    assert occ.smem_per_sm_config_bytes == 132 * KIB and occ.blocks_per_sm == 1


def test_cc10_registers_per_sm_64k() -> None:
    # 255 registers: 256 per thread allocated, 8192 per warp: 8 warps per SM
    occ = occupancy(device("b200").sm, 256, 255, 0)
    assert occ.blocks_per_sm == 1 and occ.limiters == (Limiter.REGISTERS,)
    assert occupancy(device("b200").sm, 256, 128, 0).blocks_per_sm == 2


def test_cc10_registers_per_thread_255() -> None:
    assert device("b200").sm.max_regs_per_thread == 255
    assert occupancy(device("b200").sm, 32, 257, 0).limit_registers == 0


def test_cc103_equals_cc100() -> None:
    b200, b300 = device("b200").sm, device("b300").sm
    assert b200.model_dump(exclude={"compute_capability"}) == b300.model_dump(
        exclude={"compute_capability"}
    )


def test_cc12_threads_per_sm_limit_1536() -> None:
    occ = occupancy(device("rtx-5090").sm, 1024, 16, 0)
    assert occ.blocks_per_sm == 1 and occ.limiters == (Limiter.WARPS,)
    assert occupancy(device("rtx-5090").sm, 512, 16, 0).blocks_per_sm == 3


def test_cc12_warps_per_sm_limit_48() -> None:
    occ = occupancy(device("rtx-5090").sm, 128, 32, 0)
    assert occ.limit_warps == 12 and occ.max_warps_per_sm == 48


def test_cc12_blocks_per_sm_limit_24() -> None:
    occ = occupancy(device("rtx-5090").sm, 32, 32, 0)
    assert occ.blocks_per_sm == 24 and Limiter.BLOCKS in occ.limiters


def test_cc12_shared_memory_per_sm_100_kib() -> None:
    # 48 KiB + 1 KiB reserved: two fit in 100 KiB
    occ = occupancy(device("rtx-5090").sm, 128, 32, 48 * KIB)
    assert occ.blocks_per_sm == 2 and occ.limiters == (Limiter.SHARED_MEMORY,)
    assert occ.smem_per_sm_config_bytes == 100 * KIB


def test_cc12_shared_memory_per_block_99_kib() -> None:
    assert occupancy(device("rtx-5090").sm, 128, 32, 99 * KIB).blocks_per_sm == 1
    assert occupancy(device("rtx-5090").sm, 128, 32, 99 * KIB + 1).blocks_per_sm == 0


def test_cc12_reserved_shared_memory_per_block_1_kib() -> None:
    occ = occupancy(device("rtx-pro-6000").sm, 128, 32, 0)
    assert occ.smem_per_block_bytes == 1024 and occ.limit_shared_memory == 100


def test_cc12_registers_per_sm_64k() -> None:
    occ = occupancy(device("rtx-5090").sm, 256, 255, 0)
    assert occ.blocks_per_sm == 1 and occ.limiters == (Limiter.REGISTERS,)


# ---- the optional fields ---------------------------------------------------------------------


def test_devices_without_the_new_fields_dump_as_before() -> None:
    dump = device("h100-sxm").model_dump()
    assert "tensor_memory_lanes" not in dump["sm"] and "tensor_memory_columns" not in dump["sm"]
    assert "tensor_fp4_dense_tflops" not in dump["throughput"]
    assert parse_hardware(dump) == get_hardware("h100-sxm")


def test_blackwell_descriptions_survive_the_wire() -> None:
    for name in BLACKWELL:
        spec = get_hardware(name)
        message = wire.spec_to_proto(spec)
        again = wire.hardware_from_proto(wire.hardware_ref_to_proto(spec))
        assert again == spec
        assert message.throughput.HasField("tensor_fp4_dense_tflops")
        assert message.sm.HasField("tensor_memory_columns") == (name in SM100_PARTS)


def test_tensor_memory_fields_go_together() -> None:
    data = device("b200").model_dump()
    del data["sm"]["tensor_memory_lanes"]
    with pytest.raises(pydantic.ValidationError, match="go together"):
        parse_hardware(data)
    data = device("b200").model_dump()
    data["sm"]["tensor_memory_columns"] = 16  # below the 32-column allocation minimum
    with pytest.raises(pydantic.ValidationError):
        parse_hardware(data)
