"""What the ck cost model gives aiter's assembly FAv3 tiles on AMD Instinct, under two readings
of their two wave groups (docs/model.md 19.9): an analysis of a hypothesis, not a model change.

aiter's bf16 d 128 forward assembly kernels (`benchmarks/data/expert_amd_tiles.csv`, rows
`aiterasm942-d128` and `aiterasm950-d128`: 256 query rows, 8 waves, 256 VGPRs and all of the
CU's LDS, so one workgroup a CU) and CK's `qr_async_trload_v3` pipeline, written after them, run
their 8 waves as two groups of four whose phases an explicit schedule interleaves (CK's
`CoreLoopScheduler`: one group's MFMAs beside the other's exp and VALU, then the reverse). The
ck family has no such pipeline; its nearest tile (256 x 64 on gfx950 with the transpose loads,
256 x 32 on gfx942 with qr_async, 8 waves, kK0 32, kN1 128, 32x32 MFMA) is evaluated here for
every published assembly row of `benchmarks/data/published_amd_attention.csv` (d 128) twice:

- `one stream`: the model as shipped (`rocm.schedule.cu_round`: a workgroup's waves are one
  instruction stream a SIMD; with r resident, the parts overlap by phi = 1 - 1 / g);
- `ping-pong`: the 8-wave workgroup as two independent streams whose MFMA, VALU and LDS parts
  overlap fully (T = max(M, V, L') + (1 - phi) S with g doubled for the stalls, phi = 1 - 1 / g:
  an explicit schedule keeps the groups apart, so the fitted share `WORKGROUP_OVERLAP` of
  unscheduled workgroups, docs/model.md 19.5, is not applied to them).

    .venv/bin/python benchmarks/amd_pingpong.py [--rows]

Prints, per part, the predicted / published ratio's median and range and how many rows fall
within issue 26's 30% under each reading (`--rows`: every row).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from tilesolve.solver import SolveOptions
from tilesolve.solver.families.ck import cost as ck_cost
from tilesolve.solver.families.rocm import schedule
from tilesolve.solver.solve import prepare

# the scripts beside this one (also when a test loads this file by its path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
import amd_experts
import amd_published

TOLERANCE = 0.30
# The ck tile nearest the assembly kernels' (their 256 rows and 8 waves; kN0 as their ts_kv)
NEAREST = {
    "mi300x": {"block_m": 256, "block_n": 32, "pipeline": 1},  # gfx942: qr_async
    "mi355x": {"block_m": 256, "block_n": 64, "pipeline": 3},  # gfx950: qr_async_trload
}
COMMON = {"num_warps": 8, "block_k0": 32, "block_n1": 128, "mfma": 32}
PING_PONG_WAVES = 8  # the workgroups whose waves form two groups


def ping_pong_round(
    device: Any, it: schedule.Iteration, warps: np.ndarray, r: np.ndarray
) -> np.ndarray:
    """`schedule.cu_round` with an 8-wave workgroup's two groups as independent streams whose
    parts overlap fully (the module docstring's `ping-pong`)."""
    pairs = warps >= PING_PONG_WAVES
    streams = schedule.independent_streams(device, warps, r) * np.where(pairs, 2.0, 1.0)
    phi = 1.0 - 1.0 / np.maximum(streams, 1.0)
    return schedule.overlapped_round(device, it, warps, r, np.where(pairs, 1.0, phi), phi)


@contextmanager
def reading(ping_pong: bool) -> Iterator[None]:
    """The ck cost model under one reading (module docstring), restored after."""
    shipped = ck_cost.cu_round
    ck_cost.cu_round = ping_pong_round if ping_pong else shipped  # type: ignore[assignment]
    try:
        yield
    finally:
        ck_cost.cu_round = shipped  # type: ignore[assignment]


def predicted(point: Any, ping_pong: bool) -> float:
    """TFLOP/s of the nearest ck tile for the published row's problem under one reading."""
    problem = point.problem()
    config = COMMON | NEAREST[point.hardware]
    with reading(ping_pong):
        table = prepare(problem, point.hardware, SolveOptions(kernel="ck", engine="exhaustive"))
        return float(amd_experts.tflops_at(table, amd_experts.index_of(table, config), problem))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", action="store_true", help="print every row")
    args = parser.parse_args(argv)
    rows = [
        p
        for p in amd_published.points()
        if p.kernel == "aiter_asm" and p.head_dim == 128 and p.head_dim_v == 128
    ]
    by_part: dict[str, list[tuple[Any, float, float]]] = {}
    for p in rows:
        one, two = (predicted(p, flag) / p.tflops for flag in (False, True))
        by_part.setdefault(p.part, []).append((p, one, two))
        if args.rows:
            causal = "causal" if p.causal else "non-causal"
            print(f"{p.id} {p.part} {p.shape()} {causal}: published {p.tflops:.0f}, "
                  f"one stream {one:.2f}, ping-pong {two:.2f}")  # fmt: skip
    for part, found in sorted(by_part.items()):
        for label, index in (("one stream", 1), ("ping-pong", 2)):
            ratios = sorted(r[index] for r in found)
            within = sum(abs(x - 1.0) <= TOLERANCE for x in ratios)
            print(
                f"{part} {label}: {len(ratios)} rows, predicted / published median "
                f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f}), "
                f"within {TOLERANCE:.0%}: {within}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
