"""The cost model of FlashAttention-style forward kernels on CUDA (fa2, triton): predicted
kernel time of every candidate, with its parts.

Units: cycles are SM clock cycles at the boost clock; bytes are bytes; times in the result are
microseconds. Every formula is written out with its source in `docs/model.md`; the names here
follow that document. In short, per thread block (CTA) and per K/V tile iteration:

    C  = compute cycles of one iteration on the SM's pipes (tensor, shared memory, SFU, ALU),
         the busiest pipe plus the others' remainder divided by the warps that can overlap them
    Lt = cycles to bring one K/V tile from L2/DRAM into shared memory (latency + transfer)
    W  = max(b*C, (C + Lt) / (1 + p), b*bytes/bandwidth)       one round of b resident blocks
    overlap = 1 - idle / Lt, where idle = W - b*C is the SM time no block can compute

and the kernel time is the wave schedule of the blocks' durations over the SMs. The shared
parts (causal work, waves, L2 reuse, DRAM traffic, padding) come from `solver/cost.py`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..cost import (
    LSE_BYTES_PER_ROW,
    Perf,
    Waves,
    causal_iterations,
    forward_hbm_bytes,
    kv_reuse,
    padding_waste,
    wave_schedule,
)
from ..family import pow2_range
from ..hardware import CudaDevice
from ..model_constants import model_constants
from ..problem import AttentionProblem
from ..space import BoolArray, ConfigArrays, FloatArray, IntArray, Param, ceil_div
from .cuda import CudaFamily, CudaResources, cuda_device

if TYPE_CHECKING:
    from ..candidates import Evaluation

# ---- model constants (docs/model.md, "Constants") -------------------------------------------
# The free ones below (and cost.BLOCK_START_CYCLES, cost.KERNEL_LAUNCH_US) are the defaults of
# `model_constants.ModelConstants`; the formulas read them through `model_constants(device)`,
# so that a calibrated device (docs/model.md section 15) can replace them.
ALU_OPS_PER_SCORE = 4.0  # FP32 ops per score element: scale-and-subtract FFMA, max, sum, convert
MASK_OPS_PER_SCORE = 2.0  # index compare + select on a tile that crosses the causal diagonal
DROPOUT_OPS_PER_SCORE = 8.0  # Philox 4x32-10 amortised over 4 outputs, compare and scale
BARRIERS_PER_ITERATION = 2  # __syncthreads before reusing the K and the V buffer
MMA_K = 16  # k of one mma.m16n8k16 step
SUBPARTITIONS_PER_SM = 4  # warp schedulers per SM; each owns 1/4 of the tensor cores
# Dependent-latency chain of one iteration of one warp (docs/model.md, "Latency chain"):
# S = QK^T accumulates d/16 chained mma k-steps, the softmax waits on quad shuffles for the
# row max and sum and on the MUFU for exp, then O += PV accumulates block_n/16 chained k-steps.
MMA_LATENCY_CYCLES = 33  # dependent HMMA.16816.F32 issue-to-result
SOFTMAX_CHAIN_CYCLES = (
    400  # row max + row sum (dependent FP32 ops, 2 quad shuffles each), exp, cp.async wait
)
INSTRUCTION_LEVEL_PARALLELISM = 8.0  # independent mma tiles and rows one warp interleaves
# Instructions every warp issues per K/V iteration whatever the tile: loop counter and branch,
# K/V pointer and predicate updates, the cp.async commit/wait pair, two barriers, the row max
# and row sum butterflies' bookkeeping and the O rescale's setup (estimate; docs/model.md,
# "Per-iteration fixed cost"). They occupy the warp schedulers' issue slots.
ITERATION_FIXED_INSTRUCTIONS = 40


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


NO_EXTRAS = KernelExtras()


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
    # The free constants (defaults: the module constants above; a calibration's fitted ones).
    k = model_constants(device)
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
    if problem.dropout > 0:
        alu_ops = alu_ops + scores * DROPOUT_OPS_PER_SCORE
    alu = alu_ops / tp.fp32_ops_per_clk_per_sm

    issue = warps * k.iteration_fixed_instructions / SUBPARTITIONS_PER_SM
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


def combine_pipes(
    pipes: Sequence[FloatArray],
    warps: FloatArray,
    blocks: FloatArray,
    ilp: FloatArray,
    chain_cycles: FloatArray | float,
) -> tuple[FloatArray, FloatArray]:
    """Cycles of one iteration of one block when `blocks` blocks of `warps` warps share the
    SM (`C`, docs/model.md 5.1), and the fraction of the warp schedulers that have a warp.

    Warps of one block run in lock-step (barriers every iteration): they reach the tensor
    cores and the softmax at the same time. Pipes overlap, and dependency latency hides,
    only across blocks: `streams` is the number of distinct blocks per warp scheduler. The
    busiest pipe sets the pace; the others' remainder is divided by the streams times the
    independent instruction streams (`ilp`) one warp interleaves; the dependent-latency
    `chain_cycles` of one iteration hides behind the other streams.
    """
    warps_per_scheduler = blocks * warps / SUBPARTITIONS_PER_SM
    active_fraction = np.minimum(1.0, warps_per_scheduler)
    streams = np.maximum(
        1.0, blocks * np.minimum(warps, SUBPARTITIONS_PER_SM) / SUBPARTITIONS_PER_SM
    )
    latency_exposed = 1.0 / streams
    serial = 1.0 / (streams * ilp)
    stacked = np.stack(pipes)
    busiest = stacked.max(axis=0)
    rest = stacked.sum(axis=0) - busiest
    chain = chain_cycles * latency_exposed
    compute = (busiest + rest * serial) / active_fraction + chain
    return compute, active_fraction


def tile_load_cycles(
    device: CudaDevice, tile_bytes: FloatArray, dram_miss: FloatArray
) -> FloatArray:
    """Cycles to bring one streamed tile from L2 (or, for the `dram_miss` share, DRAM) into
    the SM: the access latency plus the transfer at the SM's share of the bandwidth (`Lt`)."""
    tp = device.throughput
    l2_share = _l2_bytes_per_clk_per_sm(device)
    dram_share = _dram_bytes_per_clk(device) / tp.sm_count
    transfer = tile_bytes * ((1.0 - dram_miss) / l2_share + dram_miss / dram_share)
    latency = (1.0 - dram_miss) * tp.l2_hit_latency_cycles + dram_miss * tp.dram_latency_cycles
    return np.asarray(latency + transfer)


def _l2_bytes_per_clk_per_sm(device: CudaDevice) -> float:
    """Achievable L2 read bandwidth per SM when every SM streams (bytes per cycle)."""
    memory = device.memory
    return (
        memory.l2_achievable_fraction
        * memory.l2_bandwidth_bytes_per_clk
        / device.throughput.sm_count
    )


def _dram_bytes_per_clk(device: CudaDevice) -> float:
    """Achievable DRAM bandwidth of the whole device, bytes per SM clock cycle."""
    return device.memory.achievable_dram_bytes_per_s / (device.throughput.boost_clock_mhz * 1e6)


def _round_cycles(
    it: _Iteration, blocks: FloatArray, prefetch: IntArray, device: CudaDevice
) -> tuple[FloatArray, FloatArray]:
    """Cycles for each of `blocks` resident blocks to finish one iteration, and the overlap."""
    p = prefetch.astype(np.float64)
    serial = (it.compute + it.tile_load) / (1.0 + p)
    return round_cycles(it.compute, serial, it.tile_bytes, it.tile_load, blocks, device)


def round_cycles(
    compute: FloatArray,
    serial: FloatArray,
    l2_bytes: FloatArray,
    tile_load: FloatArray,
    blocks: FloatArray,
    device: CudaDevice,
) -> tuple[FloatArray, FloatArray]:
    """`W`: the SM time for each of `blocks` resident blocks to finish one iteration (their
    compute, or one block's `serial` time of compute plus the load it cannot hide, or the
    SM's share of L2 bandwidth for `l2_bytes` per block and iteration), and the share of
    each tile load (`tile_load` cycles) that compute hides (docs/model.md 5.2)."""
    l2_share = _l2_bytes_per_clk_per_sm(device)
    cycles = np.maximum.reduce([blocks * compute, serial, blocks * l2_bytes / l2_share])
    idle = np.maximum(0.0, cycles - blocks * compute)
    overlap = np.clip(1.0 - idle / tile_load, 0.0, 1.0)
    return cycles, overlap


def tile_params(num_stages: Param) -> tuple[Param, ...]:
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
    through shared memory, online softmax. fa2 and triton differ in the hooks below."""

    @abstractmethod
    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        """Iterations of compute available to hide one K/V tile load (0 = none)."""

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
        """What the family adds to the forward loop's costs (none by default)."""
        return NO_EXTRAS

    def evaluate(self, ev: Evaluation) -> Perf:
        """Predicted time and its components for every configuration."""
        assert isinstance(ev.res, CudaResources)
        return _evaluate(self, cuda_device(ev.hardware), ev.problem, ev.cfg, ev.res)


def _evaluate(
    family: FlashForwardFamily,
    device: CudaDevice,
    problem: AttentionProblem,
    cfg: ConfigArrays,
    res: CudaResources,
) -> Perf:
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

    # ---- iterations per block: all of K/V, or the causal triangle ----------------------
    if problem.causal:
        total_iters, diag_iters = causal_iterations(n_m, bm, bn, n_kv, sk - sq)
        max_iters = n_kv.astype(np.float64)
    else:
        total_iters = (n_m * n_kv).astype(np.float64)
        diag_iters = np.zeros_like(total_iters)
        max_iters = n_kv.astype(np.float64)
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
    it = _iteration_cycles(family, device, problem, cfg, blocks, res.spill_regs, dram_miss, extras)
    prefetch = family.prefetch_iterations(cfg)
    round_full, overlap = _round_cycles(it, blocks.astype(np.float64), prefetch, device)

    dram_share = _dram_bytes_per_clk(device) / n_sm
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
    round_last, _ = _round_cycles(it, last_blocks, prefetch, device)
    diag_mean = diag_iters / n_m
    if problem.causal:
        work = heads_total * duration(total_iters, diag_iters, round_full)
        longest = duration(max_iters, np.minimum(diag_mean * 2, max_iters), round_last)
        cycles = makespan_cycles(True, ctas, slots, waves, work, longest, longest, longest)
    else:
        full = duration(mean_iters, diag_mean, round_full)
        last = duration(mean_iters, diag_mean, round_last)
        cycles = makespan_cycles(False, ctas, slots, waves, full * ctas, last, full, last)

    dram_bound_cycles = hbm_bytes / _dram_bytes_per_clk(device)
    cycles = np.maximum(cycles, dram_bound_cycles)
    time_us = cycles / clock_hz * 1e6 + k.kernel_launch_us

    computed_pairs = (n_m * cfg.block_m).astype(np.float64) * (n_kv * cfg.block_n)
    if problem.causal:
        computed_pairs = total_iters * bm * bn

    busy_cycles = time_us * 1e-6 * clock_hz
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
    return Perf(
        time_us=time_us,
        tflops=problem.flops / (time_us * 1e-6) / 1e12,
        compute_us=compute_total / clock_hz * 1e6,
        load_us=load_total / clock_hz * 1e6,
        overlap=overlap,
        arithmetic_intensity=problem.flops / hbm_bytes,
        hbm_bytes=hbm_bytes,
        waves=waves.exact,
        tail_efficiency=waves.tail_efficiency,
        padding_waste=padding_waste(problem, computed_pairs),
        mma_utilization=np.clip(tensor_total / busy_cycles, 0.0, 1.0),
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


def makespan_cycles(
    causal: bool,
    ctas: IntArray,
    slots: IntArray,
    waves: Waves,
    work: FloatArray,
    longest: FloatArray,
    full: FloatArray,
    last: FloatArray,
) -> FloatArray:
    """Cycles until the last of `ctas` blocks ends on `slots` places (docs/model.md 5.3).

    Causal (blocks of unequal length, scheduled dynamically): the longest block, or the total
    `work` spread over the slots plus half a mean block (Graham's list-scheduling bound with
    the expected ragged end), whichever is longer. Otherwise (equal blocks): full waves of
    blocks lasting `full` and a last wave of blocks lasting `last` (fewer blocks share the SM
    there)."""
    if causal:
        spread = work / slots + 0.5 * (work / ctas)
        return np.asarray(np.where(ctas > slots, np.maximum(spread, longest), longest))
    return np.asarray((waves.count - 1) * full + last)


def bottleneck_words(
    pipes: Sequence[FloatArray],
    names: Sequence[str],
    load_words: str,
    load_bound: BoolArray,
    cycles: FloatArray,
    dram_bound: FloatArray,
    waves: FloatArray,
) -> list[str]:
    """The dominant cost of each candidate in words: HBM bandwidth when the DRAM floor sets
    the time, too few blocks under half a wave, `load_words` where a round has idle time
    (`load_bound`), otherwise the name of the busiest pipe."""
    busiest = np.stack(pipes).argmax(axis=0)
    k = len(names)
    words = np.array([*names, "HBM bandwidth", "too few blocks to fill the SMs", load_words])
    code = np.where(
        dram_bound >= cycles * 0.999,
        k,
        np.where(waves < 0.5, k + 1, np.where(load_bound, k + 2, busiest)),
    )
    return [str(word) for word in words[code]]
