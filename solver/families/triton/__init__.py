"""A generic Triton FlashAttention kernel (`triton`, the Triton tutorial's design): its forward
kernel with a split grid (`forward.py`) and its backward kernel (`backward.py`, cost in
`backward_cost.py`)."""

# (phase, module, class): the registry imports a module when a family of its phase is
# first asked for, so a forward question loads no backward or decode model (registry.py).
REGISTRATIONS = (
    ("forward", "forward", "TritonFlashAttention"),
    ("backward", "backward", "TritonFlashAttentionBackward"),
)
