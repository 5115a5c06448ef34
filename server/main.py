"""`tilesolve-server`: the command line of the gRPC server.

    tilesolve-server --port 50051 [--workers 8] [--tls-cert CERT --tls-key KEY [--tls-client-ca CA]]

Bad options exit 2 with a one-line error; an address that cannot be listened on (the port is
in use, the host is not this machine's) exits 1 with one line saying why; SIGTERM or SIGINT
drains the server (in-flight calls finish within --grace seconds) and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import ServerConfig

_LOG_LEVELS = ("debug", "info", "warning", "error")
EXIT_CANNOT_LISTEN = 1

_EPILOG = """\
exit codes:
  0  stopped by SIGTERM or SIGINT, after draining the calls in flight
  1  cannot listen on --host:--port (the port is already in use, the host is not
     this machine's, ...); one line on stderr says which address and why
  2  invalid options
"""


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer; got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be from {lo} to {hi}; got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds; got {text!r}") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 0 to 3600 seconds; got {value:g}")
    return value


def _pem_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path


def build_parser() -> argparse.ArgumentParser:
    from .app import ServerConfig

    d = ServerConfig()
    parser = argparse.ArgumentParser(
        prog="tilesolve-server",
        description="Serve tilesolve.v1.TileSolveService over gRPC, with health checking "
        "(grpc.health.v1) and server reflection.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default=d.host, help=f"address to listen on (default {d.host})")
    parser.add_argument(
        "--port",
        type=_int_in(0, 65535),
        default=d.port,
        help=f"port to listen on; 0 = any free port (default {d.port})",
    )
    parser.add_argument(
        "--workers",
        type=_int_in(1, 1024),
        default=d.workers,
        help=f"threads serving calls (default {d.workers})",
    )
    parser.add_argument(
        "--max-concurrent-rpcs",
        type=_int_in(1, 1 << 20),
        default=d.max_concurrent_rpcs,
        metavar="N",
        help="calls in progress beyond N get RESOURCE_EXHAUSTED (default: unlimited)",
    )
    parser.add_argument(
        "--cache-size",
        type=_int_in(0, 1 << 24),
        default=d.cache_size,
        metavar="N",
        help=f"answers kept in the LRU cache; 0 disables it (default {d.cache_size})",
    )
    parser.add_argument(
        "--max-batch-size",
        type=_int_in(1, 1 << 20),
        default=d.max_batch_size,
        metavar="N",
        help=f"most requests one SolveBatch may carry (default {d.max_batch_size})",
    )
    parser.add_argument(
        "--grace",
        type=_seconds,
        default=d.grace_s,
        metavar="SECONDS",
        help=f"time in-flight calls get to finish on SIGTERM/SIGINT (default {d.grace_s:g})",
    )
    parser.add_argument("--tls-cert", type=_pem_file, metavar="PEM", help="server certificate")
    parser.add_argument("--tls-key", type=_pem_file, metavar="PEM", help="server private key")
    parser.add_argument(
        "--tls-client-ca",
        type=_pem_file,
        metavar="PEM",
        help="CA for client certificates: require them (mutual TLS); needs --tls-cert/--tls-key",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="a calibration profile (tilesolve-cli calibrate): answers for its device use the "
        "fitted constants and carry a model version naming them",
    )
    parser.add_argument(
        "--log-level", choices=_LOG_LEVELS, default="info", help="log level (default info)"
    )
    return parser


def config_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> ServerConfig:
    """The ServerConfig of parsed options; inconsistent TLS options exit 2 via the parser."""
    from .app import ServerConfig

    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if args.tls_client_ca is not None and args.tls_cert is None:
        parser.error("--tls-client-ca needs --tls-cert and --tls-key")
    if args.profile is not None:
        _check_profile(args.profile, parser)
    return ServerConfig(
        host=args.host,
        port=args.port,
        workers=args.workers,
        max_concurrent_rpcs=args.max_concurrent_rpcs,
        cache_size=args.cache_size,
        max_batch_size=args.max_batch_size,
        grace_s=args.grace,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        profile=Path(args.profile) if args.profile is not None else None,
    )


def _check_profile(path: str, parser: argparse.ArgumentParser) -> None:
    """A profile that cannot be loaded (unreadable, not a profile, fitted against another
    model or catalog) exits 2 with one line saying why."""
    from tilesolve.solver import InvalidRequestError

    from .profile import load_profile_file

    try:
        load_profile_file(path)
    except OSError as exc:
        parser.error(f"--profile: cannot read {path!r}: {exc.strerror or exc}")
    except InvalidRequestError as exc:
        parser.error("--profile: " + "; ".join(v.description for v in exc.violations))
    except ValueError as exc:
        parser.error(f"--profile: {path} is not JSON: {exc}")


def main(argv: Sequence[str] | None = None) -> int:
    # Before anything starts a thread (numpy's BLAS does on import): every thread then
    # inherits the mask, and only `serve`'s sigwait takes SIGTERM/SIGINT (see app.serve).
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        from .app import serve

        parser = build_parser()
        args = parser.parse_args(argv)
        config = config_from_args(args, parser)
        logging.basicConfig(
            level=args.log_level.upper(),
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s %(message)s",
        )
        try:
            return serve(config)
        except OSError as exc:  # the address, or a TLS file that cannot be read
            print(f"tilesolve-server: error: {exc}", file=sys.stderr)
            return EXIT_CANNOT_LISTEN
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)


if __name__ == "__main__":
    sys.exit(main())
