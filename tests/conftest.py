"""Fixtures shared by the test modules, one section per layer.

Fixtures are module-scoped where a module shares one instance (a server), so that modules
stay apart: no answer cached by one module's server is a hit in another's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from tilesolve.server.app import TileSolveServer
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

import loopback

# ---- the server, its clients and the wire ----------------------------------------------------
# A module gets its own in-process server on a free loopback port (`loopback.serving`) by asking
# for `server`, its address (`target`), a channel or a stub. A module that needs other
# settings overrides `server_settings`; a test that needs a server of its own, or one it stops,
# uses `loopback.serving` directly.


@pytest.fixture(scope="module")
def server_settings() -> dict[str, Any]:
    """The `ServerConfig` settings of the module's `server` beyond host and port (none)."""
    return {}


@pytest.fixture(scope="module")
def server(server_settings: dict[str, Any]) -> Iterator[TileSolveServer]:
    """The module's server, started, in this process; stopped after the module's last test."""
    with loopback.serving(**server_settings) as running:
        yield running


@pytest.fixture(scope="module")
def target(server: TileSolveServer) -> str:
    """`HOST:PORT` of the module's server."""
    return loopback.address_of(server)


@pytest.fixture(scope="module")
def channel(target: str) -> Iterator[grpc.Channel]:
    """A plaintext channel to the module's server."""
    with grpc.insecure_channel(target) as opened:
        yield opened


@pytest.fixture(scope="module")
def stub(channel: grpc.Channel) -> pb_grpc.TileSolveServiceStub:
    """The generated stub over `channel`."""
    return pb_grpc.TileSolveServiceStub(channel)
