"""FlashAttention-2's decode registration (`fa2`, decode): its split-KV kernel
(`mha_fwd_kvcache`) for 1 to 64 query rows per sequence against the cache (docs/model.md
section 13)."""

from __future__ import annotations

from ...problem import Phase
from .forward import FlashAttention2


class FlashAttention2Decode(FlashAttention2):
    """fa2 decode: FlashAttention-2's split-KV kernel (mha_fwd_kvcache) for 1..64 query rows."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-2 decode (split-KV kernel: num_splits ranges of keys per head, FP32 "
        "partials merged by a combine kernel; GQA packed for one query row; paged KV)"
    )
    split_kv = FlashAttention2.split_kv.for_decode()
