"""The triton family's forward kernel (the Triton tutorial's loop) on an AMD Instinct (rocm)
device: the tutorial's loop (`triton_compiler.flash_loops.forward_kernel`) at the head dims
padded to powers of two, with Triton's AMD knobs, on the shared Triton-on-ROCm model
(`families/triton_rocm`, docs/model.md 19.10)."""

from __future__ import annotations

from ...problem import AttentionProblem
from ...space import ConfigArrays
from ..triton_compiler.flash_loops import forward_kernel
from ..triton_compiler.loops import AttentionKernel
from ..triton_rocm.forward import TritonRocmForward
from .heads import triton_kernel_head_dims


class TritonRocm(TritonRocmForward):
    """triton forward on ROCm: BLOCK_M, BLOCK_N, num_warps, num_stages, waves_per_eu,
    matrix_instr_nonkdim, kpack."""

    name = "triton"
    summary = (
        "Triton fused attention on ROCm (tl.dot on MFMA 16x16 or 32x32, the stream pipeliner's "
        "num_stages, waves_per_eu capping VGPRs, kpack); LDS and VGPR+AGPR as the AMD backend "
        "allocates them, AMD's occupancy"
    )

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return triton_kernel_head_dims(problem)

    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        d, dv = self.kernel_head_dims(problem)
        return forward_kernel(cfg["block_m"], cfg["block_n"], d, dv, problem.dtype.bytes)
