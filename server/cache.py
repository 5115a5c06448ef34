"""The answer cache: a thread-safe LRU of serialized answers, capped in bytes, keyed on the
canonical form of the request.

The key (`request_key`) is a digest of the request as decoded and re-encoded deterministically,
with what cannot change a proven answer taken out: unknown fields (a client's padding never
enters a key or the cache), the time limit, and the spelling of a catalog name (`a100` and
`A100-SXM4-80GB` are the same device); the model and catalog versions are part of it. Only
proven answers (optimal or infeasible) are stored: they do not depend on the time limit, so a
repeat with any limit may be answered from here. A value is the serialized SolveResponse as it
was first sent, the very bytes; a hit sends it followed by the encoding of `cache_hit` and the
repeat's own time limit, which a parser merges into it (`wire.cache_hit_response`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from google.protobuf.message import Message

from tilesolve.solver import CATALOG_VERSION, MODEL_VERSION, get_hardware
from tilesolve.solver.errors import TilesolveError
from tilesolve.v1 import tilesolve_pb2 as pb

# What one entry costs beyond its key and value: the dict slot, the linked-list node and the
# two bytes objects' headers (measured on CPython 3.11: about 200 bytes).
ENTRY_OVERHEAD_BYTES = 256
_VERSIONS = f"{MODEL_VERSION}\0{CATALOG_VERSION}\0".encode()


def discard_unknown_fields(message: Message) -> None:
    """Drop the fields this server's schema does not know, at every depth."""
    message.DiscardUnknownFields()  # type: ignore[attr-defined]  # (missing from the stubs)


def canonical_name(name: str) -> str:
    """A catalog name or alias as the catalog's canonical name; anything else as it is."""
    try:
        return get_hardware(name).name
    except TilesolveError:
        return name


def request_key(request: pb.SolveRequest, salt: bytes = b"") -> bytes:
    """The cache key of one SolveRequest: see the module's docstring. `salt` names what else
    decides the answer (a calibration profile's model version)."""
    canonical = pb.SolveRequest()
    canonical.CopyFrom(request)
    discard_unknown_fields(canonical)
    canonical.options.ClearField("time_limit_s")
    if canonical.hardware.WhichOneof("hardware") == "name":
        canonical.hardware.name = canonical_name(canonical.hardware.name)
    return hashlib.sha256(
        _VERSIONS + salt + b"\0" + canonical.SerializeToString(deterministic=True)
    ).digest()


class LruCache:
    """Byte strings by key, at most `max_bytes` in all (keys, values and ENTRY_OVERHEAD_BYTES
    each), least recently used evicted first; 0 stores nothing. A value larger than a quarter
    of the cap is not stored (it would evict too much)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"cache size must be >= 0 bytes; got {max_bytes}")
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._bytes = 0
        self._entries: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _cost(key: bytes, value: bytes) -> int:
        return len(key) + len(value) + ENTRY_OVERHEAD_BYTES

    def get(self, key: bytes) -> bytes | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: bytes, value: bytes) -> None:
        cost = self._cost(key, value)
        if cost > self.max_bytes // 4:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= self._cost(key, old)
            self._entries[key] = value
            self._bytes += cost
            while self._bytes > self.max_bytes:
                evicted_key, evicted = self._entries.popitem(last=False)
                self._bytes -= self._cost(evicted_key, evicted)
                self.evictions += 1

    @property
    def nbytes(self) -> int:
        """Bytes held, as the cap counts them."""
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
