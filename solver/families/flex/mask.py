"""FlexAttention's block mask (`torch.nn.attention.flex_attention.BlockMask`) as the flex family
models it: its block size (the request's `sparse_block_size`, default 128, FlexAttention's
`_DEFAULT_SPARSE_BLOCK_SIZE`), which of its blocks are empty, partial or full for a causal
mask, a sliding window, or a stated density, and the K/V iterations the templates run over the
non-empty ones.

The templates loop over the K/V blocks the BlockMask lists for each query block (partial blocks
first, with mask_mod, then full blocks without it), `SPARSE_KV_BLOCK_SIZE / BLOCK_N` iterations
per listed block; empty blocks are skipped, and nothing finer is (flex_attention.py.jinja,
`forward_inner`; reference/flex_attention.md sections 4 and 6). So the iterations follow the
mask at the block mask's granularity, not the tile's: a causal triangle at block size 128 runs
whole 128 x 128 diagonal blocks whatever BLOCK_M and BLOCK_N are.

Visibility of key k to query row r (0-based), with the problem's bottom-right alignment
off = seq_len_kv - seq_len: causal, k <= r + off; a window W with causal, r + off - W < k <=
r + off; a window without causal, |r + off - k| < W.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...problem import AttentionProblem, SolveOptions
from ...space import ConfigArrays, IntArray, ceil_div
from ..cuda.forward import KvIterations

DEFAULT_SPARSE_BLOCK_SIZE = 128  # torch.nn.attention.flex_attention._DEFAULT_SPARSE_BLOCK_SIZE
# mask_mod cost on a partial block relative to the causal comparison (cuda.timing's
# MASK_OPS_PER_SCORE): a window compares against both of its ends.
WINDOW_MASK_WEIGHT = 2.0


def sparse_block_size(options: SolveOptions) -> int:
    """The block mask's block size, tokens (both the Q and the KV block size)."""
    return options.sparse_block_size or DEFAULT_SPARSE_BLOCK_SIZE


def has_mask(problem: AttentionProblem, options: SolveOptions) -> bool:
    """Whether the request describes a mask at all (causal, a window or a density)."""
    return problem.causal or options.window is not None or options.block_density is not None


@dataclass(frozen=True)
class BlockCounts:
    """The block mask's non-empty and partial K/V blocks per query block: sums over every
    query block but the last (each `size` rows), and the last one's (`last_rows` rows)."""

    size: int
    query_blocks: int  # the full query blocks (every one but the last)
    nonempty: float  # listed K/V blocks, summed over the full query blocks
    partial: float  # of them, those that apply mask_mod
    last_nonempty: float
    last_partial: float
    last_rows: int
    most: float  # the most K/V blocks one query block lists
    mask_weight: float  # mask_mod cost per partial element, relative to the causal one


def _bounds(
    problem: AttentionProblem, options: SolveOptions, rows: IntArray
) -> tuple[IntArray, IntArray]:
    """The lowest and highest key each query row sees (may lie outside 0..seq_len_kv - 1)."""
    off = problem.seq_len_kv_eff - problem.seq_len
    diagonal = rows + off
    window = options.window
    if problem.causal:
        low = diagonal - window + 1 if window is not None else np.zeros_like(rows)
        return low, diagonal
    if window is not None:
        return diagonal - window + 1, diagonal + window - 1
    return np.zeros_like(rows), np.full_like(rows, problem.seq_len_kv_eff - 1)


def block_counts(problem: AttentionProblem, options: SolveOptions) -> BlockCounts:
    """Count the block mask's listed and partial K/V blocks for every query block."""
    size = sparse_block_size(options)
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    kv_blocks = -(-sk // size)
    first = np.arange(0, sq, size, dtype=np.int64)
    last = np.minimum(first + size, sq) - 1
    if options.block_density is not None:
        listed = np.full(len(first), float(max(1, round(options.block_density * kv_blocks))))
        partial = listed.copy()
        weight = 1.0
    else:
        low_first, high_first = _bounds(problem, options, first)
        low_last, high_last = _bounds(problem, options, last)
        start = np.maximum(low_first, 0)
        end = np.minimum(high_last, sk - 1)
        listed = np.where(end >= start, end // size - start // size + 1, 0).astype(np.float64)
        # full: a block whose keys every row of the query block sees
        full_start = -(-np.maximum(low_last, 0) // size)
        full_end = np.where(high_first >= sk - 1, kv_blocks - 1, (high_first + 1) // size - 1)
        full = np.clip(full_end - full_start + 1, 0, None).astype(np.float64)
        partial = np.maximum(listed - np.minimum(full, listed), 0.0)
        weight = WINDOW_MASK_WEIGHT if options.window is not None else 1.0
        if not problem.causal and options.window is None:
            partial = np.zeros_like(listed)
    return BlockCounts(
        size=size,
        query_blocks=len(first) - 1,
        nonempty=float(listed[:-1].sum()),
        partial=float(partial[:-1].sum()),
        last_nonempty=float(listed[-1]),
        last_partial=float(partial[-1]),
        last_rows=int(sq - first[-1]),
        most=float(listed.max()),
        mask_weight=weight,
    )


def masked_iterations(
    counts: BlockCounts, cfg: ConfigArrays, n_kv: IntArray, imbalanced: bool
) -> KvIterations:
    """The templates' K/V iterations of one head: every program of a query block runs
    size / block_n iterations per listed K/V block (at most the K/V's tiles); the partial ones
    apply mask_mod (`diagonal`, weighted by its cost; `partial`, unweighted)."""
    bm = cfg.block_m.astype(np.float64)
    per_block = counts.size / cfg.block_n.astype(np.float64)
    programs = counts.size / bm
    last_programs = ceil_div(counts.last_rows, cfg.block_m).astype(np.float64)
    tiles = n_kv.astype(np.float64)
    every_program = counts.query_blocks * programs + last_programs
    # a program stops at the last K/V tile (a K/V shorter than one mask block)
    total = np.minimum(
        (counts.nonempty * programs + counts.last_nonempty * last_programs) * per_block,
        every_program * tiles,
    )
    partial = (counts.partial * programs + counts.last_partial * last_programs) * per_block
    longest = np.minimum(counts.most * per_block, tiles)
    return KvIterations(
        total=total,
        diagonal=partial * counts.mask_weight,
        longest=longest,
        imbalanced=imbalanced,
        masked=True,
        partial=partial,
    )


def mask_words(problem: AttentionProblem, options: SolveOptions) -> str:
    """The mask in words, for the reasons."""
    if options.block_density is not None:
        return f"block density {options.block_density:g}"
    parts = []
    if problem.causal:
        parts.append("causal")
    if options.window is not None:
        parts.append(f"window {options.window}")
    return " + ".join(parts) or "no mask"


def block_mask_line(problem: AttentionProblem, options: SolveOptions) -> str:
    """The reasons' line on the block mask."""
    size = sparse_block_size(options)
    return (
        f"block mask {size}x{size} ({mask_words(problem, options)}): "
        "empty blocks skipped, mask_mod on partial blocks"
    )


def iterations_for(
    problem: AttentionProblem, options: SolveOptions, cfg: ConfigArrays, n_kv: IntArray
) -> KvIterations | None:
    """The flex iterations of a masked problem; None without a mask (all of K/V)."""
    if not has_mask(problem, options):
        return None
    imbalanced = problem.causal and options.window is None and options.block_density is None
    return masked_iterations(block_counts(problem, options), cfg, n_kv, imbalanced)
