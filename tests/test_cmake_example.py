"""`cmake/TileSolve.cmake` in a real build: `examples/cmake` is configured and built with the
CMake of the dev extra and the machine's C++ compiler, its program is run on shapes from its
command line, and its picks equal the solver's live answers — once generated in-process and
once through a running tilesolve server. A second build must not regenerate the header."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tilesolve.solver import AttentionProblem, SolveOptions, solve

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cmake"
BIN = Path(sys.executable).parent
COMPILER = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)

pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C++ compiler on this machine")

# (hardware, head_dim, dtype, causal, seq_len): bucket edges, middles, both devices
SHAPES = [
    ("a100-80gb", 128, "fp16", 1, 3000),
    ("a100-80gb", 64, "bf16", 0, 1),
    ("a100-80gb", 64, "fp16", 1, 16384),
    ("h100-sxm", 128, "bf16", 0, 513),
    ("h100-sxm", 64, "fp16", 1, 8192),
    ("h100-sxm", 128, "fp16", 0, 12000),
]


def _cmake() -> str:
    found = BIN / "cmake"
    assert found.exists(), "cmake is in the dev extra: pip install -e '.[dev]'"
    return str(found)


def _bucket_top(seq_len: int) -> int:
    bounds = tomllib.loads((EXAMPLE / "grid.toml").read_text())["seq_len"]
    return next(b for b in bounds if seq_len <= b)


def _live(hardware: str, head_dim: int, dtype: str, causal: int, seq_len: int) -> list[int]:
    problem = AttentionProblem(
        batch=4, heads=16, seq_len=seq_len, head_dim=head_dim, dtype=dtype, causal=bool(causal)
    )
    best = solve(problem, hardware, SolveOptions(top_k=1)).candidates[0]
    return [best.block_m or -1, best.block_n or -1, best.num_warps or -1, best.num_stages or -1]


def _copy_example(tmp_path: Path) -> Path:
    """examples/cmake and cmake/ side by side, as in the repository (the grid may change)."""
    shutil.copytree(EXAMPLE, tmp_path / "examples" / "cmake")
    shutil.copytree(ROOT / "cmake", tmp_path / "cmake")
    return tmp_path / "examples" / "cmake"


def _build(build: Path, extra: list[str], source: Path = EXAMPLE) -> None:
    env = {**os.environ, "CXX": shutil.which(COMPILER or "c++") or ""}
    configure = [_cmake(), "-S", str(source), "-B", str(build)]
    configure += [f"-DTILESOLVE_CLI={BIN / 'tilesolve-cli'}", *extra]
    subprocess.run(configure, check=True, capture_output=True, env=env)
    done = subprocess.run(
        [_cmake(), "--build", str(build)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("mode", ["in-process", "server"])
def test_the_example_builds_runs_and_matches_the_solver(
    tmp_path: Path, mode: str, request: pytest.FixtureRequest
) -> None:
    extra = [f"-DTILESOLVE_SERVER={request.getfixturevalue('target')}"] if mode == "server" else []
    source = _copy_example(tmp_path)
    build = tmp_path / "build"
    _build(build, extra, source)
    header = build / "generated" / "tiles.h"
    text = header.read_text()
    assert text.startswith("// tilesolve-table: ") and "namespace example::tiles" in text
    for hardware, head_dim, dtype, causal, seq_len in SHAPES:
        done = subprocess.run(
            [
                str(build / "pick_tile"),
                hardware,
                str(head_dim),
                dtype,
                str(causal),
                "forward",
                str(seq_len),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        *tile, solved_at = (int(x) for x in done.stdout.split())
        top = _bucket_top(seq_len)
        assert solved_at == top
        assert tile == _live(hardware, head_dim, dtype, causal, top), (hardware, seq_len)
    outside = subprocess.run(
        [str(build / "pick_tile"), "a100-80gb", "128", "fp16", "0", "forward", "99999"],
        capture_output=True,
        text=True,
    )
    assert (outside.returncode, outside.stdout) == (1, "none\n")
    aliased = [
        subprocess.run(
            [str(build / "pick_tile"), name, "128", "bf16", "0", "forward", "513"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for name in ("h100", "h100-sxm")
    ]
    assert aliased[0] == aliased[1] != "none\n"  # an alias finds the canonical entries
    # Nothing that decides the table changed: the second build leaves the header alone.
    before = header.stat().st_mtime_ns
    _build(build, extra, source)
    assert header.stat().st_mtime_ns == before
    # A changed grid regenerates it.
    grid = source / "grid.toml"
    grid.write_text(grid.read_text().replace("batch = 4", "batch = 8"))
    _build(build, extra, source)
    assert header.stat().st_mtime_ns != before and "batch 8" in header.read_text()
