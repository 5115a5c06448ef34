"""PyTorch FlexAttention's forward template (`flex_attention` in torch/_inductor/kernel/flex/
templates/flex_attention.py.jinja), registered as (`flex`, forward).

One program per (query block, batch, query head): BLOCK_M query rows with the Q tile
[BLOCK_M, QK_HEAD_DIM_ROUNDED] loaded once, the fp32 accumulator and the row max and sum in
registers, a loop over the K/V blocks the block mask lists for the query block, BLOCK_N keys per
iteration (K^T and V tiles streamed through shared memory `num_stages` deep by Triton's
pipeliner), score_mod on every element and mask_mod on the partial blocks' elements
(reference/flex_attention.md section 6). The loop is the FlashAttention forward loop
(`triton_compiler.flash_loops.forward_kernel`) compiled by Triton, so resources and the
pipelined round are `triton_cuda.forward.TritonForwardFamily`'s (docs/model.md 16.7-16.8).
What FlexAttention adds: tiles sized with the rounded head dims, the block mask's block size as
a legality rule, iterations that follow the block mask (`mask.py`), and the score/mask
modification's instructions per element. Formulas: docs/model.md section 20.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ...constraints import Constraint
from ...cost import Perf
from ...errors import FieldViolation
from ...hardware import CudaDevice, HardwareSpec
from ...problem import AttentionProblem, SolveOptions
from ...space import Config, ConfigArrays, FloatArray, Param
from ...split_kv import SplitKv
from ..cuda.constraints import cuda_resources
from ..cuda.forward import FlashForwardFamily, forward_perf, standard_tile_params
from ..cuda.resources import cuda_device
from ..cuda.timing import cuda_rates
from ..triton_compiler.flash_loops import forward_kernel
from ..triton_compiler.loops import AttentionKernel
from ..triton_cuda.forward import TritonForwardFamily
from .mask import block_mask_line, iterations_for, sparse_block_size
from .precision import (
    dots_on_fma,
    fma_flops_per_clk_per_sm,
    precision_params,
    requested_precision,
)
from .sparse import SparseBlocks, sparse_block_problems, with_block_mask_rules
from .template import FlexTemplateRules, flex_violations

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

FORWARD_TILES = ("block_m", "block_n")


class FlexAttention(FlexTemplateRules, TritonForwardFamily):
    """flex forward: the FlexAttention forward template."""

    name = "flex"
    summary = (
        "PyTorch FlexAttention's Triton templates (forward; block-mask sparsity, "
        "score/mask mods; kernel_options BLOCK_M, BLOCK_N, num_warps, num_stages)"
    )
    split_kv = SplitKv()  # FlexAttention has no split grid for prefill: never declared there
    alignment_rule = (
        "block_m and block_n multiples of 16; the warps each own at least one 16x8 MMA tile "
        "of the block_m x block_n score tile"
    )
    mask_tiles: ClassVar[tuple[str, ...]] = FORWARD_TILES

    # ---- the problem and the options -------------------------------------------------------
    def kernel_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return flex_violations(problem, hardware)

    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return (
            *standard_tile_params(
                Param(
                    "num_stages",
                    (1, 2, 3, 4, 5),
                    "software pipeline stages: K/V loads issued num_stages - 1 iterations ahead",
                )
            ),
            *precision_params(problem),
        )

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        return requested_precision(super().request_params(problem, hardware, options), options)

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> tuple[Constraint, ...]:
        return (SparseBlocks(self.mask_tiles), *super().constraints(hardware, problem, options))

    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        """The template's loop: the FlashAttention forward loop at the rounded head dims (FMA
        dots for fp32 at 'ieee')."""
        d, dv = self.kernel_head_dims(problem)
        elem = problem.dtype.bytes
        return forward_kernel(cfg.block_m, cfg.block_n, d, dv, elem, dots_on_fma(cfg))

    # ---- fp32 at 'ieee': the dots on the FMA units ------------------------------------------
    def matrix_flops_per_clk_per_sm(
        self, cfg: ConfigArrays, device: CudaDevice, dtype_bytes: int
    ) -> FloatArray:
        if dots_on_fma(cfg):
            return fma_flops_per_clk_per_sm(device, len(cfg))
        return super().matrix_flops_per_clk_per_sm(cfg, device, dtype_bytes)

    def pipe_overlap(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """FMA dots are no warpgroup MMA: the pipes overlap as on mma.sync."""
        if dots_on_fma(cfg):
            return FlashForwardFamily.pipe_overlap(self, cfg, device)
        return super().pipe_overlap(cfg, device)

    def tile_readers(self, cfg: ConfigArrays, device: CudaDevice) -> FloatArray:
        """FMA dots read their B operand from shared memory in every warp."""
        if dots_on_fma(cfg):
            return FlashForwardFamily.tile_readers(self, cfg, device)
        return super().tile_readers(cfg, device)

    def evaluate(self, ev: Evaluation) -> Perf:
        """The forward model with the block mask's iterations and the score_mod's cost."""
        device = cuda_device(ev.hardware)
        options = ev.options

        def forward(sub: Evaluation) -> Perf:
            n_kv = -(-sub.problem.seq_len_kv_eff // sub.cfg.block_n)
            iterations = iterations_for(sub.problem, options, sub.cfg, n_kv)
            res = cuda_resources(sub)
            mod_ops = options.score_mod_ops or 0.0
            return forward_perf(self, device, sub.problem, sub.cfg, res, iterations, mod_ops)

        _, dv = self.kernel_head_dims(ev.problem)
        return self.split_kv.perf(ev, forward, cuda_rates(device), dv)

    # ---- answer ------------------------------------------------------------------------------
    def reason_lines(self, table: CandidateTable, i: int) -> list[str]:
        return [*super().reason_lines(table, i), block_mask_line(table.problem, table.options)]

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        size = sparse_block_size(options)
        return [
            *sparse_block_problems(size, config.as_dict(), self.mask_tiles),
            *super().check(hardware, problem, options, config),
        ]

    def check_all(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """`check` of each configuration: the block mask's rules one by one, the CUDA rules
        once over all of them (`forward_checks`)."""
        if type(self).check is not FlexAttention.check:
            return super().check_all(hardware, problem, options, configs)
        rules = self.forward_checks(hardware, problem, options, configs)
        return with_block_mask_rules(options, configs, self.mask_tiles, rules)
