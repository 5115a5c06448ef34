"""Dispatch tables (`tilesolve-cli table`, `tilesolve.solver.apps.dispatch_table`) and
`portfolio` on the command line: lookups in all three formats equal the live solver, output is
byte-identical across runs, process pools and a server, `--check` exits 0/1/2, and bad files
name line and field.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tilesolve.client.parallel import ProcessMap
from tilesolve.solver import AttentionProblem, SolveOptions, solve
from tilesolve.solver.apps.dispatch_table import Grid, build_dispatch_table, emit

from command_line import run

GRID_TOML = """\
# a small grid: one device, two head dims, causal or not, three buckets
hardware = ["a100"]
head_dim = [64, 128]
causal = [false, true]
seq_len = [256, 1024, 4096]
batch = 4
heads = 16
"""
SHAPES_CSV = """\
head_dim,seq-len,batch,heads,causal,count
64,512,8,16,false,50
128,4096,4,32,true,20
128,32768,1,32,true,1
64,2048,4,16,false,30
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "grid.toml").write_text(GRID_TOML)
    (tmp_path / "mix.csv").write_text(SHAPES_CSV)
    return tmp_path


def live(hardware: str, head_dim: int, causal: bool, seq_len: int) -> dict[str, int]:
    """The solver's answer (CP-SAT, the default engine) for a grid cell's problem."""
    problem = AttentionProblem(batch=4, heads=16, seq_len=seq_len, head_dim=head_dim, causal=causal)
    return solve(problem, hardware, SolveOptions(top_k=1)).candidates[0].parameters


# Shapes to look up: bucket edges and the middles of buckets (each solved at its upper bound).
LOOKUPS = [(64, False, 1), (64, True, 256), (128, False, 257), (128, True, 700), (64, True, 4096)]
UPPER = {1: 256, 256: 256, 257: 1024, 700: 1024, 4096: 4096}


def test_json_and_python_lookups_equal_the_live_solver(
    capsys: pytest.CaptureFixture[str], files: Path
) -> None:
    grid = str(files / "grid.toml")
    code, out, _ = run(capsys, "table", "--grid", grid)
    assert code == 0
    document = json.loads(out)
    assert (
        document["metadata"]["grid_sha256"]
        == Grid.model_validate({**_toml(files), "hardware": ["a100"]}).sha256()
    )
    for entry in document["entries"]:
        answer = live("a100", entry["head_dim"], entry["causal"], entry["solved_at"])
        assert entry["parameters"] == dict(sorted(answer.items()))
        assert entry["solved_at"] == entry["seq_len_max"] and entry["hardware"] == "a100-80gb"
    assert run(capsys, "table", "--grid", grid, "--output", str(files / "tiles.py"))[0] == 0
    spec = importlib.util.spec_from_file_location("tiles", files / "tiles.py")
    assert spec is not None and spec.loader is not None
    module: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for head_dim, causal, seq_len in LOOKUPS:
        entry = module.lookup("a100-80gb", head_dim, "fp16", causal, "forward", seq_len)
        assert entry["parameters"] == dict(
            sorted(live("a100", head_dim, causal, UPPER[seq_len]).items())
        )
    assert module.lookup("a100-80gb", 64, "fp16", False, "forward", 4097) is None
    assert module.lookup("h100-sxm", 64, "fp16", False, "forward", 100) is None


def _toml(files: Path) -> dict[str, Any]:
    import tomllib

    return tomllib.loads((files / "grid.toml").read_text())


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_cpp_header_lookups_equal_the_live_solver(
    capsys: pytest.CaptureFixture[str], files: Path
) -> None:
    header = files / "tiles.h"
    assert run(capsys, "table", "--grid", str(files / "grid.toml"), "--output", str(header))[0] == 0
    calls = "\n".join(
        f'  show(lookup("a100-80gb", {d}, "fp16", {str(c).lower()}, "forward", {s}));'
        for d, c, s in LOOKUPS
    )
    (files / "driver.cpp").write_text(
        '#include <cstdio>\n#include "tiles.h"\nusing namespace tilesolve_table;\n'
        "static void show(const Entry* e) {\n"
        '  std::printf("%lld %lld %lld %lld\\n", (long long)param(*e, "block_m"),\n'
        '    (long long)param(*e, "block_n"), (long long)param(*e, "num_warps"),\n'
        '    (long long)param(*e, "num_stages"));\n}\n'
        'static_assert(lookup("a100-80gb", 64, "fp16", false, "forward", 5000) == nullptr);\n'
        f"int main() {{\n{calls}\n  return 0;\n}}\n"
    )
    binary = files / "driver"
    subprocess.run(
        ["c++", "-std=c++17", "-Wall", "-Werror", "-o", str(binary), str(files / "driver.cpp")],
        check=True,
        cwd=files,
    )
    lines = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    for line, (d, c, s) in zip(lines.splitlines(), LOOKUPS, strict=True):
        p = live("a100", d, c, UPPER[s])
        assert [int(x) for x in line.split()] == [
            p["block_m"],
            p["block_n"],
            p["num_warps"],
            p["num_stages"],
        ]


def test_output_is_byte_identical_across_runs_and_process_pools() -> None:
    grid = Grid.model_validate(
        {"hardware": ["a100", "l4"], "head_dim": [64, 128], "seq_len": [512, 2048, 8192]}
    )
    serial = build_dispatch_table(grid)
    pool = ProcessMap(2, min_items_per_worker=1)
    try:
        pooled = build_dispatch_table(grid, map_fn=pool)
    finally:
        pool.close()
    for fmt in ("json", "cpp", "python"):
        assert emit(serial, fmt) == emit(build_dispatch_table(grid), fmt) == emit(pooled, fmt)  # type: ignore[arg-type]


def test_check_exits_0_current_1_stale_2_invalid(
    capsys: pytest.CaptureFixture[str], files: Path
) -> None:
    grid = str(files / "grid.toml")
    header = str(files / "tiles.h")
    assert run(capsys, "table", "--grid", grid, "--output", header, "--namespace", "a::b")[0] == 0
    code, out, _ = run(capsys, "table", "--grid", grid, "--check", header)
    assert (code, out) == (0, f"current: {header}\n")
    (files / "grid.toml").write_text(GRID_TOML.replace("[256, 1024, 4096]", "[256, 2048, 4096]"))
    code, out, _ = run(capsys, "table", "--grid", grid, "--check", header)
    assert code == 1
    assert "stale" in out and "grid seq_len: [256, 1024, 4096] -> [256, 2048, 4096]" in out
    (files / "junk.h").write_text("int x;\n")
    code, _, err = run(capsys, "table", "--grid", grid, "--check", str(files / "junk.h"))
    assert code == 2 and "error: check:" in err and "no `tilesolve-table:` metadata" in err
    (files / "grid.toml").write_text(GRID_TOML + "colour = 3\n")
    code, _, err = run(capsys, "table", "--grid", grid, "--check", header)
    assert code == 2 and f"{grid}:8: colour:" in err


def test_bad_grid_files_name_the_line_and_field(
    capsys: pytest.CaptureFixture[str], files: Path
) -> None:
    path = files / "grid.toml"
    path.write_text(GRID_TOML.replace("head_dim = [64, 128]", 'head_dim = [64, "x"]'))
    code, _, err = run(capsys, "table", "--grid", str(path))
    assert code == 2 and f"error: {path}:3: head_dim[1]: Input should be a valid integer" in err
    path.write_text(GRID_TOML.replace("[256, 1024, 4096]", "[1024, 256]"))
    code, _, err = run(capsys, "table", "--grid", str(path))
    assert code == 2 and f"{path}:5: seq_len: values must be increasing" in err
    path.write_text(GRID_TOML.replace("head_dim = [64, 128]", "head_dim = [64, 600]"))
    code, _, err = run(capsys, "table", "--grid", str(path))
    assert code == 2 and "head_dim 600" in err and "fa2 supports head_dim" in err
    assert "Traceback" not in err


def test_bad_shapes_files_name_the_line_and_field(
    capsys: pytest.CaptureFixture[str], files: Path
) -> None:
    bad = files / "bad.csv"
    bad.write_text("head_dim,seq_len,weight,colour\n64,abc,0,red\n\n128,256,-1,\n")
    code, _, err = run(
        capsys, "portfolio", "--hardware", "a100", "--shapes", str(bad), "--max-configs", "1"
    )
    assert code == 2 and "Traceback" not in err
    assert f"error: {bad}:2: colour: unknown column 'colour'" in err
    assert f"error: {bad}:2: seq_len: must be an integer from 1 to 16777216; got 'abc'" in err
    assert f"error: {bad}:2: weight: must be a number > 0; got '0'" in err
    assert f"error: {bad}:4: weight: must be a number > 0; got '-1'" in err
    listed = files / "bad.json"
    listed.write_text(
        '[\n  {"head_dim": 64, "seq_len": 128},\n  {"head_dim": 64,\n   "count": 1.5}\n]\n'
    )
    code, _, err = run(
        capsys, "portfolio", "--hardware", "a100", "--shapes", str(listed), "--max-configs", "1"
    )
    assert code == 2 and f"error: {listed}:3: count: must be a whole number >= 1" in err
    assert f"error: {listed}:3: seq_len: is required" in err
    mix = str(files / "mix.csv")
    for k, expected in (("0", "from 1 to 5000"), ("5", "from 1 to the number of problems (4)")):
        code, _, err = run(
            capsys, "portfolio", "--hardware", "a100", "--shapes", mix, "--max-configs", k
        )
        assert code == 2 and "error: max_configs: " in err and expected in err
    code, _, err = run(
        capsys,
        "portfolio",
        "--hardware",
        "a100",
        "--shapes",
        mix,
        "--max-configs",
        "1",
        "--max-problems",
        "3",
    )
    assert code == 2 and f"error: {mix}:5: more than 3 problems" in err


def test_infeasible_portfolio_exits_1_with_the_smallest_k(
    capsys: pytest.CaptureFixture[str], files: Path
) -> None:
    argv = ["portfolio", "--hardware", "a100", "--shapes", str(files / "mix.csv")]
    code, out, _ = run(capsys, *argv, "--max-configs", "1", "--max-slowdown", "0")
    assert code == 1 and "smallest K that works: 2 (--max-configs 2)" in out
    code, out, _ = run(capsys, *argv, "--max-configs", "2", "--max-slowdown", "0")
    assert code == 0 and "weighted total  +0.00%" in out


def test_server_answers_equal_in_process_bytes(
    capsys: pytest.CaptureFixture[str], files: Path, target: str
) -> None:
    grid = str(files / "grid.toml")
    for extra in ([], ["--max-configs", "2"]):
        local = run(capsys, "table", "--grid", grid, "--format", "cpp", *extra)
        remote = run(capsys, "table", "--grid", grid, "--format", "cpp", "--server", target, *extra)
        assert local[0] == remote[0] == 0 and local[1] == remote[1]
    argv = ["portfolio", "--hardware", "a100", "--shapes", str(files / "mix.csv"), "--json"]
    local_doc = json.loads(run(capsys, *argv, "--max-configs", "2")[1])
    remote_doc = json.loads(run(capsys, *argv, "--max-configs", "2", "--server", target)[1])
    del local_doc["solve_ms"], remote_doc["solve_ms"]
    assert local_doc == remote_doc
    code, _, err = run(capsys, *argv[:-1], "--max-configs", "9", "--server", target)
    assert code == 2 and "error: max_configs:" in err
    bad = files / "bad.csv"
    bad.write_text("head_dim,seq_len\n64,128\n600,128\n")
    code, _, err = run(
        capsys,
        "portfolio",
        "--hardware",
        "a100",
        "--shapes",
        str(bad),
        "--max-configs",
        "1",
        "--server",
        target,
    )
    assert code == 2 and f"error: {bad}:3: head_dim: fa2 supports head_dim" in err


def test_stamp_is_rewritten_only_when_what_decides_the_table_changes(
    capsys: pytest.CaptureFixture[str], files: Path
) -> None:
    grid, stamp = str(files / "grid.toml"), files / "tiles.stamp"
    assert run(capsys, "table", "--grid", grid, "--format", "cpp", "--stamp", str(stamp))[0] == 0
    written = json.loads(stamp.read_text())
    assert written["model_version"] and written["catalog_version"] and written["grid_sha256"]
    before = stamp.stat().st_mtime_ns
    assert run(capsys, "table", "--grid", grid, "--format", "cpp", "--stamp", str(stamp))[0] == 0
    assert stamp.stat().st_mtime_ns == before
    # an older model version in the stamp (as after an upgrade) makes it change
    stamp.write_text(stamp.read_text().replace(written["model_version"], "0.0.1"))
    assert run(capsys, "table", "--grid", grid, "--format", "cpp", "--stamp", str(stamp))[0] == 0
    assert json.loads(stamp.read_text()) == written


BUF = Path(__file__).resolve().parents[1] / "node_modules" / ".bin" / "buf"


@pytest.mark.skipif(not BUF.exists(), reason="buf is not installed (npm ci)")
def test_buf_curl_answer_becomes_a_header(tmp_path: Path, target: str) -> None:
    """docs/integration.md's generic-client step: buf curl, then examples/buf/solve_to_header.py."""
    requests = {
        "requests": [
            {
                "hardware": {"name": "a100"},
                "problem": {
                    "seqLen": 4096,
                    "headDim": 128,
                    "batch": 4,
                    "heads": 16,
                    "causal": True,
                },
                "options": {"topK": 1},
            },
            {"hardware": {"name": "h100-sxm"}, "problem": {"seqLen": 1024, "headDim": 64}},
        ]
    }
    answer = subprocess.run(
        [
            str(BUF),
            "curl",
            "--protocol",
            "grpc",
            "--http2-prior-knowledge",
            f"http://{target}/tilesolve.v1.TileSolveService/SolveBatch",
            "-d",
            json.dumps(requests),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    script = Path(__file__).resolve().parents[1] / "examples" / "buf" / "solve_to_header.py"
    done = subprocess.run(
        [sys.executable, str(script), "--namespace", "my::tiles"],
        input=answer,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    for i, (hardware, problem) in enumerate(
        [
            ("a100", AttentionProblem(seq_len=4096, head_dim=128, batch=4, heads=16, causal=True)),
            ("h100-sxm", AttentionProblem(seq_len=1024, head_dim=64)),
        ]
    ):
        best = solve(problem, hardware).candidates[0]
        tile = f"{best.block_m}, {best.block_n}, {best.num_warps}, {best.num_stages}"
        assert f"inline constexpr Tile kTile{i} = {{{tile}}};" in done.stdout
    bad = subprocess.run([sys.executable, str(script)], input="[]", capture_output=True, text=True)
    assert bad.returncode == 2 and "error: input:" in bad.stderr
