"""The Triton tutorial's fused-attention backward (06-fused-attention.py, `_attn_bwd`).

Each program runs two loops. The dK/dV loop holds `block_n` keys (BLOCK_N1: K and V loaded once)
and walks the query blocks that see them `block_m` rows at a time (BLOCK_M1: Q^T, dO, the
log-sum-exp M and D pipelined `num_stages` deep), recomputing P^T = exp2(K Q^T - M) and
accumulating dV += P^T dO and dK += dS^T Q. The dQ loop then holds `dq_block_m` queries
(BLOCK_M2: Q, dO, M and D loaded once) and walks the key blocks they see `dq_block_n` keys at a
time (BLOCK_N2: K^T and V^T pipelined), recomputing P and dP and accumulating dQ += dS K. S and
dP are computed in both loops (seven GEMMs for five useful ones) and no atomics are needed. A
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

import numpy as np

from ...cost import Perf
from ...errors import FieldViolation
from ...family import pow2_range
from ...hardware import CudaDevice, HardwareSpec, SmLimits
from ...problem import AttentionProblem, DType
from ...space import BoolArray, Config, ConfigArrays, IntArray, Param
from ..cuda.backward import CudaBackwardFamily, per_thread
from ..cuda.resources import FIXED_OVERHEAD_REGS, CudaResources, cuda_device
from .backward_cost import BLK_SLICE_FACTOR, TL_DOT_MIN, backward_perf
from .forward import (
    TENSOR_CORE_MIN_CC_MAJOR,
    triton_kernel_head_dims,
    triton_matrix_units,
    triton_violations,
)

WARPS = pow2_range(2, 8)


class TritonFlashAttentionBackward(CudaBackwardFamily):
    """triton backward: the tutorial's dK/dV and dQ loops in one program."""

    name = "triton"
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
    inner_constraint = "dq_tile"
    inner_short = "dqtile"

    # ---- the problem -------------------------------------------------------------------------
    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
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
            stages = Param("num_stages", (1, 2, 3, 4, 5), "buffers of each loop's streamed tiles")
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

    def label(self, config: Config) -> str:
        """'32x128 w4 s5 dq 128x32': the dK/dV loop's tile, then the dQ loop's."""
        c = config.as_dict()
        return (
            f"{c['block_m']}x{c['block_n']} w{c['num_warps']} s{c['num_stages']} "
            f"dq {c['dq_block_m']}x{c['dq_block_n']}"
        )

    # ---- shapes and resources ------------------------------------------------------------------
    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        m1, n1 = cfg["block_m"], cfg["block_n"]
        m2, n2 = cfg["dq_block_m"], cfg["dq_block_n"]
        w = cfg["num_warps"]
        ok = (n1 % m1 == 0) & (m2 % n2 == 0)
        ok &= ((n1 // 16) * (m1 // 8) >= w) & ((m2 // 16) * (n2 // 8) >= w)
        if problem.causal:
            step = TL_DOT_MIN * BLK_SLICE_FACTOR
            ok &= (m1 >= step) & (n2 >= step)
        return np.asarray(ok, dtype=np.bool_)

    def _loop_smem(self, cfg: ConfigArrays, problem: AttentionProblem) -> tuple[IntArray, IntArray]:
        """Shared memory of each loop, bytes: `num_stages` buffers of its streamed tiles (Q^T
        and dO of block_m rows; K^T and V^T of dq_block_n rows) and its resident operands (K
        and V of block_n rows; Q and dO of dq_block_m rows), which stay in shared memory as dot
        operands and are read from there every iteration."""
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        s = cfg["num_stages"]
        loop1 = (s * cfg["block_m"] + cfg["block_n"]) * (d + dv) * elem
        loop2 = (s * cfg["dq_block_n"] + cfg["dq_block_m"]) * (d + dv) * elem
        return np.asarray(loop1, dtype=np.int64), np.asarray(loop2, dtype=np.int64)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """The larger loop's (the loops run one after the other and Triton allocates the
        kernel's shared memory for the buffers live at the same time)."""
        loop1, loop2 = self._loop_smem(cfg, problem)
        return np.asarray(np.maximum(loop1, loop2), dtype=np.int64)

    def q_in_registers(self) -> bool:
        return False

    def regs_demand(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """The larger loop's registers. dK/dV loop: the dK and dV accumulators (block_n x d
        and x dv, FP32), P^T and dP^T (block_n x block_m, FP32) and the M and D values of the
        thread's columns; dQ loop: the dQ accumulator (dq_block_m x d), P and dP
        (dq_block_m x dq_block_n) and M and D of the thread's rows; each plus the forward's
        fixed overhead (pointers, loop state, operand staging)."""
        d, dv = self.kernel_head_dims(problem)
        w = cfg["num_warps"].astype(np.float64)
        m1 = cfg["block_m"].astype(np.float64)
        n1 = cfg["block_n"].astype(np.float64)
        m2 = cfg["dq_block_m"].astype(np.float64)
        n2 = cfg["dq_block_n"].astype(np.float64)
        loop1 = (
            per_thread(n1 * (d + dv), w)
            + per_thread(2.0 * n1 * m1, w)
            + 2.0 * np.ceil(m1 / 4.0)  # M and D: the thread's columns (2 per n8 tile)
        )
        loop2 = (
            per_thread(m2 * d, w)
            + per_thread(2.0 * m2 * n2, w)
            + 2.0 * 2.0 * np.maximum(m2 / (16.0 * w), 1.0)  # M and D: 2 rows per 16-row slab
        )
        return np.asarray(np.maximum(loop1, loop2) + FIXED_OVERHEAD_REGS, dtype=np.int64)

    # ---- cost ---------------------------------------------------------------------------------
    def backward_cost(
        self, device: CudaDevice, problem: AttentionProblem, cfg: ConfigArrays, res: CudaResources
    ) -> Perf:
        return backward_perf(self, device, problem, cfg, res)
