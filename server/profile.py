"""`tilesolve-server --profile FILE`: answer requests that name the profile's device with the
calibrated device (fitted constants; docs/model.md section 15). Requests naming other
devices, or carrying an inline device, are answered as without a profile. A calibrated answer
carries `MODEL_VERSION+cal.<digest>`, and its cache key holds the calibrated device and that
version, so no answer is shared between calibrated and uncalibrated models.
"""

from __future__ import annotations

import json
from pathlib import Path

from tilesolve.solver import CudaDevice, HardwareSpec, get_hardware
from tilesolve.solver.apps.calibrate import parse_profile, profile_device

# A profile is a few constants and where they come from (a few KiB).
PROFILE_MAX_BYTES = 1024 * 1024


def load_profile_file(path: str | Path) -> CudaDevice:
    """The calibrated device of a profile file. Raises OSError, ValueError (over
    PROFILE_MAX_BYTES, not UTF-8 JSON, nested deeper than Python's parser goes) or the solver's
    InvalidRequestError (not a profile, or one fitted against another model)."""
    with open(path, "rb") as handle:
        raw = handle.read(PROFILE_MAX_BYTES + 1)
    if len(raw) > PROFILE_MAX_BYTES:
        raise ValueError(f"{path} is over {PROFILE_MAX_BYTES} bytes, the limit for a profile")
    try:
        data = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{path}: brackets nested too deep for a profile") from None
    return profile_device(parse_profile(data, str(path)), str(path))


def with_profile(hardware: str | HardwareSpec, profile: CudaDevice | None) -> str | HardwareSpec:
    """The device to solve on: the profile's calibrated device for a catalog name or alias of
    its device; anything else unchanged (an unknown name raises as it would later)."""
    if profile is None or not isinstance(hardware, str):
        return hardware
    return profile if get_hardware(hardware).name == profile.name else hardware
