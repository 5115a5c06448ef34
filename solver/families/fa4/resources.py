"""What an fa4 CTA needs of an sm_100 SM (docs/model.md 17.2): tensor-memory columns (two S
buffers and one O accumulator per Q tile), shared memory (Q and O per Q tile, the K/V ring whose
depth FA4 derives from what is left, the barriers), the setmaxnreg budgets of the warp roles,
the threads, and one CTA per SM.

Sources: Dao-AILab/flash-attention@0251105a `flash_attn/cute/flash_fwd_sm100.py` (TMEM offsets
and `tmem_total <= 512` at 344-356, register budgets 358-378, shared memory and `kv_stage`
390-422), `sm100_hd256_2cta_fmha_forward.py` (TMEM at 145-147, kv_stage 4, registers 150-153);
NVIDIA/cutlass `include/cute/arch/tmem_allocator_sm100.hpp` (512 columns); PTX ISA
(`setmaxnreg`: a multiple of 8 in [24, 256], per warpgroup, out of a per-CTA pool).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...constraints import Constraint, ConstraintKind, Relaxation, Rule
from ...family import CapacityUse
from ...hardware import SmLimits
from ...occupancy import OccupancyArrays
from ...problem import AttentionProblem
from ...space import ConfigArrays, IntArray, ceil_div
from ..cuda.resources import CudaResources
from .shape import WARPGROUP_THREADS, is_hd256, kernel_head_dims

if TYPE_CHECKING:
    from ...candidates import Evaluation

# ---- tensor memory -------------------------------------------------------------------------
S_BUFFERS = 2  # s_stage = 2: S0 at column 0, S1 at block_n (asserted s_stage >= q_stage)
# FA4 allocates every column the SM has (`get_max_tmem_alloc_cols("sm_100")`): one CTA per SM.
# ---- shared memory -------------------------------------------------------------------------
# kv_stage = min((224 KiB - sQ - sO) // per_stage, 32): the 227 KiB opt-in maximum less 3 KiB
# FA4 keeps for its barriers, the tile scheduler's slots and the row statistics (sScale).
SMEM_RESERVE_BYTES = 3 * 1024
MAX_KV_STAGES = 32
MIN_KV_STAGES = 2  # the ring holds at least one K and one V tile
HD256_KV_STAGES = 4  # the hd256 kernel fixes its ring (`self.kv_stage = 4`)
HD256_CHUNK = 128  # ... of 128-column chunks of the 256-wide head dim
OUTPUT_BYTES = 2  # O is written in 16 bits (fp8 inputs write bf16)
# For (192, 128) a 2-stage ring is laid out large, small, large (uneven_kv_smem): 3 stages.
UNEVEN_DIMS = (192, 128)
# ---- registers (setmaxnreg) ----------------------------------------------------------------
SETMAXNREG_MIN = 24
SETMAXNREG_MAX = 256
SETMAXNREG_STEP = 8
# Register demand per thread of each role (docs/model.md 17.2). A softmax thread owns one row:
# the block_n FP32 scores it loads from TMEM, plus one 32-column fragment of P being converted
# and stored, the row max, sum and scale, the pipeline phases and addresses.
SOFTMAX_FIXED_REGS = 40
# The correction warpgroup rescales O and writes the epilogue in 16-column chunks
# (corr_tile_size = 16): two chunks in flight, plus the scale, statistics and addresses.
CORRECTION_REGS = 64
# The MMA, load, epilogue and empty warps hold descriptors, coordinates and phases (the hd256
# kernel gives them 32).
OTHER_REGS = 32


def _align8(x: IntArray | int) -> IntArray:
    return np.asarray(ceil_div(x, SETMAXNREG_STEP) * SETMAXNREG_STEP, dtype=np.int64)


@dataclass(frozen=True)
class Fa4Resources(CudaResources):
    """What each fa4 sm_100 candidate needs of an SM: the CUDA resources plus tensor memory,
    the shared-memory layout with its derived K/V ring, and the warp roles' registers."""

    tmem_columns: IntArray  # 2 block_n + q_stage head_dim_v
    tmem_capacity: int
    smem_q_o: IntArray  # Q and O staging (one buffer where FA4 overlaps them)
    smem_ring: IntArray  # the K/V ring
    kv_stages: IntArray  # its depth, derived
    softmax_warpgroups: IntArray
    other_warpgroups: IntArray  # the MMA/load/epilogue warpgroup and any idle one
    correction_regs: IntArray  # setmaxnreg budgets, registers per thread
    other_regs: IntArray
    register_file: IntArray  # registers the roles' budgets take of the SM's file

    def uses(self, i: int) -> list[CapacityUse]:
        return [
            CapacityUse("shared_memory", int(self.smem_bytes[i]), self.smem_limit_bytes, "bytes"),
            CapacityUse("tensor_memory", int(self.tmem_columns[i]), self.tmem_capacity, "columns"),
            CapacityUse(
                "registers", int(self.regs_demand[i]), int(self.regs_cap[i]), "registers/thread"
            ),
            CapacityUse(
                "register_file", int(self.register_file[i]), self.sm.regs_per_sm, "registers/SM"
            ),
            CapacityUse("threads", int(self.threads[i]), self.max_threads, "threads/block"),
        ]

    def candidate_fields(self, i: int) -> dict[str, Any]:
        fields = super().candidate_fields(i)
        fields["regs_per_thread"] = int(self.regs_cap[i])  # the softmax warps' budget
        return fields


def fa4_resources(ev: Evaluation) -> Fa4Resources:
    """The evaluation's resources, which the fa4 sm_100 design's are."""
    assert isinstance(ev.res, Fa4Resources)
    return ev.res


@dataclass(frozen=True)
class SmemLayout:
    """Shared memory of each candidate, bytes, and the ring's depth."""

    q_o: IntArray
    ring: IntArray
    stages: IntArray

    @property
    def total(self) -> IntArray:
        return np.asarray(self.q_o + self.ring + SMEM_RESERVE_BYTES, dtype=np.int64)


def smem_budget(sm: SmLimits, max_smem: int | None) -> int:
    """The shared memory a CTA's ring is derived from: the opt-in maximum, or the user's cap
    where it is smaller (a build of the kernel for that budget; FA4's own is the maximum)."""
    return min(sm.smem_per_block_optin_bytes, max_smem or sm.smem_per_block_optin_bytes)


def smem_layout(cfg: ConfigArrays, problem: AttentionProblem, budget_bytes: int) -> SmemLayout:
    """Q and O per Q tile, the K/V ring FA4 derives from what the budget (`smem_budget`) leaves,
    and the reserve (docs/model.md 17.2). Where fewer than two stages fit, the layout is the one
    with two, which exceeds the budget."""
    d, dv = kernel_head_dims(problem)
    e = problem.dtype.bytes
    bm, bn, q, cg = cfg["block_m"], cfg["block_n"], cfg["q_stage"], cfg["cta_group"]
    s_q = q * bm * d * e
    s_o = q * bm * dv * OUTPUT_BYTES
    # One buffer for Q and O for head dim 192, and under split-KV with head_dim_v >= 128
    # (overlap_sO_sQ)
    splits = cfg["num_splits"] if "num_splits" in cfg else np.ones(len(cfg), dtype=np.int64)
    overlap = (d == 192 and dv >= 64) | ((dv >= 128) & (splits > 1))
    q_o = np.where(overlap, np.maximum(s_q, s_o), s_q + s_o)
    if is_hd256(problem):
        per_stage = bn * HD256_CHUNK * e // cg
        stages = np.full(len(cfg), HD256_KV_STAGES, dtype=np.int64)
        return SmemLayout(np.asarray(q_o, np.int64), stages * per_stage, stages)
    per_stage = np.maximum(bn * d * e, bn * dv * e) // cg
    budget = budget_bytes - SMEM_RESERVE_BYTES
    fitting = np.minimum((budget - q_o) // per_stage, MAX_KV_STAGES)
    stages = np.maximum(fitting, MIN_KV_STAGES)
    ring = stages * per_stage
    if (d, dv) == UNEVEN_DIMS:
        uneven = fitting == 2
        small = bn * dv * e // cg
        ring = np.where(uneven, 2 * per_stage + small, ring)
        stages = np.where(uneven, 3, stages)
    return SmemLayout(
        np.asarray(q_o, np.int64), np.asarray(ring, np.int64), np.asarray(stages, np.int64)
    )


@dataclass(frozen=True)
class RoleRegisters:
    """The setmaxnreg budgets of the warp roles (registers per thread) and their warpgroups."""

    softmax_demand: IntArray
    softmax_budget: IntArray  # what the other roles leave each softmax thread, at most 256
    correction: IntArray
    other: IntArray
    softmax_warpgroups: IntArray
    other_warpgroups: IntArray

    @property
    def register_file(self) -> IntArray:
        """Registers the budgets take of the SM's file (each warpgroup 128 threads)."""
        per_thread = (
            self.softmax_warpgroups * _align8(self.softmax_demand)
            + self.correction
            + self.other_warpgroups * self.other
        )
        return np.asarray(per_thread * WARPGROUP_THREADS, dtype=np.int64)


def role_registers(cfg: ConfigArrays, problem: AttentionProblem, sm: SmLimits) -> RoleRegisters:
    """Softmax demand (block_n + 40), correction 64, the other roles 32, rounded to
    setmaxnreg's step; the softmax budget is what the per-CTA pool (regs_per_sm / 128 per
    thread of a warpgroup) leaves after the others, at most 256 (docs/model.md 17.2)."""
    n = len(cfg)
    warpgroups = cfg["num_warps"] // (WARPGROUP_THREADS // sm.warp_size_threads)
    softmax = np.asarray(cfg["q_stage"], dtype=np.int64)  # one softmax warpgroup per Q tile
    other = warpgroups - softmax - 1  # less the correction warpgroup
    demand = np.asarray(cfg["block_n"] + SOFTMAX_FIXED_REGS, dtype=np.int64)
    correction = np.full(n, CORRECTION_REGS, dtype=np.int64)
    others = np.full(n, max(OTHER_REGS, SETMAXNREG_MIN), dtype=np.int64)
    pool = sm.regs_per_sm // WARPGROUP_THREADS
    left = (pool - correction - other * others) // np.maximum(softmax, 1)
    budget = np.minimum(left // SETMAXNREG_STEP * SETMAXNREG_STEP, SETMAXNREG_MAX)
    return RoleRegisters(
        softmax_demand=demand,
        softmax_budget=np.asarray(budget, dtype=np.int64),
        correction=correction,
        other=others,
        softmax_warpgroups=softmax,
        other_warpgroups=np.asarray(other, dtype=np.int64),
    )


def tmem_columns(cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
    """Tensor-memory columns: S0 and S1 (block_n each; P overwrites half of each), then one
    O accumulator of head_dim_v columns per Q tile (FP32, one column per element of a row)."""
    _, dv = kernel_head_dims(problem)
    return np.asarray(S_BUFFERS * cfg["block_n"] + cfg["q_stage"] * dv, dtype=np.int64)


def one_cta_per_sm(occupancy: OccupancyArrays) -> OccupancyArrays:
    """The calculator's residency capped at one CTA: FA4 allocates all of the SM's tensor
    memory to each CTA."""
    return replace(occupancy, blocks_per_sm=np.minimum(occupancy.blocks_per_sm, 1))


def launch_regs(sm: SmLimits, threads: IntArray) -> IntArray:
    """Registers per thread at launch, before setmaxnreg moves them between the roles: the
    file divided evenly, at most 255, rounded down to the step."""
    even = np.minimum(sm.regs_per_sm // threads, sm.max_regs_per_thread)
    return np.asarray(even // SETMAXNREG_STEP * SETMAXNREG_STEP, dtype=np.int64)


def fixed_capacity(constraint: str, what: str, best: str) -> Relaxation:
    """The relaxation of a capacity no option changes: what would fit instead, and the best
    configuration without the constraint."""
    return Relaxation(constraint, "none", "", None, f"{what} (best then: {best})")


class TensorMemory(Constraint):
    """The S buffers and the O accumulators fit the SM's tensor-memory columns."""

    name = "tensor_memory"
    rule = "2 x block_n + q_stage x head_dim_v within the tensor-memory columns (FA4 asserts it)"
    short = "tmem"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        res = fa4_resources(ev)
        return [Rule("tmem_columns", res.tmem_columns, "<=", res.tmem_capacity)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = fa4_resources(ev)
        return (
            f"{ev.label(i)} needs {res.tmem_columns[i]} tensor-memory columns (two S buffers "
            f"of block_n, one O of head_dim_v per Q tile), the SM has {res.tmem_capacity}"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        what = "tensor memory is what it is; a narrower block_n or one Q tile per CTA fits"
        return fixed_capacity(self.name, what, ev.label(best))


class WarpRoleRegisters(Constraint):
    """The softmax threads' rows fit the setmaxnreg budget the other roles leave them."""

    name = "registers"
    rule = (
        "softmax registers (block_n scores + 40) within the setmaxnreg budget the correction "
        "and other warpgroups leave (at most 256)"
    )
    short = "regs"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("spill_regs", fa4_resources(ev).spill_regs, "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = fa4_resources(ev)
        return (
            f"{ev.label(i)} wants about {res.regs_demand[i]} registers per softmax thread; "
            f"setmaxnreg leaves {res.regs_cap[i]} with {res.softmax_warpgroups[i]} softmax "
            f"warpgroup(s), correction {res.correction_regs[i]}, other {res.other_regs[i]}"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        what = "the register file is what it is; a narrower block_n fits"
        return fixed_capacity(self.name, what, ev.label(best))
