"""The pure solver core of tilesolve: hardware catalog, occupancy, kernel families,
performance model, and the tile program (CP-SAT, with an exhaustive oracle).

No gRPC, no protobuf, no environment, no sockets. The one entry point most callers need:

    from tilesolve.solver import AttentionProblem, solve
    answer = solve(AttentionProblem(seq_len=4096, head_dim=128), "a100-80gb")

The names below are loaded when first used (PEP 562 `__getattr__`): importing the package, or
one light module of it (`errors`, `versions`, `names`), does not load numpy, pandas or
OR-Tools, so the CLI can answer from its cache and report bad input without them.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .answer import Candidate, SolveAnswer, Status
    from .apps.memory import MemoryEstimate, Roofline, estimate_memory, memory_sweep
    from .apps.simulate import SimulationResult, simulate
    from .errors import FieldViolation, InvalidRequestError, TilesolveError, UnknownHardwareError
    from .hardware import (
        CATALOG_VERSION,
        AscendDevice,
        CudaDevice,
        HardwareSpec,
        get_hardware,
        hardware_names,
        load_catalog,
        parse_hardware,
    )
    from .occupancy import Occupancy, occupancy
    from .problem import AttentionProblem, DType, Engine, Phase, SolveOptions
    from .registry import family_names, register, unregister
    from .solve import MODEL_VERSION, solve
    from .space import Config, Param

# Each public name and the module that defines it.
_MODULE_OF = {
    "Candidate": ".answer",
    "SolveAnswer": ".answer",
    "Status": ".answer",
    "MemoryEstimate": ".apps.memory",
    "Roofline": ".apps.memory",
    "estimate_memory": ".apps.memory",
    "memory_sweep": ".apps.memory",
    "SimulationResult": ".apps.simulate",
    "simulate": ".apps.simulate",
    "FieldViolation": ".errors",
    "InvalidRequestError": ".errors",
    "TilesolveError": ".errors",
    "UnknownHardwareError": ".errors",
    "CATALOG_VERSION": ".hardware",
    "AscendDevice": ".hardware",
    "CudaDevice": ".hardware",
    "HardwareSpec": ".hardware",
    "get_hardware": ".hardware",
    "hardware_names": ".hardware",
    "load_catalog": ".hardware",
    "parse_hardware": ".hardware",
    "Occupancy": ".occupancy",
    "occupancy": ".occupancy",
    "AttentionProblem": ".problem",
    "DType": ".problem",
    "Engine": ".problem",
    "Phase": ".problem",
    "SolveOptions": ".problem",
    "family_names": ".registry",
    "register": ".registry",
    "unregister": ".registry",
    "MODEL_VERSION": ".solve",
    "solve": ".solve",
    "Config": ".space",
    "Param": ".space",
}

__all__ = [
    "CATALOG_VERSION",
    "MODEL_VERSION",
    "AscendDevice",
    "AttentionProblem",
    "Candidate",
    "Config",
    "CudaDevice",
    "DType",
    "Engine",
    "FieldViolation",
    "HardwareSpec",
    "InvalidRequestError",
    "MemoryEstimate",
    "Occupancy",
    "Param",
    "Phase",
    "Roofline",
    "SimulationResult",
    "SolveAnswer",
    "SolveOptions",
    "Status",
    "TilesolveError",
    "UnknownHardwareError",
    "estimate_memory",
    "family_names",
    "get_hardware",
    "hardware_names",
    "load_catalog",
    "memory_sweep",
    "occupancy",
    "parse_hardware",
    "register",
    "simulate",
    "solve",
    "unregister",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (and then kept)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


class _Package(types.ModuleType):
    """This package: importing a submodule binds it as the package's attribute, which would
    hide the function of the same name (`solve` in solve.py, `occupancy` in occupancy.py);
    the public name stays the function, as it was when the package imported it eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _MODULE_OF and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
