"""The `ascend` family: FlashAttention forward on Huawei's DaVinci AI core (Ascend NPUs).

One block is one S1 tile (`block_m` query rows) of one (batch, head); it walks the keys in
rounds of one S2 tile (`block_n` columns). In each round the cube unit computes S = Q K^T
(fp32, in L0C), the vector unit runs the online softmax on S and produces P (fp16/bf16), and
the cube computes the partial output P V, which the vector unit folds into its fp32 output
accumulator. The cube works on 16 x 16 fractals in base blocks of `block_m` rows by 128
columns (an S2 tile of 1024 is eight of them); the vector unit takes its rows in slices of
`vec_rows`. On split-core parts (910B) the cube (AIC) and vector (AIV) cores are separate and
every exchange (S, P, the partial output) goes through a workspace in GM/L2; on coupled parts
(910A, 310P3) one AI core holds both units and the exchange stays on chip (L0C -> UB -> L1).

Which kernel this stands for (ascend.md sections 3-4): on split parts CANN's FlashAttentionScore
(`torch_npu.npu_fusion_attention`); on coupled parts, where FlashAttentionScore does not exist,
ATB's NZ-layout FlashAttention (910A, 310P3), PromptFlashAttention's coupled-core path (310P3)
and MindSpore's TIK FlashAttention (910A). Decision variables: the S1 and S2 tiles, the
pipeline depth `num_stages` (1: single-buffered, no overlap; 2: ping-pong buffers and the cube
one round ahead of the vector; k: k - 1 rounds ahead), the vector slice `vec_rows`, and the
head-dim split `d_split`. Formulas, units and sources: docs/model.md section 10; the cost model
is `ascend_cost.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..constraints import Constraint, ConstraintKind, Rule
from ..cost import L2_USABLE_FRACTION, Perf
from ..errors import FieldViolation
from ..family import KernelFamily, Resources, ResourceUse
from ..hardware import AscendCore, AscendDevice, HardwareSpec
from ..problem import AttentionProblem, DType, SolveOptions
from ..space import Config, ConfigArrays, IntArray, Param, ceil_div

if TYPE_CHECKING:
    from ..candidates import CandidateTable, Evaluation

# ---- the design rules and the kernel's structure (docs/model.md 10.1-10.2) -------------------
# Tile edges are multiples of 32 elements: the design rule this project states (DESIGN.md). CANN
# itself aligns S1, S2 and D to 16 (one fractal); seed 001's "multiple of 32" comes from the
# 32-byte DataCopy/UB alignment, which is 16 fp16 elements.
TILE_MULTIPLE = 32
# Columns of one cube base block: FlashAttentionScore's Bmm1 uses baseN = 128 and issues an S2
# tile of 1024 as nRatio = 8 of them (hicann/ops-transformer flash_attention_score_tiling_general
# .cpp; FA design note section 3). The PV product takes S2 in chunks of the same width.
CUBE_BASE_COLUMNS = 128
FP32_BYTES = 4
# Per query row the vector core keeps its running max, running sum and the rescale factor, each
# padded to one 32-byte UB block (CANN's `s1 * (expNum + 2) * 32 B` term).
ROW_STATISTICS = 3

# Decision-variable domains. block_m and block_n list multiples of 16 (what CANN's cube tiling
# accepts) so that the rule of 32 is visible in the funnel; beyond one cube base block the S2
# tile is a whole number of 128-column base blocks, as FlashAttentionScore issues it.
BLOCK_M_DOMAIN = (16, 32, 48, 64, 80, 96, 112, 128, 192, 256, 384, 512)
BLOCK_N_DOMAIN = (16, 32, 48, 64, 80, 96, 112, 128, 256, 512, 768, 1024, 1536, 2048)
STAGES_DOMAIN = (1, 2, 3)
VEC_ROWS_DOMAIN = (8, 16, 32, 64)
MAX_D_CHUNK = 128  # FlashAttentionScore's D block = min(128, aligned D): split only beyond 128

# Head-dim limits of the kernels modelled (ascend.md sections 3-4).
FAS_MAX_HEAD_DIM = 768  # FlashAttentionScore: HEAD_DIM_MAX_VALUE = 768
FAS_MAX_SEQ_LEN = 1 << 20  # FlashAttentionScore: S from 1 to 1M
PFA_MAX_HEAD_DIM = 512  # PromptFlashAttention (the 310P coupled-core path)
TIK_MAX_HEAD_DIM = 304  # MindSpore's 910A TIK FlashAttention: "otherwise the ub would be OOM"

# Catalog fields the model reads, by core layout (an inline spec must give them).
RATES_COMMON = (
    "vector_fp16_elements_per_cycle",
    "gm_read_bytes_per_cycle",
    "l2_read_bytes_per_cycle",
    "l1_to_l0a_bytes_per_cycle",
    "l1_to_l0b_bytes_per_cycle",
    "ub_to_gm_bytes_per_cycle",
)
RATES_SPLIT = ("l2_write_bytes_per_cycle", "ub_to_l2_bytes_per_cycle")
RATES_COUPLED = ("l0c_to_ub_bytes_per_cycle", "ub_to_l1_bytes_per_cycle")
# Every other catalog input of the model (for the answer's confidence note).
MODEL_INPUTS = (
    "ascend.aic_count",
    "ascend.aiv_count",
    "ascend.core_layout",
    "ascend.cube_clock_mhz",
    "ascend.vector_clock_mhz",
    "ascend.cube_fp16_macs_per_cycle",
    "ascend.cube_fp16_tflops",
    "ascend.cube_fp16_gemm_measured_tflops",
    "ascend.cube_fractal_elements",
    "ascend.l1_bytes",
    "ascend.l0a_bytes",
    "ascend.l0b_bytes",
    "ascend.l0c_bytes",
    "ascend.unified_buffer_bytes",
    "ascend.ub_alignment_bytes",
    "memory.l2_bytes",
    "memory.l2_bandwidth_bytes_per_clk",
    "memory.l2_achievable_fraction",
    "memory.dram_bandwidth_gb_per_s",
    "memory.dram_achievable_fraction",
)


def ascend_device(hardware: HardwareSpec) -> AscendDevice:
    """The hardware as an Ascend device (a family checks the kind before it gets here)."""
    if not isinstance(hardware, AscendDevice):
        raise TypeError(f"{hardware.name} is not an Ascend device")
    return hardware


def required_rates(core: AscendCore) -> tuple[str, ...]:
    """The optional catalog rates the model needs for this core layout."""
    return RATES_COMMON + (RATES_SPLIT if core.core_layout == "split" else RATES_COUPLED)


def rate(core: AscendCore, field: str) -> int:
    """A catalog rate the model needs (present: `_family_violations` checked it)."""
    value = getattr(core, field)
    if value is None:
        raise ValueError(f"ascend.{field} is required by the ascend family")
    return int(value)


def kernel_name(device: AscendDevice) -> str:
    """The real kernel the model stands for on this device (ascend.md sections 3-5)."""
    if device.ascend.core_layout == "split":
        return (
            "CANN FlashAttentionScore (torch_npu.npu_fusion_attention), split cube/vector "
            "cores exchanging S, P and O through a GM/L2 workspace"
        )
    if device.ascend.standalone_vector_core_count:
        return (
            "PromptFlashAttention's coupled-core path and ATB's NZ-layout FlashAttention "
            "(no FlashAttentionScore on this part), cube and vector in one AI core"
        )
    return (
        "ATB's NZ-layout FlashAttention and MindSpore's TIK FlashAttention (no "
        "FlashAttentionScore on this part), cube and vector in one AI core"
    )


def head_dim_limit(device: AscendDevice) -> tuple[int, str]:
    """The largest head dim the device's kernel supports, and whose limit it is."""
    if device.ascend.core_layout == "split":
        return FAS_MAX_HEAD_DIM, "FlashAttentionScore"
    if device.ascend.standalone_vector_core_count:
        return PFA_MAX_HEAD_DIM, "PromptFlashAttention"
    return TIK_MAX_HEAD_DIM, "MindSpore's TIK FlashAttention"


# ---- the kernel's geometry, shared by resources, cost and the validator ---------------------


@dataclass(frozen=True)
class Geometry:
    """Scalars of one request that every formula uses (docs/model.md 10.1)."""

    d: int  # Q/K head dim aligned to the fractal (16)
    dv: int  # V head dim aligned to the fractal
    elem: int  # bytes per Q/K/V/P element
    vector_per_cube: int  # vector cores per cube core (2 on 910B, 1 on coupled parts)
    split: bool
    ub_align: int  # bytes
    workspace_capacity: int  # per cube core, bytes (split parts)


def geometry(device: AscendDevice, problem: AttentionProblem) -> Geometry:
    core = device.ascend
    frac = core.cube_fractal_elements
    split = core.core_layout == "split"
    return Geometry(
        d=ceil_div(problem.head_dim, frac) * frac,
        dv=ceil_div(problem.head_dim_v_eff, frac) * frac,
        elem=problem.dtype.bytes,
        vector_per_cube=core.aiv_count // core.aic_count if split else 1,
        split=split,
        ub_align=core.ub_alignment_bytes,
        workspace_capacity=int(L2_USABLE_FRACTION * device.memory.l2_bytes) // core.aic_count,
    )


@dataclass(frozen=True)
class Buffers:
    """Bytes of each on-chip buffer one configuration uses (arrays, or ints in `check`)."""

    l1: IntArray
    l0a: IntArray
    l0b: IntArray
    l0c: IntArray
    ub: IntArray
    workspace: IntArray


def buffers(
    g: Geometry,
    bm: IntArray,
    bn: IntArray,
    stages: IntArray,
    vec_rows: IntArray,
    d_split: IntArray,
    vec_cols: IntArray | None = None,
) -> Buffers:
    """Every buffer's use (docs/model.md 10.2). Works elementwise on int64 arrays. A vector
    pass covers `vec_rows` rows of `vec_cols` columns: the whole S2 tile (None) in the forward
    kernels, at most one vector basic block's width in the decode kernel (13.10)."""
    cols = bn if vec_cols is None else vec_cols
    pingpong = np.minimum(stages, 2)
    base = np.minimum(bn, CUBE_BASE_COLUMNS)  # QK's N and PV's K per cube issue
    d_chunk = g.d // d_split
    dv_chunk = g.dv // d_split
    rows_v = bm // g.vector_per_cube
    stat_bytes = max(g.ub_align, FP32_BYTES)
    l0a = pingpong * bm * np.maximum(d_chunk, base) * g.elem
    l0b = pingpong * base * np.maximum(d_chunk, dv_chunk) * g.elem
    l0c = pingpong * bm * np.maximum(base, dv_chunk) * FP32_BYTES
    l1 = bm * g.d * g.elem + stages * (base * (g.d + g.dv) * g.elem + bm * base * g.elem)
    slice_io = vec_rows * (cols * FP32_BYTES + cols * g.elem + g.dv * FP32_BYTES)
    ub = (
        pingpong * slice_io
        + vec_rows * cols * FP32_BYTES  # the softmax's fp32 temporary
        + rows_v * g.dv * FP32_BYTES  # the output accumulator
        + rows_v * ROW_STATISTICS * stat_bytes
    )
    exchange = bm * bn * (FP32_BYTES + g.elem) + bm * g.dv * FP32_BYTES
    workspace = stages * exchange if g.split else np.zeros_like(exchange)
    as_int = np.asarray
    return Buffers(
        as_int(l1, dtype=np.int64),
        as_int(l0a, dtype=np.int64),
        as_int(l0b, dtype=np.int64),
        as_int(l0c, dtype=np.int64),
        as_int(ub, dtype=np.int64),
        as_int(workspace, dtype=np.int64),
    )


@dataclass(frozen=True)
class AscendResources(Resources):
    """What each candidate needs of one cube core and its vector cores."""

    used: Buffers
    capacity: dict[str, int]  # resource name -> bytes
    split: bool

    def uses(self, i: int) -> list[ResourceUse]:
        out = [
            ResourceUse("l1", int(self.used.l1[i]), self.capacity["l1"], "bytes/cube core"),
            ResourceUse("l0a", int(self.used.l0a[i]), self.capacity["l0a"], "bytes/cube core"),
            ResourceUse("l0b", int(self.used.l0b[i]), self.capacity["l0b"], "bytes/cube core"),
            ResourceUse("l0c", int(self.used.l0c[i]), self.capacity["l0c"], "bytes/cube core"),
            ResourceUse("ub", int(self.used.ub[i]), self.capacity["ub"], "bytes/vector core"),
        ]
        if self.split:
            out.append(
                ResourceUse(
                    "workspace",
                    int(self.used.workspace[i]),
                    self.capacity["workspace"],
                    "bytes/cube core (GM, L2-resident)",
                )
            )
        return out


def _res(ev: Evaluation) -> AscendResources:
    assert isinstance(ev.res, AscendResources)
    return ev.res


def kib(value: float) -> str:
    return f"{value / 1024:g} KiB"


# ---- constraints -----------------------------------------------------------------------------


class TileAlignment(Constraint):
    """block_m and block_n multiples of 32; the head-dim chunks whole fractals."""

    name = "alignment"
    rule = (
        f"block_m and block_n multiples of {TILE_MULTIPLE} (the design rule; CANN aligns to 16); "
        "each head-dim chunk (d / d_split) a whole number of 16-wide fractals"
    )
    short = "align"
    kind = ConstraintKind.LEGALITY

    def _misaligned(self, ev: Evaluation) -> IntArray:
        g = geometry(ascend_device(ev.hardware), ev.problem)
        frac = ascend_device(ev.hardware).ascend.cube_fractal_elements
        cfg = ev.cfg
        bad = (cfg["block_m"] % TILE_MULTIPLE != 0) | (cfg["block_n"] % TILE_MULTIPLE != 0)
        split = cfg["d_split"]
        bad |= (g.d % (frac * split) != 0) | (g.dv % (frac * split) != 0)
        return np.asarray(bad, dtype=np.int64)

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("misaligned", self._misaligned(ev), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} breaks the alignment rule: {self.rule}"


class VectorSlice(Constraint):
    """The vector slice divides the rows of each vector core into whole 32-byte-aligned slices."""

    name = "vector_slice"
    rule = (
        "vec_rows divides the rows each vector core takes (block_m / vector cores per cube "
        "core), and its fp32 row statistics fill whole 32-byte UB blocks"
    )
    short = "vslice"
    kind = ConstraintKind.LEGALITY

    def _bad(self, ev: Evaluation) -> IntArray:
        g = geometry(ascend_device(ev.hardware), ev.problem)
        rows_v = ev.cfg["block_m"] // g.vector_per_cube
        r = ev.cfg["vec_rows"]
        bad = (ev.cfg["block_m"] % g.vector_per_cube != 0) | (rows_v % r != 0)
        bad |= (r * FP32_BYTES) % g.ub_align != 0
        return np.asarray(bad, dtype=np.int64)

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("bad_vector_slice", self._bad(ev), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        g = geometry(ascend_device(ev.hardware), ev.problem)
        rows_v = int(ev.cfg["block_m"][i]) // g.vector_per_cube
        return (
            f"{ev.label(i)}: {int(ev.cfg['vec_rows'][i])} rows per vector pass do not divide "
            f"the {rows_v} rows of each vector core"
        )


class Capacity(Constraint):
    """One on-chip buffer (or the GM workspace) within its capacity."""

    kind = ConstraintKind.CAPACITY

    def __init__(self, name: str, what: str, short: str, capacity: str = "its capacity"):
        self.name = name
        self.what = what
        self.short = short
        self.rule = f"{what} within {capacity}"

    def _used(self, ev: Evaluation) -> IntArray:
        used: IntArray = getattr(_res(ev).used, self.name)
        return used

    def rules(self, ev: Evaluation) -> list[Rule]:
        # One 0/1 column (over capacity or not): the same rule as bytes <= capacity, with a
        # two-value domain that keeps the integer program small (docs/model.md 10.2).
        over = self._used(ev) > _res(ev).capacity[self.name]
        return [Rule(f"{self.name}_over", np.asarray(over, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        cap = _res(ev).capacity[self.name]
        return f"{ev.label(i)} needs {kib(self._used(ev)[i])} of {self.what}, capacity {kib(cap)}"


# ---- the family ------------------------------------------------------------------------------


class AscendFlashAttention(KernelFamily):
    name = "ascend"
    device_kind = "ascend"
    summary = (
        "FlashAttention forward on the DaVinci AI core: S1 x S2 tiles over L1, L0A/L0B, L0C and "
        "the Unified Buffer, cube for QK^T and PV, vector for the online softmax"
    )

    def kernel_summary(self, hardware: HardwareSpec) -> str:
        if isinstance(hardware, AscendDevice):
            return f"{self.summary}; on {hardware.name}: {kernel_name(hardware)}"
        return self.summary

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        device = ascend_device(hardware)
        core = device.ascend
        out: list[FieldViolation] = []
        if problem.dtype is DType.FP8:
            allowed = "fp16, bf16" if core.cube_bf16_supported else "fp16"
            out.append(
                FieldViolation(
                    "dtype",
                    f"the ascend family's FlashAttention kernels take fp16"
                    f"{' and bf16' if core.cube_bf16_supported else ''} on {device.name}, not "
                    f"fp8; allowed: {allowed}",
                )
            )
        elif problem.dtype is DType.BF16 and not core.cube_bf16_supported:
            out.append(
                FieldViolation(
                    "dtype",
                    f"bf16 needs a part whose FlashAttention kernels take bf16 (the split-core "
                    f"910B); {device.name}'s kernels are fp16 only; allowed: fp16",
                )
            )
        limit, kernel = head_dim_limit(device)
        for field, value in (("head_dim", problem.head_dim), ("head_dim_v", problem.head_dim_v)):
            if value is not None and value > limit:
                out.append(
                    FieldViolation(
                        field,
                        f"{kernel} on {device.name} supports head dims up to {limit}; got {value}",
                    )
                )
        if problem.head_dim_v_eff > problem.head_dim:
            out.append(
                FieldViolation(
                    "head_dim_v",
                    f"the Ascend kernels need head_dim_v <= head_dim ({problem.head_dim}); "
                    f"got {problem.head_dim_v_eff}",
                )
            )
        if core.core_layout == "split":
            for field, value in (("seq_len", problem.seq_len), ("seq_len_kv", problem.seq_len_kv)):
                if value is not None and value > FAS_MAX_SEQ_LEN:
                    out.append(
                        FieldViolation(
                            field,
                            f"FlashAttentionScore supports sequences up to {FAS_MAX_SEQ_LEN} "
                            f"tokens; got {value}",
                        )
                    )
        missing = [f for f in required_rates(core) if getattr(core, f) is None]
        if missing:
            out.append(
                FieldViolation(
                    "hardware.ascend",
                    f"the ascend family's model needs {', '.join(missing)} for a "
                    f"{core.core_layout}-core part; {device.name} does not give "
                    f"{'it' if len(missing) == 1 else 'them'}",
                )
            )
        return out

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        d = ceil_div(max(problem.head_dim, problem.head_dim_v_eff), 16) * 16
        # powers of two up to the first split whose chunks are at most 128 wide
        splits = tuple(s for s in (1, 2, 4, 8) if s == 1 or d > MAX_D_CHUNK * s // 2)
        return (
            Param("block_m", BLOCK_M_DOMAIN, "S1 tile: query rows per block"),
            Param("block_n", BLOCK_N_DOMAIN, "S2 tile: key/value columns per cube/vector round"),
            Param(
                "num_stages",
                STAGES_DOMAIN,
                "pipeline depth: 1 single-buffered; k >= 2 ping-pong buffers and the cube "
                "k - 1 rounds ahead of the vector (CV preload)",
            ),
            Param("d_split", splits, "head-dim split: chunks of d per cube operand block"),
            Param("vec_rows", VEC_ROWS_DOMAIN, "vector slice: query rows per vector pass"),
        )

    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> AscendResources:
        device = ascend_device(hardware)
        core = device.ascend
        g = geometry(device, problem)
        used = buffers(
            g,
            cfg["block_m"],
            cfg["block_n"],
            cfg["num_stages"],
            cfg["vec_rows"],
            cfg["d_split"],
            self.vector_columns(cfg["block_n"]),
        )
        capacity = {
            "l1": core.l1_bytes,
            "l0a": core.l0a_bytes,
            "l0b": core.l0b_bytes,
            "l0c": core.l0c_bytes,
            "ub": core.unified_buffer_bytes,
            "workspace": g.workspace_capacity,
        }
        return AscendResources(used, capacity, g.split)

    def kernel_modelled(self) -> str | None:
        """The kernel the answer's confidence note names (None: the device's forward kernel)."""
        return None

    def vector_columns(self, block_n: Any) -> Any:
        """Columns of one vector pass for S2 tiles `block_n` (an int or an array); None: the
        whole S2 tile, as in the forward kernels."""
        return None

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        out: list[Constraint] = [
            TileAlignment(),
            VectorSlice(),
            Capacity("l1", "L1 (Q tile, K/V and P chunks, per pipeline stage)", "L1"),
            Capacity("l0a", "L0A (the left operand block, twice when double-buffered)", "L0A"),
            Capacity("l0b", "L0B (the right operand block, twice when double-buffered)", "L0B"),
            Capacity("l0c", "L0C (the fp32 accumulator of one cube base block)", "L0C"),
            Capacity("ub", "the Unified Buffer of a vector core (softmax slices, output)", "UB"),
        ]
        if ascend_device(hardware).ascend.core_layout == "split":
            out.append(
                Capacity(
                    "workspace",
                    "the GM workspace (S, P and the partial output per round and stage)",
                    "ws",
                    "the cube core's share of the usable L2",
                )
            )
        return out

    def evaluate(self, ev: Evaluation) -> Perf:
        from .ascend_cost import evaluate

        return evaluate(ev)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Fewer rounds per head, then fewer pipeline stages, larger vector slices, fewer
        head-dim chunks, larger block_m."""
        cfg = ev.cfg
        p = ev.problem
        rounds = ceil_div(p.seq_len, cfg["block_m"]) * ceil_div(p.seq_len_kv_eff, cfg["block_n"])
        return [rounds, cfg["num_stages"], -cfg["vec_rows"], cfg["d_split"], -cfg["block_m"]]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        from .ascend_cost import reason_lines

        return reason_lines(table, i)

    def answer_notes(self, table: CandidateTable, ranked: list[int]) -> list[str]:
        from .ascend_cost import confidence_note

        out = [confidence_note(ascend_device(table.hardware), self.kernel_modelled())]
        ignored = [
            flag
            for flag, value in (
                ("--max-smem", table.options.max_smem),
                ("--min-blocks-per-sm", table.options.min_blocks_per_sm),
            )
            if value is not None
        ]
        if ignored:
            out.append(
                f"{' and '.join(ignored)} do not apply to the ascend family (no shared memory or "
                "SM residency on a DaVinci core) and were ignored"
            )
        return out

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The rules restated for one configuration in scalar arithmetic."""
        device = ascend_device(hardware)
        core = device.ascend
        bm, bn = config["block_m"], config["block_n"]
        stages, r, ds = config["num_stages"], config["vec_rows"], config["d_split"]
        frac = core.cube_fractal_elements
        d = -(-problem.head_dim // frac) * frac
        dv = -(-problem.head_dim_v_eff // frac) * frac
        e = problem.dtype.bytes
        split = core.core_layout == "split"
        per_cube = core.aiv_count // core.aic_count if split else 1
        out = []
        if bm % 32 or bn % 32 or d % (frac * ds) or dv % (frac * ds):
            out.append(f"alignment: {bm}x{bn} with d {d}, dv {dv} in {ds} chunk(s)")
        rows = bm // per_cube
        if bm % per_cube or rows % r or (4 * r) % core.ub_alignment_bytes:
            out.append(f"vector_slice: {r} rows per pass, {rows} rows per vector core")
        double = 2 if stages >= 2 else 1
        base = min(bn, 128)
        columns = self.vector_columns(bn)
        vc = bn if columns is None else int(columns)
        dc, dvc = d // ds, dv // ds
        use = {
            "l1": bm * d * e + stages * (base * (d + dv) * e + bm * base * e),
            "l0a": double * bm * max(dc, base) * e,
            "l0b": double * base * max(dc, dvc) * e,
            "l0c": double * bm * max(base, dvc) * 4,
            "ub": double * r * (vc * 4 + vc * e + dv * 4)
            + r * vc * 4
            + rows * dv * 4
            + rows * 3 * max(core.ub_alignment_bytes, 4),
        }
        caps = {
            "l1": core.l1_bytes,
            "l0a": core.l0a_bytes,
            "l0b": core.l0b_bytes,
            "l0c": core.l0c_bytes,
            "ub": core.unified_buffer_bytes,
        }
        if split:
            use["workspace"] = stages * (bm * bn * (4 + e) + bm * dv * 4)
            caps["workspace"] = int(L2_USABLE_FRACTION * device.memory.l2_bytes) // core.aic_count
        for name, used in use.items():
            if used > caps[name]:
                out.append(f"{name}: {used} > {caps[name]}")
        return out
