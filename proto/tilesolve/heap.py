"""The C heap of a process that solves problem after problem: kept, not handed back to the
kernel between solves (glibc only). Shared by the server and the CLI (`tilesolve.heap`, beside
`tilesolve.wire`).

A solve allocates and frees numpy arrays of the whole candidate table: fa3's backward builds
46,080-row columns (368,640 bytes of int64 each), hundreds of them a solve. glibc's malloc serves
a request above its mmap threshold (128 KiB at start, raised by each freed mapping, up to 32 MiB
on 64-bit) with a fresh mapping, and gives the top of its heap back to the kernel whenever more
than its trim threshold (twice the mmap threshold) is free there. Either way the next solve's
arrays land on pages the kernel must fault in and zero again: about 3,000 minor page faults a
fa3 backward solve after the latency benchmark's earlier blocks, a third of its time (28 -> 18
ms median, benchmarks/README.md, "The C heap kept between solves"). With the mmap threshold at
glibc's own ceiling and a trim threshold of `TRIM_THRESHOLD_BYTES`, the heap keeps the pages a
solve freed for the next one: the faults fall to a few hundred over the whole block.

Who calls `keep_heap()`: `tilesolve-server` as it starts, in every server process and in every
solver process (server/solving.py: those are forked from a forkserver that was started by exec,
so they do not inherit the server's setting); the CLI's
console script for the commands that solve many problems (`table` and `portfolio`: its own
process, and each `--workers` process as it starts). A one-off CLI question starts from an empty
heap either way and is left alone, and the solver itself never changes its host process's
allocator (a library in a training process has no business there).
`benchmarks/solve_latency.py` measures as the server runs (`--default-heap`: without).
The parameters are glibc's `mallopt(3)` ones; a `MALLOC_*_` environment variable of the user's
is left in charge (glibc reads those at start), and off glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import platform

# mallopt(3)'s parameter numbers (glibc malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc's ceiling on its dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX,
# 4 x 1 MiB x sizeof(long)): arrays up to this size come from the heap
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# free bytes the heap keeps at its top: more than a solve's arrays (a fa3 backward solve grows
# the heap about 27 MiB over what lives between solves, glibc's mallinfo2)
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024
USER_VARIABLES = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_heap() -> bool:
    """Set glibc's mmap and trim thresholds (module docstring); whether they were set (False
    off glibc, where a `MALLOC_*_` variable is set, or where mallopt refuses)."""
    if platform.libc_ver()[0] != "glibc" or any(v in os.environ for v in USER_VARIABLES):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
