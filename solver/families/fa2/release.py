"""Which of FlashAttention-2's instantiations runs a head dim, by release (forward, decode and
backward alike).

FlashAttention-2 compiles one kernel per head dim it instantiates and rounds a problem's head
dim up to the next one (`HEADDIM_SWITCH`, static_switch.h). Releases 2.0.0-2.6.1 instantiate
every multiple of 32 up to 256; 2.6.2 stopped instantiating 224 (commit 751c762c, "Don't
specialize for hdim 224 to speed up compilation": head dims 193-224 run the 256 kernel) and
2.8.0 stopped instantiating 160 (commit ce212720, "Don't specialize for hdim 160 anymore":
129-160 run the 192 kernel). A head dim of 129-160 or 193-224 therefore runs one of two
kernels, with different tiles (the 256 kernel's sm86 tile does not even tile a head dim of
224), and the fa2 backward declares which as `kernel_head_dim`. The current release's kernel is
the one the model runs; a pin (`--param kernel_head_dim=160`) asks for an earlier release's. The
forward and decode registrations run the current release's kernel (its head dim is their
`kernel_head_dims`); they declare no kernel_head_dim (docs/model.md 12.11).
Sources: Dao-AILab/flash-attention `csrc/flash_attn/src/static_switch.h` and
`csrc/flash_attn/flash_api.cpp` at v2.6.1, v2.6.2, v2.7.4 and v2.8.3 (docs/model.md 12.2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...constraints import Constraint, ConstraintKind, Rule
from ...problem import AttentionProblem, SolveOptions
from ...space import ConfigArrays, IntArray, Param

if TYPE_CHECKING:
    from ...candidates import Evaluation

# Head dims FlashAttention-2 has compiled kernels for in some release; a problem's head_dim is
# padded up to one.
FA2_HEAD_DIMS = (32, 64, 96, 128, 160, 192, 224, 256)
# A head dim's instantiation in releases up to the one named, and the kernel that replaced it.
REPLACED_HEAD_DIMS = {160: (192, "2.7.4"), 224: (256, "2.6.1")}


def fa2_kernel_head_dims(problem: AttentionProblem) -> tuple[int, int]:
    """The head dims of the first instantiation that runs the problem in some release:
    head_dim padded up to one of FA2_HEAD_DIMS (Q/K and V alike); the current release's is
    `current_head_dim`."""
    d = next((h for h in FA2_HEAD_DIMS if h >= problem.head_dim), FA2_HEAD_DIMS[-1])
    return d, d


def kernel_head_dim_domain(problem: AttentionProblem) -> tuple[int, ...]:
    """The instantiations that run the problem's head dim in some release: one, or the
    earlier releases' and the current one's."""
    d = fa2_kernel_head_dims(problem)[0]
    later = REPLACED_HEAD_DIMS.get(d)
    return (d, later[0]) if later else (d,)


def current_head_dim(problem: AttentionProblem) -> int:
    """The head dim the current release's kernel for the problem is compiled for."""
    return kernel_head_dim_domain(problem)[-1]


def kernel_head_dim_param(problem: AttentionProblem) -> tuple[Param, ...]:
    """`kernel_head_dim`, declared where two releases run different kernels."""
    domain = kernel_head_dim_domain(problem)
    if len(domain) == 1:
        return ()
    old, new = domain
    last = REPLACED_HEAD_DIMS[old][1]
    return (
        Param(
            "kernel_head_dim",
            domain,
            f"the head dim of the FA2 kernel that runs: {old} (releases up to {last}) or "
            f"{new} (later ones; the model's choice unless pinned)",
        ),
    )


def kernel_head_dim_column(cfg: ConfigArrays, problem: AttentionProblem) -> IntArray:
    """Every configuration's kernel head dim: declared, or the problem's one instantiation."""
    if "kernel_head_dim" in cfg:
        return cfg["kernel_head_dim"]
    return np.full(len(cfg), current_head_dim(problem), dtype=np.int64)


def earlier_release(
    cfg: ConfigArrays, problem: AttentionProblem, options: SolveOptions
) -> IntArray:
    """1 for a configuration of an earlier release's kernel that no pin asks for."""
    if "kernel_head_dim" in options.parameter_pins or "kernel_head_dim" not in cfg:
        return np.zeros(len(cfg), dtype=np.int64)
    return np.asarray(cfg["kernel_head_dim"] != current_head_dim(problem), dtype=np.int64)


class CurrentRelease(Constraint):
    """Legality: the kernel head dim is the current release's, unless pinned."""

    name = "fa2_release"
    rule = (
        "kernel_head_dim is the one FlashAttention-2's current release compiles, unless "
        "pinned (an earlier release's kernel)"
    )
    short = "release"
    kind = ConstraintKind.LEGALITY

    def rules(self, ev: Evaluation) -> list[Rule]:
        return [Rule("earlier_release", earlier_release(ev.cfg, ev.problem, ev.options), "<=", 0)]

    def detail(self, ev: Evaluation, i: int) -> str:
        kernel = int(kernel_head_dim_column(ev.cfg, ev.problem)[i])
        if kernel == current_head_dim(ev.problem):
            return f"{ev.label(i)} runs the current release's kernel (head dim {kernel})"
        return (
            f"{ev.label(i)} runs an earlier release's kernel "
            f"(pin --param kernel_head_dim={kernel} to rank it)"
        )
