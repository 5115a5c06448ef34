"""Where a client connects: one server, a list of replicas, or a DNS name of replicas.

The grammar (docs/cli.md's "Remote mode" shows it to users; `tilesolve-cli --server` and the
Python clients share it):

- `HOST:PORT` or `[IPV6]:PORT` — one server, as before: HOST a hostname or an IPv4 address,
  PORT from 1 to 65535. gRPC resolves a hostname and connects to the first of its addresses
  that answers (`pick_first`); nothing is balanced.
- `IP:PORT,IP:PORT,...` — two or more replicas, each an IP address (all IPv4, or all IPv6 in
  brackets), no empty entry, none twice. Becomes gRPC's own `ipv4:`/`ipv6:` list target, so
  it is fixed when the channel is made. A hostname is refused here, not resolved: gRPC has no
  resolver for names in a list, and a name resolved once by the client would silently miss
  replicas that move; `dns:///NAME:PORT` is the form for names.
- `dns:///NAME:PORT` — every address NAME resolves to is a replica (a Kubernetes headless
  Service, say); gRPC's DNS resolver resolves it again when a connection is lost or closed
  by the server (`tilesolve-server --max-connection-age`), at most every `RESOLVE_MIN_S`.

A list and `dns:///` are *balanced*: the channel spreads calls over the replicas with gRPC's
`round_robin` policy and leaves out a replica whose `grpc.health.v1` status for the service
is not SERVING (client-side health checking; a draining server turns NOT_SERVING).
A Python sequence of addresses is the list form (a sequence of one, that one string).

This module is pure (no grpc): the CLI checks `--server` with it before importing grpc.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

SINGLE_FORM = (
    "must be HOST:PORT or [IPV6]:PORT, HOST a hostname or IPv4 address and PORT an integer "
    "from 1 to 65535, e.g. 127.0.0.1:50051, localhost:50051 or [::1]:50051 (several "
    "replicas: IP:PORT,IP:PORT,... or dns:///NAME:PORT)"
)
LIST_FORM = (
    "a list of replicas is IP:PORT,IP:PORT,... (two or more IP addresses, all IPv4 or all "
    "[IPV6], each once, no spaces)"
)
DNS_FORM = (
    "must be dns:///NAME:PORT (three slashes), NAME a hostname or IP address and PORT from 1 "
    "to 65535, e.g. dns:///tilesolve.default.svc.cluster.local:50051"
)
DNS_PREFIX = "dns:///"
RESOLVE_MIN_S = 5.0  # the least time between two DNS resolutions of a dns:/// target

_HOST_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# gRPC's own target schemes without slashes (`ipv4:1.2.3.4:5`, `unix:path`, `dns:name:port`).
_GRPC_SCHEME = re.compile(r"(dns|ipv4|ipv6|unix|unix-abstract|vsock|xds):(?!\d+$)", re.I)


class TargetError(ValueError):
    """An address the client cannot use; the message says which part and what is allowed."""


@dataclass(frozen=True)
class Target:
    """A parsed address: `grpc_target` is what the channel is made with, `text` the address
    as given (for messages), `authority` the `:authority` (and TLS name) of a list, whose
    gRPC target has none of its own, `balanced` whether calls are spread over replicas."""

    text: str
    grpc_target: str
    balanced: bool
    authority: str | None = None


@dataclass(frozen=True)
class _Address:
    host: str  # as written, brackets removed
    port: int
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None  # None for a hostname
    bracketed: bool

    @property
    def text(self) -> str:
        return f"[{self.host}]:{self.port}" if self.bracketed else f"{self.host}:{self.port}"


def _host_problem(host: str) -> str | None:
    """Why `host` is not a hostname or an IPv4 address, or None."""
    if not host:
        return "the host is empty"
    if re.fullmatch(r"[0-9.]+", host):  # only digits and dots: it must be an IPv4 address
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return f"{host!r} is not an IPv4 address (four numbers from 0 to 255)"
        return None
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        return f"{host!r} is not a hostname (letters, digits, '-' and '_', in dot-separated parts)"
    return None


def _scheme_problem(text: str) -> str | None:
    scheme = _SCHEME.match(text)
    if scheme:
        return f"leave out the scheme {scheme.group(0)!r} (only dns:/// is taken, alone)"
    grpc_scheme = _GRPC_SCHEME.match(text)
    if grpc_scheme:
        return (
            f"leave out the scheme {grpc_scheme.group(0)!r}: give IP:PORT,IP:PORT,... (the "
            "client writes gRPC's ipv4:/ipv6: targets itself) or dns:///NAME:PORT"
        )
    return None


def _address(text: str) -> _Address | str:
    """One `HOST:PORT` / `[IPV6]:PORT`, or why it is not one."""
    if not text:
        return "it is empty"
    if any(c.isspace() for c in text):
        return "it contains whitespace"
    why = _scheme_problem(text)
    if why is not None:
        return why
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    if text.startswith("["):
        inner, closed, rest = text[1:].partition("]")
        if not closed or not rest.startswith(":"):
            return "an IPv6 address in brackets must be followed by :PORT"
        try:
            ip = ipaddress.IPv6Address(inner)
        except ValueError:
            return f"{inner!r} is not an IPv6 address"
        if "%" in inner:
            return "an IPv6 zone (%...) is not supported"
        host, port = inner, rest[1:]
    else:
        host, colon, port = text.rpartition(":")
        if not colon:
            return "the port is missing"
        if ":" in host:
            return "write an IPv6 address in brackets, as in [::1]:50051"
        why = _host_problem(host)
        if why is not None:
            return why
        if re.fullmatch(r"[0-9.]+", host):
            ip = ipaddress.IPv4Address(host)
    if not port.isascii() or not port.isdigit():
        return "the port is missing" if not port else f"the port {port!r} is not a number"
    if not 1 <= int(port) <= 65535:
        return f"the port {int(port)} is outside 1 to 65535"
    return _Address(host, int(port), ip, text.startswith("["))


def check_address(text: str) -> str | None:
    """Why `text` is not one `HOST:PORT` / `[IPV6]:PORT`, or None."""
    parsed = _address(text)
    return parsed if isinstance(parsed, str) else None


def _single(text: str) -> Target:
    why = check_address(text)
    if why is not None:
        raise TargetError(f"{SINGLE_FORM}; got {text!r}: {why}")
    return Target(text=text, grpc_target=text, balanced=False)


def _dns(text: str) -> Target:
    rest = text[len(DNS_PREFIX) :] if text.lower().startswith(DNS_PREFIX) else None
    why: str | None
    if rest is None and text.lower().startswith("dns://"):
        why = "a DNS server of its own (dns://SERVER/NAME:PORT) is not supported"
    elif rest is None:
        why = "write dns:/// with three slashes"
    elif "," in rest:
        why = "one name only; its DNS records list the replicas"
    else:
        why = check_address(rest) if rest else "the name and port are missing"
    if why is not None:
        raise TargetError(f"{DNS_FORM}; got {text!r}: {why}")
    assert rest is not None
    return Target(text=text, grpc_target=DNS_PREFIX + rest, balanced=True)


def _entry_problem(entry: _Address | str, first: _Address | None, seen: dict[str, int]) -> str:
    """Why a list entry is unusable, or '' when it is fine (then it is recorded in `seen`)."""
    if isinstance(entry, str):
        return entry
    if entry.ip is None:
        return (
            f"{entry.host!r} is a hostname, and a list takes IP addresses only (gRPC resolves "
            "no names in a list); for replicas behind one name use dns:///NAME:PORT"
        )
    if first is not None and first.ip is not None and entry.ip.version != first.ip.version:
        return (
            f"an IPv{entry.ip.version} address in a list of IPv{first.ip.version} addresses "
            "(gRPC's ipv4:/ipv6: lists take one family; dns:///NAME:PORT may mix them)"
        )
    key = f"{entry.ip.compressed}:{entry.port}"
    if key in seen:
        return f"it repeats entry {seen[key]}"
    seen[key] = len(seen) + 1
    return ""


def _replicas(entries: Sequence[str], text: str) -> Target:
    parsed: list[_Address] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(entries, start=1):
        entry = _address(raw)
        if raw.lower().startswith("dns:"):
            entry = "dns:///NAME:PORT stands alone, not in a list"
        why = _entry_problem(entry, parsed[0] if parsed else None, seen)
        if why:
            raise TargetError(f"entry {number} of {len(entries)} ({raw!r}): {why}; {LIST_FORM}")
        assert isinstance(entry, _Address)
        parsed.append(entry)
    assert parsed[0].ip is not None
    scheme = f"ipv{parsed[0].ip.version}"
    grpc_target = f"{scheme}:" + ",".join(entry.text for entry in parsed)
    return Target(text=text, grpc_target=grpc_target, balanced=True, authority=parsed[0].text)


def parse_target(value: str | Sequence[str]) -> Target:
    """The target of an address (the grammar in the module's docstring); TargetError names
    the entry at fault and what is allowed."""
    if isinstance(value, str):
        if value.lower().startswith("dns:"):
            return _dns(value)
        if "," in value:
            return _replicas(value.split(","), value)
        return _single(value)
    entries = list(value)
    if not all(isinstance(entry, str) for entry in entries):
        raise TargetError(f"addresses must be strings; got {entries!r}")
    if not entries:
        raise TargetError(f"no address given; {LIST_FORM}")
    if len(entries) == 1:
        return parse_target(entries[0])
    return _replicas(entries, ",".join(entries))
