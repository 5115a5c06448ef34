"""FlashAttention-2 and Triton with split-KV: prefill against a longer cache (forward phase)
and decode (decode phase).

The forward registrations are the fa2 and triton families with the split-KV decisions added
when `seq_len_kv > seq_len`; with `seq_len_kv == seq_len` their space and answers are those of
`fa2.py` and `triton.py`. The decode registrations are the same kernels for 1 to 64 query
rows per sequence. Sources: FlashAttention-2 `csrc/flash_attn/flash_api.cpp`
(`num_splits_heuristic`, `set_params_splitkv`, `seqlenq_ngroups_swapped`, the paged-KV block
size check) and `flash_fwd_launch_template.h` (`run_mha_fwd_splitkv_dispatch`,
`run_flash_splitkv_fwd`); docs/model.md section 13.
"""

from __future__ import annotations

from ..errors import FieldViolation
from ..hardware import HardwareSpec
from ..problem import AttentionProblem, Phase
from .cuda_split import SplitKvMixin
from .fa2 import FlashAttention2
from .split_kv import PageRule, decode_block_m_cap, decode_violations
from .triton import TritonFlashAttention

# FlashAttention-2's paged KV: "Paged KV cache block size must be divisible by 256"
# (flash_api.cpp, mha_fwd_kvcache and mha_varlen_fwd). Auto chooses among 256, 512 and 1024.
FA2_PAGES = PageRule(
    rule="a multiple of 256 (FlashAttention-2's paged KV cache)",
    auto_domain=(256, 512, 1024),
    multiple_of=256,
)


class FlashAttention2SplitKv(SplitKvMixin, FlashAttention2):
    """fa2 forward: FlashAttention-2 with its split-KV kernel for prefill against a cache."""

    page_rule = FA2_PAGES
    paged_kv_rule = FA2_PAGES.rule

    def split_domain(self, problem: AttentionProblem) -> tuple[int, ...] | None:
        """FlashAttention-2 has no split-KV with dropout (`set_params_splitkv`)."""
        return (1,) if problem.dropout > 0 else None

    def pack_domain(self, problem: AttentionProblem) -> tuple[int, ...]:
        """FlashAttention-2 packs the GQA group into the rows only for one query row (its
        `seqlenq_ngroups_swapped`: seqlen_q == 1, more query heads than KV heads, no dropout,
        no window), and then always: the domain is one value."""
        return (1,) if problem.seq_len == 1 and problem.dropout == 0 else (0,)


class FlashAttention2Decode(FlashAttention2SplitKv):
    """fa2 decode: FlashAttention-2's split-KV kernel (mha_fwd_kvcache) for 1..64 query rows."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-2 decode (split-KV kernel: num_splits ranges of keys per head, FP32 "
        "partials merged by a combine kernel; GQA packed for one query row; paged KV)"
    )

    def splits_declared(self, problem: AttentionProblem) -> bool:
        return True

    def decode_rows_cap(self, problem: AttentionProblem) -> int | None:
        return decode_block_m_cap(problem, self.pack_domain(problem))

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return [*super()._family_violations(problem, hardware), *decode_violations(problem)]


class TritonSplitKv(SplitKvMixin, TritonFlashAttention):
    """triton forward: the tutorial kernel with a split grid for prefill against a cache."""


__all__ = [
    "FlashAttention2Decode",
    "FlashAttention2SplitKv",
    "TritonSplitKv",
]
