"""TLS and authentication for the SQL connectors' PostgreSQL connections: the ``connection.ssl*`` fields (libpq's
names, as the Airflow Postgres provider's connection extras and Debezium's ``database.ssl*``), and the failures no
retry fixes told apart from a database that is down.

Settings: libpq's ``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``, ``sslpassword`` are taken from the
``connection.url`` query (``?sslmode=verify-full&sslrootcert=/etc/ssl/pg-ca.pem``) and from the fields
``connection.sslmode`` ... ``connection.sslpassword``, the fields winning (as ``connection.user`` /
``connection.password`` win over the URL's). ``connection.sslpassword`` (the client key's password) is a
``PASSWORD`` field: it goes to the driver as a keyword, never into the URL, and is hidden in every message. An
empty field is unset (what an Airflow template renders for a missing extra). Nothing here is set by default:
libpq's own default (``sslmode=prefer``) applies.

Refusals (:func:`refusal`): a TLS verification failure (an untrusted or expired server certificate, a host name
the certificate does not name), a TLS file that cannot be read, an authentication failure (wrong password, no
password), a ``pg_hba.conf`` rule refusing the client (e.g. a client without TLS where only ``hostssl`` lines
exist), an unknown role or database. They fail at the first attempt with one message naming the server (host,
port, database, user), the cause and the setting to look at, never the password; Kafka Connect JDBC retries
every failed connect ``connection.attempts`` times, which here only delays the same error.

libpq reports every certificate verification failure as ``certificate verify failed``; :func:`certificate_problem`
says which (expired, not signed by a trusted CA, a host name mismatch, in the words of
:func:`connect_runtime.api.tls.tls_failure`, which the registry and object-store clients use too) by doing the TLS
handshake again with Python's ``ssl`` and the same trust settings (PostgreSQL's ``SSLRequest`` first,
bounded by ``connection.timeout.ms``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config import ConfigDef, Password, Type
from connect_runtime.api.errors import ConfigError
from connect_runtime.api.tls import tls_failure

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
"""libpq's ``sslmode`` values (https://www.postgresql.org/docs/current/libpq-ssl.html)."""

FILE_FIELDS = ("sslrootcert", "sslcert", "sslkey")
SECRET_QUERY = "sslpassword"


def _sslmode(name: str, value: Any) -> None:
    if value is None or str(value).strip() == "":
        return
    if str(value).strip().lower() not in SSL_MODES:
        raise ValueError(f"one of {', '.join(SSL_MODES)} (libpq's sslmode), got {value!r}")


def tls_fields(config: ConfigDef) -> ConfigDef:
    """The ``connection.ssl*`` fields (libpq's names; PostgreSQL only)."""
    return (
        config
        .define("connection.sslmode", Type.STRING, default=None, validator=_sslmode,
                doc="PostgreSQL: libpq's sslmode (disable, allow, prefer, require, verify-ca, verify-full); "
                    "verify-full checks the server's certificate against connection.sslrootcert and its host name. "
                    "Overrides the URL's ?sslmode=.")
        .define("connection.sslrootcert", Type.STRING, default=None,
                doc="PostgreSQL: the CA certificates (PEM file) that sign the server's certificate, or 'system' "
                    "for the system's trusted roots (libpq's sslrootcert; default ~/.postgresql/root.crt).")
        .define("connection.sslcert", Type.STRING, default=None,
                doc="PostgreSQL: the client certificate (PEM file) for servers that require one (libpq's sslcert).")
        .define("connection.sslkey", Type.STRING, default=None,
                doc="PostgreSQL: the client certificate's key (PEM file, mode 0600; libpq's sslkey).")
        .define("connection.sslpassword", Type.PASSWORD, default=None,
                doc="PostgreSQL: the password of an encrypted connection.sslkey (libpq's sslpassword; masked "
                    "everywhere).")
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value.value if isinstance(value, Password) else str(value)
    return text.strip() or None


def apply_tls(url: URL, cfg: Mapping[str, Any]) -> tuple[URL, dict[str, Any]]:
    """The URL with the ``connection.ssl*`` fields in its query (the fields win) and the driver keywords that
    stay out of it (``sslpassword``). A field set for a database that is not PostgreSQL is a config error."""
    given: dict[str, str] = {}
    for name in ("sslmode", *FILE_FIELDS, SECRET_QUERY):
        value = _text(cfg.get(f"connection.{name}"))
        if value is not None:
            given[name] = value
    if not given:
        return url, {}
    if url.get_backend_name() != "postgresql":
        raise ConfigError(errors={f"connection.{k}": f"unset: TLS settings are for PostgreSQL, and connection.url "
                                                      f"is a {url.get_backend_name()} URL" for k in given})
    keywords: dict[str, Any] = {}
    password = given.pop(SECRET_QUERY, None)
    if password is not None:
        keywords[SECRET_QUERY] = password
    if "sslmode" in given:
        given["sslmode"] = given["sslmode"].lower()
    return url.update_query_dict(given), keywords


def _query(url: URL, name: str) -> str | None:
    value = url.query.get(name)
    if isinstance(value, tuple):
        value = value[-1] if value else None
    return str(value) if value else None


_NAMES = {"postgresql": "PostgreSQL", "sqlite": "SQLite", "mysql": "MySQL"}


def server(url: URL) -> str:
    """``PostgreSQL server HOST:PORT, database 'DB', user 'USER'`` (what an error names)."""
    host = url.host or "the local socket"
    port = url.port or (5432 if url.get_backend_name() == "postgresql" else None)
    where = f"{host}:{port}" if port else host
    backend = url.get_backend_name()
    parts = [f"{_NAMES.get(backend, backend)} server {where}"]
    if url.database:
        parts.append(f"database {url.database!r}")
    if url.username:
        parts.append(f"user {url.username!r}")
    return ", ".join(parts)


_LIBPQ_PREFIX = re.compile(r'^(?:connection failed: )?(?:connection to server (?:at|on) "[^"]*"'
                           r'(?: \([^)]*\))?,? (?:port \d+ )?failed: )?', re.I)


def libpq_text(message: str) -> str:
    """The driver's message without libpq's ``connection to server at ... failed:`` preamble, on one line."""
    lines = [_LIBPQ_PREFIX.sub("", line.strip()) for line in message.strip().splitlines() if line.strip()]
    return re.sub(r"\s+", " ", " ".join(lines))


def _tls_settings(url: URL) -> str:
    shown = [f"{k}={_query(url, k)}" for k in ("sslmode", *FILE_FIELDS) if _query(url, k)]
    return ", ".join(shown) if shown else "no TLS settings: libpq's default sslmode=prefer"


def refusal(message: str, url: URL, timeout_s: float = 10.0) -> str | None:
    """Why the server refused a connection, when no retry can fix it (the cause and the setting to look at);
    ``None`` for anything else (a server down, restarting, busy: worth retrying)."""
    text = libpq_text(message)
    low = text.lower()
    if "password authentication failed" in low or ("scram" in low and "authentication" in low):
        return f"authentication failed ({text}): check connection.user and connection.password"
    if "no password supplied" in low:
        return f"the server asks for a password and none was given ({text}): set connection.password"
    if "no pg_hba.conf entry" in low:
        hint = ""
        if "no encryption" in low:
            hint = (": the server accepts this client over TLS only; set connection.sslmode (verify-full, with "
                    f"connection.sslrootcert) ({_tls_settings(url)})")
        return f"refused by the server's pg_hba.conf ({text}){hint}"
    if "requires a valid client certificate" in low:
        return (f"the server requires a client certificate of a CA it trusts ({text}): set connection.sslcert and "
                "connection.sslkey (and connection.sslpassword for an encrypted key)")
    if "certificate verify failed" in low:
        why = certificate_problem(url, timeout_s)
        detail = f"certificate verify failed: {why}" if why else "certificate verify failed"
        return (f"the server's TLS certificate was not accepted: {detail} ({_tls_settings(url)}): check "
                f"connection.sslrootcert (the CA that signed the server's certificate) and the server's certificate")
    if "does not match host name" in low:
        return (f"the server's TLS certificate does not name the host connected to ({text}): connect by a name in "
                f"the certificate, or use sslmode=verify-ca ({_tls_settings(url)})")
    if "server does not support ssl" in low:
        return f"the server does not offer TLS, and sslmode requires it ({text}) ({_tls_settings(url)})"
    if re.search(r"(certificate|key) file|private key", low):
        if "bad decrypt" in low:
            return f"the client key could not be decrypted ({text}): check connection.sslpassword"
        return f"a TLS file could not be used ({text}): check connection.sslrootcert / sslcert / sslkey"
    if ("ssl error" in low or "ssl syscall" in low) and "eof" not in low:  # EOF: the server went away
        return f"the TLS handshake failed ({text}) ({_tls_settings(url)})"
    if re.search(r'(role|database) "[^"]*" does not exist', low):
        return f"refused by the server ({text})"
    return None


def certificate_problem(url: URL, timeout_s: float) -> str | None:
    """Why the server's certificate fails verification with the URL's ``sslrootcert`` (and, for
    ``sslmode=verify-full``, its host name), in the words every TLS client of the runtime uses
    (:func:`connect_runtime.api.tls.tls_failure`: "the server's certificate has expired (certificate has expired)"),
    or ``None`` when that cannot be found out."""
    import os
    import socket
    import ssl
    import struct

    mode = (_query(url, "sslmode") or "prefer").lower()
    host, port = url.host, url.port or 5432
    if not host or host.startswith("/"):
        return None
    root = _query(url, "sslrootcert") or os.path.join(os.path.expanduser("~"), ".postgresql", "root.crt")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = mode == "verify-full"
    try:
        if root == "system":
            ctx.load_default_certs()
        else:
            ctx.load_verify_locations(cafile=root)
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(struct.pack("!ii", 8, 80877103))  # SSLRequest
            if sock.recv(1) != b"S":
                return None
            with ctx.wrap_socket(sock, server_hostname=host):
                return None
    except ssl.SSLCertVerificationError as exc:
        return tls_failure(exc)
    except (OSError, ValueError):  # the probe is a diagnosis only: without it, libpq's words stand
        return None


__all__ = ["SSL_MODES", "apply_tls", "certificate_problem", "libpq_text", "refusal", "server", "tls_fields"]
