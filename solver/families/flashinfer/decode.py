"""FlashInfer's decode registration (`flashinfer`, decode): the tensor-core prefill template
(FlashInfer's `use_tensor_cores`) or the CUDA-core decode kernel (`decode_kernel.py`), with
split-KV and paged KV (docs/model.md sections 13 and 14)."""

from __future__ import annotations

from ...problem import Phase
from .forward import FlashInfer


class FlashInferDecode(FlashInfer):
    """flashinfer, decode: the tensor-core template or the CUDA-core decode kernel."""

    phase = Phase.DECODE
    split_kv = FlashInfer.split_kv.for_decode()
