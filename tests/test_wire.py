"""`tilesolve.wire`, the one codec of the server and the client: each pair of directions
round-trips, and the encodings made from bytes already serialized (batch framing, cached
answers) decode to exactly what protobuf's own encoding of the whole message decodes to."""

from __future__ import annotations

import math
import pickle

import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2

from tilesolve import wire
from tilesolve.solver import (
    AttentionProblem,
    FieldViolation,
    InvalidRequestError,
    SolveOptions,
    get_hardware,
    load_catalog,
    occupancy,
    solve,
)
from tilesolve.solver.occupancy import OccupancyQuery
from tilesolve.v1 import tilesolve_pb2 as pb

PROBLEM = AttentionProblem(seq_len=2048, head_dim=128, heads=8, causal=True)


def _response(top_k: int = 3) -> pb.SolveResponse:
    return wire.answer_to_proto(solve(PROBLEM, "a100", SolveOptions(top_k=top_k)))


# ---- requests -----------------------------------------------------------------------------


def test_a_decoded_request_is_a_solve_call_that_pickles_as_it_is() -> None:
    """The servicer decodes once and hands this value to a solver process (pickled)."""
    spec = get_hardware("h100").model_copy(update={"name": "my-h100"})
    for hardware in ("a100", spec):
        options = SolveOptions(top_k=2, kernel="fa2")
        call = wire.solve_request_from_proto(
            wire.solve_request_to_proto(PROBLEM, hardware, options)
        )
        assert isinstance(call, wire.SolveCall)
        assert call == (PROBLEM, hardware, options)
        assert pickle.loads(pickle.dumps(call)) == call


def test_batch_request_is_one_solve_request_each() -> None:
    requests = [(PROBLEM, "a100", None), (PROBLEM, "t4", SolveOptions(top_k=1))]
    message = wire.batch_request_to_proto(requests)
    assert list(message.requests) == [wire.solve_request_to_proto(*r) for r in requests]


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, SolveOptions().time_limit_s), (2.5, 2.5), (0.0, None), (math.nan, None), (1e9, None)],
)
def test_time_limit_alone_is_read_and_held_to_the_schema(
    given: float | None, expected: float | None
) -> None:
    options = pb.SolveOptions() if given is None else pb.SolveOptions(time_limit_s=given)
    assert wire.time_limit_from_proto(options) == expected
    if expected is None:  # the schema refuses it in a whole request too
        with pytest.raises(InvalidRequestError):
            wire.options_from_proto(options)


# ---- answers from bytes already serialized ---------------------------------------------------


@pytest.mark.parametrize("limit", [0.5, 10.0, 37.25])
def test_cache_hit_response_decodes_as_the_answer_with_its_two_fields_set(limit: float) -> None:
    first = _response()
    cached = first.SerializeToString()
    hit = wire.cache_hit_response(cached, limit)
    assert hit.startswith(cached)  # the cached bytes are sent as they are
    expected = pb.SolveResponse()
    expected.CopyFrom(first)
    expected.cache_hit = True
    expected.options.time_limit_s = limit
    assert pb.SolveResponse.FromString(hit) == expected
    answer, from_cache = wire.answer_from_proto(pb.SolveResponse.FromString(hit))
    assert from_cache and answer.options.time_limit_s == limit
    assert answer.candidates == wire.answer_from_proto(first)[0].candidates


@pytest.mark.parametrize("size", [0, 1, 127, 128, 300, 16_383, 16_384, 2_100_000])
def test_batch_framing_equals_protobufs_own_encoding(size: int) -> None:
    """Lengths of every varint width (1, 2, 3 and 4 bytes)."""
    response = pb.SolveResponse(hardware="x" * size)
    framed = wire.batch_entry(wire.answered_item(response.SerializeToString()))
    whole = pb.SolveBatchResponse(items=[pb.SolveBatchItem(response=response)])
    assert framed == whole.SerializeToString()


def test_batch_items_round_trip_answers_and_failures() -> None:
    response = _response(2)
    failure = wire.FailedItem(
        code_pb2.INVALID_ARGUMENT,
        "problem.head_dim: must be ...",
        (FieldViolation("problem.head_dim", "must be an integer from 1 to 512; got 0"),),
    )
    raw = b"".join(
        [
            wire.batch_entry(wire.answered_item(response.SerializeToString())),
            wire.batch_entry(wire.failed_item(failure)),
            wire.batch_entry(
                wire.answered_item(wire.cache_hit_response(response.SerializeToString(), 3.0))
            ),
        ]
    )
    first, second, third = wire.batch_items_from_proto(pb.SolveBatchResponse.FromString(raw))
    assert first == wire.answer_from_proto(response)
    assert second == failure
    assert isinstance(first, tuple) and isinstance(third, tuple)
    assert third[1] is True and third[0].candidates == first[0].candidates


# ---- hardware -----------------------------------------------------------------------------


def test_the_catalog_listing_round_trips() -> None:
    catalog = load_catalog()
    listing = wire.HardwareCatalog(
        hardware=tuple(wire.HardwareSummary.of(catalog[name]) for name in sorted(catalog)),
        catalog_version="c",
        model_version="m",
        max_batch_size=7,
    )
    assert wire.catalog_from_proto(wire.catalog_to_proto(listing)) == listing
    a100 = wire.HardwareSummary.of(catalog["a100-80gb"])
    assert a100.compute_capability == "8.0" and a100.compute_units == 108
    ascend = wire.HardwareSummary.of(get_hardware("ascend-910b"))
    assert ascend.compute_capability is None
    assert wire.summary_to_proto(ascend).compute_capability == ""


def test_a_full_description_round_trips() -> None:
    for name in ("a100", "ascend-310p3"):
        spec = get_hardware(name)
        assert wire.spec_from_proto(wire.spec_to_proto(spec)) == spec


# ---- occupancy ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "launch", [(128, 96, 49152, -1), (1024, 64, 0, 0), (96, 255, 200_000, 100), (32, 0, 1, 50)]
)
def test_occupancy_round_trips(launch: tuple[int, int, int, int]) -> None:
    spec = get_hardware("h100")
    assert spec.arch == "cuda"
    result = occupancy(spec.sm, *launch)  # type: ignore[union-attr]
    assert wire.occupancy_from_proto(wire.occupancy_to_proto(result)) == result


def test_occupancy_query_is_validated_on_its_device() -> None:
    spec = get_hardware("a100")
    request = wire.occupancy_request_to_proto("a100", 256, 64, 1024)
    assert not request.HasField("carveout_percent")
    assert wire.occupancy_query_from_proto(request, spec) == OccupancyQuery(
        threads=256, regs=64, smem_bytes=1024, carveout_percent=-1
    )
    bad = wire.occupancy_request_to_proto("a100", 2048, 300, -1, 101)
    with pytest.raises(InvalidRequestError) as caught:
        wire.occupancy_query_from_proto(bad, spec)
    found = {v.field: v.description for v in caught.value.violations}
    assert set(found) == {"threads", "regs", "smem_bytes", "carveout_percent"}
    assert found["threads"].startswith("must be an integer from 1 to 1024 (the most threads")
    assert found["threads"].endswith("a100-80gb); got 2048")


# ---- errors -------------------------------------------------------------------------------


def test_status_details_round_trip_the_field_violations() -> None:
    violations = [FieldViolation("problem.head_dim", "too big"), FieldViolation("hardware", "?")]
    status = wire.status_to_proto(code_pb2.INVALID_ARGUMENT, "bad", violations)
    decoded = status_pb2.Status.FromString(status.SerializeToString())
    assert wire.violations_from_status(decoded) == violations
    bad = error_details_pb2.BadRequest()
    assert decoded.details[0].Unpack(bad) and len(bad.field_violations) == 2
    plain = wire.status_to_proto(code_pb2.DEADLINE_EXCEEDED, "late", [])
    assert not plain.details and wire.violations_from_status(plain) == []
