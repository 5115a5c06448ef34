"""Real tilesolve servers inside the test process, on free loopback ports, and what a test
reads from a call that failed.

`serving(**settings)` starts one (`ServerConfig` with `settings`; host 127.0.0.1 and port 0
unless given) and stops it on exit, `start(**settings)` one the caller stops; the fixtures of
`conftest.py` (`server`, `target`, `channel`, `stub`) are built on them. `violations(error)`
is the google.rpc.BadRequest of a failed call, decoded here on its own (not by
`tilesolve.wire`, which the tests check).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tilesolve.server.app import TileSolveServer, create_server
from tilesolve.server.config import ServerConfig, bracketed

STOP_TIMEOUT_S = 10.0


def start(**settings: Any) -> TileSolveServer:
    """A started server in this process (solving in threads, so it sees the kernel families
    this process registers); `.port` is the port it bound. Stop it with `.stop(0)`."""
    server = create_server(ServerConfig(**({"host": "127.0.0.1", "port": 0} | settings)))
    server.start()
    return server


@contextmanager
def serving(**settings: Any) -> Iterator[TileSolveServer]:
    """`start(**settings)`, stopped on exit."""
    server = start(**settings)
    try:
        yield server
    finally:
        server.stop(0).wait(STOP_TIMEOUT_S)


def address_of(server: TileSolveServer) -> str:
    """`HOST:PORT` a client of `server` dials (its host, an IPv6 one in brackets)."""
    return f"{bracketed(server.config.host)}:{server.port}"


def violations(error: grpc.RpcError) -> dict[str, str]:
    """The google.rpc.BadRequest field violations of a failed call, field -> description."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, "the error carries no google.rpc.Status"
    found: dict[str, str] = {}
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            found.update({v.field: v.description for v in bad.field_violations})
    return found


def call_error(call: Callable[..., object], *args: object, **kwargs: object) -> grpc.RpcError:
    """The grpc.RpcError `call(*args, **kwargs)` raises (the test fails if it raises none)."""
    with pytest.raises(grpc.RpcError) as caught:
        call(*args, **kwargs)
    return caught.value
