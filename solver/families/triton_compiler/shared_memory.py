"""The shared memory (LDS on AMD) Triton 3.9 allocates for a kernel of `tl.dot` loops: the
`metadata.shared` its launch asks for, which the launcher compares with the device's opt-in
per-block limit (`OutOfResources: shared memory, Required: ...`).

Triton allocates one arena per kernel from a liveness analysis (`lib/Analysis/Allocation.cpp`):
buffers whose lifetimes do not overlap share bytes, so the figure is the peak over program points
and, for loops run one after another, the largest loop's. Per loop, with `s = num_stages`, the
operand element size e and sizes in elements (docs/model.md 16.2 and 16.7 state each rule with the
compiled evidence):

- **pipelined, mma.sync** (cc 8.x, 12.x; cc 9.x/10.x off the warpgroup rule): every resident
  operand stays in shared memory for the whole loop (its dot operand is re-read from there each
  iteration); every streamed operand gets s - 1 buffers and every streamed row vector s - 1
  buffers (the copy for iteration i + s - 1 is issued while iteration i computes; mma.sync has
  read the tile into registers before the copy into its slot is issued). Triton lays a chained
  loop's warps along the rows of the consuming dot's result when rows >= its columns, else along
  its columns (`warpsPerTileV2`, chained dots); in the second case the chained tile (P) crosses
  warps through shared memory: rows x cols x e more, at the consuming dot. A streamed operand
  read in both orientations that Triton transposes in registers (`transposed_in_registers`:
  loaded through transposed pointers, as FlexAttention's qT and kT, or 4 bytes an element) is
  not pipelined: the pipeliner takes a load only when its users can share one shared
  encoding (AssignLatencies.cpp `isPipeliningBeneficial` -> `canHaveSharedEncoding`), and
  this load feeds a shared-memory copy and a register `convert_layout`. It gets one buffer
  and the conversion's scratch at the top of the iteration, which the chained tile reuses
  later in it (`_register_transposed_bytes`).
- **pipelined, wgmma and tcgen05** (warpgroup MMAs, which read both operands from shared memory
  while they run): s buffers of every streamed operand (tcgen05: one more for each further MMA
  that reads it, the MMAs being asynchronous), s - 1 of every row vector; the chained tile
  stays in registers. tcgen05 adds its mbarriers and the 1 KiB alignment of the swizzled
  operand placed after them (`TCGEN05_BARRIER_BYTES`, observed 8 to 1,024 bytes).
- **not pipelined** (num_stages = 1): the loads are plain loads; an operand a dot reads as stored
  is written to one buffer, alive from its load to its last such read; on mma.sync an operand
  read through `tl.trans` is transposed by a layout conversion whose scratch (`_transpose_
  scratch`) lives only at the load. The peak is taken over the loads and dots in program order.
- **FMA** (below cc 8.0: no pipeliner, no tensor cores): the operands are promoted to fp32 and
  staged through shared memory one at a time, the resident ones for the whole loop: the
  resident operands plus the largest other dot operand (a streamed tile or the chained tile), 4
  bytes an element.
- **fp32 at IEEE precision on cc >= 8.0** (`DotLoop.fma_dots`: FMA dots, pipelined loads):
  pipelined, the resident operands, s - 1 buffers of every streamed operand and row vector,
  the chained tile and one fp32 per result row (`FMA_ROW_EXCHANGE_BYTES`); one stage, the
  resident operands, the largest streamed operand and the chained tile. As compiled for the
  forward loop on sm80-sm90 (docs/model.md 20.2).
- **fp32 at tf32 precision** (mma.sync, wgmma at 4 bytes an element): the rules above, and on
  mma.sync with the warps along the columns two fp32 per result row more
  (`TF32_ROW_EXCHANGE_BYTES`, observed with 4-byte operands only).
- **AMD** (LDS; gfx942, gfx950): `lds_amd` (resident operands once, before the loop; the
  stream pipeliner's buffers, gfx950's padding; the chained tile where it crosses the waves).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...space import BoolArray, IntArray
from .lds_amd import amd_lds_bytes, amd_loop_lds
from .loops import AttentionKernel, DotLoop, Operand, as_array
from .target import CompilerTarget, DotPath, warpgroup_path

FMA_ELEMENT_BYTES = 4  # the FMA path promotes dot operands to fp32 (decomposeMixedModeDotOp)
TCGEN05_BARRIER_BYTES = 1024  # tcgen05's mbarriers and the swizzled operand's 1 KiB alignment
# The transposing layout conversion of an unpipelined mma.sync loop moves 8 rows of the tile
# per distinct warp slice a round, and at least one 16-byte vector per thread
# (getNumScratchElemsSwizzledCvt: the tile divided by its rounds; docs/model.md 16.7).
TRANSPOSE_ROWS_PER_ROUND = 8
TRANSPOSE_BYTES_PER_THREAD = 16
# A 4-byte tile loaded transposed and transposed again in registers (FlexAttention's qT and kT
# at tf32): the conversion's scratch is at least 64 bytes per thread (observed with 2, 4 and 8
# warps; flex_compare.py, docs/model.md 20.2).
TRANSPOSED_LOAD_FP32_BYTES_PER_THREAD = 64
# Per result row, bytes the compiled fp32 forward loop keeps beside its buffers (observed:
# the FMA lowering one fp32 per row, mma.sync at tf32 two when the warps lie along the
# columns; flex_compare.py, docs/model.md 20.2).
FMA_ROW_EXCHANGE_BYTES = 4
TF32_ROW_EXCHANGE_BYTES = 8
FP32_BYTES = 4


def shared_bytes(
    kernel: AttentionKernel, target: CompilerTarget, warps: IntArray, stages: IntArray
) -> IntArray:
    """Dynamic shared memory (LDS) of one block, bytes: the largest loop's arena (on AMD
    `lds_amd`'s rules, with Triton's default MFMA choice)."""
    if target.is_amd:
        return amd_lds_bytes(kernel, target, warps, stages)
    per_loop = [loop_shared_bytes(loop, target, warps, stages) for loop in kernel.loops]
    return np.asarray(np.max(per_loop, axis=0), dtype=np.int64)


def loop_shared_bytes(
    loop: DotLoop, target: CompilerTarget, warps: IntArray, stages: IntArray
) -> IntArray:
    """The arena of one loop, bytes (the module docstring's rules)."""
    n = len(warps)
    if target.is_amd:
        return amd_loop_lds(loop, target, warps, stages, np.zeros(n, np.int64))
    if not target.pipelines:
        return _fma_bytes(loop, n)
    if loop.fma_dots:
        return _fp32_fma_bytes(loop, n, stages)
    path = target.dot_path(as_array(loop.rows, n), warps)
    warpgroup = warpgroup_path(path)
    tcgen05 = np.asarray(path == DotPath.TCGEN05)
    along_rows = warps_along_rows(loop, warps)

    # Each rule is evaluated only when some candidate takes it (the choice is elementwise).
    def pipelined() -> IntArray:
        return _where_taken(
            warpgroup,
            lambda: (
                _pipelined_bytes(loop, stages, "mma.sync")
                + np.maximum(
                    _register_transposed_bytes(loop, warps, along_rows),
                    np.where(along_rows, 0, _chain_bytes(loop, n) + _tf32_exchange(loop, n)),
                )
            ),
            lambda: _where_taken(
                tcgen05,
                lambda: _pipelined_bytes(loop, stages, "wgmma"),
                lambda: _pipelined_bytes(loop, stages, "tcgen05"),
            ),
        )

    out = _where_taken(
        np.asarray(stages > 1),
        lambda: _where_taken(
            warpgroup,
            lambda: _unpipelined_bytes(loop, warps, along_rows, warpgroup=False),
            lambda: _unpipelined_bytes(loop, warps, along_rows, warpgroup=True),
        ),
        pipelined,
    )
    out = out + np.where(tcgen05, TCGEN05_BARRIER_BYTES, 0)
    return np.asarray(out, dtype=np.int64)


def _where_taken(
    chosen: BoolArray, otherwise: Callable[[], IntArray], where_chosen: Callable[[], IntArray]
) -> IntArray:
    """`where(chosen, where_chosen(), otherwise())`, evaluating a side only when some candidate
    takes it."""
    if chosen.all():
        return where_chosen()
    if not chosen.any():
        return otherwise()
    return np.asarray(np.where(chosen, where_chosen(), otherwise()))


def warps_along_rows(loop: DotLoop, warps: IntArray) -> BoolArray:
    """Whether Triton lays the loop's warps along the rows of its dots (mma.sync): one warp, or
    a chain whose consuming dot has at least as many result rows as columns (warpsPerTileV2:
    a chained dot gets [warps, 1] when shape[0] >= shape[1], else [1, warps])."""
    n = len(warps)
    rows = as_array(loop.chain.rows, n)
    cols = as_array(loop.chain.out_cols, n)
    return np.asarray((warps == 1) | (rows >= cols))


def _tile_bytes(operand: Operand, n: int, elem: int) -> IntArray:
    return as_array(operand.rows, n) * as_array(operand.cols, n) * elem


def _chain_bytes(loop: DotLoop, n: int, elem: int | None = None) -> IntArray:
    """The chained tile (P), bytes."""
    e = loop.elem_bytes if elem is None else elem
    return as_array(loop.chain.rows, n) * as_array(loop.chain.cols, n) * e


def _vector_bytes(loop: DotLoop, n: int) -> IntArray:
    total = np.zeros(n, dtype=np.int64)
    for vector in loop.vectors:
        total = total + as_array(vector.rows, n) * vector.bytes_per_row
    return total


def _pipelined_bytes(loop: DotLoop, stages: IntArray, lowering: str) -> IntArray:
    """Resident operands, the streamed operands' buffers and the row vectors' (s - 1 each):
    s - 1 buffers of a streamed operand on mma.sync, s on wgmma, and on tcgen05 s plus one for
    each further MMA that reads the operand (the asynchronous MMAs still read the oldest buffer
    when the next copy is issued)."""
    n = len(stages)
    e = loop.elem_bytes
    resident = sum((_tile_bytes(o, n, e) for o in loop.resident()), np.zeros(n, np.int64))
    ring = np.zeros(n, dtype=np.int64)
    for o in loop.streamed():
        if lowering == "mma.sync" and transposed_in_registers(o, e):
            continue  # not pipelined: `_register_transposed_bytes`
        readers = len(set(o.plain_uses) | set(o.transposed_uses))
        buffers = {"mma.sync": stages - 1, "wgmma": stages, "tcgen05": stages + readers - 1}
        ring = ring + buffers[lowering] * _tile_bytes(o, n, e)
    return np.asarray(resident + ring + (stages - 1) * _vector_bytes(loop, n))


def transposed_in_registers(operand: Operand, elem: int) -> bool:
    """Whether Triton transposes a streamed operand of a pipelined mma.sync loop in registers
    rather than by reading its buffer transposed: an operand read in both orientations that
    the kernel loads transposed (`Operand.loaded_transposed`), or any such operand at 4 bytes
    an element. Its load is then a plain load, which the pipeliner leaves alone (it pipelines
    a load whose every use is a shared-memory copy; here one use is a `convert_layout`)."""
    both = bool(operand.plain_uses) and bool(operand.transposed_uses)
    return both and (operand.loaded_transposed or elem == FP32_BYTES)


def _register_transposed_bytes(loop: DotLoop, warps: IntArray, along_rows: BoolArray) -> IntArray:
    """The operands a pipelined mma.sync loop transposes in registers (`transposed_in_
    registers`), bytes: each is loaded at the top of the iteration into one buffer (alive
    until its plain read, among the iteration's first dots) and converted to the transposed
    dot's layout through scratch alive only at the conversion; the peak over their loads in
    program order. The scratch is the transposing conversion's (`_transpose_scratch`; with
    the warps taken along the rows, and 64 bytes a thread at 4 bytes an element, for a tile
    loaded transposed). The chained tile, converted at a later dot, reuses these bytes (the
    caller takes the larger)."""
    n = len(warps)
    e = loop.elem_bytes
    threads = warps * 32
    live = np.zeros(n, dtype=np.int64)
    peak = np.zeros(n, dtype=np.int64)
    for o in loop.streamed():
        if not transposed_in_registers(o, e):
            continue
        live = live + _tile_bytes(o, n, e)
        if o.loaded_transposed:
            per_thread = TRANSPOSED_LOAD_FP32_BYTES_PER_THREAD if e == FP32_BYTES else None
            rows = np.ones(n, dtype=np.bool_)
            scratch = _transpose_scratch(o, n, e, warps, rows, threads, per_thread)
        else:
            scratch = _transpose_scratch(o, n, e, warps, along_rows, threads)
        peak = np.maximum(peak, live + scratch)
    return np.asarray(peak, dtype=np.int64)


def _transpose_scratch(
    operand: Operand,
    n: int,
    elem: int,
    warps: IntArray,
    along_rows: BoolArray,
    threads: IntArray,
    bytes_per_thread: int | None = None,
) -> IntArray:
    """Scratch of the layout conversion that transposes an operand on mma.sync (an unpipelined
    loop's, or `_register_transposed_bytes`'), bytes: 8 rows of the tile per round (8 per warp
    when the warps lie along the columns), at least `bytes_per_thread` per thread (16 unless
    given), at most the tile."""
    rows = as_array(operand.rows, n)
    row_bytes = as_array(operand.cols, n) * elem
    least = TRANSPOSE_BYTES_PER_THREAD if bytes_per_thread is None else bytes_per_thread
    per_round = np.where(
        along_rows,
        np.maximum(TRANSPOSE_ROWS_PER_ROUND * row_bytes, least * threads),
        TRANSPOSE_ROWS_PER_ROUND * warps * row_bytes,
    )
    return np.asarray(np.minimum(rows * row_bytes, per_round), dtype=np.int64)


def _unpipelined_bytes(
    loop: DotLoop, warps: IntArray, along_rows: BoolArray, *, warpgroup: bool
) -> IntArray:
    """The peak over the loads and dots of an iteration in program order (num_stages = 1)."""
    n = len(warps)
    e = loop.elem_bytes
    threads = warps * 32
    resident = sum((_tile_bytes(o, n, e) for o in loop.resident()), np.zeros(n, np.int64))

    def buffered_until(o: Operand) -> int | None:
        """The last dot that reads the operand's buffer (None: it has none)."""
        if warpgroup:
            return o.last_use
        return max(o.plain_uses) if o.plain_uses else None

    streamed = [(o, _tile_bytes(o, n, e)) for o in loop.streamed()]
    peak = resident.copy()
    for dot in range(loop.dots):
        live = resident.copy()
        for o, tile in streamed:  # buffers loaded earlier and still to be read
            until = buffered_until(o)
            if o.loaded_before < dot and until is not None and until >= dot:
                live = live + tile
        for o, tile in streamed:  # the loads issued before this dot, in declaration order
            if o.loaded_before != dot:
                continue
            if buffered_until(o) is not None:
                live = live + tile
            peak = np.maximum(peak, live)
            if o.transposed_uses and not warpgroup:
                scratch = _transpose_scratch(o, n, e, warps, along_rows, threads)
                peak = np.maximum(peak, live + scratch)
        at_dot = live
        if dot in loop.chain.consumers and not warpgroup:
            at_dot = at_dot + np.where(along_rows, 0, _chain_bytes(loop, n))
        peak = np.maximum(peak, at_dot)
    return np.asarray(peak, dtype=np.int64)


def _fma_bytes(loop: DotLoop, n: int) -> IntArray:
    """Below cc 8.0: the resident operands in fp32 plus the largest other dot operand."""
    e = FMA_ELEMENT_BYTES
    resident = sum((_tile_bytes(o, n, e) for o in loop.resident()), np.zeros(n, np.int64))
    others = [_tile_bytes(o, n, e) for o in loop.streamed()] + [_chain_bytes(loop, n, e)]
    return np.asarray(resident + np.max(others, axis=0), dtype=np.int64)


def _tf32_exchange(loop: DotLoop, n: int) -> IntArray:
    """The tf32 loop's per-row bytes beside the chained tile on mma.sync (0 at 16 bits)."""
    if loop.elem_bytes != FP32_BYTES:
        return np.zeros(n, dtype=np.int64)
    return as_array(loop.rows, n) * TF32_ROW_EXCHANGE_BYTES


def _fp32_fma_bytes(loop: DotLoop, n: int, stages: IntArray) -> IntArray:
    """fp32 dots at IEEE precision on cc >= 8.0 (the module docstring's rule)."""
    e = loop.elem_bytes
    resident = sum((_tile_bytes(o, n, e) for o in loop.resident()), np.zeros(n, np.int64))
    streamed = [_tile_bytes(o, n, e) for o in loop.streamed()]
    chain = _chain_bytes(loop, n)
    rows = as_array(loop.rows, n) * FMA_ROW_EXCHANGE_BYTES
    ring = (stages - 1) * (sum(streamed, np.zeros(n, np.int64)) + _vector_bytes(loop, n))
    pipelined = resident + ring + chain + rows
    single = resident + np.max(streamed, axis=0) + chain
    return np.asarray(np.where(stages > 1, pipelined, single), dtype=np.int64)
