"""Triton's AMD knobs against what the compiler allocates: a small sample of the forward kernel
compiled for gfx942 (and gfx950 where the knob exists there) with `waves_per_eu`,
`matrix_instr_nonkdim` and `kpack` varied around each base tile, so that the triton family's
ROCm resource model can be checked on them (docs/model.md 19.10); and aiter's shipped Triton
forward defaults (the `triton` rows of `benchmarks/data/expert_amd_tiles.csv`, with their
`waves_per_eu`) at head dims 64, 128 and 256 where each applies, so that what the model says of
an expert's tile (it spills at d 256: docs/model.md 19.8) is the compiler's word too.

    .venv/bin/python benchmarks/compiler/amd_knobs.py --out benchmarks/data/compiler/amd_knobs.csv

One compile per row, in this process (about 4 s each on gfx942 on a 2-core machine), through
`toolchain.Compiler` with the knobs added to the options `kernels.source` gives.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kernels
import toolchain
from configs import TARGETS

EXPERTS = Path(__file__).resolve().parents[1] / "data" / "expert_amd_tiles.csv"
EXPERT_HEAD_DIMS = {"always": (64, 128, 256), "dv_le_64": (64,), "dv_gt_64": (128, 256)}
# A row's configuration: "sample" is "knob" (a base tile with one knob moved) or the expert
# row's id here, the question a row answers in amd_schedule.py
CONFIG_COLUMNS = (
    "sample",
    "target",
    "head_dim",
    "dtype",
    "block_m",
    "block_n",
    "num_warps",
    "num_stages",
    "waves_per_eu",
    "matrix_instr_nonkdim",
    "kpack",
)
COLUMNS = (
    *CONFIG_COLUMNS,
    "status",
    "shared_bytes",
    "vgprs",
    "agprs",
    "total_vgprs",
    "vgpr_spills",
    "scratch_bytes",
    "compile_s",
)
# (head_dim, block_m, block_n, num_warps, num_stages): tiles below, at and above the VGPR cap
BASES = ((64, 64, 64, 4, 2), (128, 128, 64, 4, 2), (128, 64, 32, 4, 2), (128, 128, 128, 8, 2))
# Each base with one knob moved from Triton's defaults (0, 0, 1)
VARIANTS = ((0, 16, 1), (0, 32, 1), (0, 16, 2), (0, 32, 2), (2, 16, 1), (3, 16, 1), (4, 16, 1))


class KnobCompiler(toolchain.Compiler):
    """toolchain.Compiler with the AMD knobs passed as compile options."""

    def __init__(self, scratch: Path):
        super().__init__(scratch)
        self.knobs: dict[str, int] = {}

    def compile(self, row: dict[str, Any]) -> dict[str, Any]:
        original = kernels.source

        def with_knobs(*args: Any) -> Any:
            fn, signature, constexprs, attrs, options = original(*args)
            return fn, signature, constexprs, attrs, {**options, **self.knobs}

        kernels.source = with_knobs
        try:
            return super().compile(row)
        finally:
            kernels.source = original


def knob_row(
    target: str, d: int, tile: tuple[int, int, int, int], knobs: tuple[int, int, int], sample: str
) -> dict[str, Any]:
    """A plan row of the forward kernel, fp16, not causal: `tile` is (block_m, block_n,
    num_warps, num_stages), `knobs` (waves_per_eu, matrix_instr_nonkdim, kpack)."""
    bm, bn, w, s = tile
    wpe, nonk, kpack = knobs
    return {
        "sample": sample,
        "target": target,
        "kernel": "fwd",
        "head_dim": d,
        "dtype": "fp16",
        "causal": 0,
        "block_m": bm,
        "block_n": bn,
        "num_warps": w,
        "num_stages": s,
        "waves_per_eu": wpe,
        "matrix_instr_nonkdim": nonk,
        "kpack": kpack,
    }


def expert_rows(path: Path = EXPERTS) -> list[dict[str, Any]]:
    """aiter's Triton forward defaults (fp16, not causal; the knobs aiter leaves unset at
    Triton's defaults) at each head dim its `when` covers."""
    with path.open(newline="") as f:
        experts = [r for r in csv.DictReader(f) if r["family"] == "triton"]
    rows = []
    for e in experts:
        tile = (int(e["block_m"]), int(e["block_n"]), int(e["num_warps"]), int(e["num_stages"]))
        for d in EXPERT_HEAD_DIMS[e["when"]]:
            rows.append(knob_row(e["arch"], d, tile, (int(e["waves_per_eu"]), 0, 1), e["id"]))
    return rows


def plan() -> list[dict[str, Any]]:
    rows = []
    for target in ("gfx942", "gfx950"):
        for d, bm, bn, w, s in BASES:
            for knobs in VARIANTS:
                if target == "gfx950" and knobs[2] != 1:
                    continue  # Triton overrides kpack to 1 on gfx950 (compiler.py:312-316)
                rows.append(knob_row(target, d, (bm, bn, w, s), knobs, "knob"))
    return rows + expert_rows()


def compile_rows(
    rows: list[dict[str, Any]],
    out: Path,
    columns: tuple[str, ...],
    more: Callable[[str], dict[str, Any]] | None = None,
) -> None:
    """Compile every row with its knobs, in this process, and write `columns` of each to `out`
    as it goes; `more(amdgcn)` adds columns read off a compiled kernel's assembly."""
    with tempfile.TemporaryDirectory() as scratch, out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        compiler = KnobCompiler(Path(scratch))
        for n, row in enumerate(rows, 1):
            compiler.knobs = {
                "waves_per_eu": row["waves_per_eu"],
                "matrix_instr_nonkdim": row["matrix_instr_nonkdim"],
                "kpack": row["kpack"],
            }
            measured = compiler.compile(row)
            if more is not None and measured["status"] == "ok":
                measured.update(more(compiler.last_amdgcn))
            writer.writerow({**row, **measured})
            f.flush()
            print(
                f"[{n}/{len(rows)}] {row['sample']} {row['target']} d{row['head_dim']} "
                f"{row['block_m']}x{row['block_n']} w{row['num_warps']} s{row['num_stages']} "
                f"wpe{row['waves_per_eu']} kpack{row['kpack']}: {measured['status']}",
                file=sys.stderr,
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    assert set(TARGETS) >= {"gfx942", "gfx950"}
    compile_rows(plan(), args.out, COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
