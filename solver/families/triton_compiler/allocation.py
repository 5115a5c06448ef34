"""The one call a family makes: what Triton allocates for a kernel of `tl.dot` loops on a target.

    kernel = AttentionKernel((DotLoop(...), ...))      # the template's loops (`loops`)
    target = CompilerTarget.cuda(8, 0)                 # or CompilerTarget.amd("gfx942")
    alloc = allocate(kernel, target, warps, stages)    # arrays over the candidates
    alloc.shared_bytes, alloc.registers.allocated, alloc.registers.spilled

`warps` and `stages` are int arrays of one entry per candidate (num_warps, num_stages); every size
in the kernel is an int or an array of the same length. The answer holds the dynamic shared
memory (LDS on AMD) of one block in bytes, and per thread the live registers, ptxas's cap, what
it allocates and what spills (`registers.RegisterEstimate`); on AMD `registers` is None (the AMD
register file is not modelled yet: docs/model.md 16.7), and the lowering of each loop's dots
(`target.DotPath`) is given for the cost model (warpgroup MMAs reach the tensor peak).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...space import IntArray
from .loops import AttentionKernel, as_array
from .registers import RegisterEstimate, register_estimate
from .shared_memory import shared_bytes
from .target import CompilerTarget


@dataclass(frozen=True)
class Allocation:
    """What the compiler allocates for each candidate."""

    shared_bytes: IntArray  # dynamic shared memory (LDS) of one block, bytes
    registers: RegisterEstimate | None  # per thread; None on AMD (not modelled)
    dot_paths: tuple[IntArray, ...]  # each loop's lowering (`DotPath`), in loop order

    @property
    def spills(self) -> IntArray | None:
        """Registers per thread spilled to local memory (None where registers are not
        modelled)."""
        return None if self.registers is None else self.registers.spilled


def allocate(
    kernel: AttentionKernel, target: CompilerTarget, warps: IntArray, stages: IntArray
) -> Allocation:
    """Shared memory, registers and spills of `kernel` on `target` for each candidate's
    `warps` and `stages` (the rules of `shared_memory` and `registers`)."""
    if len(warps) != len(stages):
        raise ValueError(f"warps and stages differ in length: {len(warps)} and {len(stages)}")
    n = len(warps)
    registers = None if target.is_amd else register_estimate(kernel, target, warps, stages)
    paths = tuple(
        target.dot_path(as_array(loop.rows, n), warps, loop.fma_dots) for loop in kernel.loops
    )
    return Allocation(
        shared_bytes=shared_bytes(kernel, target, warps, stages),
        registers=registers,
        dot_paths=tuple(np.asarray(p, dtype=np.int64) for p in paths),
    )
