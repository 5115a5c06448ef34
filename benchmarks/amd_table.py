"""The picks table of the AMD Instinct parts (docs/model.md sections 19.7 and 19.10): for each
rocm device, head dims 64, 128 and 256, fp16, bf16 and fp8, causal and not, the best
configuration of each family that runs there (ck; triton with its AMD knobs) with its predicted
TFLOP/s, the binding resource and the reason.

Usage:
    .venv/bin/python benchmarks/amd_table.py [--hardware NAME ...] [--kernel ck|triton ...]
                                             [--seq-len N] [--json]

Shapes follow the FA papers' convention: batch x seq_len = 16384 tokens, hidden 2048 (heads =
2048 / head_dim); seq_len 8192 by default. The exhaustive engine (the reference both engines
agree with). No measured figure is an input: the table is the model's prediction.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tilesolve.solver import AttentionProblem, SolveOptions, get_hardware, solve

HARDWARE = ("mi300x", "mi325x", "mi355x")
HEAD_DIMS = (64, 128, 256)
DTYPES = ("fp16", "bf16", "fp8")
KERNELS = ("ck", "triton")
PIPELINES = ("qr", "qr_async", "qs", "qr_async_trload")  # the ck family's `pipeline` numbers


def problem(head_dim: int, dtype: str, causal: bool, seq_len: int) -> AttentionProblem:
    return AttentionProblem(
        batch=max(16384 // seq_len, 1),
        heads=2048 // head_dim,
        seq_len=seq_len,
        head_dim=head_dim,
        dtype=dtype,
        causal=causal,
    )


def tile(kernel: str, parameters: dict[str, int]) -> str:
    p = parameters
    if kernel == "triton":
        return (
            f"{p['block_m']}x{p['block_n']} w{p['num_warps']} s{p['num_stages']} "
            f"wpe{p['waves_per_eu']} mfma{p['matrix_instr_nonkdim']} kpack{p['kpack']}"
        )
    return (
        f"{p['block_m']}x{p['block_n']} k0={p['block_k0']} n1={p['block_n1']} "
        f"w{p['num_warps']} mfma{p['mfma']} {PIPELINES[p['pipeline']]}"
    )


def rows(hardware: list[str], seq_len: int, kernel: str = "ck") -> list[dict[str, Any]]:
    out = []
    for name in hardware:
        peak = get_hardware(name)
        for head_dim in HEAD_DIMS:
            for dtype in DTYPES:
                for causal in (False, True):
                    answer = solve(
                        problem(head_dim, dtype, causal, seq_len),
                        name,
                        SolveOptions(kernel=kernel, engine="exhaustive", top_k=1),
                    )
                    best = answer.candidates[0]
                    out.append(
                        {
                            "kernel": kernel,
                            "hardware": name,
                            "head_dim": head_dim,
                            "dtype": dtype,
                            "causal": causal,
                            "tile": tile(kernel, best.parameters),
                            "tflops": round(best.predicted_tflops, 1),
                            "peak_share": round(best.predicted_tflops / _peak(peak, dtype), 3),
                            "binding": best.occupancy_limiter,
                            "workgroups_per_cu": best.blocks_per_sm,
                            "reason": best.bottleneck,
                        }
                    )
    return out


def _peak(spec: Any, dtype: str) -> float:
    rocm = spec.rocm
    if dtype == "fp8" and rocm.mfma_fp8_dense_tflops is not None:
        return float(rocm.mfma_fp8_dense_tflops)
    return float(rocm.mfma_bf16_dense_tflops if dtype == "bf16" else rocm.mfma_fp16_dense_tflops)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hardware", nargs="+", default=list(HARDWARE), choices=HARDWARE)
    parser.add_argument("--kernel", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    tables = {kernel: rows(args.hardware, args.seq_len, kernel) for kernel in args.kernel}
    if args.json:
        json.dump([r for table in tables.values() for r in table], sys.stdout, indent=2)
        print()
        return 0
    for kernel, table in tables.items():
        print(
            f"{kernel} picks, seq_len {args.seq_len}, batch x seq_len = 16384, "
            "heads = 2048 / head_dim"
        )
        header = (
            "| device | d | dtype | causal | pick | TFLOP/s | of peak | binding (WG/CU) | reason |"
        )
        print(header)
        print("|---|---|---|---|---|---|---|---|---|")
        for r in table:
            print(
                f"| {r['hardware']} | {r['head_dim']} | {r['dtype']} | "
                f"{'yes' if r['causal'] else 'no'} | {r['tile']} | {r['tflops']:.0f} | "
                f"{r['peak_share']:.0%} | {r['binding']} ({r['workgroups_per_cu']}) | "
                f"{r['reason']} |"
            )
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
