"""The sample of configurations the harness compiles: deterministic, stratified, with a held-out
validation split.

Strata (a configuration drawn by several keeps the first of this order):
- `top5`: every configuration in the triton family's top 5 (`tilesolve.solver.solve(...,
  SolveOptions(kernel="triton", top_k=5))`) for the reference shapes below, forward and
  backward, on one catalog device of each compute capability; on the AMD targets the forward
  only (the ROCm backward is not modelled), on one catalog device of each gfx target, among the
  configurations the harness compiles there: the AMD knobs at Triton's defaults (`amd_top5`);
- `near_limit`: per target, kernel and head dim (fp16, not causal), the configurations whose
  shared memory (predicted by `allocation.predicted_shared_bytes`, a rule learnt from
  shared-memory-only compiles, docs/model.md "Compiler truth") lies nearest the target's
  per-block limit, above and below;
- `random`: per target and kernel, an equal number of configurations for each problem variant
  (head dim 64/96/128/256 x fp16/bf16 x causal or not; fp16 only on sm75, which has no bf16),
  drawn uniformly from the family's space (the parameters and alignment rule of
  `solver/families/triton.py` and `triton_backward.py`);
- `holdout`: a second, independent draw of the same kind as `random` (its own seed, HOLDOUT_SEED),
  made on 2026-12-07 on model 0.24.0 after every constant of the register and spill estimates
  had been fitted, on the targets the checks are stated for (sm75-sm90 and the AMD targets;
  the AMD draws inside the ROCm kernel's domain, num_stages <= 3, forward only) and skipping
  the keys of `random` and `near_limit`: the model has never been fitted on, or chosen by, any
  of its rows (docs/model.md 16.12).

The split: a `holdout` row is `holdout`. Any other row is `validation` when the first 8 hex
digits of sha256("<SPLIT_SEED>:<key>") read as a fraction of 2^32 fall below
VALIDATION_FRACTION, else `fit`; it depends on the key alone, so adding rows never moves a row
between splits. Phase 2 fits on `fit` rows only.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import allocation
import numpy as np
from configs import TARGETS, Tile, Variant

from tilesolve.solver import AttentionProblem, SolveOptions, solve
from tilesolve.solver.families.triton_compiler.lds_amd import default_nonkdim

SAMPLE_SEED = 21  # issue 21; each (target, kernel) group of the random stratum has its own stream
SPLIT_SEED = "issue-21-validation"
VALIDATION_FRACTION = 0.2
HEAD_DIMS = (64, 96, 128, 256)
DTYPES = ("fp16", "bf16")
STRATA = ("top5", "near_limit", "random", "holdout")
SPLITS = ("fit", "validation", "holdout")

# Random draws per (target, kernel); sm75's FMA code (no tensor cores below cc 8.0) compiles
# 10x slower, so it gets fewer. The AMD targets draw three times as many forward rows (issue 26:
# the register estimate's constants are fitted per target on the fit split, and fewer than half
# of the draws fall inside the ROCm kernel's domain, num_stages <= 3); the extra draws continue
# each group's stream, so the first 80 stay as they were.
RANDOM_PER_TARGET = {"fwd": 80, "bwd": 40}
RANDOM_PER_TARGET_SM75 = {"fwd": 24, "bwd": 12}
RANDOM_PER_TARGET_AMD = {"fwd": 240, "bwd": 40}
# The random stratum's cut on thread_state (fp32 values a thread holds), see random_rows.
LIGHT_THREAD_STATE = 256
RANDOM_MAX_THREAD_STATE = 512
SM75_MAX_THREAD_STATE = 128  # sm75's FMA code compiles in tens of seconds even below it
HEAVY_SHARE = 0.1
NEAR_LIMIT_PER_SIDE = 2  # per (target, kernel, variant): the nearest below and above the limit
# The holdout stratum: draws per (target, kernel), more on sm86 and sm89, where the spill
# verdict's share sits nearest the checks' 90% (docs/model.md 16.11); sm75 fewer, as above.
HOLDOUT_SEED = "issue-21-holdout-2026-12-07"
HOLDOUT_PER_TARGET = {
    "sm75": {"fwd": 12, "bwd": 6},
    "sm80": {"fwd": 40, "bwd": 20},
    "sm86": {"fwd": 50, "bwd": 25},
    "sm89": {"fwd": 50, "bwd": 25},
    "sm90": {"fwd": 40, "bwd": 20},
    "gfx942": {"fwd": 60},
    "gfx950": {"fwd": 60},
}
HOLDOUT_AMD_MAX_STAGES = 3  # the ROCm kernel's num_stages domain (compare.py skips the rest)

# One catalog device per compute capability for the top-5 stratum (the triton family's model
# of each), and one per AMD target (the triton family's ROCm model: CDNA3 gfx942 and CDNA4
# gfx950; compare.py checks the model on the same devices).
REFERENCE_DEVICES = {
    "sm75": "t4",
    "sm80": "a100-80gb",
    "sm86": "a10",
    "sm89": "l4",
    "sm90": "h100-sxm",
    "sm100": "b200",
    "sm120": "rtx-5090",
}
AMD_REFERENCE_DEVICES = {"gfx942": "mi300x", "gfx950": "mi355x"}
# Triton's AMD defaults (HIPOptions, triton_rocm/knobs.py): no waves_per_eu request, the
# compiler's own MFMA edge (0), kpack 1. kernels.source passes num_warps and num_stages alone,
# so every AMD row of the data set is compiled with these.
AMD_DEFAULT_KNOBS = {"waves_per_eu": 0, "matrix_instr_nonkdim": 0, "kpack": 1}
# How deep into the model's ranking the AMD top-5 looks for five configurations at the
# defaults (SolveOptions' largest top_k).
AMD_TOP5_DEPTH = 100
REFERENCE_SHAPE = {"batch": 2, "heads": 16, "seq_len": 4096}
TOP5_HEAD_DIMS = (64, 128)

# Per-block shared-memory limits (opt-in maximum) of each target, bytes: the catalog's
# `smem_per_block_optin_bytes` for the CUDA targets (tests/data/hardware.json,
# `max_smem_per_block_optin_bytes`), the LDS per workgroup for AMD (64 KiB on CDNA3, 160 KiB on
# CDNA4: hardware.json `lds_per_cu_kb` of AMD_MI300X / AMD_MI355X).
SHARED_LIMIT_BYTES = {
    "sm75": 65536,
    "sm80": 166912,
    "sm86": 101376,
    "sm89": 101376,
    "sm90": 232448,
    "sm100": 232448,
    "sm120": 101376,
    "gfx942": 65536,
    "gfx950": 163840,
}


@dataclass(frozen=True)
class PlanRow:
    target: str
    kernel: str  # fwd or bwd
    variant: Variant
    tile: Tile
    stratum: str

    @property
    def key(self) -> str:
        return row_key(self.target, self.kernel, self.variant, self.tile)

    def as_dict(self) -> dict[str, str | int]:
        return {
            "key": self.key,
            "target": self.target,
            "kernel": self.kernel,
            "head_dim": self.variant.head_dim,
            "dtype": self.variant.dtype,
            "causal": int(self.variant.causal),
            "block_m": self.tile.block_m,
            "block_n": self.tile.block_n,
            "dq_block_m": self.tile.dq_block_m if self.kernel == "bwd" else "",
            "dq_block_n": self.tile.dq_block_n if self.kernel == "bwd" else "",
            "num_warps": self.tile.num_warps,
            "num_stages": self.tile.num_stages,
            "stratum": self.stratum,
            "split": "holdout" if self.stratum == "holdout" else split_of(self.key),
        }


def row_key(target: str, kernel: str, variant: Variant, tile: Tile) -> str:
    """'sm80/fwd/d128/fp16/c1/128x64/w4/s3' (+ '/dq128x32' for the backward)."""
    key = (
        f"{target}/{kernel}/d{variant.head_dim}/{variant.dtype}/c{int(variant.causal)}/"
        f"{tile.block_m}x{tile.block_n}/w{tile.num_warps}/s{tile.num_stages}"
    )
    return key + (f"/dq{tile.dq_block_m}x{tile.dq_block_n}" if kernel == "bwd" else "")


def split_of(key: str) -> str:
    digest = hashlib.sha256(f"{SPLIT_SEED}:{key}".encode()).hexdigest()
    return "validation" if int(digest[:8], 16) / 2**32 < VALIDATION_FRACTION else "fit"


PLAN_COLUMNS = tuple(
    PlanRow("sm80", "fwd", Variant(64, "fp16", False), Tile(16, 16, 1, 1), "random").as_dict()
)


def variants(target: str) -> list[Variant]:
    dtypes = ("fp16",) if target == "sm75" else DTYPES
    return [Variant(d, t, c) for d, t, c in itertools.product(HEAD_DIMS, dtypes, (False, True))]


def _stages(target: str) -> tuple[int, ...]:
    """The family's num_stages domain: 1 below cc 8.0 (no software pipelining), else 1..5."""
    return (1,) if target == "sm75" else (1, 2, 3, 4, 5)


def forward_space(target: str) -> list[Tile]:
    """The triton forward family's legal tiles (solver/families/triton.py: powers of two 16..256,
    1..16 warps; every warp owns at least one 16x8 MMA tile of the score tile)."""
    sizes = (16, 32, 64, 128, 256)
    return [
        Tile(m, n, w, s)
        for m, n, w, s in itertools.product(sizes, sizes, (1, 2, 4, 8, 16), _stages(target))
        if (m // 16) * (n // 8) >= w
    ]


def backward_space(target: str, causal: bool) -> list[Tile]:
    """The triton backward family's legal tiles (solver/families/triton_backward.py)."""
    steps, resident = (16, 32, 64, 128), (16, 32, 64, 128, 256)
    tiles = []
    for m1, n1, m2, n2, w, s in itertools.product(
        steps, resident, resident, steps, (2, 4, 8), _stages(target)
    ):
        if n1 % m1 or m2 % n2:
            continue
        if (n1 // 16) * (m1 // 8) < w or (m2 // 16) * (n2 // 8) < w:
            continue
        if causal and (m1 < 32 or n2 < 32):
            continue
        tiles.append(Tile(m1, n1, w, s, m2, n2))
    return tiles


def space(target: str, kernel: str, variant: Variant) -> list[Tile]:
    if kernel == "fwd":
        return forward_space(target)
    return backward_space(target, variant.causal)


def thread_state(kernel: str, variant: Variant, tile: Tile) -> float:
    """FP32 values each thread holds in the loop's largest live set (the accumulators and the
    score tile(s), spread over the threads): forward bm x (bn + dv); backward the larger
    loop's, dK/dV: bn x (d + dv) + 2 bm x bn, dQ: dq_bm x d + 2 dq_bm x dq_bn."""
    d = variant.padded_head_dim
    threads = 32 * tile.num_warps
    if kernel == "fwd":
        return tile.block_m * (tile.block_n + d) / threads
    loop1 = tile.block_n * 2 * d + 2 * tile.block_m * tile.block_n
    loop2 = tile.dq_block_m * d + 2 * tile.dq_block_m * tile.dq_block_n
    return max(loop1, loop2) / threads


def _group_rng(target: str, kernel: str, seed: object = SAMPLE_SEED) -> np.random.Generator:
    """One random stream per (target, kernel), so that changing one group's count leaves the
    draws of every other group, and the first draws of its own, as they were."""
    digest = hashlib.sha256(f"{seed}:{target}:{kernel}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _draw(
    rng: np.random.Generator, target: str, kernel: str, variant: Variant, max_stages: int = 5
) -> Tile:
    """One uniform draw from the space (num_stages at most max_stages), cut at
    RANDOM_MAX_THREAD_STATE values per thread (twice the 255-register file: beyond it ptxas
    spills kilobytes and takes minutes), from the part above LIGHT_THREAD_STATE with
    probability HEAVY_SHARE."""
    cap = SM75_MAX_THREAD_STATE if target == "sm75" else RANDOM_MAX_THREAD_STATE
    tiles = [t for t in space(target, kernel, variant) if t.num_stages <= max_stages]
    state = np.array([thread_state(kernel, variant, t) for t in tiles])
    heavy = rng.random() < HEAVY_SHARE
    pool = np.flatnonzero(
        (state > LIGHT_THREAD_STATE) & (state <= cap)
        if heavy
        else state <= min(LIGHT_THREAD_STATE, cap)
    )
    if len(pool) == 0:
        pool = np.flatnonzero(state <= cap)
    return tiles[int(pool[rng.integers(len(pool))])]


def random_rows() -> Iterator[PlanRow]:
    """Per (target, kernel), `_draw`s cycling through the target's variants."""
    for target in TARGETS:
        counts = RANDOM_PER_TARGET_SM75 if target == "sm75" else RANDOM_PER_TARGET
        if TARGETS[target].backend == "hip":
            counts = RANDOM_PER_TARGET_AMD
        for kernel, count in counts.items():
            vs = variants(target)
            rng = _group_rng(target, kernel)
            for i in range(count):
                variant = vs[i % len(vs)]
                yield PlanRow(
                    target, kernel, variant, _draw(rng, target, kernel, variant), "random"
                )


def holdout_rows() -> Iterator[PlanRow]:
    """HOLDOUT_PER_TARGET's draws of distinct keys that neither `random` nor `near_limit`
    holds, each group its own stream of HOLDOUT_SEED, cycling through the variants."""
    taken = {row.key for row in itertools.chain(random_rows(), near_limit_rows())}
    for target, counts in HOLDOUT_PER_TARGET.items():
        amd = TARGETS[target].backend == "hip"
        max_stages = HOLDOUT_AMD_MAX_STAGES if amd else 5
        for kernel, count in counts.items():
            vs = variants(target)
            rng = _group_rng(target, kernel, HOLDOUT_SEED)
            drawn = 0
            while drawn < count:
                variant = vs[drawn % len(vs)]
                row = PlanRow(
                    target,
                    kernel,
                    variant,
                    _draw(rng, target, kernel, variant, max_stages),
                    "holdout",
                )
                if row.key not in taken:
                    taken.add(row.key)
                    drawn += 1
                    yield row


def top5_rows() -> Iterator[PlanRow]:
    for target, device in REFERENCE_DEVICES.items():
        for head_dim, causal, phase in itertools.product(
            TOP5_HEAD_DIMS, (False, True), ("forward", "backward")
        ):
            problem = AttentionProblem(
                **REFERENCE_SHAPE, head_dim=head_dim, causal=causal, phase=phase
            )
            answer = solve(problem, device, SolveOptions(kernel="triton", top_k=5))
            kernel = "fwd" if phase == "forward" else "bwd"
            for candidate in answer.candidates:
                p = candidate.parameters
                tile = Tile(
                    p["block_m"],
                    p["block_n"],
                    p["num_warps"],
                    p["num_stages"],
                    p.get("dq_block_m", 0),
                    p.get("dq_block_n", 0),
                )
                yield PlanRow(target, kernel, Variant(head_dim, "fp16", causal), tile, "top5")
    for target in AMD_REFERENCE_DEVICES:
        for head_dim, causal in itertools.product(TOP5_HEAD_DIMS, (False, True)):
            for tile in amd_top5(target, head_dim, causal):
                yield PlanRow(target, "fwd", Variant(head_dim, "fp16", causal), tile, "top5")


def compiler_nonkdim(block_m: int, block_n: int, dv: int) -> int:
    """The MFMA edge Triton's AMD backend picks with `matrix_instr_nonkdim` 0 when it is the
    same for both of the forward loop's dots (S = Q K^T, block_m x block_n; O += P V,
    block_m x dv: `lds_amd.default_nonkdim`), else 0 (no single knob value stands for it)."""
    rows = np.array([block_m, block_m])
    first, second = default_nonkdim(rows, np.array([block_n, dv]))
    return int(first) if first == second else 0


def amd_top5(target: str, head_dim: int, causal: bool) -> list[Tile]:
    """The triton family's top 5 forward configurations on the target's reference device
    among those compiled at Triton's AMD defaults (AMD_DEFAULT_KNOBS): the model's ranking
    with waves_per_eu 0 and kpack 1 pinned, keeping the candidates whose MFMA edge is the one
    the compiler picks by default (`compiler_nonkdim`; the family names the instruction, 16
    or 32, where the default leaves it to the compiler), the first five distinct tiles."""
    problem = AttentionProblem(**REFERENCE_SHAPE, head_dim=head_dim, causal=causal)
    pins = {k: v for k, v in AMD_DEFAULT_KNOBS.items() if k != "matrix_instr_nonkdim"}
    options = SolveOptions(kernel="triton", top_k=AMD_TOP5_DEPTH, parameter_pins=pins)
    answer = solve(problem, AMD_REFERENCE_DEVICES[target], options)
    dv = Variant(head_dim, "fp16", causal).padded_head_dim
    tiles: list[Tile] = []
    for candidate in answer.candidates:
        p = candidate.parameters
        tile = Tile(p["block_m"], p["block_n"], p["num_warps"], p["num_stages"])
        default = compiler_nonkdim(tile.block_m, tile.block_n, dv)
        if p["matrix_instr_nonkdim"] == default and tile not in tiles:
            tiles.append(tile)
        if len(tiles) == 5:
            break
    return tiles


def near_limit_rows() -> Iterator[PlanRow]:
    """Per (target, kernel, head dim), the NEAR_LIMIT_PER_SIDE tiles of the family's space whose
    predicted shared memory is nearest the limit from below (fits) and from above (refused),
    among those under the random stratum's cut on thread_state (beyond it compiles time out)."""
    for target, limit in SHARED_LIMIT_BYTES.items():
        for kernel in ("fwd", "bwd"):
            for variant in (Variant(d, "fp16", False) for d in HEAD_DIMS):
                scored = [
                    (allocation.predicted_shared_bytes(target, kernel, variant, t), t)
                    for t in space(target, kernel, variant)
                    if thread_state(kernel, variant, t) <= RANDOM_MAX_THREAD_STATE
                ]
                below = sorted((limit - b, key_order(t), t) for b, t in scored if b <= limit)
                above = sorted((b - limit, key_order(t), t) for b, t in scored if b > limit)
                for _, _, tile in below[:NEAR_LIMIT_PER_SIDE] + above[:NEAR_LIMIT_PER_SIDE]:
                    yield PlanRow(target, kernel, variant, tile, "near_limit")


def key_order(tile: Tile) -> tuple[int, ...]:
    """A total order on tiles (ties in predicted bytes break by it, so the plan is fixed)."""
    return (
        tile.block_m,
        tile.block_n,
        tile.num_warps,
        tile.num_stages,
        tile.dq_block_m,
        tile.dq_block_n,
    )


def build_plan(strata: Iterable[str] = STRATA) -> list[PlanRow]:
    """The whole sample, deduplicated (first stratum in STRATA order wins), in compile order:
    by each row's position within its (stratum, target, kernel) group, then shuffled by key
    hash, so that a partial collection holds about the first rows of every group."""
    chosen = set(strata)
    unknown = chosen - set(STRATA)
    if unknown:
        raise ValueError(f"unknown strata {sorted(unknown)}; allowed: {', '.join(STRATA)}")
    sources = {
        "top5": top5_rows,
        "near_limit": near_limit_rows,
        "random": random_rows,
        "holdout": holdout_rows,
    }
    rows: dict[str, tuple[int, PlanRow]] = {}
    for stratum in STRATA:
        if stratum in chosen:
            position: dict[tuple[str, str], int] = {}
            for row in sources[stratum]():
                group = (row.target, row.kernel)
                position[group] = position.get(group, -1) + 1
                if row.key not in rows:
                    rows[row.key] = (position[group], row)

    def order(item: tuple[int, PlanRow]) -> tuple[int, str]:
        return item[0], hashlib.sha256(item[1].key.encode()).hexdigest()

    return [row for _, row in sorted(rows.values(), key=order)]
