"""The `Portfolio` RPC from Python: `portfolio(client, request, hardware)` asks a tilesolve
server through a `TileSolveClient` (its retries, deadline and typed errors apply), and returns
the solver's own `PortfolioAnswer`, equal to `tilesolve.solver.apps.portfolio.solve_portfolio`'s."""

from __future__ import annotations

from typing import cast

from tilesolve import wire
from tilesolve.solver import HardwareSpec
from tilesolve.solver.apps.portfolio import PortfolioAnswer, PortfolioRequest
from tilesolve.v1 import tilesolve_pb2 as pb

from .remote import TileSolveClient


class PortfolioClient(TileSolveClient):
    """A TileSolveClient that also asks for portfolios."""

    def portfolio(
        self,
        request: PortfolioRequest,
        hardware: str | HardwareSpec,
        *,
        timeout_s: float | None = None,
    ) -> PortfolioAnswer:
        """At most `request.max_configs` configurations for the weighted problems."""
        message = wire.portfolio_request_to_proto(request, hardware)
        response = cast(pb.PortfolioResponse, self._call("Portfolio", message, timeout_s))
        return wire.portfolio_from_proto(response)


def portfolio(
    client: TileSolveClient,
    request: PortfolioRequest,
    hardware: str | HardwareSpec,
    *,
    timeout_s: float | None = None,
) -> PortfolioAnswer:
    """`PortfolioClient.portfolio` on any open TileSolveClient."""
    return PortfolioClient.portfolio(
        cast(PortfolioClient, client), request, hardware, timeout_s=timeout_s
    )
