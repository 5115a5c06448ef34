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


def load_profile_file(path: str | Path) -> CudaDevice:
    """The calibrated device of a profile file. Raises OSError, ValueError (not JSON) or the
    solver's InvalidRequestError (not a profile, or one fitted against another model)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return profile_device(parse_profile(data, str(path)), str(path))


def with_profile(hardware: str | HardwareSpec, profile: CudaDevice | None) -> str | HardwareSpec:
    """The device to solve on: the profile's calibrated device for a catalog name or alias of
    its device; anything else unchanged (an unknown name raises as it would later)."""
    if profile is None or not isinstance(hardware, str):
        return hardware
    return profile if get_hardware(hardware).name == profile.name else hardware
