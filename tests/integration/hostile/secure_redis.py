"""A redis-server that insists on credentials and also speaks TLS, with certificates made on the spot.

The default user needs ``requirepass``; an ACL user ``ivm`` may read and write keys only; the TLS port
asks for client certificates signed by the test CA. Every secret here is a planted string that the
tests then look for in everything the program writes.
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ivmstream.dev.redis_server import free_port, spawn_redis_server, stop_redis_server

DEFAULT_PASSWORD = "planted-default-Zq81xv"
ACL_USER = "ivm"
ACL_PASSWORD = "planted-acl-Hw47pk"


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: a client trusting only it must refuse the server

    def client_key_text(self) -> str:
        return self.client_key.read_text()


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)


def _ca(directory: Path, common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{common}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, path


def _leaf(
    directory: Path, name: str, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, server: bool
) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, key_path)
    return cert_path, key_path


def make_pki(directory: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate, all signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert, ca_path = _ca(directory, "ivmstream-test-ca")
    server_cert, server_key = _leaf(directory, "server", ca_key, ca_cert, server=True)
    client_cert, client_key = _leaf(directory, "client", ca_key, ca_cert, server=False)
    _, _, other = _ca(directory, "unrelated-ca")
    return Pki(ca_path, server_cert, server_key, client_cert, client_key, other)


class SecureRedis:
    """redis-server with requirepass, an ACL user, a plain port and a TLS port (client certificates)."""

    def __init__(self, pki: Pki) -> None:
        self.pki = pki
        self.port = free_port()
        self.tls_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> SecureRedis:
        pki = self.pki
        # requirepass and the ACL user go in a config file: on the command line they would be visible to
        # every local user in the process list.
        conf = pki.ca.parent / "redis.conf"
        conf.write_text(
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {self.port}",
                    f"tls-port {self.tls_port}",
                    f"tls-cert-file {pki.server_cert}",
                    f"tls-key-file {pki.server_key}",
                    f"tls-ca-cert-file {pki.ca}",
                    "tls-auth-clients yes",
                    'save ""',
                    "appendonly no",
                    "loglevel warning",
                    f"requirepass {DEFAULT_PASSWORD}",
                    f"user {ACL_USER} on >{ACL_PASSWORD} ~* &* +@all -@dangerous +info",
                ]
            )
            + "\n"
        )
        conf.chmod(0o600)
        probe = redis.Redis(port=self.port, password=DEFAULT_PASSWORD, socket_connect_timeout=0.5)
        self.proc = spawn_redis_server([str(conf)], self.port, probe, timeout)
        return self

    def stop(self) -> None:
        stop_redis_server(self.proc)
        self.proc = None

    def plain_url(self, user: str = "", password: str | None = None) -> str:
        return f"redis://{_auth(user, password)}127.0.0.1:{self.port}/0"

    def tls_url(self, user: str = "", password: str | None = None, ca: Path | None = None) -> str:
        auth = _auth(user, password)
        pki = self.pki
        return (
            f"rediss://{auth}127.0.0.1:{self.tls_port}/0?ssl_ca_certs={ca or pki.ca}"
            f"&ssl_certfile={pki.client_cert}&ssl_keyfile={pki.client_key}&ssl_cert_reqs=required"
        )


def _auth(user: str, password: str | None) -> str:
    """The ``user:password@`` part of a URL (``user@`` without a password, nothing without either)."""
    return f"{user}:{password}@" if password is not None else (f"{user}@" if user else "")
