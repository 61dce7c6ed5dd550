"""The SQL connectors' TLS settings (``connection.ssl*`` fields over the URL's query, the key password kept out of
URLs and messages) and which driver failures are refusals no retry fixes (the live handshakes are in
tests/integration/connect_runtime/connectors/test_sql_tls.py)."""

from __future__ import annotations

from typing import Any

import pytest

from connect_runtime.api.errors import ConfigError
from connect_runtime.connectors.sql import SqlSink
from connect_runtime.connectors.sql._common import build_url, create_engine, safe_url, scrub
from connect_runtime.connectors.sql._errors import transient
from connect_runtime.connectors.sql._tls import libpq_text, refusal


def _cfg(url: str, **fields: Any) -> dict[str, Any]:
    return SqlSink().config_def().parse({"connection.url": url, "topics": "t", **fields})


def test_fields_win_over_the_url_query_and_empty_fields_are_unset() -> None:
    cfg = _cfg("postgresql://db:5432/shop?sslmode=require&sslrootcert=/old/ca.pem&application_name=x",
               **{"connection.sslmode": "VERIFY-FULL", "connection.sslrootcert": "/etc/ssl/pg-ca.pem",
                  "connection.sslcert": "", "connection.sslkey": ""})
    url = build_url(cfg)
    assert dict(url.query) == {"sslmode": "verify-full", "sslrootcert": "/etc/ssl/pg-ca.pem", "application_name": "x"}
    assert url.drivername == "postgresql+psycopg"


def test_the_key_password_goes_to_the_driver_never_into_the_url() -> None:
    cfg = _cfg("postgresql://app:pw-in-url@db/shop", **{"connection.sslkey": "/k.pem",
                                                         "connection.sslpassword": "key-pw-3f1"})
    engine = create_engine(cfg)
    try:
        assert "key-pw-3f1" not in engine.url.render_as_string(hide_password=False)
        assert engine.dialect.create_connect_args(engine.url)[1].get("sslkey") == "/k.pem"
    finally:
        engine.dispose()
    # given in the URL's query anyway: hidden in what messages show
    url = build_url(_cfg("postgresql://app:pw-in-url@db/shop?sslpassword=key-pw-3f1"))
    assert "key-pw-3f1" not in safe_url(url) and "pw-in-url" not in safe_url(url)
    assert scrub("bad key-pw-3f1 and pw-in-url", url) == "bad *** and ***"


def test_tls_fields_on_sqlite_and_a_bad_sslmode_are_config_errors_naming_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        build_url(_cfg("sqlite:///x.db", **{"connection.sslmode": "verify-full"}))
    assert "connection.sslmode" in str(err.value) and "PostgreSQL" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _cfg("postgresql://db/shop", **{"connection.sslmode": "verify_full"})
    assert "connection.sslmode" in str(err.value) and "verify-full" in str(err.value)


PREFIX = 'connection failed: connection to server at "127.0.0.1", port 5432 failed: '


@pytest.mark.parametrize(("message", "expected"), [
    ('FATAL:  password authentication failed for user "app"', "authentication failed"),
    ("fe_sendauth: no password supplied", "none was given"),
    ('FATAL:  no pg_hba.conf entry for host "127.0.0.1", user "app", database "shop", no encryption',
     "over TLS only"),
    ('root certificate file "/x.pem" does not exist\nEither provide the file, use the system\'s trusted roots',
     "a TLS file could not be used"),
    ('server certificate for "db.example" does not match host name "127.0.0.1"', "does not name the host"),
    ("server does not support SSL, but SSL was required", "does not offer TLS"),
    ('FATAL:  database "nope" does not exist', "refused by the server"),
    ("FATAL:  connection requires a valid client certificate", "requires a client certificate"),
    ('could not load private key file "/k.pem": bad decrypt', "check connection.sslpassword"),
])
def test_refusals_are_named_and_never_transient(message: str, expected: str) -> None:
    from sqlalchemy.engine import make_url

    why = refusal(PREFIX + message, make_url("postgresql://app@127.0.0.1/shop"), 1)
    assert why is not None and expected in why, why
    assert "connection to server at" not in why  # libpq's preamble gone: the error names the server itself
    import psycopg

    assert not transient(psycopg.OperationalError(PREFIX + message))


@pytest.mark.parametrize("message", [
    "connection refused\n\tIs the server running on that host and accepting TCP/IP connections?",
    "FATAL:  terminating connection due to administrator command",
    "FATAL:  the database system is starting up",
    "SSL SYSCALL error: EOF detected",
    "server closed the connection unexpectedly",
])
def test_a_server_down_or_restarting_stays_transient(message: str) -> None:
    from sqlalchemy.engine import make_url

    assert refusal(PREFIX + message, make_url("postgresql://app@127.0.0.1/shop"), 1) is None
    import psycopg

    assert transient(psycopg.OperationalError(PREFIX + message))


def test_libpq_text_drops_the_preamble_and_joins_lines() -> None:
    assert libpq_text(PREFIX + 'FATAL:  password authentication failed for user "app"') == (
        'FATAL: password authentication failed for user "app"')


def test_a_key_password_in_the_url_query_is_a_secret_of_the_config() -> None:
    from connect_runtime.secrets import mask_config, secret_values

    config = {"name": "s", "connector.class": "connect_runtime.connectors.sql.SqlSink", "topics": "t",
              "connection.url": "postgresql://app@db/shop?sslmode=verify-full&sslpassword=key-pw-77a"}
    assert "key-pw-77a" in secret_values(config)
    assert "key-pw-77a" not in str(mask_config(config))
