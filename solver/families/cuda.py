"""What the CUDA families share: the SM's resources (shared memory, registers, threads, exact
occupancy) and the constraints on them, for kernels whose blocks are thread blocks on an SM.

A CUDA family states its tile shapes (`alignment_ok`), its shared-memory layout
(`smem_bytes`) and its register footprint (`regs_demand`); this module turns those into the
resources, the constraints of the hand method (seed 000: legality, shared memory, registers,
residency), the validator's independent check, and the reason lines. Formulas and sources:
`docs/model.md` sections 2-4.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..constraints import Constraint, ConstraintKind, Relaxation, Rule
from ..family import KernelFamily, Resources, ResourceUse
from ..hardware import CudaDevice, HardwareSpec
from ..occupancy import OccupancyArrays, occupancy, occupancy_arrays
from ..problem import AttentionProblem, SolveOptions
from ..space import BoolArray, Config, ConfigArrays, FloatArray, IntArray, ceil_div

if TYPE_CHECKING:
    from ..candidates import CandidateTable, Evaluation

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


def kib(value: float) -> str:
    return f"{value / 1024:g} KiB"


def cuda_device(hardware: HardwareSpec) -> CudaDevice:
    """The hardware as a CUDA device (a family checks the kind before it gets here)."""
    if not isinstance(hardware, CudaDevice):
        raise TypeError(f"{hardware.name} is not a CUDA device")
    return hardware


@dataclass(frozen=True)
class CudaResources(Resources):
    """What each candidate needs of an SM, and what the SM grants it."""

    smem_bytes: IntArray  # dynamic shared memory per block
    smem_limit_bytes: int  # the opt-in maximum per block
    threads: IntArray
    max_threads: int
    regs_demand: IntArray  # registers per thread the kernel wants
    regs_cap: IntArray  # the ISA limit, or the launch bound's
    regs_allocated: IntArray
    spill_regs: IntArray
    occupancy: OccupancyArrays
    max_warps_per_sm: int

    def uses(self, i: int) -> list[ResourceUse]:
        return [
            ResourceUse("shared_memory", int(self.smem_bytes[i]), self.smem_limit_bytes, "bytes"),
            ResourceUse(
                "registers", int(self.regs_demand[i]), int(self.regs_cap[i]), "registers/thread"
            ),
            ResourceUse("threads", int(self.threads[i]), self.max_threads, "threads/block"),
        ]

    def candidate_fields(self, i: int) -> dict[str, Any]:
        blocks = int(self.occupancy.blocks_per_sm[i])
        warps = int(self.threads[i]) // 32
        return {
            "threads_per_block": int(self.threads[i]),
            "smem_bytes": int(self.smem_bytes[i]),
            "regs_per_thread": int(self.regs_allocated[i]),
            "regs_demand": int(self.regs_demand[i]),
            "spill_regs": int(self.spill_regs[i]),
            "blocks_per_sm": blocks,
            "occupancy_limiter": "/".join(x.value for x in self.occupancy.limiters(i)),
            "occupancy": blocks * warps / self.max_warps_per_sm,
        }


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


def _res(ev: Evaluation) -> CudaResources:
    assert isinstance(ev.res, CudaResources)
    return ev.res


class CudaFamily(KernelFamily):
    """A kernel whose blocks are CUDA thread blocks: tiles, warps, shared memory, registers."""

    device_kind = "cuda"
    alignment_rule: str
    pipeline_note: str

    # ---- what a CUDA family states -----------------------------------------------------------
    @abstractmethod
    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """The head dims (Q/K, V) the compiled kernel actually uses, after padding."""

    @abstractmethod
    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        """Whether each tile shape is one the kernel's instructions and copies can tile."""

    @abstractmethod
    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Dynamic shared memory of one block, bytes."""

    @abstractmethod
    def q_in_registers(self) -> bool:
        """True if Q fragments stay in registers; False if re-read from shared memory."""

    def threads_per_block(self, cfg: ConfigArrays, device: CudaDevice) -> IntArray:
        return np.asarray(cfg.num_warps * device.sm.warp_size_threads, dtype=np.int64)

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Estimated 32-bit registers per thread the kernel wants before any spilling.

        Accumulators are FP32 and spread over the 32 lanes of the warp that owns the rows:
        O holds rows_per_warp x dv, S holds rows_per_warp x block_n. Softmax keeps a max and a
        sum per owned row; one A fragment (Q, or P) is staged per 16-row slab; Q stays in
        registers for families that keep it there (fp16 packed two per register).
        """
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        rows_per_warp = cfg.block_m // cfg.num_warps
        slabs = np.maximum(rows_per_warp // MMA_ROWS, 1)
        o_acc = -(-rows_per_warp * dv // 32)
        s_acc = -(-rows_per_warp * cfg.block_n // 32)
        softmax = SOFTMAX_REGS_PER_SLAB * slabs
        a_frag = A_FRAGMENT_REGS_PER_SLAB * slabs
        q_regs = -(-rows_per_warp * d * elem // (32 * 4)) if self.q_in_registers() else 0
        dropout = DROPOUT_EXTRA_REGS if problem.dropout > 0 else 0
        total = o_acc + s_acc + softmax + a_frag + q_regs + FIXED_OVERHEAD_REGS + dropout
        return np.asarray(total, dtype=np.int64)

    # ---- the family interface ------------------------------------------------------------
    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> CudaResources:
        device = cuda_device(hardware)
        sm = device.sm
        smem = self.smem_bytes(cfg, problem)
        threads = self.threads_per_block(cfg, device)
        demand = self.regs_demand(cfg, problem)
        cap = register_cap(device, threads, options.min_blocks_per_sm)
        allocated = np.minimum(demand, cap)
        spill = demand - allocated
        occ = occupancy_arrays(sm, threads, allocated, smem)
        return CudaResources(
            smem_bytes=smem,
            smem_limit_bytes=sm.smem_per_block_optin_bytes,
            threads=threads,
            max_threads=sm.max_threads_per_block,
            regs_demand=demand,
            regs_cap=cap,
            regs_allocated=allocated,
            spill_regs=spill,
            occupancy=occ,
            max_warps_per_sm=sm.max_warps_per_sm,
        )

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return (
            Alignment(self),
            Threads(),
            SharedMemory(),
            MaxSmem(),
            Registers(),
            Occupancy(),
        )

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """What kernels prefer when the model cannot tell configurations apart (e.g. every
        one waits on HBM): fewer loop iterations (tiles per head), then the standard warp
        counts (4, then 2 and 8, ...: distance from 4 in powers of two), then less shared
        memory, fewer stages, larger block_m."""
        cfg, res = ev.cfg, _res(ev)
        problem = ev.problem
        tiles = ceil_div(problem.seq_len, cfg.block_m) * ceil_div(
            problem.seq_len_kv_eff, cfg.block_n
        )
        warp_distance = np.abs(np.log2(cfg.num_warps) - np.log2(STANDARD_WARPS))
        return [
            tiles,
            np.rint(warp_distance).astype(np.int64),
            res.smem_bytes,
            cfg.num_stages,
            -cfg.block_m,
        ]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        res = _res(table)
        sm = cuda_device(table.hardware).sm
        perf = table.perf
        limiters = "/".join(x.value for x in res.occupancy.limiters(i))
        warps = int(res.occupancy.blocks_per_sm[i] * table.cfg.num_warps[i])
        spill = f", {res.spill_regs[i]} spilled" if res.spill_regs[i] else ""
        return [
            f"{res.occupancy.blocks_per_sm[i]} block(s)/SM limited by {limiters}; "
            f"{warps} of {sm.max_warps_per_sm} warps resident",
            f"{perf.overlap[i]:.0%} of each K/V tile load hidden by compute; "
            f"tensor cores busy {perf.mma_utilization[i]:.0%}",
            f"shared memory {kib(res.smem_bytes[i])} of {kib(sm.smem_per_block_optin_bytes)}; "
            f"about {res.regs_demand[i]} registers per thread{spill}",
        ]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """Each CUDA rule restated for one configuration, with the scalar occupancy
        calculator (not the table's vectorised one)."""
        device = cuda_device(hardware)
        sm = device.sm
        one = ConfigArrays.from_configs(config.as_dict(), [config])
        problems: list[str] = []
        if not bool(self.alignment_ok(one, problem, device)[0]):
            problems.append(f"alignment: {self.alignment_rule}")
        threads = config["num_warps"] * sm.warp_size_threads
        if threads > sm.max_threads_per_block:
            problems.append(f"threads: {threads} > {sm.max_threads_per_block}")
        smem = int(self.smem_bytes(one, problem)[0])
        if smem > sm.smem_per_block_optin_bytes:
            problems.append(f"shared_memory: {smem} > {sm.smem_per_block_optin_bytes}")
        if options.max_smem is not None and smem > options.max_smem:
            problems.append(f"max_smem: {smem} > {options.max_smem}")
        demand = int(self.regs_demand(one, problem)[0])
        cap = int(register_cap(device, np.array([threads]), options.min_blocks_per_sm)[0])
        if demand - min(demand, cap) > MAX_SPILL_REGS:
            problems.append(f"registers: demand {demand} with limit {cap}")
        blocks = occupancy(sm, threads, min(demand, cap), smem).blocks_per_sm
        if blocks < max(1, options.min_blocks_per_sm or 1):
            problems.append(f"occupancy: {blocks} block(s) per SM")
        return problems


# ---- the CUDA constraints, in the hand method's order ------------------------------------------


class Alignment(Constraint):
    """The tile shape is one the family's MMA and copy instructions can tile."""

    name = "alignment"
    rule = "the tile shape is one the family's instructions can tile"
    short = "align"
    kind = ConstraintKind.LEGALITY

    def __init__(self, family: CudaFamily):
        self.family = family

    def rules(self, ev: Evaluation) -> list[Rule]:
        ok = self.family.alignment_ok(ev.cfg, ev.problem, cuda_device(ev.hardware))
        return [Rule("misaligned", np.asarray(~ok, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} breaks {self.family.name}'s alignment: {self.family.alignment_rule}"


class Threads(Constraint):
    name = "threads"
    rule = "threads per block within the hardware maximum"
    short = "thrds"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        res = _res(ev)
        return [Rule("threads", res.threads, "<=", res.max_threads)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = _res(ev)
        return f"{ev.label(i)} needs {res.threads[i]} threads per block, maximum {res.max_threads}"


class SharedMemory(Constraint):
    name = "shared_memory"
    rule = "shared memory per block within the opt-in maximum"
    short = "smem"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        res = _res(ev)
        return [Rule("smem_bytes", res.smem_bytes, "<=", res.smem_limit_bytes)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = _res(ev)
        return (
            f"{ev.label(i)} needs {kib(res.smem_bytes[i])} of shared memory, "
            f"the opt-in maximum is {kib(res.smem_limit_bytes)}"
        )


class MaxSmem(Constraint):
    name = "max_smem"
    rule = "shared memory per block within the user's cap"
    short = "cap"
    kind = ConstraintKind.USER

    def rules(self, ev: Evaluation) -> list[Rule]:
        if ev.options.max_smem is None:
            return []
        return [Rule("smem_bytes", _res(ev).smem_bytes, "<=", ev.options.max_smem)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return (
            f"{ev.label(i)} needs {kib(_res(ev).smem_bytes[i])} of shared memory, "
            f"the cap is {kib(ev.options.max_smem or 0)}"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        smem = _res(ev).smem_bytes
        smallest = int(allowed[np.argmin(smem[allowed])])
        return Relaxation(
            self.name,
            "option",
            "max_smem",
            int(smem[smallest]),
            f"raise --max-smem to {smem[smallest]} bytes ({kib(smem[smallest])}, the smallest "
            f"feasible cap) with {ev.label(smallest)}",
        )


class Registers(Constraint):
    name = "registers"
    rule = f"estimated registers spill at most {MAX_SPILL_REGS} per thread"
    short = "regs"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("spill_regs", _res(ev).spill_regs, "<=", MAX_SPILL_REGS)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = _res(ev)
        return (
            f"{ev.label(i)} wants about {res.regs_demand[i]} registers per thread; with a limit "
            f"of {res.regs_cap[i]} it would spill {res.spill_regs[i]} (> {MAX_SPILL_REGS})"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        least = int(_res(ev).spill_regs[allowed].min())
        return Relaxation(
            self.name,
            "none",
            "",
            None,
            f"accept {least} spilled registers per thread (best then: {ev.label(best)})",
        )


class Occupancy(Constraint):
    name = "occupancy"
    rule = "at least the required number of blocks fit on one SM"
    short = "occ"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        need = max(1, ev.options.min_blocks_per_sm or 1)
        return [Rule("blocks_per_sm", _res(ev).occupancy.blocks_per_sm, ">=", need)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = _res(ev)
        need = max(1, ev.options.min_blocks_per_sm or 1)
        limiters = ", ".join(x.value for x in res.occupancy.limiters(i))
        return (
            f"{ev.label(i)} fits {res.occupancy.blocks_per_sm[i]} block(s) per SM (limited by "
            f"{limiters}), {need} required"
        )

    def relaxation(self, ev: Evaluation, allowed: IntArray, best: int) -> Relaxation | None:
        if not ev.options.min_blocks_per_sm:
            return super().relaxation(ev, allowed, best)
        most = int(_res(ev).occupancy.blocks_per_sm[allowed].max())
        return Relaxation(
            self.name,
            "option",
            "min_blocks_per_sm",
            most,
            f"lower --min-blocks-per-sm to {most} (best then: {ev.label(best)})",
        )


__all__ = ["CudaFamily", "CudaResources", "FloatArray", "register_cap"]
