"""FlexDecoding (`flex_decoding`, flex_decode.py.jinja), registered as (`flex`, decode): the
kernel FlexAttention takes for query lengths below 128 when the GQA group is a power of two
(`_use_flex_decoding`; reference/flex_attention.md section 4).

Grid (ceil(q_len G / BLOCK_M), B Hkv, SPLIT_KV): the G = Hq / Hkv query heads of a KV head are
packed into the rows, BLOCK_M = max(next_pow2(q_len G), 16) (not a tuning key: the lowering
sets it), and each program walks one of SPLIT_KV contiguous parts of the cache BLOCK_N keys
per iteration, writing fp32 partial outputs that a reduction combines. The tuning keys are
BLOCK_N, num_warps, num_stages and SPLIT_KV (`num_splits` here, the shared `split_kv.SplitKv`
with GQA always packed). BLOCK_N must divide the block mask's BLOCK_SIZE (so it is at most
that), and so must BLOCK_M: `create_flex_decoding_kernel` (torch/_inductor/kernel/flex/
flex_decoding.py@00804f38) sets BLOCK_M by `setdefault` as above and raises ValueError ("Q and
KV block sizes must be divisible by the selected tile sizes") when SPARSE_Q_BLOCK_SIZE %
BLOCK_M or SPARSE_KV_BLOCK_SIZE % BLOCK_N is not 0. Packed rows whose BLOCK_M the block size
does not divide are a problem the decode kernel cannot take (`packed_rows_violations`, exit 2).
The loop is the forward loop with few rows, so resources and cost are the forward template's
(`forward.py`) on the split, packed problem.
"""

from __future__ import annotations

from ...errors import FieldViolation
from ...family import pow2_range
from ...hardware import HardwareSpec
from ...problem import AttentionProblem, Phase, SolveOptions
from ...space import Param
from ...split_kv import SplitKv, always_packs, gqa_group
from .forward import FlexAttention
from .mask import sparse_block_size
from .precision import precision_params

MIN_DECODE_BLOCK_M = 16  # the lowering's floor on the packed rows (1 on XPU)
DECODE_MAX_QUERY_LEN = 127  # _use_flex_decoding: the query length is below 128


def decode_block_m(problem: AttentionProblem) -> int:
    """BLOCK_M of the decode kernel: the packed rows rounded up to a power of two, >= 16."""
    rows = problem.seq_len * gqa_group(problem)
    return max(1 << max(0, (rows - 1).bit_length()), MIN_DECODE_BLOCK_M)


def packed_rows_violations(
    problem: AttentionProblem, options: SolveOptions
) -> list[FieldViolation]:
    """The lowering's rule on the packed rows: the block mask's BLOCK_SIZE a multiple of
    BLOCK_M (module docstring)."""
    size = sparse_block_size(options)
    block_m = decode_block_m(problem)
    if size % block_m == 0:
        return []
    group = gqa_group(problem)
    rows = problem.seq_len * group
    return [
        FieldViolation(
            "seq_len",
            f"FlexDecoding packs seq_len x heads/kv_heads = {problem.seq_len} x {group} = "
            f"{rows} query rows into BLOCK_M = {block_m} (max(next_pow2(rows), 16)), and its "
            f"lowering needs the block mask's BLOCK_SIZE a multiple of BLOCK_M; {size} is not "
            f"(allowed: at most {max(MIN_DECODE_BLOCK_M, _largest_pow2_dividing(size))} packed "
            f"rows at BLOCK_SIZE {size}, or --sparse-block-size a multiple of {block_m}; "
            "FlexAttention's forward kernel takes the problem: --phase forward)",
        )
    ]


def _largest_pow2_dividing(size: int) -> int:
    """The largest power of two that divides `size`."""
    return size & -size


class FlexDecoding(FlexAttention):
    """flex decode: FlexDecoding with split-KV and packed GQA."""

    phase = Phase.DECODE
    summary = (
        "PyTorch FlexAttention's FlexDecoding template (packed GQA rows, split KV; "
        "kernel_options BLOCK_N, num_warps, num_stages, SPLIT_KV)"
    )
    split_kv = SplitKv(pack_gqa=always_packs).for_decode()
    mask_tiles = ("block_m", "block_n")  # BLOCK_M: the packed rows (packed_rows_violations)
    other_device_kinds = ("rocm",)  # refused there naming the forward (`flex_violations`)

    def option_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec, options: SolveOptions
    ) -> list[FieldViolation]:
        return [
            *super().option_violations(problem, hardware, options),
            *packed_rows_violations(problem, options),
        ]

    def kernel_violations(
        self, problem: AttentionProblem, hardware: HardwareSpec
    ) -> list[FieldViolation]:
        violations = super().kernel_violations(problem, hardware)
        group = gqa_group(problem)
        if group & (group - 1):
            violations.append(
                FieldViolation(
                    "kv_heads",
                    f"FlexDecoding needs heads / kv_heads a power of two; got {problem.heads} "
                    f"/ {problem.kv_heads_eff} = {group} (FlexAttention then runs the forward "
                    "kernel: --phase forward)",
                )
            )
        return violations

    def tile_params(self, problem: AttentionProblem, hardware: HardwareSpec) -> tuple[Param, ...]:
        return (
            Param(
                "block_m",
                (decode_block_m(problem),),
                "packed query rows per program (BLOCK_M = max(next_pow2(seq_len x group), 16), "
                "set by the lowering)",
                pinnable=False,
            ),
            Param("block_n", pow2_range(16, 256), "keys per iteration (BLOCK_N)"),
            Param("num_warps", pow2_range(1, 8), "warps per program"),
            Param(
                "num_stages",
                (1, 2, 3, 4, 5),
                "software pipeline stages: K/V loads issued num_stages - 1 iterations ahead",
            ),
            *precision_params(problem),
        )
