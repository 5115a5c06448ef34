"""A FlashAttention forward kernel that Triton compiles for a CUDA device (`TritonForwardFamily`),
and the helpers its backward kernels share: the compile target, the lowering of `tl.dot`, the
compiler's registers and the pipelined round.

Triton 3.2+ lowers tl.dot to tensor-core MMA only from compute capability 8.0 (below it, FMA:
triton-lang/triton#5066, "Deprecate MMAv1; fallback to FMA for computeCapability < 80"), and
schedules its software pipeliner only for 8.0 and newer (third_party/nvidia/backend/
compiler.py, make_ttgir), so num_stages has no effect there. What the compiler allocates is
`triton_compiler` (docs/model.md 16.7); what a stage buys is `triton_compiler.pipeline` (16.8).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np

from ...hardware import CudaDevice
from ...model_constants import model_constants
from ...problem import AttentionProblem, SolveOptions
from ...space import BoolArray, ConfigArrays, FloatArray, IntArray
from ..cuda.forward import FlashForwardFamily
from ..cuda.resources import RegisterUse
from ..cuda.timing import l2_bytes_per_clk_per_sm
from ..triton_compiler.loops import AttentionKernel
from ..triton_compiler.pipeline import stage_round
from ..triton_compiler.registers import register_estimate, spill_traffic_regs
from ..triton_compiler.shared_memory import shared_bytes
from ..triton_compiler.target import CompilerTarget, warpgroup_path

TENSOR_CORE_MIN_CC_MAJOR = 8


def compiler_target(device: CudaDevice) -> CompilerTarget:
    """The device as Triton's compile target (its compute capability)."""
    return CompilerTarget.cuda(device.sm.cc_major, device.sm.cc_minor)


def uses_warpgroup_mma(rows: IntArray, num_warps: IntArray, device: CudaDevice) -> BoolArray:
    """Whether a loop whose dots have `rows` result rows lowers to a warpgroup MMA (wgmma on cc
    9.0, tcgen05 on cc 10.x: `CompilerTarget.dot_path`), which reaches the dense tensor peak and
    reads its B operand from shared memory once per warpgroup."""
    return np.asarray(warpgroup_path(compiler_target(device).dot_path(rows, num_warps)))


def triton_matrix_unit(device: CudaDevice) -> str:
    """What runs tl.dot on the device, in the words of the bottleneck."""
    if device.sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
        return (
            "FP32 FMAs (Triton 3.2 and later emit no tensor-core MMA below cc 8.0; fa2, "
            "which would use them, needs cc 8.0)"
        )
    return "tensor cores"


def compiled_register_use(
    kernel: AttentionKernel, cfg: ConfigArrays, device: CudaDevice
) -> RegisterUse:
    """Registers of the compiled kernel (`triton_compiler.registers`): the live state against
    ptxas's cap (255, or the register file's share of each of the block's threads), what
    ptxas allocates, and the registers spilled to local memory. Triton sets no minimum blocks
    per SM, so `min_blocks_per_sm` does not lower the cap (it stays a residency rule)."""
    estimate = register_estimate(
        kernel, compiler_target(device), cfg["num_warps"], cfg["num_stages"]
    )
    return RegisterUse(
        demand=estimate.live,
        cap=estimate.cap,
        allocated=estimate.allocated,
        spill=estimate.spilled,
    )


def compiled_shared_bytes(
    kernel: AttentionKernel, cfg: ConfigArrays, device: CudaDevice
) -> IntArray:
    """What Triton allocates for the kernel's loops (`triton_compiler.shared_memory`)."""
    return shared_bytes(kernel, compiler_target(device), cfg["num_warps"], cfg["num_stages"])


def device_stage_round(
    compute: FloatArray,
    tile_load: FloatArray,
    l2_bytes: FloatArray,
    blocks: FloatArray,
    stages: IntArray,
    device: CudaDevice,
) -> tuple[FloatArray, FloatArray]:
    """`triton_compiler.pipeline.stage_round` at the device's L2 bandwidth per SM."""
    return stage_round(
        compute, tile_load, l2_bytes, blocks, stages, l2_bytes_per_clk_per_sm(device)
    )


class TritonForwardFamily(FlashForwardFamily):
    """A FlashAttention forward kernel compiled by Triton: Q resident in shared memory, K and V
    streamed `num_stages` deep; a configuration that spills is costed, not refused."""

    max_spill_regs: ClassVar[int | None] = None  # ptxas spills; the cost counts it

    @abstractmethod
    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        """The forward loop of `cfg` as the compiler's rules read it."""

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        """Multiples of 16, and every warp owns at least one 16x8 MMA tile of the scores."""
        mma_tiles = (cfg.block_m // 16) * (cfg.block_n // 8)
        ok = (cfg.block_m % 16 == 0) & (cfg.block_n % 16 == 0) & (mma_tiles >= cfg.num_warps)
        return np.asarray(ok, dtype=np.bool_)

    def shared_memory(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> IntArray:
        """What Triton allocates (`triton_compiler.shared_memory`): on mma.sync Q plus s - 1
        K and V buffers (plus P when the warps lie along its columns), on wgmma/tcgen05 Q
        plus s buffers of each, below cc 8.0 the fp32 staging of the FMA path."""
        return compiled_shared_bytes(self.kernel(cfg, problem), cfg, device)

    def register_use(
        self,
        cfg: ConfigArrays,
        problem: AttentionProblem,
        device: CudaDevice,
        options: SolveOptions,
    ) -> RegisterUse:
        return compiled_register_use(self.kernel(cfg, problem), cfg, device)

    def q_in_registers(self) -> bool:
        """False: Q stays in shared memory and each iteration's first dot reads it from there
        (`ttg.local_load` inside the loop on mma.sync; wgmma's A operand)."""
        return False

    def spill_traffic_regs(self, spill_regs: IntArray) -> IntArray:
        """ptxas's spill code grows faster than the registers spilled
        (`triton_compiler.registers.spill_traffic_regs`)."""
        return spill_traffic_regs(spill_regs)

    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        return np.asarray(cfg.num_stages - 1, dtype=np.int64)

    def iteration_round(
        self,
        compute: FloatArray,
        tile_load: FloatArray,
        tile_bytes: FloatArray,
        blocks: FloatArray,
        cfg: ConfigArrays,
        device: CudaDevice,
    ) -> tuple[FloatArray, FloatArray]:
        """The round with Triton's pipeline: loads issued num_stages - 1 iterations ahead
        against the load's time and its spread (`device_stage_round`)."""
        return device_stage_round(compute, tile_load, tile_bytes, blocks, cfg["num_stages"], device)

    def matrix_flops_per_clk_per_sm(
        self, cfg: ConfigArrays, device: CudaDevice, dtype_bytes: int
    ) -> FloatArray:
        """wgmma and tcgen05 reach the dense tensor peak; mma.sync its efficiency; below
        compute capability 8.0 tl.dot runs on FP32 FMAs (2 FLOP per FMA) at the CUDA-core
        rate."""
        tp = device.throughput
        if device.sm.cc_major < TENSOR_CORE_MIN_CC_MAJOR:
            return np.full(len(cfg), 2.0 * tp.fp32_ops_per_clk_per_sm)
        peak = tp.tensor_flops_per_clk_per_sm(dtype_bytes)
        return np.where(
            uses_warpgroup_mma(cfg.block_m, cfg.num_warps, device),
            peak,
            peak * tp.mma_sync_efficiency,
        )

    def matrix_unit(self, device: CudaDevice) -> str:
        return triton_matrix_unit(device)

    def pipe_overlap(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """On the warpgroup path the kernel waits for S = QK^T before the softmax reads it, and
        for P.V before the next S: without FA3's warp specialisation, ping-pong or
        intra-warpgroup pipelining, a warpgroup's softmax does not overlap its own GEMMs, so
        the pipes overlap only across blocks."""
        wgmma_ilp = model_constants(device).wgmma_instruction_level_parallelism
        return np.where(
            uses_warpgroup_mma(cfg.block_m, cfg.num_warps, device),
            wgmma_ilp,
            super().pipe_overlap(cfg, device),
        )

    def tile_readers(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """A warpgroup MMA reads its B operand from shared memory once per warpgroup (4 warps)."""
        warps = cfg.num_warps.astype(np.float64)
        return np.where(uses_warpgroup_mma(cfg.block_m, cfg.num_warps, device), warps / 4.0, warps)
