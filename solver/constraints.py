"""The constraints of the tile program, each a named rule evaluated over all candidates.

The same evaluation feeds the CP-SAT model (as coefficient tables of linear constraints), the
exhaustive engine, the funnel, the infeasibility explanation and the validator, so the rules
are stated exactly once. The order of `ConstraintName` is the funnel order of the hand method
(seed 000): legality of the tile and the block first, then the user's pins and caps, then
shared memory, then registers, then residency, then divisibility.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from .families.base import BoolArray, KernelFamily
from .hardware import HardwareSpec
from .occupancy import OccupancyArrays, occupancy_arrays
from .problem import AttentionProblem, SolveOptions
from .space import ConfigArrays, IntArray

# Registers the compiler may spill to local memory before a configuration is rejected
# (docs/model.md, "Registers and spilling").
MAX_SPILL_REGS = 16


class ConstraintName(StrEnum):
    ALIGNMENT = "alignment"
    THREADS = "threads"
    PINS = "pins"
    SHARED_MEMORY = "shared_memory"
    MAX_SMEM = "max_smem"
    REGISTERS = "registers"
    OCCUPANCY = "occupancy"
    DIVISIBILITY = "divisibility"


CONSTRAINT_RULES: dict[ConstraintName, str] = {
    ConstraintName.ALIGNMENT: "the tile shape is one the family's instructions can tile",
    ConstraintName.THREADS: "threads per block within the hardware maximum",
    ConstraintName.PINS: "tile parameters equal the user's pins",
    ConstraintName.SHARED_MEMORY: "shared memory per block within the opt-in maximum",
    ConstraintName.MAX_SMEM: "shared memory per block within the user's cap",
    ConstraintName.REGISTERS: f"estimated registers spill at most {MAX_SPILL_REGS} per thread",
    ConstraintName.OCCUPANCY: "at least the required number of blocks fit on one SM",
    ConstraintName.DIVISIBILITY: "seq_len and seq_len_kv are multiples of block_m and block_n",
}


@dataclass(frozen=True)
class Resources:
    """What each candidate needs, and what the SM grants it."""

    smem_bytes: IntArray
    threads: IntArray
    regs_demand: IntArray
    regs_cap: IntArray
    regs_allocated: IntArray
    spill_regs: IntArray
    occupancy: OccupancyArrays


def register_cap(hardware: HardwareSpec, threads: IntArray, min_blocks: int | None) -> IntArray:
    """Registers per thread the compiler may use: the ISA limit, or the launch bound.

    With `__launch_bounds__(threads, min_blocks)` ptxas keeps regs <= regs_per_sm /
    (min_blocks * threads), rounded down to the per-thread allocation step (unit / warp size).
    """
    sm, _ = hardware.cuda
    cap = np.full(len(threads), sm.max_regs_per_thread, dtype=np.int64)
    if min_blocks:
        step = max(1, sm.reg_alloc_unit_regs // sm.warp_size_threads)
        bound = (sm.regs_per_sm // (min_blocks * np.maximum(threads, 1))) // step * step
        cap = np.minimum(cap, bound)
    return np.asarray(cap, dtype=np.int64)


def resources(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    cfg: ConfigArrays,
) -> Resources:
    sm, _ = hardware.cuda
    smem = family.smem_bytes(cfg, problem)
    threads = family.threads_per_block(cfg, hardware)
    demand = family.regs_demand(cfg, problem)
    cap = register_cap(hardware, threads, options.min_blocks_per_sm)
    allocated = np.minimum(demand, cap)
    spill = demand - allocated
    occ = occupancy_arrays(sm, threads, allocated, smem)
    return Resources(smem, threads, demand, cap, allocated, spill, occ)


def satisfied(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    options: SolveOptions,
    cfg: ConfigArrays,
    res: Resources,
) -> dict[ConstraintName, BoolArray]:
    """For each constraint, which candidates satisfy it."""
    sm, _ = hardware.cuda
    n = len(cfg)
    pins = np.ones(n, dtype=np.bool_)
    for value, column in (
        (options.block_m, cfg.block_m),
        (options.block_n, cfg.block_n),
        (options.num_warps, cfg.num_warps),
        (options.num_stages, cfg.num_stages),
    ):
        if value is not None:
            pins &= column == value
    if options.max_smem is not None:
        under_cap = res.smem_bytes <= options.max_smem
    else:
        under_cap = np.ones(n, dtype=np.bool_)
    if options.require_divisible:
        divisible = (problem.seq_len % cfg.block_m == 0) & (
            problem.seq_len_kv_eff % cfg.block_n == 0
        )
    else:
        divisible = np.ones(n, dtype=np.bool_)
    min_blocks = max(1, options.min_blocks_per_sm or 1)
    return {
        ConstraintName.ALIGNMENT: family.alignment_ok(cfg, problem, hardware),
        ConstraintName.THREADS: res.threads <= sm.max_threads_per_block,
        ConstraintName.PINS: pins,
        ConstraintName.SHARED_MEMORY: res.smem_bytes <= sm.smem_per_block_optin_bytes,
        ConstraintName.MAX_SMEM: np.asarray(under_cap, dtype=np.bool_),
        ConstraintName.REGISTERS: res.spill_regs <= MAX_SPILL_REGS,
        ConstraintName.OCCUPANCY: res.occupancy.blocks_per_sm >= min_blocks,
        ConstraintName.DIVISIBILITY: np.asarray(divisible, dtype=np.bool_),
    }
