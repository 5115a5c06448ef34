"""PyTorch FlexAttention's backward template (`flex_attention_backward`, flex_backwards.py.jinja),
registered as (`flex`, backward).

Parameters are the template's: `block_m1` (query rows per iteration of the dK/dV role),
`block_n1` (keys a dK/dV program holds), `block_m2` (query rows a dQ program holds),
`block_n2` (keys per iteration of the dQ role), and the shared `num_warps` and `num_stages`
(both roles are one kernel). The template's static asserts: block_n1 % block_m1 == 0 and
block_m2 % block_n2 == 0; the block mask's BLOCK_SIZE a multiple of all four. The common
block_m / block_n (the wire's, --block-m / --block-n) are the dK/dV role's, block_m1 and
block_n1. The dQ role's tile is an inner choice (the one the model rates best for each dK/dV
tile, docs/model.md 12.5). Shared memory, registers and spills: the Triton compiler's rules
for the two roles' loops (`triton_cuda.backward.TritonBackwardFamily`; the kernel's figure is
the larger role's). Cost: `backward_cost.py`.
"""

from __future__ import annotations

from ...constraints import Constraint
from ...cost import Perf
from ...errors import FieldViolation
from ...family import pow2_range
from ...hardware import CudaDevice, HardwareSpec
from ...problem import AttentionProblem, SolveOptions
from ...space import Config, ConfigArrays, IntArray, Param
from ..cuda.resources import CudaResources
from ..triton_compiler.flash_loops import backward_kernel
from ..triton_compiler.loops import AttentionKernel
from ..triton_cuda.backward import TritonBackwardFamily
from .backward_cost import BACKWARD_TILES, flex_backward_perf
from .mask import sparse_block_size
from .precision import dots_on_fma, precision_params, requested_precision
from .sparse import SparseBlocks, sparse_block_problems, with_block_mask_rules
from .template import FlexTemplateRules, flex_violations

WARPS = pow2_range(2, 8)


class FlexAttentionBackward(FlexTemplateRules, TritonBackwardFamily):
    """flex backward: the template's dK/dV and dQ roles in one launch."""

    name = "flex"
    summary = (
        "PyTorch FlexAttention's Triton backward template (dK/dV and dQ roles in one launch; "
        "kernel_options BLOCK_M1, BLOCK_N1, BLOCK_M2, BLOCK_N2, num_warps, num_stages)"
    )
    alignment_rule = (
        "block_n1 a multiple of block_m1 and block_m2 a multiple of block_n2 (the template's "
        "static asserts); the warps each own at least one 16x8 MMA tile of both roles' score "
        "tiles"
    )
    streamed_words = "tile (Q/dO in the dK/dV role, K/V in the dQ role)"
    helper_words = "preprocess Delta = rowsum(O o dO)"
    inner_params = ("block_m2", "block_n2")
    inner_constraint = "dq_tile"
    inner_short = "dqtile"
    loop_tiles = BACKWARD_TILES
    other_device_kinds = ("rocm",)  # refused there naming the forward (`flex_violations`)

    def _family_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        return flex_violations(problem, hardware)

    def params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        resident = pow2_range(16, 256)
        step = pow2_range(16, 128)
        return (
            Param("block_m1", step, "query rows per iteration of the dK/dV role (BLOCK_M1)"),
            Param("block_n1", resident, "keys a dK/dV program holds (BLOCK_N1)"),
            Param("block_m2", resident, "query rows a dQ program holds (BLOCK_M2)"),
            Param("block_n2", step, "keys per iteration of the dQ role (BLOCK_N2)"),
            Param("num_warps", WARPS, "warps per program (both roles)"),
            Param(
                "num_stages",
                (1, 2, 3, 4, 5),
                "software pipeline stages of both roles' streamed tiles",
            ),
            *precision_params(problem),
        )

    def request_params(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> tuple[Param, ...]:
        return requested_precision(super().request_params(problem, hardware, options), options)

    def kernel(self, cfg: ConfigArrays, problem: AttentionProblem) -> AttentionKernel:
        """The two roles' loops at the rounded head dims (FMA dots for fp32 at 'ieee'), with Q and
        K loaded transposed, as the template loads qT and kT."""
        d, dv = self.kernel_head_dims(problem)
        m1, n1, m2, n2 = (cfg[name] for name in self.loop_tiles)
        elem = problem.dtype.bytes
        return backward_kernel(m1, n1, m2, n2, d, dv, elem, dots_on_fma(cfg), transposed_loads=True)

    def common_fields(self, cfg: ConfigArrays) -> dict[str, IntArray]:
        """The wire's block_m / block_n are the dK/dV role's (BLOCK_M1, BLOCK_N1)."""
        return {
            "block_m": cfg["block_m1"],
            "block_n": cfg["block_n1"],
            "num_warps": cfg["num_warps"],
            "num_stages": cfg["num_stages"],
        }

    def constraints(
        self, hardware: HardwareSpec, problem: AttentionProblem, options: SolveOptions
    ) -> tuple[Constraint, ...]:
        return (SparseBlocks(BACKWARD_TILES), *super().constraints(hardware, problem, options))

    def backward_cost(
        self,
        device: CudaDevice,
        problem: AttentionProblem,
        options: SolveOptions,
        cfg: ConfigArrays,
        res: CudaResources,
    ) -> Perf:
        """The template's cost with the block mask and score_mod of the request."""
        return flex_backward_perf(device, problem, options, cfg, res)

    def check(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        config: Config,
    ) -> list[str]:
        size = sparse_block_size(options)
        return [
            *sparse_block_problems(size, config.as_dict(), BACKWARD_TILES),
            *super().check(hardware, problem, options, config),
        ]

    def check_all(
        self,
        hardware: HardwareSpec,
        problem: AttentionProblem,
        options: SolveOptions,
        configs: list[Config],
    ) -> list[list[str]]:
        """`check` of each configuration: the block mask's rules one by one, the backward rules
        and the inner choice once over all of them (`backward_checks`)."""
        if type(self).check is not FlexAttentionBackward.check:
            return super().check_all(hardware, problem, options, configs)
        rules = self.backward_checks(hardware, problem, options, configs)
        return with_block_mask_rules(options, configs, BACKWARD_TILES, rules)
