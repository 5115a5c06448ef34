"""FlashAttention-4's split-KV and pack-GQA paths (the `split_kv.SplitKv` objects the `fa4`
family's designs hold): against a longer cache (forward phase, `seq_len_kv > seq_len`) and in
its decode phase. Formulas: docs/model.md sections 13 and 17.4.

- **sm_100.** The interface splits the keys into `num_splits` ranges (up to 128: its
  `num_splits_heuristic(..., 128)`), each range a CTA writing an FP32 partial O merged by its
  combine kernel (`flash_fwd_combine.py`: 8 rows per block for head_dim_v > 64, 16 below), and
  packs a KV head's query heads into the rows of a tile (`pack_gqa`). The kernel asserts no
  split for padded head_dim_v >= 192 (`flash_fwd_sm100.py`: "SplitKV is not supported for
  hdim >= 192"); the hd256 kernel takes neither a split nor packing. A split or packed tile with
  a GQA group that does not divide block_m turns the 2-CTA path off (`fa4_shape`).
- **sm_120.** The interface asserts `num_splits == 1` on 12.x and rejects paged KV there
  (interface.py:1362-1365): one split; GQA may be packed (the SM80 kernel's PackGQA).

Neither design has a paged-KV path here: FA4's paged cache (TMA for a page of block_n keys, a
row gather otherwise) is not modelled, so `--page-size` is refused naming the families that
have one. FA4's own split heuristic is compared with the model's in docs/model.md 17.4; it is
not a rule here.
"""

from __future__ import annotations

from ...hardware import HardwareSpec
from ...problem import AttentionProblem
from ...split_kv import (
    RowsCap,
    SplitKv,
    decode_block_m_cap,
    may_pack,
    never_packs,
    num_splits_domain,
)
from .shape import BLOCK_M, is_hd256, kernel_head_dims

SPLIT_MAX_HEAD_DIM_V = 192  # padded head_dim_v from which the sm_100 kernel does not split


def fa4_combine_rows(problem: AttentionProblem, dv: int) -> int:
    """Rows one block of FA4's combine kernel merges: tile_m = 8 for head_dim_v > 64 (its
    k_block_size 128), 16 otherwise (interface.py `_flash_attn_fwd_combine`)."""
    return 16 if dv <= 64 else 8


def sm100_split_counts(
    problem: AttentionProblem, hardware: HardwareSpec, min_block_n: int
) -> tuple[int, ...]:
    """One split where the sm_100 kernels do not split (padded head_dim_v >= 192, the hd256
    kernel); otherwise the powers of two of `split_kv.num_splits_domain`."""
    _, dv = kernel_head_dims(problem)
    if dv >= SPLIT_MAX_HEAD_DIM_V or is_hd256(problem):
        return (1,)
    return num_splits_domain(problem, min_block_n)


def sm100_pack_gqa(problem: AttentionProblem) -> tuple[int, ...]:
    """Both, except on the hd256 kernel, which asserts no pack-GQA."""
    return never_packs(problem) if is_hd256(problem) else may_pack(problem)


def one_split(
    problem: AttentionProblem, hardware: HardwareSpec, min_block_n: int
) -> tuple[int, ...]:
    """The sm_120 kernel does not split (interface.py asserts num_splits == 1 on 12.x)."""
    return (1,)


def sm100_rows_cap(problem: AttentionProblem, pack: tuple[int, ...]) -> int:
    """A decode tile holds the tcgen05 M (128 rows) whatever the query rows: the cap is 128,
    or the packed rows rounded up to a power of two where they are more."""
    return max(BLOCK_M, decode_block_m_cap(problem, pack))


SM100_DECODE_ROWS = RowsCap(
    rule="block_m at most max(128, the query rows of a sequence's packed group)",
    cap=sm100_rows_cap,
)

FA4_SM100_SPLIT_KV = SplitKv(
    combine_rows=fa4_combine_rows,
    split_counts=sm100_split_counts,
    pack_gqa=sm100_pack_gqa,
    pages=None,
    rows=SM100_DECODE_ROWS,
)
FA4_SM120_SPLIT_KV = SplitKv(
    combine_rows=fa4_combine_rows, split_counts=one_split, pack_gqa=may_pack, pages=None
)
