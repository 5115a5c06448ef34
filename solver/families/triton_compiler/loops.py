"""How a Triton attention kernel is described to the allocation rules: its `tl.dot` loops, what
each loop keeps resident, what it streams through the software pipeliner, the tile that chains
one dot into the next, and the accumulators and score tiles that live in registers.

A kernel is one or more `DotLoop`s that run one after another (Triton allocates one shared-memory
arena per kernel from a liveness analysis, so loops that never run at the same time share bytes:
the kernel's figure is its largest loop's). Every size is an array over the candidates (or one
int for all of them); rows and columns are elements. The dots of a loop are numbered in program
order, 0 first; an operand names the dots that read it as stored (`plain_uses`) and those that
read it through `tl.trans` (`transposed_uses`), and where in the iteration its load is issued
(`loaded_before`). These are the facts the rules need: which buffers exist, how many of each,
and which are alive at the same time.

The FlashAttention forward and backward loops are described with these in `flash_loops.py`
(the triton family's kernels, and FlexAttention's templates, which have the same loops); another
kernel can describe its own loops the same way and get the shared memory, registers and
spills back (`allocation.allocate`). Formulas and the evidence
behind them: docs/model.md sections 16.2, 16.7.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...space import IntArray

Size = IntArray | int


def as_array(value: Size, n: int) -> IntArray:
    """A size as an int64 column of length n (the array itself when it is one already: callers
    never write into it)."""
    if isinstance(value, np.ndarray) and value.shape == (n,) and value.dtype == np.int64:
        return value
    if isinstance(value, int):
        return np.full(n, value, dtype=np.int64)
    return np.broadcast_to(np.asarray(value, dtype=np.int64), (n,)).astype(np.int64)


@dataclass(frozen=True)
class Operand:
    """A tile of `rows x cols` elements that the loop's dots read through shared memory.

    `resident`: loaded once before the loop and read by every iteration (the forward's Q; the
    backward's K and V in the dK/dV loop); otherwise streamed: loaded every iteration, which the
    software pipeliner turns into asynchronous copies `num_stages` deep. `loaded_before`: the dot
    before which an iteration issues the load (streamed operands; program order matters only for
    a loop the pipeliner leaves alone, num_stages = 1). `loaded_transposed`: the kernel's
    pointers load the tile transposed, as `cols x rows` (FlexAttention's backward template
    loads qT, kT and vT so); the uses stay stated against `rows x cols`. It matters to the
    pipelined mma.sync rule only (`shared_memory.transposed_in_registers`)."""

    name: str
    rows: Size
    cols: Size
    resident: bool
    plain_uses: tuple[int, ...] = ()
    transposed_uses: tuple[int, ...] = ()
    loaded_before: int = 0
    loaded_transposed: bool = False

    def __post_init__(self) -> None:
        if not self.plain_uses and not self.transposed_uses:
            raise ValueError(f"operand {self.name}: no dot reads it")

    @property
    def last_use(self) -> int:
        """The last dot that reads the operand, in either orientation."""
        return max((*self.plain_uses, *self.transposed_uses))


@dataclass(frozen=True)
class RowVector:
    """Values streamed one per row beside a streamed operand (the backward's log-sum-exp and
    D = rowsum(dO o O), fp32): `rows` rows of `bytes_per_row` bytes per iteration."""

    name: str
    rows: Size
    bytes_per_row: int


@dataclass(frozen=True)
class Chain:
    """The tile a loop computes with one dot and feeds to a later dot as its A operand (the
    forward's P = softmax(QK^T); the backward's P^T and dS^T): `rows x cols` elements, converted
    to the operand element type. `consumers`: the dots that read it. `out_cols`: the columns of
    those dots' results (their rows are `rows`); with the rows they decide how Triton lays the
    warps out over every dot of the loop (`shared_memory.warps_along_rows`)."""

    rows: Size
    cols: Size
    consumers: tuple[int, ...]
    out_cols: Size


@dataclass(frozen=True)
class DotLoop:
    """One loop of `tl.dot`s over a tile of the problem.

    `accumulators`: fp32 (rows, cols) tiles carried across iterations in registers (O; dK and
    dV; dQ). `scores`: fp32 (rows, cols) tiles computed and consumed inside an iteration (S; P^T
    and dP^T; P and dP). `dots`: how many dots an iteration runs. `elem_bytes`: bytes of one
    operand element (2 for fp16/bf16, 4 for fp32). `fma_dots`: the dots run on FP32 FMAs on
    every target, fp32 operands at `input_precision="ieee"` (Triton's AccelerateMatmul gives
    an fp32 x fp32 dot an MMA only at tf32 precision; FlexAttention's FLOAT32_PRECISION)."""

    name: str
    dots: int
    operands: tuple[Operand, ...]
    chain: Chain
    accumulators: tuple[tuple[Size, Size], ...]
    scores: tuple[tuple[Size, Size], ...]
    elem_bytes: int = 2
    vectors: tuple[RowVector, ...] = field(default=())
    fma_dots: bool = False

    @property
    def rows(self) -> Size:
        """Output rows of the loop's dots: the rows of the chain (the M of every GEMM)."""
        return self.chain.rows

    def resident(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.resident)

    def streamed(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if not o.resident)


@dataclass(frozen=True)
class AttentionKernel:
    """A kernel's loops, run one after another (never at the same time)."""

    loops: tuple[DotLoop, ...]
