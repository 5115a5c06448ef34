"""Write a sweep plan for `sweep.py`: shapes, the configurations of the triton family's domain to
time for each, and the model's ranking of them (for the autotune comparison on a host without
tilesolve).

    python benchmarks/gpu/make_plan.py --hardware h200 --out benchmarks/gpu/plan_h200.json
        [--shapes default|small] [--top 24] [--size 96] [--full] [--seed 0]

Per shape the plan holds the model's `--top` feasible configurations in its order, then a
uniform sample (seeded by --seed and the shape) of the rest of the family's legal space up to
`--size` in all: feasible or not, because the kernel's failures test the model's feasibility.
`--full` takes the whole legal space instead (about 575 configurations per shape: hours of
compilation, not the 5-minute budget). The default shapes are three representative prefill
problems; `--shapes small` is a tiny plan for the CPU interpreter (tests).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tilesolve.solver import CATALOG_VERSION, MODEL_VERSION, get_hardware
from tilesolve.solver.apps.measured import Shape, predict_shape, sample_tiles

PLAN_FORMAT = "tilesolve-sweep-plan/1"

# (batch, heads, kv_heads, seq_len, head_dim, dtype, causal): a long-context causal prefill
# in bf16 (d 128), a short non-causal fp16 batch at d 64, and a GQA causal one at 8k.
DEFAULT_SHAPES = (
    (4, 16, 16, 4096, 128, "bf16", True),
    (8, 16, 16, 2048, 64, "fp16", False),
    (2, 32, 8, 8192, 128, "fp16", True),
)
SMALL_SHAPES = (
    (1, 2, 1, 96, 64, "fp16", True),
    (2, 2, 2, 64, 32, "fp16", False),
)


def device_match(name: str) -> str:
    """The part of the GPU's own name (torch.cuda.get_device_name) that identifies the catalog
    device: the first token of its catalog name with a digit (h200 -> H200, a100-80gb ->
    A100, rtx-4090 -> 4090)."""
    tokens = [t for t in name.split("-") if any(ch.isdigit() for ch in t)]
    return (tokens[0] if tokens else name).upper()


def build_plan(
    hardware: str,
    shapes: tuple[tuple[Any, ...], ...],
    top: int,
    size: int,
    seed: int = 0,
    full: bool = False,
    kernel: str = "triton",
    warmup_ms: float = 10.0,
    rep_ms: float = 40.0,
    top_k: int = 3,
) -> dict[str, Any]:
    spec = get_hardware(hardware)
    out_shapes = []
    for i, (batch, heads, kv_heads, seq_len, head_dim, dtype, causal) in enumerate(shapes):
        shape = Shape(
            spec.name,
            kernel,
            batch,
            heads,
            kv_heads,
            seq_len,
            seq_len,
            head_dim,
            head_dim,
            dtype,
            causal,
        )
        pred = predict_shape(shape, spec)
        tiles = sample_tiles(pred, top, 10**9 if full else size, seed)
        ranked = {t: r for r, t in enumerate(pred.ranked_tiles())}
        out_shapes.append(
            {
                "id": f"s{i}",
                "batch": batch,
                "heads": heads,
                "kv_heads": kv_heads,
                "seq_len": seq_len,
                "seq_len_kv": seq_len,
                "head_dim": head_dim,
                "head_dim_v": head_dim,
                "dtype": dtype,
                "causal": causal,
                "configs": [list(t) for t in tiles],
                "model_rank": [ranked.get(t) for t in tiles],
                "model_predicted_us": [round(pred.time_us(t) or 0.0, 3) for t in tiles],
                "model_feasible": [pred.feasible(t) for t in tiles],
            }
        )
    return {
        "format": PLAN_FORMAT,
        "hardware": spec.name,
        "display_name": spec.display_name,
        "device_match": device_match(spec.name),
        "kernel": kernel,
        "model_version": MODEL_VERSION,
        "catalog_version": CATALOG_VERSION,
        "sample": {"top": top, "size": size, "seed": seed, "full": full},
        "timing": {"warmup_ms": warmup_ms, "rep_ms": rep_ms, "statistic": "median"},
        "autotune": {"top_k": top_k},
        "shapes": out_shapes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", choices=("default", "small"), default="default")
    parser.add_argument("--top", type=int, default=24)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--top-k", type=int, default=3, help="autotune's model top-k")
    args = parser.parse_args(argv)
    shapes = DEFAULT_SHAPES if args.shapes == "default" else SMALL_SHAPES
    plan = build_plan(
        args.hardware, shapes, args.top, args.size, args.seed, args.full, top_k=args.top_k
    )
    Path(args.out).write_text(json.dumps(plan, indent=1) + "\n")
    counts = ", ".join(f"{s['id']} {len(s['configs'])}" for s in plan["shapes"])
    print(f"plan for {plan['hardware']} written to {args.out}: {counts} configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
