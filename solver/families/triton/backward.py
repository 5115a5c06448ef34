"""The Triton tutorial's fused-attention backward (06-fused-attention.py, `_attn_bwd`).

Each program runs two loops. The dK/dV loop holds `block_n` keys (BLOCK_N1: K and V loaded once)
and walks the query blocks that see them `block_m` rows at a time (BLOCK_M1: Q^T, dO, the
log-sum-exp M and D pipelined `num_stages` deep), recomputing P^T = exp2(K Q^T - M) and
accumulating dV += P^T dO and dK += dS^T Q. The dQ loop then holds `dq_block_m` queries
(BLOCK_M2: Q, dO, M and D loaded once) and walks the key blocks they see `dq_block_n` keys at a
time (BLOCK_N2: K^T and V^T pipelined), recomputing P and dP and accumulating dQ += dS K. What
the compiler allocates for the two loops (shared memory, registers, spills) is the Triton
compiler's rules (`families/triton_compiler`, docs/model.md 16.7) for the loops as
`triton_compiler.flash_loops` describes them; a configuration that spills is costed, not
refused. S and dP are computed in both loops (seven GEMMs for five useful ones) and no atomics
are needed. A
preprocessing kernel computes D = rowsum(O o dO); the tutorial scales K by sm_scale / ln 2
before the launch. The tutorial's grid gives program p key block p and query block p; here the
grid is the larger of the two block counts, so the two tile pairs are free (the tutorial's
BLOCK_M2 = BLOCK_N1 is one choice). Requirements from the tutorial: BLOCK_N1 a multiple of
BLOCK_M1, BLOCK_M2 a multiple of BLOCK_N2 (tl.static_assert), and with the causal mask the
diagonal steps of BLOCK_M1 / 2 and BLOCK_N2 / 2 rows (BLK_SLICE_FACTOR = 2). There is no
dropout. Source: Triton tutorial 06 "Fused Attention" (triton-lang/triton, python/tutorials/
06-fused-attention.py). Formulas: docs/model.md section 12.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...cost import Perf
from ...errors import FieldViolation
from ...family import pow2_range
from ...hardware import CudaDevice, HardwareSpec, SmLimits
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import BoolArray, ConfigArrays, Param
from ..cuda.resources import CudaResources, cuda_device
from ..triton_cuda.backward import TritonBackwardFamily
from ..triton_cuda.forward import TENSOR_CORE_MIN_CC_MAJOR
from .backward_cost import BLK_SLICE_FACTOR, TL_DOT_MIN, backward_perf
from .forward import triton_matrix_units, triton_violations
from .heads import triton_kernel_head_dims
from .stages import reason_lines as stage_reason_lines

if TYPE_CHECKING:
    from ...candidates import CandidateTable

WARPS = pow2_range(2, 8)
ROCM_BACKWARD_REFUSAL = (
    "the triton backward has no ROCm model yet (its two loops' LDS on gfx942/gfx950 are not "
    "stated exactly by the compiler rules, and its VGPR estimate is not fitted): on rocm "
    "devices triton models the forward phase (--phase forward)"
)


class TritonFlashAttentionBackward(TritonBackwardFamily):
    """triton backward: the tutorial's dK/dV and dQ loops in one program."""

    name = "triton"
    input_dtypes = (DType.FP16, DType.BF16)  # the backward is 16-bit
    summary = (
        "Triton fused-attention backward (the tutorial's dK/dV loop and dQ loop in one "
        "program, software-pipelined, no atomics)"
    )

    def matrix_units(self, sm: SmLimits) -> str:
        return triton_matrix_units(sm)

    alignment_rule = (
        "block_n a multiple of block_m and dq_block_m a multiple of dq_block_n (the tutorial's "
        "static asserts); the warps each own at least one 16x8 MMA tile of both loops' score "
        "tiles; with the causal mask block_m and dq_block_n at least 32 (diagonal steps of "
        "half a block)"
    )
    streamed_words = "tile (Q/dO in the dK/dV loop, K/V in the dQ loop)"
    helper_words = "preprocess D = rowsum(O o dO), scale K"
    inner_params = ("dq_block_m", "dq_block_n")
    loop_tiles = ("block_m", "block_n", "dq_block_m", "dq_block_n")
    inner_constraint = "dq_tile"
    inner_short = "dqtile"
    # The forward runs on rocm devices too; the backward has no ROCm model, and says so there.
    other_device_kinds = ("rocm",)

    # ---- the problem -------------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        if hardware.arch == "rocm":
            return [FieldViolation("kernel", ROCM_BACKWARD_REFUSAL)]
        violations = [v for v in triton_violations(problem, hardware) if v.field != "dtype"]
        sm = cuda_device(hardware).sm
        if problem.dtype is DType.FP8:
            violations.append(
                FieldViolation(
                    "dtype",
                    "the triton backward computes in fp16/bf16 (the tutorial's fp8 path is "
                    "forward-only); allowed: fp16" + (", bf16" if sm.cc_major >= 8 else ""),
                )
            )
        elif problem.dtype is DType.BF16 and sm.cc_major < 8:
            violations.append(
                FieldViolation(
                    "dtype",
                    f"bf16 needs compute capability >= 8.0; {hardware.name} is "
                    f"{sm.compute_capability} (allowed: fp16)",
                )
            )
        if problem.dropout > 0:
            violations.append(
                FieldViolation(
                    "dropout",
                    "the triton backward (the tutorial's design) has no dropout; the fa2 "
                    "backward regenerates dropout (--kernel fa2), or set dropout 0",
                )
            )
        return violations

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return triton_kernel_head_dims(problem)

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        if cuda_device(hardware).sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
            stages = Param("num_stages", (1,), "no software pipelining below cc 8.0")
        else:
            stages = Param(
                "num_stages",
                (1, 2, 3, 4, 5),
                "software pipeline stages of both loops: streamed tiles loaded num_stages - 1 "
                "iterations ahead",
            )
        resident = pow2_range(16, 256)
        # A streamed step of 256 rows needs a resident block of 256 (the static asserts), and
        # P and dP of a 256 x 256 score tile (512 KiB in FP32) exceed any SM's register file.
        step = pow2_range(16, 128)
        return (
            Param("block_m", step, "query rows per iteration of the dK/dV loop (BLOCK_M1)"),
            Param(
                "block_n", resident, "key/value rows a program holds in the dK/dV loop (BLOCK_N1)"
            ),
            Param("dq_block_m", resident, "query rows a program holds in the dQ loop (BLOCK_M2)"),
            Param("dq_block_n", step, "key/value rows per iteration of the dQ loop (BLOCK_N2)"),
            Param("num_warps", WARPS, "warps per program"),
            stages,
        )

    # ---- shapes and resources ------------------------------------------------------------------
    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        """The two-loop rules, and with the causal mask the diagonal steps of half a block."""
        ok = super().alignment_ok(cfg, problem, device)
        if problem.causal:
            step = TL_DOT_MIN * BLK_SLICE_FACTOR
            ok &= (cfg["block_m"] >= step) & (cfg["dq_block_n"] >= step)
        return np.asarray(ok, dtype=np.bool_)

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        """The backward lines with the compiler's registers, and why this many stages."""
        return stage_reason_lines(table, i, super().reason_lines(table, i), "Q/dO and K/V")

    # ---- cost ---------------------------------------------------------------------------------
    def backward_cost(
        self,
        device: CudaDevice,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
        res: CudaResources,
    ) -> Perf:
        return backward_perf(self, device, problem, cfg, res)
