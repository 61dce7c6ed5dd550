"""The test CA (``tests/support/tls.py``) the TLS tests rely on: a server certificate it issued passes a real
handshake against its CA, with and without a client certificate; an expired one, one from another CA and a
host not in its subjectAltName are refused, each for its own reason."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from tests.support.tls import Issued, TestCA


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA.create(tmp_path_factory.mktemp("ca"))


def handshake(server: Issued, trust: Path, host: str = "localhost", client: Issued | None = None,
              require_client: bool = False) -> str | None:
    """Handshake over a socket pair; the client's error text, or ``None`` when it succeeded."""
    srv_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv_ctx.load_cert_chain(server.cert, server.key)
    if require_client:
        srv_ctx.verify_mode = ssl.CERT_REQUIRED
        srv_ctx.load_verify_locations(server.ca)
    cli_ctx = ssl.create_default_context(cafile=str(trust))
    if client is not None:
        cli_ctx.load_cert_chain(client.cert, client.key)
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)

    def serve() -> None:
        try:
            with srv_ctx.wrap_socket(a, server_side=True) as s:
                s.recv(1)
        except (ssl.SSLError, OSError):  # the client refused us, or we refused it: the client reports why
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with cli_ctx.wrap_socket(b, server_hostname=host) as c:
            c.sendall(b"x")
            if require_client:
                c.recv(1)  # TLS 1.3: a refused client certificate shows on the first read
        return None
    except (ssl.SSLError, OSError) as exc:
        return str(exc)
    finally:
        t.join(10)


def test_issued_certificates_pass_a_real_handshake(ca: TestCA) -> None:
    server = ca.issue("server", hosts=["localhost", "127.0.0.1"])
    assert handshake(server, ca.cert_path) is None
    assert handshake(server, ca.cert_path, host="127.0.0.1") is None
    assert handshake(server, ca.cert_path, client=ca.issue("alice", client=True), require_client=True) is None
    assert "BEGIN CERTIFICATE" in server.cert_pem and "PRIVATE KEY" in server.key_pem


def test_expired_foreign_and_misnamed_certificates_are_refused(ca: TestCA, tmp_path: Path) -> None:
    assert "expired" in str(handshake(ca.issue("stale", expired=True), ca.cert_path))
    other = TestCA.create(tmp_path / "other", name="nobody's CA")
    assert "unable to get local issuer" in str(handshake(other.issue("server"), ca.cert_path))
    assert "mismatch" in str(handshake(ca.issue("named", hosts=["example.invalid"]), ca.cert_path))
    refused = handshake(ca.issue("server2"), ca.cert_path, client=other.issue("mallory", client=True),
                        require_client=True)
    # the server's alert ("unknown ca") or, when the server closed first, an EOF: refused either way
    assert refused is not None, "a client certificate of a foreign CA was accepted"


def test_a_pkcs12_keystore_holds_the_key_and_the_chain(ca: TestCA) -> None:
    from cryptography.hazmat.primitives.serialization import pkcs12

    issued = ca.issue("jvm", key_password="kp")
    key, cert, chain = pkcs12.load_key_and_certificates(issued.keystore("store-pw").read_bytes(), b"store-pw")
    assert key is not None and cert is not None and len(chain) == 1
