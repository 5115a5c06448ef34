"""FlashAttention-2 (`fa2`): its forward kernel with the split-KV path (`forward.py`), its
decode registration (`decode.py`) and its backward kernel (`backward.py`, cost in
`backward_cost.py`)."""

from .backward import FlashAttention2Backward
from .decode import FlashAttention2Decode
from .forward import FlashAttention2

REGISTRATIONS = (FlashAttention2(), FlashAttention2Backward(), FlashAttention2Decode())
