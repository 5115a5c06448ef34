"""The answer cache: a thread-safe, bounded LRU keyed on every input that decides the answer.

The key is a digest of the canonical JSON of the decoded request — the problem, the hardware
(the canonical catalog name, or the full inline description), the options except the time limit
— and the model and catalog versions. Only proven answers (optimal or infeasible) are stored:
they do not depend on the time limit, so a repeat with any limit may be answered from here.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Generic, TypeVar

from tilesolve.solver import (
    CATALOG_VERSION,
    AttentionProblem,
    HardwareSpec,
    SolveOptions,
    get_hardware,
)
from tilesolve.solver.solve import model_version

V = TypeVar("V")


def answer_key(
    problem: AttentionProblem, hardware: str | HardwareSpec, options: SolveOptions
) -> bytes:
    """The cache key of one decoded request; a catalog name is resolved to its canonical name
    (so `a100` and `A100-SXM4-80GB` share answers), which raises UnknownHardwareError."""
    spec = hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)
    if isinstance(hardware, HardwareSpec):
        device = "inline:" + hardware.model_dump_json()
    else:
        device = "catalog:" + spec.name
    parts = (
        problem.model_dump_json(),
        device,
        options.model_dump_json(exclude={"time_limit_s"}),
        # MODEL_VERSION, suffixed for a calibrated device (a profile's constants).
        model_version(spec),
        CATALOG_VERSION,
    )
    return hashlib.sha256("\0".join(parts).encode()).digest()


class LruCache(Generic[V]):
    """At most `capacity` values, least recently used evicted first; capacity 0 stores nothing."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"cache capacity must be >= 0; got {capacity}")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[bytes, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: bytes, value: V) -> None:
        if self.capacity == 0:
            return
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
