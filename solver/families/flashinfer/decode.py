"""FlashInfer's decode registration (`flashinfer`, decode): the tensor-core prefill template
(FlashInfer's `use_tensor_cores`) or the CUDA-core decode kernel (`decode_kernel.py`), with
split-KV and paged KV (docs/model.md sections 13 and 14).

The tensor-core template runs only in the layouts FlashInfer instantiates: the dispatcher
derives the warps and MMA rows from CTA_TILE_Q (prefill.cuh `get_num_warps_q`: 4 above 16 rows,
else 1; `get_num_warps_kv`: 4 / warps_q; `get_num_mma_q`: 2 above 64 rows, else 1), so the
layouts are CTA_TILE_Q 128 (4 query warps of 2 MMA rows), 64 (4 of 1) and 16 (one query warp,
4 on the keys) — flashinfer-ai/flashinfer at the commit of tests/data/flashinfer_prefill_tiles.json.
"""

from __future__ import annotations

import numpy as np

from ...hardware import CudaDevice
from ...problem import AttentionProblem, Phase
from ...space import BoolArray, ConfigArrays
from .forward import FlashInfer


def instantiated_layout(cfg: ConfigArrays) -> BoolArray:
    """(warps_kv, mma_q) of a CTA_TILE_Q FlashInfer dispatches: (1, 2), (1, 1) or (4, 1)."""
    wkv, mq = cfg["warps_kv"], cfg["mma_q"]
    return np.asarray(((wkv == 1) & (mq <= 2)) | ((wkv == 4) & (mq == 1)), dtype=np.bool_)


class FlashInferDecode(FlashInfer):
    """flashinfer, decode: the tensor-core template or the CUDA-core decode kernel."""

    phase = Phase.DECODE
    split_kv = FlashInfer.split_kv.for_decode()
    alignment_rule = (
        f"{FlashInfer.alignment_rule}; the tensor-core template in the layouts FlashInfer "
        "dispatches (CTA_TILE_Q 128: 4 query warps x 2 MMA rows; 64: 4 x 1; 16: 1 query warp, "
        "4 on the keys)"
    )

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        ok = super().alignment_ok(cfg, problem, device) & instantiated_layout(cfg)
        return np.asarray(ok, dtype=np.bool_)
