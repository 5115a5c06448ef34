"""Write a synthetic measurements CSV: the sweep's format, timed not by a GPU but by tilesolve's
own model with perturbed constants, times a little log-normal noise. It exercises the
analysis and calibration paths where no GPU is available; it is not a measurement, and its
`device_name` column says so.

    python benchmarks/gpu/synthetic.py --out benchmarks/data/synthetic_h200.csv

The perturbation changes constants that move the ranking, not only the scale (a global
factor on every time could not change a ranking, so calibrating it away would prove nothing):
less instruction-level parallelism on the mma.sync path and more on the wgmma path, a longer
softmax chain, more per-iteration instructions, lower achieved matrix, DRAM and L2 rates.
"""

from __future__ import annotations

import argparse
import sys

from tilesolve.client.measurements import write_measurements
from tilesolve.solver import get_hardware
from tilesolve.solver.apps.calibrate import synthetic_measurements
from tilesolve.solver.apps.measured import Shape, Tile, predict_shape, sample_tiles

TRUTH = {
    "instruction_level_parallelism": 3.0,
    "wgmma_instruction_level_parallelism": 2.5,
    "softmax_chain_cycles": 700.0,
    "iteration_fixed_instructions": 110.0,
    "matrix_efficiency": 0.8,
    "memory.dram_achievable_fraction": 0.8,
    "memory.l2_achievable_fraction": 0.7,
    "throughput.mma_sync_efficiency": 0.4,
}
# (batch, heads, kv_heads, seq_len, head_dim, dtype, causal)
SHAPES = (
    (4, 16, 16, 4096, 128, "bf16", True),
    (8, 16, 16, 2048, 64, "fp16", False),
    (2, 32, 8, 8192, 128, "fp16", True),
    (16, 8, 8, 1024, 128, "bf16", False),
    (1, 16, 16, 16384, 64, "fp16", True),
    (32, 8, 8, 512, 64, "bf16", False),
)


def shapes(hardware: str) -> list[Shape]:
    return [
        Shape(hardware, "triton", b, h, hk, s, s, d, d, dtype, causal)
        for b, h, hk, s, d, dtype, causal in SHAPES
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--hardware", default="h200")
    parser.add_argument("--top", type=int, default=16)
    parser.add_argument("--size", type=int, default=72)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    spec = get_hardware(args.hardware)

    def tiles_for(shape: Shape) -> list[Tile]:
        return sample_tiles(predict_shape(shape, spec), args.top, args.size, args.seed)

    rows = synthetic_measurements(
        shapes(spec.name), tiles_for, TRUTH, noise=args.noise, seed=args.seed
    )
    note = "synthetic: tilesolve's model with perturbed constants (benchmarks/gpu/synthetic.py)"
    write_measurements(args.out, rows, {"device_name": note})
    print(f"{len(rows)} synthetic rows written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
