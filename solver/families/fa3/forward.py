"""FlashAttention-3's forward kernel on Hopper (compute capability 9.0): warp-specialised,
registered as (`fa3`, forward), with its split-KV, PackGQA and paged-KV paths (`split.py`).

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
Here the family composes its pieces: the
structure and parameters (`shape.py`), the resources (`resources.py`), the cost (`cost.py`)
and the split-KV path (`split.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint
from ...cost import Perf, tiles_per_head
from ...errors import FieldViolation
from ...family import KernelFamily
from ...hardware import HardwareSpec
from ...occupancy import occupancy, occupancy_arrays
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import Config, ConfigArrays, IntArray, Param, ceil_div
from ...split_kv import gqa_group
from ..cuda.constraints import MaxSmem, ResidentBlocks, SharedMemory, Threads
from ..cuda.resources import cuda_device
from ..cuda.timing import cuda_rates
from .cost import evaluate, reason_lines
from .resources import (
    BARRIER_BYTES,
    BARRIER_SLOT_BYTES,
    CONSUMER_FIXED_REGS,
    FIXED_BARRIER_SLOTS,
    OUTPUT_BYTES,
    RING_PIPELINES,
    SETMAXNREG_MIN,
    SMEM_ALIGN_BYTES,
    ConsumerRegisters,
    Fa3Resources,
    consumer_regs,
    consumer_warpgroups,
    fa3_resources,
    register_split,
    smem_parts,
)
from .shape import (
    FP8_TRANSPOSE_V_MULTIPLE,
    PRODUCER_WARPGROUPS,
    SHAPE_RULE,
    WARPGROUP_ROWS,
    WARPGROUP_THREADS,
    Fa3Shape,
    common_fields,
    fa3_violations,
    kernel_head_dims,
    tile_params,
)
from .split import FA3_SPLIT_KV, Fa3PackGqa, split_reason_lines

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation


class FlashAttention3(KernelFamily):
    """FlashAttention-3 forward: producer/consumer warpgroups, TMA, wgmma, setmaxnreg; its
    split-KV, PackGQA and paged-KV paths against a longer cache."""

    name = "fa3"
    device_kind = "cuda"
    summary = (
        "FlashAttention-3 forward (TMA producer + wgmma consumer warpgroups, setmaxnreg, "
        "softmax overlap, ping-pong)"
    )
    split_kv = FA3_SPLIT_KV

    # ---- the problem -------------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return fa3_violations(problem, hardware)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """The head dims FA3 compiles for: the next of 64, 96, 128, 192, 256."""
        return kernel_head_dims(problem)

    # ---- the decision variables --------------------------------------------------------------
    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        """The tile and structural parameters and, where declared, num_splits and pack_gqa."""
        return self.split_kv.params(problem, hardware, tile_params(problem), self)

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        return self.split_kv.request_params(self.name, self.params(problem, hardware), options)

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        return common_fields(cfg)

    # ---- resources and constraints -----------------------------------------------------------
    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> Fa3Resources:
        """Every candidate's shared-memory layout, setmaxnreg register split and residency."""
        device = cuda_device(hardware)
        sm = device.sm
        warpgroups = consumer_warpgroups(cfg)
        threads = np.asarray(WARPGROUP_THREADS * (warpgroups + PRODUCER_WARPGROUPS), np.int64)
        q, kv, p, o_pad, barriers = smem_parts(cfg, problem)
        smem = np.asarray(q + kv + p + o_pad + barriers, dtype=np.int64)
        demand = consumer_regs(cfg, problem)
        launch, producer, consumer = register_split(warpgroups, device)
        allocated = np.minimum(demand, consumer)
        # Residency as the calculator gives it, with the shared memory capped at the opt-in
        # maximum: a tile over that maximum breaks the shared_memory constraint, not this one.
        occ = occupancy_arrays(sm, threads, launch, np.minimum(smem, sm.smem_per_block_optin_bytes))
        return Fa3Resources(
            sm=sm,
            smem_bytes=smem,
            threads=threads,
            regs_demand=demand,
            regs_cap=consumer,
            regs_allocated=np.asarray(allocated, dtype=np.int64),
            spill_regs=np.asarray(demand - allocated, dtype=np.int64),
            occupancy=occ,
            warpgroups=warpgroups,
            producer_regs=producer,
            smem_q=q,
            smem_kv=kv,
            smem_p=p,
            smem_o_pad=o_pad,
            smem_barriers=barriers,
        )

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        split = self.split_kv
        # pack_gqa is declared where splits are and the problem is GQA
        packs = split.declared(problem) and gqa_group(problem) > 1
        return (
            Fa3Shape(),
            Threads(),
            SharedMemory(),
            MaxSmem(),
            ConsumerRegisters(),
            ResidentBlocks(),
            *split.split_tiles(problem),
            *([Fa3PackGqa()] if packs else []),
            *split.decode_rows(problem),
        )

    # ---- cost --------------------------------------------------------------------------------
    def evaluate(self, ev: Evaluation) -> Perf:
        _, dv = kernel_head_dims(ev.problem)
        return self.split_kv.perf(ev, evaluate, cuda_rates(cuda_device(ev.hardware)), dv)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Equal modelled times: fewer loop iterations, then less shared memory, fewer consumer
        registers, P in registers rather than staged, larger block_m; then the split-KV path's
        (fewer splits, the smaller page)."""
        cfg, res = ev.cfg, fa3_resources(ev)
        problem = ev.problem
        tiles = tiles_per_head(problem, cfg["block_m"], cfg["block_n"])
        return [
            tiles,
            res.smem_bytes,
            res.regs_demand,
            cfg["p_in_smem"],
            -cfg["block_m"],
            *self.split_kv.tie_keys(ev),
        ]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        return [*reason_lines(table, i), *split_reason_lines(table, i)]

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
        d, dv = kernel_head_dims(problem)
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
            out.append(f"fa3_shape: {SHAPE_RULE}")
        threads = WARPGROUP_THREADS * (w + 1)
        if threads > sm.max_threads_per_block:
            out.append(f"threads: {threads} > {sm.max_threads_per_block}")

        def aligned(x: int) -> int:
            return ceil_div(x, SMEM_ALIGN_BYTES) * SMEM_ALIGN_BYTES

        v_bytes = aligned(stages * bn * dv * e)
        smem = aligned(bm * d * e) + aligned(stages * bn * d * e) + v_bytes * (2 if fp8 else 1)
        smem += aligned(bm * bn * e) if p_smem else 0
        smem += max(aligned(bm * dv * OUTPUT_BYTES) - v_bytes, 0)
        per_ring = ceil_div(2 * stages * BARRIER_BYTES, BARRIER_SLOT_BYTES)
        smem += (FIXED_BARRIER_SLOTS + RING_PIPELINES * per_ring) * BARRIER_SLOT_BYTES
        if smem > sm.smem_per_block_optin_bytes:
            out.append(f"shared_memory: {smem} > {sm.smem_per_block_optin_bytes}")
        if options.max_smem is not None and smem > options.max_smem:
            out.append(f"max_smem: {smem} > {options.max_smem}")
        demand = (
            ceil_div(WARPGROUP_ROWS * dv, WARPGROUP_THREADS)
            + ceil_div(WARPGROUP_ROWS * bn, WARPGROUP_THREADS)
            + (ceil_div(WARPGROUP_ROWS * bn * e, 512) if overlap and not p_smem else 0)
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
        out.extend(self.split_kv.check(problem, {**values, **self.derived(values)}))
        splits = values.get("num_splits", 1)
        page = values.get("page_size")
        row_gather = page is not None and page % values["block_n"] != 0
        if values.get("pack_gqa") == 0 and (splits > 1 or row_gather):
            out.append("fa3_pack_gqa: FA3 packs GQA on its split and paged non-TMA paths")
        return out
