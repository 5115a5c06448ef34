"""Split-KV, GQA packing and paged KV: what turns a forward cost model into a decode one.

One object, `SplitKv`, states the split-KV path of a family once: its decisions (`num_splits`,
`pack_gqa`, `page_size`) and their domains, the legality rules on them, the validator's check,
the tie-break keys, the reason lines and the cost. Every family with a split-KV path holds one
(fa2, triton and flashinfer through `families/cuda/forward.py`, fa3, ascend's decode) and
delegates to it; what differs between kernels is data the family gives it (which split counts
and GQA packing the kernel offers, its page rule, how many rows its combine kernel merges per
block, its decode row cap). Nothing here knows about SMs, warps or cube units: a family
supplies its forward cost model as a callback over a *transformed problem* and its device as
`UnitRates`, and this module adds what splitting, packing and paging change. Formulas, units
and sources: `docs/model.md`, section 13.

- **Split-KV.** `num_splits = S` cuts each (sequence, head) into S ranges of ``ceil(Sk/S)``
  keys, one thread block (CTA) per range. The main kernel is the forward kernel on a problem
  with `B·S` sequences of ``ceil(Sk/S)`` keys; each split writes an FP32 partial O and its
  log-sum-exp; a second kernel (the *combine*) merges the S partials of every query row. Its
  launch, traffic and time are in the cost (`combine_cost`). FlashAttention-2 gives every
  split ``ceil(n_kv/S)`` K/V tiles (`compute_attn_splitkv`), and since
  ``ceil(ceil(Sk/S)/bn) = ceil(ceil(Sk/bn)/S)`` the transformed problem has exactly the
  kernel's tiles per split.
- **GQA packing.** With `pack_gqa = 1` the `H/Hkv` query heads sharing a KV head become rows of
  one block: the transformed problem has `Hkv` heads of ``(H/Hkv)·Sq`` rows, so each KV head's
  cache is read once per group, not once per query head.
- **Paged KV.** A page table maps each `page_size` keys of a sequence to a page of the cache.
  Every K/V tile then needs its page indices before its addresses: one dependent round trip
  to L2 plus the address arithmetic of each page the tile touches, on the tile load's
  critical path. The family adds it to its tile load (`paged_lookup_cycles`).
- **Busy units.** A streaming block draws at most its compute unit's share of the DRAM
  bandwidth: a main kernel with fewer blocks than units is bounded by
  ``hbm_bytes / (BW · blocks/units)``. This is what makes a decode step with
  `batch x kv_heads` below the unit count split, and one at or above it not.

Causal masks: the transformed problem is not causal; each query row of a block sees the mean
number of keys a row sees under the bottom-right mask (all `Sk` for one query row). The FLOP
count of the answer stays the exact causal one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .candidates import Evaluation
from .constraints import Constraint, ConstraintKind, Rule
from .cost import L2_USABLE_FRACTION, LSE_BYTES_PER_ROW, Perf, gather_perf, padding_waste
from .errors import FieldViolation, InvalidRequestError
from .family import pow2_range
from .hardware import HardwareSpec
from .problem import AttentionProblem, Phase, SolveOptions, causal_pairs
from .space import ConfigArrays, FloatArray, IntArray, Param, ceil_div

if TYPE_CHECKING:
    from .candidates import CandidateTable
    from .family import KernelFamily

# FlashAttention-2 refuses more than 128 splits (`set_params_splitkv`: TORCH_CHECK(num_splits
# <= 128)) and instantiates its combine kernel for up to 2^7 splits (`Log_max_splits` 1..7 in
# `run_flash_splitkv_fwd`). The domain is the powers of two up to that cap and the K/V tiles.
MAX_NUM_SPLITS = 128
# The decode phase: 1 to 64 query rows per sequence against the cache. 64 is the query block
# of FlashAttention-2's split-KV kernel (kBlockM = 64; `set_params_splitkv`: "we don't expect
# seqlen_q to be larger than 64 for inference"): every query row of a sequence fits one block,
# as in decode and speculative verification; longer chunks are chunked prefill, the forward
# phase with seq_len < seq_len_kv.
DECODE_MAX_QUERY_ROWS = 64
# Accumulators of the partial outputs are FP32 (FA2's oaccum, FlashInfer's tmp_v in float).
PARTIAL_O_BYTES = 4
# Instructions' worth of cycles one page costs a tile load beyond the lookup's round trip:
# the divmod of the key index by the page size, the page-index load and the 64-bit address
# (estimate; FlashInfer `page_produce_kv` / `protective_get_kv_offset`, FlashAttention-2's
# block_table walk in `compute_attn_1rowblock_splitkv`).
PAGE_ADDRESS_CYCLES = 8

T = TypeVar("T")


# ---- the decision variables -------------------------------------------------------------


def num_splits_domain(problem: AttentionProblem, min_block_n: int) -> tuple[int, ...]:
    """Powers of two from 1 to min(128, the K/V tiles at the smallest block_n).

    Powers of two: what a split count buys is the fill of the SMs (or AI cores) and, for
    heads whose K/V does not fit in L2, the reuse of smaller ranges; neither moves much
    between neighbouring counts, FA2's combine kernel is compiled per power-of-two bucket
    anyway, and eight values keep the space, and a cold CP-SAT solve, small
    (docs/model.md 13.2)."""
    tiles = ceil_div(problem.seq_len_kv_eff, min_block_n)
    return pow2_range(1, max(1, min(MAX_NUM_SPLITS, tiles)))


def decode_block_m_cap(problem: AttentionProblem, pack: tuple[int, ...]) -> int:
    """The most query rows a decode block may hold: 64 (FA2's split-KV kBlockM, four warps of
    16 rows) or the packed rows rounded up to a power of two, whichever is larger; a bigger
    block would only add empty rows."""
    rows = problem.seq_len * (gqa_group(problem) if max(pack) else 1)
    return max(DECODE_MAX_QUERY_ROWS, 1 << max(0, (rows - 1).bit_length()))


def gqa_group(problem: AttentionProblem) -> int:
    """Query heads per KV head."""
    return problem.heads // problem.kv_heads_eff


def split_params(
    problem: AttentionProblem, splits: tuple[int, ...], pack: tuple[int, ...]
) -> tuple[Param, ...]:
    """`num_splits` (domain `splits`) and, for GQA problems, `pack_gqa` (domain `pack`: (1,)
    where the kernel always packs, (0, 1) where it may)."""
    out = [
        Param(
            "num_splits",
            splits,
            "K/V ranges each (sequence, head) is split into; each range is one block and "
            "writes an FP32 partial output merged by a combine kernel",
        )
    ]
    if gqa_group(problem) > 1:
        out.append(
            Param(
                "pack_gqa",
                pack,
                "1: the query heads sharing a KV head are rows of one block (K/V read once "
                "per group); 0: one block per query head",
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class PageRule:
    """A family's paged-KV path: which page sizes it takes, and the ones `--page-size auto`
    chooses among (`docs/model.md` 13.4)."""

    rule: str  # in words, for the error and the docs: "a multiple of 256"
    auto_domain: tuple[int, ...]
    multiple_of: int = 1  # page % multiple_of == 0
    power_of_two: bool = False
    max_size: int | None = None  # page <= max_size (Ascend's decode APIs: 512)

    def allows(self, page: int) -> bool:
        if page < 1 or page % self.multiple_of:
            return False
        if self.max_size is not None and page > self.max_size:
            return False
        return not self.power_of_two or page & (page - 1) == 0


def paging_requested(options: SolveOptions) -> bool:
    """Whether the request asks for a paged cache (a pinned or an automatic page size)."""
    return options.choose_page_size or "page_size" in options.parameter_pins


def page_param(family_name: str, rule: PageRule, options: SolveOptions) -> Param | None:
    """The `page_size` decision of a request: absent (contiguous K/V) unless the options ask
    for a paged cache; the pinned size (checked against the family's rule: invalid input
    naming it otherwise), or the rule's candidate sizes with `--page-size auto`."""
    pinned = options.parameter_pins.get("page_size")
    if pinned is not None:
        if not rule.allows(pinned):
            raise InvalidRequestError(
                [
                    FieldViolation(
                        "parameter_pins",
                        f"page_size={pinned} breaks {family_name}'s paged-KV rule: the page "
                        f"size must be {rule.rule}",
                    )
                ]
            )
        domain: tuple[int, ...] = (pinned,)
    elif options.choose_page_size:
        domain = rule.auto_domain
    else:
        return None
    return Param(
        "page_size",
        domain,
        f"keys per page of the paged KV cache (the page table's block_size); {rule.rule}",
    )


def split_fields(parameters: dict[str, int]) -> dict[str, Any]:
    """The answer's own split-KV fields of a candidate, from its parameters (absent ones
    stay null)."""
    out: dict[str, Any] = {}
    if "num_splits" in parameters:
        out["num_splits"] = parameters["num_splits"]
    if "pack_gqa" in parameters:
        out["pack_gqa"] = bool(parameters["pack_gqa"])
    if "page_size" in parameters:
        out["page_size"] = parameters["page_size"]
    return out


# ---- the transformed problem --------------------------------------------------------------


def visible_keys(problem: AttentionProblem) -> int:
    """Keys the mean query row attends to: every key, or under the bottom-right causal mask
    the kept (query, key) pairs per query row, rounded up."""
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    if not problem.causal:
        return sk
    return max(1, int(np.ceil(causal_pairs(sq, sk) / sq)))


def split_problem(problem: AttentionProblem, splits: int, pack: bool) -> AttentionProblem:
    """The problem the forward kernel solves for one (num_splits, pack_gqa) choice: B·S
    sequences of ceil(keys/S) keys; packed, Hkv heads of (H/Hkv)·Sq rows. Not validated
    (B·S may exceed the request limit on batch); never returned to a caller."""
    group = gqa_group(problem) if pack else 1
    return AttentionProblem.model_construct(
        batch=problem.batch * splits,
        heads=problem.kv_heads_eff if pack else problem.heads,
        kv_heads=problem.kv_heads_eff,
        seq_len=problem.seq_len * group,
        seq_len_kv=ceil_div(visible_keys(problem), splits),
        head_dim=problem.head_dim,
        head_dim_v=problem.head_dim_v_eff,
        dtype=problem.dtype,
        causal=False,
        dropout=problem.dropout,
        phase=Phase.FORWARD,
    )


def take_rows(record: T, indices: IntArray, n: int) -> T:
    """A frozen dataclass of per-configuration arrays (resources, occupancy), restricted to
    `indices`; scalars and other fields are kept."""
    assert is_dataclass(record) and not isinstance(record, type)
    changes: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if isinstance(value, np.ndarray) and value.shape[:1] == (n,):
            changes[f.name] = value[indices]
        elif is_dataclass(value) and not isinstance(value, type):
            changes[f.name] = take_rows(value, indices, n)
    return replace(record, **changes)


def sub_evaluation(
    ev: Evaluation, problem: AttentionProblem, indices: IntArray, n: int
) -> Evaluation:
    """The evaluation of the configurations at `indices` on a transformed problem: what a
    family's forward cost model reads for one (num_splits, pack_gqa) group."""
    values = {f.name: getattr(ev, f.name) for f in fields(Evaluation)}
    values.update(
        problem=problem,
        cfg=ev.cfg.take(indices),
        common={name: column[indices] for name, column in ev.common.items()},
        res=take_rows(ev.res, indices, n),
    )
    return Evaluation(**values)


# ---- the device as the split model sees it --------------------------------------------------


@dataclass(frozen=True)
class UnitRates:
    """What the split-KV model needs of a device: its compute units (SMs, AI cores) and the
    memory rates a streaming kernel reaches."""

    units: int
    dram_bytes_per_s: float  # achievable, whole device
    l2_bytes_per_s: float  # achievable, whole device
    l2_bytes: int
    l2_round_trip_s: float  # one dependent L2 access
    block_start_s: float  # start-up of one block
    launch_us: float  # one kernel launch: the main kernel's floor, the combine's start
    # what starting the combine costs: None, a kernel launch (launch_us); a kernel that merges
    # in place after a barrier across its cores (CANN's IncreFlashAttention) gives that here
    combine_start_us: float | None = None


def paged_lookup_cycles(
    cfg: ConfigArrays, block_n: IntArray, l2_round_trip_cycles: float
) -> FloatArray | float:
    """Extra cycles on each K/V tile load of a paged cache: one dependent L2 round trip for
    the page indices (issued together) plus the address arithmetic of each page the tile
    touches. 0.0 for a contiguous cache (the forward model unchanged)."""
    if "page_size" not in cfg:
        return 0.0
    pages = np.maximum(ceil_div(block_n, cfg["page_size"]), 1).astype(np.float64)
    return np.asarray(l2_round_trip_cycles + PAGE_ADDRESS_CYCLES * pages)


# ---- the cost -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Combine:
    """The combine kernel of a split: its time and DRAM traffic (arrays over configs)."""

    time_us: FloatArray
    hbm_bytes: FloatArray


def combine_cost(
    problem: AttentionProblem,
    splits: IntArray,
    dv: int,
    rates: UnitRates,
    rows_per_block: int,
) -> Combine:
    """Merging S partial outputs per query row (zero where S = 1).

    Rows R = B·H·Sq; the partials are S·R·(4·dv + 4) bytes (FP32 O and LSE), which the combine
    reads back (from L2 when they fit in its usable half, else from DRAM) after the log-sum-
    exps (two dependent rounds); it writes R·(e·dv + 4) bytes of O and LSE. Its blocks each
    merge `rows_per_block` rows (FA2: 4, 8 or 16 rows per 128-thread block); with fewer
    blocks than units only the busy units' shares of the bandwidths serve it."""
    rows = float(problem.batch * problem.heads * problem.seq_len)
    s = splits.astype(np.float64)
    partial = s * rows * (PARTIAL_O_BYTES * dv + LSE_BYTES_PER_ROW)
    out = rows * (problem.dtype.bytes * dv + LSE_BYTES_PER_ROW)
    busy = min(1.0, ceil_div(int(rows), rows_per_block) / rates.units)
    in_l2 = partial <= L2_USABLE_FRACTION * rates.l2_bytes
    read_rate = np.where(in_l2, rates.l2_bytes_per_s, rates.dram_bytes_per_s) * busy
    transfer_s = np.maximum(partial / read_rate, out / (rates.dram_bytes_per_s * busy))
    fixed_s = rates.block_start_s + 2.0 * rates.l2_round_trip_s
    start_us = rates.launch_us if rates.combine_start_us is None else rates.combine_start_us
    time_us = start_us + (fixed_s + transfer_s) * 1e6
    hbm = out + np.where(in_l2, 0.0, partial)
    split = splits > 1
    return Combine(np.where(split, time_us, 0.0), np.where(split, hbm, 0.0))


ForwardCost = Callable[[AttentionProblem, IntArray], Perf]


def split_kv_perf(
    problem: AttentionProblem,
    cfg: ConfigArrays,
    common: dict[str, IntArray],
    forward: ForwardCost,
    rates: UnitRates,
    dv: int,
    combine_rows_per_block: int,
) -> Perf:
    """The cost of every configuration of a split-KV (and/or GQA-packed) family.

    `forward(problem', indices)` is the family's forward cost model of the configurations at
    `indices` on the transformed problem of their (num_splits, pack_gqa) group. On top of it:
    FP32 partial outputs, the busy-unit bandwidth bound and the combine kernel."""
    n = len(cfg)
    splits = cfg["num_splits"] if "num_splits" in cfg else np.ones(n, dtype=np.int64)
    pack = cfg["pack_gqa"] if "pack_gqa" in cfg else np.zeros(n, dtype=np.int64)
    parts: list[tuple[IntArray, Perf]] = []
    # the (num_splits, pack_gqa) groups in increasing order, from one key per configuration
    radix = int(pack.max(initial=0)) + 1
    for key in np.unique(splits * radix + pack).tolist():
        s, p = divmod(key, radix)
        indices = np.flatnonzero((splits == s) & (pack == p))
        parts.append((indices, forward(split_problem(problem, s, bool(p)), indices)))
    base = gather_perf(parts, n)

    elem = problem.dtype.bytes
    group = np.where(pack > 0, gqa_group(problem), 1)
    heads = problem.batch * np.where(pack > 0, problem.kv_heads_eff, problem.heads)
    rows = problem.seq_len * group
    bm = common["block_m"]
    bn = common["block_n"]
    ctas = heads * splits * ceil_div(rows, bm)
    busy = np.minimum(1.0, ctas / rates.units)
    split = splits > 1
    all_rows = float(problem.batch * problem.heads * problem.seq_len)
    partial_extra = np.where(split, splits * all_rows * dv * (PARTIAL_O_BYTES - elem), 0.0)
    unit_dram = rates.dram_bytes_per_s / rates.units
    epilogue_us = np.where(
        split, np.ceil(base.waves) * bm * dv * (PARTIAL_O_BYTES - elem) / unit_dram * 1e6, 0.0
    )
    main_bytes = base.hbm_bytes + partial_extra
    computed_us = base.time_us + epilogue_us
    busy_bound_us = rates.launch_us + main_bytes / (rates.dram_bytes_per_s * busy) * 1e6
    main_us = np.maximum(computed_us, busy_bound_us)
    combine = combine_cost(problem, splits, dv, rates, combine_rows_per_block)
    time_us = main_us + combine.time_us
    hbm = main_bytes + combine.hbm_bytes

    keys = ceil_div(visible_keys(problem), splits)
    computed_pairs = (heads * splits * ceil_div(rows, bm) * bm) * (ceil_div(keys, bn) * bn)
    per_head = computed_pairs.astype(np.float64) / (problem.batch * problem.heads)
    words = np.array(base.bottleneck, dtype=object)
    busy_bound = (busy < 1.0) & (busy_bound_us >= computed_us)
    words[busy_bound] = "HBM bandwidth of the busy SMs (too few blocks)"
    words[combine.time_us > 0.5 * time_us] = "split-KV combine"
    bottleneck = list(words.tolist())
    figures = dict(base.figures)
    figures.update(
        main_kernel_us=main_us,
        combine_us=combine.time_us,
        keys_per_split=keys.astype(np.float64),
        busy_unit_fraction=busy,
    )
    return replace(
        base,
        time_us=time_us,
        tflops=problem.flops / (time_us * 1e-6) / 1e12,
        arithmetic_intensity=problem.flops / hbm,
        hbm_bytes=hbm,
        padding_waste=padding_waste(problem, per_head),
        mma_utilization=base.mma_utilization * base.time_us / time_us,
        bottleneck=bottleneck,
        figures=figures,
    )


# ---- the legality rules ---------------------------------------------------------------------


class SplitTiles(Constraint):
    """Every split covers at least one K/V tile: num_splits <= ceil(Sk / block_n)."""

    name = "split_tiles"
    rule = "num_splits at most the K/V tiles (each split covers at least one tile)"
    short = "split"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        if "num_splits" not in ev.cfg:
            return []
        return [Rule("excess_splits", excess_splits(ev), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        tiles = ceil_div(ev.problem.seq_len_kv_eff, int(ev.common["block_n"][i]))
        splits = int(ev.cfg["num_splits"][i]) if "num_splits" in ev.cfg else 1
        return f"{ev.label(i)}: {splits} splits of {tiles} K/V tiles leave a split empty"


def excess_splits(ev: Evaluation) -> IntArray:
    """Splits beyond the K/V tiles of each configuration (0 where every split has a tile)."""
    tiles = ceil_div(ev.problem.seq_len_kv_eff, ev.common["block_n"])
    return np.asarray(np.maximum(ev.cfg["num_splits"] - tiles, 0), dtype=np.int64)


@dataclass(frozen=True)
class PageFit:
    """How a K/V tile and a page of the cache must fit, on a family's paged path: block_n a
    whole number of pages (`whole_pages`), or else one of the two dividing the other."""

    name: str  # the legality constraint's name in the funnel
    rule: str
    whole_pages: bool
    misfit_text: str  # how a configuration breaks it: "{block_n}" and "{page}" filled in

    def misfits_one(self, block_n: int, page: int) -> bool:
        """Whether one configuration's tile and page do not fit (the validator's statement)."""
        if self.whole_pages:
            return block_n % page != 0
        return block_n % page != 0 and page % block_n != 0

    def misfits(self, block_n: IntArray, page: IntArray) -> IntArray:
        """1 where the tile and the page do not fit."""
        fits = block_n % page == 0
        if not self.whole_pages:
            fits = fits | (page % block_n == 0)
        return np.asarray(~fits, dtype=np.int64)


# FlashAttention-2 and FlashInfer: tiles and pages nest either way.
NESTED_PAGES = PageFit(
    name="paged_kv",
    rule="block_n a multiple of the page size or dividing it",
    whole_pages=False,
    misfit_text="block_n {block_n} and page {page} do not nest",
)


class PagedTiles(Constraint):
    """A K/V tile and a page fit as the family's paged path requires (`PageFit`)."""

    short = "page"
    kind = ConstraintKind.LEGALITY

    def __init__(self, fit: PageFit):
        self.fit = fit
        self.name = fit.name
        self.rule = fit.rule

    def rules(self, ev: Evaluation) -> list[Rule]:
        if "page_size" not in ev.cfg:
            return []
        misfit = self.fit.misfits(ev.common["block_n"], ev.cfg["page_size"])
        return [Rule("page_misfit", misfit, "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        page = int(ev.cfg["page_size"][i]) if "page_size" in ev.cfg else 0
        block_n = int(ev.common["block_n"][i])
        return f"{ev.label(i)}: " + self.fit.misfit_text.format(block_n=block_n, page=page)


@dataclass(frozen=True)
class RowsCap:
    """The decode phase's cap on a block's query rows: `cap(problem, pack domain)`, and the
    rule in words for the funnel."""

    rule: str
    cap: Callable[[AttentionProblem, tuple[int, ...]], int]


DECODE_ROWS = RowsCap(
    rule="block_m at most max(64, the query rows of a sequence's packed group)",
    cap=decode_block_m_cap,
)


class DecodeRows(Constraint):
    """A decode block holds at most `cap` query rows (more would hold only padding)."""

    name = "decode_rows"
    short = "rows"
    kind = ConstraintKind.LEGALITY

    def __init__(self, cap: int, rule: str = DECODE_ROWS.rule):
        self.cap = cap
        self.rule = rule

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("block_m", ev.common["block_m"], "<=", self.cap)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)}: a decode block of more than {self.cap} rows holds only padding"


def decode_violations(problem: AttentionProblem) -> list[FieldViolation]:
    """The decode phase's own rules: 1..DECODE_MAX_QUERY_ROWS query rows per sequence, no
    more than the keys they attend to, no dropout."""
    out = []
    if problem.seq_len > problem.seq_len_kv_eff:
        out.append(
            FieldViolation(
                "seq_len",
                f"decode attends seq_len new query tokens to a cache of seq_len_kv tokens that "
                f"holds them, so seq_len <= seq_len_kv; got seq_len {problem.seq_len} > "
                f"seq_len_kv {problem.seq_len_kv_eff} (for queries longer than the keys use "
                "--phase forward)",
            )
        )
    if problem.seq_len > DECODE_MAX_QUERY_ROWS:
        out.append(
            FieldViolation(
                "seq_len",
                f"decode covers 1 to {DECODE_MAX_QUERY_ROWS} query rows per sequence (one "
                f"query block); got {problem.seq_len}: a longer chunk against a cache is "
                "chunked prefill, --phase forward with seq_len < seq_len_kv",
            )
        )
    if problem.dropout > 0:
        out.append(
            FieldViolation("dropout", f"decode kernels have no dropout; got {problem.dropout}")
        )
    return out


# ---- the split-KV path of a family ------------------------------------------------------------

SPLIT_PARAMS = ("num_splits", "pack_gqa")
# What a family tells its SplitKv (plain functions of the family's module, named for the rule).
SplitCounts = Callable[[AttentionProblem, HardwareSpec, int], tuple[int, ...]]
PackDomain = Callable[[AttentionProblem], tuple[int, ...]]
CombineRows = Callable[[AttentionProblem, int], int]
ForwardModel = Callable[[Evaluation], Perf]


def fa2_combine_rows(problem: AttentionProblem, dv: int) -> int:
    """Query rows one combine block merges in FlashAttention-2's combine kernel, the default:
    4 rows per 128 threads when the (kernel's) head dim is a multiple of 128, 8 for 64, else
    16 (`run_flash_splitkv_fwd`, flash_fwd_launch_template.h); the triton family's split grid
    is modelled with it too."""
    return 4 if dv % 128 == 0 else 8 if dv % 64 == 0 else 16


def powers_of_two_splits(
    problem: AttentionProblem, hardware: HardwareSpec, min_block_n: int
) -> tuple[int, ...]:
    """The default split counts: `num_splits_domain` at the family's smallest block_n."""
    return num_splits_domain(problem, min_block_n)


def never_packs(problem: AttentionProblem) -> tuple[int, ...]:
    """pack_gqa domain of a kernel that keeps one block per query head."""
    return (0,)


def always_packs(problem: AttentionProblem) -> tuple[int, ...]:
    """pack_gqa domain of a kernel that always packs a KV head's query heads into its rows."""
    return (1,)


def may_pack(problem: AttentionProblem) -> tuple[int, ...]:
    """pack_gqa domain of a kernel that offers both."""
    return (0, 1)


@dataclass(frozen=True)
class SplitKv:
    """A family's split-KV, GQA-packing and paged-KV path, stated once.

    The forward registration declares `num_splits` (and `pack_gqa` for GQA problems) only
    against a longer K/V (prefill against a cache, `seq_len_kv > seq_len`), so its plain
    forward space and answers do not change; the decode registration (`for_decode()`)
    always declares them and caps a block's query rows (`rows`). `page_size` is a decision
    when the request asks for a paged cache and the family has a paged path (`pages`)."""

    combine_rows: CombineRows = fa2_combine_rows  # rows one block of the combine kernel merges
    split_counts: SplitCounts = powers_of_two_splits
    pack_gqa: PackDomain = never_packs
    pages: PageRule | None = None  # None: no paged path (`--page-size` is invalid input)
    page_fit: PageFit | None = NESTED_PAGES  # how tiles and pages fit (None: any, any)
    rows: RowsCap = DECODE_ROWS
    decode: bool = False

    def for_decode(self) -> SplitKv:
        """The same path for the decode phase."""
        return replace(self, decode=True)

    def declared(self, problem: AttentionProblem) -> bool:
        """Whether num_splits is a decision: in decode, or prefill against a longer K/V."""
        return self.decode or problem.seq_len_kv_eff > problem.seq_len

    # ---- the decisions ----------------------------------------------------------------------
    def params(
        self,
        problem: AttentionProblem,
        hardware: HardwareSpec,
        tile: tuple[Param, ...],
        family: KernelFamily,
    ) -> tuple[Param, ...]:
        """The family's tile parameters and, where declared, num_splits and pack_gqa."""
        if not self.declared(problem):
            return tile
        min_block_n = int(family.common_fields(ConfigArrays.product(tile))["block_n"].min())
        splits = self.split_counts(problem, hardware, min_block_n)
        return tile + split_params(problem, splits, self.pack_gqa(problem))

    def page_param(self, family_name: str, options: SolveOptions) -> Param | None:
        """The request's page_size decision (None: contiguous K/V, or no paged path)."""
        return None if self.pages is None else page_param(family_name, self.pages, options)

    def request_params(
        self, family_name: str, params: tuple[Param, ...], options: SolveOptions
    ) -> tuple[Param, ...]:
        """The parameters with the request's page_size decision, if it asks for one."""
        page = self.page_param(family_name, options)
        return params if page is None else (*params, page)

    def problem_violations(self, problem: AttentionProblem) -> list[FieldViolation]:
        """The decode phase's rules for the decode registration (none otherwise)."""
        return decode_violations(problem) if self.decode else []

    # ---- the legality rules, each as 0 or 1 constraint, and in the CUDA families' order ------
    def split_tiles(self, problem: AttentionProblem) -> list[Constraint]:
        """Every split covers a K/V tile, where num_splits is declared."""
        return [SplitTiles()] if self.declared(problem) else []

    def paged_tiles(self, options: SolveOptions) -> list[Constraint]:
        """The tile and the page fit, where a paged cache is asked for and the path has a
        fit rule."""
        if self.page_fit is None or self.pages is None or not paging_requested(options):
            return []
        return [PagedTiles(self.page_fit)]

    def decode_rows(self, problem: AttentionProblem) -> list[Constraint]:
        """The decode registration's cap on a block's query rows."""
        if not self.decode:
            return []
        return [DecodeRows(self.rows.cap(problem, self.pack_gqa(problem)), self.rows.rule)]

    def constraints(self, problem: AttentionProblem, options: SolveOptions) -> list[Constraint]:
        """split_tiles, the page fit, decode_rows: the funnel order of the CUDA FlashAttention
        families (fa3 puts its pack rule between them, ascend's decode the rows before the
        page fit: they list the pieces, since the funnel's order is part of the answer)."""
        return [
            *self.split_tiles(problem),
            *self.paged_tiles(options),
            *self.decode_rows(problem),
        ]

    def check(self, problem: AttentionProblem, fields: dict[str, int]) -> list[str]:
        """The validator's statement of the split, page and row rules for one configuration
        (`fields`: its parameters with the common fields filled in)."""
        out = []
        block_n = fields["block_n"]
        splits = fields.get("num_splits", 1)
        tiles = ceil_div(problem.seq_len_kv_eff, block_n)
        if splits > tiles:
            out.append(f"split_tiles: {splits} splits > {tiles} K/V tiles")
        page = fields.get("page_size")
        fit = self.page_fit
        if page is not None and fit is not None and fit.misfits_one(block_n, page):
            out.append(f"{fit.name}: " + fit.misfit_text.format(block_n=block_n, page=page))
        if self.decode:
            cap = self.rows.cap(problem, self.pack_gqa(problem))
            if fields["block_m"] > cap:
                out.append(f"decode_rows: block_m {fields['block_m']} > {cap}")
        return out

    # ---- the cost ------------------------------------------------------------------------------
    def perf(self, ev: Evaluation, forward: ForwardModel, rates: UnitRates, dv: int) -> Perf:
        """The family's `forward` model where nothing splits; otherwise `split_kv_perf` over
        each (num_splits, pack_gqa) group's transformed problem, with the family's combine."""
        if not any(name in ev.cfg for name in SPLIT_PARAMS):
            return forward(ev)
        n = len(ev.cfg)

        def group(problem: AttentionProblem, indices: IntArray) -> Perf:
            return forward(sub_evaluation(ev, problem, indices, n))

        rows = self.combine_rows(ev.problem, dv)
        return split_kv_perf(ev.problem, ev.cfg, ev.common, group, rates, dv, rows)

    # ---- ties and reasons ------------------------------------------------------------------
    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """After a family's own order: fewer splits (less partial traffic), then the smaller
        page (less of the last page of each sequence left empty)."""
        return [ev.cfg[name] for name in ("num_splits", "page_size") if name in ev.cfg]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        """The split and paging lines of configuration i's reasons."""
        lines = []
        if "num_splits" in table.cfg:
            lines.append(split_reason(table, i))
        if "page_size" in table.cfg:
            page = int(table.cfg["page_size"][i])
            bn = int(table.common["block_n"][i])
            pages = max(1, ceil_div(bn, page))
            lines.append(
                f"paged KV: {page}-key pages, {pages} page-table lookup(s) per {bn}-key tile"
            )
        return lines

    @property
    def paged_kv_rule(self) -> str | None:
        """The page sizes of the paged path in words (None: no paged path)."""
        return None if self.pages is None else self.pages.rule


def split_reason(table: CandidateTable, i: int) -> str:
    """One line on the split and packing of configuration i."""
    splits = int(table.cfg["num_splits"][i])
    packed = "pack_gqa" in table.cfg and int(table.cfg["pack_gqa"][i]) == 1
    group = table.problem.heads // table.problem.kv_heads_eff
    figures = table.perf.figures
    busy = figures["busy_unit_fraction"][i]
    pack = f"; the {group} query heads of a KV head share each block" if packed else ""
    if splits == 1:
        return (
            f"one split: each block streams all of its K/V (blocks on {busy:.0%} of the SMs){pack}"
        )
    return (
        f"{splits} splits of {int(figures['keys_per_split'][i])} keys (blocks on {busy:.0%} of "
        f"the SMs), combine {figures['combine_us'][i]:.1f} us{pack}"
    )
