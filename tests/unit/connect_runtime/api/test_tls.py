"""``tls_failure`` (connect_runtime/api/tls.py) names each refused certificate from a real handshake's error, also
when a client library wrapped it (as httpx, aiohttp and botocore do), and says nothing for other failures."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from connect_runtime.api.tls import tls_failure
from tests.support.tls import Issued, TestCA


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA.create(tmp_path_factory.mktemp("ca"))


def refused(server: Issued, trust: str, *, host: str = "localhost", client: Issued | None = None,
            mtls: bool = False) -> BaseException:
    """The client's exception from a real handshake over a socket pair (the test fails if there is none)."""
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(server.cert, server.key)
    if mtls:
        server_side.verify_mode = ssl.CERT_REQUIRED
        server_side.load_verify_locations(server.ca)
    client_side = ssl.create_default_context(cafile=trust)
    if client is not None:
        client_side.load_cert_chain(client.cert, client.key)
    ours, theirs = socket.socketpair()
    for s in (ours, theirs):
        s.settimeout(10)

    def serve() -> None:
        try:
            with server_side.wrap_socket(theirs, server_side=True) as tls:
                tls.recv(1)
        except OSError:  # the handshake failed on this side too; the client's error is what is checked
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with client_side.wrap_socket(ours, server_hostname=host) as tls:
            tls.recv(1)  # TLS 1.3: a refused client certificate shows on the first read
    except OSError as exc:
        return exc
    finally:
        thread.join(10)
    raise AssertionError("the handshake succeeded")


def wrapped(exc: BaseException) -> Exception:
    """``exc`` two levels down, as a client library raises it (``raise Mine(...) from exc`` inside ``except``)."""
    try:
        try:
            raise exc
        except OSError as inner:
            raise ConnectionError("transport failed") from inner
    except ConnectionError as outer:
        try:
            raise RuntimeError("SSL validation failed for https://host/") from None
        except RuntimeError as top:
            top.__context__ = outer
            return top


def test_each_refused_certificate_is_named(ca: TestCA, tmp_path_factory: pytest.TempPathFactory) -> None:
    trust = str(ca.cert_path)
    foreign = TestCA.create(tmp_path_factory.mktemp("foreign"), name="a CA nobody trusts")
    cases = {
        "not signed by a CA this client trusts": refused(foreign.issue("s"), trust),
        "the server's certificate has expired": refused(ca.issue("old", expired=True), trust),
        "does not name the host": refused(ca.issue("named", hosts=["example.invalid"]), trust),
        "requires a client certificate and got none": refused(ca.issue("m"), trust, mtls=True),
        "refused this client's certificate": refused(ca.issue("m2"), trust, mtls=True,
                                                     client=foreign.issue("mallory", client=True)),
    }
    for words, exc in cases.items():
        for shown in (exc, wrapped(exc)):
            text = tls_failure(shown)
            assert text is not None and words in text, (words, text, exc)


def test_other_failures_are_none() -> None:
    assert tls_failure(ConnectionRefusedError(111, "Connection refused")) is None
    assert tls_failure(wrapped(TimeoutError("timed out"))) is None
    assert tls_failure(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")) is None
