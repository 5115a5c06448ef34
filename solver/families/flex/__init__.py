"""PyTorch FlexAttention's Triton templates (`flex`): the forward template (`forward.py`; on
rocm devices `rocm.py`, whose `FlexForward` is the forward registration), the
backward template (`backward.py`, cost in `backward_cost.py`) and FlexDecoding (`decode.py`),
with the block mask (`mask.py`, `sparse.py`) and what the templates share (`template.py`)."""

from .backward import FlexAttentionBackward
from .decode import FlexDecoding
from .rocm import FlexForward

REGISTRATIONS = (FlexForward(), FlexAttentionBackward(), FlexDecoding())
