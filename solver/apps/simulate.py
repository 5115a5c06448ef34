"""A numerical simulator of FlashAttention-2's forward kernel, checked against exact attention.

`simulate(problem, block_m, block_n)` draws Q, K and V from a seeded generator, rounds them to
the problem's element type, runs the tiled forward algorithm the way the kernel does, and
compares its output with plain softmax attention computed in float64 from the same rounded
inputs. What the kernel does, step by step (FlashAttention-2, `flash_fwd_kernel.h` and
`softmax.h`):

- One thread block per (batch, query head, query block of block_m rows). Its K/V tiles of
  block_n rows are visited from the last one it needs down to the first (FA2 iterates in reverse,
  so only the first iterations need masking). With a causal mask, tiles entirely above the
  diagonal are never visited; a query block that sees no key at all writes zeros.
- S = Q_blk K_blk^T accumulated in FP32 (products of FP16/BF16/FP8 values are exact in FP32);
  padded key columns (seq_len_kv not a multiple of block_n) and, when causal, keys after the
  query's position (bottom-right aligned: row r sees keys 0 .. r + seq_len_kv - seq_len) are -inf.
- Online softmax in FP32 with the scale folded into exp2: m_new = max(m, rowmax(S));
  alpha = exp2((m - m_new) * scale_log2); l = alpha * l + rowsum(P) and O = alpha * O + P V,
  where P = exp2(S * scale_log2 - m_new * scale_log2); a row whose max is still -inf uses 0 in
  its place, so it stays exactly 0 (FA2's `Check_inf`). The row sum uses the FP32 P; the second
  matmul uses P rounded to the element type (FA2 converts P to FP16/BF16 for the MMA).
- O is multiplied by 1/l (1 where l is 0, a fully masked row) and written in the element type
  (FP8 kernels write BF16, as FlashAttention-3's FP8 path does).

The grid's thread blocks are independent, so the simulator steps them in lockstep: iteration t
runs every query block's t-th K/V tile as one batched matmul. Nothing here reads or writes
files; numpy only.

Tolerance. The reference starts from the same rounded inputs, so the only errors are the
kernel's own: P rounded to the element type (each weight off by at most its unit roundoff u_P,
which moves O by at most u_P * max|V| because O is a weighted mean of rows of V), the output
rounding (at most u_out * |O| <= u_out * max|V|), and FP32 arithmetic on the logits. A dot
product of length d summed in FP32 is typically off by 2^-24 * sqrt(d) * sum|q_i k_i| <=
2^-24 * sqrt(d) * |q| |k|; the softmax scale 1/sqrt(d) cancels the sqrt(d), so a scaled logit
is off by about e = 2^-24 * |q| |k|, and a weight exp(s - m) relatively by 2e. The tolerance is
twice the sum of those bounds:

    tolerance = 2 * (u_P + u_out + 2 * 2^-24 * max|q_row| * max|k_row|) * max|V|

u is 2^-11 for FP16, 2^-8 for BF16 and 2^-4 for FP8 E4M3 (whose output is BF16). On unit-scale
data (max|V| = 1, unit logits) that is about 2.0e-3 for FP16, 1.6e-2 for BF16 and 0.13 for FP8.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, Field

from ..errors import FieldViolation, InvalidRequestError
from ..problem import AttentionProblem, DType, Phase
from ..schema_config import FROZEN_SCHEMA
from ..space import ceil_div

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

MAX_BLOCK = 4096
DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB: the most memory one simulation may plan to use
MAX_LOGIT_SCALE = 100.0
FP8_E4M3_MAX = 448.0
FP32_UNIT_ROUNDOFF = 2.0**-24

# Unit roundoff (half the spacing of the values just above 1) of each element type.
UNIT_ROUNDOFF = {
    DType.FP16: 2.0**-11,
    DType.BF16: 2.0**-8,
    DType.FP8: 2.0**-4,
    DType.FP32: FP32_UNIT_ROUNDOFF,
}
# The type the kernel writes O in: FP8 kernels (FlashAttention-3) write BF16; FP32 writes FP32.
OUTPUT_DTYPE = {
    DType.FP16: DType.FP16,
    DType.BF16: DType.BF16,
    DType.FP8: DType.BF16,
    DType.FP32: DType.FP32,
}
TOLERANCE_SAFETY = 2.0


class SimulationResult(BaseModel):
    """How far one tiled forward pass is from exact attention, and which tiles it visited."""

    model_config = FROZEN_SCHEMA

    problem: AttentionProblem
    block_m: int = Field(description="query rows per thread block")
    block_n: int = Field(description="key/value rows per inner iteration")
    seed: int = Field(description="seed of numpy's default generator that drew Q, K and V")
    logit_scale: float = Field(
        description="Q is multiplied by this, so scaled logits q.k/sqrt(d) have this std"
    )
    output_dtype: DType = Field(description="element type the kernel writes O in")
    max_abs_error: float = Field(description="max |O - reference| over every output element")
    max_rel_error: float = Field(
        description="max_abs_error / max |reference| (relative to the largest reference value, "
        "not element by element)"
    )
    mean_abs_error: float = Field(description="mean |O - reference| over every output element")
    max_abs_error_fp32: float = Field(
        description="max |O - reference| of the FP32 result before it is rounded for writing: "
        "the algorithm's own error, without the final rounding every tile shares"
    )
    mean_abs_error_fp32: float = Field(
        description="mean |O - reference| of the FP32 result before it is rounded for writing"
    )
    max_abs_reference: float = Field(description="max |reference| over every output element")
    max_abs_logit: float = Field(
        description="largest |q.k * softmax_scale| among visible (query, key) pairs"
    )
    tolerance: float = Field(description="the absolute error allowed (module docstring)")
    unit_roundoff: float = Field(description="unit roundoff of P's element type")
    output_unit_roundoff: float = Field(description="unit roundoff of the output's element type")
    logit_error_estimate: float = Field(
        description="estimated FP32 error of a scaled logit: 2^-24 max|q_row| max|k_row|"
    )
    tolerance_scale: float = Field(description="max |V|, the largest |O| can be")
    within_tolerance: bool = Field(description="max_abs_error <= tolerance (and no NaN)")
    blocks_visited: int = Field(
        description="K/V tiles the simulated kernel visited, per (batch, head)"
    )
    blocks_expected: int = Field(
        description="K/V tiles the performance model counts, per (batch, head)"
    )
    all_blocks_visited_as_modelled: bool = Field(
        description="every query block visited exactly the tiles the model counts for it"
    )
    rescales: int = Field(
        description="(row, K/V tile) steps, over every (batch, head), in which the row's running "
        "max rose, so its sum and accumulator were rescaled by a factor below 1"
    )
    fully_masked_rows: int = Field(
        description="query rows, per (batch, head), that see no key (their output is 0)"
    )
    estimated_bytes: int = Field(description="planned peak memory of this simulation")


# ---- rounding to the element types ---------------------------------------------------------


def round_to_dtype(x: npt.NDArray[Any], dtype: DType) -> F32:
    """`x` rounded to the nearest value of `dtype` (ties to even), returned as float32.

    FP16 is IEEE binary16 (overflow to inf, subnormals down to 2^-24). BF16 keeps the upper
    16 bits of the float32 pattern after adding 0x7FFF plus the lowest kept bit (ties to even). FP8
    is OCP E4M3 (`e4m3fn`: bias 7, 3 mantissa bits, subnormals down to 2^-9, no infinity),
    rounded on its grid and saturated at +-448 as `satfinite` conversions do. FP32 is returned
    as float32 (no rounding beyond it).
    """
    if dtype is DType.FP16:
        return _round_fp16(np.asarray(x, dtype=np.float32))
    x32 = np.asarray(x, dtype=np.float32)
    if dtype is DType.FP32:
        return x32
    if dtype is DType.BF16:
        # uint32 arithmetic wraps only for NaN patterns, which are passed through below.
        bits = x32.view(np.uint32)
        rounded = ((bits + ((bits >> 16) & 1) + 0x7FFF) & 0xFFFF0000).view(np.float32)
        return np.where(np.isnan(x32), x32, rounded)
    # FP8 E4M3: the spacing of the grid at |x| is 2^(e-3), e = floor(log2|x|) >= -6; float32
    # holds every step exactly (scaling by powers of two, rint on at most 5-bit integers).
    mag = np.abs(x32)
    _, exponent = np.frexp(mag)  # mag = f * 2^exponent, f in [0.5, 1)
    np.maximum(exponent, -5, out=exponent)
    exponent -= 4
    spacing = np.ldexp(np.float32(1.0), exponent)
    del exponent
    mag /= spacing
    np.rint(mag, out=mag)
    mag *= spacing
    del spacing
    np.minimum(mag, np.float32(FP8_E4M3_MAX), out=mag)
    return np.copysign(mag, x32)


def _round_fp16(x32: F32) -> F32:
    """Round float32 to the nearest binary16 value, ties to even.

    numpy's conversion is exact and fast for binary16's normal range, but slow below it
    (|x| < 2^-14), where the spacing is a constant 2^-24: there (x + 0.75) - 0.75 rounds to it,
    since 2^-24 is the last place of float32 numbers in [0.5, 1)."""
    tiny = np.abs(x32) < np.float32(2.0**-14)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the rounding
        normal = np.where(tiny, np.float32(1.0), x32).astype(np.float16).astype(np.float32)
        subnormal = np.copysign((x32 + np.float32(0.75)) - np.float32(0.75), x32)
    return np.where(tiny, subnormal, normal)


# ---- validation and the memory plan --------------------------------------------------------


def estimated_bytes(problem: AttentionProblem, block_m: int, block_n: int) -> int:
    """The simulation's planned peak memory in bytes: the inputs (float32 rounded, padded
    copies, float64 for the reference), the FP32 state and outputs, one head's float64 score
    matrix and mask, and one step's tiles. tests/test_simulate.py checks it against the peak
    that tracemalloc measures."""
    b, h, hkv = problem.batch, problem.heads, problem.kv_heads_eff
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    d, dv = problem.head_dim, problem.head_dim_v_eff
    sq_pad = ceil_div(sq, block_m) * block_m
    sk_pad = ceil_div(sk, block_n) * block_n
    inputs = b * (h * sq * d + hkv * sk * (d + dv)) * (4 + 8)
    padded = b * (h * sq_pad * d + hkv * sk_pad * (d + dv)) * 4
    state = b * h * sq_pad * (dv + 2) * 4 + b * h * sq * dv * (4 + 8)
    score_matrix = sq * sk * (8 + 1)
    # One step's tiles: S and up to seven more float32 temporaries of its size (mask, P, the
    # rounded P, ...), and the gathered K/V tiles.
    step = b * h * sq_pad * block_n * 4 * 8 + b * hkv * sk_pad * (d + dv) * 4
    return inputs + padded + state + score_matrix + step


def _check(
    problem: AttentionProblem,
    tiles: Sequence[tuple[int, int]],
    seed: int,
    logit_scale: float,
    max_bytes: int,
) -> list[int]:
    """Every bad argument at once as InvalidRequestError; else the planned bytes per tile."""
    violations: list[FieldViolation] = []
    for field, index in (("block_m", 0), ("block_n", 1)):
        for tile in tiles:
            value = tile[index]
            if not 1 <= value <= MAX_BLOCK:
                violations.append(
                    FieldViolation(field, f"must be an integer from 1 to {MAX_BLOCK}; got {value}")
                )
                break
    if not 0 <= seed < 1 << 63:
        violations.append(FieldViolation("seed", f"must be an integer >= 0; got {seed}"))
    if not (math.isfinite(logit_scale) and 0 < logit_scale <= MAX_LOGIT_SCALE):
        violations.append(
            FieldViolation(
                "logit_scale", f"must be a number > 0 and <= {MAX_LOGIT_SCALE:g}; got {logit_scale}"
            )
        )
    if problem.phase is not Phase.FORWARD:
        violations.append(
            FieldViolation(
                "phase", f"only the forward pass is simulated; got {problem.phase.value}"
            )
        )
    if problem.dropout:
        violations.append(
            FieldViolation("dropout", f"is not simulated, allowed: 0; got {problem.dropout}")
        )
    if violations:
        raise InvalidRequestError(violations)

    planned = [estimated_bytes(problem, bm, bn) for bm, bn in tiles]
    worst = max(planned)
    if worst > max_bytes:
        sq, sk = problem.seq_len, problem.seq_len_kv_eff
        cap = f"the cap is {_gib(max_bytes)}"
        if sq * sk * 9 > max_bytes:
            violation = FieldViolation(
                "seq_len",
                f"the exact reference needs one head's seq_len x seq_len_kv = {sq} x {sk} score "
                f"matrix in float64 ({_gib(sq * sk * 9)} with its mask), so the simulation "
                f"would need {_gib(worst)}; {cap}: simulate a shorter sequence",
            )
        else:
            violation = FieldViolation(
                "batch",
                f"batch x heads x seq_len x head_dim (and the K/V counterparts) would need "
                f"{_gib(worst)} for the simulation's arrays; {cap}: simulate fewer heads, a "
                "smaller batch or a shorter sequence",
            )
        raise InvalidRequestError([violation])
    return planned


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / (1 << 30):.3g} GiB"


# ---- the pieces of one simulation ----------------------------------------------------------


def random_inputs(problem: AttentionProblem, seed: int, logit_scale: float) -> tuple[F32, F32, F32]:
    """Q, K, V (batch, heads, rows, dim) drawn standard normal, Q scaled, rounded to dtype."""
    rng = np.random.default_rng(seed)
    b, h, hkv = problem.batch, problem.heads, problem.kv_heads_eff
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    d, dv = problem.head_dim, problem.head_dim_v_eff
    q = rng.standard_normal((b, h, sq, d), dtype=np.float32) * np.float32(logit_scale)
    k = rng.standard_normal((b, hkv, sk, d), dtype=np.float32)
    v = rng.standard_normal((b, hkv, sk, dv), dtype=np.float32)
    dtype = problem.dtype
    return round_to_dtype(q, dtype), round_to_dtype(k, dtype), round_to_dtype(v, dtype)


def last_visible_key(problem: AttentionProblem) -> I64:
    """Per query row, the last key it may attend to (-1: none). Bottom-right causal alignment."""
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    rows = np.arange(sq, dtype=np.int64)
    if not problem.causal:
        return np.full(sq, sk - 1, dtype=np.int64)
    return np.clip(rows + (sk - sq), -1, sk - 1)


def kv_tiles_to_visit(problem: AttentionProblem, block_m: int, block_n: int) -> I64:
    """Per query block, how many K/V tiles hold at least one key one of its real rows sees.

    Read off the mask: the block's last real row sees the most keys (the mask is a staircase),
    so it needs tiles 0 .. last_key // block_n. This is what the simulator visits.
    """
    sq = problem.seq_len
    n_m = ceil_div(sq, block_m)
    last_row = np.minimum((np.arange(n_m, dtype=np.int64) + 1) * block_m, sq) - 1
    last_key = last_visible_key(problem)[last_row]
    return np.where(last_key >= 0, last_key // block_n + 1, 0)


def modelled_kv_tiles(problem: AttentionProblem, block_m: int, block_n: int) -> I64:
    """Per query block, the K/V tiles the performance model (and FA2's launch) counts.

    Causal: ceil(((i + 1) * block_m + seq_len_kv - seq_len) / block_n), clipped to
    [0, n_kv], as FA2 computes n_block_max; otherwise every tile, n_kv.
    """
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    n_m, n_kv = ceil_div(sq, block_m), ceil_div(sk, block_n)
    if not problem.causal:
        return np.full(n_m, n_kv, dtype=np.int64)
    reach = (np.arange(n_m, dtype=np.int64) + 1) * block_m + (sk - sq)
    return np.clip(ceil_div(reach, block_n), 0, n_kv)


def _matmul(a: F32, b: F32) -> F32:
    """The MMA: float32 inputs (exact products of the element type), FP32 accumulation.
    BLAS may sum in a shape-dependent order, as different MMA tilings do on a GPU."""
    result: F32 = np.matmul(a, b)
    return result


def _exp2_ftz(x: F32) -> F32:
    """exp2 in float32 with results below 2^-126 flushed to zero, as the GPU's
    `ex2.approx.ftz.f32` does (FlashAttention is built with --use_fast_math)."""
    result: F32 = np.exp2(np.maximum(x, np.float32(-126.0)))
    result[x < -126.0] = 0.0
    return result


# Subtracted from every exponent of P (log2 units): 0, as in the kernel. Only a control
# experiment in benchmarks/numerics.py changes it, so that no weight is exactly exp2(0) = 1.
_P_EXPONENT_OFFSET = np.float32(0.0)


def _rescale_factor(m_prev: F32, m_cur: F32, scale_log2: np.float32) -> F32:
    """exp2((m_prev - m_cur) * scale_log2): how much the old sum and accumulator shrink."""
    return _exp2_ftz((m_prev - m_cur) * scale_log2)


def _online_softmax_step(
    s: F32,
    v_tile: F32,
    m: F32,
    row_sum: F32,
    acc: F32,
    scale_log2: np.float32,
    dtype: DType,
) -> int:
    """One K/V tile of the online softmax, updating m, row_sum (l) and acc in place (FA2's
    `softmax_rescale_o`, `scale_apply_exp2`, the row sum and the P V matmul).

    Returns the number of rows whose running max rose from a finite value (rescales < 1).
    """
    m_new = np.maximum(m, s.max(axis=-1))
    m_safe = np.where(m_new == -np.inf, np.float32(0.0), m_new)  # FA2's Check_inf
    alpha = _rescale_factor(m, m_safe, scale_log2)
    p = _exp2_ftz(s * scale_log2 - (m_safe * scale_log2 + _P_EXPONENT_OFFSET)[..., None])
    rescaled = int(np.count_nonzero((m_new > m) & np.isfinite(m)))
    row_sum *= alpha
    row_sum += p.sum(axis=-1, dtype=np.float32)
    acc *= alpha[..., None]
    acc += _matmul(round_to_dtype(p, dtype), v_tile)
    m[...] = m_new
    return rescaled


def tiled_forward(
    problem: AttentionProblem, q: F32, k: F32, v: F32, block_m: int, block_n: int
) -> tuple[F32, F32, I64, int]:
    """The kernel's output (batch, heads, seq_len, head_dim_v) in FP32 and as written in its
    output type, the tiles each query block visited, and the number of rescales below 1."""
    b, h, hkv = problem.batch, problem.heads, problem.kv_heads_eff
    group = h // hkv
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    d, dv = problem.head_dim, problem.head_dim_v_eff
    n_m, n_kv = ceil_div(sq, block_m), ceil_div(sk, block_n)
    # Padded rows and columns are zeros; the mask keeps padded keys out, padded rows are dropped.
    q_pad = np.zeros((b, h, n_m * block_m, d), dtype=np.float32)
    q_pad[:, :, :sq] = q
    k_pad = np.zeros((b, hkv, n_kv * block_n, d), dtype=np.float32)
    k_pad[:, :, :sk] = k
    v_pad = np.zeros((b, hkv, n_kv * block_n, dv), dtype=np.float32)
    v_pad[:, :, :sk] = v
    # Query head kv * group + g reads K/V head kv: (batch, kv_head, group, q_block, row, dim).
    q_tiles = q_pad.reshape(b, hkv, group, n_m, block_m, d)
    k_tiles = k_pad.reshape(b, hkv, 1, n_kv, block_n, d)
    v_tiles = v_pad.reshape(b, hkv, 1, n_kv, block_n, dv)

    m = np.full((b, hkv, group, n_m, block_m), -np.inf, dtype=np.float32)
    row_sum = np.zeros((b, hkv, group, n_m, block_m), dtype=np.float32)
    acc = np.zeros((b, hkv, group, n_m, block_m, dv), dtype=np.float32)

    visits = kv_tiles_to_visit(problem, block_m, block_n)
    if np.any(np.diff(visits) < 0):  # the staircase mask makes this impossible
        raise AssertionError("query blocks must need non-decreasing numbers of K/V tiles")
    scale_log2 = np.float32(math.log2(math.e) / math.sqrt(d))
    limits = np.full(n_m * block_m, sk - 1, dtype=np.int64)  # padded rows see every key
    limits[:sq] = last_visible_key(problem)
    row_limit = limits.reshape(n_m, block_m)
    offsets = np.arange(block_n, dtype=np.int64)
    rescales = 0
    for step in range(int(visits.max(initial=0))):
        # The query blocks still running are a suffix (they need more tiles further down).
        first = int(np.searchsorted(visits, step, side="right"))
        kv_block = visits[first:] - 1 - step  # each block goes from its last tile to tile 0
        s = _matmul(q_tiles[:, :, :, first:], k_tiles[:, :, :, kv_block].swapaxes(-1, -2))
        keys = kv_block[:, None] * block_n + offsets  # (blocks, block_n)
        visible = keys[:, None, :] <= row_limit[first:, :, None]  # (blocks, block_m, block_n)
        if not visible.all():  # only tiles on the diagonal or past seq_len_kv need the mask
            s = np.where(visible, s, np.float32(-np.inf))
        rescales += _online_softmax_step(
            s,
            v_tiles[:, :, :, kv_block],
            m[:, :, :, first:],
            row_sum[:, :, :, first:],
            acc[:, :, :, first:],
            scale_log2,
            problem.dtype,
        )
    # FA2's epilogue: multiply by 1/l, or by 1 where l is 0 (a row that saw no key) or NaN.
    bad = (row_sum == 0) | np.isnan(row_sum)
    inv_l = np.where(bad, np.float32(1.0), np.float32(1.0) / np.where(bad, 1, row_sum))
    out = (acc * inv_l[..., None]).reshape(b, h, n_m * block_m, dv)[:, :, :sq]
    written = round_to_dtype(out, OUTPUT_DTYPE[problem.dtype])
    return out, written, visits, rescales


def _reference(problem: AttentionProblem, q: F32, k: F32, v: F32) -> tuple[F64, float]:
    """Plain softmax attention in float64, one (batch, head) at a time; rows that see no key
    are 0. Also the largest |scaled logit| among visible pairs."""
    b, h, hkv = problem.batch, problem.heads, problem.kv_heads_eff
    group = h // hkv
    sq, sk = problem.seq_len, problem.seq_len_kv_eff
    scale = 1.0 / math.sqrt(problem.head_dim)
    visible = np.arange(sk)[None, :] <= last_visible_key(problem)[:, None]
    out = np.zeros((b, h, sq, problem.head_dim_v_eff), dtype=np.float64)
    max_logit = 0.0
    for bi in range(b):
        for hi in range(h):
            kv = hi // group
            s = q[bi, hi].astype(np.float64) @ k[bi, kv].astype(np.float64).T
            s *= scale
            if visible.any():
                hi_logit = float(np.max(s, where=visible, initial=-np.inf))
                lo_logit = float(np.min(s, where=visible, initial=np.inf))
                max_logit = max(max_logit, abs(hi_logit), abs(lo_logit))
            s[~visible] = -np.inf
            row_max = s.max(axis=1)
            row_max[row_max == -np.inf] = 0.0
            s -= row_max[:, None]
            np.exp(s, out=s)
            den = s.sum(axis=1)
            num = s @ v[bi, kv].astype(np.float64)
            out[bi, hi] = np.divide(
                num, den[:, None], out=np.zeros_like(num), where=den[:, None] > 0
            )
    return out, max_logit


def _row_norm_max(x: F32) -> float:
    if x.size == 0:
        return 0.0
    return float(np.sqrt(np.max(np.sum(np.square(x.astype(np.float64)), axis=-1))))


# ---- the entry points ----------------------------------------------------------------------


def simulate_tiles(
    problem: AttentionProblem,
    tiles: Sequence[tuple[int, int]],
    *,
    seed: int = 0,
    logit_scale: float = 1.0,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[SimulationResult]:
    """`simulate` for several (block_m, block_n) tiles on the same inputs and reference."""
    if not tiles:
        return []
    planned = _check(problem, tiles, seed, logit_scale, max_bytes)
    q, k, v = random_inputs(problem, seed, logit_scale)
    reference, max_logit = _reference(problem, q, k, v)
    max_ref = float(np.max(np.abs(reference), initial=0.0))
    u_p = UNIT_ROUNDOFF[problem.dtype]
    u_out = UNIT_ROUNDOFF[OUTPUT_DTYPE[problem.dtype]]
    logit_error = FP32_UNIT_ROUNDOFF * _row_norm_max(q) * _row_norm_max(k)
    scale_v = float(np.max(np.abs(v), initial=0.0))
    tolerance = TOLERANCE_SAFETY * (u_p + u_out + 2.0 * logit_error) * scale_v
    fully_masked = int(np.count_nonzero(last_visible_key(problem) < 0))

    results = []
    for (block_m, block_n), plan in zip(tiles, planned, strict=True):
        out_fp32, out, visits, rescales = tiled_forward(problem, q, k, v, block_m, block_n)
        expected = modelled_kv_tiles(problem, block_m, block_n)
        error = np.abs(out.astype(np.float64) - reference)
        max_abs = float(np.max(error, initial=0.0))
        error_fp32 = np.abs(out_fp32.astype(np.float64) - reference)
        max_abs_fp32 = float(np.max(error_fp32, initial=0.0))
        finite = bool(np.all(np.isfinite(out)))
        max_rel = max_abs / max_ref if max_ref > 0 else (0.0 if max_abs == 0 else math.inf)
        results.append(
            SimulationResult(
                problem=problem,
                block_m=block_m,
                block_n=block_n,
                seed=seed,
                logit_scale=logit_scale,
                output_dtype=OUTPUT_DTYPE[problem.dtype],
                max_abs_error=max_abs if finite else math.inf,
                max_rel_error=max_rel if finite else math.inf,
                mean_abs_error=float(error.mean()) if finite and error.size else 0.0,
                max_abs_error_fp32=max_abs_fp32 if finite else math.inf,
                mean_abs_error_fp32=float(error_fp32.mean()) if finite and error.size else 0.0,
                max_abs_reference=max_ref,
                max_abs_logit=max_logit,
                tolerance=tolerance,
                unit_roundoff=u_p,
                output_unit_roundoff=u_out,
                logit_error_estimate=logit_error,
                tolerance_scale=scale_v,
                within_tolerance=finite and max_abs <= tolerance,
                blocks_visited=int(visits.sum()),
                blocks_expected=int(expected.sum()),
                all_blocks_visited_as_modelled=bool(np.array_equal(visits, expected)),
                rescales=rescales,
                fully_masked_rows=fully_masked,
                estimated_bytes=plan,
            )
        )
    return results


def simulate(
    problem: AttentionProblem,
    block_m: int,
    block_n: int,
    *,
    seed: int = 0,
    logit_scale: float = 1.0,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> SimulationResult:
    """Run FlashAttention-2's forward algorithm with a block_m x block_n tile on random data
    for `problem` and compare it with exact attention (see the module docstring).

    Raises InvalidRequestError naming the field for a block size outside 1..4096, a bad seed
    or logit_scale, a phase other than forward, dropout, or arrays that would exceed
    `max_bytes` (2 GiB by default).
    """
    return simulate_tiles(
        problem, [(block_m, block_n)], seed=seed, logit_scale=logit_scale, max_bytes=max_bytes
    )[0]
