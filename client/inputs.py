"""Reading the files `portfolio` and `table` take: a shapes file (CSV or JSON) and a grid file
(TOML or JSON). Every bad value is reported as `error: FILE:LINE: FIELD: ...` and exit 2; so is
a file past a limit (`files.py`): a grid over 1 MiB, a shapes file over 16 MiB, brackets nested
more than 64 deep, a CSV cell over 4096 characters, more problems than `--max-problems`.

Shapes: one problem per CSV row (a header row names the columns) or per object of a JSON
array. Columns are the problem's fields by their JSON or CLI names (`seq_len` or `seq-len`):
batch, heads, kv_heads, seq_len, seq_len_kv, head_dim, head_dim_v, dtype, causal, dropout,
phase; plus `weight` (a number > 0) or `count` (a whole number of calls >= 1). Empty cells take
the defaults. Blank lines and lines starting with `#` are skipped.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cli_common import CliInputError, ErrorLine
from .files import MIB, check_nesting, csv_field_error, csv_fields, read_text

if TYPE_CHECKING:
    from tilesolve.solver.apps.dispatch_table import Grid
    from tilesolve.solver.apps.portfolio import WeightedProblem

PROBLEM_COLUMNS = (
    "batch",
    "heads",
    "kv_heads",
    "seq_len",
    "seq_len_kv",
    "head_dim",
    "head_dim_v",
    "dtype",
    "causal",
    "dropout",
    "phase",
)
WEIGHT_COLUMNS = ("weight", "count")
GRID_MAX_BYTES = 1 * MIB  # a grid is a few lists of sizes
SHAPES_MAX_BYTES = 16 * MIB  # 5,000 problems (the most a portfolio takes) of a few hundred bytes


@dataclass(frozen=True)
class Shapes:
    """The problems of a shapes file, and the line each came from."""

    problems: list[WeightedProblem]
    lines: list[int]
    path: str

    def where(self, index: int) -> str:
        return f"{self.path}:{self.lines[index]}"


def _column(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def _problem_row(
    path: str, line: int, row: dict[str, Any], violations: list[ErrorLine]
) -> WeightedProblem | None:
    from pydantic import ValidationError

    from tilesolve.solver import AttentionProblem
    from tilesolve.solver.apps.portfolio import MAX_WEIGHT, WeightedProblem
    from tilesolve.solver.violations import violations_from_validation

    where = f"{path}:{line}"
    problem_input: dict[str, Any] = {}
    weight: float = 1.0
    bad = False
    allowed = ", ".join((*PROBLEM_COLUMNS, *WEIGHT_COLUMNS))
    given_weights = [k for k in row if _column(k) in WEIGHT_COLUMNS]
    if len(given_weights) > 1:
        violations.append(ErrorLine(f"{where}: weight", "give weight or count, not both"))
        bad = True
    for key, value in row.items():
        name = _column(key)
        if isinstance(value, str):
            value = value.strip()
            if value == "":
                continue
        if value is None:
            continue
        if name in PROBLEM_COLUMNS:
            problem_input[name] = value
        elif name in WEIGHT_COLUMNS:
            number = _weight(name, value)
            if isinstance(number, str):
                violations.append(ErrorLine(f"{where}: {name}", f"{number}; got {value!r}"))
                bad = True
            elif number > MAX_WEIGHT:
                violations.append(
                    ErrorLine(f"{where}: {name}", f"must be at most {MAX_WEIGHT:g}; got {value!r}")
                )
                bad = True
            else:
                weight = number
        else:
            violations.append(
                ErrorLine(f"{where}: {key}", f"unknown column {key!r}; allowed: {allowed}")
            )
            bad = True
    try:
        problem = AttentionProblem.model_validate(problem_input)
    except ValidationError as exc:
        for v in violations_from_validation(exc, AttentionProblem):
            violations.append(ErrorLine(f"{where}: {v.field}", v.description))
        return None
    if bad:
        return None
    return WeightedProblem(problem=problem, weight=weight)


def _weight(name: str, value: Any) -> float | str:
    """A weight (> 0) or a count (a whole number >= 1), or what is wrong with it."""
    if isinstance(value, bool):
        return "must be a number"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "must be a number > 0" if name == "weight" else "must be a whole number >= 1"
    if not math.isfinite(number) or number <= 0:
        return "must be a number > 0" if name == "weight" else "must be a whole number >= 1"
    if name == "count" and not number.is_integer():
        return "must be a whole number >= 1"
    return number


def read_shapes(path: str, max_problems: int) -> Shapes:
    """The weighted problems of a CSV or JSON shapes file (CliInputError naming line and
    field for every bad value)."""
    text = read_text(path, "shapes", SHAPES_MAX_BYTES)
    if _looks_json(path, text):
        check_nesting(path, text, "json")
        rows = _json_rows(path, text)
    else:
        with csv_fields():
            rows = _csv_rows(path, text)
    violations: list[ErrorLine] = []
    problems: list[WeightedProblem] = []
    lines: list[int] = []
    for line, row in rows:
        if len(lines) == max_problems:
            violations.append(
                ErrorLine(
                    f"{path}:{line}",
                    f"more than {max_problems} problems (the maximum: --max-problems); "
                    "bucket the shapes or raise the maximum",
                )
            )
            break
        wp = _problem_row(path, line, row, violations)
        lines.append(line)
        if wp is not None:
            problems.append(wp)
    if not lines and not violations:
        violations.append(ErrorLine("shapes", f"{path!r} holds no problems"))
    if violations:
        raise CliInputError(violations)
    return Shapes(problems, lines, path)


def _looks_json(path: str, text: str) -> bool:
    if path.lower().endswith(".json"):
        return True
    if path.lower().endswith(".csv"):
        return False
    return text.lstrip().startswith("[")


def _csv_rows(path: str, text: str) -> list[tuple[int, dict[str, Any]]]:
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines())]
    content = [(n, line) for n, line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not content:
        return []
    header_line, header = content[0]
    columns = _csv_line(path, header_line, header)
    out = []
    for n, line in content[1:]:
        values = _csv_line(path, n, line)
        if len(values) != len(columns):
            raise CliInputError(
                [
                    ErrorLine(
                        f"{path}:{n}",
                        f"{len(values)} values for the {len(columns)} columns of line "
                        f"{header_line} ({', '.join(columns)})",
                    )
                ]
            )
        out.append((n, dict(zip(columns, values, strict=True))))
    return out


def _csv_line(path: str, number: int, line: str) -> list[str]:
    """The fields of one CSV line; CliInputError naming the line for a field over the limit."""
    try:
        return next(csv.reader(io.StringIO(line)), [])
    except csv.Error as exc:
        raise CliInputError([ErrorLine(f"{path}:{number}", csv_field_error(exc))]) from None


def _json_rows(path: str, text: str) -> list[tuple[int, dict[str, Any]]]:
    """The objects of a top-level JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder()
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliInputError([ErrorLine(f"{path}:{exc.lineno}", f"not JSON: {exc.msg}")]) from None
    i = len(text) - len(text.lstrip())
    if text[i : i + 1] != "[":
        raise CliInputError(
            [ErrorLine(f"{path}:1", "must be a JSON array of problems ([{...}, ...])")]
        )
    i += 1
    out: list[tuple[int, dict[str, Any]]] = []
    while True:
        i += len(text[i:]) - len(text[i:].lstrip())
        if text[i] == "]":
            return out
        value, end = decoder.raw_decode(text, i)
        line = text.count("\n", 0, i) + 1
        if not isinstance(value, dict):
            raise CliInputError([ErrorLine(f"{path}:{line}", "each problem must be an object")])
        out.append((line, value))
        i = end + len(text[end:]) - len(text[end:].lstrip())
        if text[i] == ",":
            i += 1


# ---- grids ---------------------------------------------------------------------------------


def _key_line(text: str, key: str) -> int | None:
    pattern = re.compile(rf'^\s*"?{re.escape(key)}"?\s*[=:]', re.M)
    match = pattern.search(text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def read_grid(path: str, hardware: list[str] | None = None) -> Grid:
    """The grid of a TOML or JSON file (keys at the top level), `hardware` replacing its
    device list when given."""
    from pydantic import ValidationError

    from tilesolve.solver.apps.dispatch_table import Grid
    from tilesolve.solver.violations import violations_from_validation

    text = read_text(path, "grid", GRID_MAX_BYTES)
    suffix = Path(path).suffix.lower()
    if suffix in (".toml", ".json"):
        check_nesting(path, text, suffix[1:])
    if suffix == ".toml":
        import tomllib  # here: only a TOML grid needs it, and the CLI imports this module

        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line = re.search(r"line (\d+)", str(exc))
            where = f"{path}:{line.group(1)}" if line else path
            raise CliInputError([ErrorLine(where, f"not TOML: {exc}")]) from None
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliInputError(
                [ErrorLine(f"{path}:{exc.lineno}", f"not JSON: {exc.msg}")]
            ) from None
    else:
        raise CliInputError(
            [ErrorLine("grid", f"{path!r}: the grid file must end in .toml or .json")]
        )
    if not isinstance(data, dict):
        raise CliInputError([ErrorLine(f"{path}:1", "must be a table of keys (hardware, ...)")])
    if hardware:
        data = {**data, "hardware": hardware}
    try:
        return Grid.model_validate(data)
    except ValidationError as exc:
        out = []
        for v in violations_from_validation(exc, Grid):
            key = v.field.split(".")[0]
            found = _key_line(text, key)
            where = f"{path}:{found}" if found else path
            if key == "hardware" and hardware:
                where = "--hardware"
            field = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", v.field)
            field = "grid" if field in ("", "Grid") else field
            out.append(ErrorLine(f"{where}: {field}", v.description))
        raise CliInputError(out) from None
