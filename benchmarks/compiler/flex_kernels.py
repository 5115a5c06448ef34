"""A Triton kernel with the structure of FlexAttention's forward template (our own code, written
from the structure the reference describes: reference/flex_attention.md section 6), for checking
the flex family's shared-memory model against the compiler.

One program per (query block, batch x head). The Q tile [BLOCK_M, QK_HEAD_DIM] is loaded once,
and the fp32 accumulator and the row max and sum are kept in registers. The loop runs over the
K/V blocks that a block mask lists for the query block: `kv_num_blocks[q]` entries of
`kv_indices[q, :]`, each walked SPARSE_KV_BLOCK_SIZE / BLOCK_N iterations. Each iteration
loads a K^T tile [QK_HEAD_DIM, BLOCK_N] and a V tile [BLOCK_N, V_HEAD_DIM], applies a score
modification (a scale and a bias per key) and a mask (causal on the block's elements), and
updates the online softmax and O += P V. The head dims are the rounded ones, as the template
sizes its tiles.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl


@triton.jit
def flex_forward_kernel(
    Q,
    K,
    V,
    Out,
    KV_NUM_BLOCKS,
    KV_INDICES,
    sm_scale,
    stride_qh,
    stride_qm,
    stride_kh,
    stride_kn,
    stride_vh,
    stride_vn,
    stride_oh,
    stride_om,
    Q_LEN,
    KV_LEN,
    MAX_KV_BLOCKS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    QK_HEAD_DIM: tl.constexpr,
    V_HEAD_DIM: tl.constexpr,
    SPARSE_Q_BLOCK_SIZE: tl.constexpr,
    SPARSE_KV_BLOCK_SIZE: tl.constexpr,
    FLOAT32_PRECISION: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, QK_HEAD_DIM)
    offs_v = tl.arange(0, V_HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(Q + off_h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, V_HEAD_DIM], dtype=tl.float32)
    sparse_q = (start_m * BLOCK_M) // SPARSE_Q_BLOCK_SIZE
    listed = tl.load(KV_NUM_BLOCKS + sparse_q)
    row = KV_INDICES + sparse_q * MAX_KV_BLOCKS
    multiple: tl.constexpr = SPARSE_KV_BLOCK_SIZE // BLOCK_N
    for step in range(0, listed * multiple):
        block = tl.load(row + step // multiple)
        start_n = block * SPARSE_KV_BLOCK_SIZE + (step % multiple) * BLOCK_N
        cols = start_n + offs_n
        kt = tl.load(K + off_h * stride_kh + cols[None, :] * stride_kn + offs_d[:, None])
        qk = tl.dot(q, kt, input_precision=FLOAT32_PRECISION) * sm_scale
        qk = qk + (cols[None, :] % 7).to(tl.float32) * 0.01  # a score_mod: a bias per key
        qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))  # a mask_mod
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + off_h * stride_vh + cols[:, None] * stride_vn + offs_v[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=FLOAT32_PRECISION)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(
        Out + off_h * stride_oh + offs_m[:, None] * stride_om + offs_v[None, :],
        acc.to(Out.dtype.element_ty),
    )


INT_ARGS = (
    "stride_qh",
    "stride_qm",
    "stride_kh",
    "stride_kn",
    "stride_vh",
    "stride_vn",
    "stride_oh",
    "stride_om",
    "Q_LEN",
    "KV_LEN",
    "MAX_KV_BLOCKS",
)


def flex_source(
    dtype: str,
    qk_dim: int,
    v_dim: int,
    block_m: int,
    block_n: int,
    sparse: int = 128,
    precision: str = "ieee",
) -> tuple[Any, dict[str, str], dict[str, Any], dict[tuple[int, ...], list[Any]]]:
    """(function, signature, constexprs, attrs) for `triton.compile(ASTSource(...))`: every
    pointer and integer argument 16-divisible, as a launch on contiguous tensors of a shape
    with multiples of 16 specialises them (kernels.launch_attrs)."""
    fn = flex_forward_kernel
    ptr = "*" + dtype
    signature = {"Q": ptr, "K": ptr, "V": ptr, "Out": ptr}
    signature |= {"KV_NUM_BLOCKS": "*i32", "KV_INDICES": "*i32", "sm_scale": "fp32"}
    signature |= dict.fromkeys(INT_ARGS, "i32")
    constexprs = {
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "QK_HEAD_DIM": qk_dim,
        "V_HEAD_DIM": v_dim,
        "SPARSE_Q_BLOCK_SIZE": sparse,
        "SPARSE_KV_BLOCK_SIZE": sparse,
        "FLOAT32_PRECISION": precision,
    }
    signature |= dict.fromkeys(constexprs, "constexpr")
    divisible = [n for n, kind in signature.items() if kind.startswith("*") or kind == "i32"]
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    return fn, signature, constexprs, attrs
