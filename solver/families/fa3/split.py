"""FlashAttention-3's split-KV, pack-GQA and paged-KV paths (`FA3_SPLIT_KV`, the `split_kv.SplitKv`
the `fa3` family holds): against a longer cache (forward phase, `seq_len_kv > seq_len`) and
in its decode phase.

FA3 (`hopper/flash_api.cpp`, `mha_fwd`) runs the same warp-specialised kernel as the forward
pass (`forward.py`) with three switches this module turns into decisions:

- **Split** (`num_splits > 1`): each (sequence, KV head) range of keys is cut into
  `num_splits` ranges, one CTA each; every split writes an FP32 partial O and its log-sum-exp
  (`out_accum`, `softmax_lse_accum`) and FA3's combine kernel (`flash_fwd_combine_kernel.h`,
  8 rows per 256-thread block for dv > 64, 16 for dv <= 64) merges them. FA3 takes up to 256
  splits; the shared domain stops at 128 (`split_kv.MAX_NUM_SPLITS`).
- **PackGQA** (`pack_gqa`): the query heads sharing a KV head become rows of one 64-row wgmma
  tile. FA3 offers both for one split on a TMA-loaded cache (`pack_gqa` is an argument of
  `mha_fwd`), and compiles the split and the paged non-TMA paths with PackGQA only
  (`run_mha_fwd`: `PackGQA = PackGQA_ || Arch < 90 || PagedKVNonTMA || Split`): that is the
  `fa3_pack_gqa` rule here.
- **Paged KV** (`page_table`): any page size (FA3 reads it from the cache tensor's shape).
  A page that is a whole number of K/V tiles is loaded by TMA, one page index per tile
  (`get_pagedkv_tma`: `page_size % kBlockN == 0`); otherwise the producer warpgroup gathers
  the tile row by row with cp.async after a page-table lookup per row (`paged_kv.h`,
  `PagedKVManager`). Both costs are on the tile load (`paged_tile_load_cycles`).

The cost is fa3's own forward model (`cost.py`) run on each (num_splits, pack_gqa) group's
transformed problem by `split_kv.split_kv_perf`, which adds the FP32 partials, the busy-SM
bound and the combine. With `seq_len_kv == seq_len` the forward registration declares none of
these decisions and its answers are the forward model's alone. FA3's own choices (`get_num_splits`,
`get_pack_gqa`, `heuristics.h`) are compared with the model's in docs/model.md 13.9; they are
not rules here. Formulas and sources: docs/model.md sections 11 and 13.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...hardware import CudaDevice
from ...problem import AttentionProblem
from ...space import ConfigArrays, FloatArray, IntArray, ceil_div
from ...split_kv import PAGE_ADDRESS_CYCLES, PageRule, SplitKv, may_pack, split_reason

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# FA3 takes any page size; `--page-size auto` chooses among these (a page of 256 keys already
# holds a whole tile of every power-of-two block_n, so larger pages only tie with it).
FA3_PAGES = PageRule(
    rule=(
        "any positive size (FlashAttention-3 reads it from the cache's shape; a page that is a "
        "whole number of K/V tiles is loaded by TMA, any other row by row by the producer "
        "warpgroup, with GQA packed)"
    ),
    auto_domain=(16, 32, 64, 128, 256),
)
# The paged non-TMA path: 128 producer threads, 8 of them per 128-byte row chunk
# (`PagedKVManager`: kGmemThreadsPerRow = kBlockKGmem / kGmemElemsPerLoad), so one pass of the
# producer covers 16 rows, each with its own page-table entry and 64-bit pointer (shared
# through warp shuffles).
GATHER_ROWS_PER_PASS = 16


def fa3_combine_rows(problem: AttentionProblem, dv: int) -> int:
    """FA3's combine kernel: kBlockM = 8 rows per 256-thread block for its 128-wide head-dim
    instantiation (dv > 64), 16 for the 64-wide one (`run_mha_fwd_combine_`)."""
    return 16 if dv <= 64 else 8


# FA3 takes any page: no rule on how a tile and a page fit (page_fit None).
FA3_SPLIT_KV = SplitKv(fa3_combine_rows, pack_gqa=may_pack, pages=FA3_PAGES, page_fit=None)


def paged_tma(cfg: ConfigArrays) -> IntArray:
    """1 where the page holds a whole number of K/V tiles (FA3 loads the tile by TMA)."""
    return np.asarray(cfg["page_size"] % cfg["block_n"] == 0, dtype=np.int64)


def paged_tile_load_cycles(cfg: ConfigArrays, device: CudaDevice) -> FloatArray | float:
    """A paged cache's lookups on each tile load (0.0 for a contiguous cache): one dependent
    L2 round trip for the page indices, then the address work of one page per tile (TMA) or
    of every row, 16 rows per producer pass (the row gather), docs/model.md 13.9."""
    if "page_size" not in cfg:
        return 0.0
    rtt = float(device.throughput.l2_hit_latency_cycles)
    passes = ceil_div(cfg["block_n"], GATHER_ROWS_PER_PASS).astype(np.float64)
    work = np.where(paged_tma(cfg) == 1, 1.0, passes)
    return np.asarray(rtt + PAGE_ADDRESS_CYCLES * work)


def split_reason_lines(table: CandidateTable, i: int) -> list[str]:
    """The split, PackGQA and paging lines of configuration i's reasons."""
    lines = []
    if "num_splits" in table.cfg:
        packed = "pack_gqa" in table.cfg and int(table.cfg["pack_gqa"][i]) == 1
        path = "split path" if int(table.cfg["num_splits"][i]) > 1 else "one split"
        lines.append(
            f"FlashAttention-3 {path}{' with PackGQA' if packed else ''}: " + split_reason(table, i)
        )
    if "page_size" in table.cfg:
        page = int(table.cfg["page_size"][i])
        bn = int(table.common["block_n"][i])
        if page % bn == 0:
            lines.append(
                f"paged KV: {page}-key pages hold whole {bn}-key tiles, loaded by TMA "
                "(one page-table lookup per tile)"
            )
        else:
            lines.append(
                f"paged KV: {page}-key pages do not hold whole {bn}-key tiles: the producer "
                f"warpgroup gathers each tile row by row ({bn} lookups), GQA packed"
            )
    return lines


class Fa3PackGqa(Constraint):
    """GQA packed wherever FA3 compiles the path with PackGQA only."""

    name = "fa3_pack_gqa"
    rule = (
        "pack_gqa = 1 with more than one split or a paged cache gathered row by row "
        "(FlashAttention-3 compiles those paths with PackGQA only)"
    )
    short = "pack"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        if "pack_gqa" not in ev.cfg:
            return []
        return [Rule("fa3_unpacked", fa3_unpacked(ev), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)}: FlashAttention-3 packs GQA there ({self.rule})"


def fa3_unpacked(ev: Evaluation) -> IntArray:
    """1 where pack_gqa = 0 on a path FA3 compiles with PackGQA only."""
    forced = ev.cfg["num_splits"] > 1 if "num_splits" in ev.cfg else np.zeros(len(ev.cfg), bool)
    if "page_size" in ev.cfg:
        forced = forced | (paged_tma(ev.cfg) == 0)
    return np.asarray(forced & (ev.cfg["pack_gqa"] == 0), dtype=np.int64)
