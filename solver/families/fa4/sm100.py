"""FlashAttention-4's forward kernel on sm_100/sm_103 (`FlashAttentionForwardSm100` and the
dedicated hd256 kernel), the design the `fa4` family runs on compute capability 10.x.

Warp roles, not warps over rows: two softmax warpgroups (one per Q tile), a correction
warpgroup (O rescaling and the epilogue), one warp issuing the tcgen05 MMAs, one loading by
TMA, one storing O. The accumulators S and O live in tensor memory; P is written back over S
and read by the P.V MMA from TMEM. With `cta_group = 2` a 2x1 cluster shares each MMA
(M = 256), each CTA holding half of every K/V tile. Decision variables: block_n, q_stage and
cta_group (block_m = 128 and num_warps are fixed by the kernel; the K/V ring's depth is
derived from the shared memory left, as FA4 derives it). Sources: Dao-AILab/flash-attention@
0251105a `flash_attn/cute/flash_fwd_sm100.py`, `sm100_hd256_2cta_fmha_forward.py`,
`interface.py`; Zadouri et al., "FlashAttention-4" (2026); NVIDIA/cutlass `tmem_allocator_
sm100.hpp`; PTX ISA (tcgen05, setmaxnreg). Formulas: docs/model.md section 17.
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
from ...problem import AttentionProblem, Phase, SolveOptions
from ...space import Config, ConfigArrays, IntArray, Param
from ..cuda.constraints import MaxSmem, ResidentBlocks, SharedMemory, Threads
from ..cuda.resources import cuda_device
from ..cuda.timing import cuda_rates
from .cost import evaluate, reason_lines
from .resources import (
    CORRECTION_REGS,
    HD256_CHUNK,
    HD256_KV_STAGES,
    MAX_KV_STAGES,
    MIN_KV_STAGES,
    OTHER_REGS,
    OUTPUT_BYTES,
    SETMAXNREG_MAX,
    SETMAXNREG_STEP,
    SMEM_RESERVE_BYTES,
    SOFTMAX_FIXED_REGS,
    UNEVEN_DIMS,
    Fa4Resources,
    TensorMemory,
    WarpRoleRegisters,
    fa4_resources,
    launch_regs,
    one_cta_per_sm,
    role_registers,
    smem_budget,
    smem_layout,
    tmem_columns,
)
from .shape import (
    SHAPE_RULE,
    WARPGROUP_THREADS,
    Fa4Shape,
    is_hd256,
    kernel_head_dims,
    shape_ok,
    sm100_violations,
    tile_params,
)
from .split import FA4_SM100_SPLIT_KV

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation


class Fa4Sm100(KernelFamily):
    """fa4 on sm_100: tcgen05 into tensor memory, warp roles with setmaxnreg budgets, one or
    two Q tiles per CTA, one CTA or a 2-CTA cluster per tile; split-KV and pack-GQA against a
    longer cache."""

    name = "fa4"
    device_kind = "cuda"
    summary = (
        "FlashAttention-4 forward on sm_100 (tcgen05 MMAs into tensor memory, softmax / "
        "correction / MMA / load warp roles with setmaxnreg, two Q tiles per CTA, 2-CTA "
        "clusters, part of exp2 emulated on the FMA pipe)"
    )
    split_kv = FA4_SM100_SPLIT_KV

    # ---- the problem -------------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return [*sm100_violations(problem), *self.split_kv.problem_violations(problem)]

    # ---- the decision variables --------------------------------------------------------------
    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        """The tile parameters and, where declared, num_splits and pack_gqa."""
        return self.split_kv.params(problem, hardware, tile_params(problem), self)

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        return self.split_kv.request_params(self.name, self.params(problem, hardware), options)

    # ---- resources and constraints -----------------------------------------------------------
    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> Fa4Resources:
        """Every candidate's tensor memory, shared-memory layout, role registers, residency."""
        sm = cuda_device(hardware).sm
        threads = np.asarray(cfg["num_warps"] * sm.warp_size_threads, dtype=np.int64)
        layout = smem_layout(cfg, problem, smem_budget(sm, options.max_smem))
        smem = layout.total
        regs = role_registers(cfg, problem, sm)
        demand, budget = regs.softmax_demand, regs.softmax_budget
        allocated = np.minimum(demand, budget)
        occ = occupancy_arrays(
            sm, threads, launch_regs(sm, threads), np.minimum(smem, sm.smem_per_block_optin_bytes)
        )
        return Fa4Resources(
            sm=sm,
            smem_bytes=smem,
            threads=threads,
            regs_demand=demand,
            regs_cap=budget,
            regs_allocated=np.asarray(allocated, dtype=np.int64),
            spill_regs=np.asarray(demand - allocated, dtype=np.int64),
            occupancy=one_cta_per_sm(occ),
            tmem_columns=tmem_columns(cfg, problem),
            tmem_capacity=int(sm.tensor_memory_columns or 0),
            smem_q_o=layout.q_o,
            smem_ring=layout.ring,
            kv_stages=layout.stages,
            softmax_warpgroups=regs.softmax_warpgroups,
            other_warpgroups=regs.other_warpgroups,
            correction_regs=regs.correction,
            other_regs=regs.other,
            register_file=regs.register_file,
        )

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return (
            Fa4Shape(),
            Threads(),
            TensorMemory(),
            SharedMemory(),
            MaxSmem(),
            WarpRoleRegisters(),
            ResidentBlocks(),
            *self.split_kv.constraints(problem, options),
        )

    # ---- cost --------------------------------------------------------------------------------
    def evaluate(self, ev: Evaluation) -> Perf:
        _, dv = kernel_head_dims(ev.problem)
        return self.split_kv.perf(ev, evaluate, cuda_rates(cuda_device(ev.hardware)), dv)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Equal modelled times: fewer loop iterations, then less shared memory, one CTA
        before a cluster (no cluster launch), two Q tiles before one; then the split-KV
        path's (fewer splits)."""
        cfg, res = ev.cfg, fa4_resources(ev)
        rows = cfg["q_stage"] * cfg["block_m"]
        return [
            tiles_per_head(ev.problem, rows, cfg["block_n"]),
            res.smem_bytes,
            cfg["cta_group"],
            -cfg["q_stage"],
            *self.split_kv.tie_keys(ev),
        ]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        return [*reason_lines(table, i), *self.split_kv.reason_lines(table, i)]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The fa4 sm_100 rules restated for one configuration with scalar arithmetic."""
        sm = cuda_device(hardware).sm
        values = config.as_dict()
        bn, warps, q = values["block_n"], values["num_warps"], values["q_stage"]
        d, dv = kernel_head_dims(problem)
        e = problem.dtype.bytes
        out: list[str] = []
        one = ConfigArrays.from_configs(values, [config])
        if not bool(shape_ok(one, problem)[0]):
            out.append(f"fa4_shape: {SHAPE_RULE}")
        threads = warps * sm.warp_size_threads
        if threads > sm.max_threads_per_block:
            out.append(f"threads: {threads} > {sm.max_threads_per_block}")
        columns = 2 * bn + q * dv
        capacity = sm.tensor_memory_columns or 0
        if columns > capacity:
            out.append(f"tensor_memory: {columns} columns > {capacity}")
        budget = min(sm.smem_per_block_optin_bytes, options.max_smem or (1 << 62))
        smem = self._smem_bytes(values, problem, budget, d, dv, e)
        if smem > sm.smem_per_block_optin_bytes:
            out.append(f"shared_memory: {smem} > {sm.smem_per_block_optin_bytes}")
        if options.max_smem is not None and smem > options.max_smem:
            out.append(f"max_smem: {smem} > {options.max_smem}")
        pool = sm.regs_per_sm // WARPGROUP_THREADS
        others = warps * sm.warp_size_threads // WARPGROUP_THREADS - q - 1
        left = (pool - CORRECTION_REGS - others * OTHER_REGS) // q
        budget = min(left // SETMAXNREG_STEP * SETMAXNREG_STEP, SETMAXNREG_MAX)
        demand = bn + SOFTMAX_FIXED_REGS
        if demand > budget:
            out.append(f"registers: softmax demand {demand} > setmaxnreg budget {budget}")
        launch = min(sm.regs_per_sm // threads, sm.max_regs_per_thread)
        launch = launch // SETMAXNREG_STEP * SETMAXNREG_STEP
        blocks = min(
            occupancy(sm, threads, launch, min(smem, sm.smem_per_block_optin_bytes)).blocks_per_sm,
            1,
        )
        if blocks < max(1, options.min_blocks_per_sm or 1):
            out.append(f"occupancy: {blocks} block(s) per SM")
        out.extend(self.split_kv.check(problem, {**values, **self.derived(values)}))
        return out

    @staticmethod
    def _smem_bytes(
        values: dict[str, int], problem: AttentionProblem, budget: int, d: int, dv: int, e: int
    ) -> int:
        """Shared memory of one configuration, restated: Q and O, the ring derived from the
        budget, the reserve."""
        bm, bn, q, cg = values["block_m"], values["block_n"], values["q_stage"], values["cta_group"]
        s_q, s_o = q * bm * d * e, q * bm * dv * OUTPUT_BYTES
        splits = values.get("num_splits", 1)
        shared = (d == 192 and dv >= 64) or (dv >= 128 and splits > 1)
        q_o = max(s_q, s_o) if shared else s_q + s_o
        if is_hd256(problem):
            return q_o + HD256_KV_STAGES * (bn * HD256_CHUNK * e // cg) + SMEM_RESERVE_BYTES
        per_stage = max(bn * d * e, bn * dv * e) // cg
        stages = min((budget - SMEM_RESERVE_BYTES - q_o) // per_stage, MAX_KV_STAGES)
        ring = max(stages, MIN_KV_STAGES) * per_stage
        if (d, dv) == UNEVEN_DIMS and stages == 2:
            ring = 2 * per_stage + bn * dv * e // cg
        return q_o + ring + SMEM_RESERVE_BYTES


class Fa4Sm100Decode(Fa4Sm100):
    """fa4 decode on sm_100: the same kernel with split-KV and pack-GQA for 1..64 query rows."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-4 decode on sm_100 (the tcgen05 kernel over num_splits ranges of keys "
        "per KV head, a KV head's query heads packed into the 128-row tile, FP32 partials "
        "merged by FA4's combine kernel)"
    )
    split_kv = FA4_SM100_SPLIT_KV.for_decode()
