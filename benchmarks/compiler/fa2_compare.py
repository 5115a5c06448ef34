"""The fa2 family's register estimate and its verdict against nvcc's figures for FlashAttention-2's
own kernels (benchmarks/data/compiler/fa2_nvcc.csv, made by fa2_nvcc.py).

    .venv/bin/python benchmarks/compiler/fa2_compare.py [--data CSV]

One markdown row per compiled main kernel: the architecture, the tile and its traits, whether
FA2 ships it there (tests/data/fa2_{forward,backward}_tiles.json, no dropout), ptxas's registers
and spill stores, and the fa2 family's figures for the same configuration on the catalog device
of that architecture (a100-80gb for sm_80, a10 for sm_86, h100-sxm for sm_90): registers it
estimates the kernel wants, registers it allocates, and whether its rules accept the tile.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from compare import FEASIBILITY_RULES

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware
from tilesolve.solver.problem import Phase
from tilesolve.solver.registry import find_family
from tilesolve.solver.space import Config, ConfigArrays

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/data/compiler/fa2_nvcc.csv"
SHIPPED = {
    "fwd": ROOT / "tests/data/fa2_forward_tiles.json",
    "bwd": ROOT / "tests/data/fa2_backward_tiles.json",
}
DEVICES = {"sm_80": "a100-80gb", "sm_86": "a10", "sm_90": "h100-sxm"}
SHIPPED_ARCH = {"sm_80": "sm80", "sm_86": "sm86/sm89", "sm_90": "sm90"}


def backward_config(row: dict[str, str]) -> dict[str, int]:
    """The fa2 backward family's parameters from Flash_bwd_kernel_traits' tail
    (AtomLayoutMSdP, AtomLayoutNdKV, AtomLayoutMdQ, Is_V_in_regs, No_double_buffer)."""
    sdp, dkv, dq, v_in_regs, no_double = row["traits"].split()
    return {
        "block_m": int(row["block_m"]),
        "block_n": int(row["block_n"]),
        "num_warps": int(row["num_warps"]),
        "atom_layout_m_sdp": int(sdp),
        "atom_layout_n_dkv": int(dkv),
        "atom_layout_m_dq": int(dq),
        "is_v_in_regs": int(v_in_regs == "true"),
        "no_double_buffer": int(no_double == "true"),
    }


def forward_config(row: dict[str, str]) -> dict[str, int]:
    return {
        "block_m": int(row["block_m"]),
        "block_n": int(row["block_n"]),
        "num_warps": int(row["num_warps"]),
        "num_stages": 1,
    }


def shipped(row: dict[str, str], config: dict[str, int]) -> bool:
    """Whether FA2 ships this tile on this architecture without dropout (a field the table
    leaves empty, such as the forward's num_stages, matches any value)."""
    arch = SHIPPED_ARCH[row["arch"]]
    for tile in json.loads(SHIPPED[row["kernel"]].read_text()):
        if tile["arch"] != arch or tile["dropout"] or tile["head_dim"] != int(row["head_dim"]):
            continue
        if all(tile.get(name) in (value, None) for name, value in config.items()):
            return True
    return False


def model_row(row: dict[str, str]) -> dict[str, object]:
    phase = Phase.FORWARD if row["kernel"] == "fwd" else Phase.BACKWARD
    family = find_family("fa2", phase)
    assert family is not None
    hardware = get_hardware(DEVICES[row["arch"]])
    problem = AttentionProblem(
        batch=2,
        heads=16,
        seq_len=4096,
        head_dim=int(row["head_dim"]),
        dtype=row["dtype"],
        causal=bool(int(row["causal"])),
        phase=phase,
    )
    values = forward_config(row) if row["kernel"] == "fwd" else backward_config(row)
    names = [p.name for p in family.params(problem, hardware)]
    config = Config.of(**{n: values[n] for n in names})
    options = SolveOptions(kernel="fa2")
    res = family.resources(hardware, problem, options, ConfigArrays.from_configs(names, [config]))
    fields = res.candidate_fields(0)
    refusals = [
        r
        for r in family.check(hardware, problem, options, config)
        if r.split(":")[0] in FEASIBILITY_RULES
    ]
    return {
        "shipped": shipped(row, values),
        "model_regs_demand": int(fields["regs_demand"]),
        "model_regs": int(fields["regs_per_thread"]),
        "model_smem": int(fields["smem_bytes"]),
        "model_accepts": not refusals,
        "refusals": "; ".join(refusals),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    if not args.data.exists():
        parser.error(f"--data: no file {args.data}")
    with args.data.open(newline="") as f:
        rows = list(csv.DictReader(f))
    print(
        "| kernel | arch | d | dtype | causal | tile | traits | kernel flags | FA2 ships it | "
        "ptxas regs | spill stores B | model regs wanted / allocated | model smem B | "
        "model accepts |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    for row in rows:
        m = model_row(row)
        verdict = "yes" if m["model_accepts"] else f"no ({m['refusals']})"
        print(
            f"| {row['kernel']} | {row['arch']} | {row['head_dim']} | {row['dtype']} | "
            f"{row['causal']} | {row['block_m']}x{row['block_n']} w{row['num_warps']} | "
            f"{row['traits']} | {row['kernel_flags']} | {'yes' if m['shipped'] else 'no'} | "
            f"{row['regs']} | "
            f"{row['spill_store_bytes']} | {m['model_regs_demand']} / {m['model_regs']} | "
            f"{m['model_smem']} | {verdict} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
