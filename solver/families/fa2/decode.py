"""FlashAttention-2's decode registration (`fa2`, decode): its split-KV kernel
(`mha_fwd_kvcache`) for 1 to 64 query rows per sequence against the cache (docs/model.md
section 13).

The kernel's tiles are its own template instances, not the forward's: `mha_fwd_kvcache`
launches the split-KV kernel whenever it appends new keys, gathers a batch index or reads a
paged cache (`run_mha_fwd(..., force_split_kernel)`, flash_api.cpp line 1457 at v2.8.3), and
`run_mha_fwd_splitkv_dispatch` instantiates one tile per head dim: kBlockM = 64 ("Fixed for
all head dimensions"), kBlockN = 256 up to head dim 64, 128 up to 128, 64 above, 4 warps
(flash_fwd_launch_template.h lines 164-170 at v2.8.3, commit 060c9188)."""

from __future__ import annotations

from ...hardware import HardwareSpec
from ...problem import AttentionProblem, Phase
from ...space import Param
from .forward import FlashAttention2

SPLITKV_BLOCK_M = 64
SPLITKV_WARPS = 4


def splitkv_block_n(head_dim: int) -> int:
    """kBlockN of FA2's split-KV kernel for a kernel head dim."""
    return 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64


class FlashAttention2Decode(FlashAttention2):
    """fa2 decode: FlashAttention-2's split-KV kernel (mha_fwd_kvcache) for 1..64 query rows."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-2 decode (split-KV kernel: num_splits ranges of keys per head, FP32 "
        "partials merged by a combine kernel; GQA packed for one query row; paged KV)"
    )
    split_kv = FlashAttention2.split_kv.for_decode()

    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        """The split-KV kernel's one tile for the problem's head dim."""
        d, _ = self.kernel_head_dims(problem)
        return (
            Param("block_m", (SPLITKV_BLOCK_M,), "query rows per block (kBlockM = 64, split-KV)"),
            Param(
                "block_n",
                (splitkv_block_n(d),),
                "key/value rows per iteration (split-KV kBlockN: 256 to head dim 64, 128 to "
                "128, 64 above)",
            ),
            Param("num_warps", (SPLITKV_WARPS,), "warps per block (the split-KV kernel's 4)"),
            Param("num_stages", (1,), "K/V pipeline depth (FlashAttention-2 is single-buffered)"),
        )
