"""Solve latency of the two engines (CP-SAT and exhaustive) on a fixed set of problems.

Usage:
    .venv/bin/python benchmarks/solve_latency.py [--repeats N] [--json] [--sample N]

`--sample N` keeps the first N problems of every set: a smoke run of every block and report
(tests/test_solve_latency.py), not a measurement; its report and JSON say so.

"Cold" here means a new problem in a warm process: ortools is imported and one throwaway solve
per (engine, kernel family) is run on a problem outside the set before any timing, then every
problem of the set is solved as the process's first sight of it. The solver keeps no per-problem
cache (only the hardware catalog is cached), so every repeat of a problem is equally cold.

For each problem the engines are run `--repeats` times, interleaved (cpsat, exhaustive, cpsat,
exhaustive, ...), each call timed around `solve(...)` with `time.perf_counter`; the answer's own
`solve_ms` is recorded too. A problem's figure is the median of its repeats; the tables give the
median, p95 (numpy linear interpolation) and maximum of those per-problem medians.

Both engines must return the same ranked list of configurations (every decision variable of the
family, by name) on every problem and every repeat; the script prints the agreement count and a
reproducer for each disagreement. See benchmarks/README.md for the latest output.

Separate groups, each with its own set fingerprint, are timed the same way and reported after
the main set, which stays unchanged so that old figures remain comparable: Ascend problems
(`build_ascend_cases`) and backward-pass problems (`build_backward_cases`: fa2 and triton,
`phase="backward"`, against their own targets: median < 20 ms, p95 < 50 ms).

The process keeps its C heap between solves as `tilesolve-server` does (`tilesolve.heap`:
glibc's mmap and trim thresholds raised, so that a solve's arrays reuse the pages the last one
freed); `--default-heap` measures with glibc's defaults instead. The machine lines say which.

A decode block (`build_decode_cases`, its own set and fingerprint) times the decode phase, where
num_splits enlarges the space, against its own target: cold CP-SAT top-5 median under 20 ms and
p95 under 50 ms. An fa4 block (`build_fa4_cases`, its own set and fingerprint: issue 25) times
FlashAttention-4 on the five Blackwell parts, forward (the devices' default family) and decode,
against the same target.

An AMD block (`build_amd_cases`, its own set and fingerprint: the sets above are unchanged)
times the AMD Instinct parts' default family (ck) over head dims 64, 128 and 256, fp16, bf16 and
fp8, causal and not, against the issue-26 target: cold CP-SAT top-5 median under 20 ms and p95
under 50 ms.
An AMD triton block (`build_amd_triton_cases`, its own set and fingerprint) times the triton
family on the same parts (Triton on ROCm with waves_per_eu, matrix_instr_nonkdim and kpack:
issue 26 item 2) and the flex family's forward there, same problems rule, same target.
A flex block (`build_flex_cases`, its own set and fingerprint: issue
23) times FlexAttention's templates (forward, backward, decode; some with a sliding window) on
six sm80+ parts, against the same target.
An fa3-backward block (`build_fa3_backward_cases`, its own set and fingerprint: issue 27) times
FlashAttention-3's backward, Hopper's default backward, over head dims 64 to 256, fp16 and bf16,
causal and not, on the three cc 9.0 parts, against the same target.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import numpy as np

from tilesolve.client.progress import add_quiet_argument, tracked
from tilesolve.heap import MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES, keep_heap
from tilesolve.solver import (
    AttentionProblem,
    Phase,
    SolveAnswer,
    SolveOptions,
    get_hardware,
    solve,
)

ENGINES = ("cpsat", "exhaustive")
TOP_K = 5
TARGET_CPSAT_MEDIAN_MS = 20.0
# The fa3 family's own target (issue 10): cold CP-SAT top-5 median under 20 ms, p95 under 50 ms.
TARGET_FA3_P95_MS = 50.0
TARGET_BACKWARD_MEDIAN_MS = 20.0
TARGET_BACKWARD_P95_MS = 50.0
TARGET_DECODE_P95_MS = 50.0
TARGET_FA4_P95_MS = 50.0
TARGET_AMD_P95_MS = 50.0  # issue 26: the AMD families' cold CP-SAT p95

# ---- the problem set ---------------------------------------------------------------------------
# A fixed arithmetic rule (no random generator, so no dependence on a library's stream): problem
# i of a group takes each attribute from its list at a different stride, so the attributes vary
# independently of each other and of the hardware. The set's SHA-256 is printed with the results.

FA2_HARDWARE = (
    "a100-80gb",
    "a100-40gb",
    "h100-sxm",
    "h200",
    "l4",
    "rtx-4090",
    "a10",
    "rtx-3090",
    "l40s",
)
FA2_PER_HARDWARE = 6
FA3_HARDWARE = ("h100-sxm", "h200", "h100-pcie")
FA3_CASES = 24
HEAD_DIMS = (32, 64, 80, 96, 128, 160, 192, 256)
SEQ_LENS = (
    128,
    256,
    512,
    1000,
    1024,
    2048,
    4096,
    4097,
    8192,
    16384,
    30000,
    32768,
    65536,
    131072,
)
BATCHES = (1, 2, 3, 4, 8, 12, 16, 32)
# (heads, kv_heads): MHA (kv_heads None), GQA and MQA.
HEADS = (
    (8, None),
    (32, 8),
    (12, None),
    (16, 4),
    (64, 8),
    (32, None),
    (40, None),
    (48, 8),
    (64, 1),
    (24, 8),
    (16, None),
)


@dataclass(frozen=True)
class Case:
    """One benchmark problem: where it runs, with which family, and the problem itself."""

    name: str
    hardware: str
    kernel: str | None  # None: the hardware's default family
    problem: AttentionProblem
    extra: tuple[tuple[str, Any], ...] = ()  # more SolveOptions fields (pins, page size)

    @property
    def family(self) -> str:
        return self.kernel or get_hardware(self.hardware).default_kernel

    def options(self, engine: str) -> SolveOptions:
        return SolveOptions(engine=engine, top_k=TOP_K, kernel=self.kernel, **dict(self.extra))

    def reproducer(self, engine: str) -> str:
        fields = self.problem.model_dump(mode="json", exclude_defaults=True)
        args = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        extra = "".join(f", {k}={v!r}" for k, v in self.extra)
        return (
            f"solve(AttentionProblem({args}), {self.hardware!r}, "
            f"SolveOptions(engine={engine!r}, top_k={TOP_K}, kernel={self.kernel!r}{extra}))"
        )


def _shape(i: int, seq_stride: int = 5) -> dict[str, Any]:
    """The shape attributes of the i-th problem of a group."""
    heads, kv_heads = HEADS[(7 * i + 2) % len(HEADS)]
    seq_len = SEQ_LENS[(seq_stride * i + 3) % len(SEQ_LENS)]
    shape: dict[str, Any] = {
        "batch": BATCHES[(3 * i + 1) % len(BATCHES)],
        "heads": heads,
        "kv_heads": kv_heads,
        "seq_len": seq_len,
        "head_dim": HEAD_DIMS[(3 * i) % len(HEAD_DIMS)],
        "causal": (i % 3) != 1,
        "dropout": 0.1 if i % 5 == 4 else 0.0,
    }
    if i % 6 == 5 and seq_len <= 32768:  # queries against a longer K/V context (prefill)
        shape["seq_len_kv"] = 4 * seq_len + 17
    return shape


def build_cases() -> list[Case]:
    """The fixed problem set (identical on every run)."""
    cases: list[Case] = []
    # fa2 on every sm80+ catalog entry here: fp16 and bf16. Named explicitly since fa3 became
    # the default on cc 9.0 (h100-sxm, h200): the problems and the family are unchanged.
    for h, hw in enumerate(FA2_HARDWARE):
        for j in range(FA2_PER_HARDWARE):
            i = h * FA2_PER_HARDWARE + j
            shape = _shape(i)
            shape["dtype"] = "bf16" if (i // 2) % 2 else "fp16"
            cases.append(Case(f"fa2-{i:02d}", hw, "fa2", AttentionProblem(**shape)))
    # triton as the default family (sm70/sm75: fp16 only).
    for j in range(8):
        hw = ("v100", "t4")[j % 2]
        shape = _shape(100 + j, seq_stride=3)
        shape["dtype"] = "fp16"
        cases.append(Case(f"triton-default-{j}", hw, None, AttentionProblem(**shape)))
    # triton asked for explicitly on sm80/sm89/sm90, including fp8 where the chip has it.
    explicit = (
        ("a100-80gb", "fp16"),
        ("a100-80gb", "bf16"),
        ("a100-40gb", "bf16"),
        ("h100-sxm", "fp16"),
        ("h100-sxm", "bf16"),
        ("h100-sxm", "fp8"),
        ("h100-sxm", "fp8"),
        ("l4", "fp8"),
        ("l4", "fp8"),
        ("l4", "bf16"),
    )
    for j, (hw, dtype) in enumerate(explicit):
        shape = _shape(200 + j, seq_stride=9)
        shape["dtype"] = dtype
        if j in (2, 6):  # triton lets V's head dim differ from Q/K's (e.g. MLA-style)
            shape["head_dim_v"] = 128 if shape["head_dim"] != 128 else 64
        cases.append(Case(f"triton-explicit-{j}", hw, "triton", AttentionProblem(**shape)))
    # fa3 (issue 10), a separate block: the default family on cc 9.0 (kernel None) and asked
    # for by name, in fp16, bf16 and fp8; FA3 has no dropout. Every head dim of the set is a
    # multiple of 16, as fp8 needs.
    for j in range(FA3_CASES):
        hw = FA3_HARDWARE[j % len(FA3_HARDWARE)]
        shape = _shape(300 + j, seq_stride=3)
        shape["dropout"] = 0.0
        shape["dtype"] = ("bf16", "fp8", "fp16")[(j // 3) % 3]
        kernel = None if j % 2 else "fa3"
        cases.append(Case(f"fa3-{j:02d}", hw, kernel, AttentionProblem(**shape)))
    return cases


# ---- the Ascend group (the ascend family; reported apart from the set above) -------------------
ASCEND_HARDWARE = ("ascend-910b", "ascend-910", "ascend-310p3")
ASCEND_PER_HARDWARE = 6
ASCEND_HEAD_DIMS = (64, 80, 96, 128, 192, 256)


AMD_HARDWARE = ("mi300x", "mi325x", "mi355x")
AMD_HEAD_DIMS = (64, 128, 256)
AMD_DTYPES = ("fp16", "bf16", "fp8")
AMD_PER_HARDWARE = 12


def _amd_cases(
    first: int, prefix: str, kernel: str | None, dtypes: tuple[str, ...] = AMD_DTYPES
) -> list[Case]:
    """12 problems per Instinct part from problem index `first`, by the same arithmetic rule
    (no dropout: the AMD models have none), each head dim with each dtype and both masks over
    the block."""
    cases: list[Case] = []
    for h, hw in enumerate(AMD_HARDWARE):
        for j in range(AMD_PER_HARDWARE):
            i = first + h * AMD_PER_HARDWARE + j
            shape = _shape(i)
            shape["head_dim"] = AMD_HEAD_DIMS[j % len(AMD_HEAD_DIMS)]
            shape["dtype"] = dtypes[(j // len(AMD_HEAD_DIMS) + h) % len(dtypes)]
            shape["causal"] = j % 2 == 0
            shape["dropout"] = 0.0
            cases.append(Case(f"{prefix}-{i - first:02d}", hw, kernel, AttentionProblem(**shape)))
    return cases


def build_amd_cases() -> list[Case]:
    """The AMD block: the devices' default family (ck)."""
    return _amd_cases(600, "amd", None)


def build_amd_triton_cases() -> list[Case]:
    """The AMD triton block: other problems by the same rule, the triton family by name, then
    the flex family's forward on ROCm (fp16 and bf16: FlexAttention has no fp8 path)."""
    return [
        *_amd_cases(700, "amdt", "triton"),
        *_amd_cases(800, "amdf", "flex", ("fp16", "bf16")),
    ]


def build_ascend_cases() -> list[Case]:
    """The Ascend group: 6 problems per Ascend catalog device, by the same arithmetic rule
    (head dims up to 256; bf16 on the 910B only, the one part whose kernels take it)."""
    cases: list[Case] = []
    for h, hw in enumerate(ASCEND_HARDWARE):
        for j in range(ASCEND_PER_HARDWARE):
            i = 300 + h * ASCEND_PER_HARDWARE + j
            shape = _shape(i)
            shape["head_dim"] = ASCEND_HEAD_DIMS[(5 * i) % len(ASCEND_HEAD_DIMS)]
            shape["dropout"] = 0.0  # not a FlashAttentionScore input the model prices
            shape["dtype"] = "bf16" if hw == "ascend-910b" and j % 2 else "fp16"
            cases.append(Case(f"ascend-{i - 300:02d}", hw, None, AttentionProblem(**shape)))
    return cases


# Backward problems: fa2 on the sm80+ parts (fp16 and bf16, dropout on some), triton asked for
# on sm80/sm89/sm90 and as the default on v100/t4 (fp16, no dropout: the triton backward has
# none). Same arithmetic rule as the forward set, from other indices.
BACKWARD_FA2_PER_HARDWARE = 4
BACKWARD_TRITON = (
    ("a100-80gb", "triton"),
    ("h100-sxm", "triton"),
    ("l4", "triton"),
    ("rtx-4090", "triton"),
    ("a100-40gb", "triton"),
    ("h200", "triton"),
    ("v100", None),
    ("t4", None),
)


def build_backward_cases() -> list[Case]:
    """The fixed backward problem set (identical on every run)."""
    cases: list[Case] = []
    for h, hw in enumerate(FA2_HARDWARE):
        for j in range(BACKWARD_FA2_PER_HARDWARE):
            i = 300 + h * BACKWARD_FA2_PER_HARDWARE + j
            shape = _shape(i, seq_stride=5)
            shape["dtype"] = "bf16" if (i // 2) % 2 else "fp16"
            # fa2 by name: on Hopper the default backward is fa3 (model 0.8.0), where fa2
            # stood in before; the problems and the family timed are the same
            cases.append(
                Case(
                    f"bwd-fa2-{i - 300:02d}", hw, "fa2", AttentionProblem(**shape, phase="backward")
                )
            )
    for j, (hw, kernel) in enumerate(BACKWARD_TRITON * 2):
        shape = _shape(400 + j, seq_stride=11)
        shape["dtype"] = "fp16"
        shape["dropout"] = 0.0
        cases.append(
            Case(f"bwd-triton-{j:02d}", hw, kernel, AttentionProblem(**shape, phase="backward"))
        )
    return cases


# ---- the decode block ----------------------------------------------------------------------
# Decode steps (1 to 8 query rows against a cache), fa2 and flashinfer, by the same kind of
# fixed rule: batch 1 to 128, MHA and GQA, caches of 1k to 128k tokens, head dims 64 to 256,
# a few with a paged cache (pinned or auto); then fa3 on two Hopper parts and ascend on 910B
# and 310P3 by the same rule (24 more steps).

DECODE_HARDWARE = ("a100-80gb", "h100-sxm", "h200", "l4", "rtx-4090", "a10", "l40s")
DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 3)
DECODE_HEADS = ((32, 8), (32, None), (64, 8), (16, None), (28, 4), (48, 8), (32, 4))
DECODE_KV = (1024, 4096, 8191, 32768, 131072, 16384, 2000)
DECODE_ROWS = (1, 1, 1, 2, 4, 8, 1)
DECODE_HEAD_DIMS = (128, 64, 128, 256, 128, 96)
DECODE_PER_HARDWARE = 6
DECODE_FAMILY_ROWS = (
    ("h100-sxm", "fa3"),
    ("h200", "fa3"),
    ("ascend-910b", "ascend"),
    ("ascend-310p3", "ascend"),
)


def _decode_shape(i: int) -> dict[str, Any]:
    """The shape of the i-th decode step but its head dim and dtype: batch, heads, the query
    rows and the cache by the decode rule."""
    heads, kv_heads = DECODE_HEADS[(5 * i + 1) % len(DECODE_HEADS)]
    seq_len_kv = DECODE_KV[(3 * i + 2) % len(DECODE_KV)]
    return {
        "batch": DECODE_BATCHES[(7 * i) % len(DECODE_BATCHES)],
        "heads": heads,
        "kv_heads": kv_heads,
        "seq_len": min(DECODE_ROWS[(2 * i + 1) % len(DECODE_ROWS)], seq_len_kv),
        "seq_len_kv": seq_len_kv,
        "causal": i % 4 == 3,
        "phase": "decode",
    }


def build_decode_cases() -> list[Case]:
    """The fixed decode set (identical on every run)."""
    cases: list[Case] = []
    for h, hw in enumerate(DECODE_HARDWARE):
        for j in range(DECODE_PER_HARDWARE):
            i = h * DECODE_PER_HARDWARE + j
            problem = AttentionProblem(
                **_decode_shape(i),
                head_dim=DECODE_HEAD_DIMS[(5 * i) % len(DECODE_HEAD_DIMS)],
                dtype="bf16" if i % 3 == 1 else "fp16",
            )
            kernel = ("fa2", "flashinfer")[i % 2]
            extra: tuple[tuple[str, Any], ...] = ()
            if i % 7 == 5:
                extra = (("choose_page_size", True),)
            elif i % 7 == 6:
                page = 256 if kernel == "fa2" else 16
                extra = (("parameter_pins", {"page_size": page}),)
            cases.append(Case(f"decode-{i:02d}", hw, kernel, problem, extra))
    # fa3 (FlashAttention-3's split / PackGQA path, Hopper's default) and ascend (CANN's
    # IncreFlashAttention), by the same rule, after the rows above (which are unchanged)
    for h, (hw, kernel) in enumerate(DECODE_FAMILY_ROWS):
        for j in range(DECODE_PER_HARDWARE):
            i = (len(DECODE_HARDWARE) + h) * DECODE_PER_HARDWARE + j
            problem = AttentionProblem(
                **_decode_shape(i),
                head_dim=DECODE_HEAD_DIMS[(5 * i) % len(DECODE_HEAD_DIMS)],
                dtype="bf16" if i % 3 == 1 and hw != "ascend-310p3" else "fp16",
            )
            extra: tuple[tuple[str, Any], ...] = ()
            if i % 7 == 5:
                extra = (("choose_page_size", True),)
            elif i % 7 == 6:
                extra = (("parameter_pins", {"page_size": 256 if kernel == "fa3" else 128}),)
            cases.append(Case(f"decode-{i:02d}", hw, kernel, problem, extra))
    return cases


# ---- the fa4 block (issue 25) ---------------------------------------------------------------
# FlashAttention-4 on the Blackwell parts, forward as the devices' default family (kernel None)
# and decode, by the same kind of fixed rule: head dims the kernels take (FA4 has no dropout;
# sm_120 takes no fp8), MHA and GQA, with and without a longer cache.
FA4_SM100 = ("b200", "gb200", "b300")
FA4_SM120 = ("rtx-5090", "rtx-pro-6000")
FA4_HEAD_DIMS = ((64, None), (128, None), (192, 128), (256, None), (96, None), (80, None))
FA4_FORWARD_PER_HARDWARE = 6
FA4_DECODE_PER_HARDWARE = 2


def build_fa4_cases() -> list[Case]:
    """The fixed fa4 set (identical on every run)."""
    cases: list[Case] = []
    for h, hw in enumerate((*FA4_SM100, *FA4_SM120)):
        sm100 = hw in FA4_SM100
        for j in range(FA4_FORWARD_PER_HARDWARE):
            i = 500 + h * FA4_FORWARD_PER_HARDWARE + j
            shape = _shape(i, seq_stride=5)
            shape["dropout"] = 0.0
            head_dim, head_dim_v = FA4_HEAD_DIMS[(5 * i) % len(FA4_HEAD_DIMS)]
            shape["head_dim"], shape["head_dim_v"] = head_dim, head_dim_v
            dtypes = ("bf16", "fp8", "fp16") if sm100 else ("bf16", "fp16")
            shape["dtype"] = dtypes[(i // 2) % len(dtypes)]
            cases.append(Case(f"fa4-{i - 500:02d}", hw, None, AttentionProblem(**shape)))
        for j in range(FA4_DECODE_PER_HARDWARE):
            i = 600 + h * FA4_DECODE_PER_HARDWARE + j
            problem = AttentionProblem(**_decode_shape(i), head_dim=(128, 64)[i % 2], dtype="bf16")
            cases.append(Case(f"fa4-decode-{i - 600:02d}", hw, None, problem))
    return cases


FLEX_HARDWARE = ("a100-80gb", "rtx-4090", "l4", "h100-sxm", "a10", "b200")
FLEX_HEAD_DIMS = ((64, None), (128, None), (192, 128), (256, None), (96, None))
FLEX_PHASES = ("forward", "backward", "decode")
FLEX_PER_HARDWARE = 6
TARGET_FLEX_P95_MS = 50.0


def build_flex_cases() -> list[Case]:
    """The fixed flex set (issue 23: forward, backward, decode; identical on every run)."""
    cases: list[Case] = []
    for h, hw in enumerate(FLEX_HARDWARE):
        for j in range(FLEX_PER_HARDWARE):
            i = 700 + h * FLEX_PER_HARDWARE + j
            phase = FLEX_PHASES[i % len(FLEX_PHASES)]
            head_dim, head_dim_v = FLEX_HEAD_DIMS[(3 * i) % len(FLEX_HEAD_DIMS)]
            dtype = ("bf16", "fp16")[(i // 3) % 2]
            if phase == "decode":
                shape = _decode_shape(i)
                group = shape["heads"] // (shape["kv_heads"] or shape["heads"])
                if group & (group - 1):  # FlexDecoding takes power-of-two groups only
                    shape["kv_heads"] = None
            else:
                shape = _shape(i, seq_stride=3) | {"dropout": 0.0, "phase": phase}
            shape |= {"head_dim": head_dim, "head_dim_v": head_dim_v, "dtype": dtype}
            problem = AttentionProblem(**shape)
            extra = (("window", 1024),) if j == 4 and phase != "decode" else ()
            cases.append(Case(f"flex-{i - 700:02d}", hw, "flex", problem, extra))
    return cases


# ---- the fa3 backward block -------------------------------------------------------------------
# FlashAttention-3's backward (issue 27), Hopper's default backward: the head dims FA3's backward
# compiles (64, 96, 128, 192, 256), fp16 and bf16, causal and not, on the three cc 9.0 parts.
FA3_BACKWARD_HEAD_DIMS = (64, 96, 128, 192, 256)
FA3_BACKWARD_PER_HARDWARE = 8
TARGET_FA3_BACKWARD_P95_MS = 50.0


def build_fa3_backward_cases() -> list[Case]:
    """The fixed fa3 backward set (identical on every run)."""
    cases: list[Case] = []
    for h, hw in enumerate(FA3_HARDWARE):
        for j in range(FA3_BACKWARD_PER_HARDWARE):
            i = 800 + h * FA3_BACKWARD_PER_HARDWARE + j
            shape = _shape(i, seq_stride=3) | {"dropout": 0.0, "phase": "backward"}
            shape["head_dim"] = FA3_BACKWARD_HEAD_DIMS[(3 * i) % len(FA3_BACKWARD_HEAD_DIMS)]
            shape["dtype"] = ("bf16", "fp16")[(i // 2) % 2]
            shape["causal"] = i % 2 == 0
            cases.append(Case(f"bwd-fa3-{i - 800:02d}", hw, "fa3", AttentionProblem(**shape)))
    return cases


def fingerprint(cases: list[Case]) -> str:
    doc = [[c.name, c.hardware, c.kernel, c.problem.model_dump(mode="json")] for c in cases]
    if any(c.extra for c in cases):  # the forward set's fingerprint is unchanged
        doc = [[*row, dict(c.extra)] for row, c in zip(doc, cases, strict=True)]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


# ---- measuring ---------------------------------------------------------------------------------

HEAP_KEPT = (
    f"kept between solves, as tilesolve-server's (glibc mmap threshold "
    f"{MMAP_THRESHOLD_BYTES >> 20} MiB, trim threshold {TRIM_THRESHOLD_BYTES >> 20} MiB)"
)
# what main() did to the process's C heap: left at the default, or kept as the server keeps it
HEAP_DEFAULT = "glibc's defaults (--default-heap, or not glibc)"


@dataclass
class EngineRuns:
    wall_ms: list[float] = field(default_factory=list)
    solve_ms: list[float] = field(default_factory=list)
    rankings: list[list[tuple[tuple[str, int], ...]]] = field(default_factory=list)
    times_us: list[list[float]] = field(default_factory=list)
    status: str = ""
    search_space_size: int = 0
    feasible_count: int = 0

    @property
    def median_wall_ms(self) -> float:
        return statistics.median(self.wall_ms)

    @property
    def median_solve_ms(self) -> float:
        return statistics.median(self.solve_ms)


def ranking(answer: SolveAnswer) -> list[tuple[tuple[str, int], ...]]:
    """The ranked configurations, each with every decision variable of its family by name."""
    return [tuple(c.parameters.items()) for c in answer.candidates]


def timed_solve(case: Case, engine: str) -> tuple[float, SolveAnswer]:
    options = case.options(engine)
    started = time.perf_counter()
    answer = solve(case.problem, case.hardware, options)
    return (time.perf_counter() - started) * 1e3, answer


def warm_up() -> None:
    """Import the CP-SAT program (and so OR-Tools); one throwaway solve per engine and family,
    on a problem not in the set."""
    import tilesolve.solver.ip_model  # noqa: F401

    throwaway = AttentionProblem(batch=5, heads=20, seq_len=3333, head_dim=72, causal=True)
    for kernel, hardware in (("fa2", "rtx-5090"), ("triton", "rtx-5090"), ("fa3", "h100-sxm")):
        for engine in ENGINES:
            solve(throwaway, hardware, SolveOptions(engine=engine, top_k=TOP_K, kernel=kernel))
    for engine in ENGINES:
        solve(throwaway, "ascend-910b", SolveOptions(engine=engine, top_k=TOP_K))
    for problem in (throwaway.model_copy(update={"phase": "backward"}),):
        for kernel in ("fa2", "triton"):
            for engine in ENGINES:
                solve(problem, "rtx-5090", SolveOptions(engine=engine, top_k=TOP_K, kernel=kernel))
    step = AttentionProblem(batch=5, heads=20, seq_len=1, seq_len_kv=3333, head_dim=72)
    step = step.model_copy(update={"phase": Phase.DECODE})
    for kernel in ("fa2", "flashinfer"):
        for engine in ENGINES:
            solve(step, "rtx-5090", SolveOptions(engine=engine, top_k=TOP_K, kernel=kernel))
    for kernel, hardware in (("fa3", "h100-sxm"), ("ascend", "ascend-910b")):
        for engine in ENGINES:
            solve(step, hardware, SolveOptions(engine=engine, top_k=TOP_K, kernel=kernel))
    for hardware in ("b200", "rtx-5090"):  # fa4's two kernels, forward and decode
        for problem in (throwaway, step):
            for engine in ENGINES:
                solve(problem, hardware, SolveOptions(engine=engine, top_k=TOP_K, kernel="fa4"))
    for engine in ENGINES:
        solve(throwaway, "mi300x", SolveOptions(engine=engine, top_k=TOP_K))
    backward = throwaway.model_copy(update={"phase": Phase.BACKWARD, "head_dim": 80})
    for engine in ENGINES:
        solve(backward, "h100-sxm", SolveOptions(engine=engine, top_k=TOP_K, kernel="fa3"))


def run(cases: list[Case], repeats: int, quiet: bool) -> dict[str, dict[str, EngineRuns]]:
    """Every case solved `repeats` times by each engine (a progress bar on a terminal's
    stderr unless `quiet`)."""
    results: dict[str, dict[str, EngineRuns]] = {}
    for case in tracked(cases, "problems solved", quiet, len(cases)):
        runs = {engine: EngineRuns() for engine in ENGINES}
        for _ in range(repeats):
            for engine in ENGINES:  # interleaved: cpsat, exhaustive, cpsat, exhaustive, ...
                wall_ms, answer = timed_solve(case, engine)
                r = runs[engine]
                r.wall_ms.append(wall_ms)
                r.solve_ms.append(answer.solve_ms)
                r.rankings.append(ranking(answer))
                r.times_us.append([c.predicted_time_us for c in answer.candidates])
                r.status = answer.status.value
                r.search_space_size = answer.search_space_size
                r.feasible_count = answer.feasible_count
        results[case.name] = runs
    return results


def disagreement(case: Case, runs: dict[str, EngineRuns]) -> str | None:
    """Why the engines (or repeats of one engine) differ on this problem, or None."""
    reference = runs["exhaustive"].rankings[0]
    for engine in ENGINES:
        for rep, ranked in enumerate(runs[engine].rankings):
            if ranked != reference:
                return (
                    f"{case.name}: {engine} repeat {rep + 1} returned {ranked}, "
                    f"exhaustive returned {reference}\n    {case.reproducer(engine)}"
                )
    return None


# ---- reporting ---------------------------------------------------------------------------------


def summarize(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=np.float64)
    return {
        "median_ms": float(np.median(arr)),
        "p95_ms": float(np.percentile(arr, 95)),
        "max_ms": float(np.max(arr)),
        "min_ms": float(np.min(arr)),
    }


def context(cases: list[Case], repeats: int, heap: str) -> dict[str, Any]:
    """The run's circumstances, for the JSON document (`heap`: HEAP_KEPT or HEAP_DEFAULT)."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "ortools": metadata.version("ortools"),
        "numpy": np.__version__,
        "pydantic": metadata.version("pydantic"),
        "cpu_count": os.cpu_count(),
        "sched_affinity": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else None,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "problems": len(cases),
        "problem_set_sha256": fingerprint(cases),
        "repeats": repeats,
        "top_k": TOP_K,
        "git": _git_state(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "heap": heap,
    }


def _git_state() -> str:
    """HEAD, and the solver files with uncommitted changes (the numbers depend on them)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "solver"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    changed = [line[3:] for line in dirty if line.strip()]
    return head + (f" + uncommitted {', '.join(changed)}" if changed else " (solver/ clean)")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def summary(cases: list[Case], results: dict[str, dict[str, EngineRuns]]) -> dict[str, Any]:
    groups: dict[str, list[Case]] = {"all": cases}
    for case in cases:
        groups.setdefault(case.family, []).append(case)
    out: dict[str, Any] = {}
    for group, members in groups.items():
        per_engine: dict[str, dict[str, Any]] = {}
        for engine in ENGINES:
            wall = [results[c.name][engine].median_wall_ms for c in members]
            own = [results[c.name][engine].median_solve_ms for c in members]
            per_engine[engine] = {
                "problems": len(members),
                "wall": summarize(wall),
                "solve_ms": summarize(own),
            }
        ratio = (
            per_engine["cpsat"]["wall"]["median_ms"] / per_engine["exhaustive"]["wall"]["median_ms"]
        )
        spaces = sorted({results[c.name]["cpsat"].search_space_size for c in members})
        out[group] = {"engines": per_engine, "cpsat_over_exhaustive": ratio, "space_sizes": spaces}
    return out


def print_report(
    ctx: dict[str, Any],
    cases: list[Case],
    results: dict[str, dict[str, EngineRuns]],
    stats: dict[str, Any],
    disagreements: list[str],
    *,
    machine: bool = True,
    target: bool = True,
) -> None:
    if machine:
        print_machine(ctx)
    print_tables(ctx, cases, results, stats, disagreements, target=target)


def print_machine(ctx: dict[str, Any]) -> None:
    print("machine")
    print(f"  python    {ctx['python']} ({ctx['implementation']})")
    print(f"  ortools   {ctx['ortools']}   numpy {ctx['numpy']}   pydantic {ctx['pydantic']}")
    print(f"  cpus      {ctx['cpu_count']} (usable {ctx['sched_affinity']})  {ctx['processor']}")
    print(f"  platform  {ctx['platform']}")
    print(f"  date      {ctx['date_utc']}")
    print(f"  tree      {ctx['git']}")
    print(f"  C heap    {ctx['heap']}")


def print_tables(
    ctx: dict[str, Any],
    cases: list[Case],
    results: dict[str, dict[str, EngineRuns]],
    stats: dict[str, Any],
    disagreements: list[str],
    *,
    target: bool,
) -> None:
    print(
        f"problems {ctx['problems']} (set {ctx['problem_set_sha256']}), repeats {ctx['repeats']} "
        f"interleaved, top_k {ctx['top_k']}; per-problem median of repeats, wall time of solve()"
    )
    print()

    header = f"{'engine':<11} {'problems':>8} {'median ms':>10} {'p95 ms':>9} {'max ms':>9}"
    header += f" {'solve_ms med':>12}"
    print(header)
    print("-" * len(header))
    for engine in ENGINES:
        e = stats["all"]["engines"][engine]
        w = e["wall"]
        print(
            f"{engine:<11} {e['problems']:>8} {w['median_ms']:>10.2f} {w['p95_ms']:>9.2f} "
            f"{w['max_ms']:>9.2f} {e['solve_ms']['median_ms']:>12.2f}"
        )
    print(f"cpsat/exhaustive (ratio of medians): {stats['all']['cpsat_over_exhaustive']:.2f}x")
    print()

    header = (
        f"{'family':<7} {'space':>5} {'engine':<11} {'problems':>8} {'median ms':>10} "
        f"{'p95 ms':>9} {'max ms':>9} {'cpsat/exh':>9}"
    )
    print(header)
    print("-" * len(header))
    for family in sorted(k for k in stats if k != "all"):
        g = stats[family]
        space = "/".join(str(s) for s in g["space_sizes"])
        for engine in ENGINES:
            e = g["engines"][engine]
            w = e["wall"]
            ratio = f"{g['cpsat_over_exhaustive']:.2f}x" if engine == "cpsat" else ""
            print(
                f"{family:<7} {space:>5} {engine:<11} {e['problems']:>8} {w['median_ms']:>10.2f} "
                f"{w['p95_ms']:>9.2f} {w['max_ms']:>9.2f} {ratio:>9}"
            )
    print()

    slowest = sorted(cases, key=lambda c: results[c.name]["cpsat"].median_wall_ms, reverse=True)
    print("slowest cpsat problems (median wall ms: cpsat / exhaustive)")
    for case in slowest[:5]:
        r = results[case.name]
        p = case.problem
        print(
            f"  {case.name:<18} {case.hardware:<10} {case.family:<6} "
            f"{r['cpsat'].median_wall_ms:8.2f} / {r['exhaustive'].median_wall_ms:6.2f}  "
            f"d={p.head_dim} s={p.seq_len} {p.dtype.value} feasible "
            f"{r['cpsat'].feasible_count}/{r['cpsat'].search_space_size}"
        )
    print()

    statuses: dict[str, int] = {}
    for case in cases:
        key = f"{results[case.name]['cpsat'].status}/{results[case.name]['exhaustive'].status}"
        statuses[key] = statuses.get(key, 0) + 1
    print(
        "status (cpsat/exhaustive): " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    )
    agree = len(cases) - len(disagreements)
    print(f"agreement: {agree}/{len(cases)} problems")
    for line in disagreements:
        print(f"  DISAGREE {line}")
    if not target:
        return
    median = stats["all"]["engines"]["cpsat"]["wall"]["median_ms"]
    met = "met" if median < TARGET_CPSAT_MEDIAN_MS else "NOT met"
    print(
        f"target: cold CP-SAT solve (top {TOP_K}) median < {TARGET_CPSAT_MEDIAN_MS:.0f} ms: "
        f"{met} ({median:.2f} ms)"
    )
    if "fa3" in stats:
        wall = stats["fa3"]["engines"]["cpsat"]["wall"]
        met = (
            "met"
            if wall["median_ms"] < TARGET_CPSAT_MEDIAN_MS and wall["p95_ms"] < TARGET_FA3_P95_MS
            else "NOT met"
        )
        print(
            f"target (fa3): cold CP-SAT top {TOP_K} median < {TARGET_CPSAT_MEDIAN_MS:.0f} ms and "
            f"p95 < {TARGET_FA3_P95_MS:.0f} ms: {met} ({wall['median_ms']:.2f} / "
            f"{wall['p95_ms']:.2f} ms)"
        )


def print_backward_report(
    ctx: dict[str, Any],
    cases: list[Case],
    results: dict[str, dict[str, EngineRuns]],
    stats: dict[str, Any],
    disagreements: list[str],
) -> None:
    print()
    print(
        f"backward problems {len(cases)} (set {fingerprint(cases)}), repeats {ctx['repeats']} "
        f"interleaved, top_k {TOP_K}"
    )
    header = (
        f"{'family':<7} {'space':>9} {'engine':<11} {'problems':>8} {'median ms':>10} "
        f"{'p95 ms':>9} {'max ms':>9} {'cpsat/exh':>9}"
    )
    print(header)
    print("-" * len(header))
    for family in ["all", *sorted(k for k in stats if k != "all")]:
        g = stats[family]
        space = "/".join(str(s) for s in g["space_sizes"]) if family != "all" else ""
        for engine in ENGINES:
            e = g["engines"][engine]
            w = e["wall"]
            ratio = f"{g['cpsat_over_exhaustive']:.2f}x" if engine == "cpsat" else ""
            print(
                f"{family:<7} {space:>9} {engine:<11} {e['problems']:>8} {w['median_ms']:>10.2f} "
                f"{w['p95_ms']:>9.2f} {w['max_ms']:>9.2f} {ratio:>9}"
            )
    slowest = sorted(cases, key=lambda c: results[c.name]["cpsat"].median_wall_ms, reverse=True)
    print("slowest backward cpsat problems (median wall ms: cpsat / exhaustive)")
    for case in slowest[:3]:
        r = results[case.name]
        p = case.problem
        print(
            f"  {case.name:<18} {case.hardware:<10} {case.family:<6} "
            f"{r['cpsat'].median_wall_ms:8.2f} / {r['exhaustive'].median_wall_ms:6.2f}  "
            f"d={p.head_dim} s={p.seq_len} {p.dtype.value} feasible "
            f"{r['cpsat'].feasible_count}/{r['cpsat'].search_space_size}"
        )
    statuses: dict[str, int] = {}
    for case in cases:
        key = f"{results[case.name]['cpsat'].status}/{results[case.name]['exhaustive'].status}"
        statuses[key] = statuses.get(key, 0) + 1
    print(
        "status (cpsat/exhaustive): " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
    )
    print(f"agreement: {len(cases) - len(disagreements)}/{len(cases)} backward problems")
    for line in disagreements:
        print(f"  DISAGREE {line}")
    wall = stats["all"]["engines"]["cpsat"]["wall"]
    median_met = "met" if wall["median_ms"] < TARGET_BACKWARD_MEDIAN_MS else "NOT met"
    p95_met = "met" if wall["p95_ms"] < TARGET_BACKWARD_P95_MS else "NOT met"
    print(
        f"target: backward cold CP-SAT solve (top {TOP_K}) median < "
        f"{TARGET_BACKWARD_MEDIAN_MS:.0f} ms: {median_met} ({wall['median_ms']:.2f} ms); "
        f"p95 < {TARGET_BACKWARD_P95_MS:.0f} ms: {p95_met} ({wall['p95_ms']:.2f} ms)"
    )


def to_json(
    ctx: dict[str, Any],
    cases: list[Case],
    results: dict[str, dict[str, EngineRuns]],
    stats: dict[str, Any],
    disagreements: list[str],
) -> dict[str, Any]:
    problems = []
    for case in cases:
        runs = results[case.name]
        problems.append(
            {
                "name": case.name,
                "hardware": case.hardware,
                "kernel": case.kernel,
                "family": case.family,
                "problem": case.problem.model_dump(mode="json"),
                "engines": {
                    engine: {
                        "wall_ms": r.wall_ms,
                        "solve_ms": r.solve_ms,
                        "median_wall_ms": r.median_wall_ms,
                        "median_solve_ms": r.median_solve_ms,
                        "status": r.status,
                        "search_space_size": r.search_space_size,
                        "feasible_count": r.feasible_count,
                        "ranking": [list(k) for k in r.rankings[0]],
                    }
                    for engine, r in runs.items()
                },
            }
        )
    return {
        "context": ctx,
        "summary": stats,
        "agreement": {"agree": len(cases) - len(disagreements), "problems": len(cases)},
        "disagreements": disagreements,
        "target_cpsat_median_ms": TARGET_CPSAT_MEDIAN_MS,
        "problems": problems,
    }


@dataclass(frozen=True)
class OwnBlock:
    """A block of its own (its own set and fingerprint, the same timing, its own p95 target):
    `key` in the JSON document, `label` in the report."""

    key: str
    label: str
    build: Callable[[], list[Case]]
    p95_target_ms: float
    target_in_json: bool = True  # decode's document has carried no target field


OWN_BLOCKS = (
    OwnBlock("decode", "decode", build_decode_cases, TARGET_DECODE_P95_MS, target_in_json=False),
    OwnBlock("fa4", "fa4", build_fa4_cases, TARGET_FA4_P95_MS),
    OwnBlock("amd", "amd", build_amd_cases, TARGET_AMD_P95_MS),
    OwnBlock("amd_triton", "amd triton", build_amd_triton_cases, TARGET_AMD_P95_MS),
    OwnBlock("flex", "flex", build_flex_cases, TARGET_FLEX_P95_MS),
    OwnBlock("fa3_backward", "fa3-backward", build_fa3_backward_cases, TARGET_FA3_BACKWARD_P95_MS),
)


@dataclass(frozen=True)
class OwnBlockResult:
    """One own block's runs, summary and disagreements."""

    block: OwnBlock
    cases: list[Case]
    results: dict[str, dict[str, EngineRuns]]
    stats: dict[str, Any]
    disagreements: list[str]

    def to_json(self, repeats: int, heap: str) -> dict[str, Any]:
        doc = to_json(
            context(self.cases, repeats, heap),
            self.cases,
            self.results,
            self.stats,
            self.disagreements,
        )
        if self.block.target_in_json:
            doc["target_p95_ms"] = self.block.p95_target_ms
        return doc

    def print_report(self) -> None:
        print_decode_report(
            self.cases,
            self.results,
            self.stats,
            self.disagreements,
            self.block.label,
            self.block.p95_target_ms,
        )


def sampled(cases: list[Case], sample: int | None) -> list[Case]:
    """The set, or its first `sample` problems (a smoke run)."""
    return cases if sample is None else cases[:sample]


def run_own_block(
    block: OwnBlock, repeats: int, quiet: bool, sample: int | None = None
) -> OwnBlockResult:
    """Build, time and summarise one own block (its first `sample` problems when given)."""
    cases = sampled(block.build(), sample)
    results = run(cases, repeats, quiet=quiet)
    disagreements = [d for c in cases if (d := disagreement(c, results[c.name])) is not None]
    return OwnBlockResult(block, cases, results, summary(cases, results), disagreements)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="solves per engine per problem")
    parser.add_argument("--json", action="store_true", help="print the raw numbers as JSON")
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="only the first N problems of every set: a smoke run, not a measurement",
    )
    parser.add_argument(
        "--default-heap",
        action="store_true",
        help="leave glibc's malloc at its defaults (without: as tilesolve-server keeps its heap, "
        "tilesolve.heap)",
    )
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    heap = HEAP_KEPT if not args.default_heap and keep_heap() else HEAP_DEFAULT
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")

    cases = sampled(build_cases(), args.sample)
    ascend = sampled(build_ascend_cases(), args.sample)
    backward = sampled(build_backward_cases(), args.sample)
    warm_up()
    results = run(cases, args.repeats, quiet=args.quiet)
    ascend_results = run(ascend, args.repeats, quiet=args.quiet)
    disagreements = [d for c in cases if (d := disagreement(c, results[c.name])) is not None]
    ascend_disagreements = [
        d for c in ascend if (d := disagreement(c, ascend_results[c.name])) is not None
    ]
    bwd_results = run(backward, args.repeats, quiet=args.quiet)
    bwd_disagreements = [
        d for c in backward if (d := disagreement(c, bwd_results[c.name])) is not None
    ]
    ctx = context(cases, args.repeats, heap)
    ascend_ctx = context(ascend, args.repeats, heap)
    stats = summary(cases, results)
    ascend_stats = summary(ascend, ascend_results)
    bwd_stats = summary(backward, bwd_results)
    own = [run_own_block(block, args.repeats, args.quiet, args.sample) for block in OWN_BLOCKS]
    if args.json:
        doc = to_json(ctx, cases, results, stats, disagreements)
        if args.sample is not None:
            doc["sample"] = args.sample
        doc["ascend_group"] = to_json(
            ascend_ctx, ascend, ascend_results, ascend_stats, ascend_disagreements
        )
        doc["backward"] = to_json(ctx, backward, bwd_results, bwd_stats, bwd_disagreements)
        doc["backward"]["context"]["problem_set_sha256"] = fingerprint(backward)
        doc["backward"]["target_p95_ms"] = TARGET_BACKWARD_P95_MS
        for result in own:
            doc[result.block.key] = result.to_json(args.repeats, heap)
        json.dump(doc, sys.stdout, indent=2)
        print()
    else:
        if args.sample is not None:
            some = "problem" if args.sample == 1 else f"{args.sample} problems"
            print(f"SAMPLE RUN: the first {some} of every set (not a measurement)")
        print_report(ctx, cases, results, stats, disagreements)
        print()
        print("ascend group (reported apart: the set above is unchanged)")
        print_report(
            ascend_ctx,
            ascend,
            ascend_results,
            ascend_stats,
            ascend_disagreements,
            machine=False,
            target=False,
        )
        print_backward_report(ctx, backward, bwd_results, bwd_stats, bwd_disagreements)
        print()
        for i, result in enumerate(own):
            if i:
                print()
            result.print_report()
    failed = (
        disagreements
        or ascend_disagreements
        or bwd_disagreements
        or any(result.disagreements for result in own)
    )
    return 1 if failed else 0


def print_decode_report(
    cases: list[Case],
    results: dict[str, dict[str, EngineRuns]],
    stats: dict[str, Any],
    disagreements: list[str],
    block: str = "decode",
    p95_target_ms: float = TARGET_DECODE_P95_MS,
) -> None:
    """A block of its own (decode, fa4, amd): its own set, the same columns, and its target."""
    print(f"{block} block: problems {len(cases)} (set {fingerprint(cases)}), same timing")
    header = (
        f"{'family':<10} {'spaces':>14} {'engine':<11} {'problems':>8} {'median ms':>10} "
        f"{'p95 ms':>9} {'max ms':>9}"
    )
    print(header)
    print("-" * len(header))
    for group in ["all", *sorted(k for k in stats if k != "all")]:
        g = stats[group]
        sizes = g["space_sizes"]
        space = f"{min(sizes)}-{max(sizes)}"
        for engine in ENGINES:
            w = g["engines"][engine]["wall"]
            print(
                f"{group:<10} {space:>14} {engine:<11} {g['engines'][engine]['problems']:>8} "
                f"{w['median_ms']:>10.2f} {w['p95_ms']:>9.2f} {w['max_ms']:>9.2f}"
            )
    slowest = sorted(cases, key=lambda c: results[c.name]["cpsat"].median_wall_ms, reverse=True)
    print(f"slowest {block} cpsat problems (median wall ms: cpsat / exhaustive)")
    for case in slowest[:5]:
        r = results[case.name]
        p = case.problem
        print(
            f"  {case.name:<10} {case.hardware:<10} {case.family:<10} "
            f"{r['cpsat'].median_wall_ms:8.2f} / {r['exhaustive'].median_wall_ms:6.2f}  "
            f"B={p.batch} H={p.heads}/{p.kv_heads_eff} Sq={p.seq_len} Sk={p.seq_len_kv} "
            f"d={p.head_dim} feasible {r['cpsat'].feasible_count}/{r['cpsat'].search_space_size}"
        )
    agree = len(cases) - len(disagreements)
    print(f"agreement: {agree}/{len(cases)} problems")
    for line in disagreements:
        print(f"  DISAGREE {line}")
    w = stats["all"]["engines"]["cpsat"]["wall"]
    met = w["median_ms"] < TARGET_CPSAT_MEDIAN_MS and w["p95_ms"] < p95_target_ms
    print(
        f"target: {block} cold CP-SAT solve (top {TOP_K}) median < {TARGET_CPSAT_MEDIAN_MS:.0f} "
        f"ms and p95 < {p95_target_ms:.0f} ms: {'met' if met else 'NOT met'} "
        f"({w['median_ms']:.2f} ms, p95 {w['p95_ms']:.2f} ms)"
    )


if __name__ == "__main__":
    sys.exit(main())
