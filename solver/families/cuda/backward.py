"""What the CUDA backward families (fa2, triton) share: the backward FLOPs, one iteration of a
backward loop on the SM's pipes, the L2 reuse of the streamed operand, the bandwidth-bound
helper kernels, the register tolerance and the reasons.

A backward kernel keeps one block of rows resident (FlashAttention-2: a K/V block of block_n
keys) and streams tiles of the other operand past it (Q, dO, LSE and D = rowsum(dO o O) in
tiles of block_m queries), recomputing P from the saved log-sum-exp. The hardware terms are the
forward model's (`timing.py`: pipes, latency hiding, tile loads, rounds of resident blocks,
waves, the launch floor); what differs is the work of an iteration (five GEMMs instead of two),
the operand that streams, and the kernels around the main one. Formulas, units and sources:
docs/model.md section 12.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ...candidates import evaluation
from ...constraints import Constraint, ConstraintKind, Rule
from ...cost import KvReuse, Perf, kv_reuse
from ...family import kib
from ...hardware import CudaDevice, HardwareSpec
from ...model_constants import model_constants
from ...problem import AttentionProblem, Phase, SolveOptions
from ...space import BoolArray, Config, ConfigArrays, FloatArray, IntArray
from .constraints import Alignment, MaxSmem, Registers, ResidentBlocks, SharedMemory, Threads
from .family import CudaFamily
from .resources import WARP_LANES, CudaResources, cuda_device
from .timing import (
    MASK_OPS_PER_SCORE,
    SUBPARTITIONS_PER_SM,
    combine_pipes,
    tile_load_cycles,
)

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# ---- constants (docs/model.md 12.6) ----------------------------------------------------------
# Spilled registers per thread tolerated before a configuration is rejected. The backward
# kernel's dK and dV accumulators stay live across the whole loop, and FlashAttention-2 ships
# tiles whose live state alone is near the 255-register limit (d = 192 on sm86 with V in
# registers: dK and dV 96, V 96, the dQ accumulator 48); the compiler spills for them. The
# forward families tolerate 16 (resources.MAX_SPILL_REGS); spills cost shared-memory (L1)
# traffic in the cost either way.
BACKWARD_MAX_SPILL_REGS = 32
# FP32 ops per score element: P = exp2(S*scale - LSE) (one FFMA), dP - D (FADD), P*(dP - D)
# (FMUL), and P and dS converted to fp16 (two F2F, half an op each on paired converts).
BWD_ALU_OPS_PER_SCORE = 4.0
# Instructions every warp issues per iteration whatever the tile: loop control, the Q/dO/LSE/D
# pointer and predicate updates, two cp.async commit/wait pairs, three or four barriers, the
# LSE and D loads (estimate from the loop structure of flash_bwd_kernel.h).
BWD_ITERATION_FIXED_INSTRUCTIONS = 60
# Elementwise part of one iteration's dependent path: exp2 (MUFU), dS, the fp16 converts and
# the P/dS stores to shared memory before the barrier (no row reductions: the LSE and D are
# known; estimate from MUFU ~20 and shared-memory store ~30 cycle latencies).
BWD_ELEMENTWISE_CHAIN_CYCLES = 200
# An fp32 atomic add (RED) is a read-modify-write in the L2 slice: each byte costs about two
# bytes of L2 bandwidth (estimate).
ATOMIC_L2_BYTES_PER_BYTE = 2.0
# Independent instruction streams one warp interleaves across pipes in a backward iteration:
# half the forward's 8 (ModelConstants.instruction_level_parallelism), because the elementwise
# work sits between dependent GEMMs (exp needs S, dS needs dP, and P and dS pass through shared
# memory behind a barrier before dV, dK and dQ). Calibrated on FlashAttention-2's published
# backward throughput (docs/model.md 12.8; values 2, 4 and 8 tried).
BWD_INSTRUCTION_LEVEL_PARALLELISM = 4.0
A_FRAGMENT_REGS_PER_16_ROWS = 4  # one m16k16 fp16 A fragment: 8 halves per thread
B_FRAGMENT_REGS_PER_8_COLUMNS = 2  # one n8k16 fp16 B fragment: 4 halves per thread
BWD_FIXED_OVERHEAD_REGS = 16  # pointers, indices, loop state, predicates
BWD_DROPOUT_PERSISTENT_REGS = 4  # Philox seed and offset, the keep threshold
BWD_DROPOUT_TRANSIENT_REGS = 8  # one Philox 4x32 counter/key and its 4 words while P is made
LSE_D_BYTES_PER_ROW = 8  # the FP32 log-sum-exp and D = rowsum(dO o O) of one query row
# The pipes of a backward iteration after the matrix unit, in the words of the bottleneck.
BACKWARD_PIPE_WORDS = (
    "shared-memory bandwidth",
    "exp recomputation (SFU)",
    "FP32 elementwise math",
    "per-iteration overhead",
)


def backward_flops(problem: AttentionProblem) -> float:
    """Useful backward FLOPs: the five GEMMs S = QK^T (d), dP = dO V^T (dv), dV = P^T dO (dv),
    dK = dS^T Q (d), dQ = dS K (d) over the kept (query, key) pairs: 2 x pairs x (3d + 2dv),
    2.5 times the forward's when d = dv (FlashAttention-2 paper, sec. 4.1)."""
    d, dv = problem.head_dim, problem.head_dim_v_eff
    return problem.flops * (3.0 * d + 2.0 * dv) / (d + dv)


def mma_stage_regs(rows: FloatArray, cols: FloatArray) -> FloatArray:
    """Registers of one k-step's A (rows x 16) and B (16 x cols) fp16 fragments of a warp."""
    return np.asarray(
        A_FRAGMENT_REGS_PER_16_ROWS * np.ceil(np.maximum(rows, 1.0) / 16.0)
        + B_FRAGMENT_REGS_PER_8_COLUMNS * np.ceil(np.maximum(cols, 1.0) / 8.0)
    )


def per_thread(
    elements: FloatArray, warps: FloatArray, bytes_per_element: float = 4.0
) -> FloatArray:
    """32-bit registers per thread for `elements` spread over the block's threads."""
    return np.asarray(np.ceil(elements * bytes_per_element / 4.0 / (warps * WARP_LANES)))


@dataclass(frozen=True)
class LoopIteration:
    """Cycles of one iteration of one block of a backward loop (arrays over candidates)."""

    compute: FloatArray  # C
    tensor: FloatArray
    smem: FloatArray
    sfu: FloatArray
    alu: FloatArray
    issue: FloatArray
    tile_load: FloatArray  # Lt: the streamed tile from L2/DRAM
    tile_bytes: FloatArray
    l2_bytes: FloatArray  # L2 traffic per iteration: the tile plus weighted atomics
    mask_extra: FloatArray  # extra ALU cycles on a tile that crosses the causal diagonal


def loop_iteration(
    device: CudaDevice,
    warps: FloatArray,
    blocks: FloatArray,
    ilp: FloatArray,
    *,
    matrix_flops: FloatArray,
    matrix_rate: FloatArray,
    smem_bytes: FloatArray,
    spill_regs: IntArray,
    scores: FloatArray,
    alu_ops: FloatArray,
    extra_issue: FloatArray,
    chain_cycles: FloatArray,
    tile_bytes: FloatArray,
    atomic_bytes: FloatArray,
    dram_miss: FloatArray,
) -> LoopIteration:
    """One iteration on the SM's pipes, combined as in the forward model (`combine_pipes`):
    tensor = FLOPs / matrix rate; shared memory = operand reads and tile writes (+ spills) at
    the SM's shared-memory bandwidth; SFU = one exp2 per score; ALU = FP32 ops; issue = the
    per-iteration fixed instructions (+ `extra_issue` warp instructions, e.g. atomics)."""
    tp = device.throughput
    spill = spill_regs * 4.0 * 2.0 * warps * device.sm.warp_size_threads
    tensor = matrix_flops / matrix_rate
    smem = (smem_bytes + spill) / tp.smem_bandwidth_bytes_per_clk_per_sm
    sfu = scores / tp.sfu_ops_per_clk_per_sm
    alu = alu_ops / tp.fp32_ops_per_clk_per_sm
    issue = (warps * BWD_ITERATION_FIXED_INSTRUCTIONS + extra_issue) / SUBPARTITIONS_PER_SM
    compute, active = combine_pipes(
        [tensor, smem, sfu, alu, issue], warps, blocks, ilp, chain_cycles
    )
    mask_extra = scores * MASK_OPS_PER_SCORE / tp.fp32_ops_per_clk_per_sm / active
    return LoopIteration(
        compute=compute,
        tensor=tensor,
        smem=smem,
        sfu=sfu,
        alu=alu,
        issue=issue,
        tile_load=tile_load_cycles(device, tile_bytes, dram_miss),
        tile_bytes=tile_bytes,
        l2_bytes=tile_bytes + ATOMIC_L2_BYTES_PER_BYTE * atomic_bytes,
        mask_extra=mask_extra,
    )


def chain(
    k_steps: FloatArray, elementwise: float, barriers: FloatArray | float, device: CudaDevice
) -> FloatArray:
    """Dependent latency of one iteration: chained mma k-steps, the elementwise part and the
    barriers (divided by the resident streams in `combine_pipes`)."""
    return np.asarray(
        model_constants(device).mma_latency_cycles * k_steps
        + elementwise
        + barriers * device.throughput.barrier_cycles
    )


def streamed_reuse(
    problem: AttentionProblem,
    per_query_head: bool,
    head_bytes: float,
    tile_bytes: FloatArray,
    blocks_per_head: IntArray,
    passes_per_head: FloatArray,
    slots: IntArray,
    l2_bytes: int,
) -> KvReuse:
    """DRAM reads of the streamed operand with the L2 reuse of blocks that walk it in step
    (`cost.kv_reuse`, docs/model.md 5.4), the roles of the forward's K/V taken by the operand
    this loop streams. `per_query_head`: the operand belongs to each query head (Q, dO, LSE, D),
    so GQA heads do not share it."""
    owner = problem.model_copy(update={"kv_heads": None}) if per_query_head else problem
    return kv_reuse(
        owner, head_bytes, tile_bytes, blocks_per_head, passes_per_head, slots, l2_bytes
    )


def bandwidth_kernel_us(device: CudaDevice, hbm_bytes: float) -> float:
    """A helper kernel that streams `hbm_bytes` (preprocess, dQ conversion, GQA reduction):
    its DRAM time at the achievable bandwidth plus the launch floor, microseconds."""
    if hbm_bytes <= 0:
        return 0.0
    launch_us = model_constants(device).kernel_launch_us
    return hbm_bytes / device.memory.achievable_dram_bytes_per_s * 1e6 + launch_us


def gqa_reduce_bytes(problem: AttentionProblem, d: int, dv: int) -> float:
    """DRAM bytes of summing dK and dV over the query heads of each KV head (GQA/MQA): the
    backward writes them per query head, then a reduction reads those and writes one per KV
    head (flash_attn's mha_bwd: dk_expanded summed with at::sum_out)."""
    if problem.kv_heads_eff == problem.heads:
        return 0.0
    elem = problem.dtype.bytes
    per_head = float(problem.seq_len_kv_eff) * (d + dv) * elem
    return problem.batch * (problem.heads + problem.kv_heads_eff) * per_head


def preprocess_bytes(problem: AttentionProblem, d: int, dv: int, clear_dq_accum: bool) -> float:
    """DRAM bytes of the preprocessing kernel: read O and dO, write D = rowsum(dO o O) (4 B a
    row), and (FlashAttention-2) zero the fp32 dQ accumulator."""
    elem = problem.dtype.bytes
    rows = float(problem.batch * problem.heads) * problem.seq_len
    return rows * (2.0 * dv * elem + 4.0 + (4.0 * d if clear_dq_accum else 0.0))


class BackwardRegisters(Registers):
    """The register capacity with the backward tolerance of spilled registers."""

    rule = f"estimated registers spill at most {BACKWARD_MAX_SPILL_REGS} per thread"

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [
            Rule("spill_regs", backward_resources(ev).spill_regs, "<=", BACKWARD_MAX_SPILL_REGS)
        ]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = backward_resources(ev)
        return (
            f"{ev.label(i)} wants about {res.regs_demand[i]} registers per thread; with a limit "
            f"of {res.regs_cap[i]} it would spill {res.spill_regs[i]} "
            f"(> {BACKWARD_MAX_SPILL_REGS})"
        )


@dataclass(frozen=True)
class BackwardResources(CudaResources):
    """CudaResources plus the family's inner choice and the cost it was made with."""

    inner_rank: IntArray  # 0: the configuration the family runs for its outer parameters
    perf: Perf


def backward_resources(ev: Evaluation) -> BackwardResources:
    """The evaluation's resources, which a CUDA backward family's are."""
    assert isinstance(ev.res, BackwardResources)
    return ev.res


class InnerChoice(Constraint):
    """Legality: for each choice of the outer parameters, the family runs the inner ones
    (fa2's warp layouts, triton's dQ-loop tile) that its model rates best, unless pinned."""

    kind = ConstraintKind.LEGALITY

    def __init__(self, family: CudaBackwardFamily):
        self.family = family
        self.name = family.inner_constraint
        self.short = family.inner_short
        inner = ", ".join(family.inner_params)
        self.rule = (
            f"{inner}: the choice that fits with the shortest modelled time for the other "
            "parameters (or as pinned)"
        )

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule(f"{self.name}_rank", backward_resources(ev).inner_rank, "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        inner = ", ".join(self.family.inner_params)
        return (
            f"{ev.label(i)} is not the {inner} the model runs for its other parameters "
            f"(pin {inner} with --param to rank it)"
        )


class CudaBackwardFamily(CudaFamily):
    """A FlashAttention-style backward kernel on CUDA (docs/model.md section 12).

    A family names its `inner_params`: declared parameters whose best value follows from the
    others (fa2's three warp layouts, triton's dQ-loop tile). For each choice of the other
    (outer) parameters the domain keeps the inner choice the model rates best among the
    aligned ones (those that fit every capacity limit first, then the shortest modelled time,
    then enumeration order), or the pinned one: ranking every inner variant of a tile would
    fill the answer with near-copies of one tile and make the integer program many times
    larger (docs/model.md 12.5)."""

    phase = Phase.BACKWARD
    max_spill_regs: ClassVar[int | None] = BACKWARD_MAX_SPILL_REGS
    # What the loops stream, in the words of the reasons.
    streamed_words = "Q/dO tile"
    helper_words = "preprocess D = rowsum(dO o O)"
    inner_params: ClassVar[tuple[str, ...]] = ()
    inner_constraint: ClassVar[str] = "inner_choice"
    inner_short: ClassVar[str] = "inner"

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        registers = () if self.max_spill_regs is None else (BackwardRegisters(),)
        return (
            Alignment(self),
            InnerChoice(self),
            Threads(),
            SharedMemory(),
            MaxSmem(),
            *registers,
            ResidentBlocks(),
        )

    # ---- the cost, computed with the resources (the inner choice needs it) -------------------
    def backward_cost(
        self, device: CudaDevice, problem: AttentionProblem, cfg: ConfigArrays, res: CudaResources
    ) -> Perf:
        """The family's cost model (docs/model.md 12.3-12.4)."""
        raise NotImplementedError

    def request_backward_cost(
        self,
        device: CudaDevice,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
        res: CudaResources,
    ) -> Perf:
        """The cost for this request's options (by default `backward_cost`, which needs none;
        a family whose cost reads an option, such as a block mask, states this instead)."""
        return self.backward_cost(device, problem, cfg, res)

    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> BackwardResources:
        device = cuda_device(hardware)
        base = super().resources(hardware, problem, options, cfg)
        perf = self.request_backward_cost(device, problem, options, cfg, base)
        fits = _fits(base, options, self.max_spill_regs)
        aligned = self.alignment_ok(cfg, problem, device)
        rank = inner_rank(cfg, self.inner_params, options, aligned, fits, perf.time_us)
        values = {f.name: getattr(base, f.name) for f in fields(CudaResources)}
        return BackwardResources(**values, inner_rank=rank, perf=perf)

    def evaluate(self, ev: Evaluation) -> Perf:
        return backward_resources(ev).perf

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """CudaFamily's rules with the backward register tolerance."""
        problems = [
            p
            for p in super().check(hardware, problem, options, config)
            if not p.startswith("registers:")
        ]
        device = cuda_device(hardware)
        one = ConfigArrays.from_configs(config.as_dict(), [config])
        regs = self.register_use(one, problem, device, options)
        demand, cap = int(regs.demand[0]), int(regs.cap[0])
        if self.max_spill_regs is not None and int(regs.spill[0]) > self.max_spill_regs:
            problems.append(f"registers: demand {demand} with limit {cap}")
        problems.extend(self._check_inner(hardware, problem, options, config))
        return problems

    def _check_inner(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The inner choice restated for one configuration: evaluate every inner variant of
        its outer parameters afresh (not from the table) and confirm, row by row, that the
        configuration is the first aligned one by (breaks a limit, modelled time in whole ns,
        enumeration order)."""
        device = cuda_device(hardware)
        pins = options.parameter_pins
        variants: list[dict[str, int]] = [{}]
        for param in self.params(problem, hardware):
            if param.name in self.inner_params and param.name not in pins:
                variants = [{**v, param.name: x} for v in variants for x in param.domain]
            else:
                variants = [{**v, param.name: config[param.name]} for v in variants]
        if len(variants) == 1:  # every inner parameter pinned
            return []
        names = list(variants[0])
        everything = ConfigArrays.from_configs(names, [Config.of(**v) for v in variants])
        aligned = np.flatnonzero(self.alignment_ok(everything, problem, device))
        variants = [variants[i] for i in aligned]
        if not variants:
            return []
        cfg = ConfigArrays.from_configs(names, [Config.of(**v) for v in variants])
        res = backward_resources(evaluation(self, hardware, problem, options, cfg))
        need = max(1, options.min_blocks_per_sm or 1)
        best: tuple[int, int, int] | None = None
        chosen: dict[str, int] | None = None
        for i, values in enumerate(variants):
            smem = int(res.smem_bytes[i])
            spill_limit = self.max_spill_regs
            breaks = (
                smem > res.smem_limit_bytes
                or (options.max_smem is not None and smem > options.max_smem)
                or (spill_limit is not None and int(res.spill_regs[i]) > spill_limit)
                or int(res.occupancy.blocks_per_sm[i]) < need
                or int(res.threads[i]) > res.max_threads
            )
            key = (int(breaks), round(float(res.perf.time_us[i]) * 1000.0), i)
            if best is None or key < best:
                best, chosen = key, values
        if chosen is not None and any(chosen[n] != config[n] for n in self.inner_params):
            picked = ", ".join(f"{n}={chosen[n]}" for n in self.inner_params)
            return [f"{self.inner_constraint}: the model runs {picked} with these parameters"]
        return []

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        assert isinstance(table.res, CudaResources)
        res = table.res
        sm = cuda_device(table.hardware).sm
        perf = table.perf
        limiters = "/".join(x.value for x in res.occupancy.limiters(i))
        warps = int(res.occupancy.blocks_per_sm[i] * res.threads[i] // sm.warp_size_threads)
        spill = f", {res.spill_regs[i]} spilled" if res.spill_regs[i] else ""
        figures = perf.figures
        lines = [
            f"{res.occupancy.blocks_per_sm[i]} block(s)/SM limited by {limiters}; "
            f"{warps} of {sm.max_warps_per_sm} warps resident",
            f"{perf.overlap[i]:.0%} of each streamed {self.streamed_words} load hidden by "
            f"compute; tensor cores busy {perf.mma_utilization[i]:.0%}",
            f"shared memory {kib(res.smem_bytes[i])} of {kib(sm.smem_per_block_optin_bytes)}; "
            f"about {res.regs_demand[i]} registers per thread{spill}",
        ]
        helper = figures.get("helper_kernels_us")
        if helper is not None:
            lines.append(
                f"main kernel {figures['main_kernel_us'][i]:.1f} us + helper kernels "
                f"{helper[i]:.1f} us ({self.helper_words})"
            )
        return lines


def _fits(res: CudaResources, options: SolveOptions, spill_limit: int | None) -> BoolArray:
    """Which configurations every capacity limit and user cap admits (`spill_limit`: the
    family's tolerated spilled registers, None for no limit)."""
    need = max(1, options.min_blocks_per_sm or 1)
    ok = (
        (res.smem_bytes <= res.smem_limit_bytes)
        & (res.occupancy.blocks_per_sm >= need)
        & (res.threads <= res.max_threads)
    )
    if spill_limit is not None:
        ok &= res.spill_regs <= spill_limit
    if options.max_smem is not None:
        ok &= res.smem_bytes <= options.max_smem
    return np.asarray(ok, dtype=np.bool_)


def inner_rank(
    cfg: ConfigArrays,
    inner: Sequence[str],
    options: SolveOptions,
    aligned: BoolArray,
    fits: BoolArray,
    time_us: FloatArray,
) -> IntArray:
    """0 for the configuration the family runs for each choice of the outer parameters: the
    first aligned one that matches the pins on inner parameters, by (breaks a limit,
    modelled time in whole ns, enumeration order); 1 for the others."""
    n = len(cfg)
    group = np.zeros(n, dtype=np.int64)
    for name in cfg.names:
        if name not in inner:
            codes = np.unique(cfg[name], return_inverse=True)[1].reshape(-1)
            group = group * (int(codes.max()) + 1) + codes
    candidate = np.asarray(aligned, dtype=np.bool_).copy()
    for name in inner:
        pin = options.parameter_pins.get(name)
        if pin is not None:
            candidate &= cfg[name] == pin
    time_ns = np.rint(time_us * 1000.0)
    order = np.lexsort((np.arange(n), time_ns, ~fits, ~candidate, group))
    sorted_group = group[order]
    first = order[np.r_[True, sorted_group[1:] != sorted_group[:-1]]]
    rank = np.ones(n, dtype=np.int64)
    rank[first] = 0
    rank[~candidate] = 1
    return rank
