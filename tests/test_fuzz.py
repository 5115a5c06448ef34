"""Fuzzing `tilesolve-server` over loopback: whole protobuf requests and random bytes.

Hypothesis draws every request from the messages' own descriptors: each field present or
not, integers at their type's extremes, NaN and infinities in inline hardware, strings of
up to 20,000 characters, lists and maps of up to 2,000 entries, enum numbers the schema does
not know, unknown fields of every wire type appended; half of them are a valid request with
some fields overwritten, so that the cases reach the solver, not only the decoder. Then random
bytes to every method. 5,200 cases in all, derandomized (the same cases on every run), against
one live server process: no crash, no UNKNOWN or INTERNAL, no status trailers past a few KiB,
and health still SERVING at the end.
"""

from __future__ import annotations

import math
import random
import struct
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilesolve.v1 import tilesolve_pb2 as pb

from harness import ServerProcess, cold_request

SERVICE = "tilesolve.v1.TileSolveService"
# Statuses a bad request may get; UNKNOWN, INTERNAL (a bug), UNAVAILABLE (a crash) may not.
ALLOWED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}
ALLOWED_NUMBERS = {0} | {code.value[0] for code in ALLOWED}
MAX_TRAILER_BYTES = 6 * 1024
CASES = {"Solve": 2200, "SolveBatch": 400, "others": 1600, "bytes": 1000}
_ran: dict[str, int] = dict.fromkeys(CASES, 0)
_outcomes: Counter[str] = Counter()  # status names over every case


def _settings(name: str) -> Callable[[Any], Any]:
    return settings(
        max_examples=CASES[name],
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# ---- strategies from the descriptors ------------------------------------------------------

_I32 = (0, 1, -1, 2**31 - 1, -(2**31), 2**30, 4096)
_I64 = (*_I32, 2**63 - 1, -(2**63), 2**53 + 1, 2**50, 2**40)
_FLOATS = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e-9, 0.5, 1e6)

_FIELD_TYPES = FieldDescriptor


def _integers(lo: int, hi: int, edges: tuple[int, ...]) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([e for e in edges if lo <= e <= hi]), st.integers(lo, hi))


def _text(huge: bool) -> st.SearchStrategy[str]:
    """A name-like string, any short text, or (`huge`) up to 20,000 characters."""
    short = st.one_of(
        st.sampled_from(["", "a100", "h100-sxm", "fa2", "triton", "cuda", "sm80", "t4"]),
        st.text(max_size=40),
    )
    if not huge:
        return short
    letter = st.characters(exclude_categories=["Cs"])  # protobuf strings are valid UTF-8
    return st.one_of(short, st.builds(lambda c, n: c * n, letter, st.integers(1000, 20_000)))


def _scalar(field: FieldDescriptor, huge: bool = True) -> st.SearchStrategy[Any]:
    """Any value of `field`'s type; strings are huge only where `huge` (not in the many
    entries of a long list or map: the requests stay within a few MB)."""
    kind = field.type
    if kind in (_FIELD_TYPES.TYPE_DOUBLE, _FIELD_TYPES.TYPE_FLOAT):
        width = 64 if kind == _FIELD_TYPES.TYPE_DOUBLE else 32
        return st.one_of(st.sampled_from(_FLOATS), st.floats(width=width))
    if kind in (_FIELD_TYPES.TYPE_INT64, _FIELD_TYPES.TYPE_SINT64, _FIELD_TYPES.TYPE_SFIXED64):
        return _integers(-(2**63), 2**63 - 1, _I64)
    if kind in (_FIELD_TYPES.TYPE_UINT64, _FIELD_TYPES.TYPE_FIXED64):
        return _integers(0, 2**64 - 1, _I64)
    if kind in (_FIELD_TYPES.TYPE_INT32, _FIELD_TYPES.TYPE_SINT32, _FIELD_TYPES.TYPE_SFIXED32):
        return _integers(-(2**31), 2**31 - 1, _I32)
    if kind in (_FIELD_TYPES.TYPE_UINT32, _FIELD_TYPES.TYPE_FIXED32):
        return _integers(0, 2**32 - 1, _I32)
    if kind == _FIELD_TYPES.TYPE_BOOL:
        return st.booleans()
    if kind == _FIELD_TYPES.TYPE_STRING:
        return _text(huge)
    if kind == _FIELD_TYPES.TYPE_BYTES:
        return st.binary(max_size=64)
    if kind == _FIELD_TYPES.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(known), st.integers(-(2**31), 2**31 - 1))
    raise AssertionError(f"no strategy for {field.full_name}")


def _many(field: FieldDescriptor) -> st.SearchStrategy[list[Any]]:
    """A short list, or a long one (one short item many times: cheap to draw)."""
    return st.one_of(
        st.lists(_scalar(field), max_size=3),
        st.builds(lambda x, n: [x] * n, _scalar(field, huge=False), st.integers(200, 2000)),
    )


@st.composite
def message(draw: st.DrawFn, descriptor: Descriptor, depth: int = 0) -> Message:
    """A message of `descriptor`'s type with any of its fields set to anything."""
    out: Any = _class_of(descriptor)()
    chosen_oneofs = {
        o.name: draw(st.sampled_from([None, *o.fields]))
        for o in descriptor.oneofs
        if not o.name.startswith("_")  # proto3 `optional`: a field of its own
    }
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and not oneof.name.startswith("_"):
            if chosen_oneofs[oneof.name] is not field:
                continue
        elif not draw(st.booleans()):
            continue
        _set(draw, out, field, depth)
    return out


def _class_of(descriptor: Descriptor) -> type[Message]:
    parent = descriptor.containing_type
    if parent is None:
        return getattr(pb, descriptor.name)  # type: ignore[no-any-return]
    return getattr(_class_of(parent), descriptor.name)  # type: ignore[no-any-return]


def _set(draw: st.DrawFn, out: Any, field: FieldDescriptor, depth: int) -> None:
    target = getattr(out, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key_field = field.message_type.fields_by_name["key"]
        value_field = field.message_type.fields_by_name["value"]
        count = draw(st.one_of(st.integers(0, 3), st.integers(200, 600)))
        filler = None
        if value_field.message_type is None:
            filler = draw(_scalar(value_field, huge=False))
        for i in range(count):
            key = draw(_scalar(key_field)) if i < 3 else f"k{i}"
            if value_field.message_type is not None:
                target[key].CopyFrom(draw(message(value_field.message_type, depth + 1)))
            else:
                target[key] = draw(_scalar(value_field)) if i < 3 else filler
    elif field.is_repeated:
        if field.message_type is not None:
            if depth < 2:
                for item in draw(st.lists(message(field.message_type, depth + 1), max_size=3)):
                    target.add().CopyFrom(item)
        else:
            target.extend(draw(_many(field)))
    elif field.message_type is not None:
        if depth < 4:
            target.CopyFrom(draw(message(field.message_type, depth + 1)))
            if not target.ListFields():
                target.SetInParent()
    else:
        setattr(out, field.name, draw(_scalar(field)))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


@st.composite
def unknown_fields(draw: st.DrawFn) -> bytes:
    """Well-formed fields with numbers no message here uses, of every wire type."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        number = draw(st.integers(1000, 2**29 - 1))
        wire = draw(st.sampled_from([0, 1, 2, 5]))
        key = _varint(number << 3 | wire)
        if wire == 0:
            parts.append(key + _varint(draw(st.integers(0, 2**64 - 1))))
        elif wire == 1:
            parts.append(key + struct.pack("<Q", draw(st.integers(0, 2**64 - 1))))
        elif wire == 5:
            parts.append(key + struct.pack("<I", draw(st.integers(0, 2**32 - 1))))
        else:
            size = draw(st.one_of(st.integers(0, 64), st.integers(10_000, 200_000)))
            parts.append(key + _varint(size) + bytes([size % 251]) * size)
    return b"".join(parts)


@st.composite
def solve_request(draw: st.DrawFn) -> pb.SolveRequest:
    drawn: Any = draw(message(pb.SolveRequest.DESCRIPTOR))
    if draw(st.booleans()):  # a valid request with some fields overwritten
        base = cold_request(draw(st.integers(0, 50)))
        base.MergeFrom(drawn)
        return base
    return drawn  # type: ignore[no-any-return]


def _request_bytes(draw: Callable[[st.SearchStrategy[bytes]], bytes], request: Message) -> bytes:
    return request.SerializeToString() + draw(unknown_fields())


# ---- the server and the checks ------------------------------------------------------------


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    with ServerProcess("--log-level", "warning") as server:
        options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        with grpc.insecure_channel(server.target, options=options) as ch:
            grpc.channel_ready_future(ch).result(timeout=30)
            yield ch
            health = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
            assert health.status == health_pb2.HealthCheckResponse.SERVING
        assert server.proc.poll() is None, "the server died"
        assert not server.log(r"Traceback|code=INTERNAL|code=UNKNOWN"), server.lines[-20:]


def _call(channel: grpc.Channel, method: str, request: bytes) -> bytes | None:
    """The raw response, or None for an allowed error; fails on any other outcome."""
    rpc = channel.unary_unary(f"/{SERVICE}/{method}")
    try:
        response: bytes = rpc(request, timeout=30)
    except grpc.RpcError as error:
        code = error.code()  # type: ignore[attr-defined]
        details = error.details() or ""  # type: ignore[attr-defined]
        _outcomes[code.name] += 1
        assert code in ALLOWED, (method, code, details[:300])
        assert "Traceback" not in details
        metadata = error.trailing_metadata() or ()  # type: ignore[attr-defined]
        size = len(details) + sum(len(k) + len(v) for k, v in metadata)
        assert size < MAX_TRAILER_BYTES, (method, size)
        return None
    _outcomes["OK"] += 1
    return response


@_settings("Solve")
@given(data=st.data())
def test_fuzz_solve(channel: grpc.Channel, data: st.DataObject) -> None:
    request = data.draw(solve_request())
    _ran["Solve"] += 1
    answer = _call(channel, "Solve", _request_bytes(data.draw, request))
    if answer is not None:
        response = pb.SolveResponse.FromString(answer)
        assert response.status != pb.SOLVE_STATUS_UNSPECIFIED


@_settings("SolveBatch")
@given(data=st.data())
def test_fuzz_solve_batch(channel: grpc.Channel, data: st.DataObject) -> None:
    items = data.draw(st.lists(solve_request(), max_size=4))
    if data.draw(st.integers(0, 20)) == 0:
        items = [cold_request(0)] * 1001  # one over the batch limit
    request = pb.SolveBatchRequest(requests=items)
    _ran["SolveBatch"] += 1
    answer = _call(channel, "SolveBatch", _request_bytes(data.draw, request))
    if answer is not None:
        response = pb.SolveBatchResponse.FromString(answer)
        assert len(response.items) == len(items)
        for item in response.items:
            assert item.code in ALLOWED_NUMBERS, (item.code, item.message[:300])
            assert len(item.message) < 2048


_OTHERS = {
    "GetHardware": pb.GetHardwareRequest,
    "ListHardware": pb.ListHardwareRequest,
    "EstimateMemory": pb.EstimateMemoryRequest,
    "Occupancy": pb.OccupancyRequest,
}


@_settings("others")
@given(data=st.data())
def test_fuzz_the_other_methods(channel: grpc.Channel, data: st.DataObject) -> None:
    method = data.draw(st.sampled_from(sorted(_OTHERS)))
    request = data.draw(message(_OTHERS[method].DESCRIPTOR))
    _ran["others"] += 1
    _call(channel, method, _request_bytes(data.draw, request))


@_settings("bytes")
@given(
    method=st.sampled_from(["Solve", "SolveBatch", *sorted(_OTHERS)]),
    raw=st.one_of(
        st.binary(max_size=2048),
        st.builds(
            lambda seed, n: random.Random(seed).randbytes(n),
            st.integers(),
            st.integers(10_000, 20_000),
        ),
    ),
)
def test_fuzz_random_bytes(channel: grpc.Channel, method: str, raw: bytes) -> None:
    _ran["bytes"] += 1
    _call(channel, method, raw)


def test_fuzz_ran_every_case() -> None:
    """The four fuzz tests above ran their cases (5,200 in all) when run together."""
    if not any(_ran.values()):
        pytest.skip("run with the fuzz tests")
    print(
        f"\nFIGURE fuzz: {sum(_ran.values())} cases ({_ran}); outcomes {dict(_outcomes)}; "
        "no crash, no UNKNOWN/INTERNAL"
    )
    assert all(_ran[name] >= CASES[name] for name in CASES), _ran
