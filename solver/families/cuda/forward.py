"""FlashAttention-style forward kernels on CUDA (fa2, triton, flashinfer): the family that
states them (`FlashForwardFamily`: its tile, its hooks, and its split-KV path held as a
`split_kv.SplitKv`), and the cost model: the predicted kernel time of every candidate, with its
parts.

Units: cycles are SM clock cycles at the boost clock; bytes are bytes; times in the result are
microseconds. Every formula is written out with its source in `docs/model.md`; the names here
follow that document. In short, per thread block (CTA) and per K/V tile iteration:

    C  = compute cycles of one iteration on the SM's pipes (tensor, shared memory, SFU, ALU),
         the busiest pipe plus the others' remainder divided by the warps that can overlap them
    Lt = cycles to bring one K/V tile from L2/DRAM into shared memory (latency + transfer)
    W  = max(b*C, (C + Lt) / (1 + p), b*bytes/bandwidth)       one round of b resident blocks
    overlap = 1 - idle / Lt, where idle = W - b*C is the SM time no block can compute

and the kernel time is the wave schedule of the blocks' durations over the SMs. The shared
parts (causal work, waves, L2 reuse, DRAM traffic, padding) come from `solver/cost.py`, the
SM's timing from `timing.py`; a split-KV problem runs this model on each (num_splits,
pack_gqa) group's transformed problem (`split_kv.py`).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ...constraints import Constraint
from ...cost import (
    LSE_BYTES_PER_ROW,
    Perf,
    causal_iterations,
    forward_hbm_bytes,
    kv_reuse,
    wave_schedule,
)
from ...errors import FieldViolation
from ...family import pow2_range
from ...hardware import CudaDevice, HardwareSpec
from ...model_constants import model_constants
from ...problem import AttentionProblem, SolveOptions
from ...space import Config, ConfigArrays, FloatArray, IntArray, Param, ceil_div
from ...split_kv import SplitKv, paged_lookup_cycles
from .constraints import cuda_resources
from .family import CudaFamily
from .resources import CudaResources, cuda_device
from .timing import (
    ALU_OPS_PER_SCORE,
    DROPOUT_OPS_PER_SCORE,
    MASK_OPS_PER_SCORE,
    MMA_K,
    SUBPARTITIONS_PER_SM,
    bottleneck_words,
    combine_pipes,
    cuda_rates,
    dram_bytes_per_clk,
    makespan_cycles,
    round_cycles,
    sm_perf,
    tile_load_cycles,
)

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# ---- model constants (docs/model.md, "Constants") ------------------------------------------
# The free ones (instruction-level parallelism, per-iteration instructions, the latency chain's
# parts, block start, launch) are `ModelConstants` fields only: the formulas read them through
# `model_constants(device)`, so that a calibrated device (docs/model.md section 15) replaces
# every use.
BARRIERS_PER_ITERATION = 2  # __syncthreads before reusing the K and the V buffer


@dataclass(frozen=True)
class KernelExtras:
    """Costs a family adds to the FlashAttention forward loop; all zero for fa2 and triton, so
    their results are unchanged. A split-KV or paged family adds page-table lookups to each
    tile load; flashinfer adds the Q re-reads of warps laid out along KV and the merge of their
    softmax states (docs/model.md, sections 13 and 14)."""

    smem_bytes_per_iteration: FloatArray | float = 0.0  # extra shared-memory traffic
    tile_load_cycles: FloatArray | float = 0.0  # extra latency on each K/V tile load
    epilogue_cycles: FloatArray | float = 0.0  # extra cycles once per block, at its end
    chain_cycles: FloatArray | float = 0.0  # change to one iteration's dependent-latency chain
    alu_ops_per_score: FloatArray | float = 0.0  # FP32 ops a score/mask modification adds


NO_EXTRAS = KernelExtras()


@dataclass(frozen=True)
class KvIterations:
    """K/V iterations of a kernel's blocks (arrays over candidates): `total` over all blocks of
    one head, `diagonal` those that apply a mask (counted with its cost relative to the causal
    mask's), `longest` the most one block runs, and whether the work is uneven across blocks
    the way a causal triangle is (`imbalanced`, the makespan's longest-block-last case) and
    whether blocks skip iterations at all (`masked`: the computed pairs are the iterations');
    `partial` the iterations that apply a mask, unweighted (`diagonal` where the mask is the
    causal one)."""

    total: FloatArray
    diagonal: FloatArray
    longest: FloatArray
    imbalanced: bool
    masked: bool
    partial: FloatArray


def causal_or_full_iterations(
    problem: AttentionProblem, n_m: IntArray, n_kv: IntArray, bm: FloatArray, bn: FloatArray
) -> KvIterations:
    """All of K/V for every query block, or the causal triangle (`cost.causal_iterations`)."""
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    if problem.causal:
        total_iters, diag_iters = causal_iterations(n_m, bm, bn, n_kv, sk - sq)
        return KvIterations(
            total_iters, diag_iters, n_kv.astype(np.float64), True, True, diag_iters
        )
    total_iters = (n_m * n_kv).astype(np.float64)
    none = np.zeros_like(total_iters)
    return KvIterations(total_iters, none, n_kv.astype(np.float64), False, False, none)


@dataclass(frozen=True)
class _Iteration:
    """Cycle counts of one K/V iteration of one block (arrays over candidates)."""

    compute: FloatArray  # C
    tensor: FloatArray
    smem: FloatArray
    sfu: FloatArray
    alu: FloatArray
    issue: FloatArray  # issue slots of the per-iteration fixed instructions
    tile_load: FloatArray  # Lt
    tile_bytes: FloatArray
    mask_extra: FloatArray  # extra ALU cycles on a diagonal tile


def _iteration_cycles(
    family: FlashForwardFamily,
    device: CudaDevice,
    problem: AttentionProblem,
    cfg: ConfigArrays,
    resident_blocks: IntArray,
    spill_regs: IntArray,
    dram_miss: FloatArray,
    extras: KernelExtras = NO_EXTRAS,
) -> _Iteration:
    sm, tp = device.sm, device.throughput
    k = model_constants(device)  # the free constants: the defaults, or a calibration's
    d, dv = family.kernel_head_dims(problem)
    elem = problem.dtype.bytes
    bm = cfg.block_m.astype(np.float64)
    bn = cfg.block_n.astype(np.float64)
    warps = cfg.num_warps.astype(np.float64)
    blocks = np.maximum(resident_blocks, 1).astype(np.float64)

    tensor_rate = family.matrix_flops_per_clk_per_sm(cfg, device, elem) * k.matrix_efficiency
    tensor = 2.0 * bm * bn * (d + dv) / tensor_rate

    kv_tile_bytes = bn * (d + dv) * elem
    q_reread = 0.0 if family.q_in_registers() else 1.0
    readers = family.tile_readers(cfg, device)
    smem_bytes = readers * kv_tile_bytes + q_reread * bm * d * elem + kv_tile_bytes
    smem_bytes = smem_bytes + extras.smem_bytes_per_iteration
    spill_bytes = spill_regs * 4.0 * 2.0 * warps * sm.warp_size_threads
    smem = (smem_bytes + spill_bytes) / tp.smem_bandwidth_bytes_per_clk_per_sm

    scores = bm * bn
    sfu = scores / tp.sfu_ops_per_clk_per_sm
    alu_ops = scores * ALU_OPS_PER_SCORE + bm * dv
    alu_ops = alu_ops + scores * extras.alu_ops_per_score  # + 0 unless the family adds some
    if problem.dropout > 0:
        alu_ops = alu_ops + scores * DROPOUT_OPS_PER_SCORE
    alu = alu_ops / tp.fp32_ops_per_clk_per_sm

    issue = warps * k.iteration_fixed_instructions / SUBPARTITIONS_PER_SM
    # The dependent-latency chain of one iteration of one warp (docs/model.md, "Latency
    # chain"): S = QK^T accumulates d/16 chained mma k-steps, the softmax waits on quad
    # shuffles for the row max and sum and on the MUFU for exp, then O += PV accumulates
    # block_n/16 chained k-steps.
    chain_cycles = (
        k.mma_latency_cycles * (d + bn) / MMA_K
        + k.softmax_chain_cycles
        + BARRIERS_PER_ITERATION * tp.barrier_cycles
        + extras.chain_cycles
    )
    compute, active_fraction = combine_pipes(
        [tensor, smem, sfu, alu, issue],
        warps,
        blocks,
        family.pipe_overlap(cfg, device),
        chain_cycles,
    )
    mask_extra = scores * MASK_OPS_PER_SCORE / tp.fp32_ops_per_clk_per_sm / active_fraction
    return _Iteration(
        compute=compute,
        tensor=tensor,
        smem=smem,
        sfu=sfu,
        alu=alu,
        issue=issue,
        tile_load=tile_load_cycles(device, kv_tile_bytes, dram_miss) + extras.tile_load_cycles,
        tile_bytes=kv_tile_bytes,
        mask_extra=mask_extra,
    )


def standard_tile_params(num_stages: Param) -> tuple[Param, ...]:
    """The decision variables of a FlashAttention forward tile: power-of-two BLOCK_M and
    BLOCK_N from 16 to 256, 1 to 16 warps, and the family's pipeline depths."""
    return (
        Param("block_m", pow2_range(16, 256), "query rows per thread block (BLOCK_M)"),
        Param("block_n", pow2_range(16, 256), "key/value rows per inner-loop iteration (BLOCK_N)"),
        Param("num_warps", pow2_range(1, 16), "warps per thread block"),
        num_stages,
    )


class FlashForwardFamily(CudaFamily):
    """A FlashAttention-style forward kernel on CUDA: Q tile resident, K/V tiles streamed
    through shared memory, online softmax. fa2, triton and flashinfer differ in the hooks
    below and in the split-KV path they hold (`split_kv`): its decisions are added to the
    tile's only against a longer K/V or in the decode registration, so the plain forward
    space and answers are the tile's alone."""

    split_kv: ClassVar[SplitKv]

    # ---- what a family states ------------------------------------------------------------
    @abstractmethod
    def kernel_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        """The kernel's own rules (compute capability, dtypes, head dims)."""

    @abstractmethod
    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        """The tile's decision variables (the split-KV ones are added by `split_kv`)."""

    def spill_traffic_regs(self, spill_regs: IntArray) -> IntArray:
        """Registers per thread stored and reloaded each iteration for `spill_regs` spilled
        ones (by default each spilled register once)."""
        return spill_regs

    @abstractmethod
    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        """Iterations of compute available to hide one K/V tile load (0 = none)."""

    def iteration_round(
        self,
        compute: FloatArray,
        tile_load: FloatArray,
        tile_bytes: FloatArray,
        blocks: FloatArray,
        cfg: ConfigArrays,
        device: CudaDevice,
    ) -> tuple[FloatArray, FloatArray]:
        """`W`, the cycles for each of `blocks` resident blocks to finish one iteration of
        `compute` cycles whose K/V tile takes `tile_load` cycles, and the share of each load
        hidden (docs/model.md 5.2): one block's serial time with `prefetch_iterations` tiles
        in flight is (C + Lt) / (1 + p)."""
        p = self.prefetch_iterations(cfg).astype(np.float64)
        serial = (compute + tile_load) / (1.0 + p)
        return round_cycles(compute, serial, tile_bytes, tile_load, blocks, device)

    def tile_readers(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """How many times each K/V tile is read from shared memory per iteration: once per
        warp for warp-level mma.sync (each warp loads its own B fragments)."""
        return cfg.num_warps.astype(np.float64)

    def matrix_flops_per_clk_per_sm(
        self, cfg: ConfigArrays, device: CudaDevice, dtype_bytes: int
    ) -> FloatArray:
        """FLOP per cycle per SM the kernel's matrix instruction reaches: the dense tensor
        peak times the mma.sync efficiency (Ampere-style warp-level MMA)."""
        peak = device.throughput.tensor_flops_per_clk_per_sm(dtype_bytes)
        return np.full(len(cfg), peak * device.throughput.mma_sync_efficiency)

    def matrix_unit(self, device: CudaDevice) -> str:
        """What runs the GEMMs, in the words of the bottleneck."""
        return "tensor cores"

    def pipe_overlap(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """How many independent instruction streams one warp interleaves across pipes: the
        other pipes' work overlaps the busiest one by this factor within a block."""
        return np.full(len(cfg), model_constants(device).instruction_level_parallelism)

    def kernel_extras(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> KernelExtras:
        """What the family adds to the forward loop's costs: by default the page-table lookups
        of a paged cache on each tile load (none for a contiguous one)."""
        lookups = paged_lookup_cycles(
            cfg, cfg.block_n, float(device.throughput.l2_hit_latency_cycles)
        )
        return KernelExtras(tile_load_cycles=lookups)

    def forward_perf(
        self, device: CudaDevice, problem: AttentionProblem, cfg: ConfigArrays, res: CudaResources
    ) -> Perf:
        """The forward model of `cfg` on `problem` (a transformed one on the split path)."""
        return forward_perf(self, device, problem, cfg, res)

    # ---- the family interface, the split-KV path delegated to `split_kv` --------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return [
            *self.kernel_violations(problem, hardware),
            *self.split_kv.problem_violations(problem),
        ]

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        """The tile parameters and, where declared, num_splits and pack_gqa."""
        return self.split_kv.params(problem, hardware, self.tile_params(problem, hardware), self)

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        return self.split_kv.request_params(self.name, self.params(problem, hardware), options)

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> tuple[Constraint, ...]:
        return (
            *super().constraints(hardware, problem, options),
            *self.split_kv.constraints(problem, options),
        )

    def evaluate(self, ev: Evaluation) -> Perf:
        """Predicted time and its components for every configuration."""
        device = cuda_device(ev.hardware)

        def forward(sub: Evaluation) -> Perf:
            return self.forward_perf(device, sub.problem, sub.cfg, cuda_resources(sub))

        _, dv = self.kernel_head_dims(ev.problem)
        return self.split_kv.perf(ev, forward, cuda_rates(device), dv)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        return [*super().tie_keys(ev), *self.split_kv.tie_keys(ev)]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        return [*super().reason_lines(table, i), *self.split_kv.reason_lines(table, i)]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        values = config.as_dict()
        fields = {**values, **self.derived(values)}
        return [
            *super().check(hardware, problem, options, config),
            *self.split_kv.check(problem, fields),
        ]

    def check_all(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """`check` of each configuration, the CUDA rules evaluated once over all of them
        (`forward_checks`), unless a subclass states more rules in its own `check`."""
        if type(self).check is not FlashForwardFamily.check or not configs:
            return super().check_all(hardware, problem, options, configs)
        return self.forward_checks(hardware, problem, options, configs)

    def forward_checks(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """What `FlashForwardFamily.check` says of each of `configs`, the CUDA rules evaluated
        once over all of them (`cuda_checks`)."""
        if not configs:
            return []
        out = []
        for config, found in zip(
            configs, self.cuda_checks(hardware, problem, options, configs), strict=True
        ):
            values = config.as_dict()
            fields = {**values, **self.derived(values)}
            out.append([*found, *self.split_kv.check(problem, fields)])
        return out


def forward_perf(
    family: FlashForwardFamily,
    device: CudaDevice,
    problem: AttentionProblem,
    cfg: ConfigArrays,
    res: CudaResources,
    iterations: KvIterations | None = None,
    mod_ops_per_score: float = 0.0,
) -> Perf:
    """Predicted time and its components for every configuration of `family` (model.md 5).
    `iterations`: the blocks' K/V iterations when the kernel skips blocks by a block mask
    (default: all of K/V, or the causal triangle); `mod_ops_per_score`: FP32 instructions a
    score modification adds per score element."""
    tp = device.throughput
    k = model_constants(device)
    d, dv = family.kernel_head_dims(problem)
    elem = problem.dtype.bytes
    n_sm = tp.sm_count
    clock_hz = tp.boost_clock_mhz * 1e6
    bm = cfg.block_m.astype(np.float64)
    bn = cfg.block_n.astype(np.float64)
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    heads_total = problem.batch * problem.heads
    blocks = np.maximum(res.occupancy.blocks_per_sm, 1)

    n_m = ceil_div(sq, cfg.block_m)
    n_kv = ceil_div(sk, cfg.block_n)
    ctas = n_m * heads_total
    slots = blocks * n_sm

    # ---- iterations per block: all of K/V, the causal triangle, or the family's mask ----
    iters = iterations or causal_or_full_iterations(problem, n_m, n_kv, bm, bn)
    total_iters, diag_iters, max_iters = iters.total, iters.diagonal, iters.longest
    mean_iters = total_iters / n_m

    # ---- DRAM traffic: Q and O once, K/V once per cohort of in-step blocks -----------
    kv_head_bytes = float(sk) * (d + dv) * elem
    tile_bytes = bn * (d + dv) * elem
    reuse = kv_reuse(
        problem, kv_head_bytes, tile_bytes, n_m, total_iters / n_kv, slots, device.memory.l2_bytes
    )
    dram_miss = reuse.dram_fraction
    hbm_bytes = forward_hbm_bytes(problem, d, dv, reuse.dram_reads_per_kv_head)

    # ---- one iteration, one round of resident blocks ----------------------------------
    extras = family.kernel_extras(cfg, problem, device)
    if mod_ops_per_score:
        extras = replace(extras, alu_ops_per_score=mod_ops_per_score)
    spill = family.spill_traffic_regs(res.spill_regs)
    it = _iteration_cycles(family, device, problem, cfg, blocks, spill, dram_miss, extras)
    round_full, overlap = family.iteration_round(
        it.compute, it.tile_load, it.tile_bytes, blocks.astype(np.float64), cfg, device
    )

    dram_share = dram_bytes_per_clk(device) / n_sm
    prologue = (
        k.block_start_cycles + tp.dram_latency_cycles + bm * d * elem / dram_share + it.tile_load
    )
    epilogue = bm * (dv * elem + LSE_BYTES_PER_ROW) / dram_share + extras.epilogue_cycles

    def duration(iters: FloatArray, diag: FloatArray, round_cycles: FloatArray) -> FloatArray:
        """Wall cycles one block occupies its slot (sharing the SM with the others)."""
        return prologue + epilogue + iters * round_cycles + diag * it.mask_extra

    # ---- waves over the SMs --------------------------------------------------------------
    waves = wave_schedule(ctas, slots)
    last_ctas = waves.last_wave_ctas.astype(np.int64)
    last_blocks = np.minimum(blocks, ceil_div(last_ctas, n_sm)).astype(np.float64)
    round_last, _ = family.iteration_round(
        it.compute, it.tile_load, it.tile_bytes, last_blocks, cfg, device
    )
    diag_mean = diag_iters / n_m
    if iters.imbalanced:
        work = heads_total * duration(total_iters, diag_iters, round_full)
        longest = duration(max_iters, np.minimum(diag_mean * 2, max_iters), round_last)
        cycles = makespan_cycles(True, ctas, slots, waves, work, longest, longest, longest)
    else:
        full = duration(mean_iters, diag_mean, round_full)
        last = duration(mean_iters, diag_mean, round_last)
        cycles = makespan_cycles(False, ctas, slots, waves, full * ctas, last, full, last)

    dram_bound_cycles = hbm_bytes / dram_bytes_per_clk(device)
    cycles = np.maximum(cycles, dram_bound_cycles)
    time_us = cycles / clock_hz * 1e6 + k.kernel_launch_us

    computed_pairs = (n_m * cfg.block_m).astype(np.float64) * (n_kv * cfg.block_n)
    if iters.masked:
        computed_pairs = total_iters * bm * bn

    tensor_total = heads_total * total_iters * it.tensor / n_sm
    compute_total = heads_total * total_iters * it.compute / np.maximum(blocks, 1) / n_sm
    load_total = heads_total * total_iters * it.tile_load / n_sm / np.maximum(blocks, 1)
    bottleneck = _bottlenecks(
        it,
        round_full,
        blocks.astype(np.float64),
        cycles,
        dram_bound_cycles,
        waves.exact,
        family.matrix_unit(device),
    )
    return sm_perf(
        problem,
        flops=problem.flops,
        time_us=time_us,
        clock_hz=clock_hz,
        hbm_bytes=hbm_bytes,
        waves=waves,
        computed_pairs=computed_pairs,
        compute_cycles=compute_total,
        load_cycles=load_total,
        tensor_cycles=tensor_total,
        overlap=overlap,
        bottleneck=bottleneck,
        figures={
            "iteration_compute_cycles": it.compute,
            "iteration_tensor_cycles": it.tensor,
            "iteration_smem_cycles": it.smem,
            "iteration_sfu_cycles": it.sfu,
            "iteration_alu_cycles": it.alu,
            "iteration_issue_cycles": it.issue,
            "tile_load_cycles": it.tile_load,
            "kv_dram_fraction": dram_miss,
        },
    )


def _bottlenecks(
    it: _Iteration,
    round_cycles: FloatArray,
    blocks: FloatArray,
    cycles: FloatArray,
    dram_bound: FloatArray,
    waves: FloatArray,
    matrix_unit: str,
) -> list[str]:
    """The dominant cost of each candidate, in words used by the reasons."""
    return bottleneck_words(
        [it.tensor, it.smem, it.sfu, it.alu, it.issue],
        (
            matrix_unit,
            "shared-memory bandwidth",
            "softmax exp (SFU)",
            "FP32 softmax math",
            "per-iteration overhead",
        ),
        "K/V load latency",
        round_cycles > blocks * it.compute * 1.0001,
        cycles,
        dram_bound,
        waves,
    )
