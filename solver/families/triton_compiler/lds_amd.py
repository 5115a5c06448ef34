"""The LDS Triton 3.9 allocates for a loop of `tl.dot`s on gfx942 and gfx950 (the code object's
`metadata.shared`), per candidate (docs/model.md 16.7 and 19.10). Sizes are elements of e bytes.

- **Resident operands** (Q) pass through LDS once, before the loop, and then live in registers
  as MFMA operands: they never coexist with the loop's buffers, so the arena is the larger of
  the two.
- **One stage** (not pipelined): each operand passes through LDS on its own, and so does the
  chained tile where it crosses the waves (below): the largest of them.
- **Pipelined**: the stream pipeliner keeps `AMD_PIPELINE_BUFFERS[target][s]` buffers of every
  streamed operand (gfx942: s - 1, gfx950: s, both the two-stage count at 4 stages); gfx950
  pads every buffer by 8 elements per 256 after the first 256 (`GFX950_PAD_ELEMENTS` every
  `GFX950_PAD_INTERVAL`: Triton's padded shared layouts against bank conflicts,
  `composePaddedLayout`); row vectors stay out of LDS.
- **The chained tile** (P) crosses the waves through LDS, beside the buffers, when the first
  dot's MFMA layout cannot feed the second dot as it stands: the two dots take different MFMA
  instructions (Triton's default picks 32x32 when the smaller of a dot's result dims is at
  least 32, else 16x16: `chooseMfmaInstruction`, AccelerateAMDMatmul.cpp; `matrix_instr_nonkdim`
  sets both), or the block has room for two MFMA row tiles but not for one per wave (then
  Triton lays waves along the columns as well). A single wave keeps P to itself.

Evidence: the gfx942 forward rows of `benchmarks/data/compiler/triton_resources.csv` (the chain
rule read off them, both splits seen), the knob sample `amd_knobs.csv` compiled afterwards, and
the holdout draw (docs/model.md 16.12), whose one-stage rows added P to the one-stage arena
(model 0.25.0): of the rows the model and the launch accept, gfx942 185 of 185 within 2%,
gfx950 174 of 177 (docs/model.md 19.10 names the three).
"""

from __future__ import annotations

import numpy as np

from ...space import IntArray
from .loops import AttentionKernel, DotLoop, Operand, as_array
from .target import CompilerTarget

# Buffers of each streamed operand the AMD stream pipeliner keeps per num_stages, as compiled.
AMD_PIPELINE_BUFFERS = {
    "gfx942": {1: 1, 2: 1, 3: 2, 4: 1, 5: 4},
    "gfx950": {1: 1, 2: 2, 3: 3, 4: 2, 5: 5},
}
GFX950_PAD_INTERVAL = 256  # elements of a buffer between paddings (gfx950)
GFX950_PAD_ELEMENTS = 8  # elements of padding after each interval but the last
MFMA_LARGE = 32  # the 32x32 MFMA, chosen when a dot's smaller result dim is at least 32
MFMA_SMALL = 16


def pipeline_buffers(target: CompilerTarget, stages: IntArray) -> IntArray:
    """Buffers of each streamed operand for each candidate's num_stages (1 to 5)."""
    table = AMD_PIPELINE_BUFFERS[target.name]
    lookup = np.array([table.get(s, 1) for s in range(6)], dtype=np.int64)
    return np.asarray(lookup[np.clip(stages, 1, 5)], dtype=np.int64)


def default_nonkdim(rows: IntArray, cols: IntArray) -> IntArray:
    """The MFMA edge Triton's default picks for a dot with a rows x cols result."""
    smaller = np.minimum(rows, cols)
    return np.asarray(np.where(smaller >= MFMA_LARGE, MFMA_LARGE, MFMA_SMALL), dtype=np.int64)


def chain_crosses(loop: DotLoop, warps: IntArray, nonkdim: IntArray) -> IntArray:
    """Whether the loop's chained tile crosses the waves through LDS (module docstring);
    `nonkdim` 0 where Triton chooses the instruction."""
    n = len(warps)
    rows = as_array(loop.chain.rows, n)
    first = np.where(nonkdim > 0, nonkdim, default_nonkdim(rows, as_array(loop.chain.cols, n)))
    second = np.where(nonkdim > 0, nonkdim, default_nonkdim(rows, as_array(loop.chain.out_cols, n)))
    thin = (rows < warps * first) & (rows >= 2 * first)
    return np.asarray((warps > 1) & (thin | (first != second)))


def _buffer_bytes(operand: Operand, n: int, e: int, target: CompilerTarget) -> IntArray:
    """One LDS buffer of an operand, bytes (gfx950's padding included)."""
    elements = as_array(operand.rows, n) * as_array(operand.cols, n)
    if target.name == "gfx950":
        pads = np.maximum(elements // GFX950_PAD_INTERVAL - 1, 0)
        elements = elements + pads * GFX950_PAD_ELEMENTS
    return np.asarray(elements * e, dtype=np.int64)


def amd_loop_lds(
    loop: DotLoop,
    target: CompilerTarget,
    warps: IntArray,
    stages: IntArray,
    nonkdim: IntArray,
) -> IntArray:
    """LDS of one loop, bytes (module docstring)."""
    n = len(stages)
    e = loop.elem_bytes

    def tile(o: Operand) -> IntArray:
        return np.asarray(as_array(o.rows, n) * as_array(o.cols, n) * e, dtype=np.int64)

    resident = sum((tile(o) for o in loop.resident()), np.zeros(n, np.int64))
    single = np.max([tile(o) for o in loop.operands], axis=0)
    streamed = sum((_buffer_bytes(o, n, e, target) for o in loop.streamed()), np.zeros(n, np.int64))
    buffers = pipeline_buffers(target, stages)
    chain = as_array(loop.chain.rows, n) * as_array(loop.chain.cols, n) * e
    crossing = np.where(chain_crosses(loop, warps, nonkdim), chain, 0)
    pipelined = np.maximum(resident, buffers * streamed + crossing)
    one_stage = np.maximum(resident, np.maximum(single, crossing))
    return np.asarray(np.where(stages > 1, pipelined, one_stage), np.int64)


def amd_lds_bytes(
    kernel: AttentionKernel,
    target: CompilerTarget,
    warps: IntArray,
    stages: IntArray,
    nonkdim: IntArray | None = None,
) -> IntArray:
    """LDS of one workgroup, bytes: the largest loop's arena. `nonkdim`: the
    matrix_instr_nonkdim of each candidate (None or 0: Triton's default choice)."""
    chosen = np.zeros(len(warps), np.int64) if nonkdim is None else np.asarray(nonkdim)
    per_loop = [amd_loop_lds(loop, target, warps, stages, chosen) for loop in kernel.loops]
    return np.asarray(np.max(per_loop, axis=0), dtype=np.int64)
