"""The `ascend` family (Huawei's DaVinci AI core): the device's rates and kernels
(`device.py`), the buffers and their constraints (`buffers.py`), the cube/vector cost model
(`cost.py`), the forward registration (`forward.py`) and the decode registration, CANN's
IncreFlashAttention (`decode.py`)."""

from .decode import AscendIncreFlashAttention
from .forward import AscendFlashAttention

REGISTRATIONS = (AscendFlashAttention(), AscendIncreFlashAttention())
