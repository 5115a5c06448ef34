"""FlexAttention's autotune log as measurements for `tilesolve-cli calibrate`.

With `TORCHINDUCTOR_FLEX_ATTENTION_LOGGING_FILE=<path>`, Inductor's max-autotune writes the timed
choices of each FlexAttention kernel to `<path>` with the suffix `.json`
(reference/flex_attention.md section 7). Two layouts are read:

- the current one (pytorch's `test_flex_attention_logging`): a list of entries, each with
  `kernel_type` ("forward" or "backward"), `query_shape`, `key_shape`, `value_shape` and
  `choices` sorted by time; a Triton choice carries `type`, `time`, `num_warps`, `num_stages`,
  `B`, `Hq`, `Hkv`, `seq_len_q`, `seq_len_kv`, `qk_head_dim`, `v_head_dim` and the tile keys
  (`BLOCK_M`, `BLOCK_N` forward);
- the earlier one (attention-gym's `flex_autotune_replay.py`): a list of one-key dicts whose key
  is the string form of a tuple starting with 'forward' or 'backward' and whose value is the
  choices list.

Each forward Triton choice becomes a measurement row of the flex family (status ok, time in
microseconds: the log's `time` is milliseconds, as Inductor's autotuner reports it). The log
does not record the device, the dtype or the mask, so the command names them (`--hardware`,
`--dtype`, `--causal`). Backward choices are counted and skipped: calibration compares forward
tiles (docs/model.md section 15).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .files import MIB, check_nesting, read_text

if TYPE_CHECKING:
    from tilesolve.solver.apps.measured import Measurement

MAX_LOG_BYTES = 64 * MIB
MS_TO_US = 1000.0
SHAPE_KEYS = ("B", "Hq", "Hkv", "seq_len_q", "seq_len_kv", "qk_head_dim", "v_head_dim")
TILE_KEYS = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")


class AutotuneLogError(ValueError):
    """What is wrong with the log, naming the entry and the key."""


@dataclass(frozen=True)
class AutotuneImport:
    """The forward rows of a log, and how many backward choices were skipped."""

    rows: list[Measurement]
    skipped_backward: int


def _entries(data: Any) -> list[tuple[str, list[Any]]]:
    """(kernel kind, choices) of each entry, in either layout."""
    if not isinstance(data, list):
        raise AutotuneLogError("the log must be a JSON list of kernel entries")
    out = []
    for n, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise AutotuneLogError(f"entry {n}: must be an object")
        if "kernel_type" in entry:
            kind, choices = entry["kernel_type"], entry.get("choices")
        elif len(entry) == 1:
            key, choices = next(iter(entry.items()))
            kind = "forward" if "'forward'" in key else "backward" if "'backward'" in key else key
        else:
            raise AutotuneLogError(f"entry {n}: neither layout (no kernel_type, not one key)")
        if kind not in ("forward", "backward") or not isinstance(choices, list):
            raise AutotuneLogError(
                f"entry {n}: kernel_type must be forward or backward with a choices list"
            )
        out.append((kind, choices))
    return out


def _int(choice: dict[str, Any], key: str, where: str) -> int:
    value = choice.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AutotuneLogError(f"{where}: {key} must be a positive integer; got {value!r}")
    return value


def parse_autotune_log(data: Any, hardware: str, dtype: str, causal: bool) -> AutotuneImport:
    """The log's forward Triton choices as measurements on `hardware` in `dtype`."""
    from tilesolve.solver.apps.measured import Measurement, Shape, Tile

    rows: list[Measurement] = []
    skipped = 0
    for n, (kind, choices) in enumerate(_entries(data)):
        for k, choice in enumerate(choices):
            where = f"entry {n} choice {k}"
            if not isinstance(choice, dict):
                raise AutotuneLogError(f"{where}: must be an object")
            if choice.get("type", "triton") != "triton":
                continue  # another backend's timing (e.g. the FLASH kernel)
            if kind == "backward":
                skipped += 1
                continue
            shape = [_int(choice, key, where) for key in SHAPE_KEYS]
            tile = Tile(*(_int(choice, key, where) for key in TILE_KEYS))
            time = choice.get("time")
            if isinstance(time, bool) or not isinstance(time, int | float) or not time > 0:
                raise AutotuneLogError(f"{where}: time must be a positive number; got {time!r}")
            batch, heads, kv_heads, seq_len, seq_len_kv, head_dim, head_dim_v = shape
            rows.append(
                Measurement(
                    row=len(rows) + 1,
                    shape=Shape(
                        hardware,
                        "flex",
                        batch,
                        heads,
                        kv_heads,
                        seq_len,
                        seq_len_kv,
                        head_dim,
                        head_dim_v,
                        dtype,
                        causal,
                    ),
                    tile=tile,
                    status="ok",
                    time_us=float(time) * MS_TO_US,
                )
            )
    return AutotuneImport(rows, skipped)


def read_autotune_log(path: str, hardware: str, dtype: str, causal: bool) -> AutotuneImport:
    """The forward rows of the log file at `path` (AutotuneLogError or the file's own error)."""
    text = read_text(path, "measurements", MAX_LOG_BYTES)
    check_nesting(path, text, "json")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AutotuneLogError(f"not JSON: line {exc.lineno}: {exc.msg}") from None
    return parse_autotune_log(data, hardware, dtype, causal)
