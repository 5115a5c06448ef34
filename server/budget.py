"""The bytes that calls in progress hold, against one budget (`max_inflight_bytes`).

A call holds its request from the moment it arrives until its handler returns, and its answer
from the moment it is made until gRPC has sent it or given up (the call's done callback: a
client that never reads keeps its answer held until its deadline or its connection ends). The
servicer's cap on calls at once times the message caps (256 x (4 + 4) MiB) is far above any
pod's memory; this budget is what the deployment's memory limit is derived from
(docs/deploy.md, "Resources").

`InFlightBytes.held` is the sum over calls; each call's share is a `CallBytes`.
`ServerConfig.check` keeps the budget at least one call of the largest request and response,
so a call alone is never refused.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class InFlightBytes:
    """Bytes held by the calls in progress, and their limit (bytes)."""

    limit: int
    held: int = 0
    peak: int = 0  # the most held at once since start

    def call(self) -> CallBytes:
        """A new call's share (empty)."""
        return CallBytes(self)

    def take(self, size: int, force: bool = False) -> bool:
        """Hold `size` more bytes, unless that passes the limit (and not `force`)."""
        if not force and self.held + size > self.limit:
            return False
        self.held += size
        self.peak = max(self.peak, self.held)
        return True

    def give_back(self, size: int) -> None:
        self.held -= size


@dataclass
class CallBytes:
    """What one call holds of an `InFlightBytes` budget: its request and its answer."""

    budget: InFlightBytes
    request: int = 0
    answer: int = 0
    ended: bool = False

    def take_request(self, size: int) -> bool:
        """Hold the request's `size` bytes; False (nothing held) when the budget is spent."""
        if self.ended or not self.budget.take(size):
            return False
        self.request += size
        return True

    def take_answer(self, size: int, force: bool = False) -> bool:
        """Hold `size` more bytes of answer; False (nothing held) when the budget is spent.
        `force` holds them whatever the budget says: the few bytes of an item that says why
        a request was not answered must not be refused themselves."""
        if self.ended or not self.budget.take(size, force):
            return False
        self.answer += size
        return True

    def drop_request(self) -> None:
        """The handler has returned: its request is no longer held."""
        self.budget.give_back(self.request)
        self.request = 0

    def end(self) -> None:
        """The call has ended (sent, failed or cancelled): give back all it holds; once."""
        if not self.ended:
            self.ended = True
            self.budget.give_back(self.request + self.answer)
            self.request = self.answer = 0
