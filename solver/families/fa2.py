"""FlashAttention-2's forward kernel (Ampere-style; runs on sm80 and later).

Q is split across warps along the rows (each warp owns a multiple of 16 rows, the M of
`mma.sync.m16n8k16`); one Q tile, one K tile and one V tile live in shared memory; K/V tiles
arrive by `cp.async`: the V load is issued before S = QK^T and the next K load before the
softmax and O += PV, so one iteration of compute is available to hide a tile load.
Source: Dao, "FlashAttention-2" (2023) sec. 3; `csrc/flash_attn/src/kernel_traits.h` and
`flash_fwd_kernel.h` (smem = Q + K + V tiles; gmem copies of 16 bytes per thread).
"""

from __future__ import annotations

import numpy as np

from ..errors import FieldViolation
from ..hardware import CudaDevice, HardwareSpec
from ..problem import AttentionProblem, DType
from ..space import BoolArray, ConfigArrays, IntArray, Param
from .cuda import MMA_ROWS, cuda_device
from .cuda_forward import FlashForwardFamily, tile_params

# Head dims FlashAttention-2 compiles kernels for; a problem's head_dim is padded up to one.
FA2_HEAD_DIMS = (32, 64, 96, 128, 160, 192, 224, 256)
GMEM_LOAD_ELEMENTS = 8  # 16-byte cp.async of fp16/bf16


class FlashAttention2(FlashForwardFamily):
    name = "fa2"
    summary = "FlashAttention-2 forward (mma.sync, cp.async, Q split across warps)"
    alignment_rule = (
        "rows per warp (block_m / num_warps) a multiple of 16; block_n a multiple of 16; "
        "block_m and block_n multiples of the rows one 16-byte-per-thread copy pass covers"
    )
    pipeline_note = "single-buffered K and V; the next tile's load overlaps this tile's compute"

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        violations = []
        sm = cuda_device(hardware).sm
        if sm.cc_major < 8:
            violations.append(
                FieldViolation(
                    "kernel",
                    f"fa2 needs compute capability >= 8.0; {hardware.name} is "
                    f"{sm.compute_capability} (allowed kernel for it: 'triton')",
                )
            )
        if problem.dtype is DType.FP8:
            violations.append(
                FieldViolation("dtype", "fa2 supports fp16 and bf16; allowed: fp16, bf16")
            )
        if problem.head_dim > FA2_HEAD_DIMS[-1] or problem.head_dim % 8:
            violations.append(
                FieldViolation(
                    "head_dim",
                    f"fa2 supports head_dim a multiple of 8 up to 256; got {problem.head_dim}",
                )
            )
        if problem.head_dim_v_eff != problem.head_dim:
            violations.append(
                FieldViolation(
                    "head_dim_v",
                    f"fa2 needs head_dim_v == head_dim ({problem.head_dim}); "
                    f"got {problem.head_dim_v_eff} (the triton family allows them to differ)",
                )
            )
        return violations

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        d = next((h for h in FA2_HEAD_DIMS if h >= problem.head_dim), FA2_HEAD_DIMS[-1])
        return d, d

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return tile_params(
            Param("num_stages", (1,), "K/V pipeline depth (FlashAttention-2 is single-buffered: 1)")
        )

    def _rows_per_copy_pass(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        d, _ = self.kernel_head_dims(problem)
        block_k_smem = 64 if d % 64 == 0 else 32
        threads_per_row = block_k_smem // GMEM_LOAD_ELEMENTS
        return np.asarray(cfg.num_warps * 32 // threads_per_row, dtype=np.int64)

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        rows_per_warp_ok = (cfg.block_m % (MMA_ROWS * cfg.num_warps)) == 0
        block_n_ok = (cfg.block_n % MMA_ROWS) == 0
        rows_per_pass = self._rows_per_copy_pass(cfg, problem)
        copy_ok = (cfg.block_m % rows_per_pass == 0) & (cfg.block_n % rows_per_pass == 0)
        return np.asarray(rows_per_warp_ok & block_n_ok & copy_ok, dtype=np.bool_)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        return np.asarray((cfg.block_m * d + cfg.block_n * (d + dv)) * elem, dtype=np.int64)

    def q_in_registers(self) -> bool:
        return False

    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        return np.ones(len(cfg), dtype=np.int64)
