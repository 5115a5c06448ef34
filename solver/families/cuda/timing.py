"""The SM's timing as every CUDA cost model sees it (forward, backward, fa3, split-KV): how the
pipes of one iteration combine across the resident warps and blocks, what a streamed tile's
load costs, a round of resident blocks, the makespan of the blocks over the SMs, the words for
the dominant cost, the device's rates, and the per-score instruction counts of the online
softmax. Units: cycles are SM clock cycles at the boost clock; bytes are bytes. Formulas and
sources: `docs/model.md` section 5.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...cost import Perf, Waves, first_rule_words, perf
from ...hardware import CudaDevice
from ...model_constants import model_constants
from ...problem import AttentionProblem
from ...space import BoolArray, FloatArray, IntArray
from ...split_kv import UnitRates

# The online softmax's instruction counts per score element (docs/model.md, "Constants"): the
# same for every CUDA cost model (FlashAttention forward, backward, fa3).
ALU_OPS_PER_SCORE = 4.0  # FP32 ops per score element: scale-and-subtract FFMA, max, sum, convert
MASK_OPS_PER_SCORE = 2.0  # index compare + select on a tile that crosses the causal diagonal
DROPOUT_OPS_PER_SCORE = 8.0  # Philox 4x32-10 amortised over 4 outputs, compare and scale
MMA_K = 16  # k of one mma.m16n8k16 step
SUBPARTITIONS_PER_SM = 4  # warp schedulers per SM; each owns 1/4 of the tensor cores


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
    l2_share = l2_bytes_per_clk_per_sm(device)
    dram_share = dram_bytes_per_clk(device) / tp.sm_count
    transfer = tile_bytes * ((1.0 - dram_miss) / l2_share + dram_miss / dram_share)
    latency = (1.0 - dram_miss) * tp.l2_hit_latency_cycles + dram_miss * tp.dram_latency_cycles
    return np.asarray(latency + transfer)


def l2_bytes_per_clk_per_sm(device: CudaDevice) -> float:
    """Achievable L2 read bandwidth per SM when every SM streams (bytes per cycle)."""
    memory = device.memory
    return (
        memory.l2_achievable_fraction
        * memory.l2_bandwidth_bytes_per_clk
        / device.throughput.sm_count
    )


def dram_bytes_per_clk(device: CudaDevice) -> float:
    """Achievable DRAM bandwidth of the whole device, bytes per SM clock cycle."""
    return device.memory.achievable_dram_bytes_per_s / (device.throughput.boost_clock_mhz * 1e6)


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
    l2_share = l2_bytes_per_clk_per_sm(device)
    cycles = np.maximum.reduce([blocks * compute, serial, blocks * l2_bytes / l2_share])
    idle = np.maximum(0.0, cycles - blocks * compute)
    overlap = np.clip(1.0 - idle / tile_load, 0.0, 1.0)
    return cycles, overlap


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
    rules = [
        (dram_bound >= cycles * 0.999, "HBM bandwidth"),
        (waves < 0.5, "too few blocks to fill the SMs"),
        (load_bound, load_words),
    ]
    return first_rule_words(rules, names, np.stack(pipes).argmax(axis=0))


def cuda_rates(device: CudaDevice) -> UnitRates:
    """A CUDA device as the split-KV model sees it: SMs, achievable DRAM and L2 rates."""
    tp, memory = device.throughput, device.memory
    k = model_constants(device)
    clock_hz = tp.boost_clock_mhz * 1e6
    return UnitRates(
        units=tp.sm_count,
        dram_bytes_per_s=memory.achievable_dram_bytes_per_s,
        l2_bytes_per_s=memory.l2_achievable_fraction * memory.l2_bandwidth_bytes_per_clk * clock_hz,
        l2_bytes=memory.l2_bytes,
        l2_round_trip_s=tp.l2_hit_latency_cycles / clock_hz,
        block_start_s=k.block_start_cycles / clock_hz,
        launch_us=k.kernel_launch_us,
    )


def sm_perf(
    problem: AttentionProblem,
    *,
    flops: float,
    time_us: FloatArray,
    clock_hz: float,
    hbm_bytes: FloatArray,
    waves: Waves,
    computed_pairs: FloatArray,
    compute_cycles: FloatArray,
    load_cycles: FloatArray,
    tensor_cycles: FloatArray,
    overlap: FloatArray,
    bottleneck: list[str],
    figures: dict[str, FloatArray],
) -> Perf:
    """`cost.perf` for a model that counts one SM's cycles: its compute, load and tensor-core
    totals (cycles per SM) become microseconds at the clock, and the tensor cores' busy
    fraction of the kernel's time."""
    busy_cycles = time_us * 1e-6 * clock_hz
    return perf(
        problem,
        flops=flops,
        time_us=time_us,
        hbm_bytes=hbm_bytes,
        waves=waves,
        computed_pairs=computed_pairs,
        compute_us=compute_cycles / clock_hz * 1e6,
        load_us=load_cycles / clock_hz * 1e6,
        overlap=overlap,
        matrix_busy=tensor_cycles / busy_cycles,
        bottleneck=bottleneck,
        figures=figures,
    )
