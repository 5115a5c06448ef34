"""What an fa3 backward CTA needs of an SM (docs/model.md 18.2): its shared-memory layout (K
and V, the dQ staging buffer, the Q ring, the dO ring, LSE and dPsum, P and dS, the pipeline
barriers), the setmaxnreg budgets of its producer and consumer warpgroups, the consumers'
register demand, and the residency (one CTA per SM). Sources (Dao-AILab/flash-attention at
commit 0251105a2fb19d2957484b7f023cd8c115286ced): `hopper/mainloop_bwd_sm90_tma_gmma_ws.hpp`
lines 136-290 (the layouts and `TensorStorage`, in this order); `hopper/flash_bwd_kernel_sm90.h`
lines 57-89 (warpgroups, setmaxnreg budgets, `SharedStorage` with the epilogue in a union and
the pipelines after it); `hopper/epilogue_bwd.hpp` lines 85-87 and 348-356 (dK/dV staging).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...family import CapacityUse
from ...space import BoolArray, ConfigArrays, IntArray, align_up, ceil_div
from ..cuda.backward import BackwardResources
from .backward_shape import (
    SHAPE_RULE,
    SHUFFLE_STATS_MAX_HEAD_DIM,
    SHUFFLE_STATS_THREADS,
    WARPGROUP_THREADS,
    BackwardStructure,
)
from .resources import ConsumerRegisters, setmaxnreg_uses

if TYPE_CHECKING:
    from ...candidates import Evaluation

# ---- setmaxnreg (flash_bwd_kernel_sm90.h lines 64-65) ----------------------------------------
# (producer, consumer) registers per thread after the reallocation, by consumer warpgroups.
SETMAXNREG_BUDGETS = {2: (24, 240), 3: (32, 160)}
# Consumer registers beyond the accumulators, operands and statistics counted below: loop and
# pipeline state, masks and pointers (estimate, docs/model.md 18.2). It is small because the
# warp-uniform part of that state (shared-memory addresses, pipeline phases, the block indices)
# lives in the SM's uniform registers, not in the per-thread file: with 12, FA3's 80 x 128 tile
# at head dim 128 takes exactly its 240-register budget, and every tile FA3 ships fits.
BWD_CONSUMER_FIXED_REGS = 12
# The causal mask applied to S while dP accumulates (mask.h, the SwapAB branch): the thread's
# row and column offsets, the key block's column limit and the current column's row limit stay
# live beside the accumulators (estimate from the loop; docs/model.md 18.2).
CAUSAL_MASK_REGS = 4
FP32_BYTES = 4
REGISTER_BYTES = 4

# ---- shared memory ---------------------------------------------------------------------------
SMEM_ALIGN_BYTES = 128
SMEM_ALIGN_256_HEAD_DIM = 256  # kHeadDim % 256 == 0: Q, K, V, dO 256-byte aligned (TMA)
SWIZZLE_ALIGN_BYTES = 1024  # P and dS: the 128-byte swizzle's 1 KiB atom (alignment_for_swizzle)
STATS_ROW_ALIGN = 64  # LSE/dPsum stage stride: round_up(kBlockM, 64) floats
Q_STAGES = 2  # the Q/LSE ring: kStages = 2 on sm90 (flash_bwd_launch_template.h line 80)
BARRIER_BYTES = 8
PIPELINE_SLOT_BYTES = 16


def _place(offset: IntArray, size: IntArray, align: int) -> IntArray:
    """The end of a buffer of `size` bytes placed after `offset` at the given alignment (a
    power of two, bytes)."""
    return np.asarray(align_up(offset, align) + size, dtype=np.int64)


@dataclass(frozen=True)
class SmemLayout:
    """The CTA's shared memory, bytes (arrays over candidates)."""

    kv: IntArray  # K and V
    dq: IntArray  # the fp32 dQ staging buffer for the TMA reduce-add (0 at head dim 256)
    q_do: IntArray  # the Q ring (2 stages) and the dO ring
    stats: IntArray  # LSE and dPsum, per Q stage
    p_ds: IntArray  # P (unless dK/dV read it from registers) and dS, per dS stage
    pipelines: IntArray  # the K/V barrier, the Q and dO pipelines, the scheduler's slot
    total: IntArray


def smem_layout(
    cfg: ConfigArrays, head_dim: int, elem: int, structure: BackwardStructure, gqa: bool
) -> SmemLayout:
    """TensorStorage in its order (K, V, dQ accumulator, Q, dO, LSE, dPsum, P, dS), each buffer
    at its alignment; the epilogue's dK/dV staging shares a union with it; the pipelines
    follow."""
    bm, bn = cfg["block_m"], cfg["block_n"]
    d = head_dim
    qkv_align = SMEM_ALIGN_256_HEAD_DIM if d % SMEM_ALIGN_256_HEAD_DIM == 0 else SMEM_ALIGN_BYTES
    zero = np.zeros(len(cfg), dtype=np.int64)
    end = _place(zero, bn * d * elem, qkv_align)  # K
    end = _place(end, bn * d * elem, qkv_align)  # V
    kv = end.copy()
    dq_bytes = bm * d * FP32_BYTES if structure.dq_through_smem else zero
    end = _place(end, dq_bytes, SMEM_ALIGN_BYTES)
    dq = end - kv
    start_q = end.copy()
    end = _place(end, Q_STAGES * bm * d * elem, qkv_align)  # Q
    end = _place(end, cfg["stages_do"] * bm * d * elem, qkv_align)  # dO
    q_do = end - start_q
    start_stats = end.copy()
    stage_floats = ceil_div(bm, STATS_ROW_ALIGN) * STATS_ROW_ALIGN
    stats_one = ((Q_STAGES - 1) * stage_floats + bm) * FP32_BYTES
    end = _place(end, stats_one, SMEM_ALIGN_BYTES)  # LSE
    end = _place(end, stats_one, SMEM_ALIGN_BYTES)  # dPsum
    stats = end - start_stats
    start_pds = end.copy()
    p_ds_one = cfg["stages_ds"] * bm * bn * elem
    p_bytes = np.where(structure.mma_dkv_rs, 0, p_ds_one)
    end = _place(end, p_bytes, SWIZZLE_ALIGN_BYTES)  # P
    end = _place(end, p_ds_one, SWIZZLE_ALIGN_BYTES)  # dS
    p_ds = end - start_pds
    mainloop = _place(end, zero, SWIZZLE_ALIGN_BYTES)
    # the epilogue's dK and dV staging (16-bit; with GQA one fp32 accumulator tile)
    epilogue = bn * d * (FP32_BYTES if gqa else 2 * elem)
    tensors = np.maximum(mainloop, _place(zero, epilogue, SWIZZLE_ALIGN_BYTES))
    # barrier_KV, pipeline_q (full and empty barriers per stage), pipeline_do, the scheduler
    pipelines = (
        PIPELINE_SLOT_BYTES
        + ceil_div(2 * Q_STAGES * BARRIER_BYTES, PIPELINE_SLOT_BYTES) * PIPELINE_SLOT_BYTES
        + ceil_div(2 * cfg["stages_do"] * BARRIER_BYTES, PIPELINE_SLOT_BYTES) * PIPELINE_SLOT_BYTES
        + PIPELINE_SLOT_BYTES
    )
    total = tensors + pipelines
    return SmemLayout(
        kv=kv,
        dq=np.asarray(dq, dtype=np.int64),
        q_do=np.asarray(q_do, dtype=np.int64),
        stats=np.asarray(stats, dtype=np.int64),
        p_ds=np.asarray(p_ds, dtype=np.int64),
        pipelines=np.asarray(pipelines, dtype=np.int64),
        total=np.asarray(total, dtype=np.int64),
    )


@dataclass(frozen=True)
class ConsumerRegs:
    """Registers per consumer thread (arrays over candidates, docs/model.md 18.2)."""

    resident: IntArray  # dK and dV accumulators (+ V with V_in_regs), live all loop
    sdp_phase: IntArray  # S and dP accumulators and one row statistic (LSE, then dPsum)
    gemm_phase: IntArray  # the dQ accumulator (+ P and dS as A operands when RS)
    demand: IntArray


def consumer_regs(
    cfg: ConfigArrays, head_dim: int, elem: int, structure: BackwardStructure, causal: bool
) -> ConsumerRegs:
    """dK, dV (fp32, bn x d each) and V (with V_in_regs: each warpgroup the rows of its M
    block) stay live; on top, the larger of the S/dP phase (two fp32 bm x bn accumulators and
    the LSE or dPsum values of the thread's query rows) and the dQ phase (the fp32 bm x d
    accumulator, half of it when sliced, with P and dS as 16-bit A operands when dK/dV are
    RS); a causal mask adds its limits to the S/dP phase."""
    bm, bn = cfg["block_m"].astype(np.float64), cfg["block_n"].astype(np.float64)
    w = structure.warpgroups.astype(np.float64)
    threads = WARPGROUP_THREADS * w
    d = float(head_dim)
    sdp_swap = cfg["sdp_swap_ab"] == 1
    atom_sdp = structure.atom_sdp.astype(np.float64)
    dkdv = 2.0 * bn * d / threads
    # V as the A operand of the swapped dP: the rows of the warpgroup's M block (block_n split
    # over W / AtomLayoutMSdP warpgroups), 16-bit, two per register
    v_regs = cfg["v_in_regs"] * bn * d * elem / REGISTER_BYTES / (WARPGROUP_THREADS * w / atom_sdp)
    sdp = 2.0 * bm * bn / threads
    # the statistics of the thread's query rows: swapped, the query rows are the N side (a
    # wgmma C fragment holds N / 4 columns per thread; shared by 8 threads with ShuffleLSE);
    # otherwise 2 rows per 64-row atom
    rows_per_wg = bm / atom_sdp
    shuffle = SHUFFLE_STATS_THREADS if head_dim <= SHUFFLE_STATS_MAX_HEAD_DIM else 1
    stats = np.where(sdp_swap, np.ceil(rows_per_wg / 4.0 / shuffle), rows_per_wg / 32.0)
    dq = bm * d / threads * np.where(structure.sliced, 0.5, 1.0)
    rs = structure.mma_dkv_rs * 2.0 * bm * bn * elem / REGISTER_BYTES / threads
    resident = np.ceil(dkdv + v_regs)
    sdp_phase = np.ceil(sdp + stats) + (CAUSAL_MASK_REGS if causal else 0)
    gemm_phase = np.ceil(dq + rs)
    demand = resident + np.maximum(sdp_phase, gemm_phase) + BWD_CONSUMER_FIXED_REGS
    return ConsumerRegs(
        resident=resident.astype(np.int64),
        sdp_phase=sdp_phase.astype(np.int64),
        gemm_phase=gemm_phase.astype(np.int64),
        demand=demand.astype(np.int64),
    )


def register_budgets(warpgroups: IntArray) -> tuple[IntArray, IntArray]:
    """(producer, consumer) setmaxnreg budgets per thread of every candidate."""
    producer = np.zeros(max(SETMAXNREG_BUDGETS) + 1, dtype=np.int64)
    consumer = np.zeros_like(producer)
    for w, (load, mma) in SETMAXNREG_BUDGETS.items():
        producer[w], consumer[w] = load, mma
    return producer[warpgroups], consumer[warpgroups]


@dataclass(frozen=True)
class Fa3BackwardResources(BackwardResources):
    """The CUDA resources of every fa3 backward candidate (regs_cap is the consumers'
    setmaxnreg budget) with the inner choice and its cost, and the parts of the layout."""

    shape_ok: BoolArray  # FA3's layout rules hold (backward_shape.backward_structure)
    warpgroups: IntArray
    producer_regs: IntArray
    smem: SmemLayout
    regs: ConsumerRegs
    mma_dkv_rs: IntArray
    mma_dq_rs: IntArray

    def uses(self, i: int) -> list[CapacityUse]:
        return setmaxnreg_uses(self, i, int(self.warpgroups[i]), int(self.producer_regs[i]))

    def candidate_fields(self, i: int) -> dict[str, Any]:
        fields = super().candidate_fields(i)
        fields["regs_per_thread"] = int(self.regs_cap[i])  # the consumers' setmaxnreg budget
        return fields


def fa3_backward_resources(ev: Evaluation) -> Fa3BackwardResources:
    """The evaluation's resources, which the fa3 backward family's are."""
    assert isinstance(ev.res, Fa3BackwardResources)
    return ev.res


class Fa3BackwardShape(Constraint):
    """The GEMM layouts and options combine as FA3's backward kernel template allows."""

    name = "fa3_shape"
    rule = "the GEMM layouts and options combine as FA3's backward kernel allows"
    short = "shape"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        ok = fa3_backward_resources(ev).shape_ok
        return [Rule("fa3_illegal", np.asarray(~ok, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} breaks fa3's backward rules: {SHAPE_RULE}"


class ConsumerBackwardRegisters(ConsumerRegisters):
    """The consumers' accumulators, operands and statistics fit their setmaxnreg budget."""

    rule = "consumer registers (dK/dV accumulators, S/dP or dQ phase) within the setmaxnreg budget"
    smaller = "a smaller block_m or block_n"

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("spill_regs", fa3_backward_resources(ev).spill_regs, "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = fa3_backward_resources(ev)
        regs = res.regs
        return (
            f"{ev.label(i)} wants about {res.regs_demand[i]} registers per consumer thread "
            f"(dK/dV {regs.resident[i]}, S/dP phase {regs.sdp_phase[i]}, dQ phase "
            f"{regs.gemm_phase[i]}); setmaxnreg gives {res.regs_cap[i]} with "
            f"{res.warpgroups[i]} consumer warpgroups"
        )
