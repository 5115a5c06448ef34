"""FlashAttention-4's decode registration (`fa4`, decode): 1 to 64 query rows per sequence
against the cache, through the split-KV and pack-GQA path of the device's design (split.py):
split ranges of keys merged by FA4's combine kernel on sm_100, one unsplit pass on sm_120
(FA4 does not split there). Formulas: docs/model.md sections 13 and 17.4."""

from __future__ import annotations

from typing import ClassVar

from ...family import KernelFamily
from ...problem import Phase
from .forward import FlashAttention4
from .shape import Design
from .sm100 import Fa4Sm100Decode
from .sm120 import Fa4Sm120Decode
from .split import FA4_SM100_SPLIT_KV


class Fa4Decode(FlashAttention4):
    """fa4 decode: the device's FlashAttention-4 kernel for 1..64 query rows per sequence."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-4 decode (sm_100: split-KV ranges per KV head, GQA packed into the "
        "128-row tcgen05 tile, FA4's combine kernel; sm_120: one unsplit pass)"
    )
    split_kv = FA4_SM100_SPLIT_KV.for_decode()
    designs: ClassVar[dict[Design, KernelFamily]] = {
        Design.SM100: Fa4Sm100Decode(),
        Design.SM120: Fa4Sm120Decode(),
    }
