"""Conversions between the solver's pydantic types and the `tilesolve.v1` protobuf messages.

Both the server and the client use this module (they never import each other). Messages go
through their canonical JSON mapping with proto field names, which are the pydantic field
names; only enum spellings differ (`DATA_TYPE_FP16` on the wire, `"fp16"` in the solver).
Decoding never trusts the wire: every value is validated by the solver's schemas, and a
validation failure becomes field violations whose paths are the request's field paths
(`problem.head_dim`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from pydantic import BaseModel, ValidationError

from tilesolve.solver import (
    AttentionProblem,
    CudaDevice,
    FieldViolation,
    HardwareSpec,
    InvalidRequestError,
    MemoryEstimate,
    SolveAnswer,
    SolveOptions,
    parse_hardware,
)
from tilesolve.solver.apps.portfolio import PortfolioAnswer, PortfolioRequest
from tilesolve.solver.hardware import DEVICE_KINDS
from tilesolve.solver.occupancy import Occupancy
from tilesolve.solver.violations import violations_from_validation
from tilesolve.v1 import tilesolve_pb2 as pb

# (message field name) -> {wire enum name: solver value}; UNSPECIFIED means "absent".
_ENUMS: dict[str, dict[str, str]] = {
    "dtype": {"DATA_TYPE_FP16": "fp16", "DATA_TYPE_BF16": "bf16", "DATA_TYPE_FP8": "fp8"},
    "phase": {
        "PHASE_FORWARD": "forward",
        "PHASE_BACKWARD": "backward",
        "PHASE_DECODE": "decode",
    },
    "kernel_enum": {
        "KERNEL_FAMILY_FA2": "fa2",
        "KERNEL_FAMILY_TRITON": "triton",
        "KERNEL_FAMILY_FA3": "fa3",
        "KERNEL_FAMILY_ASCEND": "ascend",
    },
    "engine": {"ENGINE_CPSAT": "cpsat", "ENGINE_EXHAUSTIVE": "exhaustive"},
    "status": {
        "SOLVE_STATUS_OPTIMAL": "optimal",
        "SOLVE_STATUS_FEASIBLE": "feasible",
        "SOLVE_STATUS_INFEASIBLE": "infeasible",
    },
}
_UNSPECIFIED_SUFFIX = "_UNSPECIFIED"


def _to_dict(message: Message, with_defaults: bool = False) -> dict[str, Any]:
    return json_format.MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=with_defaults,
    )


def _enums_to_solver(data: dict[str, Any]) -> dict[str, Any]:
    """Wire enum names -> solver strings; UNSPECIFIED -> absent. An unknown enum number is
    passed through unchanged, so the schema rejects it and names the field. The deprecated
    `kernel_enum` is read as `kernel` only where `kernel` (the family's name) is empty."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        table = _ENUMS.get(key)
        if table is not None and not isinstance(value, dict):
            if isinstance(value, str) and value.endswith(_UNSPECIFIED_SUFFIX):
                continue
            out[key] = table.get(value, value) if isinstance(value, str) else value
        else:
            out[key] = value
    legacy = out.pop("kernel_enum", None)
    if not out.get("kernel"):
        out.pop("kernel", None)
        if legacy is not None:
            out["kernel"] = legacy
    return out


def _enums_to_wire(data: Mapping[str, Any]) -> dict[str, Any]:
    """Solver strings -> wire enum names, recursively; None values dropped."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue
        if key == "kernel" and isinstance(value, str):
            out[key] = value
            # Old clients read the deprecated enum: fill it in where the family has a value.
            legacy = [wire for wire, name in _ENUMS["kernel_enum"].items() if name == value]
            if legacy:
                out["kernel_enum"] = legacy[0]
            continue
        table = _ENUMS.get(key)
        if table is not None and isinstance(value, str):
            out[key] = next(wire for wire, solver in table.items() if solver == value)
        elif isinstance(value, Mapping):
            out[key] = _enums_to_wire(value)
        elif isinstance(value, list):
            out[key] = [_enums_to_wire(v) if isinstance(v, Mapping) else v for v in value]
        else:
            out[key] = value
    return out


def _validate(model: type[BaseModel], data: dict[str, Any], prefix: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequestError(violations_from_validation(exc, model, prefix)) from None


def _decode(model: type[BaseModel], message: Message, prefix: str) -> Any:
    return _validate(model, _enums_to_solver(_to_dict(message)), prefix)


# ---- requests ---------------------------------------------------------------------------


def problem_from_proto(message: pb.AttentionProblem, prefix: str = "problem") -> AttentionProblem:
    return _decode(AttentionProblem, message, prefix)  # type: ignore[no-any-return]


def options_from_proto(message: pb.SolveOptions, prefix: str = "options") -> SolveOptions:
    return _decode(SolveOptions, message, prefix)  # type: ignore[no-any-return]


def hardware_from_proto(ref: pb.HardwareRef, prefix: str = "hardware") -> str | HardwareSpec:
    """A catalog name, or a validated inline description."""
    which = ref.WhichOneof("hardware")
    if which == "name":
        return ref.name
    if which == "spec":
        return _spec(ref.spec, f"{prefix}.spec")
    raise InvalidRequestError(
        [FieldViolation(prefix, "required: a catalog name (hardware.name) or hardware.spec")]
    )


def solve_request_from_proto(
    request: pb.SolveRequest,
) -> tuple[AttentionProblem, str | HardwareSpec, SolveOptions]:
    """Decode a SolveRequest; every bad field of every part is reported together."""
    violations: list[FieldViolation] = []

    def part(decode: Any) -> Any:
        try:
            return decode()
        except InvalidRequestError as exc:
            violations.extend(exc.violations)
            return None

    if request.HasField("problem"):
        problem = part(lambda: problem_from_proto(request.problem))
    else:
        violations.append(FieldViolation("problem", "required"))
    hardware = part(lambda: hardware_from_proto(request.hardware))
    options = part(lambda: options_from_proto(request.options))
    if violations:
        raise InvalidRequestError(violations)
    return problem, hardware, options


def solve_request_to_proto(
    problem: AttentionProblem, hardware: str | HardwareSpec, options: SolveOptions | None = None
) -> pb.SolveRequest:
    request = pb.SolveRequest(
        problem=problem_to_proto(problem),
        options=json_format.ParseDict(
            _enums_to_wire((options or SolveOptions()).model_dump(mode="json")), pb.SolveOptions()
        ),
    )
    if isinstance(hardware, HardwareSpec):
        request.hardware.spec.CopyFrom(spec_to_proto(hardware))
    else:
        request.hardware.name = hardware
    return request


def problem_to_proto(problem: AttentionProblem) -> pb.AttentionProblem:
    return json_format.ParseDict(
        _enums_to_wire(problem.model_dump(mode="json")), pb.AttentionProblem()
    )


# ---- hardware -----------------------------------------------------------------------------


def spec_to_proto(spec: HardwareSpec) -> pb.HardwareSpec:
    return json_format.ParseDict(_enums_to_wire(spec.model_dump(mode="json")), pb.HardwareSpec())


def _spec(message: pb.HardwareSpec, prefix: str) -> HardwareSpec:
    # With defaults: a real 0 (T4's reserved shared memory) must not read as "missing".
    data = _to_dict(message, with_defaults=True)
    try:
        return parse_hardware(data)
    except ValidationError as exc:
        kind = DEVICE_KINDS.get(str(data.get("arch")), CudaDevice)
        raise InvalidRequestError(violations_from_validation(exc, kind, prefix)) from None


def spec_from_proto(message: pb.HardwareSpec) -> HardwareSpec:
    return _spec(message, "hardware")


# ---- answers ------------------------------------------------------------------------------


def answer_to_proto(answer: SolveAnswer, cache_hit: bool = False) -> pb.SolveResponse:
    response = json_format.ParseDict(
        _enums_to_wire(answer.model_dump(mode="json")), pb.SolveResponse()
    )
    response.cache_hit = cache_hit
    return response


def answer_from_proto(response: pb.SolveResponse) -> tuple[SolveAnswer, bool]:
    """The solver's answer type, and whether the server answered from its cache."""
    data = _to_dict(response, with_defaults=True)
    cache_hit = bool(data.pop("cache_hit", False))
    data = _enums_to_solver(data)
    data["problem"] = _enums_to_solver(_to_dict(response.problem))
    data["options"] = _enums_to_solver(_to_dict(response.options))
    if not response.HasField("infeasibility"):
        data["infeasibility"] = None
    return SolveAnswer.model_validate(data), cache_hit


def occupancy_to_proto(occ: Occupancy) -> pb.OccupancyResponse:
    return pb.OccupancyResponse(
        blocks_per_sm=occ.blocks_per_sm,
        limiter=occ.limiters[0].value if occ.limiters else "",
        limiters=[x.value for x in occ.limiters],
        limit_warps=occ.limit_warps,
        limit_registers=occ.limit_registers,
        limit_shared_memory=occ.limit_shared_memory,
        limit_blocks=occ.limit_blocks,
        occupancy=occ.occupancy_fraction,
        active_warps_per_sm=occ.active_warps_per_sm,
        warps_per_block=occ.warps_per_block,
        max_warps_per_sm=occ.max_warps_per_sm,
        regs_per_block=occ.regs_per_block,
        smem_per_block_bytes=occ.smem_per_block_bytes,
        smem_per_sm_config_bytes=occ.smem_per_sm_config_bytes,
    )


# ---- the memory model ---------------------------------------------------------------------


def memory_request_to_proto(
    problem: AttentionProblem,
    block_m: int,
    block_n: int,
    hardware: str | HardwareSpec | None = None,
    kernel: str | None = None,
) -> pb.EstimateMemoryRequest:
    """`kernel` None leaves the field empty: the server applies the solver's default
    (`tilesolve.solver.apps.memory.memory_kernel`: fa2, or the default family of a non-CUDA
    device)."""
    request = pb.EstimateMemoryRequest(
        problem=problem_to_proto(problem),
        block_m=block_m,
        block_n=block_n,
        kernel=kernel or "",
    )
    if isinstance(hardware, HardwareSpec):
        request.hardware.spec.CopyFrom(spec_to_proto(hardware))
    elif hardware is not None:
        request.hardware.name = hardware
    return request


def memory_request_from_proto(
    request: pb.EstimateMemoryRequest,
) -> tuple[AttentionProblem, int, int, str | HardwareSpec | None, str | None]:
    """(problem, block_m, block_n, hardware or None, kernel or None for the solver's default);
    every bad field reported together. The tile's range is the solver's to check
    (`estimate_memory` names block_m / block_n)."""
    violations: list[FieldViolation] = []
    problem: AttentionProblem | None = None
    hardware: str | HardwareSpec | None = None
    if request.HasField("problem"):
        try:
            problem = problem_from_proto(request.problem)
        except InvalidRequestError as exc:
            violations.extend(exc.violations)
    else:
        violations.append(FieldViolation("problem", "required"))
    for field in ("block_m", "block_n"):
        if not request.HasField(field):
            violations.append(
                FieldViolation(field, "required: an integer from 1 to 4096 (rows per tile)")
            )
    if request.HasField("hardware") and request.hardware.WhichOneof("hardware") is not None:
        try:
            hardware = hardware_from_proto(request.hardware)
        except InvalidRequestError as exc:
            violations.extend(exc.violations)
    # The family's name; the solver checks it against the registry (naming the allowed ones).
    kernel: str | None = request.kernel or None
    if not request.kernel and request.kernel_enum:
        wire_name = (
            pb.KernelFamily.Name(request.kernel_enum) if _known_kernel(request.kernel_enum) else ""
        )
        kernel = _ENUMS["kernel_enum"].get(wire_name, "")
        if not kernel:
            allowed = ", ".join(_ENUMS["kernel_enum"])
            violations.append(
                FieldViolation(
                    "kernel_enum",
                    f"unknown KernelFamily {request.kernel_enum}; allowed: {allowed}",
                )
            )
    if violations:
        raise InvalidRequestError(violations)
    assert problem is not None
    return problem, request.block_m, request.block_n, hardware, kernel


def _known_kernel(number: int) -> bool:
    return number in pb.KernelFamily.values()


def estimate_to_proto(estimate: MemoryEstimate) -> pb.EstimateMemoryResponse:
    return json_format.ParseDict(
        _enums_to_wire(estimate.model_dump(mode="json")), pb.EstimateMemoryResponse()
    )


def estimate_from_proto(response: pb.EstimateMemoryResponse) -> MemoryEstimate:
    """The solver's MemoryEstimate, validated (absent optional figures become None)."""
    data = _enums_to_solver(_to_dict(response, with_defaults=True))
    data["problem"] = _enums_to_solver(_to_dict(response.problem))
    data.setdefault("family_smem_bytes", None)
    data.setdefault("dq_atomic_bytes", None)
    data["family_smem_note"] = response.family_smem_note or None
    data["roofline"] = (
        _to_dict(response.roofline, with_defaults=True) if response.HasField("roofline") else None
    )
    return MemoryEstimate.model_validate(data)


# ---- portfolios ---------------------------------------------------------------------------

_INDEX_IN_PATH = re.compile(r"\.(\d+)(?=\.|$)")


def _list_paths(violations: list[FieldViolation]) -> list[FieldViolation]:
    """pydantic's `problems.3.weight` as the request path `problems[3].weight`."""
    return [FieldViolation(_INDEX_IN_PATH.sub(r"[\1]", v.field), v.description) for v in violations]


def portfolio_request_to_proto(
    request: PortfolioRequest, hardware: str | HardwareSpec
) -> pb.PortfolioRequest:
    message = pb.PortfolioRequest(
        kernel=request.kernel or "",
        max_configs=request.max_configs,
        work_limit_s=request.work_limit_s,
        time_limit_s=request.time_limit_s,
    )
    if request.max_slowdown is not None:
        message.max_slowdown = request.max_slowdown
    message.max_resources.update(request.max_resources)
    for wp in request.problems:
        message.problems.add(problem=problem_to_proto(wp.problem), weight=wp.weight)
    for pin in request.pinned:
        message.pinned.add().parameters.update(pin)
    if isinstance(hardware, HardwareSpec):
        message.hardware.spec.CopyFrom(spec_to_proto(hardware))
    else:
        message.hardware.name = hardware
    return message


def portfolio_request_from_proto(
    message: pb.PortfolioRequest,
) -> tuple[PortfolioRequest, str | HardwareSpec]:
    """Decode a PortfolioRequest; every bad field is reported together, with paths such as
    `problems[3].problem.head_dim`."""
    violations: list[FieldViolation] = []
    hardware: str | HardwareSpec | None = None
    try:
        hardware = hardware_from_proto(message.hardware)
    except InvalidRequestError as exc:
        violations.extend(exc.violations)
    problems = []
    for i, wp in enumerate(message.problems):
        if not wp.HasField("problem"):
            violations.append(FieldViolation(f"problems[{i}].problem", "required"))
            continue
        try:
            problem = problem_from_proto(wp.problem, f"problems[{i}].problem")
        except InvalidRequestError as exc:
            violations.extend(exc.violations)
            continue
        problems.append({"problem": problem, "weight": wp.weight if wp.HasField("weight") else 1})
    data: dict[str, Any] = {
        "problems": problems,
        "max_configs": message.max_configs,
        "kernel": message.kernel or None,
        "max_resources": dict(message.max_resources),
        "pinned": [dict(pin.parameters) for pin in message.pinned],
    }
    for field in ("max_slowdown", "work_limit_s", "time_limit_s"):
        if message.HasField(field):
            data[field] = getattr(message, field)
    if violations:  # the problems' own errors first; the request's rules need them all
        raise InvalidRequestError(violations)
    try:
        request = PortfolioRequest.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequestError(
            _list_paths(violations_from_validation(exc, PortfolioRequest))
        ) from None
    assert hardware is not None
    return request, hardware


def portfolio_to_proto(answer: PortfolioAnswer) -> pb.PortfolioResponse:
    data = answer.model_dump(mode="json")
    kernel = data.pop("kernel")
    response = json_format.ParseDict(_enums_to_wire(data), pb.PortfolioResponse())
    response.kernel = kernel
    return response


def portfolio_from_proto(response: pb.PortfolioResponse) -> PortfolioAnswer:
    """The solver's PortfolioAnswer, validated."""
    data = _enums_to_solver(_to_dict(response, with_defaults=True))
    return PortfolioAnswer.model_validate(data)
