"""Error of FlashAttention-2's forward algorithm versus block size: seed 001's FP16 claim, measured.

Seed 001 says bigger blocks are numerically unstable in FP16 (that 128 -> 256 triples the error
and 512 reaches 1e-2). This script runs `tilesolve.solver.apps.simulate` (the tiled algorithm in
numpy, inputs and P rounded to the element type, FP32 accumulators, compared with float64
attention on the same rounded inputs) for square tiles 16 .. 256 (and 512, the seed's last
point), FP16 and BF16, seq_len 512 / 2048 / 8192, causal off and on, unit logits and logits
near +-100, over several seeds, then prints the tables and writes the whole of
docs/numerics.md (the measurement, how it was made, and the answer).

    .venv/bin/python benchmarks/numerics.py                 # the documented run (~2-3 min)
    .venv/bin/python benchmarks/numerics.py --no-write      # print only
    .venv/bin/python benchmarks/numerics.py --seq-lens 512 --seeds 2 --output /tmp/n.md
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import math
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilesolve.solver import AttentionProblem, SimulationResult
from tilesolve.solver.apps.simulate import simulate_tiles

# The module (the package attribute `simulate` is the function of the same name).
SIMULATE_MODULE = importlib.import_module("tilesolve.solver.apps.simulate")
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "docs" / "numerics.md"
BLOCKS = (16, 32, 64, 128, 256, 512)
SHIPPED_BLOCKS = (16, 32, 64, 128, 256)  # the range FlashAttention kernels ship
DTYPES = ("fp16", "bf16")
LOGIT_SCALES = (1.0, 16.0)  # std of the scaled logits: 16 puts the largest near +-100
CONTROL_OFFSET_LOG2 = 0.5  # the control run computes P = exp2(... - 0.5): no weight is 1
CONTROL_SEQ_LENS = (512, 2048)
# seq_len -> (heads, head_dim, seeds); the longest gets one seed to keep the run short.
SHAPES = {512: (2, 64, 4), 2048: (1, 128, 3), 8192: (1, 128, 1)}


@dataclass(frozen=True)
class Row:
    """One (dtype, logits, seq_len, causal) setting: per block size, results over the seeds."""

    dtype: str
    logit_scale: float
    seq_len: int
    causal: bool
    heads: int
    head_dim: int
    seeds: int
    results: dict[int, list[SimulationResult]]

    def value(self, block: int, field: str) -> float:
        """A max error: the largest over the seeds; anything else: the mean over the seeds."""
        values = [float(getattr(r, field)) for r in self.results[block]]
        return max(values) if field.startswith("max_") else statistics.fmean(values)

    @property
    def label(self) -> str:
        logits = "unit" if self.logit_scale == 1 else f"x{self.logit_scale:g}"
        mask = "causal" if self.causal else "full"
        return f"{self.dtype} {logits:>4} {self.seq_len:>5} {mask:>6}"


def measure(
    seq_lens: Sequence[int],
    seeds: int | None,
    blocks: Sequence[int],
    quiet: bool,
    dtypes: Sequence[str] = DTYPES,
) -> list[Row]:
    rows = []
    for dtype in dtypes:
        for logit_scale in LOGIT_SCALES:
            for seq_len in seq_lens:
                heads, head_dim, default_seeds = SHAPES.get(seq_len, (1, 128, 1))
                n_seeds = seeds if seeds is not None else default_seeds
                for causal in (False, True):
                    problem = AttentionProblem(
                        heads=heads, seq_len=seq_len, head_dim=head_dim, dtype=dtype, causal=causal
                    )
                    per_block: dict[int, list[SimulationResult]] = {b: [] for b in blocks}
                    for seed in range(n_seeds):
                        tiles = [(b, b) for b in blocks]
                        for result in simulate_tiles(
                            problem, tiles, seed=seed, logit_scale=logit_scale
                        ):
                            per_block[result.block_m].append(result)
                    row = Row(
                        dtype, logit_scale, seq_len, causal, heads, head_dim, n_seeds, per_block
                    )
                    rows.append(row)
                    if not quiet:
                        print(f"  measured {row.label}", file=sys.stderr, flush=True)
    return rows


@contextlib.contextmanager
def no_exact_weights() -> Iterator[None]:
    """The control: every P is computed against the running max plus 0.5 (log2 units), so no
    weight is exactly 1; l and O are scaled alike and the result is unchanged in exact
    arithmetic. What block size did through exact weights then disappears."""
    saved = SIMULATE_MODULE._P_EXPONENT_OFFSET
    SIMULATE_MODULE._P_EXPONENT_OFFSET = np.float32(CONTROL_OFFSET_LOG2)
    try:
        yield
    finally:
        SIMULATE_MODULE._P_EXPONENT_OFFSET = saved


# ---- the tables ----------------------------------------------------------------------------

MEASURES = {
    "max_abs_error": "max abs error, written",
    "max_abs_error_fp32": "max abs error, FP32",
    "mean_abs_error_fp32": "mean abs error, FP32",
}


def _geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def ratios(rows: Sequence[Row], field: str, block: int, base: int) -> list[float]:
    """Per setting, the error at `block` over the error at `base` (settings with a 0 skipped)."""
    return [r.value(block, field) / r.value(base, field) for r in rows if r.value(base, field) > 0]


def trend_table(rows: Sequence[Row], control: Sequence[Row], blocks: Sequence[int]) -> list[str]:
    """Per dtype and measure: the error at each block size relative to block 16, geometric
    mean over the settings (smallest - largest in brackets); then the control run."""
    head = ["dtype", "measure", *[str(b) for b in blocks]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups = [(d, [r for r in rows if r.dtype == d], "") for d in DTYPES]
    groups.append(("fp16", list(control), " (control: no weight is 1)"))
    for dtype, subset, note in groups:
        if not subset:
            continue
        for field, name in MEASURES.items():
            cells = []
            for block in blocks:
                values = ratios(subset, field, block, blocks[0])
                cells.append(f"{_geomean(values):.2f} ({min(values):.2f}-{max(values):.2f})")
            lines.append("| " + " | ".join([dtype, name + note, *cells]) + " |")
    return lines


def setting_table(rows: Sequence[Row], blocks: Sequence[int], field: str) -> list[str]:
    """One line per setting, one column per block size, and 256 over 16."""
    head = ["dtype", "logits", "seq_len", "mask", *[str(b) for b in blocks], "256 / 16"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        if field == "rescales":
            cells = [row.value(b, field) / (row.heads * row.seq_len) for b in blocks]
            shown = [f"{c:.2f}" for c in cells]
        else:
            cells = [row.value(b, field) for b in blocks]
            shown = [f"{c:.2e}" for c in cells]
        by_block = dict(zip(blocks, cells, strict=True))
        ratio = by_block[256] / by_block[16] if by_block.get(16) else float("nan")
        logits = "unit" if row.logit_scale == 1 else f"std {row.logit_scale:g}"
        mask = "causal" if row.causal else "full"
        fields = [row.dtype, logits, str(row.seq_len), mask, *shown, f"{ratio:.2f}"]
        lines.append("| " + " | ".join(fields) + " |")
    return lines


@dataclass(frozen=True)
class Verdict:
    holds: bool
    growth_256_128: dict[str, float]  # FP16, per measure: geometric mean over the settings
    growth_256_16: dict[str, float]
    control_256_16: dict[str, float]  # the same, in the control run (no weight exactly 1)
    spread_fp32_max: tuple[float, float]  # FP16 FP32 max error, block b / block 16: min, max
    fp16_settings: int
    fp16_largest_error: float
    fp16_largest_tolerance_fraction: float
    all_within_tolerance: bool
    all_tiles_as_modelled: bool
    largest_logit: float
    rescales_16: float
    rescales_256: float


def verdict(rows: Sequence[Row], control: Sequence[Row], blocks: Sequence[int]) -> Verdict:
    fp16 = [r for r in rows if r.dtype == "fp16"]
    growth_256_128 = {f: _geomean(ratios(fp16, f, 256, 128)) for f in MEASURES}
    growth_256_16 = {f: _geomean(ratios(fp16, f, 256, 16)) for f in MEASURES}
    spread = [v for b in blocks for v in ratios(fp16, "max_abs_error_fp32", b, 16)]
    everything = [res for r in rows for b in blocks for res in r.results[b]]
    fp16_results = [res for r in fp16 for b in blocks for res in r.results[b]]
    # The claim: the error grows with the tile (x3 from 128 to 256). It holds only if some
    # FP16 measure grows clearly and systematically (over the geometric mean of the settings).
    holds = any(growth_256_128[f] >= 1.5 or growth_256_16[f] >= 2.0 for f in MEASURES)

    def per_row(r: Row, b: int) -> float:
        return r.value(b, "rescales") / (r.heads * r.seq_len)

    return Verdict(
        holds=holds,
        growth_256_128=growth_256_128,
        growth_256_16=growth_256_16,
        control_256_16={
            f: _geomean(ratios(control, f, 256, 16)) if control else math.nan for f in MEASURES
        },
        spread_fp32_max=(min(spread), max(spread)),
        fp16_settings=len(fp16),
        fp16_largest_error=max(res.max_abs_error for res in fp16_results),
        fp16_largest_tolerance_fraction=max(
            res.max_abs_error / res.tolerance for res in fp16_results
        ),
        all_within_tolerance=all(res.within_tolerance for res in everything),
        all_tiles_as_modelled=all(res.all_blocks_visited_as_modelled for res in everything),
        largest_logit=max(res.max_abs_logit for res in everything),
        rescales_16=statistics.fmean(per_row(r, 16) for r in rows),
        rescales_256=statistics.fmean(per_row(r, 256) for r in rows),
    )


# ---- the document --------------------------------------------------------------------------


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]  # type: ignore[attr-defined]
        blas_name = f"{blas['name']} {blas.get('version', '')}".strip()
    except (AttributeError, KeyError, TypeError):
        blas_name = "unknown BLAS"
    return (
        f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, numpy {np.__version__} ({blas_name})"
    )


def _shapes(rows: Sequence[Row]) -> str:
    seen: dict[int, Row] = {}
    for row in rows:
        seen.setdefault(row.seq_len, row)
    return "; ".join(
        f"seq_len {n}: {r.heads} head{'s' if r.heads > 1 else ''}, head_dim {r.head_dim}, "
        f"{r.seeds} seed{'s' if r.seeds > 1 else ''}"
        for n, r in sorted(seen.items())
    )


def document(
    rows: Sequence[Row],
    control: Sequence[Row],
    blocks: Sequence[int],
    command: str,
    started: datetime.datetime,
    seconds: float,
) -> str:
    v = verdict(rows, control, blocks)
    g128, g16, c16 = v.growth_256_128, v.growth_256_16, v.control_256_16
    mean128, mean16 = g128["mean_abs_error_fp32"], g16["mean_abs_error_fp32"]
    if v.holds:
        answer = (
            "**Yes, in this measurement: the FP16 error grows clearly with the block size** "
            "(see the tables). The reasoning below would then be wrong somewhere; please "
            "report it."
        )
    else:
        answer = (
            "**No. Seed 001's claim that bigger blocks are numerically unstable in FP16 does "
            "not hold for FlashAttention's algorithm.** "
            + (
                "The largest error is the same at every block size"
                if abs(g16["max_abs_error"] - 1) < 0.05
                else f"The largest error changes by {g16['max_abs_error']:.2f}x from 16 to 256"
            )
            + " and nothing becomes unstable. The one systematic effect goes "
            f"the seed's way but is small and benign: the mean error grows by "
            f"{mean128 - 1:.0%} from block 128 to 256 (the seed says 3x) and by "
            f"{mean16 - 1:.0%} from 16 to 256, because small tiles compute more of the "
            "heaviest weights as exactly 1. Choose the block size for speed "
            "(`tilesolve-cli solve`), not for FP16 stability."
        )
    largest = v.fp16_largest_error
    vs_seed = (
        f"{1e-2 / largest:.0f} times below the 1e-2 the seed gives for block 512"
        if largest < 1e-2
        else "at or above the seed's 1e-2"
    )
    lines = [
        "# Numerics: does a bigger tile make FlashAttention less accurate in FP16?",
        "",
        "<!-- Generated by benchmarks/numerics.py; edit that script, not this file. -->",
        "",
        "Seed 001 says the block size 128 is chosen because bigger blocks are numerically "
        "unstable in FP16: the running max m and sum l of the online softmax are updated "
        '"across too wide a span", going from 128 to 256 triples the FP16 error (1e-4 to '
        "3e-4) and 512 reaches 1e-2. (It attributes these numbers to the FlashAttention "
        "paper; we have not checked that attribution.) This page measures the claim with the "
        "simulator of `tilesolve-cli simulate`.",
        "",
        "## Answer",
        "",
        answer,
        "",
        f"- **Largest error.** FP16, the max error at block 256 over that at block 128, "
        f"geometric mean over the {v.fp16_settings} FP16 settings (the seed predicts 3): "
        f"{g128['max_abs_error']:.2f} for the written output, {g128['max_abs_error_fp32']:.2f} "
        f"for the FP32 result before that rounding; block 256 over block 16: "
        f"{g16['max_abs_error']:.2f} and {g16['max_abs_error_fp32']:.2f}. The FP32 result's "
        f"max error moves between block sizes by a factor {v.spread_fp32_max[0]:.2f} to "
        f"{v.spread_fp32_max[1]:.2f} of block 16's, up as often as down.",
        f"- **Mean error.** FP16, FP32 result: block 256 over 128 {mean128:.2f}, over 16 "
        f"{mean16:.2f}. A weight computed while its own score is the row's running max is "
        "exp(0) = 1, which FP16 holds exactly; with small tiles more scores are the running "
        "max at their turn (see the rescale counts), so more of the heaviest weights escape "
        "rounding. In a control run where every weight is computed against the running max "
        f"plus {CONTROL_OFFSET_LOG2:g} (log2), so that none is exactly 1, block 256 over 16 "
        f"is {c16['mean_abs_error_fp32']:.2f} (against {mean16:.2f} without the offset): "
        + (
            "the trend all but disappears."
            if c16["mean_abs_error_fp32"] - 1 < (mean16 - 1) / 3
            else "the trend remains, so this explanation is incomplete."
        ),
        f"- **Size.** The largest FP16 error anywhere, at any block size (512 included) and "
        f"with logits up to |{v.largest_logit:.0f}|, is {largest:.2e}: {vs_seed}, and "
        f"{v.fp16_largest_tolerance_fraction:.0%} of the simulator's FP16 tolerance. Every "
        f"run of every setting, FP16 and BF16, is within tolerance: "
        f"{'yes' if v.all_within_tolerance else 'NO'}.",
        f"- **Rescales.** On average {v.rescales_16:.2f} per query row at block 16, "
        f"{v.rescales_256:.2f} at 256.",
        f"- **Tiles.** Every simulated kernel visited exactly the K/V tiles the performance "
        f"model counts (causal block skipping included): "
        f"{'yes' if v.all_tiles_as_modelled else 'NO'}.",
        "",
        "Error at each block size relative to block 16: geometric mean over the settings "
        "(logits x seq_len x mask), smallest and largest in brackets. Instability would show "
        "as numbers growing fast to the right.",
        "",
        *trend_table(rows, control, blocks),
        "",
        "## Why the block size cannot make it unstable",
        "",
        "- **Every exponent is at most 0.** A row's weights are P = exp(s - m) with m the "
        "running max of the scores seen so far, so 0 <= P <= 1 whatever the block size; the "
        "rescale factor exp(m_old - m_new) is in (0, 1]; the running sum l is at least 1 once "
        "the row has seen a key (its max contributes exp(0) = 1) and at most the number of "
        "keys; the accumulator is at most l * max|V|. Nothing can overflow, in FP32 or in "
        "FP16, for any block size or logit magnitude (logits of +-100 included).",
        "- **The FP16 roundings are the same kind for every block size.** The inputs are "
        "rounded once; P is rounded to FP16 for the second matmul, each weight with a "
        "relative error of at most 2^-11 whether it was computed against the running or the "
        "final max (the later rescale is an FP32 multiplication); the output is rounded once. "
        "Together they bound the error by about 2 * 2^-11 * max|V| for every tile.",
        "- **What the block size changes.** Which running max each weight is computed "
        "against: every weight computed while its score is the running max is exactly 1 and "
        "escapes rounding, and small tiles produce more of them (the mild mean-error trend; "
        "it stays inside the same bound). And FP32 arithmetic: block_n sets how many terms "
        "each tile's matmul sums before they enter the FP32 accumulator, how many FP32 "
        "rescales a row goes through and how many partial sums l collects; each FP32 step "
        "adds a relative error of about 2^-24, a hundred times below FP16's 2^-11.",
        "- **block_m has no numerical effect at all.** Rows never interact, and a tile a row "
        "does not see is a no-op for it; with an order-independent FP32 matmul the outputs "
        "for block_m 16, 64 and 128 are bit-identical (tests/test_simulate.py).",
        "- The size of the error is set by the output's magnitude, not the tile: with unit "
        "logits over thousands of keys the attention is spread and |O| is small, so its FP16 "
        "rounding is small; with logits near +-100 a row attends to a few keys, |O| "
        "approaches |V| (up to about 4) and half an FP16 ulp there is 1e-3 to 2e-3, for "
        "every block size.",
        "",
        "What would make a bigger tile worse is keeping P's row sum or the O accumulator in "
        "FP16: the error would then grow with the accumulation length. FlashAttention-2 and "
        "-3 keep both in FP32, as the simulator does.",
        "",
        "## How it was measured",
        "",
        f"- Command: `{command}`",
        f"- Date: {started:%Y-%m-%d %H:%M} UTC; run time {seconds:.0f} s.",
        f"- Machine: {_machine()}.",
        "- What runs: `tilesolve.solver.apps.simulate` (see `tilesolve-cli simulate --help` and "
        "the module's docstring): FlashAttention-2's forward algorithm tile by tile, K/V "
        "tiles from last to first as FA2 iterates, inputs and P rounded to FP16 / BF16, S, "
        "the running max and sum and the O accumulator in FP32, exp2 with subnormal results "
        "flushed to zero as the GPU's `ex2.approx.ftz` does, O multiplied by 1/l and "
        "rounded to the element type. The reference is plain softmax attention in float64 "
        "from the same rounded inputs, so every error here is the kernel algorithm's own, "
        "not the input rounding's.",
        f"- Data: batch 1; {_shapes(rows)} (seeds 0, 1, ...). Q, K, V are standard normal "
        "from numpy's default generator, Q multiplied by the logit scale so that the scaled "
        "logits q.k / sqrt(head_dim) have that standard deviation (1: unit logits; 16: the "
        "largest reach about +-100). Tiles are square, block_m = block_n, 16 to 256 as "
        "FlashAttention ships them, and 512 for the seed's last point.",
        "- Max errors are max |O - reference| over every output element, the largest over "
        "the seeds; mean errors are averaged over the seeds.",
        "- Limits: this is a simulation on a CPU, not a GPU measurement. BLAS sums FP32 "
        "products in its own order, as different MMA layouts do; GPU tensor cores' internal "
        "accumulation and `ex2.approx` differ from IEEE FP32 in the last bits: FP32-level, "
        "far below the FP16 roundings that dominate. `--seq-lens` and `--seeds` run other "
        "shapes.",
        "",
        "## Max abs error of the written output",
        "",
        "The output as stored in FP16 / BF16; the columns are block_m = block_n; the last "
        "column is block 256 over block 16.",
        "",
        *setting_table(rows, blocks, "max_abs_error"),
        "",
        "## Max abs error of the FP32 result, before the output rounding",
        "",
        "The algorithm's own error (P's rounding and FP32 arithmetic), without the final "
        "rounding that every block size shares.",
        "",
        *setting_table(rows, blocks, "max_abs_error_fp32"),
        "",
        "## Mean abs error of the FP32 result",
        "",
        *setting_table(rows, blocks, "mean_abs_error_fp32"),
        "",
        "## Online-softmax rescales per query row",
        "",
        "Steps in which a row's running max rose and its sum and accumulator were rescaled, "
        "averaged over the seeds and divided by heads x seq_len.",
        "",
        *setting_table(rows, blocks, "rescales"),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seq-lens",
        type=int,
        nargs="+",
        default=sorted(SHAPES),
        help="sequence lengths (default 512 2048 8192)",
    )
    parser.add_argument("--seeds", type=int, help="seeds per setting (default: 4, 3, 1 by length)")
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="markdown file to write"
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    started = datetime.datetime.now(datetime.UTC)
    t0 = time.perf_counter()
    rows = measure(args.seq_lens, args.seeds, BLOCKS, args.quiet)
    control_lens = [n for n in args.seq_lens if n in CONTROL_SEQ_LENS] or args.seq_lens[:1]
    with no_exact_weights():
        control = measure(control_lens, args.seeds, BLOCKS, args.quiet, dtypes=("fp16",))
    seconds = time.perf_counter() - t0
    shown = sys.argv[1:] if argv is None else list(argv)
    command = shlex.join([".venv/bin/python", "benchmarks/numerics.py", *shown])
    text = document(rows, control, BLOCKS, command, started, seconds)
    print(text)
    if not args.no_write:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
