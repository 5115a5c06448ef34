"""The compiler-truth data set (benchmarks/data/compiler/triton_resources.csv, made by
benchmarks/compiler/collect.py): its integrity, and the triton family's resource model against
it with issue 21's thresholds (docs/model.md "Compiler truth").

The threshold tests pin issue 21's figures per target and per split (the `fit` split, on which
the register constants are fitted; the `validation` split, held out by the key's hash; the
`holdout` split, an independent draw made after the constants were fitted, plan.py; and
`held-out`, validation and holdout together). A case the model does
not meet yet is marked xfail(strict=True) (`SHORT_TODAY`), so that it turns into a failure the
day the model meets it, and whoever made it pass removes the mark.
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks/compiler"))

import compare  # noqa: E402
import plan  # noqa: E402
from configs import TARGETS, from_row  # noqa: E402

DATA = ROOT / "benchmarks/data/compiler/triton_resources.csv"
STATUSES = {
    "ok",
    "trap_stub",
    "compile_error",
    "ptxas_error",
    "mlir_error",
    "error",
    "timeout",
    "crash",
}
# the catalog's targets of issue 21, and the AMD ones of the triton family's ROCm kernel
MODELLED_TARGETS = ("sm75", "sm80", "sm86", "sm89", "sm90", "gfx942", "gfx950")
TOP5_TARGETS = {**plan.REFERENCE_DEVICES, **plan.AMD_REFERENCE_DEVICES}
MIN_COMPILED = 1500  # issue 21: at least 1,500 compiled configurations over the nine targets


@cache
def rows() -> tuple[dict[str, str], ...]:
    with DATA.open(newline="") as f:
        return tuple(csv.DictReader(f))


def test_columns_and_unique_keys() -> None:
    header = list(rows()[0])
    assert header[: len(plan.PLAN_COLUMNS)] == list(plan.PLAN_COLUMNS)
    keys = [r["key"] for r in rows()]
    assert len(keys) == len(set(keys)), "a configuration recorded twice"
    assert keys == sorted(keys), "collect.py writes the finished data sorted by key"


def test_each_key_names_its_row() -> None:
    for r in rows():
        variant, tile = from_row(r)
        assert plan.row_key(r["target"], r["kernel"], variant, tile) == r["key"]


@cache
def planned_keys() -> frozenset[str]:
    """Keys of the plan's model-independent strata (random, near-limit and holdout draws)."""
    return frozenset(
        p.key for p in (*plan.random_rows(), *plan.near_limit_rows(), *plan.holdout_rows())
    )


def test_every_row_is_a_planned_row() -> None:
    """No strays: each row is one of the plan's draws, or a top-5 row of the reference
    devices (those follow the model, so they are checked by stratum, not recomputed)."""
    for r in rows():
        if r["stratum"] == "top5":
            assert r["target"] in TOP5_TARGETS and r["dtype"] == "fp16", r["key"]
            assert r["target"] in plan.REFERENCE_DEVICES or r["kernel"] == "fwd", r["key"]
        else:
            assert r["key"] in planned_keys(), r["key"]
    assert set(Counter(r["target"] for r in rows())) == set(TARGETS)


def test_collection_is_complete() -> None:
    """Every planned draw is recorded, the reference devices have their top-5 rows (CUDA:
    forward and backward, 8 shapes x 5; AMD: the forward, 4 shapes x 5), and the set holds
    >= 1,500 compiled configurations (issue 21)."""
    recorded = {r["key"] for r in rows()}
    missing = sorted(planned_keys() - recorded)
    assert not missing, f"{len(missing)} planned rows missing, e.g. {missing[:3]}"
    compiled = sum(r["status"] in ("ok", "trap_stub") for r in rows())
    assert compiled >= MIN_COMPILED
    top5 = Counter(r["target"] for r in rows() if r["stratum"] == "top5")
    for target in TOP5_TARGETS:
        assert top5[target] >= 20, f"{target}: {top5[target]} top-5 rows"


def test_statuses_and_measured_columns() -> None:
    for r in rows():
        assert r["status"] in STATUSES, r["key"]
        assert float(r["compile_s"]) > 0, r["key"]
        if r["status"] not in ("ok", "trap_stub"):
            assert r["message"], f"{r['key']}: a failed compile has a message"
            continue
        assert int(r["shared_bytes"]) >= 0
        if TARGETS[r["target"]].backend == "cuda":
            assert int(r["regs"]) > 0 and int(r["spill_store_bytes"]) >= 0, r["key"]
            assert r["assembler"].startswith("ptxas "), r["key"]
        else:
            assert int(r["total_vgprs"]) >= int(r["vgprs"]) > 0, r["key"]
            assert int(r["agprs"]) >= 0 and int(r["sgprs"]) > 0, r["key"]
    versions = {r["triton_version"] for r in rows() if r["status"] == "ok"}
    assert len(versions) == 1, f"one compiler per data set; got {versions}"


def test_split_is_the_keys_hash() -> None:
    """The holdout stratum is the holdout split; every other row's split is its key's hash."""
    assert {r["split"] for r in rows()} == set(plan.SPLITS)
    hashed = [r for r in rows() if r["stratum"] != "holdout"]
    for r in rows():
        expected = "holdout" if r["stratum"] == "holdout" else plan.split_of(r["key"])
        assert r["split"] == expected, r["key"]
    share = sum(r["split"] == "validation" for r in hashed) / len(hashed)
    assert abs(share - plan.VALIDATION_FRACTION) < 0.05


def test_holdout_is_the_plans_independent_draw() -> None:
    """Every holdout row is one of plan.holdout_rows()'s draws (none another stratum's key),
    and the draw's rows are all in the file, on the targets and kernels it names."""
    drawn = {row.key: row for row in plan.holdout_rows()}
    held = {r["key"]: r for r in rows() if r["stratum"] == "holdout"}
    assert set(held) == set(drawn)
    for key, r in held.items():
        assert r["target"] in plan.HOLDOUT_PER_TARGET, key
        assert r["kernel"] in plan.HOLDOUT_PER_TARGET[r["target"]], key
    others = {row.key for row in plan.random_rows()} | {row.key for row in plan.near_limit_rows()}
    assert not others & set(held)


def test_launch_limit_rows_exist_on_both_sides() -> None:
    """The near-limit stratum gives every target compiled rows above and below its limit."""
    for target, limit in plan.SHARED_LIMIT_BYTES.items():
        shared = [
            int(r["shared_bytes"])
            for r in rows()
            if r["target"] == target and r["status"] in ("ok", "trap_stub")
        ]
        assert any(b <= limit for b in shared) and any(b > limit for b in shared), target


# ---- the model against the compiler (issue 21's thresholds) -------------------------------


@cache
def reports(split: str) -> dict[str, compare.TargetReport]:
    """Per target, the report over one split's rows ("held-out": validation and holdout)."""
    chosen = compare.in_split(list(rows()), split)
    return {t: compare.report(chosen, t) for t in MODELLED_TARGETS}


def _smem_within(r: compare.TargetReport) -> bool:
    return r.within_share is not None and r.within_share >= 0.95


def _no_worst(r: compare.TargetReport) -> bool:
    return r.worst_errors == 0


def _few_conservative(r: compare.TargetReport) -> bool:
    return r.conservative_share is not None and r.conservative_share <= 0.05


def _registers(r: compare.TargetReport) -> bool:
    return r.reg_error_median is not None and r.reg_error_median <= 8


def _spills(r: compare.TargetReport) -> bool:
    return r.spill_share is not None and r.spill_share >= 0.90


CHECKS = {
    "smem_within_2pct": _smem_within,
    "no_worst_errors": _no_worst,
    "conservative_at_most_5pct": _few_conservative,
    "median_reg_error_at_most_8": _registers,
    "spills_agree_90pct": _spills,
}
# (split, target, check) cases the model does not meet on one subset of the held-out rows, each
# with the issue that owns it and its figures: marked xfail(strict=True), so each turns into a
# failure the day the model meets it and whoever made it pass removes it from this table. The
# issues' figures are judged on every held-out row together (`held-out`: validation and
# holdout, docs/model.md 16.12), which has no entry here: it meets every check.
SHORT_TODAY: dict[tuple[str, str, str], str] = {
    # issue 21 phase 2: sm86 validation spills 18 of 21: two misses are ptxas's allocation at
    # its limit (they spill at 255 and fit under a cap of 248: cap_probe.py); the third is a
    # one-stage loop the model puts above its pipelined twins. The term that settles it (the
    # hoisted fragments, docs/model.md 16.10) gains nothing in cross-validation inside the fit
    # split or on fresh compiles, and moves 108 triton/flex picks to one stage: not kept.
    # Measured (16.11): ptxas's own demand (peak live + spilled registers) predicts 19 of 21 at
    # its best threshold, and a live estimate fitted to the peaks predicts fewer spills in
    # cross-validation than today's; the check turns on ptxas's choices at its limit. Tried
    # again (16.11's last paragraph): the loop's program points (s1 against s2), a base of its
    # own at the 16-warp 128-register cap, an exact fit with a margin; none gains beyond the
    # fitting's own spread in cross-validation
    ("validation", "sm86", "spills_agree_90pct"): "issue 21: 18 of 21 on this subset; the "
    "held-out rows together (validation and holdout) 54 of 57",
    # issue 26: the AMD VGPR+AGPR estimate (triton_compiler/registers_amd.py) on the validation
    # split's 30 gfx942 and 27 gfx950 rows: median miss 11 and 10 (5-fold cross-validation
    # inside the fit split: 7 and 5). The compiler sits 18-48 registers above the estimate on
    # a third of gfx942's rows (d 128/256: median -26, where the fit split leans the same way
    # by -8 and -14.5; at the fit rows' peaks, amd_peak.py with the loops' back edges restored,
    # half of that lean is the live window and addresses and half the allocator's
    # fragmentation, which no term models; the 2-wave tile's Q "twice over" is AGPR copies of Q
    # inside the loop, not a prologue term) and a quarter of gfx950's (pipelined causal tiles:
    # the mask's indices are a median 1.0 S pipelined and 0.34 S at one stage; c per stage
    # count gains in cross-validation, 11.9 -> 9.1 mean, but validation gives 11 and spills
    # 89%). Structures and constants the cross-validation cannot tell apart give validation
    # medians of 8-11 and 8-12 (docs/model.md 19.10, "The peak analysis corrected"). Third
    # pass: held out, gfx942's pipelined kernels at loaded d 128/256 sit 13-20 above the
    # estimate and those at d 64/96 5-6 below (fit_registers_amd.py --groups; masked loads at
    # padded head dims become exec-masked branches the scheduler does not cross), and 10 of
    # gfx950's 27 validation rows are top-5 tiles, its worst (19.10, "Where the validation
    # medians come from")
    ("validation", "gfx942", "median_reg_error_at_most_8"): "issue 26: 11 on this subset; the "
    "held-out rows together 7.5, the holdout 4.5",
    ("validation", "gfx950", "median_reg_error_at_most_8"): "issue 26: 10 on this subset; the "
    "held-out rows together 8.0, the holdout 4",
    # issue 21: the holdout's 8 sm75 rows that both accept, one spill verdict wrong
    # (fwd/d64/fp16/c0/32x16/w2/s1: the estimate 3 registers over the 255 cap, ptxas 233, no
    # spill): one row of 8 is 87.5%; validation and holdout together, 16 of 17 (docs/model.md
    # 16.12)
    ("holdout", "sm75", "spills_agree_90pct"): "issue 21: 7 of 8 on this subset; the held-out "
    "rows together 16 of 17",
}


def _cases() -> list[object]:
    cases = []
    for split in (*plan.SPLITS, "held-out"):
        for target in MODELLED_TARGETS:
            for name in CHECKS:
                owner = SHORT_TODAY.get((split, target, name))
                marks = (
                    [pytest.mark.xfail(strict=True, reason=f"short on a subset: {owner}")]
                    if owner
                    else []
                )
                cases.append(pytest.param(split, target, name, marks=marks))
    return cases


@pytest.mark.parametrize(("split", "target", "check"), _cases())
def test_model_matches_compiler(split: str, target: str, check: str) -> None:
    r = reports(split)[target]
    assert r.both_accept > 0 or check in ("no_worst_errors", "conservative_at_most_5pct")
    assert CHECKS[check](r), f"{target} ({split}): {r}"


def test_compare_reports_a_split_as_the_tests_read_it(capsys: pytest.CaptureFixture[str]) -> None:
    """`compare.py --split held-out --json` prints, per target, the report the threshold tests
    judge (validation and holdout together)."""
    assert compare.main(["--split", "held-out", "--json"]) == 0
    printed = {r["target"]: r for r in json.loads(capsys.readouterr().out)}
    held_out = [r for r in rows() if r["split"] in ("validation", "holdout")]
    for target in MODELLED_TARGETS:
        expected = compare.report(held_out, target)
        assert printed[target]["both_accept"] == expected.both_accept, target
        assert printed[target]["spill_agree"] == expected.spill_agree, target


def test_compare_names_a_split_without_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A data file with no row of the chosen split is an error naming the option and the file,
    exit 2, not an empty table."""
    empty = tmp_path / "rows.csv"
    empty.write_text(",".join(rows()[0]) + "\n")
    with pytest.raises(SystemExit) as stopped:
        compare.main(["--data", str(empty), "--split", "holdout"])
    assert stopped.value.code == 2
    assert "--split holdout: no rows of that split in" in capsys.readouterr().err
