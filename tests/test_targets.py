"""The address grammar of the clients and `--server` (`tilesolve.client.targets`): one server,
a list of replicas, dns:///NAME:PORT; every refusal names the entry at fault and the form."""

from __future__ import annotations

import json

import pytest

from tilesolve.client.remote import TileSolveClient, client_target, service_config
from tilesolve.client.targets import LIST_FORM, RESOLVE_MIN_S, Target, TargetError, parse_target


@pytest.mark.parametrize(
    ("given", "grpc_target", "authority"),
    [
        (
            "127.0.0.1:50051,127.0.0.2:50051",
            "ipv4:127.0.0.1:50051,127.0.0.2:50051",
            "127.0.0.1:50051",
        ),
        ("10.0.0.1:1,10.0.0.2:2,10.0.0.3:3", "ipv4:10.0.0.1:1,10.0.0.2:2,10.0.0.3:3", "10.0.0.1:1"),
        ("[::1]:50051,[fe80::1]:50052", "ipv6:[::1]:50051,[fe80::1]:50052", "[::1]:50051"),
        (
            "127.0.0.1:50051,127.0.0.1:50052",
            "ipv4:127.0.0.1:50051,127.0.0.1:50052",
            "127.0.0.1:50051",
        ),
        (("127.0.0.1:1", "127.0.0.2:1"), "ipv4:127.0.0.1:1,127.0.0.2:1", "127.0.0.1:1"),
        (["[::1]:1", "[::2]:1"], "ipv6:[::1]:1,[::2]:1", "[::1]:1"),
    ],
)
def test_a_list_of_ip_addresses_is_a_balanced_grpc_list_target(
    given: str | list[str], grpc_target: str, authority: str
) -> None:
    target = parse_target(given)
    text = given if isinstance(given, str) else ",".join(given)
    assert target == Target(text, grpc_target, balanced=True, authority=authority)


@pytest.mark.parametrize(
    "given", ["dns:///localhost:50051", "dns:///tilesolve.default.svc.cluster.local:50051"]
)
def test_dns_names_every_replica_and_is_balanced(given: str) -> None:
    assert parse_target(given) == Target(given, given, balanced=True)
    assert parse_target("DNS:///localhost:1").grpc_target == "dns:///localhost:1"


@pytest.mark.parametrize("given", ["127.0.0.1:50051", "localhost:50051", "[::1]:50051"])
def test_one_address_is_one_server_as_before(given: str) -> None:
    assert parse_target(given) == Target(given, given, balanced=False)
    assert parse_target([given]) == parse_target(given)  # a sequence of one


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (
            "127.0.0.1:1,127.0.0.1:99999,127.0.0.3:1",
            "entry 2 of 3 ('127.0.0.1:99999'): the port 99999 is outside 1 to 65535",
        ),
        ("127.0.0.1:1,,127.0.0.2:2", "entry 2 of 3 (''): it is empty"),
        ("127.0.0.1:1,", "entry 2 of 2 (''): it is empty"),
        (",127.0.0.1:1", "entry 1 of 2 (''): it is empty"),
        ("127.0.0.1:1,127.0.0.2:1,127.0.0.1:1", "entry 3 of 3 ('127.0.0.1:1'): it repeats entry 1"),
        ("[::1]:1,[0:0::1]:1", "entry 2 of 2 ('[0:0::1]:1'): it repeats entry 1"),
        ("127.0.0.1:1,[::1]:1", "entry 2 of 2 ('[::1]:1'): an IPv6 address in a list of IPv4"),
        ("[::1]:1,127.0.0.1:1", "entry 2 of 2 ('127.0.0.1:1'): an IPv4 address in a list of IPv6"),
        ("localhost:1,127.0.0.1:2", "entry 1 of 2 ('localhost:1'): 'localhost' is a hostname"),
        ("127.0.0.1:1,db:1", "for replicas behind one name use dns:///NAME:PORT"),
        ("127.0.0.1:1, 127.0.0.2:1", "entry 2 of 2 (' 127.0.0.2:1'): it contains whitespace"),
        (
            "http://127.0.0.1:1,127.0.0.2:1",
            "entry 1 of 2 ('http://127.0.0.1:1'): leave out the scheme 'http://'",
        ),
        (
            "ipv4:127.0.0.1:1,127.0.0.2:1",
            "entry 1 of 2 ('ipv4:127.0.0.1:1'): leave out the scheme 'ipv4:'",
        ),
        ("127.0.0.1:1,dns:///a:1", "entry 2 of 2 ('dns:///a:1'): dns:///NAME:PORT stands alone"),
        ("127.0.0.1:1,127.0.0.2", "entry 2 of 2 ('127.0.0.2'): the port is missing"),
        ("127.0.0.1:1,::1:2", "entry 2 of 2 ('::1:2'): write an IPv6 address in brackets"),
    ],
)
def test_a_bad_list_names_the_entry_and_the_form(given: str, why: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_target(given)
    message = str(caught.value)
    assert why in message and LIST_FORM in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("dns:///localhost", "the port is missing"),
        ("dns:///", "the name and port are missing"),
        ("dns:///a:1,b:1", "one name only"),
        ("dns://8.8.8.8/name:1", "a DNS server of its own"),
        ("dns:name:1", "write dns:/// with three slashes"),
        ("dns:///a:0", "the port 0 is outside 1 to 65535"),
        ("dns:///bad..name:1", "'bad..name' is not a hostname"),
    ],
)
def test_a_bad_dns_target_says_so(given: str, why: str) -> None:
    with pytest.raises(TargetError, match="must be dns:///NAME:PORT") as caught:
        parse_target(given)
    assert why in str(caught.value)


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ([], "no address given"),
        (["127.0.0.1:1", 5], "addresses must be strings"),
        (["127.0.0.1:1", "127.0.0.1:1"], "entry 2 of 2 ('127.0.0.1:1'): it repeats entry 1"),
        (["127.0.0.1:1,127.0.0.2:1", "127.0.0.3:1"], "entry 1 of 2"),  # an entry is one address
    ],
)
def test_a_bad_sequence_says_so(given: list[str], why: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_target(given)
    assert why in str(caught.value)


def test_the_python_client_hands_one_address_to_grpc_unchanged() -> None:
    """As before the lists: one string without a comma or dns: is not second-guessed."""
    for given in ("127.0.0.1:50051", "unix:/tmp/tilesolve.sock", "ipv4:127.0.0.1:1"):
        assert client_target(given) == Target(given, given, balanced=False)
        assert client_target([given]) == Target(given, given, balanced=False)
    assert client_target("127.0.0.1:1,127.0.0.2:1").balanced
    with pytest.raises(ValueError, match=r"entry 2 of 2 \('localhost:2'\)"):
        TileSolveClient("127.0.0.1:1,localhost:2")
    with pytest.raises(ValueError, match="must be dns:///NAME:PORT"):
        TileSolveClient("dns://x/y:1")
    with TileSolveClient(["127.0.0.1:1", "127.0.0.2:1"]) as client:
        assert client.target == "127.0.0.1:1,127.0.0.2:1" and client.balanced


def test_a_balanced_service_config_asks_round_robin_and_health_checks() -> None:
    plain = json.loads(service_config(4, 0.2, 2.0))
    assert "loadBalancingConfig" not in plain and "healthCheckConfig" not in plain
    balanced = json.loads(service_config(4, 0.2, 2.0, balanced=True))
    assert balanced["loadBalancingConfig"] == [{"round_robin": {}}]
    assert balanced["healthCheckConfig"] == {"serviceName": "tilesolve.v1.TileSolveService"}
    assert balanced["methodConfig"] == plain["methodConfig"]  # the same retry policy
    assert RESOLVE_MIN_S < 30  # below gRPC's default minimum between DNS resolutions
