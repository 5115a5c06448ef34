"""PyTorch FlexAttention's Triton templates (`flex`): the forward template (`forward.py`; on
rocm devices `rocm.py`, whose `FlexForward` is the forward registration), the
backward template (`backward.py`, cost in `backward_cost.py`) and FlexDecoding (`decode.py`),
with the block mask (`mask.py`, `sparse.py`) and what the templates share (`template.py`)."""

# (phase, module, class): the registry imports a module when a family of its phase is
# first asked for, so a forward question loads no backward or decode model (registry.py).
REGISTRATIONS = (
    ("forward", "rocm", "FlexForward"),
    ("backward", "backward", "FlexAttentionBackward"),
    ("decode", "decode", "FlexDecoding"),
)
