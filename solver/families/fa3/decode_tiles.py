"""The tiles FlashAttention-3's decode runs: its kernel is the forward's template, instantiated
with the one tile `tile_size_fwd_sm90` returns for the head dims, the element size and the
flags (hopper/tile_size.h lines 10-54 at commit 0251105a; hopper/flash_fwd_launch_template.h
line 40 builds the kernel with it). Of those flags a tilesolve decode problem fixes the head
dims, the element size and the mask (no local window, no softcap, V row-major); the one left is
whether a paged cache is read without TMA (`PagedKVNonTMA`: FA3's `get_pagedkv_tma` takes TMA
only for a page of whole TMA tiles and more packed query rows than the TMA instance's kBlockM,
so a decode step of a few rows reads its pages without TMA). docs/model.md 13.9."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...space import ConfigArrays, IntArray
from ...split_kv import RowsCap
from .shape import BLOCK_M_VALUES, kernel_head_dims

if TYPE_CHECKING:
    from ...candidates import Evaluation
    from ...problem import AttentionProblem


def tile_size_fwd_sm90(
    head_dim: int, head_dim_v: int, causal: bool, element_size: int, paged_non_tma: bool
) -> tuple[int, int]:
    """(kBlockM, kBlockN) of FA3's tile_size_fwd_sm90 without a local window or softcap and with
    V row-major (tile_size.h lines 13-52)."""
    narrow = causal or paged_non_tma
    if element_size == 2:
        if head_dim <= 64:
            if head_dim_v == 256:
                return 128, 96
            return 192, 128 if narrow else 192
        if head_dim <= 96:
            return 192, 128 if paged_non_tma else 144
        if head_dim <= 128:
            return 128, 128 if narrow else 176
        if head_dim <= 192:
            return 128, 96 if paged_non_tma else (128 if head_dim_v <= 128 else 112)
        return 128, 80
    if head_dim <= 64:
        return 192, 160
    if head_dim <= 96:
        return 192, 128
    if head_dim <= 128:
        return 128, 160 if paged_non_tma else 224
    if head_dim <= 192:
        return 128, 160
    return 128, 128


# The decode registration's cap on a block's rows: FA3 runs its instance's kBlockM (64-192) for
# however few query rows a sequence has, the empty ones included.
FA3_DECODE_ROWS = RowsCap(
    rule=f"block_m at most {BLOCK_M_VALUES[-1]} (FA3 decodes with its instance's rows)",
    cap=lambda problem, pack: BLOCK_M_VALUES[-1],
)


def off_instance(cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
    """1 for a configuration whose (block_m, block_n) is not the instance FA3 builds for it."""
    d, dv = kernel_head_dims(problem)
    elem = problem.dtype.bytes
    bm, bn = cfg["block_m"], cfg["block_n"]
    non_tma = np.zeros(len(cfg), dtype=np.bool_)
    if "page_size" in cfg:
        # get_pagedkv_tma (hopper/flash_api.cpp lines 415-424): TMA only for a page holding
        # whole tiles of the TMA instance and more packed query rows than its kBlockM
        m_tma, n_tma = tile_size_fwd_sm90(d, dv, problem.causal, elem, False)
        rows = problem.seq_len * problem.heads // problem.kv_heads_eff
        non_tma = (cfg["page_size"] % n_tma != 0) | (rows <= m_tma)
    ok = np.zeros(len(cfg), dtype=np.bool_)
    for flag in (False, True):
        m, n = tile_size_fwd_sm90(d, dv, problem.causal, elem, flag)
        ok |= (non_tma == flag) & (bm == m) & (bn == n)
    return np.asarray(~ok, dtype=np.int64)


class Fa3DecodeTile(Constraint):
    """Legality: the tile is the one FA3's decode kernel is instantiated with."""

    name = "fa3_decode_tile"
    rule = (
        "block_m x block_n is FlashAttention-3's tile_size_fwd_sm90 for the head dims, dtype, "
        "mask and paged load (the decode kernel's one instance)"
    )
    short = "instance"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("off_instance", off_instance(ev.cfg, ev.problem), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        d, dv = kernel_head_dims(ev.problem)
        elem = ev.problem.dtype.bytes
        tiles = {tile_size_fwd_sm90(d, dv, ev.problem.causal, elem, f) for f in (False, True)}
        named = " or ".join(f"{m}x{n}" for m, n in sorted(tiles))
        return f"{ev.label(i)}: FA3's decode kernel is built with {named} here"
