"""PyTorch FlexAttention's Triton templates (`flex`): the forward template (`forward.py`), the
backward template (`backward.py`, cost in `backward_cost.py`) and FlexDecoding (`decode.py`),
with the block mask (`mask.py`, `sparse.py`) and what the templates share (`template.py`)."""

from .backward import FlexAttentionBackward
from .decode import FlexDecoding
from .forward import FlexAttention

REGISTRATIONS = (FlexAttention(), FlexAttentionBackward(), FlexDecoding())
