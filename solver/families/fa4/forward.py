"""FlashAttention-4 (`fa4`, forward): the family that answers on Blackwell, by the kernel the
device runs (`shape.design`): the tcgen05 / tensor-memory kernel on compute capability 10.x and
11.x (`sm100.py`), the SM80 mma.sync port on 12.x (`sm120.py`). The registered family holds
both designs and hands every part of the interface to the one of the device: their parameters
differ (q_stage and cta_group on sm_100; num_warps and num_stages on sm_120), and a
configuration's own parameters say which design made it (`common_fields`, `label`).

Sources: Dao-AILab/flash-attention@0251105a `flash_attn/cute/` (`interface.py`: which kernel
each architecture runs), Zadouri et al., "FlashAttention-4" (2026). Formulas: docs/model.md
section 17.
"""

from __future__ import annotations

from typing import ClassVar

from ...dispatch import ByDevice
from ...errors import FieldViolation
from ...family import KernelFamily
from ...hardware import HardwareSpec
from ...space import ConfigArrays
from .shape import Design, design, device_violation
from .sm100 import Fa4Sm100
from .sm120 import Fa4Sm120
from .split import FA4_SM100_SPLIT_KV

# The parameter only the sm_100 design declares: it tells a configuration's design apart.
SM100_ONLY_PARAMETER = "q_stage"


class FlashAttention4(ByDevice):
    """fa4 forward: FlashAttention-4's sm_100 kernel on compute capability 10.x, its sm_120
    kernel on 12.x."""

    name = "fa4"
    device_kind = "cuda"
    summary = (
        "FlashAttention-4 forward (sm_100: tcgen05 into tensor memory, warp roles, 2-CTA "
        "clusters; sm_120: the SM80 mma.sync design under 99 KB)"
    )
    # Neither design has a paged-KV path (split.py); the sm_100 design's split-KV path
    split_kv = FA4_SM100_SPLIT_KV
    designs: ClassVar[dict[Design, KernelFamily]] = {
        Design.SM100: Fa4Sm100(),
        Design.SM120: Fa4Sm120(),
    }

    def on(self, hardware: HardwareSpec) -> KernelFamily:
        """The design that runs on `hardware` (a family checks the device before it gets
        here)."""
        chosen = design(hardware)
        if chosen is None:
            raise TypeError(f"fa4 has no kernel for {hardware.name}")
        return self.designs[chosen]

    def of(self, cfg: ConfigArrays) -> KernelFamily:
        """The design whose parameters `cfg` has."""
        chosen = Design.SM100 if SM100_ONLY_PARAMETER in cfg else Design.SM120
        return self.designs[chosen]

    def _device_violations(self, hardware: HardwareSpec) -> list[FieldViolation]:
        return [device_violation(hardware)] if design(hardware) is None else []
