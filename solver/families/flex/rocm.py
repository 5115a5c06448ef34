"""FlexAttention's forward template on an AMD Instinct (rocm) device (`FlexRocm`), and the
(`flex`, forward) registration that hands each device to its kernel (`FlexForward`: the CUDA
template model `FlexAttention` on CUDA devices, this one on rocm devices).

On ROCm the template is the same FlashAttention forward loop at the rounded head dims, compiled
by Triton's AMD backend: FlexAttention's ROCm configurations carry `waves_per_eu`,
`matrix_instr_nonkdim` and `kpack` into the kernel options (shared/reference/blackwell_amd.md
3.6, flex_attention.md), so the resources and the cost are the shared Triton-on-ROCm model's
(`families/triton_rocm`, docs/model.md 19.10) with what FlexAttention adds (docs/model.md 20):
the block mask's block size as a legality rule, iterations that follow the block mask
(`mask.py`), and the score/mask modification's instructions per element on the VALU.
Backward and decode have no ROCm model (their registrations stay CUDA's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from ...constraints import Constraint
from ...dispatch import ByDevice
from ...errors import FieldViolation
from ...family import KernelFamily
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, DType, SolveOptions
from ...space import Config, ConfigArrays
from ..rocm.schedule import MaskedIterations
from ..triton_compiler.flash_loops import forward_kernel
from ..triton_compiler.loops import AttentionKernel
from ..triton_rocm.forward import TritonRocmForward
from .forward import FORWARD_TILES, FlexAttention
from .mask import block_mask_line, iterations_for, sparse_block_size
from .sparse import SparseBlocks, sparse_block_problems, with_block_mask_rules
from .template import MAX_HEAD_DIM, MIN_HEAD_DIM, flex_head_dims, mask_option_violations

if TYPE_CHECKING:
    from ...candidates import CandidateTable, Evaluation

# The parameter only the ROCm kernel declares: it tells a configuration's kernel apart.
ROCM_ONLY_PARAMETER = "waves_per_eu"


class FlexRocm(TritonRocmForward):
    """flex forward on ROCm: the forward template with Triton's AMD knobs."""

    name = "flex"
    summary = (
        "PyTorch FlexAttention's forward template on ROCm (block-mask sparsity, score/mask "
        "mods; kernel_options BLOCK_M, BLOCK_N, num_warps, num_stages, waves_per_eu, "
        "matrix_instr_nonkdim, kpack)"
    )
    mask_tiles: ClassVar[tuple[str, ...]] = FORWARD_TILES
    input_dtypes: ClassVar[tuple[DType, ...]] = (DType.FP16, DType.BF16)

    def fp32_refusal(self) -> FieldViolation:
        """fp32 on ROCm: the template's float32 dots (FMA at 'ieee', xf32 MFMA at 'tf32' on
        gfx942 only) are not modelled on AMD (docs/model.md 19.10)."""
        return FieldViolation(
            "dtype",
            "flex on rocm devices takes fp16, bf16 (allowed: fp16, bf16); its fp32 dots are "
            "modelled on CUDA devices only",
        )

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        """The template's rules on ROCm: fp16/bf16, head dims 16..256, no dropout."""
        out = []
        if problem.dtype is DType.FP8:
            out.append(
                FieldViolation("dtype", "FlexAttention has no fp8 path; allowed: fp16, bf16")
            )
        for field, value in (
            ("head_dim", problem.head_dim),
            ("head_dim_v", problem.head_dim_v_eff),
        ):
            if not MIN_HEAD_DIM <= value <= MAX_HEAD_DIM:
                out.append(
                    FieldViolation(
                        field,
                        f"flex takes {field} from {MIN_HEAD_DIM} to {MAX_HEAD_DIM}; got {value}",
                    )
                )
        if problem.dropout > 0:
            out.append(FieldViolation("dropout", "FlexAttention has no dropout; set dropout 0"))
        return out

    def option_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> list[FieldViolation]:
        return mask_option_violations(options)

    def kernel_head_dims(self, problem: AttentionProblem) -> tuple[int, int]:
        return flex_head_dims(problem)

    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        """The template's loop: the FlashAttention forward loop at the rounded head dims."""
        d, dv = self.kernel_head_dims(problem)
        return forward_kernel(cfg["block_m"], cfg["block_n"], d, dv, problem.dtype.bytes)

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> Sequence[Constraint]:
        return (SparseBlocks(self.mask_tiles), *super().constraints(hardware, problem, options))

    def masked_iterations(self, ev: Evaluation) -> MaskedIterations | None:
        n_kv = -(-ev.problem.seq_len_kv_eff // ev.cfg["block_n"])
        found = iterations_for(ev.problem, ev.options, ev.cfg, n_kv)
        if found is None:
            return None
        return MaskedIterations(
            found.total, found.diagonal, found.longest, found.imbalanced, found.partial
        )

    def score_ops(self, ev: Evaluation) -> float:
        return float(ev.options.score_mod_ops or 0.0)

    def answer_notes(self, table: CandidateTable, ranked: list[int]) -> list[str]:
        """The shared notes, and what kernel_options can pin on ROCm."""
        return [
            *super().answer_notes(table, ranked),
            "on ROCm FlexAttention's lowering sets waves_per_eu, matrix_instr_nonkdim and kpack "
            "from its own heuristic config, over any kernel_options value "
            "(shared/reference/flex_attention.md 3): BLOCK_M, BLOCK_N, num_warps and "
            "num_stages can be pinned (--format flex prints those), the three knobs are the "
            "model's choice for the kernel as compiled",
        ]

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
        rules = super().check_all(hardware, problem, options, configs)
        return with_block_mask_rules(options, configs, self.mask_tiles, rules)


class FlexForward(ByDevice):
    """flex forward: the template's CUDA model (`FlexAttention`) on CUDA devices, `FlexRocm`
    on rocm devices."""

    name = "flex"
    device_kind = "cuda"
    other_device_kinds = ("rocm",)
    summary = FlexAttention.summary
    split_kv = FlexAttention.split_kv
    cuda = FlexAttention()
    rocm = FlexRocm()

    def on(self, hardware: HardwareSpec) -> KernelFamily:
        return self.rocm if hardware.arch == self.rocm.device_kind else self.cuda

    def of(self, cfg: ConfigArrays) -> KernelFamily:
        return self.rocm if ROCM_ONLY_PARAMETER in cfg else self.cuda

    def _device_violations(self, hardware: HardwareSpec) -> list[FieldViolation]:
        return []
