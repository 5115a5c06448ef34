"""Every conversion between the solver's types and the `tilesolve.v1` protobuf messages.

Both the server and the client use this module for every message they exchange (they never
import each other), so the two sides cannot disagree about an encoding: requests, answers,
the hardware catalog and its summaries, occupancy, the memory model, portfolios, batch items
and the `google.rpc` status details of an error. Messages with a schema go through their
canonical JSON mapping with proto field names, which are the pydantic field names; only enum
spellings differ (`DATA_TYPE_FP16` on the wire, `"fp16"` in the solver). Decoding never
trusts the wire: every value is validated by the solver's schemas, and a validation failure
becomes field violations whose paths are the request's field paths (`problem.head_dim`).

Two encodings work on bytes already serialized, so that an answer is serialized once: a
SolveBatchResponse is framed from its items' encodings (`answered_item`, `failed_item`,
`batch_entry`), and an answer from the server's cache is its first encoding followed by the
fields that differ (`cache_hit_response`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from pydantic import BaseModel, TypeAdapter, ValidationError

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
from tilesolve.solver.hardware import DEVICE_KINDS, RocmDevice
from tilesolve.solver.occupancy import Limiter, Occupancy, OccupancyQuery
from tilesolve.solver.occupancy_rocm_query import RocmOccupancyQuery, RocmOccupancyReport
from tilesolve.solver.violations import violations_from_validation
from tilesolve.v1 import tilesolve_pb2 as pb

# (message field name) -> {wire enum name: solver value}; UNSPECIFIED means "absent".
_ENUMS: dict[str, dict[str, str]] = {
    "dtype": {
        "DATA_TYPE_FP16": "fp16",
        "DATA_TYPE_BF16": "bf16",
        "DATA_TYPE_FP8": "fp8",
        "DATA_TYPE_FP32": "fp32",
    },
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


# ---- dicts to messages, the common case without json_format --------------------------------
# Every model this module sends (answers, requests, problems, devices, memory estimates,
# portfolios) goes to its message by `_from_dict`. json_format.ParseDict is pure Python and
# walks every value through its JSON rules: about 0.8 ms of a cold Solve's 4.6 ms in its solver
# process (an answer of top 5). The models hold only what `_fill` converts exactly as ParseDict
# does (ints into integer fields, finite floats, bools, strings, enum names, nested and repeated
# messages, maps of scalars); anything else makes it give up and ParseDict convert the whole
# message, so the message, and its bytes, are ParseDict's either way (tests/test_wire_fill.py).

_INTEGER_TYPES = frozenset(
    (
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
    )
)
_FLOAT32_MAX = 3.4028234663852886e38
# how `_fill` sets a field: its kind, and the descriptor whose values `_scalar` converts
_SCALAR, _MESSAGE, _MESSAGES, _SCALARS, _MAP = range(5)
_PLANS: dict[str, dict[str, tuple[FieldDescriptor, int, FieldDescriptor]]] = {}
_M = TypeVar("_M", bound=Message)


class _Unusual(Exception):
    """A value `_fill` does not convert: ParseDict converts the message instead."""


def _plan(descriptor: Any) -> dict[str, tuple[FieldDescriptor, int, FieldDescriptor]]:
    """A message's fields by name and by JSON name (ParseDict looks the JSON name up first),
    each with how `_fill` sets it."""
    plan = _PLANS.get(descriptor.full_name)
    if plan is None:
        plan = {}
        for field in descriptor.fields:
            entry = field.message_type
            if entry is not None and entry.GetOptions().map_entry:
                how = (field, _MAP, entry.fields_by_name["value"])
            elif field.is_repeated:
                kind = _MESSAGES if field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE else _SCALARS
                how = (field, kind, field)
            elif field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
                how = (field, _MESSAGE, field)
            else:
                how = (field, _SCALAR, field)
            plan[field.name] = how
        for field in descriptor.fields:
            plan[field.json_name] = plan[field.name]
        _PLANS[descriptor.full_name] = plan
    return plan


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    """`value` as ParseDict sets it into a scalar `field`, or _Unusual."""
    kind = field.cpp_type
    if kind in _INTEGER_TYPES:
        if type(value) is int:
            return value
    elif kind == FieldDescriptor.CPPTYPE_DOUBLE or kind == FieldDescriptor.CPPTYPE_FLOAT:
        if type(value) is float or type(value) is int:
            number = float(value)
            limit = _FLOAT32_MAX if kind == FieldDescriptor.CPPTYPE_FLOAT else float("inf")
            if -limit <= number <= limit and number == number:
                return number
    elif kind == FieldDescriptor.CPPTYPE_BOOL:
        if type(value) is bool:
            return value
    elif kind == FieldDescriptor.CPPTYPE_STRING:
        if type(value) is str and field.type == FieldDescriptor.TYPE_STRING:
            return value
    elif kind == FieldDescriptor.CPPTYPE_ENUM and type(value) is str:
        named = field.enum_type.values_by_name.get(value)
        if named is not None:
            return named.number
    raise _Unusual


def _fill(message: Message, data: Mapping[str, Any]) -> None:
    """Set `data` (a JSON-like dict) into `message`, or _Unusual (the module's note above)."""
    plan = _plan(message.DESCRIPTOR)
    oneofs: set[str] = set()
    for name, value in data.items():
        how = plan.get(name)
        if how is None:
            raise _Unusual
        if value is None:
            continue  # ParseDict clears the field; a new message has it clear
        field, kind, values = how
        if field.containing_oneof is not None:
            if field.containing_oneof.name in oneofs:
                raise _Unusual
            oneofs.add(field.containing_oneof.name)
        if kind == _SCALAR:
            setattr(message, field.name, _scalar(values, value))
        elif kind == _MESSAGE:
            if not isinstance(value, Mapping):
                raise _Unusual
            target = getattr(message, field.name)
            target.SetInParent()
            _fill(target, value)
        elif kind == _SCALARS:
            getattr(message, field.name).extend([_scalar(values, item) for item in value])
        elif kind == _MESSAGES:
            target = getattr(message, field.name)
            for item in value:
                if not isinstance(item, Mapping):
                    raise _Unusual
                _fill(target.add(), item)
        else:  # _MAP
            if values.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
                raise _Unusual
            target = getattr(message, field.name)
            for key, item in value.items():
                target[key] = _scalar(values, item)


def _from_dict(data: Mapping[str, Any], message: _M) -> _M:
    """`json_format.ParseDict(data, message)` for a new `message`, by `_fill` where it can."""
    try:
        _fill(message, data)
    except (_Unusual, ValueError, TypeError, UnicodeError):
        message.Clear()
        json_format.ParseDict(data, message)
    return message


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


class SolveCall(NamedTuple):
    """One SolveRequest decoded and validated: what `tilesolve.solver.solve` takes (pydantic
    models, so it pickles to a solver process as it is)."""

    problem: AttentionProblem
    hardware: str | HardwareSpec
    options: SolveOptions


def hardware_ref_to_proto(hardware: str | HardwareSpec) -> pb.HardwareRef:
    """A catalog name or alias, or an inline description."""
    if isinstance(hardware, HardwareSpec):
        return pb.HardwareRef(spec=spec_to_proto(hardware))
    return pb.HardwareRef(name=hardware)


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


def solve_request_from_proto(request: pb.SolveRequest) -> SolveCall:
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
    return SolveCall(problem, hardware, options)


_DEFAULT_TIME_LIMIT_S: float = SolveOptions.model_fields["time_limit_s"].default
_TIME_LIMIT = TypeAdapter(Annotated[float, SolveOptions.model_fields["time_limit_s"]])


def time_limit_from_proto(options: pb.SolveOptions) -> float | None:
    """The request's CP-SAT time limit (the schema's default when absent), or None when the
    schema refuses it; decoding only this field of a request."""
    if not options.HasField("time_limit_s"):
        return _DEFAULT_TIME_LIMIT_S
    try:
        return float(_TIME_LIMIT.validate_python(options.time_limit_s))
    except ValidationError:
        return None


def solve_request_to_proto(
    problem: AttentionProblem, hardware: str | HardwareSpec, options: SolveOptions | None = None
) -> pb.SolveRequest:
    return pb.SolveRequest(
        problem=problem_to_proto(problem),
        hardware=hardware_ref_to_proto(hardware),
        options=_from_dict(
            _enums_to_wire((options or SolveOptions()).model_dump(mode="json")), pb.SolveOptions()
        ),
    )


# (problem, hardware name or inline spec, options or None for the defaults)
SolveRequestTuple = tuple[AttentionProblem, str | HardwareSpec, SolveOptions | None]


def batch_request_to_proto(requests: Sequence[SolveRequestTuple]) -> pb.SolveBatchRequest:
    """One SolveRequest per (problem, hardware, options or None for the defaults)."""
    return pb.SolveBatchRequest(requests=[solve_request_to_proto(*request) for request in requests])


def problem_to_proto(problem: AttentionProblem) -> pb.AttentionProblem:
    return _from_dict(_enums_to_wire(problem.model_dump(mode="json")), pb.AttentionProblem())


# ---- hardware -----------------------------------------------------------------------------


def spec_to_proto(spec: HardwareSpec) -> pb.HardwareSpec:
    return _from_dict(_enums_to_wire(spec.model_dump(mode="json")), pb.HardwareSpec())


def _spec(message: pb.HardwareSpec, prefix: str) -> HardwareSpec:
    # With defaults: a real 0 (T4's reserved shared memory) must not read as "missing".
    data = _to_dict(message, with_defaults=True)
    try:
        return parse_hardware(data)
    except ValidationError as exc:
        kind = DEVICE_KINDS.get(str(data.get("arch")), CudaDevice)
        raise InvalidRequestError(violations_from_validation(exc, kind, prefix)) from None


def spec_from_proto(message: pb.HardwareSpec) -> HardwareSpec:
    """A full description, validated. Its `sources` come in the order of the protobuf map,
    which carries none (`client.render.ordered_sources` prints them in field order)."""
    return _spec(message, "hardware")


@dataclass(frozen=True)
class HardwareSummary:
    """One catalog entry in one line (the `HardwareSummary` message)."""

    name: str
    display_name: str
    vendor: str
    arch: str
    compute_capability: str | None  # None for non-CUDA devices
    compute_units: int  # SMs (CUDA) or AI cores (Ascend)
    default_kernel: str
    aliases: tuple[str, ...]

    @classmethod
    def of(cls, spec: HardwareSpec) -> HardwareSummary:
        return cls(
            name=spec.name,
            display_name=spec.display_name,
            vendor=spec.vendor,
            arch=spec.arch,
            compute_capability=(
                spec.sm.compute_capability if isinstance(spec, CudaDevice) else None
            ),
            compute_units=spec.compute_units,
            default_kernel=spec.default_kernel,
            aliases=tuple(spec.aliases),
        )


@dataclass(frozen=True)
class HardwareCatalog:
    """A server's catalog listing (the `ListHardwareResponse` message)."""

    hardware: tuple[HardwareSummary, ...]
    catalog_version: str
    model_version: str
    max_batch_size: int


def summary_to_proto(summary: HardwareSummary) -> pb.HardwareSummary:
    return pb.HardwareSummary(
        name=summary.name,
        display_name=summary.display_name,
        vendor=summary.vendor,
        arch=summary.arch,
        compute_capability=summary.compute_capability or "",
        compute_units=summary.compute_units,
        default_kernel=summary.default_kernel,
        aliases=list(summary.aliases),
    )


def summary_from_proto(message: pb.HardwareSummary) -> HardwareSummary:
    return HardwareSummary(
        name=message.name,
        display_name=message.display_name,
        vendor=message.vendor,
        arch=message.arch,
        compute_capability=message.compute_capability or None,
        compute_units=message.compute_units,
        default_kernel=message.default_kernel,
        aliases=tuple(message.aliases),
    )


def catalog_to_proto(catalog: HardwareCatalog) -> pb.ListHardwareResponse:
    return pb.ListHardwareResponse(
        hardware=[summary_to_proto(h) for h in catalog.hardware],
        catalog_version=catalog.catalog_version,
        model_version=catalog.model_version,
        max_batch_size=catalog.max_batch_size,
    )


def catalog_from_proto(message: pb.ListHardwareResponse) -> HardwareCatalog:
    return HardwareCatalog(
        hardware=tuple(summary_from_proto(h) for h in message.hardware),
        catalog_version=message.catalog_version,
        model_version=message.model_version,
        max_batch_size=message.max_batch_size,
    )


# ---- answers ------------------------------------------------------------------------------


def answer_to_proto(answer: SolveAnswer, cache_hit: bool = False) -> pb.SolveResponse:
    response = _from_dict(_enums_to_wire(answer.model_dump(mode="json")), pb.SolveResponse())
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


def cache_hit_response(cached: bytes, time_limit_s: float) -> bytes:
    """A serialized SolveResponse (`cached`, as first sent) answered again from a cache: its
    bytes followed by the encoding of `cache_hit` true and this request's
    `options.time_limit_s`. A parser reads a later value of a field over an earlier one and
    merges a later embedded message into the earlier (protobuf's encoding guide, "Last One
    Wins": https://protobuf.dev/programming-guides/encoding/#last-one-wins), so the result
    decodes to `cached` with those two fields set, and nothing is decoded to make it."""
    changed = pb.SolveResponse(cache_hit=True, options=pb.SolveOptions(time_limit_s=time_limit_s))
    return cached + changed.SerializeToString()


# ---- occupancy ----------------------------------------------------------------------------


def occupancy_request_to_proto(
    hardware: str | HardwareSpec,
    threads: int,
    regs: int,
    smem_bytes: int,
    carveout_percent: int | None = None,
) -> pb.OccupancyRequest:
    """`carveout_percent` None leaves it absent: the largest carveout."""
    request = pb.OccupancyRequest(
        hardware=hardware_ref_to_proto(hardware),
        threads=threads,
        regs=regs,
        smem_bytes=smem_bytes,
    )
    if carveout_percent is not None:
        request.carveout_percent = carveout_percent
    return request


def occupancy_query_from_proto(request: pb.OccupancyRequest, spec: CudaDevice) -> OccupancyQuery:
    """The launch of an OccupancyRequest, validated on its device (`spec`, resolved from
    `hardware_from_proto(request.hardware)`: `OccupancyQuery.on` names every bad field)."""
    launch: dict[str, object] = {
        "threads": request.threads,
        "regs": request.regs,
        "smem_bytes": request.smem_bytes,
    }
    if request.HasField("carveout_percent"):
        launch["carveout_percent"] = request.carveout_percent
    rocm_only = [name for name in ROCM_OCCUPANCY_FIELDS if request.HasField(name)]
    if rocm_only:
        raise InvalidRequestError(
            [
                FieldViolation(name, f"{name} applies to rocm devices only; {spec.name} is CUDA")
                for name in rocm_only
            ]
        )
    return OccupancyQuery.on(spec, launch)


# The request's fields only a rocm device reads.
ROCM_OCCUPANCY_FIELDS = ("agprs", "sgprs", "waves_per_eu")


def rocm_occupancy_request_to_proto(
    hardware: str | HardwareSpec, query: RocmOccupancyQuery
) -> pb.OccupancyRequest:
    """A launch on a rocm device: `regs` carries the VGPRs, `smem_bytes` the LDS."""
    return pb.OccupancyRequest(
        hardware=hardware_ref_to_proto(hardware),
        threads=query.threads,
        regs=query.vgprs,
        smem_bytes=query.lds_bytes,
        agprs=query.agprs,
        sgprs=query.sgprs,
        waves_per_eu=query.waves_per_eu,
    )


def rocm_occupancy_query_from_proto(
    request: pb.OccupancyRequest, spec: RocmDevice
) -> RocmOccupancyQuery:
    """The launch of an OccupancyRequest on a rocm device, validated on it (every bad field
    named by its request field: `regs` for the VGPRs, `smem_bytes` for the LDS)."""
    if request.HasField("carveout_percent"):
        raise InvalidRequestError(
            [FieldViolation("carveout_percent", "a shared-memory carveout is CUDA only")]
        )
    launch: dict[str, object] = {
        "threads": request.threads,
        "vgprs": request.regs,
        "lds_bytes": request.smem_bytes,
    }
    launch |= {name: getattr(request, name) for name in ROCM_OCCUPANCY_FIELDS}
    try:
        return RocmOccupancyQuery.on(spec, launch)
    except InvalidRequestError as exc:
        paths = {"vgprs": "regs", "lds_bytes": "smem_bytes"}
        raise InvalidRequestError(
            [FieldViolation(paths.get(v.field, v.field), v.description) for v in exc.violations]
        ) from None


def rocm_occupancy_to_proto(report: RocmOccupancyReport) -> pb.OccupancyResponse:
    return pb.OccupancyResponse(
        blocks_per_sm=report.workgroups_per_cu,
        limiter=report.limiter,
        limiters=[report.limiter],
        occupancy=report.occupancy,
        rocm=pb.RocmOccupancy(
            waves_per_workgroup=report.waves_per_workgroup,
            waves_per_cu=report.waves_per_cu,
            max_waves_per_cu=report.max_waves_per_cu,
            waves_per_simd=report.waves_per_simd,
            allocated_vgprs=report.allocated_vgprs,
            spilled_vgprs=report.spilled_vgprs,
            vgpr_cap=report.vgpr_cap,
            allocated_lds_bytes=report.allocated_lds_bytes,
            vgpr_waves_per_simd=report.vgpr_waves_per_simd,
            sgpr_waves_per_simd=report.sgpr_waves_per_simd,
            limit_lds=report.limit_lds,
            limit_waves=report.limit_waves,
        ),
    )


def rocm_occupancy_from_proto(message: pb.OccupancyResponse) -> RocmOccupancyReport:
    r = message.rocm
    return RocmOccupancyReport(
        workgroups_per_cu=message.blocks_per_sm,
        limiter=message.limiter,
        waves_per_workgroup=r.waves_per_workgroup,
        waves_per_cu=r.waves_per_cu,
        max_waves_per_cu=r.max_waves_per_cu,
        waves_per_simd=r.waves_per_simd,
        allocated_vgprs=r.allocated_vgprs,
        spilled_vgprs=r.spilled_vgprs,
        vgpr_cap=r.vgpr_cap,
        allocated_lds_bytes=r.allocated_lds_bytes,
        vgpr_waves_per_simd=r.vgpr_waves_per_simd,
        sgpr_waves_per_simd=r.sgpr_waves_per_simd,
        limit_lds=r.limit_lds,
        limit_waves=r.limit_waves,
    )


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


def occupancy_from_proto(message: pb.OccupancyResponse) -> Occupancy:
    return Occupancy(
        blocks_per_sm=message.blocks_per_sm,
        limiters=tuple(Limiter(x) for x in message.limiters),
        limit_warps=message.limit_warps,
        limit_registers=message.limit_registers,
        limit_shared_memory=message.limit_shared_memory,
        limit_blocks=message.limit_blocks,
        warps_per_block=message.warps_per_block,
        active_warps_per_sm=message.active_warps_per_sm,
        max_warps_per_sm=message.max_warps_per_sm,
        regs_per_block=message.regs_per_block,
        smem_per_block_bytes=message.smem_per_block_bytes,
        smem_per_sm_config_bytes=message.smem_per_sm_config_bytes,
    )


# ---- the memory model ---------------------------------------------------------------------


def memory_request_to_proto(
    problem: AttentionProblem,
    block_m: int,
    block_n: int,
    hardware: str | HardwareSpec | None = None,
    kernel: str | None = None,
    parameters: Mapping[str, int] | None = None,
) -> pb.EstimateMemoryRequest:
    """`kernel` None leaves the field empty: the server applies the solver's default
    (`tilesolve.solver.apps.memory.memory_kernel`: fa2, or the default family of a non-CUDA
    device); `parameters`: the family's parameters fixed (`memory --param`)."""
    request = pb.EstimateMemoryRequest(
        problem=problem_to_proto(problem),
        block_m=block_m,
        block_n=block_n,
        kernel=kernel or "",
        parameters=dict(parameters or {}),
    )
    if hardware is not None:
        request.hardware.CopyFrom(hardware_ref_to_proto(hardware))
    return request


def memory_request_from_proto(
    request: pb.EstimateMemoryRequest,
) -> tuple[AttentionProblem, int, int, str | HardwareSpec | None, str | None, dict[str, int]]:
    """(problem, block_m, block_n, hardware or None, kernel or None for the solver's default,
    parameters); every bad field reported together. The tile's range and the parameters'
    names and values are the solver's to check (`estimate_memory` names block_m / block_n and
    `parameters`)."""
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
    parameters = {name: int(value) for name, value in request.parameters.items()}
    return problem, request.block_m, request.block_n, hardware, kernel, parameters


def _known_kernel(number: int) -> bool:
    return number in pb.KernelFamily.values()


def estimate_to_proto(estimate: MemoryEstimate) -> pb.EstimateMemoryResponse:
    return _from_dict(_enums_to_wire(estimate.model_dump(mode="json")), pb.EstimateMemoryResponse())


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
    message.hardware.CopyFrom(hardware_ref_to_proto(hardware))
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
    response = _from_dict(_enums_to_wire(data), pb.PortfolioResponse())
    response.kernel = kernel
    return response


def portfolio_from_proto(response: pb.PortfolioResponse) -> PortfolioAnswer:
    """The solver's PortfolioAnswer, validated."""
    data = _enums_to_solver(_to_dict(response, with_defaults=True))
    return PortfolioAnswer.model_validate(data)


# ---- batches ------------------------------------------------------------------------------
# A SolveBatchResponse is framed from the encodings of its answers, which are not decoded
# again: an embedded message is its field's key, its length and its bytes (protobuf's
# encoding guide, "Length-Delimited Records"), and a repeated field's entries are concatenated.

_ITEM_RESPONSE = pb.SolveBatchItem.DESCRIPTOR.fields_by_name["response"].number
_BATCH_ITEMS = pb.SolveBatchResponse.DESCRIPTOR.fields_by_name["items"].number
_LENGTH_DELIMITED = 2  # the wire type of strings, bytes and embedded messages


@dataclass(frozen=True)
class FailedItem:
    """A batch item that is not an answer: its google.rpc.Code number (3 for
    INVALID_ARGUMENT, ...), message and field violations."""

    code: int
    message: str
    violations: tuple[FieldViolation, ...] = ()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if not value:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _embedded(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def answered_item(response: bytes) -> bytes:
    """The serialized SolveBatchItem of a serialized SolveResponse (code 0, the default, is
    not written)."""
    return _embedded(_ITEM_RESPONSE, response)


def failed_item(failure: FailedItem) -> bytes:
    """The serialized SolveBatchItem of a request that was not answered."""
    return pb.SolveBatchItem(
        code=failure.code,
        message=failure.message,
        field_violations=[
            pb.FieldViolation(field=v.field, description=v.description) for v in failure.violations
        ],
    ).SerializeToString()


def batch_entry(item: bytes) -> bytes:
    """A serialized SolveBatchItem as one entry of `SolveBatchResponse.items`; the response's
    encoding is its entries, concatenated in request order."""
    return _embedded(_BATCH_ITEMS, item)


def batch_items_from_proto(
    response: pb.SolveBatchResponse,
) -> list[tuple[SolveAnswer, bool] | FailedItem]:
    """Each item's answer and whether the server's cache answered it, or its failure."""
    out: list[tuple[SolveAnswer, bool] | FailedItem] = []
    for item in response.items:
        if item.code == 0:
            out.append(answer_from_proto(item.response))
        else:
            violations = tuple(
                FieldViolation(v.field, v.description) for v in item.field_violations
            )
            out.append(FailedItem(item.code, item.message, violations))
    return out


# ---- errors -------------------------------------------------------------------------------


def status_to_proto(
    code: int, message: str, violations: Sequence[FieldViolation]
) -> status_pb2.Status:
    """A call's rich status (`grpc-status-details-bin`): its field violations as one
    google.rpc.BadRequest detail, none when there are none."""
    status = status_pb2.Status(code=code, message=message)
    if violations:
        status.details.add().Pack(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=v.field, description=v.description
                    )
                    for v in violations
                ]
            )
        )
    return status


def violations_from_status(status: status_pb2.Status) -> list[FieldViolation]:
    """The field violations of every google.rpc.BadRequest detail of a rich status."""
    out: list[FieldViolation] = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
    return out
