"""The model against FlashAttention-2's shipped forward tiles (the issue's calibration target).

Rows: batch 4, heads 2048/head_dim, seq_len 4096, fp16; sm80 = a100-80gb, sm90 = h100-sxm,
sm86/sm89 = rtx-4090. docs/model.md lists the rows the model does not rank first, and why.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tilesolve.solver import AttentionProblem, SolveOptions, solve

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import fa2_agreement  # noqa: E402

ROWS = json.loads((ROOT / "tests/data/fa2_forward_tiles.json").read_text())


@pytest.fixture(scope="module")
def records() -> list[dict[str, object]]:
    return fa2_agreement.evaluate_rows(ROWS)


def test_shipped_tile_in_top3_for_85_percent(records: list[dict[str, object]]) -> None:
    top3 = [r for r in records if r["rank_of_shipped"] is not None and r["rank_of_shipped"] <= 3]  # type: ignore[operator]
    assert len(top3) / len(records) >= 0.85, [r for r in records if r not in top3]


def test_shipped_tile_is_top1_for_half(records: list[dict[str, object]]) -> None:
    top1 = [r for r in records if r["rank_of_shipped"] == 1]
    assert len(top1) / len(records) >= 0.5


def test_fa2_shared_memory_formula_matches_every_shipped_row() -> None:
    """smem = 2*d*(block_m + 2*block_n) bytes for fp16, as FA2's kernel traits compute it, d
    the row's kernel head dim (head dims 160 and 224: the release's kernel, pinned)."""
    for row in ROWS:
        answer = solve(
            AttentionProblem(
                batch=4, heads=2048 // row["head_dim"], seq_len=4096, head_dim=row["head_dim"]
            ),
            fa2_agreement.ARCH_TO_HARDWARE[row["arch"]],
            SolveOptions(
                kernel="fa2",
                engine="exhaustive",
                top_k=1,
                block_m=row["block_m"],
                block_n=row["block_n"],
                num_warps=row["num_warps"],
                max_smem=1 << 20,
                parameter_pins=fa2_agreement.row_options(row, "exhaustive").parameter_pins,
            ),
        )
        # The shipped tile must be feasible in our model, with FA2's own smem figure.
        assert answer.candidates, f"shipped tile infeasible in the model: {row}"
        assert answer.candidates[0].smem_bytes == row["smem_bytes"], row


RELEASE_ROWS = json.loads((ROOT / "tests/data/fa2_forward_tiles_v2.8.3.json").read_text())["rows"]


@pytest.mark.parametrize(
    "row",
    [*ROWS, *RELEASE_ROWS],
    ids=lambda r: (
        f"{r['arch']}-d{r['head_dim']}-c{r['causal']}-p{r['dropout']:d}-{r['commit'][:7]}"
    ),
)
def test_every_shipped_forward_tile_is_feasible_when_pinned(row: dict[str, object]) -> None:
    """Every forward tile FlashAttention-2 ships (every release's, causal and not, with and
    without dropout) is feasible under the device's own shared-memory limit, with the row's
    kernel (head dims 160 and 224: the release's, pinned)."""
    head_dim = int(row["head_dim"])  # type: ignore[call-overload]
    causal_values = (False, True) if row["causal"] == "both" else (bool(row["causal"]),)
    for causal in causal_values:
        problem = AttentionProblem(
            batch=4,
            heads=2048 // head_dim,
            seq_len=4096,
            head_dim=head_dim,
            causal=causal,
            dropout=0.1 if row["dropout"] else 0.0,
        )
        options = SolveOptions(
            kernel="fa2",
            top_k=1,
            block_m=row["block_m"],
            block_n=row["block_n"],
            num_warps=row["num_warps"],
            parameter_pins=fa2_agreement.row_options(row, "cpsat").parameter_pins,
        )
        answer = solve(problem, fa2_agreement.ARCH_TO_HARDWARE[str(row["arch"])], options)
        assert answer.status.value == "optimal", (row, answer.infeasibility)


@pytest.mark.parametrize(("head_dim", "old", "new"), [(160, 160, 192), (200, 224, 256)])
def test_forward_head_dims_two_releases_run_differently_use_the_kernels_head_dim(
    head_dim: int, old: int, new: int
) -> None:
    """v2.8.3's forward runs head dims 129-160 and 193-224 with its hdim192/hdim256 kernels
    (static_switch.h HEADDIM_SWITCH), as the backward does: the model ranks that kernel, laid
    out at its head dim (smem = 2*d*(block_m + 2*block_n)), unless an earlier release's is
    pinned; the v2.8.3 tiles of tests/data/fa2_forward_tiles_v2.8.3.json are the current
    kernel's."""
    problem = AttentionProblem(batch=4, heads=8, seq_len=4096, head_dim=head_dim)
    current = solve(problem, "a100-80gb", SolveOptions(kernel="fa2", top_k=5))
    assert {c.parameters["kernel_head_dim"] for c in current.candidates} == {new}
    for c in current.candidates:
        assert c.smem_bytes == 2 * new * (c.block_m + 2 * c.block_n)  # type: ignore[operator]
    earlier = SolveOptions(kernel="fa2", top_k=5, parameter_pins={"kernel_head_dim": old})
    pinned = solve(problem, "a100-80gb", earlier)
    assert {c.parameters["kernel_head_dim"] for c in pinned.candidates} == {old}
    for c in pinned.candidates:
        assert c.smem_bytes == 2 * old * (c.block_m + 2 * c.block_n)  # type: ignore[operator]
    # one tile (v2.8.3's sm80 hdim192 tile, 128x64 with 8 warps) on either kernel: the wider
    # one does more work per score, so it is slower
    times = {}
    for kernel_head_dim in (old, new):
        tile = SolveOptions(
            kernel="fa2",
            block_m=128,
            block_n=64,
            num_warps=8,
            parameter_pins={"kernel_head_dim": kernel_head_dim},
        )
        times[kernel_head_dim] = solve(problem, "a100-80gb", tile).candidates[0].predicted_time_us
    assert times[new] > times[old]
    assert all(r["kernel_head_dim"] == 192 for r in RELEASE_ROWS if r["head_dim"] == 160)
    plain = solve(AttentionProblem(batch=4, heads=8, seq_len=4096, head_dim=128), "a100-80gb")
    assert "kernel_head_dim" not in plain.candidates[0].parameters
