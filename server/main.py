"""`tilesolve-server`: the command line of the gRPC server.

    tilesolve-server --port 50051 [--processes N] [--workers N]
                     [--tls-cert CERT --tls-key KEY [--tls-client-ca CA]]

Bad options exit 2 with a one-line error; an address that cannot be listened on (the port is
in use, the host is not this machine's) exits 1 with one line saying why; SIGTERM or SIGINT
drains the server (health NOT_SERVING for --drain-delay seconds while it still answers, then
in-flight calls finish within --grace seconds) and exits 0. With --processes N, N server
processes share the port (server/supervisor.py) and the signal drains them all.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from .config import MIB, ServerConfig, available_cpus

logger = logging.getLogger(__name__)
_LOG_LEVELS = ("debug", "info", "warning", "error")
EXIT_CANNOT_LISTEN = 1

_EPILOG = """\
exit codes:
  0  stopped by SIGTERM or SIGINT, after draining the calls in flight (within
     --drain-delay + --grace seconds)
  1  cannot listen on --host:--port (the port is already in use, the host is not
     this machine's, ...); one line on stderr says which address and why; with
     --processes: a worker could not start, or workers kept crashing
  2  invalid options (--processes outside 1 to 64, ...)
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


def _seconds_in(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number of seconds; got {text!r}") from None
        if not lo <= value <= hi:  # NaN fails too
            raise argparse.ArgumentTypeError(
                f"must be from {lo:g} to {hi:g} seconds; got {value:g}"
            )
        return value

    return parse


_seconds = _seconds_in(0, 3600)
_positive_seconds = _seconds_in(0.001, 3600)


def _pem_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (not the usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from .supervisor import MAX_PROCESSES

    d = ServerConfig()
    parser = _Parser(
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
        type=_int_in(0, 1024),
        default=d.workers,
        metavar="N",
        help="solves running at once (in each of --processes); 0 = one per available CPU, "
        f"shared among the processes (default 0, here {available_cpus()} in all)",
    )
    parser.add_argument(
        "--processes",
        type=_int_in(1, MAX_PROCESSES),
        default=1,
        metavar="N",
        help=f"server processes sharing the port (SO_REUSEPORT, Linux), each with its own "
        f"solver processes, cache and limits; from 1 to {MAX_PROCESSES} (default 1)",
    )
    parser.add_argument("--supervised", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--solve-in",
        choices=("processes", "threads"),
        default="processes",
        help="where solves run: solver processes (default; the server's own answers never "
        "wait for the CPU they use) or threads of the server's process",
    )
    parser.add_argument(
        "--max-concurrent-rpcs",
        type=_int_in(1, 1 << 20),
        default=d.max_concurrent_rpcs,
        metavar="N",
        help="tilesolve calls in progress at once; more get RESOURCE_EXHAUSTED; health checks "
        f"do not count (default {d.max_concurrent_rpcs})",
    )
    parser.add_argument(
        "--cache-mib",
        type=_int_in(0, 1 << 20),
        default=d.cache_bytes // MIB,
        metavar="MIB",
        help=f"memory for cached answers; 0 disables the cache (default {d.cache_bytes // MIB})",
    )
    parser.add_argument(
        "--max-batch-size",
        type=_int_in(1, 16384),
        default=d.max_batch_size,
        metavar="N",
        help=f"most requests one SolveBatch may carry (default {d.max_batch_size})",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=_int_in(1024, 1 << 30),
        default=d.max_request_bytes,
        metavar="BYTES",
        help=f"largest request accepted (default {d.max_request_bytes}, gRPC's usual)",
    )
    parser.add_argument(
        "--max-response-bytes",
        type=_int_in(1 << 16, 1 << 30),
        default=d.max_response_bytes,
        metavar="BYTES",
        help="largest response sent; a SolveBatch that would pass it answers the rest "
        f"RESOURCE_EXHAUSTED (default {d.max_response_bytes}, what gRPC clients accept)",
    )
    parser.add_argument(
        "--default-deadline",
        type=_positive_seconds,
        default=d.default_deadline_s,
        metavar="SECONDS",
        help=f"deadline of a call that sets none (default {d.default_deadline_s:g})",
    )
    parser.add_argument(
        "--batch-budget",
        type=_positive_seconds,
        default=d.batch_budget_s,
        metavar="SECONDS",
        help="most time one SolveBatch may take; the requests left then are answered "
        f"DEADLINE_EXCEEDED (default {d.batch_budget_s:g})",
    )
    parser.add_argument(
        "--drain-delay",
        type=_seconds,
        default=d.drain_delay_s,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, time health reports NOT_SERVING while the server still "
        f"answers, before it stops accepting calls (default {d.drain_delay_s:g})",
    )
    parser.add_argument(
        "--grace",
        type=_seconds,
        default=d.grace_s,
        metavar="SECONDS",
        help="then, time in-flight calls get to finish; the rest get UNAVAILABLE (default "
        f"{d.grace_s:g})",
    )
    parser.add_argument(
        "--max-connection-age",
        type=_seconds,
        default=d.max_connection_age_s,
        metavar="SECONDS",
        help="ask each client to reconnect after this long (gRPC adds +-10%% jitter), so that "
        "long-lived clients spread onto replicas started since; calls in progress then get "
        "max(--default-deadline, --batch-budget) to finish; 0 = never (default "
        f"{d.max_connection_age_s:g})",
    )
    parser.add_argument(
        "--max-connection-idle",
        type=_seconds,
        default=d.max_connection_idle_s,
        metavar="SECONDS",
        help="close a connection that carried no call for this long (a gRPC client "
        f"reconnects on its next call); 0 = never (default {d.max_connection_idle_s:g})",
    )
    parser.add_argument(
        "--max-streams-per-connection",
        type=_int_in(1, 1 << 16),
        default=d.max_streams_per_connection,
        metavar="N",
        help="HTTP/2 streams one connection may have open at once (a client that opens and "
        "resets streams holds no more; gRPC clients queue calls beyond it) (default "
        f"{d.max_streams_per_connection})",
    )
    parser.add_argument(
        "--max-inflight-mib",
        type=_int_in(1, 1 << 20),
        default=d.max_inflight_bytes // MIB,
        metavar="MIB",
        help="memory the calls in progress may hold in requests and answers; beyond it "
        "RESOURCE_EXHAUSTED (default "
        f"{d.max_inflight_bytes // MIB}; at least --max-request-bytes + --max-response-bytes)",
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
    """The ServerConfig of parsed options; inconsistent options exit 2 via the parser."""
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if args.tls_client_ca is not None and args.tls_cert is None:
        parser.error("--tls-client-ca needs --tls-cert and --tls-key")
    if args.profile is not None:
        _check_profile(args.profile, parser)
    if args.processes > 1:
        from .supervisor import has_reuseport

        if not has_reuseport():
            parser.error("--processes above 1 needs SO_REUSEPORT balancing (Linux)")
        if args.supervised:
            parser.error("--processes and --supervised do not go together")
    config = ServerConfig(
        host=args.host,
        port=args.port,
        workers=args.workers,
        solve_in=args.solve_in,
        max_concurrent_rpcs=args.max_concurrent_rpcs,
        cache_bytes=args.cache_mib * MIB,
        max_batch_size=args.max_batch_size,
        max_request_bytes=args.max_request_bytes,
        max_response_bytes=args.max_response_bytes,
        default_deadline_s=args.default_deadline,
        batch_budget_s=args.batch_budget,
        drain_delay_s=args.drain_delay,
        grace_s=args.grace,
        max_connection_age_s=args.max_connection_age,
        max_connection_idle_s=args.max_connection_idle,
        max_streams_per_connection=args.max_streams_per_connection,
        max_inflight_bytes=args.max_inflight_mib * MIB,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
        profile=Path(args.profile) if args.profile is not None else None,
        reuse_port=args.supervised,
    )
    try:
        config.check()
    except ValueError as exc:
        parser.error(str(exc))
    return config


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
    except json.JSONDecodeError as exc:
        parser.error(f"--profile: {path} is not JSON: {exc}")
    except ValueError as exc:  # too large, not UTF-8, nested too deep
        parser.error(f"--profile: {exc}")


def main(argv: Sequence[str] | None = None) -> int:
    # gRPC's C core writes a line to stderr for each failed TLS handshake (at its INFO level),
    # out of Python logging's reach: a client could fill the log at will. Errors only, unless
    # the environment asks for more (read when grpc is first imported, below).
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    # Before anything starts a thread (numpy's BLAS does on import): every thread then
    # inherits the mask, and only `serve`'s sigwait takes SIGTERM/SIGINT (see app.serve).
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        from tilesolve.heap import keep_heap

        from .app import serve

        parser = build_parser()
        args = parser.parse_args(argv)
        config = config_from_args(args, parser)
        logging.basicConfig(
            level=args.log_level.upper(),
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s %(message)s",
        )
        # Before the solver allocates: the heap a solve frees is kept for the next (heap.py).
        logger.debug("C heap kept between solves: %s", keep_heap())
        try:
            if args.processes > 1:
                from .supervisor import supervise

                return supervise(config, args.processes, args.log_level)
            if args.supervised:
                from .supervisor import watch_supervisor

                watch_supervisor()
            return serve(config)
        except OSError as exc:  # the address, or a TLS file that cannot be read
            print(f"tilesolve-server: error: {exc}", file=sys.stderr)
            return EXIT_CANNOT_LISTEN
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)


if __name__ == "__main__":
    sys.exit(main())
