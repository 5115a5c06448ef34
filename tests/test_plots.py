"""Pictures: the heatmap grid against the candidate table and the answer, the text heatmap,
the PNG/SVG files (`solve --plot`, `plot_memory`), and the CLI's --plot / --explain contract.

The grid is checked against the table both engines rank, and against `solve`; no figure of
the model is hard-coded. Files are checked as images (PNG signature, SVG as XML), not pixels.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from tilesolve.client.plots import (
    INSTALL_HINT,
    PlotUnavailableError,
    plot_memory,
    plot_solve_heatmap,
    text_heatmap,
)
from tilesolve.solver import AttentionProblem, Engine, SolveOptions, get_hardware, solve
from tilesolve.solver.apps.heatmap import HeatmapGrid, grid_from_table, heatmap_grid
from tilesolve.solver.candidates import CandidateTable
from tilesolve.solver.solve import prepare

from command_line import run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
README_PROBLEM = AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128)
SOLVE = ["solve", "--hardware", "a100", "--head-dim", "128", "--seq-len", "4096"]

CASES = [
    pytest.param(README_PROBLEM, "a100", SolveOptions(), id="a100-fa2-d128"),
    pytest.param(
        AttentionProblem(batch=2, heads=8, seq_len=3000, head_dim=64, causal=True),
        "a100",
        SolveOptions(kernel="triton"),
        id="a100-triton-causal-odd",
    ),
    pytest.param(
        AttentionProblem(batch=1, heads=32, kv_heads=8, seq_len=8192, head_dim=256),
        "h100-sxm",
        SolveOptions(kernel="fa2"),
        id="h100-fa2-d256-gqa",
    ),
    pytest.param(
        AttentionProblem(batch=4, heads=16, seq_len=4096, head_dim=128),
        "rtx-4090",
        SolveOptions(max_smem=65536, min_blocks_per_sm=2),
        id="4090-capped",
    ),
    pytest.param(README_PROBLEM, "t4", SolveOptions(block_m=64), id="t4-pinned"),
]


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000


def assert_svg(path: Path) -> None:
    root = ET.parse(path).getroot()
    assert root.tag.rsplit("}", 1)[-1] == "svg"
    assert len(list(root.iter())) > 50


def cell_indices(table: CandidateTable, bm: int, bn: int) -> np.ndarray:
    cfg = table.cfg
    return np.flatnonzero((cfg.block_m == bm) & (cfg.block_n == bn))


# ---- the grid ------------------------------------------------------------------------------


@pytest.mark.parametrize(("problem", "hardware", "options"), CASES)
def test_grid_agrees_with_the_table_and_the_answer(
    problem: AttentionProblem, hardware: str, options: SolveOptions
) -> None:
    table = prepare(problem, hardware, options)
    grid = grid_from_table(table)
    assert grid.block_m_values == tuple(sorted(set(table.cfg.block_m.tolist())))
    assert grid.block_n_values == tuple(sorted(set(table.cfg.block_n.tolist())))
    answer = solve(problem, hardware, options.model_copy(update={"engine": Engine.EXHAUSTIVE}))
    best = answer.candidates[0]
    assert grid.winner == (best.block_m, best.block_n)
    assert grid.winner_tflops == pytest.approx(best.predicted_tflops)
    wi, wj = grid.cell(*grid.winner)
    assert (grid.num_warps[wi][wj], grid.num_stages[wi][wj]) == (best.num_warps, best.num_stages)
    assert grid.feasible_cells > 0
    for i, bm in enumerate(grid.block_m_values):
        for j, bn in enumerate(grid.block_n_values):
            cell = cell_indices(table, bm, bn)
            ok = [int(k) for k in cell if table.feasible[k]]
            if ok:
                # the cell's figure is its fastest feasible configuration's
                fastest = max(float(table.perf.tflops[k]) for k in ok)
                assert grid.tflops[i][j] == pytest.approx(fastest, rel=1e-9)
                assert grid.labels[i][j] is None
                chosen = [
                    k
                    for k in ok
                    if table.cfg.num_warps[k] == grid.num_warps[i][j]
                    and table.cfg.num_stages[k] == grid.num_stages[i][j]
                ]
                assert chosen and table.perf.tflops[chosen[0]] == pytest.approx(fastest)
                assert grid.tflops[i][j] <= best.predicted_tflops * (1 + 1e-9)
            else:
                assert grid.tflops[i][j] is None and grid.num_warps[i][j] is None
                label = grid.labels[i][j]
                order = [c.name for c in table.constraints]
                assert label in order
                # a real violated constraint of the cell: some configuration passes every
                # earlier constraint in funnel order, and all of those violate the label
                earlier = order[: order.index(label)]
                survivors = [k for k in cell if all(table.satisfied[c][k] for c in earlier)]
                assert survivors
                assert not any(table.satisfied[label][k] for k in survivors)


def test_grid_wrapper_and_pins() -> None:
    problem, options = README_PROBLEM, SolveOptions(block_m=64)
    grid = heatmap_grid(problem, get_hardware("a100"), options)
    assert grid == grid_from_table(prepare(problem, "a100", options))
    assert grid.winner is not None and grid.winner[0] == 64
    for i, bm in enumerate(grid.block_m_values):
        if bm != 64:
            assert all(v is None for v in grid.tflops[i])
            assert set(grid.labels[i]) <= {"alignment", "threads", "pins"}
            assert "pins" in grid.labels[i]


def test_infeasible_grid_has_no_winner() -> None:
    grid = heatmap_grid(README_PROBLEM, "a100", SolveOptions(max_smem=4096))
    assert grid.winner is None and grid.winner_tflops is None and grid.feasible_cells == 0
    assert "max_smem" in grid.constraints_shown()
    text = text_heatmap(grid)
    assert "no tile has a feasible configuration" in text
    assert "cap=max_smem" in text


@pytest.fixture(scope="module")
def readme_grid() -> HeatmapGrid:
    return heatmap_grid(README_PROBLEM, "a100")


def test_text_heatmap(readme_grid: HeatmapGrid, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # the README's width: room for warps and stages
    text = text_heatmap(readme_grid)
    lines = text.splitlines()
    assert text.isascii()
    assert all(len(line) <= 100 for line in lines)
    assert readme_grid.winner is not None
    bm, bn = readme_grid.winner
    wi, wj = readme_grid.cell(bm, bn)
    marked = f"[{readme_grid.tflops[wi][wj]:.1f} w{readme_grid.num_warps[wi][wj]}s1]"
    assert text.count("[") == text.count("]") == 2  # the winner cell and the legend's "[ ]"
    row = next(line for line in lines if line.split()[0] == str(bm) and "[" in line)
    assert marked in row
    assert any(line.startswith("legend: [ ] the answer (rank 1)") for line in lines)
    for name in readme_grid.constraints_shown():
        assert f"{readme_grid.short_names[name]}={name}" in text.replace("\n  ", " ")
    assert "the constraint that removes the tile" in text
    header = lines[1].split()
    assert header[3:] == [str(v) for v in readme_grid.block_n_values]
    rows = lines[2 : 2 + len(readme_grid.block_m_values)]
    assert [r.split()[0] for r in rows] == [str(v) for v in readme_grid.block_m_values]


# ---- the files -----------------------------------------------------------------------------


def test_heatmap_png_and_svg(readme_grid: HeatmapGrid, tmp_path: Path) -> None:
    png, svg = tmp_path / "h.png", tmp_path / "h.SVG"
    plot_solve_heatmap(readme_grid, png, "title")
    plot_solve_heatmap(readme_grid, svg, "title")
    assert_png(png)
    assert_svg(svg)
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        plot_solve_heatmap(readme_grid, tmp_path / "h.pdf", "title")


@pytest.mark.parametrize("hardware", ["a100", None])
def test_plot_memory_renders(hardware: str | None, tmp_path: Path) -> None:
    spec = get_hardware(hardware) if hardware else None
    path = tmp_path / "memory.png"
    plot_memory(AttentionProblem(seq_len=4096, head_dim=128), 128, 128, spec, path)
    assert_png(path)


def svg_texts(path: Path) -> str:
    """The figure's words: matplotlib writes each text as a comment beside its glyph paths."""
    root = ET.parse(path, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    return "\n".join(node.text or "" for node in root.iter() if node.tag is ET.Comment)


MEMORY = ["memory", "--seq-len", "4096", "--tile", "128", "--head-dim", "128"]


def test_cli_memory_plot_without_hardware_has_no_roofline(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "m.svg"
    code, out, err = run(capsys, *MEMORY, "--plot", str(path))
    assert code == 0, err
    assert "score matrix" in out
    assert "the roofline panel needs --hardware" in err and str(path) in err
    assert_svg(path)
    words = svg_texts(path)
    assert "(a) working set" in words
    assert "roofline" not in words and "a100" not in words  # no device was named
    # with a device, both panels, and no note
    path = tmp_path / "m_h100.svg"
    code, _, err = run(capsys, *MEMORY, "--hardware", "h100", "--plot", str(path))
    assert code == 0 and "note:" not in err
    words = svg_texts(path)
    assert "(b) roofline of h100-sxm" in words and "h100-sxm shared memory per block" in words


def test_plot_memory_svg_non_square_tile(tmp_path: Path) -> None:
    path = tmp_path / "memory.svg"
    problem = AttentionProblem(batch=2, heads=8, seq_len=1000, head_dim=64, causal=True)
    plot_memory(problem, 64, 32, get_hardware("h100-sxm"), path)
    assert_svg(path)


def test_missing_matplotlib_is_a_plot_unavailable_error(
    readme_grid: HeatmapGrid, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    with pytest.raises(PlotUnavailableError, match=r"pip install 'tilesolve\[plot\]'"):
        plot_solve_heatmap(readme_grid, tmp_path / "h.png", "title")
    with pytest.raises(PlotUnavailableError):
        plot_memory(README_PROBLEM, 128, 128, None, tmp_path / "m.png")
    assert not list(tmp_path.iterdir())


# ---- the CLI -------------------------------------------------------------------------------


def test_cli_plot_writes_a_png_after_the_answer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "out.png"
    code, out, err = run(capsys, *SOLVE, "--plot", str(path))
    assert code == 0, err
    assert out.startswith("NVIDIA A100") and "rank" in out
    assert_png(path)
    assert str(path) in err


def test_cli_explain_prints_the_heatmap_after_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, *SOLVE, "--explain", "--engine", "exhaustive")
    assert code == 0
    table, _, heatmap = out.partition("\nheatmap: ")
    assert "funnel" in table and "legend: [ ] the answer (rank 1)" in heatmap


def test_cli_explain_with_json_keeps_stdout_one_document(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "out.svg"
    code, out, err = run(capsys, *SOLVE, "--json", "--explain", "--plot", str(path))
    assert code == 0
    answer = json.loads(out)
    best = answer["candidates"][0]
    assert "heatmap: " in err and f"{best['block_m']}x{best['block_n']}" in err
    assert_svg(path)


def test_cli_infeasible_still_plots_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "none.png"
    code, out, _ = run(capsys, *SOLVE, "--max-smem", "4096", "--plot", str(path), "--explain")
    assert code == 1
    assert "no feasible configuration" in out and "cap" in out
    assert_png(path)


@pytest.mark.parametrize("name", ["out.txt", "out", "out.pdf"])
def test_cli_plot_bad_suffix_exits_2_naming_the_allowed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    code, out, err = run(capsys, *SOLVE, "--plot", str(tmp_path / name))
    assert code == 2
    assert out == ""  # checked before solving
    assert err.startswith("error: plot: ") and ".png or .svg" in err
    assert not list(tmp_path.iterdir())


def test_cli_plot_missing_folder_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, *SOLVE, "--plot", str(tmp_path / "no" / "out.png"))
    assert (code, out) == (2, "")
    assert "error: plot: " in err and "does not exist" in err


def test_cli_plot_without_matplotlib_exits_2_with_the_install_hint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = run(capsys, *SOLVE, "--plot", str(tmp_path / "out.png"))
    assert code == 2
    assert out == ""
    assert err.strip() == f"error: plot: matplotlib is not installed; {INSTALL_HINT}"
    assert not list(tmp_path.iterdir())
    # --explain needs no matplotlib
    code, out, _ = run(capsys, *SOLVE, "--explain", "--engine", "exhaustive")
    assert code == 0 and "heatmap: " in out


def test_cli_plot_errors_are_reported_with_the_others(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(
        capsys,
        "solve",
        "--hardware",
        "a100",
        "--head-dim",
        "0",
        "--seq-len",
        "4096",
        "--plot",
        str(tmp_path / "x.jpg"),
    )
    assert code == 2
    assert "error: head_dim: " in err and "error: plot: " in err


def test_cli_remote_solve_draws_the_heatmap_in_process(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str
) -> None:
    path = tmp_path / "remote.png"
    remote = [*SOLVE, "--server", target, "--explain", "--plot", str(path)]
    code, out, err = run(capsys, *remote)
    assert code == 0, err
    code_local, out_local, _ = run(capsys, *SOLVE, "--explain")
    assert code_local == 0
    # the same heatmap as in-process, after the server's answer
    assert out.partition("\nheatmap: ")[2] == out_local.partition("\nheatmap: ")[2] != ""
    assert_png(path)
    # an unknown name is reported once (the server's catalog), not again for the heatmap
    code, out, err = run(capsys, *SOLVE[:2], "nosuch", *SOLVE[3:], "--server", target, "--explain")
    assert (code, out) == (2, "")
    assert err.count("error: hardware: ") == 1
