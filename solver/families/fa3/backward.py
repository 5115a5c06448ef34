"""FlashAttention-3's backward kernel on Hopper (compute capability 9.0), registered as (`fa3`,
backward): the default backward on Hopper, so `solve --phase both` there answers both passes
with fa3.

One producer warpgroup loads K and V once per CTA and streams Q, dO, LSE and dPsum by TMA (Q
in a two-stage ring, dO in `stages_do`); 2 or 3 consumer warpgroups run the five GEMMs of each
query block with wgmma, recompute P from the saved log-sum-exp, keep the dK and dV accumulators
in registers (setmaxnreg 240 or 160 per consumer thread), write P and dS to shared memory (P
stays in registers where dV and dK read it as RS operands), and hand dQ to the producer's
warp through shared memory for a TMA reduce-add into an fp32 accumulator (head dim 256: atomics
from registers). A preprocess kernel computes dPsum = rowsum(dO o O), the LSE in base 2 and
zeroes the accumulator; a postprocess kernel converts it to dQ (and, with GQA, the fp32 dK/dV
accumulators). One CTA per SM; the grid is key blocks x heads x batch, longest first under a
causal mask.

Decision variables (`backward_shape.py`): the tile, the consumer warpgroups (num_warps 12 or
16), each GEMM group's swapAB and warpgroup split, V in registers and the dO and dS stages;
for each tile and warpgroup count the model runs the structure it rates best (the inner
choice, as fa2's warp layouts). Sources: Dao-AILab/flash-attention `hopper/` (commit
0251105a2fb19d2957484b7f023cd8c115286ced): `flash_bwd_launch_template.h` (the kernels and the
helper kernels), `mainloop_bwd_sm90_tma_gmma_ws.hpp`, `flash_bwd_kernel_sm90.h`,
`epilogue_bwd.hpp`, `flash_api.cpp` (`mha_bwd`). Formulas: docs/model.md section 17.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint
from ...cost import Perf, gather_perf, tiles_per_head
from ...errors import FieldViolation
from ...family import kib
from ...hardware import CudaDevice, HardwareSpec, SmLimits
from ...occupancy import OccupancyArrays, occupancy, occupancy_arrays
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import BoolArray, Config, ConfigArrays, IntArray, Param
from ..cuda.backward import CudaBackwardFamily, InnerChoice, backward_fits, inner_rank
from ..cuda.constraints import MaxSmem, ResidentBlocks, SharedMemory, Threads
from ..cuda.resources import CudaResources, cuda_device
from .backward_cost import backward_perf, structure_words
from .backward_resources import (
    SETMAXNREG_BUDGETS,
    ConsumerBackwardRegisters,
    Fa3BackwardResources,
    Fa3BackwardShape,
    consumer_regs,
    fa3_backward_resources,
    register_budgets,
    smem_layout,
)
from .backward_shape import (
    BWD_INNER_PARAMS,
    SHAPE_RULE,
    WARPGROUP_THREADS,
    WARPS_PER_WARPGROUP,
    backward_head_dim,
    backward_params,
    backward_structure,
    fa3_backward_violations,
)

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

Q_RING_STAGES = 2  # the Q/LSE ring (kStages = 2 on sm90): the common field num_stages


class Fa3Backward(CudaBackwardFamily):
    """fa3 backward: FlashAttention-3's warp-specialised backward kernel."""

    name = "fa3"
    input_dtypes = (DType.FP16, DType.BF16)  # mha_bwd is 16-bit
    summary = (
        "FlashAttention-3 backward (K/V block per CTA, Q/dO streamed by TMA, five wgmma GEMMs "
        "on 2-3 consumer warpgroups, setmaxnreg, dQ by TMA reduce-add)"
    )
    alignment_rule = SHAPE_RULE
    helper_words = (
        "preprocess dPsum = rowsum(dO o O), the LSE in base 2, the zeroed dQ accumulator; "
        "postprocess dQ (and GQA dK/dV)"
    )
    inner_params = BWD_INNER_PARAMS
    inner_constraint = "gemm_layout"
    inner_short = "layout"
    max_spill_regs = 0  # setmaxnreg budgets: FA3 sizes its tiles not to spill
    shape_constraint = "fa3_shape"

    # ---- the problem -----------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return fa3_backward_violations(problem, hardware)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """One head dim for Q/K and V: max(head_dim, head_dim_v) rounded up."""
        d = backward_head_dim(problem)
        return d, d

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return backward_params()

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        """block_m, block_n and num_warps as declared; num_stages is the Q ring (2)."""
        return {
            "block_m": cfg["block_m"],
            "block_n": cfg["block_n"],
            "num_warps": cfg["num_warps"],
            "num_stages": np.full(len(cfg), Q_RING_STAGES, dtype=np.int64),
        }

    def label(self, config: Config) -> str:
        """'80x128 w12 swap SdP,dQ split dKV dO2 dS2' (+ ' V-regs'): the GEMM groups computed
        transposed, those whose warpgroups split the sequence side, the stages."""
        c = config.as_dict()
        swaps = [
            n
            for n, p in (("SdP", "sdp_swap_ab"), ("dKV", "dkv_swap_ab"), ("dQ", "dq_swap_ab"))
            if c[p]
        ]
        splits = [
            n
            for n, p in (("SdP", "sdp_split_m"), ("dKV", "dkv_split_n"), ("dQ", "dq_split_m"))
            if c[p]
        ]
        text = (
            f"{c['block_m']}x{c['block_n']} w{c['num_warps']} swap {','.join(swaps) or '-'} "
            f"split {','.join(splits) or '-'} dO{c['stages_do']} dS{c['stages_ds']}"
        )
        return text + (" V-regs" if c["v_in_regs"] else "")

    # ---- shapes and resources ------------------------------------------------------------------
    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        return backward_structure(cfg, backward_head_dim(problem)).ok

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        d = backward_head_dim(problem)
        structure = backward_structure(cfg, d)
        return smem_layout(cfg, d, problem.dtype.bytes, structure, _gqa(problem)).total

    def q_in_registers(self) -> bool:
        return False

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        d = backward_head_dim(problem)
        structure = backward_structure(cfg, d)
        return consumer_regs(cfg, d, problem.dtype.bytes, structure, problem.causal).demand

    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> Fa3BackwardResources:
        """Shared memory, the setmaxnreg split, one CTA per SM, and the cost of the legal
        configurations (the inner choice needs it; the others never rank)."""
        device = cuda_device(hardware)
        sm = device.sm
        d = backward_head_dim(problem)
        elem = problem.dtype.bytes
        structure = backward_structure(cfg, d)
        layout = smem_layout(cfg, d, elem, structure, _gqa(problem))
        regs = consumer_regs(cfg, d, elem, structure, problem.causal)
        w = structure.warpgroups
        threads = np.asarray(WARPGROUP_THREADS * (w + 1), dtype=np.int64)
        producer, consumer = register_budgets(w)
        allocated = np.minimum(regs.demand, consumer)
        launch = np.minimum(sm.max_regs_per_thread, sm.regs_per_sm // threads) // 8 * 8
        # Residency with the launch registers and the shared memory capped at the opt-in
        # maximum: a tile over that maximum breaks shared_memory, not occupancy.
        occ = _occupancy(
            sm, threads, launch, np.minimum(layout.total, sm.smem_per_block_optin_bytes)
        )
        base = CudaResources(
            sm=sm,
            smem_bytes=layout.total,
            threads=threads,
            regs_demand=regs.demand,
            regs_cap=consumer,
            regs_allocated=np.asarray(allocated, dtype=np.int64),
            spill_regs=np.asarray(regs.demand - allocated, dtype=np.int64),
            occupancy=occ,
        )
        legal = np.flatnonzero(structure.ok)
        sub = cfg.take(legal)
        perf = _scatter(
            backward_perf(device, problem, sub, structure.take(legal), d), legal, len(cfg)
        )
        fits = backward_fits(base, options, self.max_spill_regs)
        rank = inner_rank(cfg, self.inner_params, options, structure.ok, fits, perf.time_us)
        values = {f.name: getattr(base, f.name) for f in fields(CudaResources)}
        return Fa3BackwardResources(
            **values,
            inner_rank=rank,
            perf=perf,
            shape_ok=structure.ok,
            warpgroups=w,
            producer_regs=producer,
            smem=layout,
            regs=regs,
            mma_dkv_rs=structure.mma_dkv_rs.astype(np.int64),
            mma_dq_rs=structure.mma_dq_rs.astype(np.int64),
        )

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return (
            Fa3BackwardShape(),
            InnerChoice(self),
            Threads(),
            SharedMemory(),
            MaxSmem(),
            ConsumerBackwardRegisters(),
            ResidentBlocks(),
        )

    # ---- tie-break, reasons, the validator ----------------------------------------------------
    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Fewer iterations (tiles per head), less shared memory, fewer consumer registers,
        then the enumeration order."""
        res = fa3_backward_resources(ev)
        tiles = tiles_per_head(ev.problem, ev.cfg["block_m"], ev.cfg["block_n"])
        return [tiles, res.smem_bytes, res.regs_demand]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        res = fa3_backward_resources(table)
        cfg = table.cfg
        figures = table.perf.figures
        w = int(res.warpgroups[i])
        smem = res.smem
        rs = []
        if res.mma_dkv_rs[i]:
            rs.append("dK/dV read P and dS from registers (Mma_dKV_is_RS)")
        if res.mma_dq_rs[i]:
            rs.append("dQ reads dS from registers (Mma_dQ_is_RS)")
        if cfg["v_in_regs"][i]:
            rs.append("V held in registers for dP")
        regs = res.regs
        return [
            f"{w} consumer warpgroups + 1 producer ({4 * (w + 1)} warps), one CTA per SM; "
            f"setmaxnreg: consumers {res.regs_cap[i]}, producer {res.producer_regs[i]}; "
            f"consumers need about {res.regs_demand[i]} (dK/dV {regs.resident[i]}, S/dP "
            f"phase {regs.sdp_phase[i]}, dQ phase {regs.gemm_phase[i]})",
            f"{structure_words(table, i)}" + (f"; {', '.join(rs)}" if rs else ""),
            f"shared memory {kib(res.smem_bytes[i])} of {kib(res.smem_limit_bytes)}: K/V "
            f"{kib(smem.kv[i])}, Q ring + dO x{cfg['stages_do'][i]} {kib(smem.q_do[i])}, "
            f"P/dS x{cfg['stages_ds'][i]} {kib(smem.p_ds[i])}, dQ staging {kib(smem.dq[i])}, "
            f"LSE/dPsum {kib(smem.stats[i])}",
            f"per iteration: wgmma {figures['iteration_tensor_cycles'][i]:.0f} cycles, shared "
            f"memory {figures['iteration_smem_cycles'][i]:.0f}, exposed elementwise "
            f"{figures['iteration_elementwise_cycles'][i]:.0f}; tensor cores busy "
            f"{table.perf.mma_utilization[i]:.0%}",
            f"main kernel {figures['main_kernel_us'][i]:.1f} us + helper kernels "
            f"{figures['helper_kernels_us'][i]:.1f} us ({self.helper_words}); dQ reduce-adds "
            f"{figures['dq_reduce_l2_share'][i]:.0%} of the L2 traffic of an iteration",
        ]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The fa3 backward rules for one configuration (`check_all` of it alone)."""
        return self.check_all(hardware, problem, options, [config])[0]

    def check_all(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """The fa3 backward rules for each of `configs`: the layouts, threads, shared memory
        and caps, the setmaxnreg budget, one CTA per SM (the scalar occupancy calculator, per
        configuration) and the inner choice restated; each vectorised rule evaluated once over
        all of them."""
        if not configs:
            return []
        device = cuda_device(hardware)
        sm = device.sm
        cfg = ConfigArrays.from_configs(configs[0].as_dict(), configs)
        tiles = self.check_tiles(device, problem, options, cfg)
        demands = self.regs_demand(cfg, problem)
        inner = self._check_inner(hardware, problem, options, configs)
        need = max(1, options.min_blocks_per_sm or 1)
        out = []
        for k, (problems, threads, smem) in enumerate(tiles):
            warpgroups = int(cfg["num_warps"][k]) // WARPS_PER_WARPGROUP - 1
            budget = SETMAXNREG_BUDGETS[warpgroups][1]
            demand = int(demands[k])
            if demand > budget:
                problems.append(f"registers: consumer demand {demand} > setmaxnreg budget {budget}")
            launch = min(sm.max_regs_per_thread, sm.regs_per_sm // threads) // 8 * 8
            blocks = occupancy(
                sm, threads, launch, min(smem, sm.smem_per_block_optin_bytes)
            ).blocks_per_sm
            if blocks < need:
                problems.append(f"occupancy: {blocks} block(s) per SM")
            out.append(problems + inner[k])
        return out


def _occupancy(
    sm: SmLimits, threads: IntArray, launch: IntArray, smem: IntArray
) -> OccupancyArrays:
    """`occupancy_arrays` of every candidate, evaluated once per distinct (threads, shared
    memory) pair (the launch registers follow from the threads): a few hundred pairs over the
    whole space."""
    key = threads * (int(smem.max(initial=0)) + 1) + smem
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    distinct = occupancy_arrays(sm, threads[first], launch[first], smem[first])
    rows = inverse.reshape(-1)
    return OccupancyArrays(
        **{f.name: getattr(distinct, f.name)[rows] for f in fields(OccupancyArrays)}
    )


def _gqa(problem: AttentionProblem) -> bool:
    return problem.kv_heads_eff != problem.heads


def _scatter(sub: Perf, rows: IntArray, n: int) -> Perf:
    """A Perf over all n configurations from one over the `rows` that tile: the others (never
    legal, never ranked) carry the slowest legal time (a cost must be positive) and zeros."""
    full = gather_perf([(rows, sub)], n)
    outside = np.ones(n, dtype=np.bool_)
    outside[rows] = False
    time_us = full.time_us.copy()
    time_us[outside] = float(sub.time_us.max()) if len(rows) else 1.0
    words = ["not a layout FA3 can tile"] * n
    for i, word in zip(rows.tolist(), sub.bottleneck, strict=True):
        words[i] = word or words[i]
    return replace(full, time_us=time_us, bottleneck=words)
