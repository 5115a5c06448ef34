"""Kernel families: the tile domain and resource formulas of each kernel design."""

from __future__ import annotations

from ..errors import FieldViolation, InvalidRequestError
from ..hardware import HardwareSpec
from .base import KernelFamily
from .fa2 import FlashAttention2
from .triton import TritonFlashAttention

FAMILIES: dict[str, KernelFamily] = {
    family.name: family for family in (FlashAttention2(), TritonFlashAttention())
}
PLANNED_FAMILIES = ("fa3", "ascend")


def get_family(name: str | None, hardware: HardwareSpec) -> KernelFamily:
    """The named family, or the hardware's default; unknown or unbuilt names are errors."""
    chosen = name or hardware.default_kernel
    family = FAMILIES.get(chosen)
    if family is None:
        if chosen in PLANNED_FAMILIES:
            detail = f"kernel family {chosen!r} is not modelled yet"
        else:
            detail = f"unknown kernel family {chosen!r}"
        if hardware.arch == "cuda":
            allowed = f"allowed: {', '.join(sorted(FAMILIES))}"
        else:
            allowed = (
                f"no family for {hardware.arch} devices such as {hardware.name} is modelled yet"
            )
        raise InvalidRequestError([FieldViolation("kernel", f"{detail}; {allowed}")])
    return family


__all__ = ["FAMILIES", "KernelFamily", "get_family"]
