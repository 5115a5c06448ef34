"""The memory model of seed 003: what naive attention materialises, what one tile holds, and
how many bytes each kernel design moves through HBM.

For a problem (batch B, query heads H, KV heads Hkv, query tokens Sq, key tokens Sk, head dims
d and dv, element size e bytes) and a tile of block_m query rows by block_n key rows:

    score_matrix_bytes   = B * H * Sq * Sk * e              the naive, materialised S (or P)
    tiles_1d             = ceil(Sq / block_m)               query blocks (1-D tiles, seed 003)
    tiles_1d_kv          = ceil(Sk / block_n)               key/value blocks
    score_tiles          = tiles_1d * tiles_1d_kv           2-D score tiles of one (batch, head)
    score_tile_bytes     = block_m * block_n * e
    working_set_bytes    = (block_m*d + block_n*d + block_n*dv + block_m*block_n + block_m*dv) * e
                           Q, K, V, score and output tiles (seed 003's 3*t*d + t*t + t*d)
    materialization_ratio = Sq * Sk / (block_m * block_n)   full score matrix / one score tile

HBM traffic (bytes), counted for the forward pass:

    naive     = B * H * e * (Sq*d + Sk*d          read Q and K for S = Q K^T
                             + Sq*Sk              write S
                             + Sq*Sk              read S for the softmax
                             + Sq*Sk              write P
                             + Sq*Sk + Sk*dv      read P and V for O = P V
                             + Sq*dv)             write O
    tiled     = B * H * (Sq*d*e + Sq*(dv*e + 4)) + B * H * R * (d + dv) * e
    tiled_l2  = B * H * (Sq*d*e + Sq*(dv*e + 4)) + B * Hkv * Sk * (d + dv) * e

where R is the K/V rows the query blocks of one head fetch: tiles_1d * Sk without a causal
mask (every query block re-reads all of K and V: no L2 reuse), and the rows up to each block's
diagonal, rounded up to block_n, with one. With L2 reuse K and V come from HBM once per KV
head. Q is read once, O written once, and the tiled kernel also writes the 4-byte FP32
log-sum-exp of each query row (for the backward pass). Dropout is not counted.

For the backward pass (`phase` backward) the same fields describe the backward kernels
(FlashAttention-2's design: a K/V block resident, Q, dO, LSE and D streamed past it, dQ added
into an fp32 accumulator with atomics, plus the preprocessing and dQ conversion kernels):

    working_set_bytes (backward) = (bm*(d + dv) + bn*(d + dv) + 2*bm*bn) * e     Q, dO, K, V, P, dS
                                   + 4 * (bn*(d + dv) + bm*d) + 8*bm    dK, dV, dQ (FP32), LSE, D
    naive     = B * H * e * (7*Sq*Sk + 2*Sq*(d + dv) + 2*Sk*(d + dv))
    tiled     = pre + B*H*Sk*(d + dv)*e + B*H*Rq*((d + dv)*e + 8) + 8*B*H*Rq*d
                + dKV + conv                     (Q/dO/LSE/D and the dQ atomics at every K/V block)
    tiled_l2  = pre + B*Hkv*Sk*(d + dv)*e + B*H*Sq*((d + dv)*e + 8) + 8*B*H*Sq*d + dKV + conv
    pre  = B*H*Sq*(2*dv*e + 4 + 4*d)             read O and dO, write D, zero the dQ accumulator
    conv = B*H*Sq*d*(4 + e)                      read the accumulator, write dQ
    dKV  = B*H*Sk*(d + dv)*e  (+ B*(H + Hkv)*Sk*(d + dv)*e to sum dK, dV over a GQA group)
    dq_atomic_bytes = 4 * B * H * Rq * d         FP32 atomic adds sent to L2

where Rq is the query rows the K/V blocks of one head visit (all Sq for every block without a
mask; from each block's diagonal with one). `saved_lse_bytes = 4*B*H*Sq` is the activation the
forward pass keeps for the backward (with O).

The arithmetic intensities divide the problem's useful FLOPs (`AttentionProblem.flops`; the
backward's five GEMMs, 2.5 times as many when d = dv, for phase backward) by each
traffic figure; with a hardware description they are placed on its roofline: attainable
throughput = min(peak, intensity * DRAM bandwidth). Everything here is exact integer arithmetic
on the problem's own head dims; `family_smem_bytes` and `family_resources` are the figures that
use a kernel family's (padded) head dims and buffers (Ascend: L1, L0A, L0B, L0C, UB and the
GM workspace). See docs/model.md, "Memory model".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError, field_validator

from ..answer import ResourceUse, canonical_parameters
from ..candidates import NS_PER_US, evaluation, tie_break_order
from ..constraints import ConstraintKind
from ..cost import LSE_BYTES_PER_ROW
from ..errors import FieldViolation, InvalidRequestError
from ..hardware import CudaDevice, HardwareSpec, RocmDevice, get_hardware
from ..problem import MAX_SEQ_LEN, AttentionProblem, DType, Phase, SolveOptions
from ..registry import family_names, find_family, with_alternatives
from ..schema_config import FROZEN_SCHEMA, empty_list
from ..space import ConfigArrays, Param, ceil_div

if TYPE_CHECKING:
    from ..family import KernelFamily

MAX_BLOCK = 4096  # the largest tile edge, as SolveOptions bounds the block_m/block_n pins
MAX_SWEEP_VALUES = 64  # values per axis of a sweep
# Without a hardware description the family's problem rules are checked as on a reference
# device of the family's kind (for CUDA the newest architecture the fa2 and triton families
# both run on), so only the rules that belong to the kernel itself (head dims, dtype) can make
# the family figures absent.
FAMILY_REFERENCE_HARDWARE = "h100-sxm"
REFERENCE_HARDWARE_BY_KIND = {
    "cuda": FAMILY_REFERENCE_HARDWARE,
    "ascend": "ascend-910b",
    "rocm": "mi300x",
}
DEFAULT_MEMORY_KERNEL = "fa2"  # seed 003's FlashAttention-2 view, on CUDA devices

MODELLED_PHASES = (Phase.FORWARD, Phase.BACKWARD)
FP32_BYTES = 4
LSE_AND_D_BYTES_PER_ROW = 8  # the backward reads the FP32 log-sum-exp and D of each row
# Naive backward per head, in score-sized tensors: read P for dV = P^T dO (1), write dP (1),
# read P and dP and write dS for the softmax gradient (3), read dS for dQ (1) and for dK (1).
NAIVE_BACKWARD_SCORE_PASSES = 7


class Roofline(BaseModel):
    """Where the problem's arithmetic intensities fall on one device's roofline."""

    model_config = FROZEN_SCHEMA

    hardware: str = Field(description="canonical catalog name, or the inline spec's name")
    peak_tflops: float = Field(description="dense tensor (or cube) peak for the dtype, TFLOP/s")
    peak_kind: str = Field(description="which peak: 'fp16 dense tensor', 'fp8 dense tensor', ...")
    dram_bandwidth_gb_per_s: float = Field(description="HBM/DRAM bandwidth, 1e9 bytes/s")
    ridge_point_flops_per_byte: float = Field(
        description="peak / bandwidth: the intensity at which a kernel stops being memory-bound"
    )
    attainable_tflops: float = Field(
        description="min(peak, arithmetic_intensity x bandwidth): the tiled kernel with L2 reuse"
    )
    attainable_tflops_tiled_no_l2: float = Field(
        description="the tiled kernel re-reading K/V from HBM for every query block"
    )
    attainable_tflops_naive: float = Field(description="naive, materialising attention")
    bound: Literal["memory", "compute"] = Field(
        description="the tiled kernel's side of the ridge (arithmetic_intensity vs the ridge)"
    )


class MemoryEstimate(BaseModel):
    """The memory model's figures for one problem and one tile (units in the field names;
    counts are plain numbers, FLOPs are floating-point operations, intensities FLOP/byte)."""

    model_config = FROZEN_SCHEMA

    problem: AttentionProblem = Field(description="the problem, as given")
    block_m: int = Field(ge=1, le=MAX_BLOCK, description="query rows per tile")
    block_n: int = Field(ge=1, le=MAX_BLOCK, description="key/value rows per tile")
    kernel: str = Field(
        description="the family whose figures (shared memory, resources) are reported"
    )
    dtype_bytes: int = Field(description="bytes per element of Q, K, V, S, P and O")
    score_matrix_bytes: int = Field(description="B x H x Sq x Sk x e: the materialised S")
    tiles_1d: int = Field(description="ceil(Sq / block_m): query blocks (tiles per axis)")
    tiles_1d_kv: int = Field(description="ceil(Sk / block_n): key/value blocks")
    score_tiles: int = Field(description="tiles_1d x tiles_1d_kv, per (batch, head)")
    score_tile_bytes: int = Field(description="block_m x block_n x e")
    working_set_bytes: int = Field(
        description="Q, K, V, score and output tiles: "
        "(bm*d + bn*d + bn*dv + bm*bn + bm*dv) x e (seed 003)"
    )
    family_smem_bytes: int | None = Field(
        description="the kernel family's dynamic shared memory for this tile (its padded head "
        "dims, its shallowest K/V pipeline: one stage, fa3's two-stage ring); None when the "
        "family cannot run the problem"
    )
    family_smem_note: str | None = Field(
        description="why family_smem_bytes is None (None when it is given)"
    )
    family_resources: list[ResourceUse] = Field(
        default_factory=empty_list,
        description="the family's use of each of its resources for this tile, with capacity and "
        "unit (Ascend: l1, l0a, l0b, l0c, ub, workspace), at family_parameters; empty when the "
        "family cannot run the problem",
    )
    family_parameters: dict[str, int] = Field(
        default_factory=dict,
        description="the family's decision variables for family_resources: the tile as given, "
        "the others the fastest choice whose resources fit (the first of each domain if none)",
    )
    materialization_ratio: float = Field(
        description="Sq x Sk / (block_m x block_n): full score matrix over one score tile"
    )
    saved_lse_bytes: int = Field(
        description="B x H x Sq x 4: the FP32 log-sum-exp the forward pass keeps for the backward"
    )
    dq_atomic_bytes: int | None = Field(
        None,
        description="backward only: FP32 atomic-add bytes of the dQ accumulator sent to L2 "
        "(4 x B x H x Rq x d); None for the forward pass",
    )
    hbm_bytes_naive: int = Field(description="naive attention's HBM traffic (see module doc)")
    hbm_bytes_tiled: int = Field(
        description="tiled kernel, K/V re-read from HBM by every query block (no L2 reuse)"
    )
    hbm_bytes_tiled_l2: int = Field(description="tiled kernel, K/V read once per KV head")
    flops: float = Field(description="useful forward FLOPs (causal: the kept triangle only)")
    arithmetic_intensity: float = Field(description="flops / hbm_bytes_tiled_l2, FLOP/byte")
    arithmetic_intensity_naive: float = Field(description="flops / hbm_bytes_naive, FLOP/byte")
    arithmetic_intensity_tiled_no_l2: float = Field(
        description="flops / hbm_bytes_tiled, FLOP/byte"
    )
    roofline: Roofline | None = Field(description="present when a hardware description is given")

    @field_validator("family_parameters")
    @classmethod
    def _canonical_order(cls, values: dict[str, int]) -> dict[str, int]:
        return canonical_parameters(values)


# ---- arithmetic ------------------------------------------------------------------------------


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum(floor((a*i + b) / m) for i in range(n)) for n >= 0, m >= 1, a >= 0, b >= 0, in
    O(log m) steps (the Euclid-like reduction; exact on Python integers)."""
    if n < 0 or m < 1 or a < 0 or b < 0:
        raise ValueError("floor_sum needs n >= 0, m >= 1, a >= 0, b >= 0")
    total = 0
    while True:
        if a >= m:
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            return total
        n, b = divmod(y_max, m)
        m, a = a, m


def kv_rows_read(sq: int, sk: int, block_m: int, block_n: int, causal: bool) -> int:
    """K/V rows the query blocks of one head fetch, summed over the blocks.

    Without a mask every block reads all Sk rows. With the bottom-right-aligned causal mask
    (offset Sk - Sq), query block i needs keys below need_i = min(Sq, (i+1)*block_m) + Sk - Sq;
    it visits ceil(need_i / block_n) K/V tiles and so reads min(Sk, block_n * that) rows
    (none when need_i <= 0). The sum is taken in closed form with `floor_sum`.
    """
    n_m = ceil_div(sq, block_m)
    if not causal:
        return n_m * sk
    offset = sk - sq
    n_kv = ceil_div(sk, block_n)
    # Blocks 0 .. n_m-2 end inside the sequence: need_i = (i+1)*block_m + offset < Sk.
    # The last block always needs all Sk keys. Among the others, blocks before i0 need none,
    # blocks from i1 on need every K/V tile (rows read = Sk), those between read whole tiles.
    last = n_m - 1
    i0 = min(max(0, (-offset) // block_m), last)
    first_all = ceil_div((n_kv - 1) * block_n + 1 - offset, block_m) - 1
    i1 = min(max(i0, first_all), last)
    partial_tiles = floor_sum(i1 - i0, block_n, block_m, (i0 + 1) * block_m + offset + block_n - 1)
    return block_n * partial_tiles + (last - i1) * sk + sk


# ---- the estimate ----------------------------------------------------------------------------


def _request_violations(
    problem: AttentionProblem, block_m: object, block_n: object, kernel: object
) -> list[FieldViolation]:
    violations = []
    for field, value in (("block_m", block_m), ("block_n", block_n)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BLOCK:
            violations.append(
                FieldViolation(field, f"must be an integer from 1 to {MAX_BLOCK}; got {value!r}")
            )
    known = family_names()
    if kernel not in known:
        violations.append(
            FieldViolation(
                "kernel", f"unknown kernel family {kernel!r}; allowed: {', '.join(known)}"
            )
        )
    if problem.phase not in MODELLED_PHASES:
        violations.append(
            FieldViolation(
                "phase",
                f"the memory model covers the forward and backward passes; phase "
                f"{problem.phase.value!r} is not modelled yet; allowed: "
                f"{', '.join(p.value for p in MODELLED_PHASES)}",
            )
        )
    return violations


def memory_kernel(kernel: str | None, hardware: HardwareSpec | None) -> str:
    """The family the memory model reports: the named one; else fa2 (seed 003's view) without
    hardware or on a CUDA device, and the device's default family on any other kind."""
    if kernel:
        return kernel
    if hardware is not None and not isinstance(hardware, CudaDevice):
        return hardware.default_kernel
    return DEFAULT_MEMORY_KERNEL


def _family_figures(
    problem: AttentionProblem,
    block_m: int,
    block_n: int,
    kernel: str,
    hardware: HardwareSpec | None,
    parameters: Mapping[str, int],
) -> tuple[int | None, str | None, list[ResourceUse], dict[str, int]]:
    """The family's shared-memory bytes for the tile (or None and the reason), and its
    resources at the fastest fitting choice of its other parameters (those in `parameters`
    fixed at the values given)."""
    family = find_family(kernel, problem.phase)
    if family is None:
        return None, f"kernel family {kernel!r} has no {problem.phase.value} model yet", [], {}
    reference = hardware
    if reference is None:
        reference = get_hardware(
            REFERENCE_HARDWARE_BY_KIND.get(family.device_kind, FAMILY_REFERENCE_HARDWARE)
        )
    violations = with_alternatives(
        family.problem_violations(problem, reference), problem, reference
    )
    if violations:
        return None, "; ".join(f"{v.field}: {v.description}" for v in violations), [], {}
    params = family.params(problem, reference)
    bad = _parameter_violations(kernel, params, parameters)
    if bad:  # before the request's parameters, which judge a page_size pin as a paged request
        raise InvalidRequestError(bad)
    # the request's own parameters (a setting such as flex's tf32 held unless given)
    params = family.request_params(problem, reference, SolveOptions(parameter_pins=parameters))
    # The tile as given, every other parameter at the smallest value of its domain (one K/V
    # stage: triton adds a K/V tile per further stage; the smem formulas ignore the warps),
    # or at the value `parameters` gives it.
    values = {p.name: p.domain[0] for p in params}
    values.update(block_m=block_m, block_n=block_n)
    values.update(parameters)
    one = ConfigArrays({k: np.array([v], dtype=np.int64) for k, v in values.items()})
    uses = family.resources(reference, problem, SolveOptions(), one).uses(0)
    smem = next((u.used for u in uses if u.name == "shared_memory"), None)
    note = None
    if smem is None:
        names = ", ".join(u.name for u in uses)
        note = (
            f"kernel family {kernel!r} has no shared-memory figure (its resources: {names}; "
            "see family_resources)"
        )
    resources, chosen = _family_resources(family, reference, problem, block_m, block_n, parameters)
    return smem, note, resources, chosen


def _parameter_violations(
    kernel: str, params: tuple[Param, ...], parameters: Mapping[str, int]
) -> list[FieldViolation]:
    """Each given parameter must be one the family declares, with a value in its domain."""
    domains = {p.name: p.domain for p in params}
    out = []
    for name, value in parameters.items():
        if name not in domains:
            out.append(
                FieldViolation(
                    "parameters",
                    f"{kernel} has no parameter {name!r}; its parameters: {', '.join(domains)}",
                )
            )
        elif value not in domains[name]:
            allowed = ", ".join(str(v) for v in domains[name])
            out.append(FieldViolation("parameters", f"{name}={value} is not one of {allowed}"))
    return out


def _family_resources(
    family: KernelFamily,
    hardware: HardwareSpec,
    problem: AttentionProblem,
    block_m: int,
    block_n: int,
    parameters: Mapping[str, int],
) -> tuple[list[ResourceUse], dict[str, int]]:
    """The family's resources for the tile, its other parameters chosen as the fastest whose
    capacity constraints hold (the first of each domain when none does); a parameter in
    `parameters` is fixed at its value. A family that does not declare block_m and block_n
    (its tile has other names) is evaluated only when `parameters` name its tile."""
    params = family.request_params(problem, hardware, SolveOptions(parameter_pins=parameters))
    names = [p.name for p in params]
    if ("block_m" not in names or "block_n" not in names) and not parameters:
        return [], {}
    params = tuple(
        Param(p.name, (parameters[p.name],), p.doc) if p.name in parameters else p for p in params
    )
    others = [p for p in params if p.name not in ("block_m", "block_n")]
    grid = ConfigArrays.product(others) if others else ConfigArrays({})
    count = max(len(grid), 1)
    columns = {
        p.name: (
            np.full(count, block_m if p.name == "block_m" else block_n, dtype=np.int64)
            if p.name in ("block_m", "block_n")
            else grid[p.name]
        )
        for p in params
    }
    cfg = ConfigArrays(columns)
    options = SolveOptions()
    ev = evaluation(family, hardware, problem, options, cfg)
    fits = np.ones(count, dtype=np.bool_)
    for constraint in family.constraints(hardware, problem, options):
        if constraint.kind is ConstraintKind.CAPACITY:
            fits &= constraint.satisfied(ev)
    with np.errstate(all="ignore"):
        times = np.asarray(family.evaluate(ev).time_us, dtype=np.float64)
    ok = fits & np.isfinite(times)
    index = 0
    if ok.any():
        # the solver's order: modelled time in whole nanoseconds, then the family's tie-break
        rows = np.flatnonzero(ok)
        ties = tie_break_order(family.tie_keys(ev), count)[rows]
        index = int(rows[np.lexsort((ties, np.rint(times[rows] * NS_PER_US)))[0]])
    uses = [
        ResourceUse(name=u.name, used=u.used, capacity=u.capacity, unit=u.unit)
        for u in ev.res.uses(index)
    ]
    return uses, cfg.config(index).as_dict()


def _peak(hardware: HardwareSpec, dtype: DType, tf32: bool = False) -> tuple[float, str]:
    """The dense peak for the dtype (TFLOP/s) and what it is (`tf32`: fp32 inputs on the
    tensor cores, flex's `--param tf32=1`)."""
    if isinstance(hardware, CudaDevice):
        tp = hardware.throughput
        if dtype is DType.FP8:
            if tp.tensor_fp8_dense_tflops is not None:
                return tp.tensor_fp8_dense_tflops, "fp8 dense tensor"
            return tp.tensor_fp16_dense_tflops, "fp16 dense tensor (no fp8 tensor peak)"
        if dtype is DType.FP32 and tf32:
            return tp.tensor_tf32_dense_tflops, "tf32 dense tensor"
        if dtype is DType.FP32:
            # fp32 runs in the flex family at FLOAT32_PRECISION 'ieee' by default: FMAs
            return tp.fp32_tflops, "fp32 CUDA cores (FMA)"
        return tp.tensor_fp16_dense_tflops, f"{dtype.value} dense tensor"
    if isinstance(hardware, RocmDevice):
        rocm = hardware.rocm
        if dtype is DType.FP8 and rocm.mfma_fp8_dense_tflops is not None:
            return rocm.mfma_fp8_dense_tflops, f"fp8 ({rocm.fp8_format}) dense MFMA"
        if dtype is DType.FP8:
            return rocm.mfma_fp16_dense_tflops, "fp16 dense MFMA (no fp8 MFMA)"
        return rocm.mfma_tflops(2, bf16=dtype is DType.BF16), f"{dtype.value} dense MFMA"
    return hardware.ascend.cube_fp16_tflops, "fp16 cube"


def _roofline(
    hardware: HardwareSpec,
    dtype: DType,
    flops: float,
    naive: int,
    tiled: int,
    tiled_l2: int,
    tf32: bool = False,
) -> Roofline:
    peak, kind = _peak(hardware, dtype, tf32)
    bandwidth = hardware.memory.dram_bandwidth_gb_per_s
    bytes_per_s = bandwidth * 1e9
    ridge = peak * 1e12 / bytes_per_s

    def attainable(traffic: int) -> float:
        return min(peak, flops / traffic * bytes_per_s / 1e12)

    return Roofline(
        hardware=hardware.name,
        peak_tflops=peak,
        peak_kind=kind,
        dram_bandwidth_gb_per_s=bandwidth,
        ridge_point_flops_per_byte=ridge,
        attainable_tflops=attainable(tiled_l2),
        attainable_tflops_tiled_no_l2=attainable(tiled),
        attainable_tflops_naive=attainable(naive),
        bound="memory" if flops / tiled_l2 < ridge else "compute",
    )


def estimate_memory(
    problem: AttentionProblem,
    block_m: int,
    block_n: int,
    hardware: HardwareSpec | str | None = None,
    kernel: str | None = None,
    parameters: Mapping[str, int] | None = None,
) -> MemoryEstimate:
    """The memory model for `problem` tiled block_m x block_n (module doc for the formulas).

    `hardware` (a spec, or a catalog name) adds the roofline and decides whether the family
    can run the problem; `kernel` names the family whose shared-memory figure and resources
    are reported (None: `memory_kernel`'s default); `parameters` fixes any of the family's
    parameters (`memory --param NAME=VALUE`: a backward tile's block_m1 ... block_n2, the
    stages) for those figures. Raises InvalidRequestError naming every
    bad field (block_m, block_n, kernel, phase); UnknownHardwareError for an unknown name.
    """
    violations = _request_violations(problem, block_m, block_n, kernel or DEFAULT_MEMORY_KERNEL)
    if violations:
        raise InvalidRequestError(violations)
    spec = get_hardware(hardware) if isinstance(hardware, str) else hardware
    kernel = memory_kernel(kernel, spec)

    batch_heads = problem.batch * problem.heads
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    e = problem.dtype.bytes
    bm, bn = block_m, block_n

    tiles_1d = ceil_div(sq, bm)
    tiles_1d_kv = ceil_div(sk, bn)
    if problem.phase is Phase.BACKWARD:
        traffic = _backward_traffic(problem, bm, bn)
    else:
        traffic = _forward_traffic(problem, bm, bn)
    hbm_naive, hbm_tiled, hbm_tiled_l2, flops, working_set, dq_atomic_bytes = traffic
    family_bytes, family_note, resources, chosen = _family_figures(
        problem, bm, bn, kernel, spec, dict(parameters or {})
    )

    return MemoryEstimate(
        problem=problem,
        block_m=bm,
        block_n=bn,
        kernel=kernel,
        dtype_bytes=e,
        score_matrix_bytes=batch_heads * sq * sk * e,
        tiles_1d=tiles_1d,
        tiles_1d_kv=tiles_1d_kv,
        score_tiles=tiles_1d * tiles_1d_kv,
        score_tile_bytes=bm * bn * e,
        working_set_bytes=working_set,
        family_smem_bytes=family_bytes,
        family_smem_note=family_note,
        family_resources=resources,
        family_parameters=chosen,
        materialization_ratio=sq * sk / (bm * bn),
        saved_lse_bytes=batch_heads * sq * LSE_BYTES_PER_ROW,
        dq_atomic_bytes=dq_atomic_bytes,
        hbm_bytes_naive=hbm_naive,
        hbm_bytes_tiled=hbm_tiled,
        hbm_bytes_tiled_l2=hbm_tiled_l2,
        flops=flops,
        arithmetic_intensity=flops / hbm_tiled_l2,
        arithmetic_intensity_naive=flops / hbm_naive,
        arithmetic_intensity_tiled_no_l2=flops / hbm_tiled,
        roofline=(
            None
            if spec is None
            else _roofline(
                spec,
                problem.dtype,
                flops,
                hbm_naive,
                hbm_tiled,
                hbm_tiled_l2,
                tf32=bool((parameters or {}).get("tf32")),
            )
        ),
    )


Traffic = tuple[int, int, int, float, int, int | None]


def _forward_traffic(problem: AttentionProblem, bm: int, bn: int) -> Traffic:
    """(naive, tiled, tiled with L2 reuse, FLOPs, working set, None) of the forward pass."""
    batch_heads = problem.batch * problem.heads
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    d, dv = problem.head_dim, problem.head_dim_v_eff
    e = problem.dtype.bytes
    naive_per_head = e * (sq * d + sk * d + 4 * sq * sk + sk * dv + sq * dv)
    q_and_o = batch_heads * (sq * d * e + sq * (dv * e + LSE_BYTES_PER_ROW))
    kv_row_bytes = (d + dv) * e
    rows_read = kv_rows_read(sq, sk, bm, bn, problem.causal)
    hbm_naive = batch_heads * naive_per_head
    hbm_tiled = q_and_o + batch_heads * rows_read * kv_row_bytes
    hbm_tiled_l2 = q_and_o + problem.batch * problem.kv_heads_eff * sk * kv_row_bytes
    working_set = (bm * d + bn * d + bn * dv + bm * bn + bm * dv) * e
    return hbm_naive, hbm_tiled, hbm_tiled_l2, problem.flops, working_set, None


def q_rows_read(sq: int, sk: int, block_m: int, block_n: int, causal: bool) -> int:
    """Query rows the K/V blocks of one head visit in the backward pass, summed over blocks.

    Without a mask every K/V block reads all Sq rows. With the bottom-right causal mask
    (offset Sk - Sq) K/V block j (keys j*block_n ...) is first needed by query row
    j*block_n - offset, so it reads from the query block holding that row to the end:
    Sq - block_m * floor(max(0, j*block_n - offset) / block_m) rows. The sum is taken in
    closed form with `floor_sum`."""
    n_kv = ceil_div(sk, block_n)
    if not causal:
        return n_kv * sq
    offset = sk - sq
    first = 0 if offset < 0 else offset // block_n + 1  # first block with j*block_n > offset
    first = min(first, n_kv)
    skipped = floor_sum(n_kv - first, block_m, block_n, first * block_n - offset)
    return n_kv * sq - block_m * skipped


def _backward_traffic(problem: AttentionProblem, bm: int, bn: int) -> Traffic:
    """(naive, tiled, tiled with L2 reuse, FLOPs, working set, dQ atomic bytes) of the
    backward pass (module doc)."""
    batch_heads = problem.batch * problem.heads
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    d, dv = problem.head_dim, problem.head_dim_v_eff
    e = problem.dtype.bytes
    naive_per_head = e * (
        NAIVE_BACKWARD_SCORE_PASSES * sq * sk + 2 * sq * (d + dv) + 2 * sk * (d + dv)
    )
    row_q = (d + dv) * e + LSE_AND_D_BYTES_PER_ROW
    kv_head = sk * (d + dv) * e
    pre = batch_heads * sq * (2 * dv * e + FP32_BYTES + FP32_BYTES * d)
    conv = batch_heads * sq * d * (FP32_BYTES + e)
    dkv = batch_heads * kv_head
    if problem.kv_heads_eff != problem.heads:
        dkv += problem.batch * (problem.heads + problem.kv_heads_eff) * kv_head
    rows = q_rows_read(sq, sk, bm, bn, problem.causal)
    atomic = FP32_BYTES * batch_heads * rows * d
    hbm_tiled = pre + batch_heads * kv_head + batch_heads * rows * row_q + 2 * atomic + dkv + conv
    accumulator = 2 * FP32_BYTES * batch_heads * sq * d  # first touch and write-back
    hbm_tiled_l2 = (
        pre
        + problem.batch * problem.kv_heads_eff * kv_head
        + batch_heads * sq * row_q
        + accumulator
        + dkv
        + conv
    )
    working_set = (
        (bm * (d + dv) + bn * (d + dv) + 2 * bm * bn) * e
        + FP32_BYTES * (bn * (d + dv) + bm * d)
        + LSE_AND_D_BYTES_PER_ROW * bm
    )
    flops = problem.flops * (3 * d + 2 * dv) / (d + dv)
    return batch_heads * naive_per_head, hbm_tiled, hbm_tiled_l2, flops, working_set, atomic


def memory_sweep(
    seq_lens: list[int],
    tiles: list[int],
    head_dim: int,
    dtype: DType | str = DType.FP16,
    batch: int = 1,
    heads: int = 1,
    *,
    kv_heads: int | None = None,
    head_dim_v: int | None = None,
    causal: bool = False,
    hardware: HardwareSpec | str | None = None,
    kernel: str | None = None,
    phase: Phase | str = Phase.FORWARD,
) -> list[MemoryEstimate]:
    """Seed 003's comparison: one estimate per (seq_len, square tile), seq_len-major.

    Each seq_len is both the query and the key/value length. Raises InvalidRequestError
    naming `seq_lens` / `tiles` (empty, too many, or out-of-range values) or the problem field.
    """
    violations: list[FieldViolation] = []
    for field, values, hi in (("seq_lens", seq_lens, MAX_SEQ_LEN), ("tiles", tiles, MAX_BLOCK)):
        if not 1 <= len(values) <= MAX_SWEEP_VALUES:
            violations.append(
                FieldViolation(
                    field, f"must list 1 to {MAX_SWEEP_VALUES} values; got {len(values)}"
                )
            )
        bad = [
            v for v in values if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi
        ]
        if bad:
            violations.append(
                FieldViolation(field, f"every value must be an integer from 1 to {hi}; got {bad}")
            )
    if violations:
        raise InvalidRequestError(violations)
    spec = get_hardware(hardware) if isinstance(hardware, str) else hardware
    estimates: list[MemoryEstimate] = []
    for seq_len in seq_lens:
        try:
            problem = AttentionProblem.model_validate(
                {
                    "batch": batch,
                    "heads": heads,
                    "kv_heads": kv_heads,
                    "seq_len": seq_len,
                    "head_dim": head_dim,
                    "head_dim_v": head_dim_v,
                    "dtype": dtype,
                    "causal": causal,
                    "phase": phase,
                }
            )
        except ValidationError as exc:
            raise InvalidRequestError(_problem_violations(exc)) from None
        estimates.extend(estimate_memory(problem, t, t, spec, kernel) for t in tiles)
    return estimates


def _problem_violations(exc: ValidationError) -> list[FieldViolation]:
    """A problem's validation errors as field violations (the loc, or 'problem')."""
    return [
        FieldViolation(".".join(str(p) for p in err["loc"]) or "problem", str(err["msg"]))
        for err in exc.errors()
    ]


__all__ = [
    "MemoryEstimate",
    "Roofline",
    "estimate_memory",
    "floor_sum",
    "kv_rows_read",
    "memory_kernel",
    "memory_sweep",
    "q_rows_read",
]
