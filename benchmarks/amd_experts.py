"""The experts' shipped tiles in the model's ranking on AMD Instinct (docs/model.md 19.8): for
each shape of a fixed grid, the tile that CK's codegen dispatches (ck family), aiter's Triton
MHA default (triton family) and PyTorch FlexAttention's ROCm default (flex family) on that part,
as recorded in `benchmarks/data/expert_amd_tiles.csv`
(sources in `benchmarks/data/README.md`), its rank in the model's full ranking (1 = the model's
pick; the exhaustive engine, so every feasible configuration is ranked) and its predicted
TFLOP/s beside the model's pick (and its share of the pick's: `of pick`). The data is a check,
never an input: no solver module reads it.

Usage:
    .venv/bin/python benchmarks/amd_experts.py [--kernel ck|triton|flex ...]
                                               [--hardware NAME ...] [--json]

Shapes: head dims 64, 128, 256; bf16 and fp8 (ck; CK's fp8 instances are its fp8bf16 ones);
causal and not; (batch, heads, seq_len) = (2, 2048 / d, 8192), (16, 2048 / d, 1024) and
(1, 16, 1024), the last a grid small enough for CK's 64-row instance. A shape whose expert
kernel no family models (CK's v3 kernel, which CK dispatches first for fp8 at d 128 on gfx950)
is listed and not counted. "Top picks" are the answer's default top 5 (`SolveOptions.top_k`).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware
from tilesolve.solver.candidates import TILE_FIELDS
from tilesolve.solver.families.triton_compiler.lds_amd import default_nonkdim
from tilesolve.solver.solve import prepare

DATA = Path(__file__).resolve().parent / "data" / "expert_amd_tiles.csv"
HARDWARE = ("mi300x", "mi355x")
KERNELS = ("ck", "triton", "flex")
HEAD_DIMS = (64, 128, 256)
DTYPES = {"ck": ("bf16", "fp8"), "triton": ("bf16",), "flex": ("bf16",)}
# (batch, heads, seq_len); None: heads = 2048 / head_dim (the FA papers' hidden 2048)
GRIDS = ((2, None, 8192), (16, None, 1024), (1, 16, 1024))
TOP_PICKS = SolveOptions().top_k  # the answer's default top-k
PIPELINES = ("qr", "qr_async", "qs", "qr_async_trload")  # the ck family's `pipeline` numbers
# "near the pick": the expert tile's predicted TFLOP/s at least this share of the pick's
NEAR_PICK = 0.95
# The tile as a block shape and its waves, the knobs and the pipeline aside (the fields that
# name a tile for twins too): `tile_rank` is the rank of the first configuration that shares
# these with the expert's (a looser view than `rank`, reported beside it; issue 26's criterion
# is `rank`)
TILE_KEYS = TILE_FIELDS
# Triton's kpack default (HIPOptions.kpack = 1); aiter's configurations leave it unset
TRITON_KPACK = 1
# The shipped Triton configurations each Triton-based family is checked against: aiter's MHA
# default (triton) and PyTorch's FlexAttention default on ROCm (flex)
TRITON_KERNELS = {"triton": "aiter_triton", "flex": "torch_flex"}


@dataclass(frozen=True)
class Expert:
    """One shipped choice (a row of the CSV)."""

    id: str
    source: str
    kernel: str
    family: str  # the family that models the kernel; "" when none does
    arch: str
    dtype: str  # 16bit or fp8
    head_dim: str  # a head dim, or "all"
    when: str  # always, grid64_le_cus, grid64_gt_cus, dv_le_64, dv_gt_64
    values: dict[str, str]
    note: str

    def applies(self, arch: str, dtype: str, problem: AttentionProblem, cus: int) -> bool:
        """Whether this row is the kernel's dispatch for the problem on an `arch` part."""
        kind = "fp8" if dtype == "fp8" else "16bit"
        if (self.arch, self.dtype) != (arch, kind):
            return False
        if self.head_dim != "all" and int(self.head_dim) != problem.head_dim:
            return False
        # CK's CppConstraint get_num_blocks(64) <= num_cus: batch x heads x ceil(sq / 64)
        blocks64 = problem.batch * problem.heads * -(-problem.seq_len // 64)
        dv = problem.head_dim_v_eff
        return {
            "always": True,
            "grid64_le_cus": blocks64 <= cus,
            "grid64_gt_cus": blocks64 > cus,
            "dv_le_64": 16 < dv <= 64,
            "dv_gt_64": dv > 64,
        }[self.when]

    def config(self, problem: AttentionProblem) -> dict[str, int]:
        """The shipped configuration in the family's decision variables."""
        v = self.values
        if self.family == "ck":
            return {
                "block_m": int(v["block_m"]),
                "block_n": int(v["block_n"]),
                "block_k0": int(v["block_k0"]),
                "block_n1": int(v["block_n1"]),
                "num_warps": int(v["num_warps"]),
                "mfma": int(v["mfma"]),
                "pipeline": PIPELINES.index(v["pipeline"]),
            }
        bm, bn = int(v["block_m"]), int(v["block_n"])
        # matrix_instr_nonkdim unset: Triton picks the instruction (the model's statement of
        # its default for the first dot, block_m x block_n)
        nonkdim = int(default_nonkdim(np.array([bm]), np.array([bn]))[0])
        return {
            "block_m": bm,
            "block_n": bn,
            "num_warps": int(v["num_warps"]),
            "num_stages": int(v["num_stages"]),
            "waves_per_eu": int(v["waves_per_eu"]),
            "matrix_instr_nonkdim": nonkdim,
            "kpack": int(v["kpack"]) if v.get("kpack") else TRITON_KPACK,
        }

    def label(self) -> str:
        v = self.values
        if self.kernel in TRITON_KERNELS.values():
            return (
                f"{v['block_m']}x{v['block_n']} w{v['num_warps']} s{v['num_stages']} "
                f"wpe{v['waves_per_eu']}"
            )
        if self.kernel == "aiter_asm":
            return f"{v['block_m']}x{v['block_n']} w{v['num_warps']} (assembly)"
        return (
            f"{v['block_m']}x{v['block_n']} k0={v['block_k0']} n1={v['block_n1']} "
            f"k1={v['block_k1']} w{v['num_warps']} mfma{v['mfma']} {v['pipeline']}"
        )


def experts(path: Path = DATA) -> list[Expert]:
    """Every row of the data file."""
    fixed = ("id", "source", "kernel", "family", "arch", "dtype", "head_dim", "when", "note")
    with path.open(newline="") as f:
        return [
            Expert(
                id=r["id"],
                source=r["source"],
                kernel=r["kernel"],
                family=r["family"],
                arch=r["arch"],
                dtype=r["dtype"],
                head_dim=r["head_dim"],
                when=r["when"],
                values={k: v for k, v in r.items() if k not in fixed},
                note=r["note"],
            )
            for r in csv.DictReader(f)
        ]


def shapes(kernel: str) -> list[AttentionProblem]:
    """The grid of problems checked for a family."""
    out = []
    for d in HEAD_DIMS:
        for dtype in DTYPES[kernel]:
            for causal in (False, True):
                for batch, heads, seq in GRIDS:
                    out.append(
                        AttentionProblem(
                            batch=batch,
                            heads=heads if heads is not None else 2048 // d,
                            seq_len=seq,
                            head_dim=d,
                            dtype=dtype,
                            causal=causal,
                        )
                    )
    return out


def shape_label(p: AttentionProblem) -> str:
    return f"B{p.batch} H{p.heads} S{p.seq_len} d{p.head_dim} {p.dtype.value}" + (
        " causal" if p.causal else ""
    )


def dispatched(
    rows: Sequence[Expert], kernel: str, hardware: str, problem: AttentionProblem
) -> Expert | None:
    """The row `kernel`'s dispatch (`ck_tile`, `aiter_triton`) reaches first for `problem` on
    `hardware`, modelled by a family or not (no `family`: a kernel no family models), or None
    where the file records none."""
    spec = get_hardware(hardware)
    arch, cus, dtype = spec.rocm.gfx_target, spec.rocm.cu_count, problem.dtype.value
    return next(
        (e for e in rows if e.kernel == kernel and e.applies(arch, dtype, problem, cus)), None
    )


def tflops_at(table: Any, index: int, problem: AttentionProblem) -> float:
    """The predicted TFLOP/s of row `index` of a candidate table."""
    return problem.flops / float(table.perf.time_us[index]) / 1e6


def index_of(table: Any, config: dict[str, int]) -> int:
    """The row of `table` (a candidate table) whose parameters are `config`'s."""
    mask = np.ones(len(table.cfg), dtype=bool)
    for name, value in config.items():
        mask &= table.cfg[name] == value
    return int(np.flatnonzero(mask)[0])


def rank_row(kernel: str, hardware: str, problem: AttentionProblem, rows: list[Expert]) -> dict:
    """The expert's rank and prediction for one shape (or why it is not counted)."""
    expert = dispatched(rows, _kernel_name(kernel), hardware, problem)
    base = {"kernel": kernel, "hardware": hardware, "shape": shape_label(problem)}
    if expert is None:
        return {**base, "expert": None, "counted": False, "why": "no shipped tile recorded"}
    base["expert"] = expert.id
    base["tile"] = expert.label()
    if not expert.family:
        return {**base, "counted": False, "why": expert.note}
    table = prepare(problem, hardware, SolveOptions(kernel=kernel, engine="exhaustive"))
    order = table.ranked_feasible()
    ranks = table.answer_ranks(order)
    config = expert.config(problem)
    index = index_of(table, config)
    position = np.flatnonzero(order == index)
    best = int(order[0])
    same_tile = np.ones(len(order), dtype=bool)
    for name in TILE_KEYS:
        same_tile &= table.cfg[name][order] == config[name]
    row = {
        **base,
        "counted": True,
        "rank": int(ranks[position[0]]) if len(position) else None,
        "tile_rank": int(ranks[np.argmax(same_tile)]) if same_tile.any() else None,
        "feasible": bool(table.feasible[index]),
        "broken": [n for n, ok in table.satisfied.items() if not ok[index]],
        "expert_tflops": round(tflops_at(table, index, problem), 1),
        "pick": table.family.label(table.cfg.config(best)),
        "pick_tflops": round(tflops_at(table, best, problem), 1),
        "ranked": len(order),
    }
    row["top"] = row["rank"] is not None and row["rank"] <= TOP_PICKS
    row["of_pick"] = round(row["expert_tflops"] / row["pick_tflops"], 3)
    return row


def _kernel_name(kernel: str) -> str:
    return "ck_tile" if kernel == "ck" else TRITON_KERNELS[kernel]


def rows(kernels: list[str], hardware: list[str]) -> list[dict[str, Any]]:
    data = experts()
    return [
        rank_row(kernel, hw, problem, data)
        for kernel in kernels
        for hw in hardware
        for problem in shapes(kernel)
    ]


def summary(table: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per family: shapes counted, expert in the top picks, in the top 3, median rank."""
    out = {}
    for kernel in sorted({r["kernel"] for r in table}):
        counted = [r for r in table if r["kernel"] == kernel and r["counted"]]
        ranks = [r["rank"] for r in counted if r["rank"] is not None]
        out[kernel] = {
            "counted": len(counted),
            "top_picks": sum(bool(r["top"]) for r in counted),
            "top3": sum(r["rank"] is not None and r["rank"] <= 3 for r in counted),
            "infeasible": sum(r["rank"] is None for r in counted),
            "near_pick": sum(r["rank"] is not None and r["of_pick"] >= NEAR_PICK for r in counted),
            "tile_top_picks": sum(
                r["tile_rank"] is not None and r["tile_rank"] <= TOP_PICKS for r in counted
            ),
            "median_rank": statistics.median(ranks) if ranks else None,
        }
    return out


def render(table: list[dict[str, Any]]) -> str:
    out = [
        "| family | device | shape | expert tile | rank | tile rank | expert TF/s | of pick | "
        "model pick | pick TF/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        if not r["counted"]:
            out.append(
                f"| {r['kernel']} | {r['hardware']} | {r['shape']} | {r.get('tile', '-')} | "
                f"not counted | | | | | |"
            )
            continue
        rank = (
            f"{r['rank']}" + (" *" if r["top"] else "")
            if r["rank"] is not None
            else "infeasible (" + ", ".join(r["broken"]) + ")"
        )
        out.append(
            f"| {r['kernel']} | {r['hardware']} | {r['shape']} | {r['tile']} | {rank} | "
            f"{r['tile_rank']} | {r['expert_tflops']:g} | {r['of_pick']:.2f} | {r['pick']} | "
            f"{r['pick_tflops']:g} |"
        )
    out.append("")
    out.append(
        f"`*`: among the model's top {TOP_PICKS} picks. tile rank: the first configuration with "
        f"the expert's {', '.join(TILE_KEYS)} (its knobs and pipeline aside)."
    )
    for kernel, s in summary(table).items():
        out.append(
            f"{kernel}: expert tile in the top {TOP_PICKS} on {s['top_picks']} of "
            f"{s['counted']} shapes (top 3: {s['top3']}; infeasible: {s['infeasible']}; "
            f"median rank {s['median_rank']}; within {1 - NEAR_PICK:.0%} of the pick's "
            f"TFLOP/s: {s['near_pick']}; its {'/'.join(TILE_KEYS)} in the top {TOP_PICKS}: "
            f"{s['tile_top_picks']})"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--hardware", nargs="+", default=list(HARDWARE), choices=HARDWARE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    table = rows(args.kernel, args.hardware)
    if args.json:
        json.dump({"rows": table, "summary": summary(table)}, sys.stdout, indent=1)
        print()
    else:
        print(render(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
