"""FlashAttention-2 (`fa2`): its forward kernel with the split-KV path (`forward.py`), its
decode registration (`decode.py`) and its backward kernel (`backward.py`, cost in
`backward_cost.py`)."""

# (phase, module, class): the registry imports a module when a family of its phase is
# first asked for, so a forward question loads no backward or decode model (registry.py).
REGISTRATIONS = (
    ("forward", "forward", "FlashAttention2"),
    ("backward", "backward", "FlashAttention2Backward"),
    ("decode", "decode", "FlashAttention2Decode"),
)
