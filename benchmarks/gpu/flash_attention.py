"""A FlashAttention forward kernel in Triton, parameterised by its tile: the kernel tilesolve's
`triton` family models (docs/model.md section 3: Q held in registers, K/V tiles streamed
through shared memory `num_stages` deep by Triton's software pipeliner, online softmax).

    o, lse = attention_forward(q, k, v, causal=True, block_m=128, block_n=64,
                               num_warps=4, num_stages=3)

q is (batch, heads, seq_len, head_dim), k and v are (batch, kv_heads, seq_len_kv, head_dim /
head_dim_v), fp16 or bf16, on one CUDA device; heads must be a multiple of kv_heads (GQA).
The causal mask is bottom-right aligned as in FlashAttention >= 2.1: query row i sees keys
j <= i + seq_len_kv - seq_len; a row that sees no key gets 0 (and lse -inf). Head dims are
padded to the next power of two >= 16 inside the kernel (tl.arange needs powers of two), as
the model assumes. Returns the output (q's dtype) and the log-sum-exp per row (float32).

Each program computes BLOCK_M query rows of one (batch, head). Its K/V loop is split in two:
the tiles every row of the block sees in full, without masks, and the tiles that cross the
causal diagonal or the end of K/V, masked; the model counts the second kind as its diagonal
tiles. With TRITON_INTERPRET=1 the kernel runs on the CPU (Triton's interpreter), which is how
its correctness is tested where no GPU is available (tests/test_gpu_kernel.py).

Imports triton and torch: only the GPU harness (`benchmarks/gpu/`) uses this module.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


def _pow2(value: int) -> int:
    return max(16, 1 << (value - 1).bit_length())


@triton.jit
def _tile_update(
    acc,
    m_i,
    l_i,
    q,
    k_ptrs,
    v_ptrs,
    offs_m,
    offs_n,
    start_n,
    seq_kv,
    diag_offset,
    qk_scale,
    d_ok,
    dv_ok,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    PAD_D: tl.constexpr,
    PAD_DV: tl.constexpr,
):
    """One K/V tile of the online softmax: S = Q K^T, rescale, O += P V."""
    cols = start_n + offs_n
    if MASKED:
        k_mask = cols[None, :] < seq_kv
        if PAD_D:
            k_mask = k_mask & d_ok[:, None]
        k = tl.load(k_ptrs, mask=k_mask, other=0.0)
    elif PAD_D:
        k = tl.load(k_ptrs, mask=d_ok[:, None], other=0.0)
    else:
        k = tl.load(k_ptrs)
    s = tl.dot(q, k) * qk_scale  # log2 units
    if MASKED:
        visible = cols[None, :] < seq_kv
        if CAUSAL:
            visible = visible & (cols[None, :] <= offs_m[:, None] + diag_offset)
        s = tl.where(visible, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    # A row that has seen no key yet keeps m = -inf: shift by 0 so exp2 gives 0, not NaN.
    m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - m_shift[:, None])
    alpha = tl.math.exp2(m_i - m_shift)
    l_i = l_i * alpha + tl.sum(p, 1)
    if MASKED:
        v_mask = cols[:, None] < seq_kv
        if PAD_DV:
            v_mask = v_mask & dv_ok[None, :]
        v = tl.load(v_ptrs, mask=v_mask, other=0.0)
    elif PAD_DV:
        v = tl.load(v_ptrs, mask=dv_ok[None, :], other=0.0)
    else:
        v = tl.load(v_ptrs)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _attention_forward_kernel(
    Q,
    K,
    V,
    Out,
    Lse,
    qk_scale,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_ob,
    stride_oh,
    stride_om,
    heads,
    group,
    seq_q,
    seq_kv,
    head_dim,
    head_dim_v,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_V: tl.constexpr,
    CAUSAL: tl.constexpr,
    PAD_D: tl.constexpr,
    PAD_DV: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // heads
    h = pid_bh % heads
    h_kv = h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_dv = tl.arange(0, HEAD_DIM_V)
    d_ok = offs_d < head_dim
    dv_ok = offs_dv < head_dim_v
    row_ok = offs_m < seq_q

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :]
    q_mask = row_ok[:, None]
    if PAD_D:
        q_mask = q_mask & d_ok[None, :]
    q = tl.load(q_ptrs, mask=q_mask, other=0.0)
    # K^T tile (HEAD_DIM x BLOCK_N) and V tile (BLOCK_N x HEAD_DIM_V) of the first iteration.
    k_ptrs = K + b * stride_kb + h_kv * stride_kh + offs_n[None, :] * stride_kn + offs_d[:, None]
    v_ptrs = V + b * stride_vb + h_kv * stride_vh + offs_n[:, None] * stride_vn + offs_dv[None, :]

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_V], dtype=tl.float32)

    # Keys row i sees: j <= i + diag_offset (causal), j < seq_kv.
    diag_offset = seq_kv - seq_q
    first_row = pid_m * BLOCK_M
    last_row = tl.minimum(first_row + BLOCK_M, seq_q) - 1
    if CAUSAL:
        end = tl.minimum(tl.maximum(last_row + diag_offset + 1, 0), seq_kv)
        full_end = tl.minimum(tl.maximum(first_row + diag_offset + 1, 0), seq_kv)
    else:
        end = seq_kv
        full_end = seq_kv
    full_tiles = full_end // BLOCK_N
    all_tiles = tl.cdiv(end, BLOCK_N)

    # Tiles every row of the block sees in full: no masks.
    for t in range(0, full_tiles):
        start_n = t * BLOCK_N
        acc, m_i, l_i = _tile_update(
            acc,
            m_i,
            l_i,
            q,
            k_ptrs + start_n * stride_kn,
            v_ptrs + start_n * stride_vn,
            offs_m,
            offs_n,
            start_n,
            seq_kv,
            diag_offset,
            qk_scale,
            d_ok,
            dv_ok,
            False,
            CAUSAL,
            PAD_D,
            PAD_DV,
        )
    # Tiles on the causal diagonal or past the end of K/V: masked.
    for t in range(full_tiles, all_tiles):
        start_n = t * BLOCK_N
        acc, m_i, l_i = _tile_update(
            acc,
            m_i,
            l_i,
            q,
            k_ptrs + start_n * stride_kn,
            v_ptrs + start_n * stride_vn,
            offs_m,
            offs_n,
            start_n,
            seq_kv,
            diag_offset,
            qk_scale,
            d_ok,
            dv_ok,
            True,
            CAUSAL,
            PAD_D,
            PAD_DV,
        )

    safe_l = tl.where(l_i > 0.0, l_i, 1.0)
    out = acc / safe_l[:, None]
    o_ptrs = Out + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_dv[None, :]
    o_mask = row_ok[:, None]
    if PAD_DV:
        o_mask = o_mask & dv_ok[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=o_mask)
    # Natural-log LSE: (m + log2 l) / log2(e); -inf for a row that saw no key.
    lse = tl.where(l_i > 0.0, (m_i + tl.math.log2(safe_l)) / 1.4426950408889634, float("-inf"))
    tl.store(Lse + pid_bh * seq_q + offs_m, lse, mask=row_ok)


def attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    block_m: int = 128,
    block_n: int = 64,
    num_warps: int = 4,
    num_stages: int = 2,
    sm_scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The attention forward pass with one tile configuration; see the module's docstring."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k and v must be (batch, heads, seq, head_dim)")
    batch, heads, _, head_dim = q.shape
    kv_heads = k.shape[1]
    if k.shape[0] != batch or v.shape[:3] != k.shape[:3] or k.shape[3] != head_dim:
        raise ValueError("k and v must be (batch, kv_heads, seq_kv, head_dim / head_dim_v)")
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError("q, k and v must all be float16 or all bfloat16")
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        if value < 16 or value & (value - 1):
            raise ValueError(f"{name} must be a power of two >= 16; got {value}")
    tile = {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": num_warps}
    return _launch(
        _attention_forward_kernel, q, k, v, causal, sm_scale, tile | {"num_stages": num_stages}
    )


def autotuned_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    configs: list[Any],
    prune: Any = None,
    do_bench: Any = None,
) -> tuple[torch.Tensor, Any]:
    """One call through a fresh `triton.autotune` over `configs` (triton.Config with BLOCK_M
    and BLOCK_N), with `prune` as its early_config_prune when given, and Triton's own
    benchmark unless `do_bench` is given (the interpreter has none). Returns the output and
    the autotuner (its `best_config`, `bench_time`, `configs_timings`)."""
    options: dict[str, Any] = {} if do_bench is None else {"do_bench": do_bench}
    tuner = triton.autotune(
        configs=configs,
        key=["seq_q", "seq_kv", "head_dim", "head_dim_v", "heads", "group"],
        prune_configs_by={"early_config_prune": prune} if prune is not None else None,
        **options,
    )(_attention_forward_kernel)
    out, _ = _launch(tuner, q, k, v, causal, None, {})
    return out, tuner


def _launch(
    kernel: Any,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    sm_scale: float | None,
    tile: dict[str, int],
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, heads, seq_q, head_dim = q.shape
    kv_heads, seq_kv, head_dim_v = k.shape[1], k.shape[2], v.shape[3]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty((*q.shape[:3], head_dim_v), dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads, seq_q), dtype=torch.float32, device=q.device)
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    d_pad, dv_pad = _pow2(head_dim), _pow2(head_dim_v)

    def grid(meta: dict[str, Any]) -> tuple[int, int]:
        return (triton.cdiv(seq_q, meta["BLOCK_M"]), batch * heads)

    kernel[grid](
        q,
        k,
        v,
        out,
        lse,
        scale * LOG2E,
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k.stride(0),
        k.stride(1),
        k.stride(2),
        v.stride(0),
        v.stride(1),
        v.stride(2),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        heads,
        heads // kv_heads,
        seq_q,
        seq_kv,
        head_dim,
        head_dim_v,
        HEAD_DIM=d_pad,
        HEAD_DIM_V=dv_pad,
        CAUSAL=causal,
        PAD_D=d_pad != head_dim,
        PAD_DV=dv_pad != head_dim_v,
        **tile,
    )
    return out, lse


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention in float32 with the same bottom-right causal mask (output in float32)."""
    heads, kv_heads = q.shape[1], k.shape[1]
    kf = k.float().repeat_interleave(heads // kv_heads, dim=1)
    vf = v.float().repeat_interleave(heads // kv_heads, dim=1)
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = torch.matmul(q.float(), kf.transpose(-1, -2)) * scale
    seq_q, seq_kv = q.shape[2], k.shape[2]
    if causal:
        rows = torch.arange(seq_q, device=q.device)[:, None]
        cols = torch.arange(seq_kv, device=q.device)[None, :]
        s = s.masked_fill(cols > rows + (seq_kv - seq_q), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    return torch.matmul(p, vf), lse
