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
from ...cost import L2_USABLE_FRACTION, KvReuse, Perf, causal_iterations, kv_reuse
from ...family import kib
from ...hardware import CudaDevice, HardwareSpec
from ...model_constants import model_constants
from ...problem import AttentionProblem, Phase, SolveOptions
from ...space import BoolArray, Config, ConfigArrays, FloatArray, IntArray, Param, ceil_div
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
# Pointers, indices, loop state, predicates and the compiler's scheduling slack of
# FlashAttention-2's backward loop: calibrated on ptxas's registers and spills of FA2 2.8.3's
# backward kernels (docs/model.md 16.5: head dims 192 and 256 on sm80/sm86/sm90, the estimate
# 23-38 registers below what ptxas needs; 16 before).
BWD_FIXED_OVERHEAD_REGS = 48
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


def key_block_iterations(
    problem: AttentionProblem, n_m: IntArray, bm: FloatArray, bn: FloatArray, n_kv: IntArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Iterations of the key blocks of one head over the query blocks that see them: their
    total and the diagonal ones among them (the forward's pairs, `cost.causal_iterations`),
    and the longest key block's (key block 0 under a causal mask)."""
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    if problem.causal:
        total, diagonal = causal_iterations(n_m, bm, bn, n_kv, sk - sq)
        first = np.clip(np.floor(-(sk - sq) / bm), 0, n_m)  # key block 0's first query block
        return total, diagonal, np.asarray(n_m - first)
    total = (n_m * n_kv).astype(np.float64)
    return total, np.zeros_like(total), n_m.astype(np.float64)


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


def query_stream_reuse(
    problem: AttentionProblem,
    device: CudaDevice,
    row_bytes: float,
    tile_bytes: FloatArray,
    n_kv: IntArray,
    passes_per_head: FloatArray,
    slots: IntArray,
) -> KvReuse:
    """The L2 reuse of a backward's streamed query rows (Q, dO, LSE and D, `row_bytes` each,
    per query head) across the key blocks of a head that walk them in step."""
    head_bytes = float(problem.seq_len) * row_bytes
    return streamed_reuse(
        problem, True, head_bytes, tile_bytes, n_kv, passes_per_head, slots, device.memory.l2_bytes
    )


def bandwidth_kernel_us(device: CudaDevice, hbm_bytes: float) -> float:
    """A helper kernel that streams `hbm_bytes` (preprocess, dQ conversion, GQA reduction):
    its DRAM time at the achievable bandwidth plus the launch floor, microseconds."""
    if hbm_bytes <= 0:
        return 0.0
    launch_us = model_constants(device).kernel_launch_us
    return hbm_bytes / device.memory.achievable_dram_bytes_per_s * 1e6 + launch_us


def resident_kv_bytes(
    problem: AttentionProblem,
    d: int | float | FloatArray,
    dv: int | float | FloatArray,
    n_kv: IntArray,
    slots: IntArray,
) -> FloatArray:
    """DRAM bytes of the resident K and V: once per key block, per KV head when the query
    heads of a GQA group run together (their blocks fit the slots), else per query head."""
    group = problem.heads // problem.kv_heads_eff
    kv_reads = np.where(group * n_kv <= slots, 1.0, float(group))
    elem = problem.dtype.bytes
    return np.asarray(
        problem.batch
        * problem.kv_heads_eff
        * float(problem.seq_len_kv_eff)
        * (d + dv)
        * elem
        * kv_reads
    )


def dq_accumulator_dram_bytes(
    problem: AttentionProblem,
    d: int | float | FloatArray,
    total_iters: FloatArray,
    adds_per_iteration: FloatArray,
    n_kv: IntArray,
    slots: IntArray,
    l2_bytes: int,
) -> tuple[FloatArray, FloatArray]:
    """The fp32 dQ accumulator the key blocks add `adds_per_iteration` bytes into per
    iteration (FlashAttention-2's atomics, FlashAttention-3's TMA reduce-adds): its DRAM bytes
    (first touch and final write-back of each line, plus a round trip for the share of adds
    whose line L2 evicted between two key blocks' visits: the accumulators of the heads in
    flight against the usable L2) and the bytes added in all."""
    heads_total = problem.batch * problem.heads
    dq_head_bytes = float(problem.seq_len) * d * 4
    atomic_total = heads_total * total_iters * adds_per_iteration
    heads_in_flight = np.minimum(heads_total, ceil_div(slots, n_kv) + 1).astype(np.float64)
    dq_miss = np.clip(
        1.0 - L2_USABLE_FRACTION * l2_bytes / (heads_in_flight * dq_head_bytes),
        0.0,
        1.0,
    )
    dram = 2.0 * heads_total * dq_head_bytes + 2.0 * dq_miss * np.maximum(
        atomic_total - heads_total * dq_head_bytes, 0.0
    )
    return np.asarray(dram), np.asarray(atomic_total)


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
    """The register capacity with a backward family's tolerance of spilled registers."""

    def __init__(self, max_spill_regs: int = BACKWARD_MAX_SPILL_REGS):
        self.max_spill_regs = max_spill_regs
        self.rule = f"estimated registers spill at most {max_spill_regs} per thread"

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("spill_regs", backward_resources(ev).spill_regs, "<=", self.max_spill_regs)]

    def detail(self, ev: Evaluation, i: int) -> str:
        res = backward_resources(ev)
        return (
            f"{ev.label(i)} wants about {res.regs_demand[i]} registers per thread; with a limit "
            f"of {res.regs_cap[i]} it would spill {res.spill_regs[i]} "
            f"(> {self.max_spill_regs})"
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
    # What the loops stream, in the words of the reasons.
    streamed_words = "Q/dO tile"
    helper_words = "preprocess D = rowsum(dO o O)"
    inner_params: ClassVar[tuple[str, ...]] = ()
    inner_constraint: ClassVar[str] = "inner_choice"
    inner_short: ClassVar[str] = "inner"
    # Spilled registers per thread a configuration may have and still fit (the inner choice
    # prefers configurations within it); fa3's setmaxnreg budgets tolerate none; None: spills
    # are costed, never refused (triton).
    max_spill_regs: ClassVar[int | None] = BACKWARD_MAX_SPILL_REGS

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        registers = () if self.max_spill_regs is None else (BackwardRegisters(self.max_spill_regs),)
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
        self,
        device: CudaDevice,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
        res: CudaResources,
    ) -> Perf:
        """The family's cost model (docs/model.md 12.3-12.4), for the request's options (a
        family whose cost reads one, such as flex's block mask, uses them)."""
        raise NotImplementedError

    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> BackwardResources:
        device = cuda_device(hardware)
        base = super().resources(hardware, problem, options, cfg)
        perf = self.backward_cost(device, problem, options, cfg, base)
        fits = backward_fits(base, options, self.max_spill_regs)
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
        """CudaFamily's rules with the backward register tolerance (`backward_checks`)."""
        return self.backward_checks(hardware, problem, options, [config])[0]

    def check_all(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """`backward_checks`, unless a subclass states more rules in its own `check`."""
        if type(self).check is not CudaBackwardFamily.check:
            return super().check_all(hardware, problem, options, configs)
        return self.backward_checks(hardware, problem, options, configs)

    def backward_checks(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """CudaFamily's rules with the backward register tolerance, and the inner choice, for
        each of `configs` (each rule evaluated once over all of them)."""
        if not configs:
            return []
        device = cuda_device(hardware)
        cfg = ConfigArrays.from_configs(configs[0].as_dict(), configs)
        regs = self.register_use(cfg, problem, device, options)
        inner = self._check_inner(hardware, problem, options, configs)
        out = []
        for k, found in enumerate(self.cuda_checks(hardware, problem, options, configs)):
            problems = [p for p in found if not p.startswith("registers:")]
            demand, cap = int(regs.demand[k]), int(regs.cap[k])
            if self.max_spill_regs is not None and int(regs.spill[k]) > self.max_spill_regs:
                problems.append(f"registers: demand {demand} with limit {cap}")
            out.append(problems + inner[k])
        return out

    def _check_inner(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """The inner choice restated for each configuration: evaluate every inner variant of
        its outer parameters afresh (not from the table; the variants of all the
        configurations in one evaluation) and confirm that each configuration is the first
        aligned one of its variants by (breaks a limit, modelled time in whole ns, enumeration
        order), all of them ordered at once."""
        device = cuda_device(hardware)
        pins = options.parameter_pins
        products = []
        for config in configs:
            # the outer values with every unpinned inner domain, in enumeration order
            variant_params = [
                p
                if p.name in self.inner_params and p.name not in pins
                else Param(p.name, (config[p.name],), p.doc)
                for p in self.params(problem, hardware)
            ]
            products.append(ConfigArrays.product(variant_params))
        if len(products[0]) == 1:  # every inner parameter pinned
            return [[] for _ in configs]
        names = products[0].names
        everything = ConfigArrays({n: np.concatenate([c[n] for c in products]) for n in names})
        aligned = self.alignment_ok(everything, problem, device)
        ends = np.cumsum([len(c) for c in products])
        rows = [
            np.flatnonzero(aligned[end - len(c) : end]) + (end - len(c))
            for c, end in zip(products, ends, strict=True)
        ]
        cfg = everything.take(np.concatenate(rows))
        if not len(cfg):
            return [[] for _ in configs]
        res = backward_resources(evaluation(self, hardware, problem, options, cfg))
        need = max(1, options.min_blocks_per_sm or 1)
        smem = res.smem_bytes
        breaks = (
            (smem > res.smem_limit_bytes)
            | (res.occupancy.blocks_per_sm < need)
            | (res.threads > res.max_threads)
        )
        if options.max_smem is not None:
            breaks |= smem > options.max_smem
        if self.max_spill_regs is not None:
            breaks |= res.spill_regs > self.max_spill_regs
        # the first row of each configuration's variants by (breaks a limit, modelled time in
        # whole ns, enumeration order)
        sizes = np.asarray([len(kept) for kept in rows], dtype=np.int64)
        segment = np.repeat(np.arange(len(rows)), sizes)
        position = np.arange(len(cfg)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        time_ns = np.rint(res.perf.time_us * 1000.0)
        order = np.lexsort((position, time_ns, breaks, segment))
        starts = np.flatnonzero(np.r_[True, segment[order][1:] != segment[order][:-1]])
        chosen_row = dict(zip(segment[order][starts].tolist(), order[starts].tolist(), strict=True))
        out: list[list[str]] = []
        for k, config in enumerate(configs):
            row = chosen_row.get(k)
            chosen = None if row is None else {n: int(cfg[n][row]) for n in self.inner_params}
            if chosen is not None and any(chosen[n] != config[n] for n in self.inner_params):
                picked = ", ".join(f"{n}={chosen[n]}" for n in self.inner_params)
                out.append(
                    [f"{self.inner_constraint}: the model runs {picked} with these parameters"]
                )
            else:
                out.append([])
        return out

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
            f"compute; {self.matrix_units(sm)} busy {perf.mma_utilization[i]:.0%}",
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


def backward_fits(
    res: CudaResources, options: SolveOptions, max_spill_regs: int | None
) -> BoolArray:
    """Which configurations every capacity limit and user cap admits (at most
    `max_spill_regs` spilled registers per thread; None: spills are costed, not refused)."""
    need = max(1, options.min_blocks_per_sm or 1)
    ok = (
        (res.smem_bytes <= res.smem_limit_bytes)
        & (res.occupancy.blocks_per_sm >= need)
        & (res.threads <= res.max_threads)
    )
    if max_spill_regs is not None:
        ok &= res.spill_regs <= max_spill_regs
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
    candidate = np.asarray(aligned, dtype=np.bool_).copy()
    for name in inner:
        pin = options.parameter_pins.get(name)
        if pin is not None:
            candidate &= cfg[name] == pin
    # Only candidates can be a group's first (the others sort after them and rank 1 anyway),
    # so the groups are numbered and ordered over the candidates alone: a few per cent of a
    # backward space, where the whole is tens of thousands of configurations.
    rows = np.flatnonzero(candidate)
    group = np.zeros(len(rows), dtype=np.int64)
    for name in cfg.names:
        if name not in inner:
            codes = np.unique(cfg[name][rows], return_inverse=True)[1].reshape(-1)
            group = group * (int(codes.max(initial=0)) + 1) + codes
    time_ns = np.rint(time_us[rows] * 1000.0)
    order = np.lexsort((rows, time_ns, ~fits[rows], group))
    sorted_group = group[order]
    first = rows[order[np.r_[True, sorted_group[1:] != sorted_group[:-1]]]] if len(rows) else rows
    rank = np.ones(n, dtype=np.int64)
    rank[first] = 0
    return rank
