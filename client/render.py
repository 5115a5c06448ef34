"""Plain-text rendering for `tilesolve-cli`: aligned tables and the per-command reports.

Everything here turns solver objects into lines of text; nothing decides, validates or exits.
Lines are kept within the terminal's width (`terminal.width()`: `$COLUMNS`, the terminal, or
80 columns in a pipe) where the content allows: free text (a reason, a detail) is what wraps,
and no text is ever cut short. The ranked table of `solve` puts each candidate's numbers on
one line and its family parameters and top reason on the lines under it; `--wide` prints the
full one-line-per-candidate table instead.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from . import terminal

if TYPE_CHECKING:  # the solver (numpy, pydantic) is imported only by the commands that need it
    from tilesolve.solver import CudaDevice, HardwareSpec, Occupancy, SolveAnswer
    from tilesolve.solver.answer import Candidate, DivisibleLength


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: frozenset[int] = frozenset(),
    shrink: int | frozenset[int] | None = None,
    max_width: int | None = None,
) -> list[str]:
    """An aligned table: a header row, a rule, then each row on one line or more (`table_layout`).

    Columns in `right` are right-aligned (numbers). If the table is wider than `max_width`
    (default: the terminal's width, `terminal.width()`), column `shrink` (a free-text column,
    or a set of them) is narrowed and a longer cell of it is wrapped onto the lines that
    follow its row (the other columns blank there): nothing is cut.
    """
    wrapped = frozenset({shrink}) if isinstance(shrink, int) else shrink or frozenset()
    return terminal.table_lines(headers, rows, right=right, wrap=wrapped, columns=max_width)


def join_parts(parts: Sequence[str], sep: str = " | ", max_width: int | None = None) -> list[str]:
    """`parts` joined by `sep`, broken into lines no wider than `max_width` (default: the
    terminal's width) between parts; a part longer than a line is wrapped on its own."""
    limit = max_width or terminal.width()
    lines: list[str] = []
    current = ""
    for part in parts:
        candidate = part if not current else current + sep + part
        if current and len(candidate) > limit:
            lines.append(current)
            current = part
        else:
            current = candidate
    if current:
        lines.append(current)
    return [piece for line in lines for piece in wrap(line, "", limit)]


def wrap(text: str, indent: str = "  ", max_width: int | None = None) -> list[str]:
    """A paragraph wrapped to `max_width` (default: the terminal's width), every line
    indented by `indent` (continuation lines two more)."""
    return textwrap.wrap(
        text,
        width=max_width or terminal.width(),
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_on_hyphens=False,
    ) or [indent]


def kib(value: float) -> str:
    """Bytes as KiB, without trailing zeros (49152 -> '48')."""
    return f"{value / 1024:g}"


# ---- solve ---------------------------------------------------------------------------------


def problem_summary(answer: SolveAnswer) -> str:
    """The attention problem in one phrase (kv / v values shown only where they differ)."""
    p = answer.problem

    def pair(name: str, value: int, other_name: str, other: int) -> str:
        return f"{name} {value}" if other == value else f"{name} {value} ({other_name} {other})"

    parts = [
        f"batch {p.batch}",
        pair("heads", p.heads, "kv", p.kv_heads_eff),
        pair("seq_len", p.seq_len, "kv", p.seq_len_kv_eff),
        pair("head_dim", p.head_dim, "v", p.head_dim_v_eff),
        p.dtype.value,
        p.phase.value,
    ]
    if p.causal:
        parts.append("causal")
    if p.dropout > 0:
        parts.append(f"dropout {p.dropout:g}")
    return ", ".join(parts)


def solve_header(answer: SolveAnswer, spec: HardwareSpec, cache_hit: bool = False) -> list[str]:
    """Hardware, kernel, engine, status and time (for an answer from a server's cache, the
    time of the solve that cached it, said so); then the problem on its own line."""
    status = answer.status.value
    if answer.status.value == "feasible":
        status += " (time limit reached; ranking not proven)"
    first = join_parts(
        [
            f"{spec.display_name} ({spec.name})",
            f"kernel {answer.kernel}",
            f"engine {answer.engine}",
            status,
            f"cached (solved in {answer.solve_ms:.1f} ms originally)"
            if cache_hit
            else f"{answer.solve_ms:.1f} ms",
        ]
    )
    why = wrap(f"family: {answer.kernel_reason}", "") if answer.kernel_reason else []
    return [*first, *join_parts([f"problem: {problem_summary(answer)}"]), *why]


# Short names for the table's limiter column (the JSON keeps the full names).
_LIMITER_SHORT = {"registers": "regs", "shared_memory": "smem"}


def _limiter(c: Candidate) -> str:
    if c.occupancy_limiter is None:
        return "-"
    return "/".join(_LIMITER_SHORT.get(x, x) for x in c.occupancy_limiter.split("/"))


def _regs(c: Candidate) -> str:
    if c.regs_per_thread is None:
        return "-"
    return f"{c.regs_per_thread} +{c.spill_regs}" if c.spill_regs else str(c.regs_per_thread)


def _shown(value: object) -> str:
    """A common field, or '-' where the family has none."""
    return "-" if value is None else str(value)


_COMMON = ("block_m", "block_n", "num_warps", "num_stages")


def _tile(c: Candidate) -> str:
    """BLOCK_M x BLOCK_N, then the family's other parameters (num_splits=4 ...)."""
    others = [f"{k}={v}" for k, v in c.parameters.items() if k not in _COMMON]
    return " ".join([f"{_shown(c.block_m)}x{_shown(c.block_n)}", *others])


def _config(c: Candidate) -> str:
    """'64x128 w4 s2': the tile, then warps and stages where the family has them."""
    parts = [f"{_shown(c.block_m)}x{_shown(c.block_n)}"]
    if c.num_warps is not None:
        parts.append(f"w{c.num_warps}")
    if c.num_stages is not None:
        parts.append(f"s{c.num_stages}")
    return " ".join(parts)


def _extra_parameters(c: Candidate) -> str:
    """The family's parameters beyond the tile, warps and stages ('num_splits=4 ...')."""
    return " ".join(f"{k}={v}" for k, v in c.parameters.items() if k not in _COMMON)


def _numbers(c: Candidate) -> list[str]:
    """The cells both layouts share, from smem on."""
    return [
        "-" if c.smem_bytes is None else kib(c.smem_bytes),
        _regs(c),
        "-" if c.blocks_per_sm is None else f"{c.blocks_per_sm} ({_limiter(c)})",
        f"{c.predicted_tflops:.1f}",
        f"{c.predicted_time_us:.1f}",
        f"{c.overlap:.0%}",
    ]


def candidate_rows(answer: SolveAnswer) -> list[list[str]]:
    """The `--wide` table's rows (CANDIDATE_HEADERS): everything on one line."""
    return [
        [
            str(c.rank),
            _tile(c),
            _shown(c.num_warps),
            _shown(c.num_stages),
            *_numbers(c),
            c.reasons[0] if c.reasons else "",
        ]
        for c in answer.candidates
    ]


CANDIDATE_HEADERS = (
    "rank",
    "tile",
    "warps",
    "stages",
    "smem KiB",
    "regs",
    "blocks/SM (limiter)",
    "TFLOP/s",
    "time us",
    "overlap",
    "top reason",
)

# The terminal-width table: tile, warps and stages as one cell ('64x128 w4 s2'), the
# family's other parameters and the top reason on the lines under the row.
COMPACT_HEADERS = (
    "rank",
    "tile",
    "smem KiB",
    "regs",
    "blocks/SM",
    "TFLOP/s",
    "time us",
    "overlap",
)
_COMPACT_RIGHT = frozenset({0, 2, 3, 5, 6, 7})
_WIDE_RIGHT = frozenset({0, 2, 3, 4, 7, 8, 9})
_UNDER_ROW = " " * 6  # where a row's parameter and reason lines start: past `rank`


def candidate_table(answer: SolveAnswer) -> list[str]:
    """The ranked candidates: at the terminal's width, one line of numbers per candidate with
    its extra parameters and top reason wrapped under it; with `--wide`, one line each."""
    if terminal.is_wide():
        return table(CANDIDATE_HEADERS, candidate_rows(answer), right=_WIDE_RIGHT)
    rows = [[str(c.rank), _config(c), *_numbers(c)] for c in answer.candidates]
    # The numbers' table is at most 80 columns by construction, and never wraps (no free-text
    # column): each row is one line, and the lines under it are placed by index.
    rendered = terminal.table_lines(
        COMPACT_HEADERS, rows, right=_COMPACT_RIGHT, first_row_style="bold"
    )
    lines = rendered[:2]
    for c, row_line in zip(answer.candidates, rendered[2:], strict=True):
        lines.append(row_line)
        extra = _extra_parameters(c)
        if extra:
            lines.extend(wrap(extra, _UNDER_ROW))
        if c.reasons:
            lines.extend(wrap(c.reasons[0], _UNDER_ROW))
    return lines


def _divisible(d: DivisibleLength, answer: SolveAnswer) -> str:
    """'2080 (pad 30, 32x32 s2 ...)' or, for unequal lengths, both."""
    sq, sk = answer.problem.seq_len, answer.problem.seq_len_kv or answer.problem.seq_len
    how = "pad" if d.seq_len >= sq else "trim"
    lengths = str(d.seq_len) if sq == sk else f"seq_len {d.seq_len}, seq_len_kv {d.seq_len_kv}"
    return f"{lengths} ({how} {abs(d.seq_len - sq)}, {d.configuration})"


def _size(value: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value} B"


def resource_lines(answer: SolveAnswer) -> list[str]:
    """Each candidate's resources, for families whose use does not fit the CUDA columns
    (Ascend's buffers): 'rank: name used of capacity, ...'."""
    shown = [c for c in answer.candidates if c.smem_bytes is None and c.resources]
    if not shown:
        return []
    lines = ["", "resources (used of capacity):"]
    for c in shown:
        parts = [
            f"{u.name} {_size(u.used)} of {_size(u.capacity)}"
            if u.unit.startswith("bytes")
            else f"{u.name} {u.used} of {u.capacity} {u.unit}"
            for u in c.resources
        ]
        lines.extend(wrap(f"{c.rank}: " + ", ".join(parts)))
    return lines


def funnel_lines(answer: SolveAnswer) -> list[str]:
    lines = [
        f"funnel ({answer.search_space_size} configurations, {answer.feasible_count} feasible):"
    ]
    rows = [[s.constraint, str(s.removed), str(s.remaining), s.rule] for s in answer.funnel]
    body = table(
        ("constraint", "removed", "remaining", "rule"),
        rows,
        right=frozenset({1, 2}),
        shrink=3,
        max_width=terminal.width() - 2,
    )
    return lines + ["  " + line for line in body]


def solve_report(answer: SolveAnswer, spec: HardwareSpec, cache_hit: bool = False) -> list[str]:
    """The readable answer: header, ranked table (or why not), binding constraints, funnel;
    `cache_hit`: the answer came from a server's cache (the header says so)."""
    lines = solve_header(answer, spec, cache_hit)
    lines.append("")
    if answer.infeasibility is not None:
        why = answer.infeasibility
        lines.append("no feasible configuration")
        lines.append(f"  conflicting constraints: {', '.join(why.conflicting_constraints)}")
        lines.extend(wrap(f"why: {why.explanation}"))
        lines.extend(wrap(f"nearest relaxation: {why.nearest_relaxation}"))
        if why.padding:
            lines.append("  padding instead (block_m: padded seq_len, waste):")
            lines.extend(
                wrap(
                    "    "
                    + "; ".join(
                        f"{p.block} -> {p.padded_seq_len} ({p.waste_fraction:.1%})"
                        for p in why.padding
                    )
                )
            )
        if why.divisible_lengths:
            lines.append("  nearest lengths a feasible tile divides:")
            lines.extend(
                wrap("    " + "; ".join(_divisible(d, answer) for d in why.divisible_lengths))
            )
    else:
        lines.extend(candidate_table(answer))
        lines.extend(resource_lines(answer))
        lines.append("")
        if answer.binding_constraints:
            lines.append("binding constraints (the winner would be faster without them):")
            for b in answer.binding_constraints:
                lines.extend(wrap(f"{b.constraint}: {b.detail}"))
        else:
            lines.append("binding constraints: none (the winner is the unconstrained optimum)")
    for note in answer.notes:
        lines.extend(wrap(f"note: {note}"))
    lines.append("")
    lines.extend(funnel_lines(answer))
    lines.append("")
    lines.append(f"model {answer.model_version}, catalog {answer.catalog_version}")
    return lines


# ---- hardware ------------------------------------------------------------------------------


def hardware_summary(spec: HardwareSpec) -> dict[str, object]:
    """One catalog entry as the `hardware list --json` object."""
    return {
        "name": spec.name,
        "display_name": spec.display_name,
        "vendor": spec.vendor,
        "arch": spec.arch,
        "compute_capability": getattr(getattr(spec, "sm", None), "compute_capability", None),
        "sm_count": spec.compute_units if spec.arch == "cuda" else None,
        "ai_core_count": spec.compute_units if spec.arch == "ascend" else None,
        "cu_count": spec.compute_units if spec.arch == "rocm" else None,
        "default_kernel": spec.default_kernel,
        "aliases": list(spec.aliases),
    }


def hardware_list_report(
    summaries: Sequence[Mapping[str, object]], catalog_version: str
) -> list[str]:
    """The catalog table, from `hardware_summary` objects (in-process or from a server)."""
    rows = []
    for entry in summaries:
        counts = (entry["sm_count"], entry["ai_core_count"], entry.get("cu_count"))
        units = next((count for count in counts if count is not None), None)
        aliases = entry["aliases"]
        rows.append(
            [
                str(entry["name"]),
                str(entry["display_name"]),
                str(entry["arch"]),
                "-" if entry["compute_capability"] is None else str(entry["compute_capability"]),
                "-" if units is None else str(units),
                str(entry["default_kernel"]),
                ", ".join(str(a) for a in aliases) if isinstance(aliases, list | tuple) else "",
            ]
        )
    lines = table(
        ("name", "display name", "arch", "cc", "SMs/\ncores", "default\nkernel", "aliases"),
        rows,
        right=frozenset({4}),
        shrink=frozenset({1, 6}),
    )
    lines.append("")
    lines.extend(
        wrap(
            f"{len(summaries)} devices, catalog {catalog_version}; SMs/cores: AI cores on "
            "Ascend, compute units (CUs) on ROCm",
            "",
        )
    )
    return lines


# The sections a device may carry (solver.hardware.DEVICE_SECTIONS; not imported: the solver
# loads numpy and pydantic, and `hardware show` should start fast).
_SECTIONS = ("memory", "sm", "throughput", "ascend", "rocm")


def ordered_sources(spec: HardwareSpec) -> dict[str, str]:
    """`spec.sources` in the spec's own field order (section by section), then any other keys
    sorted: one order whatever the origin (a catalog file, or a protobuf map, which has none)."""
    order: list[str] = []
    for section_name in _SECTIONS:
        section = getattr(spec, section_name, None)
        if section is not None:
            order.extend(f"{section_name}.{field}" for field in type(section).model_fields)
    rank = {key: i for i, key in enumerate(order)}
    keys = sorted(spec.sources, key=lambda k: (rank.get(k, len(order)), k))
    return {key: spec.sources[key] for key in keys}


def _value(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def hardware_show_report(spec: HardwareSpec) -> list[str]:
    """Every field of a device, each number with its source."""
    lines = [
        f"{spec.name}: {spec.display_name}",
        f"  vendor {spec.vendor}, arch {spec.arch}, default kernel {spec.default_kernel}",
        f"  aliases: {', '.join(spec.aliases) or '-'}",
    ]
    if spec.notes:
        lines.extend(wrap(f"notes: {spec.notes}"))
    for section_name in _SECTIONS:
        section = getattr(spec, section_name, None)
        if section is None:
            continue
        lines.append("")
        lines.append(f"[{section_name}]")
        rows = []
        for field_name, value in section.model_dump(mode="json").items():
            source = spec.sources.get(f"{section_name}.{field_name}", "(no source given)")
            rows.append([field_name, _value(value), source])
        body = table(
            ("field", "value", "source"),
            rows,
            shrink=frozenset({1, 2}),
            max_width=terminal.width() - 2,
        )
        lines.extend("  " + line for line in body)
    extra = sorted(k for k in spec.sources if k.split(".")[0] not in _SECTIONS)
    if extra:
        lines.append("")
        lines.append("[other sources]")
        lines.extend(f"  {k}: {spec.sources[k]}" for k in extra)
    return lines


# ---- occupancy -----------------------------------------------------------------------------


def _limit(value: int) -> str:
    return "unlimited" if value < 0 else str(value)


def occupancy_report(
    spec: CudaDevice,
    occ: Occupancy,
    threads: int,
    regs: int,
    smem: int,
    carveout: int,
) -> list[str]:
    sm = spec.sm
    carve = "default (largest)" if carveout < 0 else f"{carveout}%"
    limiters = ", ".join(x.value for x in occ.limiters)
    lines = [
        f"{spec.display_name} ({spec.name}), compute capability {sm.compute_capability}",
        f"launch: {threads} threads ({occ.warps_per_block} warps), {regs} registers/thread, "
        f"{smem} B dynamic shared memory, carveout {carve}",
        "",
        f"blocks per SM: {occ.blocks_per_sm} (limited by {limiters})",
        f"occupancy: {occ.active_warps_per_sm} of {occ.max_warps_per_sm} warps "
        f"({occ.occupancy_fraction:.1%})",
        f"limits: warps {_limit(occ.limit_warps)}, registers {_limit(occ.limit_registers)}, "
        f"shared_memory {_limit(occ.limit_shared_memory)}, blocks {_limit(occ.limit_blocks)}",
        f"per block: {occ.regs_per_block} registers, {occ.smem_per_block_bytes} B shared memory "
        f"(incl. {sm.reserved_smem_per_block_bytes} B reserved, rounded to "
        f"{sm.smem_alloc_granularity_bytes} B)",
        f"SM shared memory configured to {occ.smem_per_sm_config_bytes} B "
        f"({kib(occ.smem_per_sm_config_bytes)} KiB)",
    ]
    if occ.blocks_per_sm == 0:
        lines.append(
            f"this block cannot launch on {spec.name}: not one block fits on an SM (limited "
            f"by {limiters}); exit status 1"
        )
    return [piece for line in lines for piece in wrap(line, "")]
