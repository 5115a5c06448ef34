"""What one ascend block needs of a DaVinci AI core (docs/model.md 10.1-10.2): the kernel's
geometry (head dims aligned to the fractal, vector cores per cube core, the workspace share),
the bytes of every on-chip buffer (L1, L0A, L0B, L0C, the Unified Buffer) and of the GM
workspace on split-core parts, and the legality and capacity constraints on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...cost import L2_USABLE_FRACTION
from ...family import CapacityUse, Resources, kib
from ...hardware import AscendDevice
from ...problem import AttentionProblem
from ...space import IntArray, ceil_div
from .device import ascend_device

if TYPE_CHECKING:
    from ...candidates import Evaluation

# ---- the design rules and the kernel's structure (docs/model.md 10.1-10.2) -------------------
# Tile edges are multiples of 32 elements: the design rule this project states (docs/model.md
# 10.1). CANN itself aligns S1, S2 and D to 16 (one fractal); seed 001's "multiple of 32" comes
# from the 32-byte DataCopy/UB alignment, which is 16 fp16 elements.
TILE_MULTIPLE = 32
# Columns of one cube base block: FlashAttentionScore's Bmm1 uses baseN = 128 and issues an S2
# tile of 1024 as nRatio = 8 of them (hicann/ops-transformer flash_attention_score_tiling_general
# .cpp; FA design note section 3). The PV product takes S2 in chunks of the same width.
CUBE_BASE_COLUMNS = 128
FP32_BYTES = 4
# Per query row the vector core keeps its running max, running sum and the rescale factor, each
# padded to one 32-byte UB block (CANN's `s1 * (expNum + 2) * 32 B` term).
ROW_STATISTICS = 3


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
    """The scalars of the request every ascend formula reads."""
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

    def uses(self, i: int) -> list[CapacityUse]:
        out = [
            CapacityUse("l1", int(self.used.l1[i]), self.capacity["l1"], "bytes/cube core"),
            CapacityUse("l0a", int(self.used.l0a[i]), self.capacity["l0a"], "bytes/cube core"),
            CapacityUse("l0b", int(self.used.l0b[i]), self.capacity["l0b"], "bytes/cube core"),
            CapacityUse("l0c", int(self.used.l0c[i]), self.capacity["l0c"], "bytes/cube core"),
            CapacityUse("ub", int(self.used.ub[i]), self.capacity["ub"], "bytes/vector core"),
        ]
        if self.split:
            out.append(
                CapacityUse(
                    "workspace",
                    int(self.used.workspace[i]),
                    self.capacity["workspace"],
                    "bytes/cube core (GM, L2-resident)",
                )
            )
        return out


def ascend_resources(ev: Evaluation) -> AscendResources:
    """The evaluation's resources, which an ascend family's are."""
    assert isinstance(ev.res, AscendResources)
    return ev.res


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
        used: IntArray = getattr(ascend_resources(ev).used, self.name)
        return used

    def rules(self, ev: Evaluation) -> list[Rule]:
        # One 0/1 column (over capacity or not): the same rule as bytes <= capacity, with a
        # two-value domain that keeps the integer program small (docs/model.md 10.2).
        over = self._used(ev) > ascend_resources(ev).capacity[self.name]
        return [Rule(f"{self.name}_over", np.asarray(over, dtype=np.int64), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        cap = ascend_resources(ev).capacity[self.name]
        return f"{ev.label(i)} needs {kib(self._used(ev)[i])} of {self.what}, capacity {kib(cap)}"
