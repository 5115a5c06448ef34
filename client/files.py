"""What the CLI reads, within stated limits, and how it writes, atomically.

Reading. Every file the CLI takes (a grid's TOML or JSON, a shapes CSV or JSON, a measurements
CSV, a profile's JSON, a table to `--check`) is read within limits on its size in bytes
(`read_text`), on how deeply its brackets nest (`check_nesting`: tomllib and json recurse once
per level, so a file of 100,000 nested arrays would otherwise end in a RecursionError), on the
characters of one CSV field (`csv_fields`) and on its rows (the reader's own count). A file
over a limit is a `CliInputError` naming the file, the line and the limit: exit 2.

Writing. `replace_file` writes an output (a table, a stamp, a profile, a plot, a CSV) to a
temporary file in the target's folder and renames it over the target (`os.replace`), so a
reader sees the old file or the new one, never part of one: a write error (a full disk)
leaves the old file and removes the temporary, and a process killed while writing leaves the
old file and, where Linux's O_TMPFILE is available, no temporary either (an unnamed file dies
with the process; it is named only once written, just before the rename). The new file has
the mode a plain `open(path, "w")` gives: the old file's, or 0666 less the umask for a new one
(mkstemp's 0600 would hide an output from the rest of a build). An output's folder must exist
(`output_folder`, checked before the work): it is created only where an option says so.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import BinaryIO

from .cli_common import CliInputError, ErrorLine

KIB = 1024
MIB = 1024 * KIB
# How deeply the brackets of a TOML or JSON input may nest: a grid, a profile or a shapes
# file needs 3 or 4 levels; 64 is far from both those and the parsers' recursion limits.
MAX_NESTING = 64
# Characters in one CSV field: a measurement or shape cell is a number or a name.
MAX_CSV_FIELD_CHARS = 4096


def read_text(path: str, field: str, max_bytes: int) -> str:
    """The UTF-8 text of `path`; CliInputError (on `field`) when it cannot be read, is over
    `max_bytes` or is not UTF-8 (naming the line)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise CliInputError(
            [ErrorLine(field, f"cannot read {path!r}: {exc.strerror or exc}")]
        ) from None
    if len(data) > max_bytes:
        raise CliInputError(
            [ErrorLine(field, f"{path!r} is over {_size(max_bytes)}, the limit for a {field} file")]
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CliInputError([ErrorLine(f"{path}:{line}", "not UTF-8 text")]) from None


def _size(count: int) -> str:
    return f"{count // MIB} MiB" if count % MIB == 0 else f"{count} bytes"


# What a nesting scan stops at: string and comment openers, brackets, escapes and newlines.
_TOML_STOPS = re.compile(r"""'''|\"\"\"|["'#\[\]{}\n\\]""")
_JSON_STOPS = re.compile(r'["\[\]{}\n\\]')


def nesting_depth_error(text: str, syntax: str, max_depth: int) -> tuple[int, int] | None:
    """(line, depth) of the first bracket of `text` (TOML or JSON syntax) that opens a level
    past `max_depth`, or None. Brackets inside strings and TOML comments do not count; what
    is not valid TOML or JSON otherwise is left to the parser to report."""
    stops = _TOML_STOPS if syntax == "toml" else _JSON_STOPS
    depth, line, position = 0, 1, 0
    closing: str | None = None  # the delimiter of the string or comment we are inside
    while True:
        found = stops.search(text, position)
        if found is None:
            return None
        token = found.group()
        position = found.end()
        if token == "\n":
            line += 1
            if closing in ("\n", '"', "'"):  # a comment (or an unclosed one-line string) ends
                closing = None
        elif closing is not None:
            if token == "\\" and closing in ('"', '"""'):
                position += 1  # an escaped character (a quote, a backslash) is not a stop
                if text[position - 1 : position] == "\n":
                    line += 1
            elif token == closing:
                closing = None
        elif token in ("[", "{"):
            depth += 1
            if depth > max_depth:
                return line, depth
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)
        elif token == "#":
            closing = "\n"
        elif token in ('"', "'", '"""', "'''"):
            closing = token


def check_nesting(path: str, text: str, syntax: str, max_depth: int = MAX_NESTING) -> None:
    """CliInputError naming the line when `text` nests brackets deeper than `max_depth`."""
    found = nesting_depth_error(text, syntax, max_depth)
    if found is not None:
        line, _ = found
        raise CliInputError(
            [
                ErrorLine(
                    f"{path}:{line}",
                    f"brackets nested more than {max_depth} deep, the limit for a "
                    f"{syntax.upper()} input",
                )
            ]
        )


@contextlib.contextmanager
def csv_fields(max_chars: int = MAX_CSV_FIELD_CHARS) -> Iterator[None]:
    """Within: the csv module refuses a field over `max_chars` (csv.Error); after: its limit
    as it was (the limit is the module's, for every reader)."""
    previous = csv.field_size_limit(max_chars)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def csv_field_error(exc: csv.Error, max_chars: int = MAX_CSV_FIELD_CHARS) -> str:
    """The words for a csv.Error: the field limit named, or the module's own message."""
    if "field larger than field limit" in str(exc):
        return f"a field is longer than {max_chars} characters, the limit for a CSV cell"
    return f"not CSV: {exc}"


# ---- writing -------------------------------------------------------------------------------

Writer = Callable[[BinaryIO], None]


@cache
def _umask() -> int:
    """The process's umask (read once: setting it back and forth is not thread-safe)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(target: Path) -> int:
    """The permission bits a plain open(target, "w") leaves: the existing file's, or
    0666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def output_folder(
    path: str, field: str, create: bool = False, create_option: str | None = None
) -> None:
    """Check, before any work, that the folder `path` is written into exists; with `create`
    (the command's `create_option`, e.g. `table --mkdir`) make it. A missing folder is a
    CliInputError naming it (and the option): outputs never create folders unasked."""
    folder = Path(path).parent
    if folder.is_dir():
        return
    if create:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CliInputError(
                [ErrorLine(field, f"cannot create the folder {str(folder)!r}: {exc.strerror}")]
            ) from None
        return
    where = "is not a folder" if folder.exists() else "does not exist"
    hint = f"create it, or pass {create_option}" if create_option else "create it first"
    raise CliInputError([ErrorLine(field, f"the folder {str(folder)!r} {where}; {hint}")])


def replace_file(path: str | Path, content: bytes | str | Writer) -> None:
    """Write `content` (bytes, text as UTF-8, or a function writing to a binary file) to
    `path` atomically (see the module's docstring). Raises OSError; the old file is then
    as it was and no temporary is left."""
    target = Path(path)
    folder = target.parent
    write = _writer(content)
    mode = new_file_mode(target)
    handle, named = _temporary(folder, target.name)
    try:
        with handle:
            write(handle)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
            if named is None:  # O_TMPFILE: give it a name only now, just before the rename
                named = _link_unnamed(handle.fileno(), folder, target.name)
        os.replace(named, target)
    except BaseException:
        if named is not None:
            with contextlib.suppress(OSError):
                os.unlink(named)
        raise


def _writer(content: bytes | str | Writer) -> Writer:
    if not isinstance(content, bytes | str):
        return content
    data = content.encode("utf-8") if isinstance(content, str) else content

    def write(handle: BinaryIO) -> None:
        handle.write(data)

    return write


def _temporary(folder: Path, name: str) -> tuple[BinaryIO, Path | None]:
    """An unnamed file in `folder` (O_TMPFILE, and None), or else a named temporary beside
    the target (and its path)."""
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        try:
            fd = os.open(folder, tmpfile | os.O_WRONLY, 0o600)
            return os.fdopen(fd, "wb"), None
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                raise
    named = folder / _temporary_name(name)
    fd = os.open(named, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb"), named


def _temporary_name(name: str) -> str:
    return f".{name}.{os.urandom(4).hex()}.tmp"


def _link_unnamed(fd: int, folder: Path, name: str) -> Path:
    """Give the O_TMPFILE file `fd` a temporary name in `folder`: linkat(2) of its
    /proc/self/fd entry, followed (open(2) documents this; a directory fd makes os.link call
    linkat with AT_SYMLINK_FOLLOW instead of link, which would not follow it)."""
    named = folder / _temporary_name(name)
    proc_self = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(f"fd/{fd}", named, src_dir_fd=proc_self, follow_symlinks=True)
    finally:
        os.close(proc_self)
    return named
