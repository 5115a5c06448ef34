"""FlashAttention-4's forward kernel on sm_120 (`FlashAttentionForwardSm120`, the design the
`fa4` family runs on compute capability 12.x: RTX 5090, RTX PRO 6000).

sm_120 has no tensor memory, no tcgen05 and no wgmma: FA4 subclasses its SM80 CuTe kernel
(`mma.sync.m16n8k16`, Q, K and V staged in shared memory by cp.async, the Q rows split across
the warps in 16-row slabs) and checks it against sm_120's 99 KB (`can_implement`: Q + stages x
(K + V) within 101,376 bytes; fp16/bf16; head dims multiples of 8; tile_n a multiple of 16;
2 x tile_m a multiple of the threads). Its cost is the FlashAttention forward loop the CUDA
families share (`families/cuda/forward.py`, docs/model.md sections 2-6) with this kernel's
shared-memory layout; the occupancy is sm_120's (1,536 threads, 24 blocks, 100 KiB per SM).
Decision variables: block_m, block_n, num_warps, num_stages (the interface launches 4 warps
and one stage; the model ranks the others the kernel compiles). Sources: Dao-AILab/
flash-attention@0251105a `flash_attn/cute/flash_fwd_sm120.py`, `flash_fwd.py`
(FlashAttentionForwardSm80: the tiled MMA and copy layouts), `interface.py:776-777, 1362-1376`.
"""

from __future__ import annotations

import numpy as np

from ...errors import FieldViolation
from ...hardware import CudaDevice, HardwareSpec
from ...problem import AttentionProblem, DType, Phase
from ...space import BoolArray, ConfigArrays, IntArray, Param
from ..cuda.forward import FlashForwardFamily, standard_tile_params
from ..cuda.resources import MMA_ROWS
from .shape import kernel_head_dims
from .split import FA4_SM120_SPLIT_KV

SM120_MAX_HEAD_DIM = 256
HEAD_DIM_MULTIPLE = 8  # can_implement: head_dim % 8 == 0, head_dim_v % 8 == 0
BLOCK_N_MULTIPLE = 16  # can_implement: tile_n % 16 == 0
COPY_BITS = 128  # cp.async of 16 bytes per thread (universal_copy_bits)
SM120_STAGES = (1, 2)


def sm120_violations(problem: AttentionProblem) -> list[FieldViolation]:
    """The sm_120 kernel's rules on the problem: fp16 or bf16, head dims multiples of 8 up to
    256, no dropout."""
    out = []
    if problem.dtype is DType.FP8:
        out.append(
            FieldViolation(
                "dtype",
                "fa4 runs fp8 only on sm_100 (interface.py: 'FP8 is only supported on SM100'); "
                "its sm_120 kernel takes fp16 and bf16",
            )
        )
    for field, value in (("head_dim", problem.head_dim), ("head_dim_v", problem.head_dim_v_eff)):
        if value % HEAD_DIM_MULTIPLE or value > SM120_MAX_HEAD_DIM:
            out.append(
                FieldViolation(
                    field,
                    f"fa4 on sm_120 takes {field} a multiple of {HEAD_DIM_MULTIPLE} up to "
                    f"{SM120_MAX_HEAD_DIM}; got {value}",
                )
            )
    if problem.dropout > 0:
        out.append(FieldViolation("dropout", "FlashAttention-4 has no dropout (allowed: 0)"))
    return out


def rows_per_copy_pass(num_warps: IntArray, head_dim: int, warp_size: int, elem: int) -> IntArray:
    """Rows one 16-byte-per-thread copy pass of the block covers: a row of the shared-memory
    swizzle atom (64, 32 or 16 elements, the largest dividing the padded head dim) takes
    atom / (16 bytes / element) threads (flash_fwd.py: tQ_layout, tO_layout)."""
    atom = next(a for a in (64, 32, 16) if head_dim % a == 0)
    threads_per_row = atom // (COPY_BITS // 8 // elem)
    return np.asarray(num_warps * warp_size // threads_per_row, dtype=np.int64)


class Fa4Sm120(FlashForwardFamily):
    """fa4 on sm_120: the SM80 mma.sync design under 99 KB of shared memory."""

    name = "fa4"
    input_dtypes = (DType.FP16, DType.BF16)  # the sm_120 kernel is 16-bit
    summary = (
        "FlashAttention-4 forward on sm_120 (its SM80 design: mma.sync, cp.async, Q split "
        "across warps, under 99 KB of shared memory; no split-KV or paged KV on 12.x)"
    )
    alignment_rule = (
        "rows per warp (block_m / num_warps) a multiple of 16; block_n a multiple of 16; "
        "block_m a multiple of the rows one 16-byte-per-thread copy pass covers"
    )
    split_kv = FA4_SM120_SPLIT_KV

    def kernel_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return sm120_violations(problem)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return kernel_head_dims(problem)

    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return standard_tile_params(
            Param(
                "num_stages",
                SM120_STAGES,
                "K/V tiles in flight through cp.async (the interface launches 1)",
            )
        )

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        rows_per_warp_ok = cfg.block_m % (MMA_ROWS * cfg.num_warps) == 0
        block_n_ok = cfg.block_n % BLOCK_N_MULTIPLE == 0
        d, dv = self.kernel_head_dims(problem)
        warp = device.sm.warp_size_threads
        elem = problem.dtype.bytes
        copy_ok = np.ones(len(cfg), dtype=np.bool_)
        for dim in (d, dv):  # Q loads and O stores
            copy_ok &= cfg.block_m % rows_per_copy_pass(cfg.num_warps, dim, warp, elem) == 0
        return np.asarray(rows_per_warp_ok & block_n_ok & copy_ok, dtype=np.bool_)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Q, then num_stages K and V tiles (Q stays in shared memory: the interface passes
        Q_in_regs=False)."""
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        per_stage = cfg.block_n * (d + dv)
        return np.asarray((cfg.block_m * d + cfg.num_stages * per_stage) * elem, dtype=np.int64)

    def q_in_registers(self) -> bool:
        return False

    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        """K/V tiles issued ahead: one per stage (with one stage, the next K during the
        softmax, as FlashAttention-2)."""
        return np.asarray(cfg.num_stages, dtype=np.int64)


class Fa4Sm120Decode(Fa4Sm120):
    """fa4 decode on sm_120: the same kernel, unsplit (FA4 does not split on 12.x)."""

    phase = Phase.DECODE
    summary = (
        "FlashAttention-4 decode on sm_120 (its SM80 mma.sync kernel over each KV head's whole "
        "cache: FA4 neither splits nor pages on 12.x; GQA may be packed)"
    )
    split_kv = FA4_SM120_SPLIT_KV.for_decode()
