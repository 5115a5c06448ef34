"""A FlashAttention backward kernel in Triton, shaped like the triton family's backward model
(docs/model.md section 12; `solver/families/triton_backward.py`), for the compiler harness.

One program runs two loops, one after the other:

- the dK/dV loop holds one block of BLOCK_N1 keys (K and V loaded once, resident as dot
  operands) and walks the query blocks that see them BLOCK_M1 rows at a time (Q, dO, the
  log-sum-exp and D = rowsum(O o dO) streamed, so the software pipeliner buffers them
  `num_stages` deep), recomputing P^T and dP^T and accumulating dV += P^T dO, dK += dS^T Q;
- the dQ loop holds one block of BLOCK_M2 queries (Q, dO, LSE and D loaded once) and walks the
  key blocks they see BLOCK_N2 keys at a time (K and V streamed), recomputing P and dP and
  accumulating dQ += dS K.

Program p runs key block p's dK/dV loop and query block p's dQ loop; the grid is the larger of
the two block counts, so the two tile pairs are independent, as the model assumes. No atomics.
The causal mask is bottom-right aligned (query row i sees keys j <= i + seq_kv - seq_q); each
loop is split, as the forward kernel's, into the blocks every row sees in full (no score mask)
and the blocks on the diagonal or past the end (masked). The diagonal uses the same tile as
the rest (the tutorial's half-size diagonal steps are not reproduced). Head dims are padded to
a power of two >= 16 (PAD_D masks the padding); heads = kv_heads (no GQA reduction).

Inputs: LSE2 is the forward's log-sum-exp in log2 units (lse * log2 e), D the row sums, both
float32 of shape (batch * heads, seq_q); qk_scale = sm_scale * log2 e. The harness only
compiles this kernel (triton.compile); it has no host-side launcher.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _dkdv_step(
    dk,
    dv,
    k,
    v,
    q_base,
    do_base,
    lse_base,
    delta_base,
    offs_m,
    offs_n,
    offs_d,
    start_m,
    stride_qm,
    seq_q,
    diag_offset,
    qk_scale,
    d_ok,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    PAD_D: tl.constexpr,
):
    """One query block of the dK/dV loop: P^T = exp2(K Q^T - LSE), dV += P^T dO,
    dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q."""
    rows = start_m + offs_m
    row_ok = rows < seq_q
    tile_mask = row_ok[:, None]
    if PAD_D:
        tile_mask = tile_mask & d_ok[None, :]
    q = tl.load(q_base + rows[:, None] * stride_qm + offs_d[None, :], mask=tile_mask, other=0.0)
    do = tl.load(do_base + rows[:, None] * stride_qm + offs_d[None, :], mask=tile_mask, other=0.0)
    # A row past the end gets LSE = +inf, so its P^T column is exp2(-inf) = 0.
    lse = tl.load(lse_base + rows, mask=row_ok, other=float("inf"))
    delta = tl.load(delta_base + rows, mask=row_ok, other=0.0)
    p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
    if MASKED and CAUSAL:
        visible = offs_n[:, None] <= rows[None, :] + diag_offset
        p_t = tl.where(visible, p_t, 0.0)
    dv += tl.dot(p_t.to(do.dtype), do)
    dp_t = tl.dot(v, tl.trans(do))
    ds_t = p_t * (dp_t - delta[None, :])
    dk += tl.dot(ds_t.to(q.dtype), q)
    return dk, dv


@triton.jit
def _dq_step(
    dq,
    q,
    do,
    lse,
    delta,
    k_base,
    v_base,
    offs_m,
    offs_n,
    offs_d,
    start_n,
    stride_kn,
    seq_kv,
    diag_offset,
    qk_scale,
    d_ok,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    PAD_D: tl.constexpr,
):
    """One key block of the dQ loop: P = exp2(Q K^T - LSE), dP = dO V^T,
    dS = P (dP - D), dQ += dS K."""
    cols = start_n + offs_n
    k_ptrs = k_base + cols[:, None] * stride_kn + offs_d[None, :]
    v_ptrs = v_base + cols[:, None] * stride_kn + offs_d[None, :]
    if MASKED:
        tile_mask = (cols < seq_kv)[:, None]
        if PAD_D:
            tile_mask = tile_mask & d_ok[None, :]
        k = tl.load(k_ptrs, mask=tile_mask, other=0.0)
        v = tl.load(v_ptrs, mask=tile_mask, other=0.0)
    elif PAD_D:
        k = tl.load(k_ptrs, mask=d_ok[None, :], other=0.0)
        v = tl.load(v_ptrs, mask=d_ok[None, :], other=0.0)
    else:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
    if MASKED:
        visible = cols[None, :] < seq_kv
        if CAUSAL:
            visible = visible & (cols[None, :] <= offs_m[:, None] + diag_offset)
        p = tl.where(visible, p, 0.0)
    dp = tl.dot(do, tl.trans(v))
    ds = p * (dp - delta[:, None])
    dq += tl.dot(ds.to(k.dtype), k)
    return dq


@triton.jit
def attention_backward_kernel(
    Q,
    K,
    V,
    DO,
    DQ,
    DK,
    DV,
    LSE2,
    Delta,
    qk_scale,
    sm_scale,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_kb,
    stride_kh,
    stride_kn,
    heads,
    seq_q,
    seq_kv,
    head_dim,
    BLOCK_M1: tl.constexpr,
    BLOCK_N1: tl.constexpr,
    BLOCK_M2: tl.constexpr,
    BLOCK_N2: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    PAD_D: tl.constexpr,
):
    """dQ, dK, dV of one (batch, head) for key block p and query block p (p = program_id(0)).
    Q, DO, DQ share Q's strides; K, V, DK, DV share K's; the head dim is contiguous."""
    pid = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // heads
    h = pid_bh % heads
    q_head = b * stride_qb + h * stride_qh
    kv_head = b * stride_kb + h * stride_kh
    lse_head = pid_bh * seq_q
    offs_d = tl.arange(0, HEAD_DIM)
    d_ok = offs_d < head_dim
    diag_offset = seq_kv - seq_q

    # ---- dK/dV loop: key block `pid` resident, query blocks streamed ----------------------
    start_n = pid * BLOCK_N1
    if start_n < seq_kv:
        offs_n = start_n + tl.arange(0, BLOCK_N1)
        offs_m1 = tl.arange(0, BLOCK_M1)
        kv_mask = (offs_n < seq_kv)[:, None]
        if PAD_D:
            kv_mask = kv_mask & d_ok[None, :]
        kv_offs = kv_head + offs_n[:, None] * stride_kn + offs_d[None, :]
        k = tl.load(K + kv_offs, mask=kv_mask, other=0.0)
        v = tl.load(V + kv_offs, mask=kv_mask, other=0.0)
        dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
        n_q_blocks = tl.cdiv(seq_q, BLOCK_M1)
        if CAUSAL:
            # Rows that see key start_n at all, and rows that see the whole key block.
            first = tl.maximum(start_n - diag_offset, 0) // BLOCK_M1
            full = tl.cdiv(tl.maximum(start_n + BLOCK_N1 - 1 - diag_offset, 0), BLOCK_M1)
            full = tl.minimum(tl.maximum(full, first), n_q_blocks)
        else:
            first = 0
            full = 0
        for t in range(first, full):
            dk, dv = _dkdv_step(
                dk, dv, k, v, Q + q_head, DO + q_head, LSE2 + lse_head, Delta + lse_head,
                offs_m1, offs_n, offs_d, t * BLOCK_M1, stride_qm, seq_q, diag_offset,
                qk_scale, d_ok, True, CAUSAL, PAD_D,
            )  # fmt: skip
        for t in range(full, n_q_blocks):
            dk, dv = _dkdv_step(
                dk, dv, k, v, Q + q_head, DO + q_head, LSE2 + lse_head, Delta + lse_head,
                offs_m1, offs_n, offs_d, t * BLOCK_M1, stride_qm, seq_q, diag_offset,
                qk_scale, d_ok, False, CAUSAL, PAD_D,
            )  # fmt: skip
        tl.store(DK + kv_offs, (dk * sm_scale).to(DK.dtype.element_ty), mask=kv_mask)
        tl.store(DV + kv_offs, dv.to(DV.dtype.element_ty), mask=kv_mask)

    # ---- dQ loop: query block `pid` resident, key blocks streamed -------------------------
    start_m = pid * BLOCK_M2
    if start_m < seq_q:
        offs_m = start_m + tl.arange(0, BLOCK_M2)
        offs_n2 = tl.arange(0, BLOCK_N2)
        row_ok = offs_m < seq_q
        q_mask = row_ok[:, None]
        if PAD_D:
            q_mask = q_mask & d_ok[None, :]
        q_offs = q_head + offs_m[:, None] * stride_qm + offs_d[None, :]
        q = tl.load(Q + q_offs, mask=q_mask, other=0.0)
        do = tl.load(DO + q_offs, mask=q_mask, other=0.0)
        lse = tl.load(LSE2 + lse_head + offs_m, mask=row_ok, other=0.0)
        delta = tl.load(Delta + lse_head + offs_m, mask=row_ok, other=0.0)
        dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
        last_row = tl.minimum(start_m + BLOCK_M2, seq_q) - 1
        if CAUSAL:
            end = tl.minimum(tl.maximum(last_row + diag_offset + 1, 0), seq_kv)
            full_end = tl.minimum(tl.maximum(start_m + diag_offset + 1, 0), seq_kv)
        else:
            end = seq_kv
            full_end = seq_kv
        full_blocks = full_end // BLOCK_N2
        for t in range(0, full_blocks):
            dq = _dq_step(
                dq, q, do, lse, delta, K + kv_head, V + kv_head, offs_m, offs_n2, offs_d,
                t * BLOCK_N2, stride_kn, seq_kv, diag_offset, qk_scale, d_ok,
                False, CAUSAL, PAD_D,
            )  # fmt: skip
        for t in range(full_blocks, tl.cdiv(end, BLOCK_N2)):
            dq = _dq_step(
                dq, q, do, lse, delta, K + kv_head, V + kv_head, offs_m, offs_n2, offs_d,
                t * BLOCK_N2, stride_kn, seq_kv, diag_offset, qk_scale, d_ok,
                True, CAUSAL, PAD_D,
            )  # fmt: skip
        tl.store(DQ + q_offs, (dq * sm_scale).to(DQ.dtype.element_ty), mask=q_mask)
