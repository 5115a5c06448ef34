"""`tilesolve.wire`'s models without json_format: `_from_dict` sets a model's dict (an answer,
a request's options and problem, a device, a memory estimate, a portfolio) into its message
by `_fill` where it can and by `json_format.ParseDict` where it cannot, and the message, and
so its bytes, are ParseDict's either way (`answer_digest.py --wire` hashes the
encodings of 4,303 answers: the same digest before and after)."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format

from tilesolve import wire
from tilesolve.solver import (
    AttentionProblem,
    SolveOptions,
    estimate_memory,
    get_hardware,
    hardware_names,
    solve,
)
from tilesolve.solver.apps.portfolio import PortfolioRequest, WeightedProblem, solve_portfolio
from tilesolve.v1 import tilesolve_pb2 as pb

# (problem, hardware, options): forward, backward, decode, paged, ROCm, Ascend, infeasible
CASES: list[tuple[dict[str, Any], str, dict[str, Any]]] = [
    ({"seq_len": 4096, "head_dim": 128, "batch": 8, "heads": 32}, "a100", {}),
    ({"seq_len": 8192, "head_dim": 128, "causal": True, "phase": "backward"}, "h100-sxm", {}),
    ({"seq_len": 1, "seq_len_kv": 32768, "head_dim": 128, "phase": "decode"}, "h200", {}),
    (
        {"seq_len": 1, "seq_len_kv": 8192, "head_dim": 128, "phase": "decode", "heads": 32},
        "l40s",
        {"kernel": "flashinfer", "choose_page_size": True},
    ),
    ({"seq_len": 2048, "head_dim": 64, "dtype": "fp8"}, "mi300x", {}),
    ({"seq_len": 2048, "head_dim": 128, "dtype": "bf16"}, "mi355x", {"kernel": "triton"}),
    ({"seq_len": 4096, "head_dim": 128}, "ascend-910b", {}),
    ({"seq_len": 4096, "head_dim": 256}, "t4", {"parameter_pins": {"block_m": 256}}),
]


def _dict(problem: dict[str, Any], hardware: str, options: dict[str, Any]) -> dict[str, Any]:
    answer = solve(AttentionProblem(**problem), hardware, SolveOptions(**options))
    return wire._enums_to_wire(answer.model_dump(mode="json"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_fill_sets_an_answer_as_parse_dict_does(case: tuple[Any, str, Any]) -> None:
    data = _dict(*case)
    filled = pb.SolveResponse()
    wire._fill(filled, data)  # the fast path takes every answer: no _Unusual
    parsed = json_format.ParseDict(data, pb.SolveResponse())
    assert filled == parsed
    assert filled.SerializeToString(deterministic=True) == parsed.SerializeToString(
        deterministic=True
    )


def test_an_infeasible_answer_keeps_its_explanation_present() -> None:
    data = _dict(*CASES[-1])
    assert data["status"] == "SOLVE_STATUS_INFEASIBLE"
    assert wire._from_dict(data, pb.SolveResponse()).HasField("infeasibility")


@pytest.mark.parametrize(
    "change",
    [
        ("predicted_time_us", "Infinity"),  # JSON's spelling of a float: ParseDict's rules
        ("block_m", 64.0),  # an integral float into an integer field
        ("block_m", True),  # a bool where ParseDict refuses it
        ("no_such_field", 1),  # unknown: ParseDict's error
    ],
)
def test_what_fill_does_not_take_is_parse_dicts(change: tuple[str, Any]) -> None:
    """A value `_fill` does not convert (here in the first candidate) leaves the whole message
    to ParseDict: the same message, or the same error."""
    data = _dict(*CASES[0])
    key, value = change
    data["candidates"][0][key] = value
    with pytest.raises(wire._Unusual):
        wire._fill(pb.SolveResponse(), data)
    try:
        expected: Any = json_format.ParseDict(data, pb.SolveResponse())
    except json_format.ParseError as exc:
        with pytest.raises(json_format.ParseError) as raised:
            wire._from_dict(data, pb.SolveResponse())
        assert str(raised.value) == str(exc)
        return
    assert wire._from_dict(data, pb.SolveResponse()) == expected


def test_an_empty_message_is_present_as_parse_dict_makes_it() -> None:
    data = _dict(*CASES[0])
    data["infeasibility"] = {}
    filled = wire._from_dict(data, pb.SolveResponse())
    assert filled.HasField("infeasibility")
    assert filled == json_format.ParseDict(data, pb.SolveResponse())


def _models() -> list[tuple[str, Any, Any]]:
    """(label, the dict a converter hands `_from_dict`, a new message of its type) for every
    other model `tilesolve.wire` sends: request options and problems, every catalog device,
    a memory estimate, a portfolio answer."""
    out: list[tuple[str, Any, Any]] = []
    for problem, _, options in CASES:
        out.append(
            (
                "options",
                wire._enums_to_wire(SolveOptions(**options).model_dump(mode="json")),
                pb.SolveOptions(),
            )
        )
        out.append(
            (
                "problem",
                wire._enums_to_wire(AttentionProblem(**problem).model_dump(mode="json")),
                pb.AttentionProblem(),
            )
        )
    for name in hardware_names():
        spec = get_hardware(name).model_dump(mode="json")
        out.append((name, wire._enums_to_wire(spec), pb.HardwareSpec()))
    estimate = estimate_memory(AttentionProblem(seq_len=4096, head_dim=128), 128, 64, "a100")
    out.append(
        (
            "estimate",
            wire._enums_to_wire(estimate.model_dump(mode="json")),
            pb.EstimateMemoryResponse(),
        )
    )
    mix = [
        WeightedProblem(problem=AttentionProblem(seq_len=s, head_dim=d), weight=w)
        for s, d, w in ((1024, 64, 3), (4096, 128, 2), (8192, 128, 1))
    ]
    portfolio = solve_portfolio(PortfolioRequest(problems=mix, max_configs=2), "a100")
    data = portfolio.model_dump(mode="json")
    data.pop("kernel")  # set apart by portfolio_to_proto
    out.append(("portfolio", wire._enums_to_wire(data), pb.PortfolioResponse()))
    return out


def test_fill_sets_every_other_model_as_parse_dict_does() -> None:
    models = _models()
    assert len(models) > 30
    for label, data, message in models:
        parsed = json_format.ParseDict(data, type(message)())
        wire._fill(message, data)  # no _Unusual: the fast path takes them all
        assert message == parsed, label
        assert message.SerializeToString(deterministic=True) == parsed.SerializeToString(
            deterministic=True
        ), label
