"""The FlashAttention loops of a Triton kernel as `tl.dot` loops (`loops`), for the compiler's
allocation rules: what each loop keeps resident, streams and chains, in the program order of the
kernels the rules were checked against (`benchmarks/gpu/flash_attention.py`'s forward, the
harness's backward `benchmarks/compiler/attention_backward.py`; docs/model.md 16). The triton
family's kernels are these loops, and so are FlexAttention's templates (the forward template's
loop; the backward template's dK/dV and dQ roles: `reference/flex_attention.md` section 6).

Sizes are elements: block rows per candidate, d and dv the padded head dims.
"""

from __future__ import annotations

from ...space import IntArray
from .loops import AttentionKernel, Chain, DotLoop, Operand, RowVector

LSE_D_BYTES = 4  # the fp32 log-sum-exp and D of one query row, each


def forward_kernel(
    block_m: IntArray, block_n: IntArray, d: int, dv: int, elem_bytes: int, fma_dots: bool = False
) -> AttentionKernel:
    """The forward loop: S = Q K^T (dot 0), O += P V (dot 1). Q is loaded once; K (read as
    K^T: the kernel's pointers load the transposed tile) and V are streamed, each loaded just
    before its dot. `fma_dots`: fp32 dots at IEEE precision (`DotLoop.fma_dots`)."""
    loop = DotLoop(
        name="forward",
        dots=2,
        operands=(
            Operand("Q", block_m, d, resident=True, plain_uses=(0,)),
            Operand("K", block_n, d, resident=False, plain_uses=(0,), loaded_before=0),
            Operand("V", block_n, dv, resident=False, plain_uses=(1,), loaded_before=1),
        ),
        chain=Chain(rows=block_m, cols=block_n, consumers=(1,), out_cols=dv),
        accumulators=((block_m, dv),),
        scores=((block_m, block_n),),
        elem_bytes=elem_bytes,
        fma_dots=fma_dots,
    )
    return AttentionKernel((loop,))


def backward_kernel(
    block_m: IntArray,
    block_n: IntArray,
    dq_block_m: IntArray,
    dq_block_n: IntArray,
    d: int,
    dv: int,
    elem_bytes: int,
    fma_dots: bool = False,
    transposed_loads: bool = False,
) -> AttentionKernel:
    """The dK/dV loop then the dQ loop (one after the other: they share the arena); `fma_dots`
    as for `forward_kernel`. `transposed_loads`: the kernel loads the streamed Q of the dK/dV
    loop and K of the dQ loop through transposed pointers (FlexAttention's qT and kT; the
    triton family's kernel loads them as stored), and V of the dQ loop (`Operand.
    loaded_transposed`).

    dK/dV loop (block_n keys resident, block_m query rows streamed): P^T = exp2(K Q^T - LSE)
    (dot 0), dV += P^T dO (1), dP^T = V dO^T (2), dK += dS^T Q (3); Q, dO, LSE and D are
    loaded at the top of the iteration. dQ loop (dq_block_m queries resident, dq_block_n keys
    streamed): P = exp2(Q K^T - LSE) (0), dP = dO V^T (1), dQ += dS K (2); K and V are loaded
    at the top; LSE and D of the resident rows are loaded once, into registers."""
    dkdv = DotLoop(
        name="dkdv",
        dots=4,
        operands=(
            Operand("K", block_n, d, resident=True, plain_uses=(0,)),
            Operand("V", block_n, dv, resident=True, plain_uses=(2,)),
            Operand(
                "Q",
                block_m,
                d,
                resident=False,
                plain_uses=(3,),
                transposed_uses=(0,),
                loaded_transposed=transposed_loads,
            ),
            Operand("dO", block_m, dv, resident=False, plain_uses=(1,), transposed_uses=(2,)),
        ),
        chain=Chain(rows=block_n, cols=block_m, consumers=(1, 3), out_cols=max(d, dv)),
        accumulators=((block_n, d), (block_n, dv)),
        scores=((block_n, block_m), (block_n, block_m)),
        elem_bytes=elem_bytes,
        fma_dots=fma_dots,
        vectors=(RowVector("LSE", block_m, LSE_D_BYTES), RowVector("D", block_m, LSE_D_BYTES)),
    )
    dq = DotLoop(
        name="dq",
        dots=3,
        operands=(
            Operand("Q", dq_block_m, d, resident=True, plain_uses=(0,)),
            Operand("dO", dq_block_m, dv, resident=True, plain_uses=(1,)),
            Operand(
                "K",
                dq_block_n,
                d,
                resident=False,
                plain_uses=(2,),
                transposed_uses=(0,),
                loaded_transposed=transposed_loads,
            ),
            Operand(
                "V",
                dq_block_n,
                dv,
                resident=False,
                transposed_uses=(1,),
                loaded_transposed=transposed_loads,
            ),
        ),
        chain=Chain(rows=dq_block_m, cols=dq_block_n, consumers=(2,), out_cols=d),
        accumulators=((dq_block_m, d),),
        scores=((dq_block_m, dq_block_n), (dq_block_m, dq_block_n)),
        elem_bytes=elem_bytes,
        fma_dots=fma_dots,
    )
    return AttentionKernel((dkdv, dq))
