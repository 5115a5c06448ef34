"""FlashAttention-2's forward kernel (Ampere-style; runs on sm80 and later), registered as
(`fa2`, forward), with its split-KV kernel for prefill against a longer cache.

Q is split across warps along the rows (each warp owns a multiple of 16 rows, the M of
`mma.sync.m16n8k16`); one Q tile, one K tile and one V tile live in shared memory; K/V tiles
arrive by `cp.async`: the V load is issued before S = QK^T and the next K load before the
softmax and O += PV, so one iteration of compute is available to hide a tile load.
Source: Dao, "FlashAttention-2" (2023) sec. 3; `csrc/flash_attn/src/kernel_traits.h` and
`flash_fwd_kernel.h` (smem = Q + K + V tiles; gmem copies of 16 bytes per thread).

Split-KV (`split_kv.py`, docs/model.md section 13): with `seq_len_kv > seq_len` the family adds
`num_splits` (and `pack_gqa` for GQA problems); with `seq_len_kv == seq_len` its space and
answers are the tile's alone. Sources: FlashAttention-2 `csrc/flash_attn/flash_api.cpp`
(`num_splits_heuristic`, `set_params_splitkv`, `seqlenq_ngroups_swapped`, the paged-KV block
size check) and `flash_fwd_launch_template.h` (`run_mha_fwd_splitkv_dispatch`,
`run_flash_splitkv_fwd`).
"""

from __future__ import annotations

import numpy as np

from ...errors import FieldViolation
from ...hardware import CudaDevice, HardwareSpec
from ...problem import AttentionProblem, DType
from ...space import BoolArray, ConfigArrays, IntArray, Param
from ...split_kv import PageRule, SplitKv, num_splits_domain
from ..cuda.forward import FlashForwardFamily, standard_tile_params
from ..cuda.resources import MMA_ROWS, cuda_device

# Head dims FlashAttention-2 compiles kernels for; a problem's head_dim is padded up to one.
FA2_HEAD_DIMS = (32, 64, 96, 128, 160, 192, 224, 256)
GMEM_LOAD_ELEMENTS = 8  # 16-byte cp.async of fp16/bf16
# FlashAttention-2's paged KV: "Paged KV cache block size must be divisible by 256"
# (flash_api.cpp, mha_fwd_kvcache and mha_varlen_fwd). Auto chooses among 256, 512 and 1024.
FA2_PAGES = PageRule(
    rule="a multiple of 256 (FlashAttention-2's paged KV cache)",
    auto_domain=(256, 512, 1024),
    multiple_of=256,
)


def fa2_split_counts(
    problem: AttentionProblem, hardware: HardwareSpec, min_block_n: int
) -> tuple[int, ...]:
    """FlashAttention-2 has no split-KV with dropout (`set_params_splitkv`); otherwise the
    powers of two of `split_kv.num_splits_domain`."""
    return (1,) if problem.dropout > 0 else num_splits_domain(problem, min_block_n)


def fa2_pack_gqa(problem: AttentionProblem) -> tuple[int, ...]:
    """FlashAttention-2 packs the GQA group into the rows only for one query row (its
    `seqlenq_ngroups_swapped`: seqlen_q == 1, more query heads than KV heads, no dropout, no
    window), and then always: the domain is one value."""
    return (1,) if problem.seq_len == 1 and problem.dropout == 0 else (0,)


def fa2_kernel_head_dims(problem: AttentionProblem) -> tuple[int, int]:
    """The head dims FlashAttention-2 compiles for: head_dim padded up to one of
    FA2_HEAD_DIMS (Q/K and V alike)."""
    d = next((h for h in FA2_HEAD_DIMS if h >= problem.head_dim), FA2_HEAD_DIMS[-1])
    return d, d


def rows_per_copy_pass(num_warps: IntArray, head_dim: int | IntArray, warp_size: int) -> IntArray:
    """Rows one 16-byte-per-thread copy pass of the block's threads covers: a row of
    kBlockKSmem (64, or 32 where the head dim is not a multiple of 64) elements takes
    kBlockKSmem / 8 threads (kernel_traits.h, GmemLayoutAtom); `head_dim` one value or one
    per configuration."""
    block_k_smem = np.where(np.asarray(head_dim) % 64 == 0, 64, 32)
    threads_per_row = block_k_smem // GMEM_LOAD_ELEMENTS
    return np.asarray(num_warps * warp_size // threads_per_row, dtype=np.int64)


def fa2_violations(problem: AttentionProblem, hardware: HardwareSpec) -> list[FieldViolation]:
    """FlashAttention-2's own rules, forward and backward: compute capability 8.0 or later,
    fp16 or bf16, head dims it compiles (equal for Q/K and V)."""
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


class FlashAttention2(FlashForwardFamily):
    """fa2 forward: FlashAttention-2, with its split-KV kernel for prefill against a cache."""

    name = "fa2"
    summary = "FlashAttention-2 forward (mma.sync, cp.async, Q split across warps)"
    alignment_rule = (
        "rows per warp (block_m / num_warps) a multiple of 16; block_n a multiple of 16; "
        "block_m and block_n multiples of the rows one 16-byte-per-thread copy pass covers"
    )
    split_kv = SplitKv(split_counts=fa2_split_counts, pack_gqa=fa2_pack_gqa, pages=FA2_PAGES)

    def kernel_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return fa2_violations(problem, hardware)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return fa2_kernel_head_dims(problem)

    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return standard_tile_params(
            Param("num_stages", (1,), "K/V pipeline depth (FlashAttention-2 is single-buffered: 1)")
        )

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        rows_per_warp_ok = (cfg.block_m % (MMA_ROWS * cfg.num_warps)) == 0
        block_n_ok = (cfg.block_n % MMA_ROWS) == 0
        d, _ = self.kernel_head_dims(problem)
        rows_per_pass = rows_per_copy_pass(cfg.num_warps, d, device.sm.warp_size_threads)
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
