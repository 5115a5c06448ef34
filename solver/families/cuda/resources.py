"""What a CUDA thread block needs of an SM: shared memory, registers (the estimate, the
launch bound's cap, spilling), threads, and the exact occupancy, as arrays over the
candidates (`CudaResources`). Formulas and sources: `docs/model.md` sections 2-4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...family import CapacityUse, Resources
from ...hardware import CudaDevice, HardwareSpec, SmLimits
from ...occupancy import OccupancyArrays
from ...space import IntArray

# Registers the compiler may spill to local memory before a configuration is rejected
# (docs/model.md, "Registers and spilling").
MAX_SPILL_REGS = 16

# Register-estimate constants (32-bit registers per thread); see docs/model.md "Registers".
MMA_ROWS = 16  # rows of one mma.m16n8k16 A tile; a warp's rows come in slabs of 16
FIXED_OVERHEAD_REGS = 36  # pointers, indices, loop state, predicates, B-operand staging
DROPOUT_EXTRA_REGS = 12  # Philox 4x32 counter + key and one batch of 4 random words
SOFTMAX_REGS_PER_SLAB = 4  # running max and sum for the 2 rows a thread owns per slab
A_FRAGMENT_REGS_PER_SLAB = 4  # one m16k16 fp16 A fragment (8 halves)
STANDARD_WARPS = 4  # the warp count FlashAttention kernels ship most (128 threads)
# The 32 lanes of a warp, as the kernels' layouts are written (mma.sync fragments, the FlashInfer
# decode kernel's threads): formulas that know no device use it; where a device is at hand,
# its `sm.warp_size_threads` (32 on every catalog part) is read instead.
WARP_LANES = 32


def cuda_device(hardware: HardwareSpec) -> CudaDevice:
    """The hardware as a CUDA device (a family checks the kind before it gets here)."""
    if not isinstance(hardware, CudaDevice):
        raise TypeError(f"{hardware.name} is not a CUDA device")
    return hardware


@dataclass(frozen=True)
class CudaResources(Resources):
    """What each candidate needs of an SM, and what the SM grants it."""

    sm: SmLimits  # what the SM grants
    smem_bytes: IntArray  # dynamic shared memory per block
    threads: IntArray
    regs_demand: IntArray  # registers per thread the kernel wants
    regs_cap: IntArray  # the ISA limit, or the launch bound's
    regs_allocated: IntArray
    spill_regs: IntArray
    occupancy: OccupancyArrays

    @property
    def smem_limit_bytes(self) -> int:
        """The opt-in maximum of dynamic shared memory per block."""
        return self.sm.smem_per_block_optin_bytes

    @property
    def max_threads(self) -> int:
        return self.sm.max_threads_per_block

    def uses(self, i: int) -> list[CapacityUse]:
        return [
            CapacityUse("shared_memory", int(self.smem_bytes[i]), self.smem_limit_bytes, "bytes"),
            CapacityUse(
                "registers", int(self.regs_demand[i]), int(self.regs_cap[i]), "registers/thread"
            ),
            CapacityUse("threads", int(self.threads[i]), self.max_threads, "threads/block"),
        ]

    def candidate_fields(self, i: int) -> dict[str, Any]:
        blocks = int(self.occupancy.blocks_per_sm[i])
        warps = int(self.threads[i]) // self.sm.warp_size_threads
        return {
            "threads_per_block": int(self.threads[i]),
            "smem_bytes": int(self.smem_bytes[i]),
            "regs_per_thread": int(self.regs_allocated[i]),
            "regs_demand": int(self.regs_demand[i]),
            "spill_regs": int(self.spill_regs[i]),
            "blocks_per_sm": blocks,
            "occupancy_limiter": "/".join(x.value for x in self.occupancy.limiters(i)),
            "occupancy": blocks * warps / self.sm.max_warps_per_sm,
        }


@dataclass(frozen=True)
class RegisterUse:
    """Registers per thread of each candidate: what the kernel wants, what the compiler may
    use, what it allocates and what spills to local memory."""

    demand: IntArray
    cap: IntArray
    allocated: IntArray
    spill: IntArray


def register_cap(device: CudaDevice, threads: IntArray, min_blocks: int | None) -> IntArray:
    """Registers per thread the compiler may use: the ISA limit, or the launch bound.

    With `__launch_bounds__(threads, min_blocks)` ptxas keeps regs <= regs_per_sm /
    (min_blocks * threads), rounded down to the per-thread allocation step (unit / warp size).
    """
    sm = device.sm
    cap = np.full(len(threads), sm.max_regs_per_thread, dtype=np.int64)
    if min_blocks:
        step = max(1, sm.reg_alloc_unit_regs // sm.warp_size_threads)
        bound = (sm.regs_per_sm // (min_blocks * np.maximum(threads, 1))) // step * step
        cap = np.minimum(cap, bound)
    return np.asarray(cap, dtype=np.int64)
