"""A TLS-terminating reverse proxy on loopback for the HTTPS tests of issue 34: what a Schema Registry (or any HTTP
server) looks like behind a load balancer that speaks TLS and checks HTTP basic auth.

    with TlsProxy(upstream="http://127.0.0.1:8080", cert=server, users={"svc": "pw"}) as proxy:
        proxy.url           # https://127.0.0.1:PORT (the upstream's paths below it)

- TLS with the certificate and key of ``cert`` (an :class:`~tests.support.tls.Issued` of ``tests/support/tls.py``;
  an expired one makes an expired server); with ``client_ca`` set, a client certificate signed by that CA is
  required (mutual TLS: the handshake fails without one).
- With ``users``, every request must carry ``Authorization: Basic`` of one of them; otherwise it is answered
  ``401`` with ``WWW-Authenticate: Basic`` and Confluent Schema Registry's error body
  (``{"error_code": 401, "message": "Unauthorized"}``), and never reaches the upstream.
- A request that passes is forwarded as it came (method, path, query, body, headers but ``Authorization`` and the
  hop-by-hop ones) to ``upstream`` over plain HTTP, and the answer sent back (status, body, content type).
- ``requests`` counts what reached it (``answered`` by the upstream, ``refused`` with 401); ``handshake_failures``
  counts TLS handshakes that failed (a client that does not trust the certificate, or brought none under mTLS).

It is a ``ThreadingHTTPServer`` in a daemon thread of the test process (no subprocess), stopped on exit: cheap
enough to start one per certificate a test needs.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.support.ports import free_port
from tests.support.tls import Issued

__all__ = ["TlsProxy"]

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "authorization", "host", "content-length"}
UPSTREAM_TIMEOUT_S = 30.0
HANDSHAKE_TIMEOUT_S = 10.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: TlsProxy
    context: ssl.SSLContext

    def finish_request(self, request: Any, client_address: Any) -> None:
        """The TLS handshake in the request's own thread (a client that stalls or fails blocks nobody), then the
        request; a failed handshake is counted, not printed (the tests assert the client's error)."""
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            self.proxy.handshake_failures += 1
            return
        try:
            tls.settimeout(UPSTREAM_TIMEOUT_S)
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone mid-request: not printed."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the proxy's requests are counted, not logged."""

    def _forward(self) -> None:
        proxy = self.server.proxy
        if proxy.users and self.headers.get("Authorization") not in proxy.expected_auth:
            proxy.refused += 1
            body = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="pyconnect-test"')
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        up = urlsplit(proxy.upstream)
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port or 80, timeout=UPSTREAM_TIMEOUT_S)
        try:
            conn.request(self.command, self.path, body=data, headers=headers)
            answer = conn.getresponse()
            payload = answer.read()
            proxy.answered += 1
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        finally:
            conn.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward


class TlsProxy:
    """See the module docstring. A context manager: started on enter, stopped on exit."""

    def __init__(self, upstream: str, cert: Issued, *, users: dict[str, str] | None = None,
                 client_ca: str | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.cert = cert
        self.users = dict(users or {})
        self.expected_auth = {"Basic " + base64.b64encode(f"{u}:{p}".encode()).decode()
                              for u, p in self.users.items()}
        self.client_ca = client_ca
        self.answered = self.refused = self.handshake_failures = 0
        self.port = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> TlsProxy:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.cert.cert), str(self.cert.key), self.cert.key_password)
        if self.client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.client_ca)
        for _attempt in range(3):  # a free port may be taken between probing and binding
            self.port = free_port()
            try:
                server = _Server(("127.0.0.1", self.port), _Handler)
                break
            except OSError:
                continue
        else:
            raise RuntimeError("the TLS proxy found no port to bind on 127.0.0.1 in 3 tries")
        server.proxy, server.context = self, context
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"tls-proxy-{self.port}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(10)
