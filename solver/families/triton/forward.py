"""A generic Triton FlashAttention forward kernel (the Triton tutorial's design), registered as
(`triton`, forward), with a split grid for prefill against a longer cache (`split_kv.py`).

BLOCK_M query rows per program, BLOCK_N keys per loop iteration, `num_warps`, and `num_stages`
K/V buffers in shared memory filled by the software pipeliner; Q is loaded once and kept in
registers as a dot operand. `tl.arange` needs power-of-two extents, so head dims are padded to
a power of two. On Hopper, `tl.dot` lowers to wgmma when a warpgroup (4 warps) owns at least 64
rows. Source: Triton tutorial 06 "Fused Attention"; Triton docs `triton.Config`.
"""

from __future__ import annotations

import numpy as np

from ...errors import FieldViolation
from ...hardware import CudaDevice, HardwareSpec, SmLimits
from ...model_constants import model_constants
from ...problem import AttentionProblem, DType
from ...space import BoolArray, ConfigArrays, FloatArray, IntArray, Param
from ...split_kv import SplitKv
from ..cuda.forward import FlashForwardFamily, standard_tile_params
from ..cuda.resources import cuda_device

WGMMA_ROWS_PER_WARPGROUP = 64
# Triton 3.2+ lowers tl.dot to tensor-core MMA only from compute capability 8.0 (below it, FMA:
# triton-lang/triton#5066, "Deprecate MMAv1; fallback to FMA for computeCapability < 80"),
# and schedules its software pipeliner only for 8.0 and newer (third_party/nvidia/backend/
# compiler.py, make_ttgir), so num_stages has no effect there.
TENSOR_CORE_MIN_CC_MAJOR = 8


def _next_pow2(value: int) -> int:
    return 1 << max(4, (value - 1).bit_length())


def triton_kernel_head_dims(problem: AttentionProblem) -> tuple[int, int]:
    """`tl.arange` needs power-of-two extents: the head dims padded to powers of two."""
    return _next_pow2(problem.head_dim), _next_pow2(problem.head_dim_v_eff)


def triton_violations(problem: AttentionProblem, hardware: HardwareSpec) -> list[FieldViolation]:
    """The Triton kernels' rules: tensor-core compute capability, the dtypes the device's
    tensor cores take, head dims up to 256."""
    violations = []
    sm = cuda_device(hardware).sm
    cc = (sm.cc_major, sm.cc_minor)
    if cc < (7, 0):
        violations.append(
            FieldViolation("kernel", "triton tensor-core kernels need compute capability >= 7.0")
        )
    if problem.dtype is DType.BF16 and cc < (8, 0):
        violations.append(
            FieldViolation(
                "dtype",
                f"bf16 needs compute capability >= 8.0; {hardware.name} is "
                f"{sm.compute_capability} (allowed: fp16)",
            )
        )
    if problem.dtype is DType.FP8 and cc < (8, 9):
        violations.append(
            FieldViolation(
                "dtype",
                f"fp8 needs compute capability >= 8.9; {hardware.name} is "
                f"{sm.compute_capability} (allowed: fp16" + (", bf16)" if cc >= (8, 0) else ")"),
            )
        )
    for field, value in (
        ("head_dim", problem.head_dim),
        ("head_dim_v", problem.head_dim_v_eff),
    ):
        if value > 256:
            violations.append(
                FieldViolation(field, f"triton supports {field} up to 256; got {value}")
            )
    return violations


def uses_wgmma(rows: IntArray, num_warps: IntArray, device: CudaDevice) -> BoolArray:
    """tl.dot lowers to wgmma on cc >= 9 when whole warpgroups own >= 64 of the GEMM's output
    rows each."""
    warpgroups = np.maximum(num_warps // 4, 1)
    ok = (num_warps % 4 == 0) & (rows >= WGMMA_ROWS_PER_WARPGROUP * warpgroups)
    return np.asarray(ok & (device.sm.cc_major >= 9), dtype=np.bool_)


def triton_matrix_unit(device: CudaDevice) -> str:
    """What runs tl.dot on the device, in the words of the bottleneck: below cc 8.0 the FP32
    FMAs, and why (the device's tensor cores are there, Triton does not use them), with what
    would use them (docs/model.md, the triton family's matrix rate)."""
    if device.sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
        return (
            "FP32 FMAs (Triton 3.2 and later emit no tensor-core MMA below cc 8.0; fa2, "
            "which would use them, needs cc 8.0)"
        )
    return "tensor cores"


def triton_matrix_units(sm: SmLimits) -> str:
    """What runs tl.dot, as the reasons name its busy fraction."""
    return "FP32 FMA units" if sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR else "tensor cores"


class TritonFlashAttention(FlashForwardFamily):
    """triton forward: the tutorial's kernel, with a split grid against a longer cache."""

    name = "triton"
    summary = "Triton fused attention (tl.dot, software-pipelined K/V, num_stages buffers)"

    def matrix_units(self, sm: SmLimits) -> str:
        return triton_matrix_units(sm)

    split_kv = SplitKv()  # FlashAttention-2's combine, no packing, no paged path
    alignment_rule = (
        "block_m and block_n multiples of 16; the warps must each own at least one 16x8 "
        "MMA tile of the block_m x block_n score tile"
    )

    def kernel_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return triton_violations(problem, hardware)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return triton_kernel_head_dims(problem)

    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        if cuda_device(hardware).sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
            return standard_tile_params(
                Param("num_stages", (1,), "no software pipelining below cc 8.0")
            )
        return standard_tile_params(
            Param(
                "num_stages",
                (1, 2, 3, 4, 5),
                "K/V buffers the software pipeliner keeps (num_stages)",
            )
        )

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        mma_tiles = (cfg.block_m // 16) * (cfg.block_n // 8)
        ok = (cfg.block_m % 16 == 0) & (cfg.block_n % 16 == 0) & (mma_tiles >= cfg.num_warps)
        return np.asarray(ok, dtype=np.bool_)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        return np.asarray(
            (cfg.block_m * d + cfg.num_stages * cfg.block_n * (d + dv)) * elem, dtype=np.int64
        )

    def q_in_registers(self) -> bool:
        return True

    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        return np.asarray(cfg.num_stages - 1, dtype=np.int64)

    def matrix_flops_per_clk_per_sm(
        self, cfg: ConfigArrays, device: CudaDevice, dtype_bytes: int
    ) -> FloatArray:
        """wgmma reaches the dense tensor peak; mma.sync its efficiency; below compute
        capability 8.0 tl.dot runs on FP32 FMAs (2 FLOP per FMA) at the CUDA-core rate."""
        tp = device.throughput
        if device.sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
            return np.full(len(cfg), 2.0 * tp.fp32_ops_per_clk_per_sm)
        peak = tp.tensor_flops_per_clk_per_sm(dtype_bytes)
        return np.where(
            uses_wgmma(cfg.block_m, cfg.num_warps, device), peak, peak * tp.mma_sync_efficiency
        )

    def matrix_unit(self, device: CudaDevice) -> str:
        return triton_matrix_unit(device)

    def pipe_overlap(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """On the wgmma path the kernel waits for S = QK^T before the softmax reads it, and
        for P.V before the next S: without FA3's warp specialisation, ping-pong or
        intra-warpgroup pipelining, a warpgroup's softmax does not overlap its own GEMMs, so
        the pipes overlap only across blocks."""
        wgmma_ilp = model_constants(device).wgmma_instruction_level_parallelism
        return np.where(
            uses_wgmma(cfg.block_m, cfg.num_warps, device),
            wgmma_ilp,
            super().pipe_overlap(cfg, device),
        )

    def tile_readers(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """wgmma reads its B operand from shared memory once per warpgroup (4 warps)."""
        warps = cfg.num_warps.astype(np.float64)
        return np.where(uses_wgmma(cfg.block_m, cfg.num_warps, device), warps / 4.0, warps)
