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

import copy
from dataclasses import fields, is_dataclass, replace
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from ...constraints import Constraint
from ...cost import Perf, gather_perf
from ...errors import FieldViolation
from ...hardware import CudaDevice, HardwareSpec
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import BoolArray, Config, ConfigArrays, IntArray, Param
from ...split_kv import PageRule, SplitKv, num_splits_domain, sub_evaluation
from ..cuda.forward import FlashForwardFamily, standard_tile_params
from ..cuda.resources import MMA_ROWS, CudaResources, cuda_device
from .release import (
    FA2_HEAD_DIMS,
    CurrentRelease,
    current_head_dim,
    kernel_head_dim_column,
    kernel_head_dim_domain,
    kernel_head_dim_param,
)

if TYPE_CHECKING:
    from ...candidates import Evaluation

T = TypeVar("T")

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


def merge_rows(records: list[T], owners: list[IntArray]) -> T:
    """One record of per-configuration arrays (frozen dataclasses, nested ones too) from
    several computed over the same configurations: row i from the record whose owner mask is
    1 there; scalars and other fields from the first."""
    first = records[0]
    assert is_dataclass(first) and not isinstance(first, type)
    n = len(owners[0])
    changes: dict[str, object] = {}
    for f in fields(first):
        values = [getattr(r, f.name) for r in records]
        if isinstance(values[0], np.ndarray) and values[0].shape[:1] == (n,):
            changes[f.name] = np.select([o == 1 for o in owners], values, values[0])
        elif is_dataclass(values[0]) and not isinstance(values[0], type):
            changes[f.name] = merge_rows(values, owners)
    return replace(first, **changes)


class FlashAttention2(FlashForwardFamily):
    """fa2 forward: FlashAttention-2, with its split-KV kernel for prefill against a cache.

    Head dims 129-160 and 193-224 run one of two releases' kernels (release.py): where they
    do, `kernel_head_dim` is declared and each configuration is laid out, sized and costed
    with its own kernel's head dim, by a view of the family fixed to it
    (`at_kernel_head_dim`)."""

    name = "fa2"
    summary = "FlashAttention-2 forward (mma.sync, cp.async, Q split across warps)"
    alignment_rule = (
        "rows per warp (block_m / num_warps) a multiple of 16; block_n a multiple of 16; "
        "block_m and block_n multiples of the rows one 16-byte-per-thread copy pass covers"
    )
    split_kv = SplitKv(split_counts=fa2_split_counts, pack_gqa=fa2_pack_gqa, pages=FA2_PAGES)
    # the kernel head dim a view of the family is fixed to; None: each configuration's own
    fixed_kernel_head_dim: int | None = None

    def at_kernel_head_dim(self, head_dim: int) -> FlashAttention2:
        """The family as it runs the kernel compiled for `head_dim`."""
        view = copy.copy(self)
        view.fixed_kernel_head_dim = head_dim
        return view

    def declares_kernel_head_dim(self, cfg: ConfigArrays) -> bool:
        """Whether configurations of `cfg` run different kernels (and this is no view)."""
        return self.fixed_kernel_head_dim is None and "kernel_head_dim" in cfg

    def head_dim_column(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        """Every configuration's kernel head dim."""
        if self.fixed_kernel_head_dim is not None:
            return np.full(len(cfg), self.fixed_kernel_head_dim, dtype=np.int64)
        return kernel_head_dim_column(cfg, problem)

    def kernel_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return fa2_violations(problem, hardware)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        """The view's kernel, else the current release's (release.py): head dims 129-160 run
        the 192 kernel, 193-224 the 256 one."""
        d = self.fixed_kernel_head_dim or current_head_dim(problem)
        return d, d

    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        """The FlashAttention tile, single-buffered, and where two releases differ the
        kernel head dim."""
        return (
            *standard_tile_params(
                Param(
                    "num_stages",
                    (1,),
                    "K/V pipeline depth (FlashAttention-2 is single-buffered: 1)",
                )
            ),
            *kernel_head_dim_param(problem),
        )

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> tuple[Constraint, ...]:
        """The CUDA forward rules and, where kernel_head_dim is declared, the release's."""
        tile = self.tile_params(problem, hardware)
        declared = any(p.name == "kernel_head_dim" for p in tile)
        release = (CurrentRelease(),) if declared else ()
        return (*super().constraints(hardware, problem, options), *release)

    def resources(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
    ) -> CudaResources:
        """Each configuration's resources at its own kernel head dim."""
        if not self.declares_kernel_head_dim(cfg):
            return super().resources(hardware, problem, options, cfg)
        dims = kernel_head_dim_domain(problem)
        owners = [np.asarray(cfg["kernel_head_dim"] == d, dtype=np.int64) for d in dims]
        views = [
            self.at_kernel_head_dim(d).resources(hardware, problem, options, cfg) for d in dims
        ]
        return merge_rows(views, owners)

    def evaluate(self, ev: Evaluation) -> Perf:
        """Each configuration's cost at its own kernel head dim."""
        if not self.declares_kernel_head_dim(ev.cfg):
            return super().evaluate(ev)
        n = len(ev.cfg)
        parts = []
        for d in kernel_head_dim_domain(ev.problem):
            indices = np.flatnonzero(ev.cfg["kernel_head_dim"] == d)
            if len(indices):
                sub = sub_evaluation(ev, ev.problem, indices, n)
                parts.append((indices, self.at_kernel_head_dim(d).evaluate(sub)))
        return gather_perf(parts, n)

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        """The rules restated for one configuration, at its kernel head dim."""
        kernel = config.as_dict().get("kernel_head_dim")
        if self.fixed_kernel_head_dim is None and kernel is not None:
            return self.at_kernel_head_dim(kernel).check(hardware, problem, options, config)
        return super().check(hardware, problem, options, config)

    def alignment_ok(
        self, cfg: ConfigArrays, problem: AttentionProblem, device: CudaDevice
    ) -> BoolArray:
        rows_per_warp_ok = (cfg.block_m % (MMA_ROWS * cfg.num_warps)) == 0
        block_n_ok = (cfg.block_n % MMA_ROWS) == 0
        d = self.head_dim_column(cfg, problem)
        rows_per_pass = rows_per_copy_pass(cfg.num_warps, d, device.sm.warp_size_threads)
        copy_ok = (cfg.block_m % rows_per_pass == 0) & (cfg.block_n % rows_per_pass == 0)
        return np.asarray(rows_per_warp_ok & block_n_ok & copy_ok, dtype=np.bool_)

    def smem_bytes(self, cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
        d = dv = self.head_dim_column(cfg, problem)
        elem = problem.dtype.bytes
        return np.asarray((cfg.block_m * d + cfg.block_n * (d + dv)) * elem, dtype=np.int64)

    def q_in_registers(self) -> bool:
        return False

    def prefetch_iterations(self, cfg: ConfigArrays) -> IntArray:
        return np.ones(len(cfg), dtype=np.int64)
