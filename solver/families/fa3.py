"""FlashAttention-3's forward kernel on Hopper (compute capability 9.0): warp-specialised.

One producer warpgroup issues TMA loads of Q and of the K/V ring (`num_stages` deep); W =
block_m / 64 consumer warpgroups each own 64 query rows (the M of `wgmma.mma_async`) and run
S = QK^T and O += PV on the tensor cores with wgmma, the online softmax in between. The
producer gives its registers back with `setmaxnreg` so that the consumers can hold the S, P and
O accumulators; one CTA (block) per SM, scheduled persistently over the query tiles.

Decision variables: block_m (64, 128, 192: 1-3 consumer warpgroups), block_n (the N of QK^T
and the K of the P.V wgmma: a multiple of 16, of 32 for fp8), num_stages (the K/V ring), and
the structural choices of FA3's kernel template that change the answer: intra-warpgroup
overlap of the softmax with the GEMMs, ping-pong scheduling of the consumer warpgroups, and P
staged in shared memory for an SS P.V wgmma (else held in registers, RS). Q stays in shared
memory, as FA3 keeps it (docs/model.md 11.1 says why Q in registers is not a parameter).
`num_warps` is derived: 4 x (consumer warpgroups + the producer), so `--num-warps 12` pins
block_m 128.

Sources: Shah et al., "FlashAttention-3" (2024) sec. 3; Dao-AILab/flash-attention `hopper/`
(`mainloop_fwd_sm90_tma_gmma_ws.hpp`: shared-memory layout and the rules between the options;
`flash_fwd_kernel_sm90.h`: setmaxnreg budgets; `flash_api.cpp`: head dims); PTX ISA 8.x
(`wgmma.mma_async`, `cp.async.bulk.tensor`, `setmaxnreg`). Formulas: docs/model.md section 11.
The cost model is in `fa3_cost.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..constraints import Constraint, ConstraintKind, Relaxation, Rule
from ..errors import FieldViolation
from ..family import KernelFamily, ResourceUse
from ..hardware import CudaDevice, HardwareSpec
from ..occupancy import occupancy, occupancy_arrays
from ..problem import AttentionProblem, DType, SolveOptions
from ..space import BoolArray, Config, ConfigArrays, FloatArray, IntArray, Param, ceil_div
from .cuda import (
    CudaResources,
    MaxSmem,
    Occupancy,
    SharedMemory,
    Threads,
    cuda_device,
)

if TYPE_CHECKING:
    from ..candidates import CandidateTable, Evaluation
    from ..cost import Perf

# ---- what the kernel compiles for (hopper/flash_api.cpp, round_up_headdim) --------------------
FA3_HEAD_DIMS = (64, 96, 128, 192, 256)
FA3_COMPUTE_CAPABILITY = (9, 0)
# flash_api.cpp: head_size % alignment == 0 with alignment 16 for fp8 (e4m3), 8 otherwise: a
# row must be a whole number of 16-byte TMA units.
HEAD_DIM_ALIGN_BYTES = 16

# ---- the warp-specialised structure ----------------------------------------------------------
WARPGROUP_THREADS = 128  # 4 warps (PTX ISA: wgmma is issued by a warpgroup of 4 warps)
WARPGROUP_ROWS = 64  # the M of one wgmma.mma_async: each consumer warpgroup owns 64 rows
PRODUCER_WARPGROUPS = 1
BLOCK_M_VALUES = (64, 128, 192)  # 1, 2, 3 consumer warpgroups (FA3 asserts 1 <= W <= 3)
BLOCK_N_MAX = 256  # wgmma N of QK^T is at most 256
# The K of one wgmma step is 32 bytes: 16 elements of fp16/bf16, 32 of fp8; block_n is the K of
# the P.V wgmma, so it is a multiple of that.
WGMMA_K_BYTES = 32
# FP8 V must be transposed in shared memory for the second GEMM (FA3: LDSM.T + STSM by the
# producer); the transpose works on 64 x 32 blocks when dv % 64 == 0, else it needs
# block_n % 64 == 0 (mainloop_fwd_sm90_tma_gmma_ws.hpp static_asserts).
FP8_TRANSPOSE_V_MULTIPLE = 64

# The K/V ring: FA3 instantiates kStages = 2 on sm90 (flash_fwd_launch_template.h). One stage
# exposes every load and a third only adds shared memory where the second already hides the
# load, so neither changes the answer (docs/model.md 11.1).
KV_STAGES = (2,)

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


def _kernel_dim(value: int) -> int:
    return next((h for h in FA3_HEAD_DIMS if h >= value), FA3_HEAD_DIMS[-1])


def _align(x: IntArray, to: int) -> IntArray:
    return np.asarray(ceil_div(x, to) * to, dtype=np.int64)


@dataclass(frozen=True)
class Fa3Resources(CudaResources):
    """What each fa3 candidate needs of an SM: the CUDA resources (one CTA per SM) plus the
    shared-memory layout and the setmaxnreg register split."""

    warpgroups: IntArray  # consumer warpgroups W
    launch_regs: IntArray  # registers per thread at launch, before setmaxnreg
    producer_regs: IntArray  # the producer warpgroup's setmaxnreg budget
    regs_per_sm: int
    smem_q: IntArray
    smem_kv: IntArray  # the K/V ring (and the transposed V copy for fp8)
    smem_p: IntArray
    smem_o_pad: IntArray  # what the epilogue's O tile needs beyond the V ring it overlaps
    smem_barriers: IntArray

    def uses(self, i: int) -> list[ResourceUse]:
        w = int(self.warpgroups[i])
        register_file = (int(self.producer_regs[i]) + w * int(self.regs_cap[i])) * (
            WARPGROUP_THREADS
        )
        return [
            ResourceUse("shared_memory", int(self.smem_bytes[i]), self.smem_limit_bytes, "bytes"),
            ResourceUse(
                "registers", int(self.regs_demand[i]), int(self.regs_cap[i]), "registers/thread"
            ),
            ResourceUse("register_file", register_file, self.regs_per_sm, "registers/SM"),
            ResourceUse("threads", int(self.threads[i]), self.max_threads, "threads/block"),
        ]

    def candidate_fields(self, i: int) -> dict[str, Any]:
        fields = super().candidate_fields(i)
        fields["regs_per_thread"] = int(self.regs_cap[i])  # the consumers' setmaxnreg budget
        return fields


def _res(ev: Evaluation) -> Fa3Resources:
    assert isinstance(ev.res, Fa3Resources)
    return ev.res


class FlashAttention3(KernelFamily):
    """FlashAttention-3 forward: producer/consumer warpgroups, TMA, wgmma, setmaxnreg."""

    name = "fa3"
    device_kind = "cuda"
    summary = (
        "FlashAttention-3 forward (TMA producer + wgmma consumer warpgroups, setmaxnreg, "
        "softmax overlap, ping-pong)"
    )
    shape_rule = (
        "ping-pong needs two or more consumer warpgroups; P staged in shared memory needs "
        "intra-warpgroup overlap and 16-bit inputs (FA3 asserts both); fp8 block_n a multiple "
        "of 64 when head_dim_v is not"
    )

    # ---- the problem -------------------------------------------------------------------------
    def problem_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        violations = super().problem_violations(problem, hardware)
        if any(v.field == "kernel" for v in violations):
            where = _families_running_on(hardware, self.name)
            tail = (
                f"; families that run on {hardware.name}: {', '.join(where)}"
                if where
                else f"; no other family runs on {hardware.name}"
            )
            violations = [
                FieldViolation(v.field, v.description + tail) if v.field == "kernel" else v
                for v in violations
            ]
        return violations

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        device = cuda_device(hardware)
        sm = device.sm
        cc = (sm.cc_major, sm.cc_minor)
        if cc != FA3_COMPUTE_CAPABILITY:
            why = (
                "sm_100 parts use tcgen05 and tensor memory instead"
                if sm.cc_major >= 10
                else "wgmma, TMA and setmaxnreg are sm_90a instructions"
            )
            return [
                FieldViolation(
                    "kernel",
                    f"fa3 runs on compute capability 9.0 only ({why}); {hardware.name} is "
                    f"{sm.compute_capability}",
                )
            ]
        violations = []
        if problem.dtype is DType.FP8 and device.throughput.tensor_fp8_dense_tflops is None:
            violations.append(
                FieldViolation(
                    "dtype",
                    f"fp8 needs fp8 tensor cores; {hardware.name} has no fp8 tensor peak "
                    "(allowed: fp16, bf16)",
                )
            )
        align = HEAD_DIM_ALIGN_BYTES // problem.dtype.bytes
        for field, value in (
            ("head_dim", problem.head_dim),
            ("head_dim_v", problem.head_dim_v_eff),
        ):
            if value > FA3_HEAD_DIMS[-1] or value % align:
                violations.append(
                    FieldViolation(
                        field,
                        f"fa3 supports {field} a multiple of {align} ({problem.dtype.value}: "
                        f"16-byte TMA rows) up to {FA3_HEAD_DIMS[-1]}; got {value}",
                    )
                )
        d, dv = problem.head_dim, problem.head_dim_v_eff
        if dv != d and not ((128 < d <= 192 and 96 < dv <= 128) or d <= 64):
            violations.append(
                FieldViolation(
                    "head_dim_v",
                    f"fa3 allows head_dim_v != head_dim only for head_dim in (128, 192] with "
                    f"head_dim_v in (96, 128], or head_dim <= 64; got {d} and {dv}",
                )
            )
        if problem.dropout > 0:
            where = _families_running_on(hardware, self.name)
            violations.append(
                FieldViolation(
                    "dropout",
                    "FlashAttention-3's forward kernel has no dropout (allowed: 0); "
                    + (
                        f"other families that run on {hardware.name}: {', '.join(where)}"
                        if where
                        else f"no other family runs on {hardware.name}"
                    ),
                )
            )
        return violations

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """The head dims FA3 compiles for: the next of 64, 96, 128, 192, 256."""
        return _kernel_dim(problem.head_dim), _kernel_dim(problem.head_dim_v_eff)

    # ---- the decision variables --------------------------------------------------------------
    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        step = WGMMA_K_BYTES // problem.dtype.bytes
        return (
            Param(
                "block_m",
                BLOCK_M_VALUES,
                "query rows per CTA tile: 64 per consumer warpgroup (the wgmma M)",
            ),
            Param(
                "block_n",
                tuple(range(step, BLOCK_N_MAX + 1, step)),
                "keys per K/V iteration: the N of QK^T and the K of the P.V wgmma "
                f"(a multiple of {step} for {problem.dtype.value})",
            ),
            Param(
                "num_stages",
                KV_STAGES,
                "K/V tiles in the ring the producer fills by TMA (FA3 fixes 2 on sm90)",
            ),
            Param(
                "intra_wg_overlap",
                (0, 1),
                "1: each consumer warpgroup issues the next QK^T before its softmax "
                "(two-stage pipelining within a warpgroup)",
            ),
            Param(
                "pingpong",
                (0, 1),
                "1: named barriers make the consumer warpgroups take turns on the tensor "
                "cores, one's softmax under another's GEMMs",
            ),
            Param(
                "p_in_smem",
                (0, 1),
                "1: P is written to shared memory and P.V is an SS wgmma; 0: P stays in "
                "registers (RS wgmma)",
            ),
        )

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        warpgroups = cfg["block_m"] // WARPGROUP_ROWS
        return {
            "block_m": cfg["block_m"],
            "block_n": cfg["block_n"],
            "num_warps": np.asarray(4 * (warpgroups + PRODUCER_WARPGROUPS), dtype=np.int64),
            "num_stages": cfg["num_stages"],
        }

    # ---- resources ---------------------------------------------------------------------------
    def warpgroups(self, cfg: ConfigArrays) -> IntArray:
        return np.asarray(np.maximum(ceil_div(cfg["block_m"], WARPGROUP_ROWS), 1), dtype=np.int64)

    def smem_parts(
        self, cfg: ConfigArrays, problem: AttentionProblem
    ) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
        """Q tile, K/V ring, P tile, O padding and barriers, bytes (docs/model.md 11.2)."""
        d, dv = self.kernel_head_dims(problem)
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

    def consumer_regs(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Registers per consumer thread the kernel wants (docs/model.md 11.2)."""
        _, dv = self.kernel_head_dims(problem)
        e = problem.dtype.bytes
        bn = cfg["block_n"]
        o_acc = ceil_div(WARPGROUP_ROWS * dv, WARPGROUP_THREADS)
        s_acc = ceil_div(WARPGROUP_ROWS * bn, WARPGROUP_THREADS)
        # P as the RS wgmma's A operand stays live while the next S accumulates (overlap).
        p_live = cfg["intra_wg_overlap"] * (1 - cfg["p_in_smem"])
        p_regs = ceil_div(WARPGROUP_ROWS * bn * e, WARPGROUP_THREADS * 4) * p_live
        return np.asarray(o_acc + s_acc + p_regs + CONSUMER_FIXED_REGS, dtype=np.int64)

    def register_split(
        self, warpgroups: IntArray, device: CudaDevice
    ) -> tuple[IntArray, IntArray, IntArray]:
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

    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> Fa3Resources:
        device = cuda_device(hardware)
        sm = device.sm
        warpgroups = self.warpgroups(cfg)
        threads = np.asarray(WARPGROUP_THREADS * (warpgroups + PRODUCER_WARPGROUPS), np.int64)
        q, kv, p, o_pad, barriers = self.smem_parts(cfg, problem)
        smem = np.asarray(q + kv + p + o_pad + barriers, dtype=np.int64)
        demand = self.consumer_regs(cfg, problem)
        launch, producer, consumer = self.register_split(warpgroups, device)
        allocated = np.minimum(demand, consumer)
        # Residency as the calculator gives it, with the shared memory capped at the opt-in
        # maximum: a tile over that maximum breaks the shared_memory constraint, not this one.
        occ = occupancy_arrays(sm, threads, launch, np.minimum(smem, sm.smem_per_block_optin_bytes))
        return Fa3Resources(
            smem_bytes=smem,
            smem_limit_bytes=sm.smem_per_block_optin_bytes,
            threads=threads,
            max_threads=sm.max_threads_per_block,
            regs_demand=demand,
            regs_cap=consumer,
            regs_allocated=np.asarray(allocated, dtype=np.int64),
            spill_regs=np.asarray(demand - allocated, dtype=np.int64),
            occupancy=occ,
            max_warps_per_sm=sm.max_warps_per_sm,
            warpgroups=warpgroups,
            launch_regs=launch,
            producer_regs=producer,
            regs_per_sm=sm.regs_per_sm,
            smem_q=q,
            smem_kv=kv,
            smem_p=p,
            smem_o_pad=o_pad,
            smem_barriers=barriers,
        )

    # ---- constraints -------------------------------------------------------------------------
    def shape_ok(self, cfg: ConfigArrays, problem: AttentionProblem) -> BoolArray:
        """FA3's rules between its options (static_asserts of the mainloop)."""
        _, dv = self.kernel_head_dims(problem)
        warpgroups = cfg["block_m"] // WARPGROUP_ROWS
        fp8 = problem.dtype is DType.FP8
        pingpong_ok = (cfg["pingpong"] == 0) | (warpgroups >= 2)
        p_smem_ok = (cfg["p_in_smem"] == 0) | ((cfg["intra_wg_overlap"] == 1) & (not fp8))
        transpose_ok = np.ones(len(cfg), dtype=np.bool_)
        if fp8 and dv % FP8_TRANSPOSE_V_MULTIPLE:
            transpose_ok = cfg["block_n"] % FP8_TRANSPOSE_V_MULTIPLE == 0
        ok = (cfg["block_m"] % WARPGROUP_ROWS == 0) & pingpong_ok & p_smem_ok & transpose_ok
        return np.asarray(ok, dtype=np.bool_)

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return (
            Fa3Shape(self),
            Threads(),
            SharedMemory(),
            MaxSmem(),
            ConsumerRegisters(),
            Occupancy(),
        )

    # ---- cost --------------------------------------------------------------------------------
    def tile_load_extra_cycles(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray | float:
        """Cycles each K/V tile load takes beyond its latency and transfer (0.0 here; the
        split-KV registrations add a paged cache's page-table lookups, `fa3_decode.py`)."""
        return 0.0

    def evaluate(self, ev: Evaluation) -> Perf:
        from .fa3_cost import evaluate_fa3

        return evaluate_fa3(self, ev)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Equal modelled times: fewer loop iterations, then less shared memory, fewer consumer
        registers, P in registers rather than staged, larger block_m."""
        cfg, res = ev.cfg, _res(ev)
        problem = ev.problem
        tiles = ceil_div(problem.seq_len, cfg["block_m"]) * ceil_div(
            problem.seq_len_kv_eff, cfg["block_n"]
        )
        return [
            tiles,
            res.smem_bytes,
            res.regs_demand,
            cfg["p_in_smem"],
            -cfg["block_m"],
        ]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        from .fa3_cost import reason_lines

        return reason_lines(table, i)

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The fa3 rules restated for one configuration with scalar arithmetic."""
        device = cuda_device(hardware)
        sm = device.sm
        values = config.as_dict()
        bm, bn, stages = values["block_m"], values["block_n"], values["num_stages"]
        overlap, pingpong = values["intra_wg_overlap"], values["pingpong"]
        p_smem = values["p_in_smem"]
        d, dv = self.kernel_head_dims(problem)
        e = problem.dtype.bytes
        fp8 = problem.dtype is DType.FP8
        out: list[str] = []
        w = bm // WARPGROUP_ROWS
        if (
            bm % WARPGROUP_ROWS
            or (pingpong and w < 2)
            or (p_smem and (not overlap or fp8))
            or (fp8 and dv % FP8_TRANSPOSE_V_MULTIPLE and bn % FP8_TRANSPOSE_V_MULTIPLE)
        ):
            out.append(f"fa3_shape: {self.shape_rule}")
        threads = WARPGROUP_THREADS * (w + 1)
        if threads > sm.max_threads_per_block:
            out.append(f"threads: {threads} > {sm.max_threads_per_block}")

        def aligned(x: int) -> int:
            return -(-x // SMEM_ALIGN_BYTES) * SMEM_ALIGN_BYTES

        v_bytes = aligned(stages * bn * dv * e)
        smem = aligned(bm * d * e) + aligned(stages * bn * d * e) + v_bytes * (2 if fp8 else 1)
        smem += aligned(bm * bn * e) if p_smem else 0
        smem += max(aligned(bm * dv * OUTPUT_BYTES) - v_bytes, 0)
        per_ring = -(-2 * stages * BARRIER_BYTES // BARRIER_SLOT_BYTES)
        smem += (FIXED_BARRIER_SLOTS + RING_PIPELINES * per_ring) * BARRIER_SLOT_BYTES
        if smem > sm.smem_per_block_optin_bytes:
            out.append(f"shared_memory: {smem} > {sm.smem_per_block_optin_bytes}")
        if options.max_smem is not None and smem > options.max_smem:
            out.append(f"max_smem: {smem} > {options.max_smem}")
        demand = (
            -(-WARPGROUP_ROWS * dv // WARPGROUP_THREADS)
            + -(-WARPGROUP_ROWS * bn // WARPGROUP_THREADS)
            + (-(-WARPGROUP_ROWS * bn * e // 512) if overlap and not p_smem else 0)
            + CONSUMER_FIXED_REGS
        )
        budget = (sm.regs_per_sm // WARPGROUP_THREADS - SETMAXNREG_MIN) // w // 8 * 8
        budget = min(budget, sm.max_regs_per_thread // 8 * 8)
        if demand > budget:
            out.append(f"registers: consumer demand {demand} > setmaxnreg budget {budget}")
        launch = min(sm.max_regs_per_thread // 8 * 8, sm.regs_per_sm // threads) // 8 * 8
        blocks = occupancy(
            sm, threads, launch, min(smem, sm.smem_per_block_optin_bytes)
        ).blocks_per_sm
        if blocks < max(1, options.min_blocks_per_sm or 1):
            out.append(f"occupancy: {blocks} block(s) per SM")
        return out


def _families_running_on(hardware: HardwareSpec, exclude: str) -> list[str]:
    """The other registered forward families that run on `hardware` (the registry imports
    this module, so it is imported here, when asked)."""
    from ..registry import families_on

    return [name for name in families_on(hardware) if name != exclude]


# ---- the fa3 constraints ---------------------------------------------------------------------


class Fa3Shape(Constraint):
    """The options combine as FA3's kernel template allows."""

    name = "fa3_shape"
    rule = "the structural options combine as FA3's kernel template allows"
    short = "shape"
    kind = ConstraintKind.LEGALITY

    def __init__(self, family: FlashAttention3):
        self.family = family

    def rules(self, ev: Evaluation) -> list[Rule]:
        ok = self.family.shape_ok(ev.cfg, ev.problem)
        return [Rule("fa3_illegal", np.asarray(~ok, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} breaks fa3's rules: {self.family.shape_rule}"


class ConsumerRegisters(Constraint):
    """The consumers' accumulators fit their setmaxnreg budget without spilling."""

    name = "registers"
    rule = "consumer registers (S, P, O accumulators) within the setmaxnreg budget"
    short = "regs"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("spill_regs", _res(ev).spill_regs, "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = _res(ev)
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
            f"the register file is what it is; fewer consumer warpgroups or a narrower "
            f"block_n fit (best then: {ev.label(best)})",
        )


__all__ = ["Fa3Resources", "FlashAttention3"]
