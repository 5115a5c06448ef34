"""Certificates made for the TLS tests: a CA, a server certificate for 127.0.0.1/localhost,
and a client certificate (for mutual TLS), written as PEM files. Needs `cryptography`."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Pki:
    ca: bytes
    ca_file: Path
    server_cert: Path
    server_key: Path
    client_cert: bytes
    client_key: bytes
    client_cert_file: Path
    client_key_file: Path


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    data: bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return data


def _certificate(
    subject: str, key: Any, issuer: str, issuer_key: Any, *, ca: bool, sans: list[Any]
) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if sans else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(issuer_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM)


def make_pki(folder: Path) -> Pki:
    """Issue the certificates and write them under `folder`."""
    from cryptography import x509

    ca_key, server_key, client_key = _key(), _key(), _key()
    ca = _certificate("tilesolve test CA", ca_key, "tilesolve test CA", ca_key, ca=True, sans=[])
    sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    server = _certificate("localhost", server_key, "tilesolve test CA", ca_key, ca=False, sans=sans)
    client = _certificate("a client", client_key, "tilesolve test CA", ca_key, ca=False, sans=[])
    files = {
        "ca.pem": ca,
        "server.pem": server,
        "server.key": _pem_key(server_key),
        "client.pem": client,
        "client.key": _pem_key(client_key),
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return Pki(
        ca=ca,
        ca_file=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=folder / "server.key",
        client_cert=client,
        client_key=files["client.key"],
        client_cert_file=folder / "client.pem",
        client_key_file=folder / "client.key",
    )
