"""Inline hardware at and beyond the bounds of its figures (issue 22).

Every numeric figure of a device has a physically meaningful bound on both sides, stated in
the schema with its unit. Beyond a bound a Solve is INVALID_ARGUMENT naming the field; at a
bound it is answered, and no cost model can then produce a time that is not finite and
positive (a property test over inline devices with their figures at the bounds). Before issue
22, `memory.dram_bandwidth_gb_per_s = 1e-300` overflowed the forward cost model to an
infinite time and the answer failed to encode: INTERNAL ("Failed to parse candidates field").
"""

from __future__ import annotations

import sys
from typing import Any

import grpc
import numpy as np
import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from tilesolve import wire
from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware, parse_hardware
from tilesolve.solver.candidates import evaluation
from tilesolve.solver.hardware import (
    AscendCore,
    CudaThroughput,
    MemorySystem,
    RocmCompute,
    SmLimits,
)
from tilesolve.solver.registry import find_family, registrations
from tilesolve.solver.validate import broken_figures
from tilesolve.v1 import tilesolve_pb2 as pb
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

from loopback import violations

SECTIONS: dict[str, type[BaseModel]] = {
    "memory": MemorySystem,
    "sm": SmLimits,
    "throughput": CudaThroughput,
    "ascend": AscendCore,
    "rocm": RocmCompute,
}
# One device of each kind: its figures are swept one at a time.
SWEPT = ("a100", "ascend-910b", "mi300x")
TINY = 5e-324  # the smallest positive float (a denormal)
INT_MAX = {FieldDescriptor.TYPE_INT32: (1 << 31) - 1, FieldDescriptor.TYPE_INT64: (1 << 63) - 1}
PROBLEM = pb.AttentionProblem(seq_len=1024, head_dim=64)


def bounds(model: type[BaseModel], name: str) -> tuple[float, float]:
    """A numeric field's lower and upper bound (for a tuple, each element's)."""
    info = model.model_fields[name]
    metadata = list(info.metadata)
    args = getattr(info.annotation, "__args__", ())
    for arg in args:  # tuple[Annotated[int, Field(ge, le)], ...]: the element's bounds
        metadata += list(getattr(arg, "__metadata__", ()))
        for inner in getattr(arg, "__metadata__", ()):
            metadata += list(getattr(inner, "metadata", ()))
    low = [m.ge for m in metadata if hasattr(m, "ge")]
    high = [m.le for m in metadata if hasattr(m, "le")]
    assert low and high, f"{model.__name__}.{name} has no bound on both sides"
    return low[0], high[0]


def numeric_fields(spec: Any) -> list[tuple[str, str]]:
    """(section, field) of every numeric figure a device of this kind has."""
    out = []
    for section, model in SECTIONS.items():
        if getattr(spec, section, None) is None:
            continue
        for name, info in model.model_fields.items():
            kinds = (info.annotation, *getattr(info.annotation, "__args__", ()))
            if any(kind in (int, float) for kind in kinds) or name.endswith("_kib"):
                out.append((section, name))
    return out


def test_every_figure_is_bounded_on_both_sides_with_its_unit() -> None:
    """Both bounds, a rate (a float) above 0, and the unit in the name or the description."""
    units = ("bytes", "mhz", "tflops", "cycles", "clk", "gb_per_s", "kib", "count", "per_")
    for device in SWEPT:
        for section, name in numeric_fields(get_hardware(device)):
            info = SECTIONS[section].model_fields[name]
            low, high = bounds(SECTIONS[section], name)
            assert low < high, f"{section}.{name}"
            if float in (info.annotation, *getattr(info.annotation, "__args__", ())):
                assert low > 0, f"{section}.{name} admits 0"
            described = f"{name} {info.description or ''}".lower()
            unitless = ("fraction", "efficiency", "threads", "regs", "subpartitions", "elements")
            assert any(u in described for u in (*units, *unitless)), f"{section}.{name}"


def _sweep_values(kind: int, low: float, high: float) -> list[float]:
    if kind in INT_MAX:
        return [0, 1, low, high, INT_MAX[kind]]
    return [0.0, TINY, low, high, 1e308]


def test_inline_figures_at_and_beyond_their_bounds_are_never_internal(
    stub: pb_grpc.TileSolveServiceStub,
) -> None:
    """Each numeric field of each device kind at 0, the smallest positive value, its lower
    and upper bound and the largest the wire carries: INVALID_ARGUMENT naming the field
    beyond a bound, an answer (or a refusal of the device as a whole) at one, never
    INTERNAL."""
    outcomes: dict[str, int] = {}
    for device in SWEPT:
        base = wire.spec_to_proto(get_hardware(device))
        for section, name in numeric_fields(get_hardware(device)):
            low, high = bounds(SECTIONS[section], name)
            field = getattr(base, section).DESCRIPTOR.fields_by_name[name]
            for value in _sweep_values(field.type, low, high):
                spec = pb.HardwareSpec()
                spec.CopyFrom(base)
                message = getattr(spec, section)
                if field.is_repeated:
                    getattr(message, name)[0] = int(value)
                else:
                    setattr(message, name, int(value) if field.type in INT_MAX else value)
                request = pb.SolveRequest(
                    hardware=pb.HardwareRef(spec=spec),
                    problem=PROBLEM,
                    options=pb.SolveOptions(top_k=1),
                )
                label = f"{device} {section}.{name}={value!r}"
                try:
                    stub.Solve(request, timeout=60)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as exc:
                    code = exc.code()
                    assert code is grpc.StatusCode.INVALID_ARGUMENT, (label, exc.details())
                    named = violations(exc)
                    if not low <= value <= high:
                        path = f"hardware.spec.{section}.{name}"
                        assert any(v.startswith(path) for v in named), (label, named)
                else:
                    assert low <= value <= high, f"{label}: accepted beyond its bounds"
                outcomes[code.name] = outcomes.get(code.name, 0) + 1
    print(f"\nFIGURE inline bounds sweep: {outcomes}", file=sys.stderr)
    assert set(outcomes) == {"OK", "INVALID_ARGUMENT"}
    assert outcomes["OK"] >= 50  # most figures answer at both bounds


# ---- the property: no cost model leaves finite, positive times within the bounds -------------

BASES = (
    "a100", "h100-sxm", "b200", "t4", "ascend-910b", "ascend-910", "ascend-310p3",
    "mi300x", "mi355x",
)  # fmt: skip
# Figures tied to others by a device's consistency rules keep the base's value (or, for the
# cube peak, follow from the figures it is the product of).
TIED = {
    "sm": {
        "max_threads_per_block", "max_threads_per_sm",
        "smem_per_sm_bytes", "smem_per_block_default_bytes", "smem_per_block_optin_bytes",
        "smem_carveout_options_kib",
    },
    "ascend": {"ai_core_count", "aic_count", "aiv_count", "cube_fp16_tflops",
               "standalone_vector_core_count"},
    "rocm": {"cu_count", "xcd_count", "l2_per_xcd_bytes", "lds_per_cu_bytes",
             "lds_per_workgroup_bytes", "lds_alloc_granule_bytes", "max_workgroup_threads",
             "wavefront_lanes", "max_waves_per_simd", "simds_per_cu"},
}  # fmt: skip
PROBLEMS = (
    {"seq_len": 4096, "head_dim": 128},
    {"seq_len": 1, "head_dim": 32},
    {"seq_len": 16384, "head_dim": 256, "batch": 64, "heads": 64, "causal": True},
    {"seq_len": 1 << 24, "head_dim": 64, "dtype": "fp8"},
    {"seq_len": 4096, "seq_len_kv": 1 << 20, "head_dim": 128, "heads": 8, "kv_heads": 1},
    {"seq_len": 128, "head_dim": 64, "phase": "backward"},
    {"seq_len": 1, "seq_len_kv": 131072, "head_dim": 128, "heads": 32, "kv_heads": 8,
     "phase": "decode"},
)  # fmt: skip


@st.composite
def extreme_device(draw: st.DrawFn) -> Any:
    """A catalog device with each free figure at its lower bound, its upper bound, anywhere
    between, or as catalogued."""
    data = get_hardware(draw(st.sampled_from(BASES))).model_dump(mode="json")
    for section, model in SECTIONS.items():
        if section not in data:
            continue
        for name, value in data[section].items():
            if value is None or isinstance(value, bool | str | list):
                continue
            if name in TIED.get(section, ()):
                continue
            low, high = bounds(model, name)
            between = st.integers(low, high) if isinstance(value, int) else st.floats(low, high)
            data[section][name] = draw(st.one_of(st.sampled_from([low, high, value]), between))
    if "ascend" in data:  # the peak is count x MACs x 2 x clock
        core = data["ascend"]
        core["cube_fp16_tflops"] = (
            core["aic_count"] * core["cube_fp16_macs_per_cycle"] * 2 * core["cube_clock_mhz"] * 1e-6
        )
    try:
        return parse_hardware(data)
    except ValidationError:
        assume(False)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(spec=extreme_device(), shape=st.sampled_from(PROBLEMS))
def test_no_cost_model_leaves_finite_positive_times_at_the_bounds(
    spec: Any, shape: dict[str, Any]
) -> None:
    problem = AttentionProblem(**shape)
    for name, phase in registrations():
        family = find_family(name, phase)
        if phase is not problem.phase or family is None:
            continue
        if family.problem_violations(problem, spec):
            continue
        with np.errstate(all="raise"):  # an overflow is a failure here, not a warning
            ev = evaluation(family, spec, problem, SolveOptions())
            perf = family.evaluate(ev)
        broken = broken_figures(perf, np.arange(len(ev.cfg)))
        assert not broken, f"{name}/{phase.value} on {spec.name}: {broken}"


@pytest.mark.parametrize("value", [1e-300, TINY, 0.0])
def test_the_overflow_that_was_internal_is_a_named_invalid_argument(
    value: float, stub: pb_grpc.TileSolveServiceStub
) -> None:
    spec = wire.spec_to_proto(get_hardware("a100"))
    spec.memory.dram_bandwidth_gb_per_s = value
    spec.throughput.tensor_fp16_dense_tflops = value
    with pytest.raises(grpc.RpcError) as caught:
        stub.Solve(pb.SolveRequest(hardware=pb.HardwareRef(spec=spec), problem=PROBLEM))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    named = violations(caught.value)
    assert "hardware.spec.memory.dram_bandwidth_gb_per_s" in named
    assert "hardware.spec.throughput.tensor_fp16_dense_tflops" in named
    assert "greater than or equal to 1" in named["hardware.spec.memory.dram_bandwidth_gb_per_s"]
