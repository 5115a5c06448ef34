"""AMD's occupancy rules for a `rocm` device (CDNA3 gfx942, CDNA4 gfx950): how many waves of a
kernel a SIMD holds, from its registers, its LDS, its workgroup size and `waves_per_eu`.

The rules, as AMD's documentation and LLVM's AMDGPU backend state them (docs/model.md 19.2):

- **VGPRs** (LLVM `AMDGPUBaseInfo.cpp` getTotalNumVGPRs, getVGPRAllocGranule, getMaxWavesPerEU
  for a VGPR count): a wave's registers come from the SIMD's unified file of
  `vgprs_per_simd_lane` (512) entries per lane. Without AGPRs it uses its architectural VGPRs;
  with AGPRs, `align(arch, 4) + agpr`. The total is rounded up to the allocation granule (8 in
  LLVM, 16 in the ROCm workload guide: a conflict the catalog keeps), and the SIMD holds
  min(max_waves_per_simd, floor(512 / rounded)) waves. At most 256 of each kind per wave.
- **SGPRs** (LLVM getMaxWavesPerEU for an SGPR count, gfx9): the SIMD's `sgprs_per_simd` over the
  wave's SGPRs rounded up to their granule.
- **LDS** (LLVM commit 5f38ae4, AMDGPUUsage.rst): a workgroup's LDS is rounded up to the granule
  (512 B on gfx942, 1280 B on gfx950); at most `lds_per_workgroup_bytes`; the CU holds
  floor(lds_per_cu / rounded) workgroups.
- **Workgroups** (LLVM getMaxFlatWorkGroupSize): at most `max_workgroup_threads` work-items,
  ceil(threads / 64) waves, spread over the CU's SIMDs.
- **Combined** (ROCm MI300X workload guide, "Compute the occupancy of a kernel"): with nW waves
  per workgroup, workgroups per CU = min(floor(occ_vgpr x SIMDs / nW), occ_lds), and waves per
  SIMD = that x nW / SIMDs (a mean: a workgroup's waves spread over the SIMDs). The wave
  slots (max_waves_per_simd x SIMDs) cap it as occ_vgpr does.
- **waves_per_eu** (LLVM's `amdgpu-waves-per-eu` attribute, which Triton's `waves_per_eu` and
  CK's occupancy hint set): a request for at least w waves per SIMD makes the compiler cap a
  wave's VGPR+AGPR total at alignDown(512 / w, granule) (LLVM getMaxNumVGPRs for w waves); it
  changes the allocation, not the launch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hardware import RocmCompute
from .space import IntArray, ceil_div


def _align_up(x: IntArray, to: int) -> IntArray:
    return np.asarray(ceil_div(x, to) * to, dtype=np.int64)


def wave_registers(rocm: RocmCompute, arch_vgprs: IntArray, agprs: IntArray) -> IntArray:
    """A wave's allocated VGPR+AGPR total, registers per lane: align(arch, 4) + agpr when it
    uses AGPRs (else arch), rounded up to the allocation granule (LLVM getTotalNumVGPRs)."""
    arch = np.asarray(arch_vgprs, dtype=np.int64)
    acc = np.asarray(agprs, dtype=np.int64)
    total = np.where(acc > 0, _align_up(arch, rocm.agpr_alignment_regs) + acc, arch)
    return _align_up(np.maximum(total, 1), rocm.vgpr_alloc_granule_regs)


def register_cap(rocm: RocmCompute, waves_per_eu: IntArray) -> IntArray:
    """The VGPR+AGPR total the compiler allows a wave that asks for `waves_per_eu` waves per SIMD
    (0: no request): alignDown(file / w, granule), at most the addressable total."""
    w = np.asarray(waves_per_eu, dtype=np.int64)
    addressable = rocm.max_arch_vgprs_per_wave + rocm.max_agprs_per_wave
    granule = rocm.vgpr_alloc_granule_regs
    per_wave = (rocm.vgprs_per_simd_lane // np.maximum(w, 1)) // granule * granule
    return np.asarray(np.where(w > 0, np.minimum(per_wave, addressable), addressable), np.int64)


def vgpr_waves(rocm: RocmCompute, arch_vgprs: IntArray, agprs: IntArray) -> IntArray:
    """Waves per SIMD the VGPRs allow (0: more registers than a wave may address)."""
    arch = np.asarray(arch_vgprs, dtype=np.int64)
    acc = np.asarray(agprs, dtype=np.int64)
    total = wave_registers(rocm, arch, acc)
    waves = np.minimum(rocm.max_waves_per_simd, rocm.vgprs_per_simd_lane // total)
    legal = (arch <= rocm.max_arch_vgprs_per_wave) & (acc <= rocm.max_agprs_per_wave)
    return np.asarray(np.where(legal, waves, 0), dtype=np.int64)


def sgpr_waves(rocm: RocmCompute, sgprs: IntArray) -> IntArray:
    """Waves per SIMD the SGPRs allow (0: more than a wave may address)."""
    s = np.asarray(sgprs, dtype=np.int64)
    rounded = _align_up(np.maximum(s, 1), rocm.sgpr_alloc_granule_regs)
    waves = np.minimum(rocm.max_waves_per_simd, rocm.sgprs_per_simd // rounded)
    return np.asarray(np.where(s <= rocm.max_sgprs_per_wave, waves, 0), dtype=np.int64)


def lds_allocation(rocm: RocmCompute, lds_bytes: IntArray) -> IntArray:
    """A workgroup's LDS as allocated: rounded up to the granule, bytes."""
    return _align_up(np.asarray(lds_bytes, dtype=np.int64), rocm.lds_alloc_granule_bytes)


def lds_workgroups(rocm: RocmCompute, lds_bytes: IntArray) -> IntArray:
    """Workgroups per CU the LDS allows (0: over the per-workgroup limit; a workgroup with no
    LDS is limited by the CU's wave slots instead)."""
    allocated = lds_allocation(rocm, lds_bytes)
    fits = allocated <= rocm.lds_per_workgroup_bytes
    per_cu = np.where(allocated > 0, rocm.lds_per_cu_bytes // np.maximum(allocated, 1), 1 << 30)
    return np.asarray(np.where(fits, per_cu, 0), dtype=np.int64)


def waves_per_workgroup(rocm: RocmCompute, threads: IntArray) -> IntArray:
    """Wavefronts of a workgroup of `threads` work-items."""
    return np.asarray(ceil_div(np.asarray(threads, dtype=np.int64), rocm.wavefront_lanes))


@dataclass(frozen=True)
class RocmOccupancyArrays:
    """The occupancy of every candidate (arrays), and which rule binds."""

    workgroups_per_cu: IntArray
    waves_per_cu: IntArray  # workgroups x waves per workgroup
    vgpr_waves: IntArray  # waves per SIMD the VGPRs allow
    sgpr_waves: IntArray
    lds_workgroups: IntArray  # workgroups per CU the LDS allows
    slot_workgroups: IntArray  # workgroups per CU the wave slots allow
    limiter: list[str]  # "vgprs", "sgprs", "lds", "waves" or "workgroup size"


def rocm_occupancy_arrays(
    rocm: RocmCompute,
    threads: IntArray,
    arch_vgprs: IntArray,
    agprs: IntArray,
    sgprs: IntArray,
    lds_bytes: IntArray,
) -> RocmOccupancyArrays:
    """Workgroups per CU and waves per SIMD of each candidate (the ROCm workload guide's
    combination of the VGPR, SGPR, LDS and wave-slot limits)."""
    n_w = waves_per_workgroup(rocm, threads)
    simds = rocm.simds_per_cu
    by_vgpr = vgpr_waves(rocm, arch_vgprs, agprs)
    by_sgpr = sgpr_waves(rocm, sgprs)
    by_lds = lds_workgroups(rocm, lds_bytes)
    too_big = np.asarray(threads, dtype=np.int64) > rocm.max_workgroup_threads
    n_w_safe = np.maximum(n_w, 1)
    wg_vgpr = by_vgpr * simds // n_w_safe
    wg_sgpr = by_sgpr * simds // n_w_safe
    wg_slots = np.full_like(n_w, rocm.waves_per_cu) // n_w_safe
    stacked = np.stack([wg_vgpr, wg_sgpr, by_lds, wg_slots])
    workgroups = np.where(too_big, 0, stacked.min(axis=0))
    names = ("vgprs", "sgprs", "lds", "waves", "workgroup size")
    order = np.where(too_big, len(names) - 1, np.argmin(stacked, axis=0))
    limiter = [names[k] for k in order.tolist()]
    return RocmOccupancyArrays(
        np.asarray(workgroups, dtype=np.int64),
        np.asarray(workgroups * n_w, dtype=np.int64),
        by_vgpr,
        by_sgpr,
        by_lds,
        np.asarray(wg_slots, dtype=np.int64),
        limiter,
    )


@dataclass(frozen=True)
class RocmOccupancy:
    """One kernel's occupancy on one CU."""

    workgroups_per_cu: int
    waves_per_cu: int
    simds_per_cu: int
    allocated_vgprs: int  # VGPR+AGPR per lane as allocated
    allocated_lds_bytes: int
    limiter: str

    @property
    def waves_per_simd(self) -> float:
        """The workload guide's waves per EU: workgroups x waves per workgroup / SIMDs."""
        return self.waves_per_cu / self.simds_per_cu


def rocm_occupancy(
    rocm: RocmCompute,
    threads: int,
    arch_vgprs: int,
    agprs: int = 0,
    sgprs: int = 0,
    lds_bytes: int = 0,
) -> RocmOccupancy:
    """The occupancy of one kernel launch configuration (the scalar form of
    `rocm_occupancy_arrays`)."""

    def one(x: int) -> IntArray:
        return np.array([x], dtype=np.int64)

    arrays = rocm_occupancy_arrays(
        rocm, one(threads), one(arch_vgprs), one(agprs), one(max(sgprs, 1)), one(lds_bytes)
    )
    return RocmOccupancy(
        workgroups_per_cu=int(arrays.workgroups_per_cu[0]),
        waves_per_cu=int(arrays.waves_per_cu[0]),
        simds_per_cu=rocm.simds_per_cu,
        allocated_vgprs=int(wave_registers(rocm, one(arch_vgprs), one(agprs))[0]),
        allocated_lds_bytes=int(lds_allocation(rocm, one(lds_bytes))[0]),
        limiter=arrays.limiter[0],
    )
