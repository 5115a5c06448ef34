"""A toy kernel family, defined outside the solver, to prove that a family is a module of its
own: two parameters (block_m, chunks), one private resource (scratch bytes), one legality rule
and a trivial cost. Tests register it, solve with it end to end, and unregister it.

Its rules, by hand: a block of block_m rows works on `chunks` slices of 64 keys (block_n =
64 x chunks, derived); block_m x chunks <= 256 is legal; the scratch buffer holds 128 bytes
per (row, chunk) and has 16 KiB, so block_m x chunks <= 128 fits. Bigger blocks are faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilesolve.solver import AttentionProblem, Config, FieldViolation, HardwareSpec, SolveOptions
from tilesolve.solver.candidates import Evaluation
from tilesolve.solver.constraints import Constraint, ConstraintKind, Rule
from tilesolve.solver.cost import Perf
from tilesolve.solver.family import CapacityUse, KernelFamily, Resources
from tilesolve.solver.space import ConfigArrays, IntArray, Param

SCRATCH_BYTES_PER_ROW_CHUNK = 128
SCRATCH_CAPACITY_BYTES = 16 * 1024
MAX_ROW_CHUNKS = 256
KEYS_PER_CHUNK = 64


@dataclass(frozen=True)
class ToyResources(Resources):
    scratch_bytes: IntArray

    def uses(self, i: int) -> list[CapacityUse]:
        return [CapacityUse("scratch", int(self.scratch_bytes[i]), SCRATCH_CAPACITY_BYTES, "bytes")]


def _scratch(ev: Evaluation) -> IntArray:
    assert isinstance(ev.res, ToyResources)
    return ev.res.scratch_bytes


class ToyShape(Constraint):
    name = "toy_shape"
    rule = f"block_m x chunks at most {MAX_ROW_CHUNKS}"
    short = "shape"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("row_chunks", ev.cfg["block_m"] * ev.cfg["chunks"], "<=", MAX_ROW_CHUNKS)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} has more than {MAX_ROW_CHUNKS} row-chunks"


class Scratch(Constraint):
    name = "scratch"
    rule = f"scratch buffer within {SCRATCH_CAPACITY_BYTES} bytes"
    short = "scr"
    kind = ConstraintKind.CAPACITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("scratch_bytes", _scratch(ev), "<=", SCRATCH_CAPACITY_BYTES)]

    def detail(self, ev: Evaluation, i: int) -> str:
        return f"{ev.label(i)} needs {_scratch(ev)[i]} bytes of scratch"


class ToyFamily(KernelFamily):
    name = "toy"
    device_kind = "cuda"
    summary = "a test family: block_m rows, chunks of 64 keys, a scratch buffer"

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return []

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return (
            Param("block_m", (32, 64, 128), "rows per block"),
            Param("chunks", (1, 2, 4), "64-key chunks per iteration"),
        )

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        return {"block_m": cfg["block_m"], "block_n": KEYS_PER_CHUNK * cfg["chunks"]}

    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> ToyResources:
        return ToyResources(cfg["block_m"] * cfg["chunks"] * SCRATCH_BYTES_PER_ROW_CHUNK)

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return (ToyShape(), Scratch())

    def evaluate(self, ev: Evaluation) -> Perf:
        work = float(ev.problem.batch * ev.problem.heads * ev.problem.seq_len)
        rows = (ev.cfg["block_m"] * ev.cfg["chunks"]).astype(np.float64)
        time_us = 2.0 + work / (100.0 * rows)
        ones, zeros = np.ones_like(time_us), np.zeros_like(time_us)
        return Perf(
            time_us=time_us,
            tflops=ev.problem.flops / (time_us * 1e-6) / 1e12,
            compute_us=time_us,
            load_us=zeros,
            overlap=ones,
            arithmetic_intensity=ones,
            hbm_bytes=ones,
            waves=ones,
            tail_efficiency=ones,
            padding_waste=zeros,
            mma_utilization=zeros,
            bottleneck=["toy work"] * len(time_us),
            figures={"row_chunks": rows},
        )

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        return [ev.cfg["chunks"]]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        row_chunks = config["block_m"] * config["chunks"]
        out = []
        if row_chunks > MAX_ROW_CHUNKS:
            out.append(f"toy_shape: {row_chunks} > {MAX_ROW_CHUNKS}")
        if row_chunks * SCRATCH_BYTES_PER_ROW_CHUNK > SCRATCH_CAPACITY_BYTES:
            out.append("scratch: over capacity")
        return out


def toy_expectations() -> dict[str, Any]:
    """What the rules above imply, worked out by hand for the tests."""
    return {
        "feasible": {(32, 1), (32, 2), (32, 4), (64, 1), (64, 2), (128, 1)},
        "winner": (128, 1),  # 128 row-chunks at the fewest chunks (the tie-break)
    }
