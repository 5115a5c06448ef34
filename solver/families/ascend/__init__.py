"""The `ascend` family (Huawei's DaVinci AI core): the device's rates and kernels
(`device.py`), the buffers and their constraints (`buffers.py`), the cube/vector cost model
(`cost.py`), the forward registration (`forward.py`) and the decode registration, CANN's
IncreFlashAttention (`decode.py`)."""

# (phase, module, class): the registry imports a module when a family of its phase is
# first asked for, so a forward question loads no backward or decode model (registry.py).
REGISTRATIONS = (
    ("forward", "forward", "AscendFlashAttention"),
    ("decode", "decode", "AscendIncreFlashAttention"),
)
