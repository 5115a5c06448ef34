"""FlashAttention-3's split-KV, pack-GQA and paged-KV paths: the `fa3` family against a longer
cache (forward phase, `seq_len_kv > seq_len`) and its decode phase.

FA3 (`hopper/flash_api.cpp`, `mha_fwd`) runs the same warp-specialised kernel as the forward
family (`fa3.py`) with three switches this module turns into decisions:

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
  `PagedKVManager`). Both costs are on the tile load (`tile_load_extra_cycles`).

The cost is fa3's own forward model (`fa3_cost.py`) run on each (num_splits, pack_gqa) group's
transformed problem by `split_kv.split_kv_perf`, which adds the FP32 partials, the busy-SM
bound and the combine. With `seq_len_kv == seq_len` the forward registration declares none of
these decisions and its answers are those of `fa3.py`. FA3's own choices (`get_num_splits`,
`get_pack_gqa`, `heuristics.h`) are compared with the model's in docs/model.md 13.9; they are
not rules here. Formulas and sources: docs/model.md sections 11 and 13.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..constraints import Constraint, ConstraintKind, Rule
from ..cost import Perf
from ..errors import FieldViolation
from ..hardware import CudaDevice, HardwareSpec
from ..problem import AttentionProblem, Phase, SolveOptions
from ..space import Config, ConfigArrays, FloatArray, IntArray, Param, ceil_div
from .cuda import cuda_device
from .cuda_split import cuda_rates, split_reason
from .fa3 import WGMMA_K_BYTES, FlashAttention3
from .fa3_cost import evaluate_fa3
from .split_kv import (
    PAGE_ADDRESS_CYCLES,
    DecodeRows,
    PageRule,
    SplitTiles,
    decode_block_m_cap,
    decode_violations,
    gqa_group,
    num_splits_domain,
    page_param,
    split_kv_perf,
    split_params,
    sub_evaluation,
)

if TYPE_CHECKING:
    from ..candidates import CandidateTable, Evaluation

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
SPLIT_NAMES = ("num_splits", "pack_gqa")


def combine_rows_per_block(dv: int) -> int:
    """FA3's combine kernel: kBlockM = 8 rows per 256-thread block for its 128-wide head-dim
    instantiation (dv > 64), 16 for the 64-wide one (`run_mha_fwd_combine_`)."""
    return 16 if dv <= 64 else 8


def paged_tma(cfg: ConfigArrays) -> IntArray:
    """1 where the page holds a whole number of K/V tiles (FA3 loads the tile by TMA)."""
    return np.asarray(cfg["page_size"] % cfg["block_n"] == 0, dtype=np.int64)


class Fa3SplitKv(FlashAttention3):
    """fa3, forward: FlashAttention-3 with its split and pack-GQA paths for prefill against a
    longer cache, and paged KV. Without a longer cache, FlashAttention-3's forward family."""

    paged_kv_rule = FA3_PAGES.rule

    # ---- what the family states ----------------------------------------------------------
    def splits_declared(self, problem: AttentionProblem) -> bool:
        """num_splits and pack_gqa are decisions against a longer K/V (a cache)."""
        return problem.seq_len_kv_eff > problem.seq_len

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        base = super().params(problem, hardware)
        if not self.splits_declared(problem):
            return base
        step = WGMMA_K_BYTES // problem.dtype.bytes  # the smallest block_n
        splits = num_splits_domain(problem, step)
        return base + split_params(problem, splits, (0, 1))

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        params = self.params(problem, hardware)
        page = page_param(self.name, FA3_PAGES, options)
        return params if page is None else (*params, page)

    def decode_rows_cap(self, problem: AttentionProblem) -> int | None:
        return None

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        own: list[Constraint] = []
        if self.splits_declared(problem):
            own.append(SplitTiles())
        if self.splits_declared(problem) and gqa_group(problem) > 1:
            own.append(Fa3PackGqa())  # pack_gqa is declared
        cap = self.decode_rows_cap(problem)
        if cap is not None:
            own.append(DecodeRows(cap))
        return (*super().constraints(hardware, problem, options), *own)

    # ---- the cost ------------------------------------------------------------------------
    def tile_load_extra_cycles(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray | float:
        """A paged cache's lookups on each tile load: one dependent L2 round trip for the page
        indices, then the address work of one page per tile (TMA) or of every row, 16 rows
        per producer pass (the row gather), docs/model.md 13.9."""
        if "page_size" not in cfg:
            return 0.0
        rtt = float(device.throughput.l2_hit_latency_cycles)
        passes = ceil_div(cfg["block_n"], GATHER_ROWS_PER_PASS).astype(np.float64)
        work = np.where(paged_tma(cfg) == 1, 1.0, passes)
        return np.asarray(rtt + PAGE_ADDRESS_CYCLES * work)

    def evaluate(self, ev: Evaluation) -> Perf:
        if not any(name in ev.cfg for name in SPLIT_NAMES):
            return super().evaluate(ev)
        device = cuda_device(ev.hardware)
        n = len(ev.cfg)

        def forward(problem: AttentionProblem, indices: IntArray) -> Perf:
            return evaluate_fa3(self, sub_evaluation(ev, problem, indices, n))

        _, dv = self.kernel_head_dims(ev.problem)
        return split_kv_perf(
            ev.problem,
            ev.cfg,
            ev.common,
            forward,
            cuda_rates(device),
            dv,
            combine_rows_per_block(dv),
        )

    # ---- ties, reasons, the validator ----------------------------------------------------
    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """After fa3's order: fewer splits (less partial traffic), then the smaller page."""
        own = [ev.cfg[name] for name in ("num_splits", "page_size") if name in ev.cfg]
        return [*super().tie_keys(ev), *own]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        lines = super().reason_lines(table, i)
        if "num_splits" in table.cfg:
            packed = "pack_gqa" in table.cfg and int(table.cfg["pack_gqa"][i]) == 1
            path = "split path" if int(table.cfg["num_splits"][i]) > 1 else "one split"
            lines.append(
                f"FlashAttention-3 {path}{' with PackGQA' if packed else ''}: "
                + split_reason(table, i)
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

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        out = super().check(hardware, problem, options, config)
        values = config.as_dict()
        splits = values.get("num_splits", 1)
        tiles = -(-problem.seq_len_kv_eff // values["block_n"])
        if splits > tiles:
            out.append(f"split_tiles: {splits} splits > {tiles} K/V tiles")
        page = values.get("page_size")
        row_gather = page is not None and page % values["block_n"] != 0
        if values.get("pack_gqa") == 0 and (splits > 1 or row_gather):
            out.append("fa3_pack_gqa: FA3 packs GQA on its split and paged non-TMA paths")
        cap = self.decode_rows_cap(problem)
        if cap is not None and values["block_m"] > cap:
            out.append(f"decode_rows: block_m {values['block_m']} > {cap}")
        return out


class Fa3Decode(Fa3SplitKv):
    """fa3 decode: FlashAttention-3's split / PackGQA / paged path for 1..64 query rows."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-3 decode on Hopper (mha_fwd with num_splits ranges of keys per KV head, "
        "PackGQA putting a KV head's query heads in one 64-row wgmma tile, FP32 partials merged "
        "by FA3's combine kernel; paged KV by TMA or by the producer's row gather)"
    )

    def splits_declared(self, problem: AttentionProblem) -> bool:
        return True

    def decode_rows_cap(self, problem: AttentionProblem) -> int | None:
        return decode_block_m_cap(problem, (0, 1))

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        own = super()._family_violations(problem, hardware)
        if any(v.field == "kernel" for v in own):
            return own
        fields_named = {v.field for v in own}
        extra = [
            v
            for v in decode_violations(problem)
            if not (v.field == "dropout" and "dropout" in fields_named)
        ]
        return [*own, *extra]


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
        return [Rule("fa3_unpacked", _unpacked(ev), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)}: FlashAttention-3 packs GQA there ({self.rule})"


def _unpacked(ev: Evaluation) -> IntArray:
    forced = ev.cfg["num_splits"] > 1 if "num_splits" in ev.cfg else np.zeros(len(ev.cfg), bool)
    if "page_size" in ev.cfg:
        forced = forced | (paged_tma(ev.cfg) == 0)
    return np.asarray(forced & (ev.cfg["pack_gqa"] == 0), dtype=np.int64)


__all__ = ["FA3_PAGES", "Fa3Decode", "Fa3PackGqa", "Fa3SplitKv"]
