"""The rocm occupancy calculator pinned to the published rules (issue 26).

Each test states one rule with its source and checks the calculator against numbers worked out
by hand from that rule: LLVM's AMDGPU backend (`AMDGPUBaseInfo.cpp`: getTotalNumVGPRs,
getVGPRAllocGranule, getMaxWavesPerEU, getMaxFlatWorkGroupSize; the LDS granules of commit
5f38ae4, AMDGPUUsage.rst) and ROCm's MI300X workload guide ("Compute the occupancy of a
kernel"), as shared/reference/blackwell_amd.md section 2 quotes them.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilesolve.solver import get_hardware
from tilesolve.solver.hardware import RocmCompute, RocmDevice
from tilesolve.solver.occupancy_rocm import (
    lds_allocation,
    lds_workgroups,
    register_cap,
    rocm_occupancy,
    rocm_occupancy_arrays,
    sgpr_waves,
    vgpr_waves,
    wave_registers,
)


def _rocm(name: str) -> RocmCompute:
    spec = get_hardware(name)
    assert isinstance(spec, RocmDevice)
    return spec.rocm


GFX942 = _rocm("mi300x")
GFX950 = _rocm("mi355x")


def _a(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_vgprs_round_up_to_the_granule_of_eight() -> None:
    """getVGPRAllocGranule = 8 on gfx90a+: 170 -> 176, 8 -> 8, 1 -> 8 (the catalog keeps the
    ROCm guide's 16 as a conflict; this pins the value used)."""
    assert GFX942.vgpr_alloc_granule_regs == 8
    assert wave_registers(GFX942, _a(170, 8, 1, 256), _a(0, 0, 0, 0)).tolist() == [
        176,
        8,
        8,
        256,
    ]


def test_agprs_add_to_the_arch_vgprs_aligned_to_four() -> None:
    """getTotalNumVGPRs with AGPRs: alignTo(arch, 4) + agpr, then the granule: 130 arch + 64
    acc -> 132 + 64 = 196 -> 200; 128 + 128 = 256."""
    assert wave_registers(GFX942, _a(130, 128, 1), _a(64, 128, 1)).tolist() == [200, 256, 8]


def test_waves_per_simd_from_the_unified_file_of_512() -> None:
    """waves = min(8, floor(512 / rounded)): 64 -> 8, 96 -> 5, 128 -> 4, 176 -> 2, 256 -> 2,
    256 + 256 -> 1."""
    got = vgpr_waves(GFX942, _a(64, 96, 128, 170, 256, 256), _a(0, 0, 0, 0, 0, 256))
    assert got.tolist() == [8, 5, 4, 2, 2, 1]


def test_the_rocm_guide_example_of_170_vgprs() -> None:
    """The workload guide: 170 VGPRs with its 16-register granule round to 176, which allows 2
    waves per EU (176 x 3 > 512). With the catalog's granule of 8 the same 176 results."""
    sixteen = GFX942.model_copy(update={"vgpr_alloc_granule_regs": 16})
    assert wave_registers(sixteen, _a(170), _a(0)).tolist() == [176]
    assert vgpr_waves(sixteen, _a(170), _a(0)).tolist() == [2]
    assert 176 * 3 > 512


def test_more_than_256_of_either_kind_cannot_run() -> None:
    """A wave addresses at most 256 architectural VGPRs and 256 AGPRs."""
    assert vgpr_waves(GFX942, _a(257, 64), _a(0, 257)).tolist() == [0, 0]


def test_waves_per_eu_caps_the_registers() -> None:
    """amdgpu-waves-per-eu = w caps a wave at alignDown(512 / w, 8): w = 3 -> 168 (so the
    guide's 170-VGPR kernel is brought down until 3 waves fit), 5 -> 96, 1 -> 512, 0 (no
    request) -> 512."""
    assert register_cap(GFX942, _a(3, 5, 1, 0, 8)).tolist() == [168, 96, 512, 512, 64]
    assert vgpr_waves(GFX942, _a(168), _a(0)).tolist() == [3]


def test_sgprs_limit_waves_on_gfx9() -> None:
    """800 SGPRs per SIMD in granules of 16: 102 -> 112 -> 7 waves; 64 -> 8 (the cap);
    over the addressable 102: none."""
    assert sgpr_waves(GFX942, _a(102, 64, 103)).tolist() == [7, 8, 0]


def test_lds_granule_is_512_bytes_on_gfx942_and_1280_on_gfx950() -> None:
    """AMDGPUUsage.rst: gfx942 allocates LDS in 128 dwords, gfx950 in 320 dwords."""
    assert lds_allocation(GFX942, _a(1, 512, 513, 32768)).tolist() == [512, 512, 1024, 32768]
    assert lds_allocation(GFX950, _a(1, 1280, 1281, 32768)).tolist() == [1280, 1280, 2560, 33280]


def test_workgroups_per_cu_from_lds() -> None:
    """floor(LDS per CU / rounded): 64 KiB on gfx942: 16 KiB -> 4, 33 KiB -> 1, over 64 KiB ->
    none; 160 KiB on gfx950: 32 KiB -> 32768 rounds to 33280 -> 4; 80 KiB -> 2."""
    assert lds_workgroups(GFX942, _a(16384, 33792, 65536, 65537)).tolist() == [4, 1, 1, 0]
    assert lds_workgroups(GFX950, _a(32768, 81920, 163840)).tolist() == [4, 2, 1]


def test_combined_occupancy_as_the_workload_guide_computes_it() -> None:
    """occ = min(floor(occ_vgpr x 4 / nW), occ_lds) x nW / 4 waves per EU. A 256-thread
    workgroup (nW = 4) with 128 VGPRs (occ_vgpr 4) and 24 KiB LDS (occ_lds 2): min(4, 2) = 2
    workgroups, 2 waves per EU, limited by LDS. With 8 KiB LDS: min(4, 8) = 4, 4 waves per EU,
    limited by VGPRs."""
    occ = rocm_occupancy(GFX942, threads=256, arch_vgprs=128, lds_bytes=24 * 1024)
    assert (occ.workgroups_per_cu, occ.waves_per_simd, occ.limiter) == (2, 2.0, "lds")
    occ = rocm_occupancy(GFX942, threads=256, arch_vgprs=128, lds_bytes=8 * 1024)
    assert (occ.workgroups_per_cu, occ.waves_per_simd, occ.limiter) == (4, 4.0, "vgprs")


def test_wave_slots_cap_small_kernels() -> None:
    """Eight waves per SIMD, 32 per CU: a 64-thread workgroup of 32 VGPRs fits 32 times."""
    occ = rocm_occupancy(GFX942, threads=64, arch_vgprs=32)
    assert (occ.workgroups_per_cu, occ.waves_per_cu, occ.limiter) == (32, 32, "vgprs")
    occ = rocm_occupancy(GFX942, threads=64, arch_vgprs=32, sgprs=16)
    assert occ.workgroups_per_cu == 32


def test_a_workgroup_over_1024_threads_cannot_launch() -> None:
    """getMaxFlatWorkGroupSize = 1024: 16 waves at most."""
    arrays = rocm_occupancy_arrays(
        GFX942, _a(1024, 1088), _a(64, 64), _a(0, 0), _a(16, 16), _a(0, 0)
    )
    assert arrays.workgroups_per_cu.tolist() == [2, 0]
    assert arrays.limiter[1] == "workgroup size"


def test_fractional_waves_per_simd_when_a_workgroup_is_smaller_than_the_simds() -> None:
    """One 128-thread workgroup (2 waves) per CU: 0.5 waves per SIMD in the guide's formula."""
    occ = rocm_occupancy(GFX942, threads=128, arch_vgprs=64, lds_bytes=40 * 1024)
    assert occ.workgroups_per_cu == 1 and occ.waves_per_simd == pytest.approx(0.5)
