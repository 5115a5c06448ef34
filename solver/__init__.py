"""The pure solver core of tilesolve: hardware catalog, occupancy, kernel families,
performance model, and the tile program (CP-SAT, with an exhaustive oracle).

No gRPC, no protobuf, no environment, no sockets. The one entry point most callers need:

    from tilesolve.solver import AttentionProblem, solve
    answer = solve(AttentionProblem(seq_len=4096, head_dim=128), "a100-80gb")
"""

from .answer import Candidate, SolveAnswer, Status
from .apps.memory import MemoryEstimate, Roofline, estimate_memory, memory_sweep
from .apps.simulate import SimulationResult, simulate
from .errors import FieldViolation, InvalidRequestError, TilesolveError, UnknownHardwareError
from .hardware import (
    CATALOG_VERSION,
    AscendDevice,
    CudaDevice,
    HardwareSpec,
    RocmDevice,
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
    "RocmDevice",
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
