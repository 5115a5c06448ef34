"""A generic Triton FlashAttention kernel (`triton`, the Triton tutorial's design): its forward
kernel with a split grid (`forward.py`) and its backward kernel (`backward.py`, cost in
`backward_cost.py`)."""

from .backward import TritonFlashAttentionBackward
from .forward import TritonFlashAttention

REGISTRATIONS = (TritonFlashAttention(), TritonFlashAttentionBackward())
