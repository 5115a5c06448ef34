"""Bounds on what a request may carry and on what the server writes back.

Inbound: every string, repeated field and map of a request is checked against a size before
anything is decoded or solved (`request_violations`): names are catalog names or aliases (at
most 64 characters), kernel families at most 32, any other string at most 4096 characters
(an inline description's citations and notes), any list or map at most 256 entries. A
violation names the field, the limit and the size it got, never the value itself.

Outbound: every status message, field path and description the server sends is cut to a
size (`clip`), and the violations of one status to a total, so that an error's trailers stay
far below the 8 KiB of metadata a gRPC client accepts by default, whatever the input echoed
into them (an unknown name, a value pydantic quotes back).
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from tilesolve.solver import FieldViolation
from tilesolve.v1 import tilesolve_pb2 as pb

# ---- inbound -----------------------------------------------------------------------------

MAX_STRING_CHARS = 4096
MAX_NAME_CHARS = 64  # catalog names and aliases: the catalog's own pattern allows 64
MAX_KERNEL_CHARS = 32  # kernel family names (a device's default_kernel allows 32)
MAX_ENTRIES = 256  # items of any repeated field or map
MAX_REPORTED = 16  # size violations reported for one request

# (message full name, field name) -> (limit, what the field holds)
_STRING_LIMITS: dict[tuple[str, str], tuple[int, str]] = {
    (pb.HardwareRef.DESCRIPTOR.full_name, "name"): (MAX_NAME_CHARS, "a catalog name or alias"),
    (pb.GetHardwareRequest.DESCRIPTOR.full_name, "name"): (
        MAX_NAME_CHARS,
        "a catalog name or alias",
    ),
    (pb.SolveOptions.DESCRIPTOR.full_name, "kernel"): (MAX_KERNEL_CHARS, "a kernel family"),
    (pb.EstimateMemoryRequest.DESCRIPTOR.full_name, "kernel"): (
        MAX_KERNEL_CHARS,
        "a kernel family",
    ),
    (pb.SolveOptions.DESCRIPTOR.full_name, "parameter_pins"): (
        MAX_NAME_CHARS,
        "a parameter name",
    ),
}


@dataclass(frozen=True)
class _Walk:
    found: list[FieldViolation]

    def string(self, path: str, text: str, limit: tuple[int, str] | None) -> None:
        most, what = limit if limit is not None else (MAX_STRING_CHARS, "")
        if len(text) > most:
            kind = f" ({what})" if what else ""
            self.found.append(
                FieldViolation(
                    path, f"must be at most {most} characters{kind}; got {len(text)} characters"
                )
            )

    def entries(self, path: str, count: int, kind: str) -> bool:
        if count <= MAX_ENTRIES:
            return True
        self.found.append(
            FieldViolation(path, f"must have at most {MAX_ENTRIES} {kind}; got {count}")
        )
        return False

    def message(self, message: Message, prefix: str) -> None:
        owner = message.DESCRIPTOR.full_name
        for field, value in message.ListFields():
            if len(self.found) >= MAX_REPORTED:
                return
            path = f"{prefix}.{field.name}" if prefix else field.name
            limit = _STRING_LIMITS.get((owner, field.name))
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                if self.entries(path, len(value), "entries"):
                    key_field, value_field = (
                        field.message_type.fields_by_name["key"],
                        (field.message_type.fields_by_name["value"]),
                    )
                    for key in value:
                        if key_field.type == FieldDescriptor.TYPE_STRING:
                            self.string(f"{path} (a key)", key, limit)
                        item = value[key]
                        if value_field.type == FieldDescriptor.TYPE_STRING:
                            self.string(path, item, None)
                        elif value_field.message_type is not None:
                            self.message(item, path)
            elif field.is_repeated:
                if self.entries(path, len(value), "items"):
                    for item in value:
                        self.one(path, field, item, limit)
            else:
                self.one(path, field, value, limit)

    def one(self, path: str, field: FieldDescriptor, value: object, limit: object) -> None:
        if field.type == FieldDescriptor.TYPE_STRING and isinstance(value, str):
            self.string(path, value, limit if isinstance(limit, tuple) else None)
        elif field.type == FieldDescriptor.TYPE_BYTES and isinstance(value, bytes):
            self.string(path, value.decode("latin-1"), None)
        elif isinstance(value, Message):
            self.message(value, path)


def request_violations(message: Message, prefix: str = "") -> list[FieldViolation]:
    """Every string, list and map of `message` over its size limit (at most 16 reported)."""
    walk = _Walk([])
    walk.message(message, prefix)
    return walk.found


# ---- outbound ----------------------------------------------------------------------------

MAX_MESSAGE_BYTES = 1024  # a status message (grpc-message) or a batch item's message
MAX_FIELD_BYTES = 128  # a violation's field path
MAX_DESCRIPTION_BYTES = 1024  # a violation's description
MAX_VIOLATION_BYTES = 2048  # all violations of one status together
_CUT = "… (cut to {limit} bytes; {total} in all)"


def _wire_bytes(text: str) -> int:
    """Bytes `text` takes in a grpc-message header: UTF-8, every byte outside printable ASCII
    percent-encoded (three bytes)."""
    raw = text.encode("utf-8", "replace")
    return len(raw) + 2 * sum(1 for b in raw if b < 0x20 or b > 0x7E or b == 0x25)


def clip(text: str, limit: int) -> str:
    """`text` if it fits in `limit` header bytes, else its start and a note of the cut."""
    total = _wire_bytes(text)
    if total <= limit:
        return text
    note = _CUT.format(limit=limit, total=total)
    room = max(limit - _wire_bytes(note), 0)
    # Characters, not bytes, are kept: find the longest prefix that fits.
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _wire_bytes(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + note


def clip_violations(violations: tuple[FieldViolation, ...]) -> tuple[FieldViolation, ...]:
    """Each violation cut to size, and no more of them than fit in MAX_VIOLATION_BYTES (the
    last then says how many more there were)."""
    kept: list[FieldViolation] = []
    used = 0
    for index, v in enumerate(violations):
        one = FieldViolation(
            clip(v.field, MAX_FIELD_BYTES), clip(v.description, MAX_DESCRIPTION_BYTES)
        )
        size = _wire_bytes(one.field) + _wire_bytes(one.description)
        if used + size > MAX_VIOLATION_BYTES:
            left = len(violations) - index
            kept.append(FieldViolation("request", f"{left} more violations not shown"))
            break
        kept.append(one)
        used += size
    return tuple(kept)
