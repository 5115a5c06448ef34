"""A generic Triton FlashAttention forward kernel (the Triton tutorial's design), registered as
(`triton`, forward), with a split grid for prefill against a longer cache (`split_kv.py`).

BLOCK_M query rows per program, BLOCK_N keys per loop iteration, `num_warps`, and `num_stages`
for the software pipeliner, which streams K and V through shared memory; Q is loaded once and
read from shared memory by every iteration's first dot. `tl.arange` needs power-of-two extents,
so head dims are padded to a power of two. What the compiler allocates (shared memory,
registers, spills) and when `tl.dot` lowers to wgmma or tcgen05 are the Triton compiler's rules
(`families/triton_compiler`, docs/model.md 16.7), for the kernel's loop as
`triton_compiler.flash_loops` describes it; a configuration that spills is costed
(local-memory traffic), not refused. What a stage buys is
`triton_compiler.pipeline` (docs/model.md 16.8). Source: Triton tutorial 06 "Fused
Attention"; Triton docs `triton.Config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...dispatch import ByDevice
from ...errors import FieldViolation
from ...family import KernelFamily
from ...hardware import HardwareSpec, SmLimits
from ...problem import AttentionProblem, DType
from ...space import ConfigArrays, Param
from ...split_kv import SplitKv
from ..cuda.forward import standard_tile_params
from ..cuda.resources import cuda_device
from ..triton_compiler.flash_loops import forward_kernel
from ..triton_compiler.loops import AttentionKernel
from ..triton_cuda.forward import TENSOR_CORE_MIN_CC_MAJOR, TritonForwardFamily
from .heads import triton_kernel_head_dims
from .rocm import TritonRocm
from .stages import reason_lines as stage_reason_lines

if TYPE_CHECKING:
    from ...candidates import CandidateTable


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


def triton_matrix_units(sm: SmLimits) -> str:
    """What runs tl.dot, as the reasons name its busy fraction."""
    return "FP32 FMA units" if sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR else "tensor cores"


class TritonCuda(TritonForwardFamily):
    """triton forward on CUDA: the tutorial's kernel, with a split grid against a longer cache."""

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
                "software pipeline stages: K/V loads issued num_stages - 1 iterations ahead",
            )
        )

    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        """The forward loop of `cfg` as the compiler's rules read it."""
        d, dv = self.kernel_head_dims(problem)
        return forward_kernel(cfg.block_m, cfg.block_n, d, dv, problem.dtype.bytes)

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        """The CUDA lines with the compiler's registers, and why this many stages."""
        return stage_reason_lines(table, i, super().reason_lines(table, i))


# The parameter only the ROCm kernel declares: it tells a configuration's kernel apart.
ROCM_ONLY_PARAMETER = "waves_per_eu"


class TritonFlashAttention(ByDevice):
    """triton forward: the tutorial's kernel on CUDA devices (`TritonCuda`) and on rocm devices
    (`TritonRocm`, with Triton's AMD knobs)."""

    name = "triton"
    device_kind = "cuda"
    other_device_kinds = ("rocm",)
    summary = TritonCuda.summary
    split_kv = TritonCuda.split_kv  # the CUDA kernel's split grid; the ROCm kernel has none
    cuda = TritonCuda()
    rocm = TritonRocm()

    def on(self, hardware: HardwareSpec) -> KernelFamily:
        return self.rocm if hardware.arch == self.rocm.device_kind else self.cuda

    def of(self, cfg: ConfigArrays) -> KernelFamily:
        return self.rocm if ROCM_ONLY_PARAMETER in cfg else self.cuda

    def _device_violations(self, hardware: HardwareSpec) -> list[FieldViolation]:
        return []
