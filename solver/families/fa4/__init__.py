"""FlashAttention-4 (`fa4`, Blackwell): its structure and parameters on sm_100 (`shape.py`),
resources (`resources.py`: tensor memory, the shared-memory ring, the warp roles' registers),
cost (`cost.py`), split-KV paths (`split.py`), the two kernels (`sm100.py`, `sm120.py`) and the
forward and decode registrations (`forward.py`, `decode.py`) that hand each device to its
kernel."""

# (phase, module, class): the registry imports a module when a family of its phase is
# first asked for, so a forward question loads no backward or decode model (registry.py).
REGISTRATIONS = (
    ("forward", "forward", "FlashAttention4"),
    ("decode", "decode", "Fa4Decode"),
)
