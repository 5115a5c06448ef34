"""FlashAttention-3 (`fa3`, Hopper): its structure and parameters (`shape.py`), resources
(`resources.py`), cost (`cost.py`), split-KV path (`split.py`), and the forward and decode
registrations (`forward.py`, `decode.py`)."""

from .decode import Fa3Decode
from .forward import FlashAttention3

REGISTRATIONS = (FlashAttention3(), Fa3Decode())
