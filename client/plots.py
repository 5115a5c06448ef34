"""Pictures of the trade-offs: the solve heatmap (`solve --plot`), the memory model's working
set and roofline (`memory --plot`), and the terminal heatmap (`solve --explain`).

matplotlib is an optional extra (`pip install 'tilesolve[plot]'`): it is imported inside the
drawing functions only and drawn on an Agg canvas attached to each figure (no display, no
pyplot, no change to the caller's matplotlib backend); its absence is a `PlotUnavailableError`
saying how to install it. The text heatmap needs nothing.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from . import terminal
from .files import replace_file

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tilesolve.solver import AttentionProblem, HardwareSpec
    from tilesolve.solver.apps.heatmap import HeatmapGrid

PLOT_SUFFIXES = (".png", ".svg")
INSTALL_HINT = "pip install 'tilesolve[plot]'"
DPI = 100
MEMORY_DEFAULT_KERNEL = "fa2"  # the family of panel (a) without a device (memory's default)

_WINNER_COLOUR = "#d62728"
_INFEASIBLE_FACE = "#dedede"
_INFEASIBLE_HATCH = "#a8a8a8"


class PlotUnavailableError(RuntimeError):
    """matplotlib is not installed (it is the optional `plot` extra)."""

    def __init__(self) -> None:
        super().__init__(f"matplotlib is not installed; {INSTALL_HINT}")


def plot_format(path: Path) -> str:
    """'png' or 'svg' from the file name; ValueError naming the allowed suffixes otherwise."""
    suffix = path.suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        allowed = " or ".join(PLOT_SUFFIXES)
        raise ValueError(f"the file name must end in {allowed}; got {path.name!r}")
    return suffix[1:]


def require_matplotlib() -> None:
    """PlotUnavailableError unless matplotlib can be imported."""
    _new_figure_class()


def _new_figure_class() -> type[Figure]:
    try:
        import matplotlib  # noqa: F401  (first: a missing package fails here)
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotUnavailableError() from exc
    return Figure


def _new_figure(width: float, height: float) -> Figure:
    figure_class = _new_figure_class()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = figure_class(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> None:
    """Draw `fig` into `path`, replacing it atomically (files.replace_file)."""
    fmt = plot_format(path)
    metadata = {"Software": "tilesolve"} if fmt == "png" else {"Creator": "tilesolve"}

    def draw(handle: BinaryIO) -> None:
        fig.savefig(handle, format=fmt, dpi=DPI, metadata=metadata)

    replace_file(path, draw)


# ---- the solve heatmap ---------------------------------------------------------------------


def _cell_text(grid: HeatmapGrid, i: int, j: int, *, sep: str = " ") -> str:
    value = grid.tflops[i][j]
    if value is None:
        return grid.short_names[str(grid.labels[i][j])]
    return f"{value:.1f}{sep}w{grid.num_warps[i][j]} s{grid.num_stages[i][j]}"


def _entry_lines(grid: HeatmapGrid, width: int) -> list[str]:
    """'grey cells: the constraint that removes the tile' and the short names, never broken
    inside one 'smem = shared_memory' entry."""
    lines = ["grey cells: the constraint that removes the tile"]
    current = ""
    for name in _abbreviated(grid):
        entry = f"{grid.short_names[name]} = {name}"
        if current and len(current) + 2 + len(entry) > width:
            lines.append(current + ",")
            current = entry
        else:
            current = f"{current}, {entry}" if current else entry
    return [*lines, current] if current else lines


def _legend_words(grid: HeatmapGrid) -> str:
    return ", ".join(f"{grid.short_names[name]}={name}" for name in _abbreviated(grid))


def _abbreviated(grid: HeatmapGrid) -> list[str]:
    """The constraints labelling cells whose short name differs from the name ('pins' does not)."""
    return [name for name in grid.constraints_shown() if grid.short_names[name] != name]


def plot_solve_heatmap(grid: HeatmapGrid, path: Path, title: str) -> None:
    """The heatmap of `grid` as PNG or SVG (by `path`'s suffix).

    Colour: predicted TFLOP/s of each tile's best warps/stages, annotated with the figure and
    `wN sM`; tiles with no feasible configuration are grey and hatched, named by the constraint
    that removes them; the answer's tile (rank 1) is outlined in red.
    """
    plot_format(path)
    fig = _new_figure(7.6, 6.4)
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.patches import Patch, Rectangle

    rows, cols = len(grid.block_m_values), len(grid.block_n_values)
    values = [v for row in grid.tflops for v in row if v is not None]
    cmap = colormaps["viridis"]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    norm = Normalize(vmin=low, vmax=high if high > low else low + 1.0)
    ax = fig.add_axes((0.13, 0.17, 0.68, 0.72))
    cax = fig.add_axes((0.84, 0.17, 0.03, 0.72))
    for i in range(rows):
        for j in range(cols):
            value = grid.tflops[i][j]
            face: str | tuple[float, float, float]
            hatch: str | None
            if value is None:
                face, hatch, edge, ink = _INFEASIBLE_FACE, "///", _INFEASIBLE_HATCH, "#3c3c3c"
            else:
                red, green, blue, _ = cmap(norm(value))
                face, hatch, edge = (red, green, blue), None, "white"
                ink = "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"
            ax.add_patch(
                Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=face, edgecolor=edge, hatch=hatch)
            )
            text = _cell_text(grid, i, j, sep="\n")
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                color=ink,
                fontsize=9,
                fontweight="bold" if value is None else "normal",
                bbox=(
                    {"boxstyle": "round,pad=0.2", "fc": _INFEASIBLE_FACE, "ec": "none"}
                    if value is None
                    else None
                ),
            )
    if grid.winner is not None:
        wi, wj = grid.cell(*grid.winner)
        ax.add_patch(
            Rectangle(
                (wj - 0.46, wi - 0.46),
                0.92,
                0.92,
                fill=False,
                edgecolor=_WINNER_COLOUR,
                linewidth=3.5,
                zorder=3,
            )
        )
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)  # block_m grows downwards, as in the text heatmap
    ax.set_xticks(range(cols), [str(v) for v in grid.block_n_values])
    ax.set_yticks(range(rows), [str(v) for v in grid.block_m_values])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel("BLOCK_N (key/value rows per iteration)")
    ax.set_ylabel("BLOCK_M (query rows per block)")
    ax.set_title(title, fontsize=10)
    from matplotlib.cm import ScalarMappable

    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), cax=cax)
    bar.set_label("predicted TFLOP/s (best warps/stages of the tile)")
    handles = [
        Patch(
            facecolor="none", edgecolor=_WINNER_COLOUR, linewidth=2.5, label="the answer (rank 1)"
        )
    ]
    if grid.constraints_shown():
        handles.append(
            Patch(
                facecolor=_INFEASIBLE_FACE,
                edgecolor=_INFEASIBLE_HATCH,
                hatch="///",
                label="no feasible configuration",
            )
        )
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.02, 0.005), fontsize=8.5)
    if grid.constraints_shown():
        fig.text(
            0.98,
            0.02,
            "\n".join(_entry_lines(grid, 60)),
            ha="right",
            va="bottom",
            fontsize=8,
        )
    _save(fig, path)


def solve_plot_title(problem: AttentionProblem, grid: HeatmapGrid) -> str:
    """'a100-80gb, fa2: batch 4, heads 16, seq_len 4096, head_dim 128, fp16' (two lines)."""
    shape = (
        f"batch {problem.batch}, heads {problem.heads}, seq_len {problem.seq_len}, "
        f"head_dim {problem.head_dim}, {problem.dtype.value}"
    )
    extras = [
        f"kv_heads {problem.kv_heads_eff}" if problem.kv_heads_eff != problem.heads else "",
        f"seq_len_kv {problem.seq_len_kv_eff}" if problem.seq_len_kv_eff != problem.seq_len else "",
        "causal" if problem.causal else "",
        f"dropout {problem.dropout:g}" if problem.dropout else "",
    ]
    shape = ", ".join([shape, *(e for e in extras if e)])
    return f"predicted TFLOP/s per tile: {grid.hardware}, {grid.kernel}\n{shape}"


# ---- the terminal heatmap ------------------------------------------------------------------


def _warps_stages(grid: HeatmapGrid, i: int, j: int, sep: str = "") -> str:
    """'w4s1' (or 'w4 s1'); a family without warps (Ascend) shows only its stages."""
    warps, stages = grid.num_warps[i][j], grid.num_stages[i][j]
    parts = [f"w{warps}" if warps is not None else "", f"s{stages}" if stages is not None else ""]
    return sep.join(p for p in parts if p)


def text_heatmap(grid: HeatmapGrid) -> str:
    """The heatmap as ASCII text, at most 100 columns: rows BLOCK_M, columns BLOCK_N; each
    cell the predicted TFLOP/s with the best warps/stages (`236.4 w4s1`), or the short name of
    the constraint that removes the tile; the answer's tile in [brackets]; then a legend."""

    def cell(i: int, j: int, detail: bool) -> str:
        value = grid.tflops[i][j]
        if value is None:
            return grid.short_names[str(grid.labels[i][j])]
        text = f"{value:.1f}"
        return f"{text} {_warps_stages(grid, i, j)}".rstrip() if detail else text

    corner = "BLOCK_M \\ BLOCK_N"
    rows, cols = len(grid.block_m_values), len(grid.block_n_values)
    for detail in (True, False):
        cells = [[cell(i, j, detail) for j in range(cols)] for i in range(rows)]
        inner = max(
            [len(str(v)) for v in grid.block_n_values] + [len(c) for row in cells for c in row]
        )
        width = len(corner) + cols * (inner + 3)
        if width <= terminal.width():
            break
    lines = [
        f"heatmap: predicted TFLOP/s of each tile's best configuration ({grid.hardware}, "
        f"{grid.kernel})"
    ]
    header = corner + "".join(f"  {str(v).rjust(inner)} " for v in grid.block_n_values)
    lines.append(header.rstrip())
    for i, bm in enumerate(grid.block_m_values):
        parts = [str(bm).rjust(len(corner))]
        for j, bn in enumerate(grid.block_n_values):
            text = cells[i][j].rjust(inner)
            parts.append(f"[{text}]" if grid.winner == (bm, bn) else f" {text} ")
        lines.append(" ".join(parts).rstrip())
    parts = []
    if grid.winner is not None:
        wi, wj = grid.cell(*grid.winner)
        shape = f"{grid.winner[0]}x{grid.winner[1]}"
        config = " ".join([shape, *_warps_stages(grid, wi, wj, " ").split()])
        parts.append(f"[ ] the answer (rank 1): {config}, {grid.winner_tflops:.1f} TFLOP/s")
    else:
        parts.append("no tile has a feasible configuration")
    if detail and grid.feasible_cells:
        parts.append("wNsM = warps and stages of the tile's best configuration")
    if grid.constraints_shown():
        words = _legend_words(grid)
        parts.append(
            "a name instead of a number is the constraint that removes the tile"
            + (f": {words}" if words else "")
        )
    legend = "; ".join(parts)
    lines.extend(textwrap.wrap("legend: " + legend, terminal.width(), subsequent_indent="  "))
    return "\n".join(lines)


# ---- the memory model ----------------------------------------------------------------------


MEMORY_TILES = tuple(range(16, 257, 16))  # square tile edges of panel (a)
_POWER_TICKS = (16, 32, 64, 128, 256)


def _problem_line(problem: AttentionProblem) -> str:
    parts = [
        f"batch {problem.batch}",
        f"heads {problem.heads}",
        f"seq_len {problem.seq_len}",
        f"head_dim {problem.head_dim}",
        problem.dtype.value,
    ]
    if problem.kv_heads_eff != problem.heads:
        parts.insert(2, f"kv_heads {problem.kv_heads_eff}")
    if problem.seq_len_kv_eff != problem.seq_len:
        parts.insert(-2, f"seq_len_kv {problem.seq_len_kv_eff}")
    if problem.head_dim_v_eff != problem.head_dim:
        parts.insert(-1, f"head_dim_v {problem.head_dim_v_eff}")
    if problem.causal:
        parts.append("causal")
    return ", ".join(parts)


def _plain_log_ticks(*axes: Any) -> None:
    """Log-scale ticks at 1, 2, 5 x 10^k, written as plain numbers (300, not 3x10^2)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis in axes:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def _working_set_panel(
    ax: Axes, problem: AttentionProblem, block_m: int, block_n: int, spec: HardwareSpec | None
) -> None:
    """(a) working set (left, KiB) and 2-D score tiles (right, log) versus square tile size;
    the device's shared memory per block as a line when there is a device."""
    from tilesolve.solver import CudaDevice
    from tilesolve.solver.apps.memory import estimate_memory

    kernel = spec.default_kernel if spec is not None else MEMORY_DEFAULT_KERNEL
    estimates = [estimate_memory(problem, t, t, None, kernel) for t in MEMORY_TILES]
    chosen = estimate_memory(problem, block_m, block_n, None, kernel)
    x_chosen = math.sqrt(block_m * block_n)
    kib = [e.working_set_bytes / 1024 for e in estimates]
    ax.plot(
        MEMORY_TILES, kib, "-o", color="#1f77b4", ms=3.5, label="working set (Q, K, V, S, O tiles)"
    )
    family = [(t, e.family_smem_bytes) for t, e in zip(MEMORY_TILES, estimates, strict=True)]
    family_points = [(t, b / 1024) for t, b in family if b is not None]
    if family_points:
        ax.plot(
            [t for t, _ in family_points],
            [b for _, b in family_points],
            "--",
            color="#17becf",
            label=f"{kernel} shared memory per block",
        )
    top = max(kib)
    if isinstance(spec, CudaDevice):
        limit = spec.sm.smem_per_block_optin_bytes / 1024
        top = max(top, limit)
        ax.axhline(
            limit,
            color="#7f7f7f",
            ls=":",
            lw=1.2,
            label=f"{spec.name} shared memory per block: {limit:g} KiB",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(_POWER_TICKS, [str(t) for t in _POWER_TICKS])
    ax.set_xlabel("square tile size (BLOCK_M = BLOCK_N)")
    ax.set_ylabel("bytes on chip per block (KiB)", color="#1f77b4")
    ax.set_ylim(0, top * 1.45)  # headroom for the legend
    right = ax.twinx()
    right.plot(
        MEMORY_TILES,
        [e.score_tiles for e in estimates],
        "-s",
        color="#ff7f0e",
        ms=3.5,
        label="2-D score tiles per (batch, head)",
    )
    right.set_yscale("log")
    counts = [e.score_tiles for e in estimates] + [chosen.score_tiles]
    right.set_ylim(min(counts) / 1.5, max(counts) * 8)  # headroom for the legend
    _plain_log_ticks(right.yaxis)
    right.set_ylabel("score tiles per (batch, head), log scale", color="#ff7f0e")
    tile = f"{block_m}x{block_n}"
    ax.axvline(x_chosen, color=_WINNER_COLOUR, lw=1.2, alpha=0.8)
    ax.plot([x_chosen], [chosen.working_set_bytes / 1024], "o", color=_WINNER_COLOUR, ms=8)
    right.plot([x_chosen], [chosen.score_tiles], "s", color=_WINNER_COLOUR, ms=8)
    right.plot(
        [],
        [],
        "o",
        color=_WINNER_COLOUR,
        label=f"tile {tile}: {chosen.working_set_bytes / 1024:g} KiB, {chosen.score_tiles:,} tiles",
    )
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper center", fontsize=8)
    ax.set_title("(a) working set and score tiles versus tile size", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)


def _intensity(x: float) -> str:
    """62.1, 124, 2,043: FLOP per byte as read on the axis."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _roofline_panel(
    ax: Axes,
    problem: AttentionProblem,
    block_m: int,
    block_n: int,
    spec: HardwareSpec,
) -> None:
    """(b) attainable TFLOP/s versus arithmetic intensity on `spec`, with the designs and the
    solver's top 5 placed on it."""
    from tilesolve.solver import Engine, SolveOptions, TilesolveError, solve
    from tilesolve.solver.apps.memory import estimate_memory

    estimate = estimate_memory(problem, block_m, block_n, spec, spec.default_kernel)
    roof = estimate.roofline
    assert roof is not None
    bandwidth_tb = roof.dram_bandwidth_gb_per_s / 1000  # TFLOP/s per FLOP/byte
    designs = [
        ("naive attention", estimate.arithmetic_intensity_naive, roof.attainable_tflops_naive, "X"),
        (
            f"tiled {block_m}x{block_n}, no L2 reuse",
            estimate.arithmetic_intensity_tiled_no_l2,
            roof.attainable_tflops_tiled_no_l2,
            "D",
        ),
        (
            f"tiled {block_m}x{block_n}, L2 reuse",
            estimate.arithmetic_intensity,
            roof.attainable_tflops,
            "P",
        ),
    ]
    note = ""
    ranked: list[tuple[str, float, float]] = []
    try:
        answer = solve(problem, spec, SolveOptions(top_k=5, engine=Engine.EXHAUSTIVE))
    except TilesolveError as exc:
        note = f"no solver candidates: {exc}"
    else:
        ranked = [
            (
                f"rank {c.rank}: {c.block_m}x{c.block_n} w{c.num_warps} s{c.num_stages}, "
                f"{c.predicted_tflops:.1f} TFLOP/s",
                c.arithmetic_intensity,
                c.predicted_tflops,
            )
            for c in answer.candidates
        ]
        if not ranked:
            note = "no solver candidates: no feasible configuration"
    xs = (
        [x for _, x, _, _ in designs]
        + [x for _, x, _ in ranked]
        + [roof.ridge_point_flops_per_byte]
    )
    lo, hi = min(xs) / 4, max(xs) * 4
    steps = 200
    grid = [lo * (hi / lo) ** (k / steps) for k in range(steps + 1)]
    ax.plot(
        grid,
        [min(roof.peak_tflops, x * bandwidth_tb) for x in grid],
        color="black",
        lw=2,
        label=f"roof: {roof.peak_tflops:g} TFLOP/s {roof.peak_kind}, "
        f"{roof.dram_bandwidth_gb_per_s:g} GB/s",
    )
    ridge = roof.ridge_point_flops_per_byte
    ax.axvline(ridge, color="#7f7f7f", ls=":", lw=1.2)
    ax.plot([ridge], [roof.peak_tflops], "o", color="black", ms=6)
    ax.annotate(
        f"ridge {ridge:.0f} FLOP/B",
        (ridge, roof.peak_tflops),
        xytext=(6, -14),
        textcoords="offset points",
        fontsize=8,
    )
    colours = ("#d62728", "#9467bd", "#2ca02c")
    for (label, x, y, marker), colour in zip(designs, colours, strict=True):
        ax.plot(
            [x],
            [y],
            marker,
            color=colour,
            ms=9,
            ls="none",
            label=f"{label} ({_intensity(x)} FLOP/B)",
        )
    for k, (label, x, y) in enumerate(ranked):
        ax.plot(
            [x],
            [y],
            "*" if k == 0 else "o",
            color="#ff7f0e" if k == 0 else "#8c564b",
            ms=13 if k == 0 else 5,
            ls="none",
            alpha=1.0 if k == 0 else 0.8,
            label=label,
            zorder=4 if k == 0 else 3,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    _plain_log_ticks(ax.xaxis, ax.yaxis)
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte), log scale")
    ax.set_ylabel("attainable TFLOP/s, log scale")
    ax.set_title(f"(b) roofline of {roof.hardware}", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    if note:  # as a legend entry, where it cannot cover the roof
        ax.plot([], [], ls="none", label="\n".join(textwrap.wrap(note, 60)))
    ax.legend(loc="lower right", fontsize=7.5)


def plot_memory(
    problem: AttentionProblem,
    block_m: int,
    block_n: int,
    hardware: HardwareSpec | None,
    path: Path,
) -> None:
    """PNG or SVG (by `path`'s suffix): (a) the tile working set and the number of 2-D score
    tiles versus square tile size 16..256 for `problem`, the requested tile marked (with
    `hardware`, its shared memory per block); and, only with `hardware` (a roofline is a
    device's), (b) its roofline with naive attention, the tiled kernel without and with L2
    reuse, and the top-5 configurations of `solve(problem, hardware)` placed on it (at their
    modelled arithmetic intensity and predicted TFLOP/s; ranked by the exhaustive engine, which
    gives the same answer as CP-SAT without importing it). Without `hardware` the figure is
    panel (a) alone. ValueError for another suffix; PlotUnavailableError without matplotlib;
    the memory model's InvalidRequestError for a bad tile."""
    plot_format(path)
    title = f"memory model: {_problem_line(problem)}, tile {block_m}x{block_n}"
    if hardware is None:
        fig = _new_figure(7.5, 5.6)
        ax_a = fig.add_axes((0.1, 0.11, 0.76, 0.75))
        _working_set_panel(ax_a, problem, block_m, block_n, None)
        fig.suptitle("\n".join(textwrap.wrap(title, 80)), fontsize=10)
        _save(fig, path)
        return
    fig = _new_figure(14.0, 5.6)
    ax_a = fig.add_axes((0.055, 0.11, 0.37, 0.75))
    ax_b = fig.add_axes((0.565, 0.11, 0.42, 0.75))
    _working_set_panel(ax_a, problem, block_m, block_n, hardware)
    _roofline_panel(ax_b, problem, block_m, block_n, hardware)
    fig.suptitle(title, fontsize=11)
    _save(fig, path)
