"""The flex family's picks for the docs (docs/flex.md): per architecture (sm80 a100-80gb, sm86
rtx-3090, sm89 rtx-4090, sm90 h100-sxm) and head dim (64, 128, 192 with head_dim_v 128, 256),
the forward and backward kernel_options the model ranks first, and the shared memory each needs
against the part's opt-in limit. The problem: batch 8, 16 heads, seq_len 4096, bf16, causal,
the default block mask size 128.

    python benchmarks/flex_table.py [--markdown]
"""

from __future__ import annotations

import argparse
import sys

from tilesolve.client.flex import options_of
from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware, solve

ARCHITECTURES = (
    ("sm80", "a100-80gb"),
    ("sm86", "rtx-3090"),
    ("sm89", "rtx-4090"),
    ("sm90", "h100-sxm"),
)
HEAD_DIMS = ((64, None), (128, None), (192, 128), (256, None))
PHASES = ("forward", "backward")


def rows() -> list[list[str]]:
    out = []
    for arch, hardware in ARCHITECTURES:
        limit = get_hardware(hardware).sm.smem_per_block_optin_bytes
        for head_dim, head_dim_v in HEAD_DIMS:
            for phase in PHASES:
                problem = AttentionProblem(
                    batch=8,
                    heads=16,
                    seq_len=4096,
                    head_dim=head_dim,
                    head_dim_v=head_dim_v,
                    dtype="bf16",
                    causal=True,
                    phase=phase,
                )
                answer = solve(problem, hardware, SolveOptions(kernel="flex", top_k=1))
                best = answer.candidates[0]
                options = ", ".join(f"{k}={v}" for k, v in options_of(answer).items())
                dims = f"{head_dim}" + (f"/{head_dim_v}" if head_dim_v else "")
                out.append(
                    [
                        arch,
                        hardware,
                        dims,
                        phase,
                        options,
                        f"{best.smem_bytes:,}",
                        f"{limit:,}",
                        f"{best.predicted_time_us:.0f}",
                    ]
                )
    return out


HEADER = ["arch", "device", "d (qk/v)", "pass", "kernel_options", "smem B", "limit B", "us"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args(argv)
    table = rows()
    if args.markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for row in table:
            print("| " + " | ".join(row) + " |")
    else:
        for row in [HEADER, *table]:
            print("  ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
