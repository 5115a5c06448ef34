"""FlashInfer (`flashinfer`): its FA2-style prefill template and CUDA-core decode kernel
(`forward.py`, `decode_kernel.py`), registered for the forward and decode phases."""

# (phase, module, class): the registry imports a module when a family of its phase is
# first asked for, so a forward question loads no backward or decode model (registry.py).
REGISTRATIONS = (
    ("forward", "forward", "FlashInfer"),
    ("decode", "decode", "FlashInferDecode"),
)
