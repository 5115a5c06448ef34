"""What an fa3 CTA needs of an SM (docs/model.md 11.2): its shared-memory layout (Q tile, the
K/V ring, P when staged, the O tile beyond the V ring it overlaps, the pipeline barriers), the
setmaxnreg split of the register file between the producer and the consumer warpgroups, the
consumers' register demand, and the residency (one CTA per SM). Sources: Dao-AILab/flash-
attention `hopper/` (`mainloop_fwd_sm90_tma_gmma_ws.hpp` and the epilogue's TensorStorage and
PipelineStorage; `flash_fwd_kernel_sm90.h`: the setmaxnreg budgets); PTX ISA 8.x (`setmaxnreg`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...constraints import Constraint, ConstraintKind, Relaxation, Rule
from ...family import CapacityUse
from ...hardware import CudaDevice
from ...problem import AttentionProblem, DType
from ...space import ConfigArrays, IntArray, ceil_div
from ..cuda.resources import CudaResources
from .shape import PRODUCER_WARPGROUPS, WARPGROUP_ROWS, WARPGROUP_THREADS, kernel_head_dims

if TYPE_CHECKING:
    from ...candidates import Evaluation

# ---- registers (setmaxnreg; PTX ISA: 24..256 in steps of 8) -----------------------------------
SETMAXNREG_MIN = 24  # what the producer keeps: it only issues TMA (FA3 keeps 24-56)
SETMAXNREG_STEP = 8
# Consumer register estimate, 32-bit registers per thread (docs/model.md 11.2): the FP32 S and
# O accumulators of a warpgroup's 64 rows over its 128 threads, P as the A operand of an RS
# wgmma while the next S accumulates, plus a fixed part: the softmax row state
# (max, sum, scale of the thread's 2 rows), pipeline state, pointers and loop counters.
CONSUMER_FIXED_REGS = 24

# ---- shared memory (mainloop/epilogue TensorStorage, PipelineStorage) ------------------------
SMEM_ALIGN_BYTES = 128  # every tensor buffer is 128-byte aligned (swizzled TMA layouts)
BARRIER_BYTES = 8  # one mbarrier
BARRIER_SLOT_BYTES = 16  # each barrier group is 16-byte aligned
# Q, Qv and O barriers, the tile scheduler's slot, then full/empty barriers per stage for the K,
# V and Vt pipelines (and the unused K_new / V_new pipelines' storage).
FIXED_BARRIER_SLOTS = 4
RING_PIPELINES = 5
OUTPUT_BYTES = 2  # O is written in fp16/bf16 (fp8 kernels write bf16)


def _align(x: IntArray, to: int) -> IntArray:
    return np.asarray(ceil_div(x, to) * to, dtype=np.int64)


@dataclass(frozen=True)
class Fa3Resources(CudaResources):
    """What each fa3 candidate needs of an SM: the CUDA resources (one CTA per SM) plus the
    shared-memory layout and the setmaxnreg register split."""

    warpgroups: IntArray  # consumer warpgroups W
    producer_regs: IntArray  # the producer warpgroup's setmaxnreg budget
    smem_q: IntArray
    smem_kv: IntArray  # the K/V ring (and the transposed V copy for fp8)
    smem_p: IntArray
    smem_o_pad: IntArray  # what the epilogue's O tile needs beyond the V ring it overlaps
    smem_barriers: IntArray

    def uses(self, i: int) -> list[CapacityUse]:
        return setmaxnreg_uses(self, i, int(self.warpgroups[i]), int(self.producer_regs[i]))

    def candidate_fields(self, i: int) -> dict[str, Any]:
        fields = super().candidate_fields(i)
        fields["regs_per_thread"] = int(self.regs_cap[i])  # the consumers' setmaxnreg budget
        return fields


def setmaxnreg_uses(
    res: CudaResources, i: int, warpgroups: int, producer_regs: int
) -> list[CapacityUse]:
    """Configuration i's resources under setmaxnreg (forward and backward): shared memory,
    the consumers' registers per thread against their budget (`regs_cap`), the register file
    the producer and the consumer warpgroups take, threads."""
    register_file = (producer_regs + warpgroups * int(res.regs_cap[i])) * WARPGROUP_THREADS
    return [
        CapacityUse("shared_memory", int(res.smem_bytes[i]), res.smem_limit_bytes, "bytes"),
        CapacityUse("registers", int(res.regs_demand[i]), int(res.regs_cap[i]), "registers/thread"),
        CapacityUse("register_file", register_file, res.sm.regs_per_sm, "registers/SM"),
        CapacityUse("threads", int(res.threads[i]), res.max_threads, "threads/block"),
    ]


def fa3_resources(ev: Evaluation) -> Fa3Resources:
    """The evaluation's resources, which the fa3 family's are."""
    assert isinstance(ev.res, Fa3Resources)
    return ev.res


def consumer_warpgroups(cfg: ConfigArrays) -> IntArray:
    """W: the consumer warpgroups of each tile, 64 query rows each."""
    return np.asarray(np.maximum(ceil_div(cfg["block_m"], WARPGROUP_ROWS), 1), dtype=np.int64)


def smem_parts(
    cfg: ConfigArrays, problem: AttentionProblem
) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    """Q tile, K/V ring, P tile, O padding and barriers, bytes (docs/model.md 11.2)."""
    d, dv = kernel_head_dims(problem)
    e = problem.dtype.bytes
    bm, bn, stages = cfg["block_m"], cfg["block_n"], cfg["num_stages"]
    q = _align(bm * d * e, SMEM_ALIGN_BYTES)
    k = _align(stages * bn * d * e, SMEM_ALIGN_BYTES)
    v = _align(stages * bn * dv * e, SMEM_ALIGN_BYTES)
    transposed = 2 if problem.dtype is DType.FP8 else 1  # fp8: V and its transpose Vt
    kv = np.asarray(k + transposed * v, dtype=np.int64)
    p = np.asarray(_align(bm * bn * e, SMEM_ALIGN_BYTES) * cfg["p_in_smem"], dtype=np.int64)
    o = _align(bm * dv * OUTPUT_BYTES, SMEM_ALIGN_BYTES)
    o_pad = np.asarray(np.maximum(o - v, 0), dtype=np.int64)
    slots = FIXED_BARRIER_SLOTS + RING_PIPELINES * ceil_div(
        2 * stages * BARRIER_BYTES, BARRIER_SLOT_BYTES
    )
    barriers = np.asarray(slots * BARRIER_SLOT_BYTES, dtype=np.int64)
    return q, kv, p, o_pad, barriers


def consumer_regs(cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
    """Registers per consumer thread the kernel wants (docs/model.md 11.2)."""
    _, dv = kernel_head_dims(problem)
    e = problem.dtype.bytes
    bn = cfg["block_n"]
    o_acc = ceil_div(WARPGROUP_ROWS * dv, WARPGROUP_THREADS)
    s_acc = ceil_div(WARPGROUP_ROWS * bn, WARPGROUP_THREADS)
    # P as the RS wgmma's A operand stays live while the next S accumulates (overlap).
    p_live = cfg["intra_wg_overlap"] * (1 - cfg["p_in_smem"])
    p_regs = ceil_div(WARPGROUP_ROWS * bn * e, WARPGROUP_THREADS * 4) * p_live
    return np.asarray(o_acc + s_acc + p_regs + CONSUMER_FIXED_REGS, dtype=np.int64)


def register_split(warpgroups: IntArray, device: CudaDevice) -> tuple[IntArray, IntArray, IntArray]:
    """(launch registers per thread, producer budget, consumer budget) under setmaxnreg.

    At launch every thread gets the same count, regs_per_sm / threads rounded down to the
    allocation step; then the producer drops to the setmaxnreg minimum (24) and the
    consumers take the rest: floor8((regs_per_sm / 128 - 24) / W), at most the ISA's 255
    rounded down to setmaxnreg's step (248).
    """
    sm = device.sm
    threads = WARPGROUP_THREADS * (warpgroups + PRODUCER_WARPGROUPS)
    step = SETMAXNREG_STEP
    launch = np.minimum(sm.max_regs_per_thread // step * step, sm.regs_per_sm // threads)
    launch = launch // step * step
    per_warpgroup = sm.regs_per_sm // WARPGROUP_THREADS
    producer = np.full(len(warpgroups), SETMAXNREG_MIN, dtype=np.int64)
    consumer = (per_warpgroup - producer * PRODUCER_WARPGROUPS) // warpgroups // step * step
    consumer = np.minimum(consumer, sm.max_regs_per_thread // step * step)
    return (
        np.asarray(launch, dtype=np.int64),
        producer,
        np.asarray(consumer, dtype=np.int64),
    )


class ConsumerRegisters(Constraint):
    """The consumers' accumulators fit their setmaxnreg budget without spilling."""

    name = "registers"
    rule = "consumer registers (S, P, O accumulators) within the setmaxnreg budget"
    short = "regs"
    kind = ConstraintKind.CAPACITY
    smaller = "fewer consumer warpgroups or a narrower block_n"  # what fits instead

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("spill_regs", fa3_resources(ev).spill_regs, "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = fa3_resources(ev)
        return (
            f"{ev.label(i)} wants about {res.regs_demand[i]} registers per consumer thread; "
            f"setmaxnreg gives {res.regs_cap[i]} with {res.warpgroups[i]} consumer "
            f"warpgroup(s) and a {res.producer_regs[i]}-register producer"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        return Relaxation(
            self.name,
            "none",
            "",
            None,
            f"the register file is what it is; {self.smaller} fit (best then: {ev.label(best)})",
        )
