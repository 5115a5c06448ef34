"""FlashAttention-3 (`fa3`, Hopper): its structure and parameters (`shape.py`), resources
(`resources.py`), cost (`cost.py`), split-KV path (`split.py`), and the forward and decode
registrations (`forward.py`, `decode.py`); its backward kernel's structure
(`backward_shape.py`), resources (`backward_resources.py`), cost (`backward_cost.py`) and
registration (`backward.py`)."""

from .backward import Fa3Backward
from .decode import Fa3Decode
from .forward import FlashAttention3

REGISTRATIONS = (FlashAttention3(), Fa3Decode(), Fa3Backward())
