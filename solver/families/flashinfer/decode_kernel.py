"""FlashInfer's CUDA-core decode kernel (`include/flashinfer/attention/decode.cuh`,
`BatchDecodeWithPagedKVCacheDispatched`): its layout, fixed by the problem (docs/model.md
section 14). One query token, its group of `bdy = GROUP_SIZE` heads per block, `bdx =
head_dim / vec_size` threads along the head dim (vec_size = max(16 / sizeof(KV), head_dim /
32) elements each), `bdz = max(128, bdx·bdy) / (bdx·bdy)` groups of threads along the keys,
`tile_size_per_bdx` tokens per thread per stage (4 without GQA, 1 with, for 16-bit KV) and
NUM_STAGES_SMEM = 2 stages on sm80+: a stage holds tile_size_per_bdx x bdy x bdz tokens.
"""

from __future__ import annotations

from ..cuda.resources import WARP_LANES

# The decode kernel (decode.cuh), 16-bit KV: 16-byte vectors, 2 shared-memory stages on sm80+
DECODE_VECTOR_BYTES = 16
DECODE_MIN_THREADS = 128
DECODE_STAGES = 2
DECODE_GROUP_SIZES = (1, 2, 3, 4, 8)  # DISPATCH_GQA_GROUP_SIZE


def decode_layout(head_dim: int, group: int, elem: int) -> dict[str, int]:
    """The CUDA-core decode kernel's layout (BatchDecodeWithPagedKVCacheDispatched)."""
    vec = max(DECODE_VECTOR_BYTES // elem, head_dim // WARP_LANES)
    bdx = head_dim // vec
    threads = max(DECODE_MIN_THREADS, bdx * group)
    bdz = threads // (bdx * group)
    tile = (4 if elem == 2 else 2) if group == 1 else 1
    return {
        "vec_size": vec,
        "bdx": bdx,
        "bdy": group,
        "bdz": bdz,
        "threads": threads,
        "tile_size_per_bdx": tile,
        "tokens_per_stage": tile * group * bdz,
        "stages": DECODE_STAGES,
    }
