"""`--server ADDRESS`: its flags, the settings they make, and the client they open.

ADDRESS is one server (`HOST:PORT`, `[IPV6]:PORT`) or several replicas (`IP:PORT,IP:PORT,...`
or `dns:///NAME:PORT`, balanced by the client), in the grammar of `tilesolve.client.targets`;
anything else is exit 2 with one line naming the entry at fault.

With `--server` a command asks the server through `tilesolve.client.remote` (imported, with
grpc, only then) and prints exactly what the in-process command prints, except `solve_ms`,
which is the server's, and `cache_hit`: an answer from the server's cache says so (the solve
header reads `cached (solved in X ms originally)`, `--json` has `"cache_hit": true`). The
request is still checked in the CLI first (same messages); what only the server can judge (its
catalog, the kernel family's rules) comes back as field violations, printed the same way. An
unreachable server or a passed deadline exits 3.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .cli_common import (
    EXIT_INTERNAL,
    EXIT_UNAVAILABLE,
    CliExit,
    CliInputError,
    ErrorLine,
    flag_for,
)

if TYPE_CHECKING:
    from tilesolve.solver import HardwareSpec

    from .remote import TileSolveClient, TilesolveRpcError

DEFAULT_TIMEOUT_S = 30.0  # --timeout; `solve` allows at least its --time-limit plus 10 s
# How long the CLI waits for a connection before it reports the server unreachable (exit 3):
# short enough for a shell; a reached server then has --timeout to answer.
CONNECT_TIMEOUT_S = 3.0
MAX_TIMEOUT_S = 3600.0

_REMOTE_ONLY_FLAGS = (
    ("tls", "--tls"),
    ("tls_ca", "--tls-ca"),
    ("tls_cert", "--tls-cert"),
    ("tls_key", "--tls-key"),
    ("timeout_s", "--timeout"),
)

# Request paths of the service -> the CLI's field names (as the in-process errors print them).
_WIRE_FIELD_PREFIXES = ("problem.", "options.")
_WIRE_FIELDS = {
    "parameter_pins": "param",
    "hardware.name": "hardware",
    "name": "hardware",  # GetHardwareRequest.name
    "smem_bytes": "smem",
    "carveout_percent": "carveout",
}


def add_remote_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "server (optional; without --server the command runs in-process)"
    )
    group.add_argument(
        "--server",
        metavar="ADDRESS",
        help="ask this tilesolve server instead of solving here: HOST:PORT or [IPV6]:PORT, "
        "HOST a hostname or IPv4 address, PORT from 1 to 65535, no scheme (not http://), no "
        "spaces; e.g. 127.0.0.1:50051, localhost:50051, [::1]:50051. Several replicas, "
        "balanced (round robin, skipping any whose health is not SERVING): "
        "IP:PORT,IP:PORT,... (IP addresses of one family, each once) or dns:///NAME:PORT "
        "(every address NAME resolves to, resolved again as connections end). A server "
        f"not reached within {CONNECT_TIMEOUT_S:g} s is reported unreachable (exit 3)",
    )
    group.add_argument(
        "--tls", action="store_true", help="connect with TLS (the system's root certificates)"
    )
    group.add_argument(
        "--tls-ca", metavar="FILE", help="PEM root certificate(s) to trust (implies --tls)"
    )
    group.add_argument(
        "--tls-cert", metavar="FILE", help="PEM client certificate, for mutual TLS (with --tls-key)"
    )
    group.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    group.add_argument(
        "--timeout",
        dest="timeout_s",
        metavar="SECONDS",
        help=f"deadline of each call to the server, retries included (default "
        f"{DEFAULT_TIMEOUT_S:g}; for solve at least --time-limit + 10)",
    )


@dataclass(frozen=True)
class Remote:
    """Where and how to reach a tilesolve server (`--server` and its companions)."""

    target: str
    timeout_s: float | None
    tls: bool
    root_ca: bytes | None
    client_cert: bytes | None
    client_key: bytes | None


def _read_file(field: str, path: str) -> bytes | ErrorLine:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        return ErrorLine(field, f"cannot read {path!r}: {exc.strerror or exc} ({flag_for(field)})")


def server_target(text: str) -> str | ErrorLine:
    """`--server`'s value, checked (`tilesolve.client.targets`: one address, a list of
    replicas or dns:///NAME:PORT), or a violation naming the entry at fault and what is
    allowed. The client parses it again into its gRPC target."""
    from .targets import TargetError, parse_target  # here: a local question needs neither

    try:
        parse_target(text)
    except TargetError as exc:
        return ErrorLine("server", str(exc))
    return text


def remote_settings(args: argparse.Namespace) -> Remote | None:
    """The server to ask, or None for in-process; CliInputError for unusable flags."""
    server = getattr(args, "server", None)
    if server is None:
        given = [flag for dest, flag in _REMOTE_ONLY_FLAGS if getattr(args, dest, None)]
        if given:
            raise CliInputError(
                [
                    ErrorLine(
                        "server",
                        f"{', '.join(given)} only {'applies' if len(given) == 1 else 'apply'} "
                        "to a server; add --server HOST:PORT "
                        "(without it the command runs in-process)",
                    )
                ]
            )
        return None
    violations: list[ErrorLine] = []
    target = server_target(server)
    if isinstance(target, ErrorLine):
        violations.append(target)
    timeout_s: float | None = None
    if args.timeout_s is not None:
        allowed = f"must be a number of seconds > 0 and <= {MAX_TIMEOUT_S:g} (--timeout)"
        try:
            timeout_s = float(args.timeout_s.strip())
        except ValueError:
            violations.append(ErrorLine("timeout_s", f"{allowed}; got {args.timeout_s!r}"))
        else:
            if not 0 < timeout_s <= MAX_TIMEOUT_S:
                violations.append(ErrorLine("timeout_s", f"{allowed}; got {timeout_s:g}"))
    files: dict[str, bytes | None] = {}
    for field in ("tls_ca", "tls_cert", "tls_key"):
        path = getattr(args, field)
        read = None if path is None else _read_file(field, path)
        if isinstance(read, ErrorLine):
            violations.append(read)
        files[field] = read if isinstance(read, bytes) else None
    if (args.tls_cert is None) != (args.tls_key is None):
        missing = "tls_key" if args.tls_key is None else "tls_cert"
        violations.append(
            ErrorLine(missing, "mutual TLS needs both --tls-cert and --tls-key (PEM files)")
        )
    if violations:
        raise CliInputError(violations)
    assert isinstance(target, str)
    return Remote(
        target=target,
        timeout_s=timeout_s,
        tls=bool(args.tls) or any(files.values()),
        root_ca=files["tls_ca"],
        client_cert=files["tls_cert"],
        client_key=files["tls_key"],
    )


def cli_field(path: str) -> str:
    """'problem.head_dim' -> 'head_dim', 'hardware.name' -> 'hardware'."""
    for prefix in _WIRE_FIELD_PREFIXES:
        if path.startswith(prefix):
            path = path[len(prefix) :]
            break
    return _WIRE_FIELDS.get(path, path)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def server_violations(error: TilesolveRpcError, default_field: str) -> list[ErrorLine]:
    """A server's INVALID_ARGUMENT / NOT_FOUND as the CLI's field violations."""
    if error.violations:
        return [ErrorLine(cli_field(v.field), v.description) for v in error.violations]
    message = error.message
    field = default_field
    head, sep, rest = message.partition(": ")
    if sep and cli_field(head) in (default_field, "hardware"):  # "hardware: unknown ..."
        field, message = cli_field(head), rest
    return [ErrorLine(field, message)]


def _from_rpc(error: TilesolveRpcError, remote: Remote, timeout_s: float) -> Exception:
    """The CLI's error for a failed call: exit 2 (bad input), 3 (server trouble) or 4."""
    import grpc

    code = error.code
    detail = f"{code.name}: {_one_line(error.message)}"
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return CliInputError(server_violations(error, "request"))
    if code is grpc.StatusCode.NOT_FOUND:
        return CliInputError(server_violations(error, "hardware"))
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        if error.message.startswith("time_limit_s:"):  # the solver's own limit, as in-process
            return CliExit(EXIT_UNAVAILABLE, f"error: {_one_line(error.message)}")
        return CliExit(
            EXIT_UNAVAILABLE,
            f"error: server: no answer from {remote.target} within {timeout_s:g} s ({detail}); "
            "raise --timeout",
        )
    if code is grpc.StatusCode.UNAVAILABLE:
        return CliExit(EXIT_UNAVAILABLE, f"error: server: cannot reach {remote.target} ({detail})")
    if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS):
        return CliExit(
            EXIT_INTERNAL, f"internal error (please report): server {remote.target}: {detail}"
        )
    return CliExit(EXIT_UNAVAILABLE, f"error: server: {remote.target} refused the call ({detail})")


@contextmanager
def asking(remote: Remote, timeout_s: float | None = None) -> Iterator[TileSolveClient]:
    """A client for `remote`; a failed call leaves as the CLI's CliInputError or CliExit."""
    from .remote import TileSolveClient, TilesolveRpcError

    budget = remote.timeout_s or timeout_s or DEFAULT_TIMEOUT_S
    try:
        with TileSolveClient(
            remote.target,
            timeout_s=budget,
            ready_timeout_s=min(CONNECT_TIMEOUT_S, budget),
            tls=remote.tls,
            root_ca=remote.root_ca,
            client_cert=remote.client_cert,
            client_key=remote.client_key,
        ) as client:
            yield client
    except TilesolveRpcError as exc:
        raise _from_rpc(exc, remote, budget) from exc


def remote_spec(
    client: TileSolveClient, name: str, violations: list[ErrorLine]
) -> HardwareSpec | None:
    """The server's entry for `name`; an unknown name heads `violations` (reported together
    with the others, in the in-process order). If the server cannot be asked, input already
    known to be bad wins."""
    from .remote import DeadlineError, InvalidArgumentError, NotFoundError, UnavailableError

    try:
        return client.hardware_spec(name)
    except (NotFoundError, InvalidArgumentError) as exc:
        violations[:0] = server_violations(exc, "hardware")
        return None
    except (UnavailableError, DeadlineError):
        if violations:
            raise CliInputError(violations) from None
        raise
