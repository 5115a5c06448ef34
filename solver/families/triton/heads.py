"""The head dims the triton family's kernels compute with: `tl.arange` needs power-of-two
extents, so each head dim is padded to a power of two (at least 16)."""

from __future__ import annotations

from ...problem import AttentionProblem


def _next_pow2(value: int) -> int:
    return 1 << max(4, (value - 1).bit_length())


def triton_kernel_head_dims(problem: AttentionProblem) -> tuple[int, int]:
    """`tl.arange` needs power-of-two extents: the head dims padded to powers of two."""
    return _next_pow2(problem.head_dim), _next_pow2(problem.head_dim_v_eff)
