"""A generic Triton FlashAttention forward kernel (the Triton tutorial's design), registered as
(`triton`, forward), with a split grid for prefill against a longer cache (`split_kv.py`).

BLOCK_M query rows per program, BLOCK_N keys per loop iteration, `num_warps`, and `num_stages`
for the software pipeliner, which streams K and V through shared memory; Q is loaded once and
read from shared memory by every iteration's first dot. `tl.arange` needs power-of-two extents,
so head dims are padded to a power of two. What the compiler allocates (shared memory,
registers, spills) and when `tl.dot` lowers to wgmma or tcgen05 are the Triton compiler's rules
(`families/triton_compiler`, docs/model.md 16.7), for the kernel's loop as `loops.py` describes
it; a configuration that spills is costed (local-memory traffic), not refused. What a stage buys
is `triton_compiler.pipeline` (docs/model.md 16.8). Source: Triton tutorial 06 "Fused
Attention"; Triton docs `triton.Config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ...errors import FieldViolation
from ...hardware import CudaDevice, HardwareSpec, SmLimits
from ...model_constants import model_constants
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import BoolArray, ConfigArrays, FloatArray, IntArray, Param
from ...split_kv import SplitKv
from ..cuda.forward import FlashForwardFamily, standard_tile_params
from ..cuda.resources import RegisterUse, cuda_device
from ..triton_compiler.loops import AttentionKernel
from ..triton_compiler.registers import register_estimate, spill_traffic_regs
from ..triton_compiler.shared_memory import shared_bytes
from ..triton_compiler.target import CompilerTarget, warpgroup_path
from .loops import forward_kernel
from .stages import reason_lines as stage_reason_lines
from .stages import stage_round

if TYPE_CHECKING:
    from ...candidates import CandidateTable

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


def compiler_target(device: CudaDevice) -> CompilerTarget:
    """The device as Triton's compile target (its compute capability)."""
    return CompilerTarget.cuda(device.sm.cc_major, device.sm.cc_minor)


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


def uses_warpgroup_mma(rows: IntArray, num_warps: IntArray, device: CudaDevice) -> BoolArray:
    """Whether a loop whose dots have `rows` result rows lowers to a warpgroup MMA (wgmma on cc
    9.0, tcgen05 on cc 10.x: `CompilerTarget.dot_path`), which reaches the dense tensor peak and
    reads its B operand from shared memory once per warpgroup."""
    return np.asarray(warpgroup_path(compiler_target(device).dot_path(rows, num_warps)))


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
    max_spill_regs: ClassVar[int | None] = None  # ptxas spills; the cost counts it

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

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        mma_tiles = (cfg.block_m // 16) * (cfg.block_n // 8)
        ok = (cfg.block_m % 16 == 0) & (cfg.block_n % 16 == 0) & (mma_tiles >= cfg.num_warps)
        return np.asarray(ok, dtype=np.bool_)

    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        """The forward loop of `cfg` as the compiler's rules read it."""
        d, dv = self.kernel_head_dims(problem)
        return forward_kernel(cfg.block_m, cfg.block_n, d, dv, problem.dtype.bytes)

    def shared_memory(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> IntArray:
        """What Triton allocates (`triton_compiler.shared_memory`): on mma.sync Q plus s - 1
        K and V buffers (plus P when the warps lie along its columns), on wgmma/tcgen05 Q
        plus s buffers of each, below cc 8.0 the fp32 staging of the FMA path."""
        return shared_bytes(
            self.kernel(cfg, problem), compiler_target(device), cfg.num_warps, cfg.num_stages
        )

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
        against the load's time and its spread (`stages.stage_round`)."""
        return stage_round(compute, tile_load, tile_bytes, blocks, cfg["num_stages"], device)

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

    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        """The CUDA lines with the compiler's registers, and why this many stages."""
        return stage_reason_lines(table, i, super().reason_lines(table, i))
