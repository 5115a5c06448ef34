"""Dispatch tables: the solver's answers over a grid of shapes, as JSON, a C++17 header or a
Python module that a build embeds, so that no service is needed at run time.

A grid names devices, head dims, dtypes, causal or not, phases and seq_len buckets (upper
bounds: bucket i holds the lengths above bucket i-1's bound up to its own). A decode cell's
buckets are the KV cache's length (its queries are the grid's `decode_seq_len`, default 1), so
a serving table is keyed on the context length; forward and backward cells may state one
`seq_len_kv` for every cell. Each cell is one
`AttentionProblem` solved at a representative length the grid states (default: the bucket's
upper bound), recorded in every entry. The table is a pure function of the grid and of the
model and catalog versions: cells in a fixed order (devices, head dims, dtypes, causal, phases,
buckets, as the grid lists them), numbers rounded to what the objective resolves (1 ns), no
time stamps or paths. Every output starts with one metadata line (`tilesolve-table: {...}`)
carrying the versions and the grid's SHA-256 (of its canonical JSON, so a TOML and a JSON
spelling of one grid hash alike), which `check_table` reads back to say what went stale.

Cells are solved with the exhaustive engine: it ranks exactly as CP-SAT does (the engines are
tested against each other) and has no time limit, so a slow machine cannot change a table.
With `max_configs`, each device's cells are first given a portfolio of at most K
configurations (`solve_portfolio`) and every entry is the configuration assigned to its cell.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ..answer import SolveAnswer
from ..errors import FieldViolation, InvalidRequestError
from ..hardware import CATALOG_VERSION, HardwareSpec, get_hardware
from ..problem import AttentionProblem, DType, Engine, Phase, SolveOptions
from ..schema_config import FROZEN_SCHEMA
from ..solve import MODEL_VERSION, solve
from ..space import COMMON_FIELDS
from .portfolio import (
    MapFn,
    PortfolioAnswer,
    PortfolioRequest,
    WeightedProblem,
    serial_map,
    solve_portfolio,
)

TABLE_FORMAT_VERSION = 1
MAX_TABLE_CELLS = 100_000  # 100k cells are ~2 minutes on one core; more is a mistake
MAX_BUCKETS = 4096
FORMATS = ("json", "cpp", "python")
Format = Literal["json", "cpp", "python"]
METADATA_TAG = "tilesolve-table:"
_ENGINE = Engine.EXHAUSTIVE
# Grid keys added after the first table format: left out of the canonical JSON at defaults.
_LATER_KEYS = ("seq_len_kv", "decode_seq_len")


class Grid(BaseModel):
    """The shapes a dispatch table covers (a TOML or JSON file's contents)."""

    model_config = FROZEN_SCHEMA

    hardware: list[str] = Field(min_length=1, max_length=64, description="catalog names")
    kernel: str | None = Field(None, pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    head_dim: list[int] = Field(min_length=1, max_length=64)
    dtype: list[DType] = Field(default_factory=lambda: [DType.FP16], min_length=1)
    causal: list[bool] = Field(default_factory=lambda: [False], min_length=1, max_length=2)
    phase: list[Phase] = Field(default_factory=lambda: [Phase.FORWARD], min_length=1)
    seq_len: list[int] = Field(
        min_length=1, max_length=MAX_BUCKETS, description="bucket upper bounds, increasing"
    )
    solve_at: Literal["upper", "lower", "middle"] | list[int] = Field(
        "upper", description="each bucket's representative length, or where to take it"
    )
    batch: int = Field(1, ge=1, le=1 << 16)
    heads: int = Field(1, ge=1, le=1024)
    kv_heads: int | None = Field(None, ge=1, le=1024)
    seq_len_kv: int | None = Field(
        None,
        ge=1,
        le=1 << 24,
        description="forward and backward cells: the key/value length of every cell "
        "(default: the cell's seq_len)",
    )
    decode_seq_len: int = Field(
        1,
        ge=1,
        le=64,
        description="decode cells: query tokens per step; their seq_len buckets are the KV "
        "cache's length",
    )

    @field_validator("head_dim", "seq_len")
    @classmethod
    def _positive_increasing(cls, values: list[int]) -> list[int]:
        """Head dims and bucket bounds are positive, increasing and distinct."""
        if any(v < 1 for v in values):
            raise ValueError(f"every value must be >= 1; got {min(values)}")
        if values != sorted(set(values)):
            raise ValueError("values must be increasing and distinct")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> Grid:
        """Explicit representatives lie in their buckets; the grid has at most 100k cells;
        each axis lists a value once."""
        for name in ("hardware", "dtype", "causal", "phase"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name} lists a value twice: {values}")
        if isinstance(self.solve_at, list):
            if len(self.solve_at) != len(self.seq_len):
                raise ValueError(
                    f"solve_at gives {len(self.solve_at)} lengths for {len(self.seq_len)} buckets"
                )
            for lo, hi, at in zip([0, *self.seq_len], self.seq_len, self.solve_at, strict=False):
                if not lo < at <= hi:
                    raise ValueError(f"solve_at {at} is outside its bucket ({lo}, {hi}]")
        if self.cell_count > MAX_TABLE_CELLS:
            raise ValueError(
                f"hardware x head_dim x dtype x causal x phase x seq_len = {self.cell_count} "
                f"cells, over the maximum of {MAX_TABLE_CELLS}"
            )
        return self

    @property
    def cell_count(self) -> int:
        n = len(self.hardware) * len(self.head_dim) * len(self.dtype) * len(self.causal)
        return n * len(self.phase) * len(self.seq_len)

    def buckets(self) -> list[tuple[int, int, int]]:
        """(lowest, highest, representative) seq_len of each bucket."""
        out = []
        for i, hi in enumerate(self.seq_len):
            lo = (self.seq_len[i - 1] if i else 0) + 1
            if isinstance(self.solve_at, list):
                at = self.solve_at[i]
            else:
                at = {"upper": hi, "lower": lo, "middle": (lo + hi) // 2}[self.solve_at]
            out.append((lo, hi, at))
        return out

    def canonical(self) -> dict[str, Any]:
        """The grid as JSON; the keys added after the format's first release (seq_len_kv,
        decode_seq_len) only where set, so an older grid hashes as it always did."""
        data = self.model_dump(mode="json")
        for name in _LATER_KEYS:
            if data[name] == type(self).model_fields[name].default:
                del data[name]
        return data

    def sha256(self) -> str:
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Cell:
    """One grid cell: where it sits in the table, and the problem solved for it."""

    hardware: str  # as the grid names it (resolved to the canonical name when solved)
    head_dim: int
    dtype: str
    causal: bool
    phase: str
    seq_len_min: int
    seq_len_max: int
    problem: AttentionProblem


def cells(grid: Grid) -> list[Cell]:
    """Every cell of the grid, in the table's order."""
    out = []
    axes = itertools.product(
        grid.hardware, grid.head_dim, grid.dtype, grid.causal, grid.phase, grid.buckets()
    )
    for hardware, head_dim, dtype, causal, phase, (lo, hi, at) in axes:
        decode = phase is Phase.DECODE  # its buckets are the cache's length
        problem = AttentionProblem(
            batch=grid.batch,
            heads=grid.heads,
            kv_heads=grid.kv_heads,
            seq_len=grid.decode_seq_len if decode else at,
            seq_len_kv=at if decode else grid.seq_len_kv,
            head_dim=head_dim,
            dtype=dtype,
            causal=causal,
            phase=phase,
        )
        out.append(Cell(hardware, head_dim, dtype.value, causal, phase.value, lo, hi, problem))
    return out


def cell_options(grid: Grid) -> SolveOptions:
    """How every cell is solved: the grid's family, the best configuration only."""
    return SolveOptions(kernel=grid.kernel, top_k=1, engine=_ENGINE)


@dataclass(frozen=True)
class CellResult:
    """What a table keeps of one cell's answer."""

    hardware: str  # canonical name
    kernel: str
    status: str  # "optimal" or "infeasible"
    parameters: tuple[tuple[str, int], ...]
    common: tuple[tuple[str, int | None], ...]
    time_us: float | None
    tflops: float | None


def cell_from_answer(answer: SolveAnswer) -> CellResult:
    """The table's view of a solver answer (in-process or from a server: the same)."""
    if not answer.candidates:
        return CellResult(answer.hardware, answer.kernel, "infeasible", (), (), None, None)
    best = answer.candidates[0]
    return CellResult(
        answer.hardware,
        answer.kernel,
        answer.status.value,
        tuple(sorted(best.parameters.items())),  # by name: wire maps are unordered
        tuple((name, getattr(best, name)) for name in COMMON_FIELDS),
        best.predicted_time_us,
        best.predicted_tflops,
    )


def solve_cell(
    problem: AttentionProblem, hardware: str | HardwareSpec, options: SolveOptions
) -> CellResult | list[FieldViolation]:
    """One cell, solved in this process (a picklable function for process pools and Dask)."""
    try:
        return cell_from_answer(solve(problem, hardware, options))
    except InvalidRequestError as exc:
        return list(exc.violations)


# ---- the table -----------------------------------------------------------------------------


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _entry(cell: Cell, result: CellResult) -> dict[str, Any]:
    common = dict(result.common)
    return {
        "hardware": result.hardware,
        "kernel": result.kernel,
        "head_dim": cell.head_dim,
        "dtype": cell.dtype,
        "causal": cell.causal,
        "phase": cell.phase,
        "seq_len_min": cell.seq_len_min,
        "seq_len_max": cell.seq_len_max,
        "solved_at": cell.problem.seq_len_kv_eff
        if cell.phase == Phase.DECODE.value
        else cell.problem.seq_len,
        "status": result.status,
        "parameters": dict(result.parameters),
        **{name: common.get(name) for name in COMMON_FIELDS},
        # 1 ns: the objective's resolution; TFLOP/s to 4 decimals (0.01%)
        "predicted_time_us": _round(result.time_us, 3),
        "predicted_tflops": _round(result.tflops, 4),
    }


def cell_violations(
    grid_cells: Sequence[Cell], results: Sequence[CellResult | list[FieldViolation]]
) -> list[FieldViolation]:
    """Cells the family refuses, each named by its place in the grid."""
    out: list[FieldViolation] = []
    for cell, result in zip(grid_cells, results, strict=True):
        if isinstance(result, list):
            where = (
                f"cell (hardware {cell.hardware}, head_dim {cell.head_dim}, dtype {cell.dtype}, "
                f"causal {str(cell.causal).lower()}, phase {cell.phase}, seq_len "
                f"{cell.problem.seq_len})"
            )
            out.extend(FieldViolation(v.field, f"{where}: {v.description}") for v in result)
    return out


def table_document(
    grid: Grid,
    grid_cells: Sequence[Cell],
    results: Sequence[CellResult | list[FieldViolation]],
    portfolio: dict[str, Any] | None = None,
    *,
    model_version: str = MODEL_VERSION,
    catalog_version: str = CATALOG_VERSION,
) -> dict[str, Any]:
    """The table as one JSON-able document: metadata first, then one entry per cell. The
    versions are those of whoever solved the cells (a server's, with --server)."""
    bad = cell_violations(grid_cells, results)
    if bad:
        raise InvalidRequestError(bad)
    entries = [
        _entry(cell, result)
        for cell, result in zip(grid_cells, results, strict=True)
        if isinstance(result, CellResult)
    ]
    metadata: dict[str, Any] = {
        "tilesolve_table": TABLE_FORMAT_VERSION,
        "generator": "tilesolve-cli table",
        "model_version": model_version,
        "catalog_version": catalog_version,
        "grid_sha256": grid.sha256(),
        "engine": _ENGINE.value,
        "entries": len(entries),
        "grid": grid.canonical(),
    }
    if portfolio is not None:
        metadata["portfolio"] = portfolio
    return {"metadata": metadata, "entries": entries, "aliases": device_aliases(grid, entries)}


def device_aliases(grid: Grid, entries: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Every name a table's lookup accepts for its devices, lower-case, to the canonical name
    its entries carry: the catalog's aliases and the grid's own spelling (a device the local
    catalog does not hold, a server's own, is looked up by its canonical name only)."""
    canonical = sorted({str(e["hardware"]) for e in entries})
    out: dict[str, str] = {}
    for name in canonical:
        try:
            spec = get_hardware(name)
        except InvalidRequestError:
            continue
        for alias in (name, *spec.aliases):
            out[alias.lower()] = name
    for given in grid.hardware:
        try:
            out.setdefault(given.strip().lower(), get_hardware(given).name)
        except InvalidRequestError:
            continue
    return dict(sorted(out.items()))


def build_dispatch_table(
    grid: Grid,
    *,
    map_fn: MapFn[AttentionProblem, CellResult | list[FieldViolation]] | None = None,
) -> dict[str, Any]:
    """Solve every cell in this process (or through `map_fn`) and return the document."""
    grid_cells = cells(grid)
    options = cell_options(grid)
    evaluate = map_fn or serial_map
    results: list[CellResult | list[FieldViolation]] = []
    # One map per device, so each call ships one hardware name to the workers.
    for hardware in grid.hardware:
        mine = [c.problem for c in grid_cells if c.hardware == hardware]
        results.extend(evaluate(partial(solve_cell, hardware=hardware, options=options), mine))
    return table_document(grid, grid_cells, results)


# ---- over a portfolio ----------------------------------------------------------------------


def portfolio_results(
    grid: Grid,
    grid_cells: Sequence[Cell],
    answers: dict[str, PortfolioAnswer],
    optima: Sequence[CellResult | list[FieldViolation]],
) -> list[CellResult | list[FieldViolation]]:
    """Each cell's entry is its portfolio configuration (times as the portfolio assigned)."""
    out: list[CellResult | list[FieldViolation]] = []
    position: dict[str, int] = {}
    for cell, optimum in zip(grid_cells, optima, strict=True):
        if isinstance(optimum, list):
            out.append(optimum)
            continue
        answer = answers[cell.hardware]
        i = position.get(cell.hardware, 0)
        position[cell.hardware] = i + 1
        assignment = answer.assignments[i]
        config = answer.configurations[assignment.config - 1]
        out.append(
            CellResult(
                hardware=optimum.hardware,
                kernel=answer.kernel,
                status=answer.status,
                parameters=tuple(config.parameters.items()),
                common=tuple((name, getattr(config, name)) for name in COMMON_FIELDS),
                time_us=assignment.time_us,
                tflops=None,
            )
        )
    return out


def portfolio_request(
    grid: Grid,
    grid_cells: Sequence[Cell],
    hardware: str,
    max_configs: int,
    max_slowdown: float | None = None,
    max_resources: dict[str, int] | None = None,
) -> PortfolioRequest:
    """One device's cells as a portfolio request, every cell weighing 1."""
    mine = [c for c in grid_cells if c.hardware == hardware]
    return PortfolioRequest(
        problems=[WeightedProblem(problem=c.problem) for c in mine],
        max_configs=min(max_configs, len(mine)),
        kernel=grid.kernel,
        max_slowdown=max_slowdown,
        max_resources=max_resources or {},
    )


def portfolio_summary(
    answers: dict[str, PortfolioAnswer], max_configs: int, max_slowdown: float | None = None
) -> dict[str, Any]:
    """What the table's metadata says of its portfolios (and what --check regenerates with)."""
    return {
        "max_configs": max_configs,
        "max_slowdown": max_slowdown,
        "devices": {
            name: {
                "status": a.status,
                "configurations": [c.label for c in a.configurations],
                "loss": round(a.loss, 6),
                "worst_loss": round(a.worst_loss, 6),
            }
            for name, a in answers.items()
        },
    }


def build_portfolio_table(
    grid: Grid,
    max_configs: int,
    *,
    max_slowdown: float | None = None,
    map_fn: MapFn[AttentionProblem, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, PortfolioAnswer]]:
    """A table whose entries use at most `max_configs` configurations per device."""
    grid_cells = cells(grid)
    optima: list[CellResult | list[FieldViolation]] = []
    answers: dict[str, PortfolioAnswer] = {}
    for hardware in grid.hardware:
        mine = [c.problem for c in grid_cells if c.hardware == hardware]
        evaluate = map_fn or serial_map
        found = evaluate(partial(solve_cell, hardware=hardware, options=cell_options(grid)), mine)
        optima.extend(found)
        if any(isinstance(r, list) for r in found):
            continue
        request = portfolio_request(grid, grid_cells, hardware, max_configs, max_slowdown)
        answers[hardware] = solve_portfolio(request, hardware, map_fn=map_fn)
    bad = cell_violations(grid_cells, optima)
    if bad:
        raise InvalidRequestError(bad)
    results = portfolio_results(grid, grid_cells, answers, optima)
    summary = portfolio_summary(answers, max_configs, max_slowdown)
    return table_document(grid, grid_cells, results, summary), answers


# ---- rendering -----------------------------------------------------------------------------


def _metadata_line(metadata: dict[str, Any], fmt: Format) -> str:
    return json.dumps({**metadata, "format": fmt}, sort_keys=True, separators=(",", ":"))


def emit(document: dict[str, Any], fmt: Format, namespace: str = "tilesolve_table") -> str:
    """The table as text in one of FORMATS."""
    if fmt == "json":
        return emit_json(document)
    if fmt == "cpp":
        return emit_cpp(document, namespace)
    return emit_python(document)


def emit_json(document: dict[str, Any]) -> str:
    metadata = {**document["metadata"], "format": "json"}
    body = {"metadata": metadata, "entries": document["entries"]}
    body["aliases"] = document.get("aliases", {})  # lower-case name -> the entries' name
    return json.dumps(body, indent=2) + "\n"


def _cpp_string(text: str) -> str:
    return json.dumps(text)  # ASCII names: JSON's escaping is valid C++


def _cpp_number(value: float | None) -> str:
    return "-1.0" if value is None else repr(float(value))


# What a table's header adds for a grid of one sequence of one head (the grid's defaults).
_FEW_BLOCKS = (
    " (one sequence of one head: too few blocks to fill a GPU, and tiles chosen for that;"
    "\n// give the workload's batch and heads in the grid)"
)


def emit_cpp(document: dict[str, Any], namespace: str = "tilesolve_table") -> str:
    """A C++17 header: constexpr entries and a constexpr lookup on the run-time shape."""
    meta = document["metadata"]
    entries = document["entries"]
    params: list[str] = []
    rows: list[str] = []
    for e in entries:
        offset = len(params)
        params.extend(
            f"    {{{_cpp_string(k)}, {v}}},  // entry {len(rows)}"
            for k, v in e["parameters"].items()
        )
        common = ", ".join(str(-1 if e[n] is None else e[n]) for n in COMMON_FIELDS)
        rows.append(
            f"    {{{_cpp_string(e['hardware'])}, {_cpp_string(e['kernel'])}, "
            f"{e['head_dim']}, {_cpp_string(e['dtype'])}, {str(e['causal']).lower()}, "
            f"{_cpp_string(e['phase'])}, {e['seq_len_min']}, {e['seq_len_max']}, "
            f"{e['solved_at']}, {str(e['status'] != 'infeasible').lower()}, {common}, "
            f"{offset}, {len(e['parameters'])}, {_cpp_number(e['predicted_time_us'])}, "
            f"{_cpp_number(e['predicted_tflops'])}}},"
        )
    if not params:
        params.append('    {"", 0},  // placeholder: no entry has parameters')
    aliases = [
        f"    {{{_cpp_string(k)}, {_cpp_string(v)}}},"
        for k, v in document.get("aliases", {}).items()
    ] or ['    {"", ""},  // placeholder: no aliases']
    grid = meta["grid"]
    lines = [
        f"// {METADATA_TAG} {_metadata_line({**meta, 'namespace': namespace}, 'cpp')}",
        "// Generated by `tilesolve-cli table`: do not edit; regenerate from the grid instead.",
        f"// Model {meta['model_version']}, catalog {meta['catalog_version']}, grid sha256 "
        f"{meta['grid_sha256']}.",
        f"// Problem: batch {grid['batch']}, heads {grid['heads']}, kv_heads "
        f"{grid['kv_heads'] if grid['kv_heads'] is not None else grid['heads']}"
        f"{_FEW_BLOCKS if grid['batch'] * grid['heads'] == 1 else ''}; each bucket",
        "// [seq_len_min, seq_len_max] was solved at seq_len = solved_at (decode: the KV",
        "// cache's length). lookup() returns nullptr for a shape outside the grid.",
        "#pragma once",
        "",
        "#include <cstddef>",
        "#include <cstdint>",
        "#include <string_view>",
        "",
        f"namespace {namespace} {{",
        "",
        f'inline constexpr std::string_view kModelVersion = "{meta["model_version"]}";',
        f'inline constexpr std::string_view kCatalogVersion = "{meta["catalog_version"]}";',
        f'inline constexpr std::string_view kGridSha256 = "{meta["grid_sha256"]}";',
        "",
        "// One parameter of a configuration, by the family's name for it.",
        "struct Param {",
        "  std::string_view name;",
        "  std::int64_t value;",
        "};",
        "",
        "// One bucket of the grid and its configuration. block_m..num_stages are -1 where the",
        "// family has no such field; every parameter is in kParams[param_offset, +param_count).",
        "struct Entry {",
        "  std::string_view hardware;",
        "  std::string_view kernel;",
        "  int head_dim;",
        "  std::string_view dtype;",
        "  bool causal;",
        "  std::string_view phase;",
        "  std::int64_t seq_len_min;",
        "  std::int64_t seq_len_max;",
        "  std::int64_t solved_at;",
        "  bool feasible;",
        "  int block_m;",
        "  int block_n;",
        "  int num_warps;",
        "  int num_stages;",
        "  std::size_t param_offset;",
        "  std::size_t param_count;",
        "  double predicted_time_us;  // -1 when infeasible",
        "  double predicted_tflops;   // -1 when infeasible or not stated",
        "};",
        "",
        "inline constexpr Param kParams[] = {",
        *params,
        "};",
        "",
        "inline constexpr Entry kEntries[] = {",
        *rows,
        "};",
        "",
        f"inline constexpr std::size_t kEntryCount = {len(entries)};",
        "",
        "// Every name lookup() accepts for a device (lower-case) and the entries' name for it.",
        "struct Alias {",
        "  std::string_view name;",
        "  std::string_view canonical;",
        "};",
        "",
        "inline constexpr Alias kAliases[] = {",
        *aliases,
        "};",
        "",
        "// `a` equals `b` ignoring ASCII case (b is lower-case).",
        "constexpr bool equal_folded(std::string_view a, std::string_view b) {",
        "  if (a.size() != b.size()) return false;",
        "  for (std::size_t i = 0; i < a.size(); ++i) {",
        "    char c = a[i];",
        "    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');",
        "    if (c != b[i]) return false;",
        "  }",
        "  return true;",
        "}",
        "",
        "// The entries' name for a device name or alias (in any case); itself if unknown.",
        "constexpr std::string_view canonical(std::string_view hardware) {",
        "  for (const Alias& a : kAliases) {",
        "    if (!a.name.empty() && equal_folded(hardware, a.name)) return a.canonical;",
        "  }",
        "  return hardware;",
        "}",
        "",
        "// The entry for a run-time shape, or nullptr when the grid does not cover it;",
        "// `hardware` may be any catalog alias of a device (canonical()).",
        "constexpr const Entry* lookup(std::string_view hardware, int head_dim,",
        "                              std::string_view dtype, bool causal,",
        "                              std::string_view phase, std::int64_t seq_len) {",
        "  hardware = canonical(hardware);",
        "  for (std::size_t i = 0; i < kEntryCount; ++i) {",
        "    const Entry& e = kEntries[i];",
        "    if (e.hardware == hardware && e.head_dim == head_dim && e.dtype == dtype &&"
        "        e.causal == causal && e.phase == phase && e.seq_len_min <= seq_len &&",
        "        seq_len <= e.seq_len_max) {",
        "      return &e;",
        "    }",
        "  }",
        "  return nullptr;",
        "}",
        "",
        "// A parameter of an entry by name, or `missing` when its family has none.",
        "constexpr std::int64_t param(const Entry& e, std::string_view name,",
        "                             std::int64_t missing = -1) {",
        "  for (std::size_t i = 0; i < e.param_count; ++i) {",
        "    if (kParams[e.param_offset + i].name == name) {",
        "      return kParams[e.param_offset + i].value;",
        "    }",
        "  }",
        "  return missing;",
        "}",
        "",
        f"}}  // namespace {namespace}",
    ]
    return "\n".join(lines) + "\n"


def _py(value: Any) -> str:
    """A Python literal for JSON-like data, deterministic (dicts in insertion order)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def emit_python(document: dict[str, Any]) -> str:
    """A Python module: METADATA, ENTRIES and lookup() (standard library only)."""
    meta = document["metadata"]
    lines = [
        f"# {METADATA_TAG} {_metadata_line(meta, 'python')}",
        '"""Dispatch table generated by `tilesolve-cli table`: do not edit; regenerate it.',
        "",
        f"Model {meta['model_version']}, catalog {meta['catalog_version']}, grid sha256",
        f"{meta['grid_sha256']}. Each bucket [seq_len_min, seq_len_max] was solved at",
        "seq_len = solved_at; lookup() returns None for a shape outside the grid.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import bisect",
        "from typing import Any",
        "",
        f"METADATA: dict[str, Any] = {_py({**meta, 'format': 'python'})}",
        "",
        "ENTRIES: tuple[dict[str, Any], ...] = (",
        *(f"    {_py(e)}," for e in document["entries"]),
        ")",
        "",
        "# Every name lookup() accepts for a device (lower-case) -> the entries' name for it.",
        f"ALIASES: dict[str, str] = {_py(document.get('aliases', {}))}",
        "",
        "_Key = tuple[str, int, str, bool, str]",
        "_INDEX: dict[_Key, list[tuple[int, int, dict[str, Any]]]] = {}",
        "for _e in ENTRIES:",
        '    _key = (_e["hardware"], _e["head_dim"], _e["dtype"], _e["causal"], _e["phase"])',
        '    _INDEX.setdefault(_key, []).append((_e["seq_len_max"], _e["seq_len_min"], _e))',
        "for _rows in _INDEX.values():",
        "    _rows.sort(key=lambda row: row[0])",
        "",
        "",
        "def lookup(",
        "    hardware: str, head_dim: int, dtype: str, causal: bool, phase: str, seq_len: int",
        ") -> dict[str, Any] | None:",
        '    """The entry for a run-time shape, or None when the grid does not cover it;',
        '    `hardware` may be any catalog alias of a device, in any case (ALIASES)."""',
        "    hardware = ALIASES.get(hardware.strip().lower(), hardware)",
        "    rows = _INDEX.get((hardware, head_dim, dtype, causal, phase), [])",
        "    i = bisect.bisect_left([row[0] for row in rows], seq_len)",
        "    if i < len(rows) and rows[i][1] <= seq_len:",
        "        return rows[i][2]",
        "    return None",
    ]
    return "\n".join(lines) + "\n"


# ---- checking a committed table ------------------------------------------------------------


class TableFileError(ValueError):
    """The file is not a tilesolve table (no readable metadata line)."""


def read_metadata(text: str) -> dict[str, Any]:
    """The metadata of a generated table in any format."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TableFileError(f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
        metadata = document.get("metadata") if isinstance(document, dict) else None
    else:
        first = text.split("\n", 1)[0]
        _, tag, rest = first.partition(METADATA_TAG)
        metadata = None
        if tag:
            try:
                metadata = json.loads(rest)
            except json.JSONDecodeError:
                metadata = None
    if not isinstance(metadata, dict) or metadata.get("format") not in FORMATS:
        raise TableFileError(
            f"line 1: no `{METADATA_TAG}` metadata: not a table written by tilesolve-cli table"
        )
    return metadata


def check_table(existing: str, fresh: str) -> list[str]:
    """What changed between a committed table and a fresh one (empty: current)."""
    if existing == fresh:
        return []
    old, new = read_metadata(existing), read_metadata(fresh)
    changes = []
    for key in ("tilesolve_table", "model_version", "catalog_version", "engine", "grid_sha256"):
        if old.get(key) != new.get(key):
            changes.append(f"{key}: {old.get(key)} -> {new.get(key)}")
    old_grid, new_grid = old.get("grid") or {}, new.get("grid") or {}
    for key in sorted(set(old_grid) | set(new_grid)):
        if old_grid.get(key) != new_grid.get(key):
            changes.append(f"grid {key}: {old_grid.get(key)} -> {new_grid.get(key)}")
    if old.get("portfolio") != new.get("portfolio"):
        changes.append("portfolio: its configurations or settings changed")
    diff = [
        line
        for line in difflib.unified_diff(
            existing.splitlines(), fresh.splitlines(), "committed", "current", n=0, lineterm=""
        )
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    hashes = {str(old.get("grid_sha256")), str(new.get("grid_sha256"))}
    body = [
        line for line in diff if METADATA_TAG not in line and not any(h in line for h in hashes)
    ]
    if body:
        changes.append(f"{len(body)} lines differ; first: {body[0][:160]}")
    if not changes:
        changes.append("the file's text differs from what the grid generates")
    return changes
