"""FlashInfer (`flashinfer`): its FA2-style prefill template and CUDA-core decode kernel
(`forward.py`, `decode_kernel.py`), registered for the forward and decode phases."""

from .decode import FlashInferDecode
from .forward import FlashInfer

REGISTRATIONS = (FlashInfer(), FlashInferDecode())
