"""Resident blocks per SM, computed exactly as NVIDIA's occupancy calculator does.

This follows `cudaOccMaxActiveBlocksPerMultiprocessor` in the CUDA Toolkit's
`include/cuda_occupancy.h` (CUDA 13.0; see `docs/model.md`): registers are rounded up to the
allocation unit per warp and counted per register-file sub-partition; a block whose warp count
is not a multiple of the sub-partition count is charged as if rounded up for the launch check;
shared memory per block includes the reserved system part (cc >= 8) and is rounded to the
allocation granularity; the SM's shared-memory carveout is the smallest supported size that
holds the preferred amount. The kernel is assumed to have opted in to the largest dynamic
shared memory (`cudaFuncAttributeMaxDynamicSharedMemorySize`) when it needs more than the
default 48 KiB, as FlashAttention kernels do.

The core works on numpy arrays (one entry per candidate configuration) so that the whole
search space is evaluated at once; `occupancy()` is the scalar form used by the CLI. What one
asks for (`OccupancyQuery`: a launch, on a CUDA device: `occupancy_device`) is validated here,
so the CLI and the Occupancy RPC state no bound of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from pydantic import (
    BaseModel,
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from .errors import FieldViolation, InvalidRequestError
from .hardware import CudaDevice, HardwareSpec, SmLimits, load_catalog
from .schema_config import FROZEN_SCHEMA
from .space import IntArray, ceil_div
from .violations import validated_on_device, within_device_range

_UNLIMITED = np.int64(1 << 40)
# cudaOccRegAllocationMaxPerThread: the header rejects only more than 256 (the ISA limit is 255).
_REG_REJECT_ABOVE = 256


class Limiter(StrEnum):
    """The resource that caps resident blocks per SM (several may tie)."""

    WARPS = "warps"
    REGISTERS = "registers"
    SHARED_MEMORY = "shared_memory"
    BLOCKS = "blocks"


@dataclass(frozen=True)
class OccupancyArrays:
    """Per-candidate occupancy results; every array has one entry per candidate."""

    blocks_per_sm: IntArray
    limit_warps: IntArray
    limit_registers: IntArray
    limit_shared_memory: IntArray
    limit_blocks: IntArray
    regs_per_block: IntArray
    smem_per_block_bytes: IntArray
    smem_per_sm_config_bytes: IntArray

    def limiters(self, index: int) -> list[Limiter]:
        """Every resource whose limit equals the result for candidate `index`, in fixed order."""
        blocks = self.blocks_per_sm[index]
        pairs = [
            (Limiter.WARPS, self.limit_warps[index]),
            (Limiter.REGISTERS, self.limit_registers[index]),
            (Limiter.SHARED_MEMORY, self.limit_shared_memory[index]),
            (Limiter.BLOCKS, self.limit_blocks[index]),
        ]
        return [name for name, limit in pairs if limit == blocks]


def _round_up(x: IntArray, y: IntArray | int) -> IntArray:
    return ceil_div(x, y) * y


def _carveout_bytes(sm: SmLimits) -> IntArray:
    return np.asarray(sm.smem_carveout_options_kib, dtype=np.int64) * 1024


def _align_up_to_carveout(sm: SmLimits, request_bytes: IntArray) -> IntArray:
    """Smallest supported SM shared-memory size >= the request (the largest if none is)."""
    options = _carveout_bytes(sm)
    index = np.searchsorted(options, request_bytes, side="left")
    return np.asarray(options[np.minimum(index, len(options) - 1)], dtype=np.int64)


def occupancy_arrays(
    sm: SmLimits,
    threads_per_block: IntArray,
    regs_per_thread: IntArray,
    dynamic_smem_bytes: IntArray,
    carveout_percent: int = -1,
) -> OccupancyArrays:
    """Resident blocks per SM for each (threads, registers/thread, dynamic smem bytes) triple.

    `carveout_percent` is the `cudaFuncAttributePreferredSharedMemoryCarveout` (-1 = default,
    which prefers the largest shared-memory configuration).
    """
    threads = np.asarray(threads_per_block, dtype=np.int64)
    regs = np.asarray(regs_per_thread, dtype=np.int64)
    smem = np.asarray(dynamic_smem_bytes, dtype=np.int64)
    warp = sm.warp_size_threads
    subparts = sm.reg_file_subpartitions
    warps_per_block = ceil_div(threads, warp)

    # 1. Registers: allocated per warp in units, counted per register-file sub-partition.
    regs_per_warp = _round_up(regs * warp, sm.reg_alloc_unit_regs)
    regs_per_block = regs_per_warp * warps_per_block
    regs_hw_check = regs_per_warp * _round_up(warps_per_block, subparts)
    regs_per_subpartition = sm.regs_per_sm // subparts
    warps_per_subpartition = regs_per_subpartition // np.maximum(regs_per_warp, 1)
    limit_registers = np.where(
        regs_per_warp == 0,
        _UNLIMITED,
        (warps_per_subpartition * subparts) // np.maximum(warps_per_block, 1),
    )
    launch_fails = (
        (regs_hw_check > sm.max_regs_per_block)
        | (regs_per_block > sm.max_regs_per_block)
        | (regs > _REG_REJECT_ABOVE)
    )
    limit_registers = np.where(launch_fails, 0, limit_registers)

    # 2. Warps resident per SM.
    limit_warps = np.where(
        threads > sm.max_threads_per_block,
        0,
        (sm.max_threads_per_sm // warp) // np.maximum(warps_per_block, 1),
    )

    # 3. Blocks resident per SM.
    limit_blocks = np.full_like(threads, sm.max_blocks_per_sm)

    # 4. Shared memory, with the reserved per-block part and the allocation granularity.
    smem_per_block = _round_up(
        smem + sm.reserved_smem_per_block_bytes, sm.smem_alloc_granularity_bytes
    )
    per_block_cap = sm.smem_per_block_optin_bytes
    if sm.cc_major >= 8:
        per_block_cap += sm.reserved_smem_per_block_bytes
    if carveout_percent < 0:
        preferred = np.int64(sm.smem_per_sm_bytes)
    else:
        preferred = np.int64(carveout_percent * sm.smem_per_sm_bytes // 100)
    preferred_aligned = _align_up_to_carveout(sm, np.full_like(threads, preferred))
    smem_sm_config = np.where(
        preferred_aligned >= smem_per_block,
        preferred_aligned,
        _align_up_to_carveout(sm, smem_per_block),
    )
    limit_shared_memory = np.where(
        smem_per_block > 0, smem_sm_config // np.maximum(smem_per_block, 1), _UNLIMITED
    )
    limit_shared_memory = np.where(smem_per_block > per_block_cap, 0, limit_shared_memory)

    blocks = np.minimum.reduce([limit_registers, limit_warps, limit_blocks, limit_shared_memory])
    return OccupancyArrays(
        blocks_per_sm=blocks.astype(np.int64),
        limit_warps=limit_warps.astype(np.int64),
        limit_registers=limit_registers.astype(np.int64),
        limit_shared_memory=limit_shared_memory.astype(np.int64),
        limit_blocks=limit_blocks.astype(np.int64),
        regs_per_block=regs_per_block.astype(np.int64),
        smem_per_block_bytes=smem_per_block.astype(np.int64),
        smem_per_sm_config_bytes=smem_sm_config.astype(np.int64),
    )


@dataclass(frozen=True)
class Occupancy:
    """The occupancy of one launch, with each resource's own limit."""

    blocks_per_sm: int
    limiters: tuple[Limiter, ...]
    limit_warps: int
    limit_registers: int
    limit_shared_memory: int
    limit_blocks: int
    warps_per_block: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    regs_per_block: int
    smem_per_block_bytes: int
    smem_per_sm_config_bytes: int

    @property
    def occupancy_fraction(self) -> float:
        """Resident warps over the SM's maximum warps (0..1)."""
        return self.active_warps_per_sm / self.max_warps_per_sm


def _cap(value: np.int64) -> int:
    """An unlimited resource is reported as the block limit would be: a large sentinel -> -1."""
    return -1 if value >= _UNLIMITED else int(value)


def occupancy(
    sm: SmLimits,
    threads_per_block: int,
    regs_per_thread: int,
    dynamic_smem_bytes: int,
    carveout_percent: int = -1,
) -> Occupancy:
    """Scalar form of `occupancy_arrays` for one launch (limits of -1 mean 'unlimited')."""
    arrays = occupancy_arrays(
        sm,
        np.array([threads_per_block]),
        np.array([regs_per_thread]),
        np.array([dynamic_smem_bytes]),
        carveout_percent,
    )
    blocks = int(arrays.blocks_per_sm[0])
    warps_per_block = ceil_div(threads_per_block, sm.warp_size_threads)
    return Occupancy(
        blocks_per_sm=blocks,
        limiters=tuple(arrays.limiters(0)),
        limit_warps=_cap(arrays.limit_warps[0]),
        limit_registers=_cap(arrays.limit_registers[0]),
        limit_shared_memory=_cap(arrays.limit_shared_memory[0]),
        limit_blocks=_cap(arrays.limit_blocks[0]),
        warps_per_block=warps_per_block,
        active_warps_per_sm=blocks * warps_per_block,
        max_warps_per_sm=sm.max_warps_per_sm,
        regs_per_block=int(arrays.regs_per_block[0]),
        smem_per_block_bytes=int(arrays.smem_per_block_bytes[0]),
        smem_per_sm_config_bytes=int(arrays.smem_per_sm_config_bytes[0]),
    )


# ---- the query: one launch on one device, its bounds stated once ----------------------------

MAX_ISA_REGS = 255  # registers one thread can address (the PTX ISA's limit)
MAX_DYNAMIC_SMEM_BYTES = 1 << 24  # 16 MiB: beyond any shared memory a block can have


class OccupancyQuery(BaseModel):
    """One CUDA launch whose occupancy is asked for (`tilesolve-cli occupancy`, the Occupancy
    RPC). Validate it with `on(spec, data)`: the device's own limits then bound the threads
    and registers, and each message names the range on that device."""

    model_config = FROZEN_SCHEMA

    threads: int = Field(ge=1, description="threads per block")
    regs: int = Field(ge=0, le=MAX_ISA_REGS, description="registers per thread")
    smem_bytes: int = Field(
        ge=0,
        le=MAX_DYNAMIC_SMEM_BYTES,
        description="dynamic shared memory per block, bytes (the reserved part is added)",
    )
    carveout_percent: int = Field(
        -1,
        ge=-1,
        le=100,
        description="preferred shared-memory carveout, percent of the SM's; -1: the largest",
    )

    @field_validator("threads", "regs", mode="wrap")
    @classmethod
    def _within_the_device(
        cls, value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> int:
        """With a device in the validation context (`on`), its limit is the upper bound, and
        a bad value of any kind is told the whole range on that device."""
        spec = (info.context or {}).get("device")
        if not isinstance(spec, CudaDevice) or info.field_name is None:
            number: int = handler(value)
            return number
        lowest = next(m.ge for m in cls.model_fields[info.field_name].metadata if hasattr(m, "ge"))
        if info.field_name == "threads":
            highest = spec.sm.max_threads_per_block
            what = f"the most threads per block on {spec.name}"
        else:
            highest = min(spec.sm.max_regs_per_thread, MAX_ISA_REGS)
            what = "registers per thread"
        return within_device_range(handler, value, lowest, highest, what)

    @classmethod
    def on(cls, spec: CudaDevice, data: Mapping[str, object]) -> OccupancyQuery:
        """`data` (the fields by name, as numbers or text) as a launch on `spec`; raises
        InvalidRequestError naming every bad field and what is allowed."""
        return validated_on_device(cls, spec, data)


def occupancy_device(spec: HardwareSpec, cuda_names: Sequence[str] | None = None) -> CudaDevice:
    """`spec`, if NVIDIA's occupancy calculation applies to it (a CUDA device); otherwise
    InvalidRequestError on `hardware`, naming the devices allowed (`cuda_names`: by default the
    catalog's CUDA and rocm devices: a rocm device has its own calculator,
    `occupancy_rocm_query`, which the CLI and the RPC take before they get here)."""
    if isinstance(spec, CudaDevice):
        return spec
    if cuda_names is None:
        cuda_names = [n for n, s in load_catalog().items() if s.arch in ("cuda", "rocm")]
    raise InvalidRequestError(
        [
            FieldViolation(
                "hardware",
                f"{spec.name} is {'an' if spec.arch[0] in 'aeiou' else 'a'} {spec.arch} device; "
                "occupancy is modelled for CUDA devices (blocks per SM) and rocm devices "
                f"(workgroups per CU); allowed: {', '.join(sorted(cuda_names))}",
            )
        ]
    )
