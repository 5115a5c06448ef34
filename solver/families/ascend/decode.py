"""The `ascend` family's decode phase: CANN's IncreFlashAttention (`npu_incre_flash_attention`;
`npu_fused_infer_attention_score` with 1 to 16 query rows uses its templates).

What the kernel does (ascend.md section 4; OT-IFA: `IFA算子设计介绍.md`,
`incre_flash_attention_tiling.cpp`): the query rows of one sequence are few (S1 = 1, or up to 16
for speculative decoding) and are never split; one block is one (batch, KV head) with the G
query heads of the group as its rows (the G axis is cut only on the vector side, as the Unified
Buffer allows); the keys are walked in S2 tiles (`sInnerSize`), each a cube QK^T, a vector
softmax and a cube PV exchanging S and P through GM/L2, as in the forward kernels (section 10).
When B x N2 blocks leave cores idle, IFA also cuts S2 across cores ("FlashDecode",
`kvSplitPart`): each part writes an FP32 partial output and its log-sum-exp to a workspace
and, after a barrier across the cores (`SyncAll`), one core per (batch, KV head) merges the
parts, weighted by their log-sum-exps, in the same kernel. With a paged cache (`block_table`,
`block_size`), the S2 tile is a whole number of pages and K and V come into L1 page by page.

Decisions (docs/model.md 13.10): the S2 tile (`block_n`), the core split (`num_splits`: S2
parts per (batch, KV head)), the page size (`page_size` = IFA's `block_size`, with
`--page-size`), and the forward family's pipeline depth, vector slice and head-dim split;
`block_m` covers the packed rows. The cost is the forward cost model (`cost.py`) on each
core split's transformed problem, through the family's `split_kv.SplitKv` (FP32 partials, busy
cores, the combine). CANN's own choices (`SplitBNS`: kvSplitPart = vector cores / (B x N2),
reduced until each part has 512 keys; `CalcInnerSize`: S2 = 8192 / 4096 / 2048 by group
size) are compared with the model's in the docs; they are not rules here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...constraints import Constraint
from ...cost import Perf
from ...errors import FieldViolation
from ...hardware import AscendDevice, HardwareSpec
from ...problem import AttentionProblem, Phase, SolveOptions
from ...space import Config, IntArray, Param, ceil_div
from ...split_kv import (
    MAX_NUM_SPLITS,
    PageFit,
    PageRule,
    RowsCap,
    SplitKv,
    UnitRates,
    always_packs,
    gqa_group,
)
from .buffers import TILE_MULTIPLE
from .cost import ASCEND_LAUNCH_US, DecodeWork, evaluate, rates
from .device import ascend_device, kernel_name
from .forward import BLOCK_M_DOMAIN, AscendFlashAttention

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# IncreFlashAttention takes 1 to 16 query rows per sequence ("S of Query ... should be in range
# [1, 16]", `GetRopeAndGqaFlag`: 2..16 is the speculative-decoding path).
IFA_MAX_QUERY_ROWS = 16
# S2 tiles: IFA's sInnerSize is 8192 (no GQA, or a group under 5), 4096 (5-9), 2048 (10 or
# more), 1024 (int8 KV with GQA), 512 (MLA); shorter caches take shorter tiles. Powers of two
# from 128, floored to whole pages with a page size that does not divide them (as IFA does).
S2_TILES = (128, 256, 512, 1024, 2048, 4096, 8192)
MIN_S2_TILE = S2_TILES[0]
# One vector pass covers at most one vector basic block's width: 8 x 1024 fp32 = 32 KB
# (OT-FA-DOC section 3), the block IFA sizes its 8192-key S2 tile from ("按照vector的最大基本块
# 8*1024进行切分"): a longer tile is walked in 1024-column passes.
VECTOR_BASE_COLUMNS = 1024
# IFA's `block_size` (OPP; OT-IFA aclnnIncreFlashAttentionV4.md): non-zero, at most 512, a
# multiple of 16 for fp16/bf16 KV (32 for int8 KV, which this model does not take); "usually
# 128 or 256", 128 recommended. `--page-size auto` chooses among the powers of two it allows.
IFA_PAGES = PageRule(
    rule=(
        "at most 512 and a multiple of 16 (CANN IncreFlashAttention's block_size for fp16/bf16 "
        "KV; 32 for int8 KV)"
    ),
    auto_domain=(16, 32, 64, 128, 256, 512),
    multiple_of=16,
    max_size=512,
)
# The combine starts after a barrier across all cores of the kernel (`SyncAll`), not with a
# launch: cube cycles (estimate; no public latency figure was found).
SYNC_ALL_CYCLES = 2000.0


def ascend_unit_rates(device: AscendDevice) -> UnitRates:
    """An Ascend device as the split-KV model sees it: the cube cores (each streams K and V
    through its MTE2 into L1, whichever vector core the block belongs to), the achievable DRAM
    and L2 rates, and a GM/L2 hand-off as the dependent round trip."""
    r = rates(device)
    clock_hz = device.ascend.cube_clock_mhz * 1e6
    return UnitRates(
        units=device.ascend.aic_count,
        dram_bytes_per_s=device.memory.achievable_dram_bytes_per_s,
        l2_bytes_per_s=r.l2_total * 1e9,
        l2_bytes=device.memory.l2_bytes,
        l2_round_trip_s=r.handoff_ns * 1e-9,
        block_start_s=0.0,
        launch_us=ASCEND_LAUNCH_US,
        combine_start_us=SYNC_ALL_CYCLES / clock_hz * 1e6,
    )


def packed_rows(problem: AttentionProblem) -> int:
    """The rows of one (batch, KV head) block: the group's query heads x the query rows."""
    return gqa_group(problem) * problem.seq_len


def block_m_cap(problem: AttentionProblem) -> int:
    """The smallest S1 tile (a multiple of 32) that holds a block's packed rows."""
    aligned = [m for m in BLOCK_M_DOMAIN if m % TILE_MULTIPLE == 0]
    return next((m for m in aligned if m >= packed_rows(problem)), aligned[-1])


def core_split_domain(problem: AttentionProblem, units: int) -> tuple[int, ...]:
    """The core splits: the powers of two, and the powers of two times the odd part of the
    cube-core count (3 on a 24-core 910B), up to min(128, the S2 tiles at the smallest tile):
    with only powers of two, B x N2 blocks can never fill 24 cores exactly (docs/model.md
    13.10)."""
    odd = units
    while odd % 2 == 0:
        odd //= 2
    cap = max(1, min(MAX_NUM_SPLITS, ceil_div(problem.seq_len_kv_eff, MIN_S2_TILE)))
    values = {1 << k for k in range(8)} | {odd << k for k in range(8)}
    return tuple(sorted(v for v in values if v <= cap))


def s2_domain(page: int | None) -> tuple[int, ...]:
    """The S2 tiles: the powers of two of S2_TILES, floored to whole pages of a pinned page
    size that does not divide them."""
    if page is None or all(t % page == 0 for t in S2_TILES if t >= page):
        return S2_TILES
    return tuple(sorted({t // page * page for t in S2_TILES if t >= page}))


def ifa_split_counts(
    problem: AttentionProblem, hardware: HardwareSpec, min_block_n: int
) -> tuple[int, ...]:
    """IFA's core splits on the device's cube cores (`core_split_domain`)."""
    return core_split_domain(problem, ascend_device(hardware).ascend.aic_count)


def ifa_rows_cap(problem: AttentionProblem, pack: tuple[int, ...]) -> int:
    """A block's rows: its packed query rows, 32-aligned (IFA always packs)."""
    return block_m_cap(problem)


def ifa_combine_rows(problem: AttentionProblem, dv: int) -> int:
    """IFA's in-kernel merge: one core merges the parts of one (batch, KV head), all its
    packed rows."""
    return packed_rows(problem)


# IFA floors sInnerSize to a multiple of block_size: the S2 tile is a whole number of pages.
IFA_WHOLE_PAGES = PageFit(
    name="ifa_paged",
    rule="S2 tile (block_n) a whole number of pages (IFA floors it to a multiple of block_size)",
    whole_pages=True,
    misfit_text="S2 tile {block_n} is not a whole number of {page}-key pages",
)
IFA_ROWS = RowsCap(
    rule="block_m at most the packed query rows of one (batch, KV head), padded to 32",
    cap=ifa_rows_cap,
)
IFA_SPLIT_KV = SplitKv(
    combine_rows=ifa_combine_rows,
    split_counts=ifa_split_counts,
    pack_gqa=always_packs,
    pages=IFA_PAGES,
    page_fit=IFA_WHOLE_PAGES,
    rows=IFA_ROWS,
).for_decode()


class AscendIncreFlashAttention(AscendFlashAttention):
    """ascend decode: CANN's IncreFlashAttention on the DaVinci AI core."""

    phase = Phase.DECODE
    summary = (
        "CANN IncreFlashAttention decode (npu_incre_flash_attention): one block per (batch, KV "
        "head) holding the group's query heads, S2 tiles of cube QK^T / vector softmax / cube "
        "PV, the S2 axis split across cores when batch x kv_heads leaves them idle (FlashDecode, "
        "an in-kernel LSE-weighted combine), paged KV by block_size. In the answer block_n is "
        "the S2 tile, num_splits the core split (S2 parts per batch x KV head) and page_size "
        "the block_size"
    )
    split_kv = IFA_SPLIT_KV

    def kernel_summary(self, hardware: HardwareSpec) -> str:
        if isinstance(hardware, AscendDevice):
            layout = (
                "split cube/vector cores exchanging S and P through a GM/L2 workspace"
                if hardware.ascend.core_layout == "split"
                else "cube and vector in one AI core"
            )
            return f"{self.summary}; on {hardware.name}: {layout}"
        return self.summary

    # ---- the problem -------------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        device = ascend_device(hardware)
        out = super()._family_violations(problem, hardware)
        core = device.ascend
        if core.core_layout == "coupled" and not core.standalone_vector_core_count:
            out.append(
                FieldViolation(
                    "phase",
                    f"CANN's IncreFlashAttention, the decode kernel modelled, does not exist on "
                    f"{device.name} ({kernel_name(device)} only); decode on Ascend is modelled "
                    "for ascend-910b and ascend-310p3",
                )
            )
        out.extend(self.split_kv.problem_violations(problem))
        if problem.seq_len > IFA_MAX_QUERY_ROWS and problem.seq_len <= problem.seq_len_kv_eff:
            out.append(
                FieldViolation(
                    "seq_len",
                    f"IncreFlashAttention takes 1 to {IFA_MAX_QUERY_ROWS} query rows per sequence "
                    f"(speculative decoding from 2); got {problem.seq_len}: longer chunks are "
                    "--phase forward (PromptFlashAttention's path)",
                )
            )
        return out

    # ---- the decision variables --------------------------------------------------------------
    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return self._params(problem, hardware, None)

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        page = self.split_kv.page_param(self.name, options)
        pinned = page.domain[0] if page is not None and len(page.domain) == 1 else None
        params = self._params(problem, hardware, pinned)
        return params if page is None else (*params, page)

    def _params(
        self, problem: AttentionProblem, hardware: HardwareSpec, page: int | None
    ) -> tuple[Param, ...]:
        base = {p.name: p for p in super().params(problem, hardware)}
        cap = block_m_cap(problem)
        rows = tuple(m for m in BLOCK_M_DOMAIN if m % TILE_MULTIPLE == 0 and m <= cap)
        tiles = s2_domain(page)
        own = (
            Param(
                "block_m",
                rows,
                "rows per block: the packed query rows of one (batch, KV head), padded to a "
                "multiple of 32 (fewer rows: the group in several blocks)",
            ),
            Param(
                "block_n",
                tiles,
                "S2 tile: keys per cube/vector round (IFA's sInnerSize), a whole number of pages",
            ),
            base["num_stages"],
            base["d_split"],
            base["vec_rows"],
        )
        return self.split_kv.params(problem, hardware, own, self)

    def kernel_modelled(self) -> str | None:
        return "CANN IncreFlashAttention (torch_npu.npu_incre_flash_attention)"

    def vector_columns(self, block_n: Any) -> Any:
        return np.minimum(block_n, VECTOR_BASE_COLUMNS)

    # ---- constraints -------------------------------------------------------------------------
    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        split = self.split_kv
        return (
            *super().constraints(hardware, problem, options),
            *split.split_tiles(problem),
            *split.decode_rows(problem),
            *split.paged_tiles(options),
        )

    # ---- the cost ----------------------------------------------------------------------------
    def evaluate(self, ev: Evaluation) -> Perf:
        def forward(sub: Evaluation) -> Perf:
            page = sub.cfg.get("page_size")
            columns = np.asarray(self.vector_columns(sub.cfg["block_n"]), dtype=np.int64)
            work = DecodeWork(rows=sub.problem.seq_len, vec_cols=columns, page=page)
            return evaluate(sub, work)

        rates = ascend_unit_rates(ascend_device(ev.hardware))
        return self.split_kv.perf(ev, forward, rates, ev.problem.head_dim_v_eff)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """After the forward family's order: fewer core-split parts, then the smaller page."""
        return [*super().tie_keys(ev), *self.split_kv.tie_keys(ev)]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        cfg, problem = table.cfg, table.problem
        figures = table.perf.figures
        splits = int(cfg["num_splits"][i])
        bn = int(cfg["block_n"][i])
        units = ascend_device(table.hardware).ascend.aic_count
        blocks = problem.batch * problem.kv_heads_eff * splits
        group = gqa_group(problem)
        rows = f"the {group} query heads of a KV head are one block's rows" if group > 1 else ""
        if splits == 1:
            split = f"no core split: one block per (batch, KV head), {blocks} blocks"
        else:
            split = (
                f"core split: {splits} S2 parts of {int(figures['keys_per_split'][i])} keys per "
                f"(batch, KV head), {blocks} blocks, merged in-kernel in "
                f"{figures['combine_us'][i]:.1f} us"
            )
        lines = [
            f"CANN IncreFlashAttention: S2 tile {bn} keys; {split} on {units} cube cores "
            f"({figures['busy_unit_fraction'][i]:.0%} busy)" + (f"; {rows}" if rows else ""),
            *super().reason_lines(table, i),
        ]
        if "page_size" in cfg:
            page = int(cfg["page_size"][i])
            lines.append(
                f"paged KV: block_size {page}, {bn // page} page(s) per S2 tile, each copied "
                "into L1 as one K and one V transfer"
            )
        return lines

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        values = config.as_dict()
        return [
            *super().check(hardware, problem, options, config),
            *self.split_kv.check(problem, {**values, **self.derived(values)}),
        ]
