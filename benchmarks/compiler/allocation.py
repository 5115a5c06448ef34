"""Approximate statements of how much shared memory Triton 3.9 allocates for the two kernels
(docs/model.md "Compiler truth"). Neither is the model: phase 2 of issue 21 states the rule in
the triton family; the compiled figures, not these, are the data.

- `predicted_shared_bytes`, learnt from shared-memory-only compiles of a few tiles per target
  before the collection, chooses the plan's `near_limit` stratum (configurations just below and
  just above each target's limit). It is frozen: changing it changes the plan.
- `observed_forward_bytes` restates the forward kernel's allocation as the first collected
  rows showed it; `compare.py --allocation` counts how often each rule is exact.

`predicted_shared_bytes`:

Bytes, with e the element size, d the padded head dim, s = num_stages and B the pipeline
buffers (s - 1 on the mma.sync path; s on the wgmma path of sm90/sm100, warps a multiple of 4
and block_m >= 64 per warpgroup; AMD's stream pipeliner: s - 1 for s <= 3, and 4 or more
stages fall back to 2):

    forward   B * (K + V) tiles (block_n x d each) + max(Q tile (block_m x d), one K tile)
    backward  the larger loop's: resident tiles + B * streamed tiles, where the dK/dV loop
              holds K and V (block_n rows) and streams Q, dO (block_m rows) and their LSE and
              D (4 bytes each per row), and the dQ loop holds Q and dO (dq_block_m rows) and
              streams K and V (dq_block_n rows)

with B at least 1 (one stage has one buffer of each streamed tile).
"""

from __future__ import annotations

from configs import Tile, Variant

WGMMA_TARGETS = frozenset({"sm90", "sm100"})
AMD_TARGETS = frozenset({"gfx942", "gfx950"})
LSE_D_BYTES_PER_ROW = 8  # the log-sum-exp and D = rowsum(O o dO), fp32 each


def pipeline_buffers(target: str, tile: Tile, rows: int) -> int:
    """Buffers of each streamed tile the pipeliner keeps (see the module docstring)."""
    stages = tile.num_stages
    if target in AMD_TARGETS:
        stages = stages if stages <= 3 else 2
        return max(stages - 1, 1)
    warpgroups = max(tile.num_warps // 4, 1)
    wgmma = tile.num_warps % 4 == 0 and rows >= 64 * warpgroups
    if target in WGMMA_TARGETS and wgmma and stages > 1:
        return stages
    return max(stages - 1, 1)


def predicted_shared_bytes(target: str, kernel: str, variant: Variant, tile: Tile) -> int:
    """Approximate dynamic shared memory of one configuration, bytes."""
    e = 2  # fp16 and bf16
    d = variant.padded_head_dim
    if kernel == "fwd":
        kv_tile = tile.block_n * d * e
        q_tile = tile.block_m * d * e
        buffers = pipeline_buffers(target, tile, tile.block_m)
        return buffers * 2 * kv_tile + max(q_tile, kv_tile)
    row = 2 * d * e  # one row of two operands (K and V, or Q and dO)
    loop1 = tile.block_n * row + pipeline_buffers(target, tile, tile.block_n) * tile.block_m * (
        row + LSE_D_BYTES_PER_ROW
    )
    loop2 = (
        tile.dq_block_m * (row + LSE_D_BYTES_PER_ROW)
        + pipeline_buffers(target, tile, tile.dq_block_m) * tile.dq_block_n * row
    )
    return max(loop1, loop2)


def observed_forward_bytes(target: str, variant: Variant, tile: Tile) -> int:
    """The forward kernel's shared memory as the collected rows show it, bytes (Q, K and V
    tiles: block_m x d and block_n x d elements of 2 bytes):

    - mma.sync path (sm80, sm86, sm89, sm120; sm90 and sm100 when not on the wgmma path):
      Q stays in shared memory for the whole loop (its dot operand is re-read from there each
      iteration) and the pipeliner keeps s - 1 K and V buffers; one stage keeps one K buffer
      (V reuses it): Q + (s - 1)(K + V), or Q + K when s = 1;
    - wgmma path (sm90, sm100; warps a multiple of 4, 64 query rows per warpgroup): s buffers
      of K and V: Q + s (K + V) (Q + K when s = 1);
    - AMD (gfx942, gfx950): Q passes through LDS once, before the loop (its operand then lives
      in registers), so the peak is the larger of Q and the (s - 1) K/V buffers; one stage
      keeps one K buffer.

    What it misses: layout-conversion and reduction scratch live beside the buffers (2 to 16
    KiB on some tiles), sm100's barriers and tensor-memory staging, sm75 (no pipeliner; its
    FMA dot operands are staged through shared memory: no rule stated)."""
    e = 2
    d = variant.padded_head_dim
    k = tile.block_n * d * e
    q = tile.block_m * d * e
    s = tile.num_stages
    if target in AMD_TARGETS:
        return k if s == 1 else max(q, (s - 1) * 2 * k)
    buffers = pipeline_buffers(target, tile, tile.block_m)
    return q + (k if s == 1 else buffers * 2 * k)
