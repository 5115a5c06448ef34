"""The `ascend` family: FlashAttention forward on Huawei's DaVinci AI core (Ascend NPUs),
registered as (`ascend`, forward).

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
head-dim split `d_split`. Formulas, units and sources: docs/model.md section 10; the buffers
are `buffers.py`, the cost model `cost.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...constraints import Constraint
from ...cost import L2_USABLE_FRACTION, Perf, tiles_per_head
from ...errors import FieldViolation
from ...family import KernelFamily, cuda_only_options
from ...hardware import AscendDevice, HardwareSpec
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import Config, ConfigArrays, IntArray, Param, ceil_div
from .buffers import AscendResources, Capacity, TileAlignment, VectorSlice, buffers, geometry
from .cost import confidence_note, evaluate, reason_lines
from .device import FAS_MAX_SEQ_LEN, ascend_device, head_dim_limit, kernel_name, required_rates

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# Decision-variable domains. block_m and block_n list multiples of 16 (what CANN's cube tiling
# accepts) so that the rule of 32 is visible in the funnel; beyond one cube base block the S2
# tile is a whole number of 128-column base blocks, as FlashAttentionScore issues it.
BLOCK_M_DOMAIN = (16, 32, 48, 64, 80, 96, 112, 128, 192, 256, 384, 512)
BLOCK_N_DOMAIN = (16, 32, 48, 64, 80, 96, 112, 128, 256, 512, 768, 1024, 1536, 2048)
STAGES_DOMAIN = (1, 2, 3)
VEC_ROWS_DOMAIN = (8, 16, 32, 64)
MAX_D_CHUNK = 128  # FlashAttentionScore's D block = min(128, aligned D): split only beyond 128


class AscendFlashAttention(KernelFamily):
    """ascend forward: the S1 x S2 tiles, pipeline depth, vector slice and head-dim split of
    the device's FlashAttention kernel on the DaVinci AI core."""

    name = "ascend"
    input_dtypes = (DType.FP16, DType.BF16)  # fp16 and bf16
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
        return evaluate(ev)

    def tie_keys(self, ev: Evaluation) -> list[IntArray]:
        """Fewer rounds per head, then fewer pipeline stages, larger vector slices, fewer
        head-dim chunks, larger block_m."""
        cfg = ev.cfg
        p = ev.problem
        rounds = tiles_per_head(p, cfg["block_m"], cfg["block_n"])
        return [rounds, cfg["num_stages"], -cfg["vec_rows"], cfg["d_split"], -cfg["block_m"]]

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        return reason_lines(table, i)

    def answer_notes(self, table: CandidateTable, ranked: list[int]) -> list[str]:
        out = [confidence_note(ascend_device(table.hardware), self.kernel_modelled())]
        ignored = cuda_only_options(table.options)
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
        d = ceil_div(problem.head_dim, frac) * frac
        dv = ceil_div(problem.head_dim_v_eff, frac) * frac
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
