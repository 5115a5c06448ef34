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
sizes its tiles. Both dots take `input_precision=FLOAT32_PRECISION` ('ieee' or 'tf32', read
only for fp32 inputs), as the template's do.

`flex_backward_kernel` has the backward template's structure (reference section 6): one launch
whose programs play one of two roles by their index. A dK/dV program (pid below the K/V block
count) holds K [BLOCK_N1, QK] and V [BLOCK_N1, V] and the fp32 dK and dV, and walks, for each
query head of its KV head's GQA group, the query blocks that the block mask's transposed
indices list, BLOCK_M1 rows an iteration: Q^T [QK, BLOCK_M1] and dO [BLOCK_M1, V] loaded, with
the log-sum-exp and Delta rows; S^T = K Q^T, P^T, dV += P^T dO, dP^T = V dO^T, dS^T,
dK += dS^T Q. A dQ program holds Q [BLOCK_M2, QK], dO [BLOCK_M2, V], LSE, Delta and the fp32
dQ, and walks the listed K/V blocks BLOCK_N2 keys an iteration: K^T [QK, BLOCK_N2] and
V^T [V, BLOCK_N2] loaded; S = Q K^T, P, dP = dO V^T, dS, dQ += dS K. No atomics.

`flex_decode_kernel` has FlexDecoding's (reference section 4): the grid is (packed query
blocks, batch x KV heads, SPLIT_KV); the GQA group's query heads and the query positions are
packed into BLOCK_M rows (row r: head r // Q_LEN of the group, position r % Q_LEN), Q
[BLOCK_M, QK] loaded once through gathered pointers, and the program walks the listed K/V
blocks that fall in its split, BLOCK_N keys an iteration, writing its fp32 partial output and
row max and sum for the reduction that combines the splits.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl


@triton.jit
def _attend(q, kt, v_ptrs, cols, q_rows, diag_offset, acc, m_i, l_i, sm_scale,
            FLOAT32_PRECISION: tl.constexpr):  # fmt: skip
    """One K/V iteration of the forward and decode kernels: S = Q K^T, a score_mod (a bias per
    key), a mask_mod (key <= query row + diag_offset), the online softmax, and O += P V with V
    loaded after S, as the templates do."""
    qk = tl.dot(q, kt, input_precision=FLOAT32_PRECISION) * sm_scale
    qk = qk + (cols[None, :] % 7).to(tl.float32) * 0.01
    qk = tl.where(cols[None, :] <= q_rows[:, None] + diag_offset, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(qk - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = tl.load(v_ptrs)
    acc = tl.dot(p.to(v.dtype), v, acc, input_precision=FLOAT32_PRECISION)
    return acc, m_new, l_i


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
        v_ptrs = V + off_h * stride_vh + cols[:, None] * stride_vn + offs_v[None, :]
        acc, m_i, l_i = _attend(
            q, kt, v_ptrs, cols, offs_m, 0, acc, m_i, l_i, sm_scale, FLOAT32_PRECISION
        )
    acc = acc / l_i[:, None]
    tl.store(
        Out + off_h * stride_oh + offs_m[:, None] * stride_om + offs_v[None, :],
        acc.to(Out.dtype.element_ty),
    )


@triton.jit
def _dkdv_role(
    Q, K, V, DO, DK, DV, LSE, DELTA, Q_NUM_BLOCKS, Q_INDICES, sm_scale, stride_qh, stride_qm,
    stride_kh, stride_kn, stride_vh, stride_vn, Q_LEN, GQA_SHARED_HEADS, MAX_Q_BLOCKS, pid,
    off_hkv, offs_d, offs_v,
    BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, QK_HEAD_DIM: tl.constexpr,
    V_HEAD_DIM: tl.constexpr, SPARSE_Q_BLOCK_SIZE: tl.constexpr,
    SPARSE_KV_BLOCK_SIZE: tl.constexpr, FLOAT32_PRECISION: tl.constexpr,
):  # fmt: skip
    """K and V of BLOCK_N1 keys held; the listed query blocks of every head of the group
    streamed BLOCK_M1 rows an iteration."""
    start_n = pid * BLOCK_N1
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    offs_m = tl.arange(0, BLOCK_M1)
    k = tl.load(K + off_hkv * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :])
    v = tl.load(V + off_hkv * stride_vh + offs_n[:, None] * stride_vn + offs_v[None, :])
    dk = tl.zeros([BLOCK_N1, QK_HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N1, V_HEAD_DIM], dtype=tl.float32)
    sparse_kv = start_n // SPARSE_KV_BLOCK_SIZE
    listed = tl.load(Q_NUM_BLOCKS + sparse_kv)
    row = Q_INDICES + sparse_kv * MAX_Q_BLOCKS
    multiple: tl.constexpr = SPARSE_Q_BLOCK_SIZE // BLOCK_M1
    for g in range(0, GQA_SHARED_HEADS):
        off_hq = off_hkv * GQA_SHARED_HEADS + g
        for step in range(0, listed * multiple):
            block = tl.load(row + step // multiple)
            rows = block * SPARSE_Q_BLOCK_SIZE + (step % multiple) * BLOCK_M1 + offs_m
            q_t = tl.load(Q + off_hq * stride_qh + rows[None, :] * stride_qm + offs_d[:, None])
            do = tl.load(DO + off_hq * stride_qh + rows[:, None] * stride_qm + offs_v[None, :])
            lse = tl.load(LSE + off_hq * Q_LEN + rows)
            delta = tl.load(DELTA + off_hq * Q_LEN + rows)
            qk_t = tl.dot(k, q_t, input_precision=FLOAT32_PRECISION) * sm_scale
            qk_t = qk_t + (offs_n[:, None] % 7).to(tl.float32) * 0.01  # a score_mod
            p_t = tl.math.exp2(qk_t - lse[None, :])
            p_t = tl.where(rows[None, :] >= offs_n[:, None], p_t, 0.0)  # a mask_mod
            dv += tl.dot(p_t.to(do.dtype), do, input_precision=FLOAT32_PRECISION)
            dp_t = tl.dot(v, tl.trans(do), input_precision=FLOAT32_PRECISION)
            ds_t = p_t * (dp_t - delta[None, :])
            dk += tl.dot(ds_t.to(q_t.dtype), tl.trans(q_t), input_precision=FLOAT32_PRECISION)
    kv_rows = off_hkv * stride_kh + offs_n[:, None] * stride_kn
    tl.store(DK + kv_rows + offs_d[None, :], dk.to(DK.dtype.element_ty))
    tl.store(DV + kv_rows + offs_v[None, :], dv.to(DV.dtype.element_ty))


@triton.jit
def _dq_role(
    Q, K, V, DO, DQ, LSE, DELTA, KV_NUM_BLOCKS, KV_INDICES, sm_scale, stride_qh, stride_qm,
    stride_kh, stride_kn, stride_vh, stride_vn, Q_LEN, GQA_SHARED_HEADS, MAX_KV_BLOCKS,
    q_block, off_hkv, offs_d, offs_v,
    BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr, QK_HEAD_DIM: tl.constexpr,
    SPARSE_Q_BLOCK_SIZE: tl.constexpr, SPARSE_KV_BLOCK_SIZE: tl.constexpr,
    FLOAT32_PRECISION: tl.constexpr,
):  # fmt: skip
    """Q, dO, LSE and Delta of BLOCK_M2 rows of one query head held; the listed K/V blocks
    streamed BLOCK_N2 keys an iteration."""
    off_hq = off_hkv * GQA_SHARED_HEADS + q_block % GQA_SHARED_HEADS
    start_m = (q_block // GQA_SHARED_HEADS) * BLOCK_M2
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    offs_n = tl.arange(0, BLOCK_N2)
    q_rows = off_hq * stride_qh + offs_m[:, None] * stride_qm
    q = tl.load(Q + q_rows + offs_d[None, :])
    do = tl.load(DO + q_rows + offs_v[None, :])
    lse = tl.load(LSE + off_hq * Q_LEN + offs_m)
    delta = tl.load(DELTA + off_hq * Q_LEN + offs_m)
    dq = tl.zeros([BLOCK_M2, QK_HEAD_DIM], dtype=tl.float32)
    sparse_q = start_m // SPARSE_Q_BLOCK_SIZE
    listed = tl.load(KV_NUM_BLOCKS + sparse_q)
    row = KV_INDICES + sparse_q * MAX_KV_BLOCKS
    multiple: tl.constexpr = SPARSE_KV_BLOCK_SIZE // BLOCK_N2
    for step in range(0, listed * multiple):
        block = tl.load(row + step // multiple)
        cols = block * SPARSE_KV_BLOCK_SIZE + (step % multiple) * BLOCK_N2 + offs_n
        k_t = tl.load(K + off_hkv * stride_kh + cols[None, :] * stride_kn + offs_d[:, None])
        v_t = tl.load(V + off_hkv * stride_vh + cols[None, :] * stride_vn + offs_v[:, None])
        qk = tl.dot(q, k_t, input_precision=FLOAT32_PRECISION) * sm_scale
        qk = qk + (cols[None, :] % 7).to(tl.float32) * 0.01  # a score_mod
        p = tl.math.exp2(qk - lse[:, None])
        p = tl.where(offs_m[:, None] >= cols[None, :], p, 0.0)  # a mask_mod
        dp = tl.dot(do, v_t, input_precision=FLOAT32_PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k_t.dtype), tl.trans(k_t), input_precision=FLOAT32_PRECISION)
    tl.store(DQ + q_rows + offs_d[None, :], dq.to(DQ.dtype.element_ty))


@triton.jit
def flex_backward_kernel(
    Q, K, V, DO, DQ, DK, DV, LSE, DELTA, KV_NUM_BLOCKS, KV_INDICES, Q_NUM_BLOCKS, Q_INDICES,
    sm_scale, stride_qh, stride_qm, stride_kh, stride_kn, stride_vh, stride_vn, Q_LEN, KV_LEN,
    GQA_SHARED_HEADS, MAX_KV_BLOCKS, MAX_Q_BLOCKS, NUM_KV_PROGRAMS,
    BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr,
    BLOCK_N2: tl.constexpr, QK_HEAD_DIM: tl.constexpr, V_HEAD_DIM: tl.constexpr,
    SPARSE_Q_BLOCK_SIZE: tl.constexpr, SPARSE_KV_BLOCK_SIZE: tl.constexpr,
    FLOAT32_PRECISION: tl.constexpr,
):  # fmt: skip
    """One launch, two roles: programs below NUM_KV_PROGRAMS the dK/dV role, the rest dQ."""
    pid = tl.program_id(0)
    off_hkv = tl.program_id(1)
    offs_d = tl.arange(0, QK_HEAD_DIM)
    offs_v = tl.arange(0, V_HEAD_DIM)
    if pid < NUM_KV_PROGRAMS:
        _dkdv_role(
            Q, K, V, DO, DK, DV, LSE, DELTA, Q_NUM_BLOCKS, Q_INDICES, sm_scale, stride_qh,
            stride_qm, stride_kh, stride_kn, stride_vh, stride_vn, Q_LEN, GQA_SHARED_HEADS,
            MAX_Q_BLOCKS, pid, off_hkv, offs_d, offs_v, BLOCK_M1, BLOCK_N1, QK_HEAD_DIM,
            V_HEAD_DIM, SPARSE_Q_BLOCK_SIZE, SPARSE_KV_BLOCK_SIZE, FLOAT32_PRECISION,
        )  # fmt: skip
    else:
        _dq_role(
            Q, K, V, DO, DQ, LSE, DELTA, KV_NUM_BLOCKS, KV_INDICES, sm_scale, stride_qh,
            stride_qm, stride_kh, stride_kn, stride_vh, stride_vn, Q_LEN, GQA_SHARED_HEADS,
            MAX_KV_BLOCKS, pid - NUM_KV_PROGRAMS, off_hkv, offs_d, offs_v, BLOCK_M2, BLOCK_N2,
            QK_HEAD_DIM, SPARSE_Q_BLOCK_SIZE, SPARSE_KV_BLOCK_SIZE, FLOAT32_PRECISION,
        )  # fmt: skip


@triton.jit
def flex_decode_kernel(
    Q,
    K,
    V,
    OUT_PARTIAL,
    M_PARTIAL,
    L_PARTIAL,
    KV_NUM_BLOCKS,
    KV_INDICES,
    sm_scale,
    stride_qh,
    stride_qm,
    stride_kh,
    stride_kn,
    stride_vh,
    stride_vn,
    stride_os,
    Q_LEN,
    KV_LEN,
    GQA_SHARED_HEADS,
    MAX_KV_BLOCKS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_KV: tl.constexpr,
    QK_HEAD_DIM: tl.constexpr,
    V_HEAD_DIM: tl.constexpr,
    SPARSE_KV_BLOCK_SIZE: tl.constexpr,
    FLOAT32_PRECISION: tl.constexpr,
):
    off_hkv = tl.program_id(1)
    split = tl.program_id(2)
    packed = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = packed < Q_LEN * GQA_SHARED_HEADS
    off_hq = off_hkv * GQA_SHARED_HEADS + packed // Q_LEN  # the group's heads packed into rows
    q_pos = packed % Q_LEN
    offs_d = tl.arange(0, QK_HEAD_DIM)
    offs_v = tl.arange(0, V_HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q_ptrs = Q + off_hq[:, None] * stride_qh + q_pos[:, None] * stride_qm + offs_d[None, :]
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, V_HEAD_DIM], dtype=tl.float32)
    # the split's contiguous share of the listed blocks' iterations (TILE_KV / BLOCK_N each)
    listed = tl.load(KV_NUM_BLOCKS)
    multiple: tl.constexpr = SPARSE_KV_BLOCK_SIZE // BLOCK_N
    per_split = tl.cdiv(listed * multiple, SPLIT_KV)
    first = split * per_split
    last = tl.minimum(first + per_split, listed * multiple)
    for step in range(first, last):
        block = tl.load(KV_INDICES + step // multiple)
        cols = block * SPARSE_KV_BLOCK_SIZE + (step % multiple) * BLOCK_N + offs_n
        kt = tl.load(K + off_hkv * stride_kh + cols[None, :] * stride_kn + offs_d[:, None])
        v_ptrs = V + off_hkv * stride_vh + cols[:, None] * stride_vn + offs_v[None, :]
        acc, m_i, l_i = _attend(
            q, kt, v_ptrs, cols, q_pos, KV_LEN - Q_LEN, acc, m_i, l_i, sm_scale, FLOAT32_PRECISION
        )
    out_rows = split * stride_os + (off_hkv * BLOCK_M + packed) * V_HEAD_DIM
    tl.store(OUT_PARTIAL + out_rows[:, None] + offs_v[None, :], acc, mask=row_ok[:, None])
    stats = split * stride_os + off_hkv * BLOCK_M + packed
    tl.store(M_PARTIAL + stats, m_i, mask=row_ok)
    tl.store(L_PARTIAL + stats, l_i, mask=row_ok)


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


Source = tuple[Any, dict[str, str], dict[str, Any], dict[tuple[int, ...], list[Any]]]


def flex_source(
    dtype: str,
    qk_dim: int,
    v_dim: int,
    block_m: int,
    block_n: int,
    sparse: int = 128,
    precision: str = "ieee",
) -> Source:
    """(function, signature, constexprs, attrs) for `triton.compile(ASTSource(...))` of the
    forward kernel (`_compile_source`)."""
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
    return _compile_source(fn, signature, constexprs)


def _compile_source(
    fn: Any, signature: dict[str, str], constexprs: dict[str, Any], unaligned: tuple[str, ...] = ()
) -> Source:
    """The signature with the constexprs, and every pointer and integer argument 16-divisible
    (but those `unaligned`: a GQA group of 1 to 8 heads, decode's few queries) as a launch on
    contiguous tensors of a shape with multiples of 16 specialises them
    (kernels.launch_attrs)."""
    signature = signature | dict.fromkeys(constexprs, "constexpr")
    divisible = [
        n
        for n, kind in signature.items()
        if (kind.startswith("*") or kind == "i32") and n not in unaligned
    ]
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in divisible}
    return fn, signature, constexprs, attrs


BACKWARD_INT_ARGS = ("stride_qh", "stride_qm", "stride_kh", "stride_kn", "stride_vh",
                     "stride_vn", "Q_LEN", "KV_LEN", "GQA_SHARED_HEADS", "MAX_KV_BLOCKS",
                     "MAX_Q_BLOCKS", "NUM_KV_PROGRAMS")  # fmt: skip
DECODE_INT_ARGS = ("stride_qh", "stride_qm", "stride_kh", "stride_kn", "stride_vh", "stride_vn",
                   "stride_os", "Q_LEN", "KV_LEN", "GQA_SHARED_HEADS", "MAX_KV_BLOCKS")  # fmt: skip


def flex_backward_source(
    dtype: str,
    qk_dim: int,
    v_dim: int,
    tiles: tuple[int, int, int, int],
    sparse: int = 128,
    precision: str = "ieee",
) -> Source:
    """`flex_source` for the backward kernel; `tiles` is (BLOCK_M1, BLOCK_N1, BLOCK_M2,
    BLOCK_N2)."""
    ptr = "*" + dtype
    signature = dict.fromkeys(("Q", "K", "V", "DO", "DQ", "DK", "DV"), ptr)
    signature |= {"LSE": "*fp32", "DELTA": "*fp32"}
    signature |= dict.fromkeys(("KV_NUM_BLOCKS", "KV_INDICES", "Q_NUM_BLOCKS", "Q_INDICES"), "*i32")
    signature |= {"sm_scale": "fp32"} | dict.fromkeys(BACKWARD_INT_ARGS, "i32")
    m1, n1, m2, n2 = tiles
    constexprs = {
        "BLOCK_M1": m1,
        "BLOCK_N1": n1,
        "BLOCK_M2": m2,
        "BLOCK_N2": n2,
        "QK_HEAD_DIM": qk_dim,
        "V_HEAD_DIM": v_dim,
        "SPARSE_Q_BLOCK_SIZE": sparse,
        "SPARSE_KV_BLOCK_SIZE": sparse,
        "FLOAT32_PRECISION": precision,
    }
    return _compile_source(flex_backward_kernel, signature, constexprs, ("GQA_SHARED_HEADS",))


def flex_decode_source(
    dtype: str,
    qk_dim: int,
    v_dim: int,
    block_m: int,
    block_n: int,
    split_kv: int,
    sparse: int = 128,
    precision: str = "ieee",
) -> Source:
    """`flex_source` for the decode kernel (BLOCK_M: the packed rows, as the lowering sets
    it)."""
    ptr = "*" + dtype
    signature = {"Q": ptr, "K": ptr, "V": ptr}
    signature |= dict.fromkeys(("OUT_PARTIAL", "M_PARTIAL", "L_PARTIAL"), "*fp32")
    signature |= {"KV_NUM_BLOCKS": "*i32", "KV_INDICES": "*i32", "sm_scale": "fp32"}
    signature |= dict.fromkeys(DECODE_INT_ARGS, "i32")
    constexprs = {
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "SPLIT_KV": split_kv,
        "QK_HEAD_DIM": qk_dim,
        "V_HEAD_DIM": v_dim,
        "SPARSE_KV_BLOCK_SIZE": sparse,
        "FLOAT32_PRECISION": precision,
    }
    unaligned = ("GQA_SHARED_HEADS", "Q_LEN")
    return _compile_source(flex_decode_kernel, signature, constexprs, unaligned)
