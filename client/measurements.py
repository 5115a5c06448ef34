"""Measurement CSV files: reading and checking a sweep's rows, and writing them.

The harness (`benchmarks/gpu/sweep.py`) writes one row per configuration measured; `analyze`
and `tilesolve-cli calibrate` read them back here. Columns (a header row names them, in any
order; others, such as the device's own name, driver and library versions, are kept by the
harness for the record and ignored here):

    hardware     catalog name or alias of the device (a plan fixes it)
    kernel       family (triton or fa2; default triton)
    batch, heads, kv_heads, seq_len, seq_len_kv, head_dim, head_dim_v   (kv_heads,
                 seq_len_kv and head_dim_v default to heads, seq_len, head_dim)
    dtype        fp16, bf16 or fp8
    causal       true/false (or 1/0, yes/no)
    block_m, block_n, num_warps, num_stages
    status       ok, out_of_resources, compile_error, launch_error or wrong_result
    time_us      the median time in microseconds: a positive number when status is ok

Every bad cell is reported with its row (the file's line number, the header being row 1) and
column; the CLI prints them (the first 20, and how many more) and exits 2. So is a file past a
limit: over 256 MiB, a cell over 4096 characters, more than 100,000 rows (a sweep measures a
few thousand; the limit keeps the rows read, and the memory they take, bounded).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .files import MIB, csv_field_error, csv_fields, replace_file

if TYPE_CHECKING:
    from tilesolve.solver.apps.measured import Measurement

REQUIRED_COLUMNS = (
    "hardware",
    "batch",
    "heads",
    "seq_len",
    "head_dim",
    "dtype",
    "causal",
    "block_m",
    "block_n",
    "num_warps",
    "num_stages",
    "status",
    "time_us",
)
OPTIONAL_COLUMNS = ("kernel", "kv_heads", "seq_len_kv", "head_dim_v")
_INT_COLUMNS = (
    "batch",
    "heads",
    "kv_heads",
    "seq_len",
    "seq_len_kv",
    "head_dim",
    "head_dim_v",
    "block_m",
    "block_n",
    "num_warps",
    "num_stages",
)
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")
_DTYPES = ("fp16", "bf16", "fp8")
MAX_REPORTED = 20  # bad cells listed before the rest are counted
MAX_ROWS = 100_000  # measurement rows one file may hold
MAX_BYTES = 256 * MIB


@dataclass(frozen=True)
class CellError:
    """One bad cell (or a missing column: row 1, the header)."""

    row: int
    column: str
    message: str

    def line(self, origin: str) -> str:
        return f"{origin} row {self.row}, column {self.column}: {self.message}"


class MeasurementsError(Exception):
    """The file cannot be used as it is; `errors` name every bad cell found."""

    def __init__(self, origin: str, errors: Sequence[CellError], more: int = 0):
        self.origin = origin
        self.errors = list(errors)
        self.more = more
        super().__init__("; ".join(e.line(origin) for e in self.errors))

    def lines(self) -> list[str]:
        out = [e.line(self.origin) for e in self.errors]
        if self.more:
            out.append(f"{self.origin}: {self.more} more bad cells not listed")
        return out


def read_measurements(path: str | Path) -> list[Measurement]:
    """The rows of a measurements CSV, checked; MeasurementsError names every bad cell."""
    origin = str(path)
    try:
        if os.stat(path).st_size > MAX_BYTES:
            raise MeasurementsError(
                origin, [CellError(0, "(file)", f"over {MAX_BYTES // MIB} MiB, the limit")]
            )
        with open(path, encoding="utf-8", newline="") as handle, csv_fields():
            return parse_measurements(handle, origin)
    except UnicodeDecodeError as exc:
        raise MeasurementsError(
            origin, [CellError(0, "(file)", f"not UTF-8 text: {exc.reason}")]
        ) from None
    except OSError as exc:
        raise MeasurementsError(
            origin, [CellError(0, "(file)", exc.strerror or str(exc))]
        ) from None


def parse_measurements(lines: Iterable[str], origin: str = "measurements") -> list[Measurement]:
    """Rows from CSV text (an open file or a list of lines)."""
    from pydantic import ValidationError

    from tilesolve.solver import (
        AttentionProblem,
        InvalidRequestError,
        TilesolveError,
        get_hardware,
    )
    from tilesolve.solver.apps.measured import (
        CALIBRATED_KERNELS,
        STATUS_OK,
        STATUSES,
        Measurement,
        Shape,
        Tile,
    )
    from tilesolve.solver.violations import violations_from_validation

    reader = csv.DictReader(lines)
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
    except csv.Error as exc:
        return _raise(origin, [CellError(1, "(header)", csv_field_error(exc))])
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        have = ", ".join(header) if header else "nothing (an empty file)"
        return _raise(
            origin,
            [
                CellError(
                    1,
                    c,
                    f"missing: the header must name {', '.join(REQUIRED_COLUMNS)}; it names {have}",
                )
                for c in missing
            ],
        )
    reader.fieldnames = header
    errors: list[CellError] = []  # the first MAX_REPORTED
    found = 0  # bad cells in all
    rows: list[Measurement] = []
    hardware_names: dict[str, str | None] = {}  # as written -> canonical (None: unknown)
    unknown_why: dict[str, str] = {}
    records = iter(reader)
    while True:
        try:
            record = next(records)
        except StopIteration:
            break
        except csv.Error as exc:  # raised before the reader counts the line it is on
            errors.insert(0, CellError(reader.line_num + 1, "(row)", csv_field_error(exc)))
            found += 1
            break
        row = reader.line_num
        if len(rows) + found >= MAX_ROWS:
            too_many = f"more than {MAX_ROWS} rows, the limit; give a sample of the sweep"
            errors.insert(0, CellError(row, "(rows)", too_many))
            found += 1
            break
        cells = {k: (v or "").strip() for k, v in record.items() if k is not None}
        bad = found

        def err(column: str, message: str, row: int = row) -> None:
            nonlocal found
            found += 1
            if len(errors) < MAX_REPORTED:
                errors.append(CellError(row, column, message))

        ints: dict[str, int] = {}
        for column in _INT_COLUMNS:
            text = cells.get(column, "")
            if not text and column in OPTIONAL_COLUMNS:
                continue
            try:
                value = int(text)
            except ValueError:
                err(column, f"must be a positive integer; got {text!r}")
                continue
            if value <= 0:
                err(column, f"must be a positive integer; got {value}")
                continue
            ints[column] = value
        name = cells.get("hardware", "")
        if name not in hardware_names:
            try:
                hardware_names[name] = get_hardware(name).name if name else None
            except (InvalidRequestError, TilesolveError) as exc:
                hardware_names[name] = None
                unknown_why[name] = str(exc)
        canonical = hardware_names[name]
        if canonical is None:
            why = unknown_why.get(name, "required: a catalog name such as h200")
            err("hardware", why.removeprefix("hardware: "))
        kernel = cells.get("kernel", "") or "triton"
        if kernel not in CALIBRATED_KERNELS:
            err("kernel", f"must be one of {', '.join(CALIBRATED_KERNELS)}; got {kernel!r}")
        dtype = cells.get("dtype", "").lower()
        if dtype not in _DTYPES:
            err("dtype", f"must be one of {', '.join(_DTYPES)}; got {cells.get('dtype')!r}")
        causal_text = cells.get("causal", "").lower()
        if causal_text not in _TRUE + _FALSE:
            err("causal", f"must be true or false; got {cells.get('causal')!r}")
        status = cells.get("status", "")
        if status not in STATUSES:
            err("status", f"must be one of {', '.join(STATUSES)}; got {status!r}")
        time_us: float | None = None
        if status == STATUS_OK:
            text = cells.get("time_us", "")
            try:
                time_us = float(text)
            except ValueError:
                err("time_us", f"must be a positive number of microseconds; got {text!r}")
            else:
                if not math.isfinite(time_us) or time_us <= 0:
                    err("time_us", f"must be a positive number of microseconds; got {text}")
        if found > bad:
            continue
        assert canonical is not None
        heads = ints["heads"]
        shape = Shape(
            hardware=canonical,
            kernel=kernel,
            batch=ints["batch"],
            heads=heads,
            kv_heads=ints.get("kv_heads", heads),
            seq_len=ints["seq_len"],
            seq_len_kv=ints.get("seq_len_kv", ints["seq_len"]),
            head_dim=ints["head_dim"],
            head_dim_v=ints.get("head_dim_v", ints["head_dim"]),
            dtype=dtype,
            causal=causal_text in _TRUE,
        )
        try:
            shape.problem()
        except ValidationError as exc:
            for v in violations_from_validation(exc, AttentionProblem):
                err(v.field, v.description)
            continue
        tile = Tile(ints["block_m"], ints["block_n"], ints["num_warps"], ints["num_stages"])
        rows.append(Measurement(row, shape, tile, status, time_us))
    if errors:
        return _raise(origin, errors, found)
    if not rows:
        return _raise(origin, [CellError(2, "(rows)", "no measurements after the header")])
    return rows


def _raise(origin: str, errors: list[CellError], found: int = 0) -> list[Measurement]:
    """Raise MeasurementsError with the first MAX_REPORTED `errors` of `found` in all."""
    shown = errors[:MAX_REPORTED]
    raise MeasurementsError(origin, shown, max(found, len(errors)) - len(shown))


CSV_COLUMNS = (
    "hardware",
    "kernel",
    "batch",
    "heads",
    "kv_heads",
    "seq_len",
    "seq_len_kv",
    "head_dim",
    "head_dim_v",
    "dtype",
    "causal",
    "block_m",
    "block_n",
    "num_warps",
    "num_stages",
    "status",
    "time_us",
)


def write_measurements(
    path: str | Path, rows: Sequence[Measurement], extra: dict[str, str] | None = None
) -> None:
    """Rows as a CSV the readers take (the harness's columns; `extra` adds constant columns
    such as device_name)."""
    extra = extra or {}
    replace_file(path, _csv_text(rows, extra))


def _csv_text(rows: Sequence[Measurement], extra: dict[str, str]) -> str:
    """The rows as CSV text: a header, then one line per row (csv's CRLF line ends)."""
    handle = io.StringIO(newline="")
    writer = csv.writer(handle)
    writer.writerow([*extra, *CSV_COLUMNS])
    for m in rows:
        s, t = m.shape, m.tile
        writer.writerow(
            [
                *extra.values(),
                s.hardware,
                s.kernel,
                s.batch,
                s.heads,
                s.kv_heads,
                s.seq_len,
                s.seq_len_kv,
                s.head_dim,
                s.head_dim_v,
                s.dtype,
                "true" if s.causal else "false",
                t.block_m,
                t.block_n,
                t.num_warps,
                t.num_stages,
                m.status,
                "" if m.time_us is None else f"{m.time_us:.3f}",
            ]
        )
    return handle.getvalue()
