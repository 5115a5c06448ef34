"""The triton family's resource model against what the compilers allocated (the data of
`collect.py`), per target.

    .venv/bin/python benchmarks/compiler/compare.py [--data CSV]
        [--split all|fit|validation|holdout|held-out] [--json]

For each compiled row (status ok) it reads the model's figures for the same configuration
(`model_figures`: the family's shared memory, registers per thread as allocated, spilled
registers, and whether its rules accept the configuration) and states, per target:

- shared memory: of the rows both accept (the model's rules and the launch), exact matches,
  matches within 2%, and the mismatches' size (median model/compiler ratio, median and largest
  absolute difference);
- feasibility: the launch refuses a configuration whose compiled shared memory exceeds the
  target's per-block limit (`plan.SHARED_LIMIT_BYTES`: the catalog device's opt-in limit, the
  LDS per workgroup on AMD), whose threads times registers exceed the register file (no block
  fits: the catalog's occupancy calculator), or that compiled to a trap stub. `worst` counts
  rows the model accepts and the launch refuses; `conservative` rows the model refuses though
  they would run, over the rows that would run;
- registers: |model - ptxas| registers per thread over the rows both accept (median, p90);
- spills: the share of those rows where the model and ptxas agree on spilling (yes/no).

AMD targets (gfx942 on mi300x, gfx950 on mi355x: the triton family's ROCm kernel,
`MODEL_DEVICES`) compare the LDS the launch asks for (before the allocation granule), VGPR+AGPR
per lane against `total_vgprs`, and spills against `vgpr_spills`; the knobs at Triton's
defaults (waves_per_eu 0, matrix_instr_nonkdim 0: the compiler's own MFMA choice, kpack 1).
Configurations outside the ROCm kernel's domain (num_stages above 3) are skipped there.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import allocation
from configs import from_row
from plan import (
    AMD_DEFAULT_KNOBS,
    AMD_REFERENCE_DEVICES,
    REFERENCE_DEVICES,
    SHARED_LIMIT_BYTES,
    SPLITS,
)

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware, occupancy
from tilesolve.solver.families.rocm.resources import WorkgroupResources
from tilesolve.solver.hardware import CudaDevice, RocmDevice
from tilesolve.solver.problem import Phase
from tilesolve.solver.registry import find_family
from tilesolve.solver.space import Config, ConfigArrays

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
MODEL_SHAPE = {"batch": 2, "heads": 16, "seq_len": 4096}  # kernels.LAUNCH_SHAPE's problem
WITHIN = 0.02  # the shared-memory tolerance
# The family's resource and legality rules; other rules it states (the backward's inner dQ
# tile choice is a ranking rule) say nothing about whether a configuration can run.
FEASIBILITY_RULES = (
    "alignment",
    "threads",
    "shared_memory",
    "registers",
    "occupancy",
    "lds",
    "mfma_tiles",
)
# The catalog device of each target the model is checked on: the plan's reference devices (one
# rocm device per AMD target among them). AMD rows are compiled, and judged, at Triton's AMD
# defaults (plan.AMD_DEFAULT_KNOBS).
MODEL_DEVICES = {**REFERENCE_DEVICES, **AMD_REFERENCE_DEVICES}
AMD_MAX_STAGES = 3  # the ROCm kernel's num_stages domain


@dataclass(frozen=True)
class ModelFigures:
    """What the triton family states for one configuration."""

    smem_bytes: int
    regs_per_thread: int  # allocated (after the cap)
    spill_regs: int
    accepted: bool
    refusals: tuple[str, ...]  # the rules it breaks


def model_figures(row: dict[str, str]) -> ModelFigures | None:
    """The triton family's figures for the row's configuration on the catalog device of its
    target (None where the catalog has no device of that kind). The one place that finds the
    family: phase 2 repoints it when the family registry moves."""
    device_name = MODEL_DEVICES.get(row["target"])
    if device_name is None:
        return None
    hardware = get_hardware(device_name)
    amd = isinstance(hardware, RocmDevice)
    if amd and (row["kernel"] != "fwd" or int(row["num_stages"]) > AMD_MAX_STAGES):
        return None
    phase = Phase.FORWARD if row["kernel"] == "fwd" else Phase.BACKWARD
    family = find_family("triton", phase)
    assert family is not None
    problem = AttentionProblem(
        **MODEL_SHAPE,
        head_dim=int(row["head_dim"]),
        dtype=row["dtype"],
        causal=bool(int(row["causal"])),
        phase=phase,
    )
    options = SolveOptions(kernel="triton")
    values = {name: int(row[name]) for name in ("block_m", "block_n", "num_warps", "num_stages")}
    if row["kernel"] == "bwd":
        values |= {"dq_block_m": int(row["dq_block_m"]), "dq_block_n": int(row["dq_block_n"])}
    if amd:
        values |= AMD_DEFAULT_KNOBS
    names = [p.name for p in family.params(problem, hardware)]
    config = Config.of(**{n: values[n] for n in names})
    refusals = [v.message for v in family.problem_violations(problem, hardware)]
    cfg = ConfigArrays.from_configs(names, [config])
    res = family.resources(hardware, problem, options, cfg)
    if not refusals:
        refusals = [
            r
            for r in family.check(hardware, problem, options, config)
            if r.split(":")[0] in FEASIBILITY_RULES
        ]
    fields = res.candidate_fields(0)
    # on AMD the LDS the launch asks for, before the allocation granule (as metadata.shared)
    smem = int(res.lds[0]) if isinstance(res, WorkgroupResources) else int(fields["smem_bytes"])
    return ModelFigures(
        smem_bytes=smem,
        regs_per_thread=int(fields["regs_per_thread"]),
        spill_regs=int(fields["spill_regs"]),
        accepted=not refusals,
        refusals=tuple(refusals),
    )


def launch_refuses(row: dict[str, str]) -> bool:
    """Whether a launch of the compiled kernel would fail on the target's device."""
    if row["status"] == "trap_stub":
        return True
    if int(row["shared_bytes"]) > SHARED_LIMIT_BYTES[row["target"]]:
        return True
    device_name = REFERENCE_DEVICES.get(row["target"])
    if device_name is None or not row["regs"]:
        return False
    hardware = get_hardware(device_name)
    assert isinstance(hardware, CudaDevice)
    threads = int(row["num_warps"]) * 32
    return bool(occupancy(hardware.sm, threads, int(row["regs"]), 0).blocks_per_sm == 0)


@dataclass
class TargetReport:
    target: str
    rows: int  # rows of the target (any status)
    compiled: int  # status ok or trap_stub
    failed: int  # compile errors and timeouts
    median_compile_s: float
    launch_refuses: int
    modelled: bool
    both_accept: int = 0
    smem_exact: int = 0
    smem_within_2pct: int = 0
    smem_ratio_median: float | None = None
    smem_abs_diff_median: float | None = None
    smem_abs_diff_max: int | None = None
    would_run: int = 0
    worst_errors: int = 0  # model accepts, launch refuses
    conservative_errors: int = 0  # model refuses, launch would run
    reg_error_median: float | None = None
    reg_error_p90: float | None = None
    spill_agree: int = 0

    @property
    def within_share(self) -> float | None:
        return self.smem_within_2pct / self.both_accept if self.both_accept else None

    @property
    def conservative_share(self) -> float | None:
        return self.conservative_errors / self.would_run if self.would_run else None

    @property
    def spill_share(self) -> float | None:
        return self.spill_agree / self.both_accept if self.both_accept else None


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def report(rows: list[dict[str, str]], target: str) -> TargetReport:
    mine = [r for r in rows if r["target"] == target]
    compiled = [r for r in mine if r["status"] in ("ok", "trap_stub")]
    times = [float(r["compile_s"]) for r in compiled]
    refused = [launch_refuses(r) for r in compiled]
    out = TargetReport(
        target=target,
        rows=len(mine),
        compiled=len(compiled),
        failed=len(mine) - len(compiled),
        median_compile_s=round(statistics.median(times), 2) if times else 0.0,
        launch_refuses=sum(refused),
        modelled=target in MODEL_DEVICES,
    )
    if not out.modelled:
        return out
    ratios: list[float] = []
    diffs: list[int] = []
    reg_errors: list[float] = []
    for row, refuses in zip(compiled, refused, strict=True):
        model = model_figures(row)
        if model is None:  # outside the family's domain on this target
            continue
        if not refuses:
            out.would_run += 1
            out.conservative_errors += not model.accepted
        if model.accepted and refuses:
            out.worst_errors += 1
        if not (model.accepted and not refuses):
            continue
        out.both_accept += 1
        compiled_smem = int(row["shared_bytes"])
        diff = model.smem_bytes - compiled_smem
        out.smem_exact += diff == 0
        out.smem_within_2pct += abs(diff) <= WITHIN * compiled_smem
        diffs.append(abs(diff))
        if compiled_smem:
            ratios.append(model.smem_bytes / compiled_smem)
        amd = not row["regs"]
        compiled_regs = int(row["total_vgprs"] if amd else row["regs"])
        compiled_spills = int(row["vgpr_spills"] if amd else row["spill_store_bytes"])
        reg_errors.append(abs(model.regs_per_thread - compiled_regs))
        out.spill_agree += (model.spill_regs > 0) == (compiled_spills > 0)
    if diffs:
        out.smem_ratio_median = round(statistics.median(ratios), 3) if ratios else None
        out.smem_abs_diff_median = statistics.median(diffs)
        out.smem_abs_diff_max = max(diffs)
        out.reg_error_median = statistics.median(reg_errors)
        out.reg_error_p90 = _p90(reg_errors)
    return out


# --split's choices: one of plan.SPLITS, every row, or the rows no constant was fitted on
HELD_OUT = ("validation", "holdout")
SPLIT_CHOICES = ("all", *SPLITS, "held-out")


def in_split(rows: list[dict[str, str]], split: str) -> list[dict[str, str]]:
    """The rows of one split (SPLIT_CHOICES)."""
    if split == "all":
        return rows
    chosen = HELD_OUT if split == "held-out" else (split,)
    return [r for r in rows if r["split"] in chosen]


def read_rows(path: Path, split: str) -> list[dict[str, str]]:
    """The rows of one split (SPLIT_CHOICES) of the file."""
    with path.open(newline="") as f:
        return in_split(list(csv.DictReader(f)), split)


def _cell(value: Any, share: float | None = None) -> str:
    if value is None:
        return "-"
    return f"{value} ({share:.0%})" if share is not None else str(value)


def markdown(reports: list[TargetReport]) -> str:
    head = (
        "| target | compiled (failed) | median compile s | both accept | smem exact | "
        "within 2% | model/compiler smem (median) | worst errors | conservative errors | "
        "reg error median / p90 | spills agree |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in reports:
        if not r.modelled:
            lines.append(
                f"| {r.target} | {r.compiled} ({r.failed}) | {r.median_compile_s} | "
                f"no model | | | | launch refuses {r.launch_refuses} | | | |"
            )
            continue
        within = r.smem_within_2pct / r.both_accept if r.both_accept else None
        lines.append(
            f"| {r.target} | {r.compiled} ({r.failed}) | {r.median_compile_s} | "
            f"{r.both_accept} | {r.smem_exact} | {_cell(r.smem_within_2pct, within)} | "
            f"{_cell(r.smem_ratio_median)} | {r.worst_errors} | "
            f"{_cell(r.conservative_errors, r.conservative_share)} of {r.would_run} | "
            f"{_cell(r.reg_error_median)} / {_cell(r.reg_error_p90)} | "
            f"{_cell(r.spill_agree, r.spill_share)} |"
        )
    return head + "\n".join(lines) + "\n"


def allocation_table(rows: list[dict[str, str]]) -> str:
    """How often allocation.py's rules give the compiled shared memory exactly and within 2%,
    per target and kernel: `predicted_shared_bytes` (the plan's near-limit selector) and
    `observed_forward_bytes` (forward only; the backward repeats the first). What they miss is
    left for phase 2's model to explain."""
    lines = [
        "| target | kernel | compiled | plan rule exact | plan rule within 2% | "
        "observed rule exact | observed rule within 2% |",
        "|---|---|---|---|---|---|---|",
    ]
    for target in SHARED_LIMIT_BYTES:
        for kernel in ("fwd", "bwd"):
            mine = [
                r
                for r in rows
                if r["target"] == target and r["kernel"] == kernel and r["status"] == "ok"
            ]
            if not mine:
                continue
            exact = within = seen_exact = seen_within = 0
            for r in mine:
                variant, tile = from_row(r)
                predicted = allocation.predicted_shared_bytes(target, kernel, variant, tile)
                compiled = int(r["shared_bytes"])
                exact += predicted == compiled
                within += abs(predicted - compiled) <= WITHIN * compiled
                observed = (
                    allocation.observed_forward_bytes(target, variant, tile)
                    if kernel == "fwd"
                    else predicted
                )
                seen_exact += observed == compiled
                seen_within += abs(observed - compiled) <= WITHIN * compiled
            n = len(mine)
            lines.append(
                f"| {target} | {kernel} | {n} | {exact} ({exact / n:.0%}) | "
                f"{within} ({within / n:.0%}) | {seen_exact} ({seen_exact / n:.0%}) | "
                f"{seen_within} ({seen_within / n:.0%}) |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the collected CSV")
    parser.add_argument(
        "--split",
        choices=SPLIT_CHOICES,
        default="all",
        help="fit: the rows the constants are fitted on; validation: the hash-held-out 20%%; "
        "holdout: the independent draw of 2026-12-07 (plan.py); held-out: both",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument(
        "--allocation", action="store_true", help="also: allocation.py's rule against the data"
    )
    args = parser.parse_args(argv)
    if not args.data.exists():
        parser.error(f"--data: no file {args.data}")
    rows = read_rows(args.data, args.split)
    if not rows:
        parser.error(f"--split {args.split}: no rows of that split in {args.data}")
    targets = list(SHARED_LIMIT_BYTES)
    reports = [report(rows, t) for t in targets if any(r["target"] == t for r in rows)]
    if args.json:
        print(json.dumps([asdict(r) for r in reports], indent=1))
    else:
        print(f"split: {args.split}; {len(rows)} rows of {args.data.name}\n")
        print(markdown(reports), end="")
        if args.allocation:
            print("\n" + allocation_table(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
