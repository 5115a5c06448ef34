"""What the CUDA families share: a kernel whose blocks are thread blocks on an SM.

A CUDA family states its tile shapes (`alignment_ok`), its shared-memory layout
(`smem_bytes`, or `shared_memory` where the device changes it) and its register footprint
(`regs_demand`, or `register_use` where a compiler model gives the allocation and the spill);
`CudaFamily` turns those into the resources, the constraints of the hand method (seed 000:
legality, shared memory, registers, residency), the validator's independent check, the
tie-break order and the reason lines.
Formulas and sources: `docs/model.md` sections 2-4.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ...constraints import Constraint
from ...cost import tiles_per_head
from ...family import KernelFamily, kib
from ...hardware import CudaDevice, HardwareSpec, SmLimits
from ...occupancy import occupancy, occupancy_arrays
from ...problem import AttentionProblem, SolveOptions
from ...space import BoolArray, Config, ConfigArrays, IntArray, ceil_div
from .constraints import (
    Alignment,
    MaxSmem,
    Registers,
    ResidentBlocks,
    SharedMemory,
    Threads,
    cuda_resources,
)
from .resources import (
    A_FRAGMENT_REGS_PER_SLAB,
    DROPOUT_EXTRA_REGS,
    FIXED_OVERHEAD_REGS,
    MAX_SPILL_REGS,
    MMA_ROWS,
    SOFTMAX_REGS_PER_SLAB,
    STANDARD_WARPS,
    WARP_LANES,
    CudaResources,
    RegisterUse,
    cuda_device,
    register_cap,
)

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation


class CudaFamily(KernelFamily):
    """A kernel whose blocks are CUDA thread blocks: tiles, warps, shared memory, registers."""

    device_kind = "cuda"
    alignment_rule: str
    # Spilled registers per thread tolerated before a configuration is refused (the `registers`
    # constraint); None: spills are costed, never refused (a compiler that spills rather than
    # fails, with a register model that predicts the spill: the triton family).
    max_spill_regs: ClassVar[int | None] = MAX_SPILL_REGS
    # The name of the legality constraint that states `alignment_ok` (in the validator's words)
    shape_constraint: ClassVar[str] = "alignment"

    # ---- what a CUDA family states -----------------------------------------------------------
    @abstractmethod
    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """The head dims (Q/K, V) the compiled kernel actually uses, after padding."""

    @abstractmethod
    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        """Whether each tile shape is one the kernel's instructions and copies can tile."""

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Dynamic shared memory of one block, bytes, for a layout the device does not change
        (fa2, flashinfer); a family whose compiler lays it out per target states
        `shared_memory` instead."""
        raise NotImplementedError(f"{self.name} states its shared memory per device")

    def shared_memory(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> IntArray:
        """Dynamic shared memory of one block on `device`, bytes (by default `smem_bytes`)."""
        return self.smem_bytes(cfg, problem)

    @abstractmethod
    def q_in_registers(self) -> bool:
        """True if Q fragments stay in registers; False if re-read from shared memory."""

    def threads_per_block(self, cfg: ConfigArrays, device: CudaDevice) -> IntArray:
        return np.asarray(cfg.num_warps * device.sm.warp_size_threads, dtype=np.int64)

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Estimated 32-bit registers per thread the kernel wants before any spilling.

        Accumulators are FP32 and spread over the WARP_LANES lanes of the warp that owns the rows:
        O holds rows_per_warp x dv, S holds rows_per_warp x block_n. Softmax keeps a max and a
        sum per owned row; one A fragment (Q, or P) is staged per 16-row slab; Q stays in
        registers for families that keep it there (fp16 packed two per register).
        """
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        rows_per_warp = cfg.block_m // cfg.num_warps
        slabs = np.maximum(rows_per_warp // MMA_ROWS, 1)
        o_acc = ceil_div(rows_per_warp * dv, WARP_LANES)
        s_acc = ceil_div(rows_per_warp * cfg.block_n, WARP_LANES)
        softmax = SOFTMAX_REGS_PER_SLAB * slabs
        a_frag = A_FRAGMENT_REGS_PER_SLAB * slabs
        q_regs = ceil_div(rows_per_warp * d * elem, WARP_LANES * 4) if self.q_in_registers() else 0
        dropout = DROPOUT_EXTRA_REGS if problem.dropout > 0 else 0
        total = o_acc + s_acc + softmax + a_frag + q_regs + FIXED_OVERHEAD_REGS + dropout
        return np.asarray(total, dtype=np.int64)

    def register_use(
        self,
        cfg: ConfigArrays,
        problem: AttentionProblem,
        device: CudaDevice,
        options: SolveOptions,
    ) -> RegisterUse:
        """Registers of each candidate: the estimated demand (`regs_demand`) against the ISA
        limit or the launch bound of `min_blocks_per_sm` (`register_cap`); what exceeds the
        cap spills."""
        threads = self.threads_per_block(cfg, device)
        demand = self.regs_demand(cfg, problem)
        cap = register_cap(device, threads, options.min_blocks_per_sm)
        allocated = np.minimum(demand, cap)
        return RegisterUse(demand=demand, cap=cap, allocated=allocated, spill=demand - allocated)

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
        smem = self.shared_memory(cfg, problem, device)
        threads = self.threads_per_block(cfg, device)
        regs = self.register_use(cfg, problem, device, options)
        occ = occupancy_arrays(sm, threads, regs.allocated, smem)
        return CudaResources(
            sm=sm,
            smem_bytes=smem,
            threads=threads,
            regs_demand=regs.demand,
            regs_cap=regs.cap,
            regs_allocated=regs.allocated,
            spill_regs=regs.spill,
            occupancy=occ,
        )

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        registers = () if self.max_spill_regs is None else (Registers(),)
        return (
            Alignment(self),
            Threads(),
            SharedMemory(),
            MaxSmem(),
            *registers,
            ResidentBlocks(),
        )

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """What kernels prefer when the model cannot tell configurations apart (e.g. every
        one waits on HBM): fewer loop iterations (tiles per head), then the standard warp
        counts (4, then 2 and 8, ...: distance from 4 in powers of two), then less shared
        memory, fewer stages, larger block_m; read from the common fields, declared or
        derived."""
        common, res = ev.common, cuda_resources(ev)
        problem = ev.problem
        tiles = tiles_per_head(problem, common["block_m"], common["block_n"])
        warp_distance = np.abs(np.log2(common["num_warps"]) - np.log2(STANDARD_WARPS))
        return [
            tiles,
            np.rint(warp_distance).astype(np.int64),
            res.smem_bytes,
            common["num_stages"],
            -common["block_m"],
        ]

    def matrix_units(self, sm: SmLimits) -> str:
        """What runs the GEMMs on `sm`, as the reasons name it (a family whose kernel does
        not use the tensor cores there says so)."""
        return "tensor cores"

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        res = cuda_resources(table)
        sm = cuda_device(table.hardware).sm
        perf = table.perf
        limiters = "/".join(x.value for x in res.occupancy.limiters(i))
        warps = int(res.occupancy.blocks_per_sm[i] * table.cfg.num_warps[i])
        spill = f", {res.spill_regs[i]} spilled" if res.spill_regs[i] else ""
        return [
            f"{res.occupancy.blocks_per_sm[i]} block(s)/SM limited by {limiters}; "
            f"{warps} of {sm.max_warps_per_sm} warps resident",
            f"{perf.overlap[i]:.0%} of each K/V tile load hidden by compute; "
            f"{self.matrix_units(sm)} busy {perf.mma_utilization[i]:.0%}",
            f"shared memory {kib(res.smem_bytes[i])} of {kib(sm.smem_per_block_optin_bytes)}; "
            f"about {res.regs_demand[i]} registers per thread{spill}",
        ]

    def check_tile(
        self,
        device: CudaDevice,
        problem: AttentionProblem,
        options: SolveOptions,
        one: ConfigArrays,
    ) -> tuple[list[str], int, int]:
        """The tile rules of one configuration (`one`: its single-row columns): its shape
        (reported under `shape_constraint`), threads per block, shared memory and the user's
        cap; the broken rules, its threads and its shared-memory bytes (`check_tiles`)."""
        return self.check_tiles(device, problem, options, one)[0]

    def check_tiles(
        self,
        device: CudaDevice,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> list[tuple[list[str], int, int]]:
        """`check_tile` of each configuration of `cfg`, the shape and the shared memory
        evaluated once over all of them."""
        sm = device.sm
        aligned = self.alignment_ok(cfg, problem, device)
        smem_bytes = self.shared_memory(cfg, problem, device)
        out = []
        for k in range(len(cfg)):
            problems: list[str] = []
            if not bool(aligned[k]):
                problems.append(f"{self.shape_constraint}: {self.alignment_rule}")
            threads = int(cfg.num_warps[k]) * sm.warp_size_threads
            if threads > sm.max_threads_per_block:
                problems.append(f"threads: {threads} > {sm.max_threads_per_block}")
            smem = int(smem_bytes[k])
            if smem > sm.smem_per_block_optin_bytes:
                problems.append(f"shared_memory: {smem} > {sm.smem_per_block_optin_bytes}")
            if options.max_smem is not None and smem > options.max_smem:
                problems.append(f"max_smem: {smem} > {options.max_smem}")
            out.append((problems, threads, smem))
        return out

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """Each CUDA rule restated for one configuration, with the scalar occupancy
        calculation (not the table's vectorised one): `cuda_checks`."""
        return self.cuda_checks(hardware, problem, options, [config])[0]

    def cuda_checks(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """The CUDA rules each of `configs` breaks: the family's shape and resource rules
        evaluated once over the configurations (apart from the table), the occupancy by the
        scalar calculation for each."""
        device = cuda_device(hardware)
        sm = device.sm
        cfg = ConfigArrays.from_configs(configs[0].as_dict(), configs)
        tiles = self.check_tiles(device, problem, options, cfg)
        regs = self.register_use(cfg, problem, device, options)
        out: list[list[str]] = []
        for k, (problems, threads, smem) in enumerate(tiles):
            demand, cap = int(regs.demand[k]), int(regs.cap[k])
            if self.max_spill_regs is not None and int(regs.spill[k]) > self.max_spill_regs:
                problems.append(f"registers: demand {demand} with limit {cap}")
            blocks = occupancy(sm, threads, int(regs.allocated[k]), smem).blocks_per_sm
            if blocks < max(1, options.min_blocks_per_sm or 1):
                problems.append(f"occupancy: {blocks} block(s) per SM")
            out.append(problems)
        return out
