"""What a failed TLS handshake means, in words a user can act on: for connectors and converters that talk HTTPS
(a Schema Registry, an object store) and want one clear error instead of a client library's chain.

:func:`tls_failure` looks through an exception and everything it was raised from or during (``__cause__``,
``__context__``: httpx, aiohttp and botocore each wrap the :mod:`ssl` error in their own) and says which side
refused which certificate:

- the server's certificate is not signed by a CA the client trusts (a foreign or self-signed CA: point the client
  at the right CA file), has expired (or is not valid yet), or does not name the host the client connected to;
- the server refused the client's certificate, or wanted one and got none (mutual TLS).

A failure it names never goes away by retrying, so a caller should not retry it (and the HTTP clients
underneath do, for every transport error, with backoff: seconds on end before the error surfaces).
"""

from __future__ import annotations

import ssl

__all__ = ["tls_failure"]

# OpenSSL's X509_V_ERR_* codes (ssl.SSLCertVerificationError.verify_code)
_EXPIRED, _NOT_YET_VALID = 10, 9
_UNTRUSTED = {2, 18, 19, 20, 21, 27}  # no issuer certificate, self-signed (leaf or in the chain), not trusted
_HOSTNAME_MISMATCH = 62


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        seen.append(e)
        todo += [e.__cause__, e.__context__, getattr(e, "certificate_error", None)]
    return seen


def _server_certificate(code: int | None, detail: str) -> str:
    if code == _EXPIRED:
        return f"the server's certificate has expired ({detail})"
    if code == _NOT_YET_VALID:
        return f"the server's certificate is not valid yet ({detail})"
    if code in _UNTRUSTED:
        return f"the server's certificate is not signed by a CA this client trusts ({detail})"
    if code == _HOSTNAME_MISMATCH:
        return f"the server's certificate does not name the host connected to ({detail})"
    return f"the server's certificate was refused ({detail})"


def tls_failure(exc: BaseException) -> str | None:
    """What the TLS failure in ``exc`` (or in what it was raised from) means, or ``None`` when there is none.

    The text starts with what happened ("the server's certificate has expired") and ends with OpenSSL's own words
    in parentheses; it holds nothing secret (certificate checks carry no credentials)."""
    refused = [e for e in _chain(exc) if isinstance(e, ssl.SSLCertVerificationError)]
    if refused:
        # aiohttp's ClientConnectorCertificateError is one too, without OpenSSL's code: the one it wraps has it
        best = min(refused, key=lambda r: getattr(r, "verify_code", None) is None)
        return _server_certificate(getattr(best, "verify_code", None),
                                   getattr(best, "verify_message", None) or str(best))
    for e in _chain(exc):
        reason = str(getattr(e, "reason", "") or "") if isinstance(e, ssl.SSLError) else ""
        if "ALERT" in reason and ("CERTIFICATE" in reason or "UNKNOWN_CA" in reason or "ACCESS_DENIED" in reason):
            if "REQUIRED" in reason:
                return f"the server requires a client certificate and got none (TLS alert {reason})"
            return f"the server refused this client's certificate (TLS alert {reason})"
    return None
