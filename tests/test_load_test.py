"""`benchmarks/load_test.py` with tiny sizes: its JSON report says what it promises, and a
broken bound makes it exit 1 (the full sizes and the scaling section are run by hand; their
figures are in benchmarks/README.md and docs/reliability.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "load_test.py"
EXPECTED = {
    "cached": "OK",
    "cold": "OK",
    "batch": "OK",
    "occupancy": "OK",
    "invalid": "INVALID_ARGUMENT",
}
INVALID_VARIANTS = {
    "solve-head-dim-0",
    "solve-name-100-chars",
    "occupancy-regs-300",
    "memory-no-problem",
}
TINY = [
    "--procs", "2", "--threads", "4",
    "--soak-sample-s", "0.2", "--soak-warmup-s", "0.2", "--max-seconds", "30",
]  # fmt: skip

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def run(*args: str) -> tuple[int, dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", *TINY, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def test_load_and_soak_at_tiny_sizes_keep_their_bounds() -> None:
    code, report = run("--only", "load,soak", "--load-calls", "300", "--soak-calls", "600")
    load, soak = report["sections"]["load"], report["sections"]["soak"]
    assert load["calls"] == 300 and soak["calls"] == 600
    assert load["not_made"] == soak["not_made"] == 0
    assert set(load["kinds"]) == set(EXPECTED)
    assert set(soak["kinds"]) == {"cached", "cold", "occupancy", "invalid"}
    for section in (load, soak):
        assert section["unexpected"] == 0
        for kind, figures in section["kinds"].items():
            assert figures["statuses"] == {EXPECTED[kind]: figures["calls"]}, kind
            assert 0 < figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"]
        assert set(section["kinds"]["invalid"]["variants"]) == INVALID_VARIANTS
    assert load["rss_before_mib"] > 0 and load["rss_after_mib"] > 0
    # The soak's bound was computed from its samples: growth after warm-up against the cap.
    assert soak["samples"] >= 2 and len(soak["rss_series_mib"]) == soak["samples"]
    assert soak["bound_mib"] == 16 + 16  # --soak-cache-mib + --soak-margin-mib (defaults)
    assert soak["growth_mib"] == pytest.approx(soak["rss_last_mib"] - soak["rss_after_warmup_mib"])
    assert soak["bound_held"] is (soak["growth_mib"] <= soak["bound_mib"])
    checks = {(c["section"], c["name"]): c["held"] for c in report["bounds"]}
    assert checks[("soak", "RSS growth after warm-up, MiB")] is True
    assert checks[("load", "unexpected statuses")] is True
    assert all(checks.values()) and report["ok"] is True and code == 0


def test_broken_bounds_fail_the_run() -> None:
    """A server that refuses calls beyond one at a time (RESOURCE_EXHAUSTED is not what any
    kind expects) and a soak bound below any growth: exit 1, both checks say BROKEN."""
    code, report = run(
        "--only", "load,soak", "--load-calls", "200", "--soak-calls", "200",
        "--server-arg=--max-concurrent-rpcs=1", "--soak-margin-mib=-1000",
    )  # fmt: skip
    load, soak = report["sections"]["load"], report["sections"]["soak"]
    assert load["unexpected"] > 0
    assert any("RESOURCE_EXHAUSTED" in k["statuses"] for k in load["kinds"].values())
    assert soak["bound_held"] is False
    broken = {(c["section"], c["name"]) for c in report["bounds"] if not c["held"]}
    assert ("load", "unexpected statuses") in broken
    assert ("soak", "RSS growth after warm-up, MiB") in broken
    assert report["ok"] is False and code == 1
