"""FlexAttention's autotune log (TORCHINDUCTOR_FLEX_ATTENTION_LOGGING_FILE) as measurements for
`calibrate`: both layouts read, forward Triton choices kept, times in microseconds, bad
entries named, and a calibration run on an imported log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tilesolve.client.cli import main
from tilesolve.client.flex_autotune import AutotuneLogError, parse_autotune_log
from tilesolve.solver import AttentionProblem, SolveOptions, solve

SHAPE = {"B": 4, "Hq": 16, "Hkv": 16, "seq_len_q": 2048, "seq_len_kv": 2048,
         "qk_head_dim": 128, "v_head_dim": 128}  # fmt: skip


def _choice(bm: int, bn: int, warps: int, stages: int, ms: float, **shape: int) -> dict[str, Any]:
    return {"type": "triton", "time": ms, "num_warps": warps, "num_stages": stages,
            "BLOCK_M": bm, "BLOCK_N": bn, **SHAPE, **shape}  # fmt: skip


def test_current_layout_keeps_forward_triton_choices() -> None:
    log = [
        {"kernel_type": "forward", "choices": [_choice(128, 64, 4, 3, 0.21),
                                               {"type": "flash", "time": 0.1}]},
        {"kernel_type": "backward", "choices": [{"type": "triton", "time": 0.9}]},
    ]  # fmt: skip
    imported = parse_autotune_log(log, "a100-80gb", "bf16", True)
    (row,) = imported.rows
    assert imported.skipped_backward == 1
    assert row.time_us == pytest.approx(210.0)
    assert tuple(row.tile) == (128, 64, 4, 3)
    assert (row.shape.kernel, row.shape.dtype, row.shape.causal) == ("flex", "bf16", True)
    assert (row.shape.batch, row.shape.heads, row.shape.head_dim) == (4, 16, 128)


def test_earlier_layout_is_read_too() -> None:
    log = [{"('forward', 4, 16, 2048)": [_choice(64, 32, 4, 2, 0.5)]}]
    assert len(parse_autotune_log(log, "l4", "fp16", False).rows) == 1


@pytest.mark.parametrize(
    ("log", "named"),
    [
        ({"kernel_type": "forward"}, "list"),
        ([{"kernel_type": "sideways", "choices": []}], "kernel_type"),
        ([{"kernel_type": "forward", "choices": [_choice(64, 32, 4, 2, -1.0)]}], "time"),
        ([{"kernel_type": "forward", "choices": [{**_choice(64, 32, 4, 2, 1.0), "Hq": 0}]}],
         "Hq"),
    ],
)  # fmt: skip
def test_bad_entries_are_named(log: Any, named: str) -> None:
    with pytest.raises(AutotuneLogError) as caught:
        parse_autotune_log(log, "l4", "fp16", False)
    assert named in str(caught.value)


def test_calibrate_takes_an_imported_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log whose times are the model's own predictions (scaled): calibration runs on it and
    writes a profile."""
    choices = []
    for seq_len in (1024, 2048, 4096):
        problem = AttentionProblem(batch=4, heads=16, seq_len=seq_len, head_dim=128, dtype="bf16")
        answer = solve(problem, "a100-80gb", SolveOptions(kernel="flex", top_k=12))
        for c in answer.candidates:
            choices.append(
                _choice(
                    c.block_m,
                    c.block_n,
                    c.num_warps,
                    c.num_stages,  # type: ignore[arg-type]
                    c.predicted_time_us * 1.3 / 1000.0,
                    seq_len_q=seq_len,
                    seq_len_kv=seq_len,
                )
            )
    log = tmp_path / "flex_log.json"
    log.write_text(json.dumps([{"kernel_type": "forward", "choices": choices}]))
    profile = tmp_path / "profile.json"
    code = main(["calibrate", str(log), "--hardware", "a100-80gb", "--dtype", "bf16",
                 "--fit", "mma_latency_cycles", "--holdout-every", "0", "-o", str(profile),
                 "--json"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert json.loads(profile.read_text())["kernel"] == "flex"
    assert main(["calibrate", str(log), "--hardware", "a100-80gb", "-o", str(profile)]) == 2
    assert "--dtype" in capsys.readouterr().err
