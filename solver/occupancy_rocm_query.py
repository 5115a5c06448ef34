"""One launch on a rocm device whose occupancy is asked for (`tilesolve-cli occupancy --hardware
mi300x ...`, the Occupancy RPC on a rocm device), and its answer by AMD's rules
(`occupancy_rocm`, docs/model.md 19.2).

The launch: `threads` work-items per workgroup, `vgprs` architectural VGPRs and `agprs` AGPRs per
lane, `sgprs` per wave, `lds_bytes` of LDS per workgroup, and `waves_per_eu` (LLVM's
`amdgpu-waves-per-eu`, Triton's knob: 0 none). With a waves_per_eu request the compiler caps a
wave's VGPR+AGPR at alignDown(512 / n, granule): counts above the cap are what the kernel would
need, and the report gives what it would be allocated (the cap) and how many spill.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from pydantic import (
    BaseModel,
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from .hardware import RocmCompute, RocmDevice
from .occupancy_rocm import register_cap, rocm_occupancy_arrays, wave_registers
from .schema_config import FROZEN_SCHEMA
from .violations import validated_on_device, within_device_range

ADDRESSABLE = 256  # architectural VGPRs, or AGPRs, one wave addresses
MAX_WAVES_PER_EU = 8  # LLVM's range of amdgpu-waves-per-eu on gfx9


class RocmOccupancyQuery(BaseModel):
    """One workgroup launch on a rocm device. Validate it with `on(spec, data)`: the device's
    limits then bound every field, and each message names the range on that device."""

    model_config = FROZEN_SCHEMA

    threads: int = Field(ge=1, description="work-items per workgroup")
    vgprs: int = Field(ge=0, le=ADDRESSABLE, description="architectural VGPRs per lane")
    agprs: int = Field(0, ge=0, le=ADDRESSABLE, description="AGPRs (accumulation VGPRs) per lane")
    sgprs: int = Field(0, ge=0, description="SGPRs per wave (0: not limiting)")
    lds_bytes: int = Field(0, ge=0, description="LDS per workgroup, bytes")
    waves_per_eu: int = Field(
        0, ge=0, le=MAX_WAVES_PER_EU, description="amdgpu-waves-per-eu request (0: none)"
    )

    @field_validator("threads", "sgprs", "lds_bytes", mode="wrap")
    @classmethod
    def _within_the_device(
        cls, value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> int:
        """With a device in the validation context (`on`), its limit is the upper bound."""
        spec = (info.context or {}).get("device")
        if not isinstance(spec, RocmDevice) or info.field_name is None:
            number: int = handler(value)
            return number
        r = spec.rocm
        highest, what = {
            "threads": (r.max_workgroup_threads, f"the largest workgroup on {spec.name}"),
            "sgprs": (r.max_sgprs_per_wave, f"the SGPRs a wave addresses on {spec.name}"),
            "lds_bytes": (r.lds_per_workgroup_bytes, f"a workgroup's LDS on {spec.name}"),
        }[info.field_name]
        lowest = 1 if info.field_name == "threads" else 0
        return within_device_range(handler, value, lowest, highest, what)

    @classmethod
    def on(cls, spec: RocmDevice, data: Mapping[str, object]) -> RocmOccupancyQuery:
        """`data` (the fields by name, as numbers or text) as a launch on `spec`; raises
        InvalidRequestError naming every bad field and what is allowed."""
        return validated_on_device(cls, spec, data)


@dataclass(frozen=True)
class RocmOccupancyReport:
    """The occupancy of one launch on one CU, with the limit of every rule."""

    workgroups_per_cu: int
    limiter: str  # "vgprs", "sgprs", "lds", "waves" or "workgroup size"
    waves_per_workgroup: int
    waves_per_cu: int
    max_waves_per_cu: int
    waves_per_simd: float  # the workload guide's waves per EU (a mean)
    allocated_vgprs: int  # VGPR+AGPR per lane as allocated (after the waves_per_eu cap)
    spilled_vgprs: int  # registers per lane above the cap
    vgpr_cap: int  # what a wave may allocate under the waves_per_eu request
    allocated_lds_bytes: int
    vgpr_waves_per_simd: int
    sgpr_waves_per_simd: int
    limit_lds: int  # workgroups per CU the LDS allows (-1: no LDS, unlimited)
    limit_waves: int  # workgroups per CU the wave slots allow

    @property
    def occupancy(self) -> float:
        """Resident waves over the CU's wave slots, 0..1."""
        return self.waves_per_cu / self.max_waves_per_cu


def rocm_occupancy_report(rocm: RocmCompute, query: RocmOccupancyQuery) -> RocmOccupancyReport:
    """The launch's occupancy by AMD's rules (docs/model.md 19.2)."""

    def one(x: int) -> np.ndarray:
        return np.array([x], dtype=np.int64)

    need = int(wave_registers(rocm, one(query.vgprs), one(query.agprs))[0])
    cap = int(register_cap(rocm, one(query.waves_per_eu))[0])
    vgprs, agprs = query.vgprs, query.agprs
    if need > cap:  # the compiler fits the wave under the cap: architectural first
        vgprs = min(cap, ADDRESSABLE)
        agprs = cap - vgprs
    arrays = rocm_occupancy_arrays(
        rocm,
        one(query.threads),
        one(vgprs),
        one(agprs),
        one(max(query.sgprs, 1)),
        one(query.lds_bytes),
    )
    allocated = int(wave_registers(rocm, one(vgprs), one(agprs))[0])
    lds = int(arrays.lds_workgroups[0])
    granule = rocm.lds_alloc_granule_bytes
    waves = -(-query.threads // rocm.wavefront_lanes)
    workgroups = int(arrays.workgroups_per_cu[0])
    return RocmOccupancyReport(
        workgroups_per_cu=workgroups,
        limiter=arrays.limiter[0],
        waves_per_workgroup=waves,
        waves_per_cu=int(arrays.waves_per_cu[0]),
        max_waves_per_cu=rocm.waves_per_cu,
        waves_per_simd=int(arrays.waves_per_cu[0]) / rocm.simds_per_cu,
        allocated_vgprs=allocated,
        spilled_vgprs=max(need - cap, 0),
        vgpr_cap=cap,
        allocated_lds_bytes=-(-query.lds_bytes // granule) * granule,
        vgpr_waves_per_simd=int(arrays.vgpr_waves[0]),
        sgpr_waves_per_simd=int(arrays.sgpr_waves[0]),
        limit_lds=-1 if query.lds_bytes == 0 else lds,
        limit_waves=int(arrays.slot_workgroups[0]),
    )
