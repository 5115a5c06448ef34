"""FlashAttention-3 (`fa3`, Hopper): its structure and parameters (`shape.py`), resources
(`resources.py`), cost (`cost.py`), split-KV path (`split.py`), and the forward and decode
registrations (`forward.py`, `decode.py`); its backward kernel's structure
(`backward_shape.py`), resources (`backward_resources.py`), cost (`backward_cost.py`) and
registration (`backward.py`)."""

# (phase, module, class): the registry imports a module when a family of its phase is
# first asked for, so a forward question loads no backward or decode model (registry.py).
REGISTRATIONS = (
    ("forward", "forward", "FlashAttention3"),
    ("decode", "decode", "Fa3Decode"),
    ("backward", "backward", "Fa3Backward"),
)
