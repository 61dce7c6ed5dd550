"""SqlSource and SqlSink against PostgreSQL 15 that takes TCP clients over TLS with ``scram-sha-256`` passwords only
(``tls_postgres``, tests/support/postgres.py): records move exactly once with ``sslmode=verify-full`` against the
test CA, given in the URL's query or in the ``connection.ssl*`` fields; a foreign CA, an expired server certificate,
a wrong password and a client without TLS each fail at the first connection attempt with one error naming the
server (host:port, database) and the cause, never the password, committing nothing."""

from __future__ import annotations

import logging
import traceback
from contextlib import nullcontext
from typing import Any

import pytest

from connect_runtime import ConnectError, run_sink, run_source
from connect_runtime.backends import open_backend
from tests.support.postgres import TlsCluster
from tests.support.source_connectors import read_topic
from tests.support.sql import produce

SOURCE = "connect_runtime.connectors.sql.SqlSource"
SINK = "connect_runtime.connectors.sql.SqlSink"
WRONG_PASSWORD = "not-the-pw-81c2e7"


def _sql(tls: TlsCluster, *statements: str) -> list[tuple[Any, ...]]:
    """Statements as the connectors' user (over the fixture's socket); the last one's rows."""
    rows: list[tuple[Any, ...]] = []
    with tls.admin() as conn:
        conn.execute(f"SET ROLE {tls.user}")
        for s in statements:
            cur = conn.execute(s)
            rows = [tuple(r) for r in cur.fetchall()] if cur.description else []
    return rows


def _source(tls: TlsCluster, name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "connector.class": SOURCE, "connection.url": url, "connection.password": tls.password,
            "table.include.list": "tls_orders", "mode": "incrementing", "incrementing.column.name": "id",
            "topic.prefix": f"{name}-", "poll.interval.ms": 100000, **extra}


def _sink(tls: TlsCluster, name: str, topic: str, table: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "connector.class": SINK, "connection.url": tls.url(), "connection.password": tls.password,
            "connection.sslmode": "verify-full", "connection.sslrootcert": str(tls.ca), "topics": topic,
            "table.name.format": table, "auto.create": "true", "pk.mode": "record_value", "pk.fields": "id",
            **extra}


@pytest.fixture(scope="module")
def orders(tls_postgres: TlsCluster) -> int:
    """``tls_orders``: 120 rows, owned by the connectors' user."""
    _sql(tls_postgres, "CREATE TABLE tls_orders (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)",
         "INSERT INTO tls_orders SELECT i, i * 7 FROM generate_series(1, 120) i")
    return 120


def test_records_move_once_over_verify_full_with_scram(tls_postgres: TlsCluster, orders: int,
                                                        sqlite_url: str) -> None:
    tls = tls_postgres
    with tls.admin("postgres") as conn:
        (stored,) = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", [tls.user]).fetchone()
    assert stored.startswith("SCRAM-SHA-256$"), "the user's password is not stored as SCRAM"
    mark = tls.log_size()

    # the source: TLS settings in the URL's query (libpq's names), the password in its PASSWORD field
    src = _source(tls, "tls-src", tls.url(sslmode="verify-full", sslrootcert=str(tls.ca)), **{"batch.max.rows": 25})
    assert run_source(src, sqlite_url).records == orders
    assert run_source(src, sqlite_url).records == 0  # a rerun reads on after the committed offset
    ids = sorted(v["id"] for v in read_topic(sqlite_url, "tls-src-tls_orders"))
    assert ids == list(range(1, orders + 1))

    # the sink: TLS settings in the connection.ssl* fields
    sink = _sink(tls, "tls-sink", "tls-src-tls_orders", "tls_copy", **{"insert.mode": "upsert", "batch.size": 16})
    assert run_sink(sink, sqlite_url).records == orders
    assert run_sink(sink, sqlite_url).records == 0  # the offsets in the destination: nothing written twice
    assert _sql(tls, "SELECT count(*), count(DISTINCT id), sum(amount) FROM tls_copy") == [
        (orders, orders, sum(i * 7 for i in range(1, orders + 1)))]
    assert _sql(tls, "SELECT topic, next_offset FROM pyconnect_sink_offsets WHERE connector = 'tls-sink'") == [
        ("tls-src-tls_orders", orders)]

    # the server says every one of them came over TLS and none without (pg_hba.conf has no other TCP line)
    log = tls.log_since(mark)
    authorized = [line for line in log.splitlines() if f"connection authorized: user={tls.user}" in line]
    assert authorized and all("SSL enabled" in line for line in authorized), log[-3000:]
    assert "password authentication failed" not in log and "no pg_hba.conf entry" not in log, log[-3000:]


CASES = {
    "foreign CA": ({"sslmode": "verify-full", "sslrootcert": "FOREIGN"}, None,
                   ["the server's TLS certificate was not accepted: certificate verify failed",
                    "connection.sslrootcert"]),
    "expired certificate": ({"sslmode": "verify-full", "sslrootcert": "CA"}, None,
                            ["certificate verify failed: the server's certificate has expired (certificate has expired)"]),
    "wrong password": ({"sslmode": "verify-full", "sslrootcert": "CA"}, WRONG_PASSWORD,
                       ['authentication failed (FATAL: password authentication failed for user "app_tls")',
                        "connection.password"]),
    "no TLS": ({"sslmode": "disable"}, None,
               ["refused by the server's pg_hba.conf", "no encryption", "accepts this client over TLS only"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_connection_fails_at_once_naming_server_and_cause(
        tls_postgres: TlsCluster, orders: int, sqlite_url: str, case: str, caplog: pytest.LogCaptureFixture) -> None:
    tls = tls_postgres
    settings, password, causes = CASES[case]
    ssl = {f"connection.{k}": {"CA": str(tls.ca), "FOREIGN": str(tls.foreign_ca)}.get(v, v)
           for k, v in settings.items()}
    if case == "foreign CA":
        causes = [*causes, "certificate verify failed: the server's certificate is not signed by a CA this client "
                           "trusts"]
    password = password or tls.password
    name = "refused-" + case.replace(" ", "-").lower()
    produce(sqlite_url, "refused-in", [(None, {"id": i, "amount": i}) for i in range(10)])
    src = {**_source(tls, name, tls.url(), **ssl), "connection.password": password}
    sink = {**_sink(tls, name, "refused-in", "refused_out"), **ssl, "connection.password": password}
    # were a refusal retried, the connectors would try 3 times 10 s apart (connection.attempts, .backoff.ms)
    mark = tls.log_size()
    caplog.set_level(logging.INFO)
    errors: list[ConnectError] = []
    with tls.serving(tls.expired) if case == "expired certificate" else nullcontext():
        for run, config in ((run_source, src), (run_sink, sink)):
            with pytest.raises(ConnectError) as failed:
                run(config, sqlite_url)
            errors.append(failed.value)
    for err in errors:
        text = str(err)
        assert f"PostgreSQL server 127.0.0.1:{tls.port}, database 'shop_tls', user 'app_tls'" in text, text
        for cause in causes:
            assert cause in text, text
        assert "not retried" in text, text
        shown = "".join(traceback.format_exception(err))
        assert password not in shown and tls.password not in shown, "a password reached the error"
    assert password not in caplog.text and tls.password not in caplog.text, "a password reached the log"
    assert "attempt 1 of" not in caplog.text, "a refusal was retried"
    if case == "wrong password":  # the server saw one attempt per connector, not connection.attempts
        assert tls.log_since(mark).count("password authentication failed for user") == 2

    # nothing committed: no source records or offsets, no sink rows or offsets
    with open_backend(sqlite_url) as backend:
        assert f"{name}-tls_orders" not in backend.list_topics()
    assert _sql(tls, "SELECT to_regclass('refused_out') IS NULL") == [(True,)]
    if _sql(tls, "SELECT to_regclass('pyconnect_sink_offsets') IS NOT NULL") == [(True,)]:
        assert _sql(tls, f"SELECT count(*) FROM pyconnect_sink_offsets WHERE connector = '{name}'") == [(0,)]


def test_mutual_tls_with_an_encrypted_client_key(tls_postgres: TlsCluster, sqlite_url: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """``app_mtls`` must show a client certificate (``clientcert=verify-full``): without it, or with the wrong key
    password, the run fails at once naming the cause; with ``connection.sslcert`` / ``sslkey`` / ``sslpassword``
    the records land, and the key password appears nowhere."""
    tls = tls_postgres
    caplog.set_level(logging.INFO)
    produce(sqlite_url, "mtls-in", [(None, {"id": i, "amount": i}) for i in range(30)])
    base = {**_sink(tls, "mtls-sink", "mtls-in", "mtls_out"), "connection.user": tls.mtls_user,
            "connection.password": tls.mtls_password}
    client = {"connection.sslcert": str(tls.client.cert), "connection.sslkey": str(tls.client.key)}
    wrong = "wrong-key-pw-19fa"

    with pytest.raises(ConnectError) as no_cert:
        run_sink(base, sqlite_url)
    assert "the server requires a client certificate" in str(no_cert.value), no_cert.value
    with pytest.raises(ConnectError) as bad_key:
        run_sink({**base, **client, "connection.sslpassword": wrong}, sqlite_url)
    assert "the client key could not be decrypted" in str(bad_key.value), bad_key.value
    assert "check connection.sslpassword" in str(bad_key.value), bad_key.value
    for err in (no_cert.value, bad_key.value):
        shown = "".join(traceback.format_exception(err))
        assert f"127.0.0.1:{tls.port}" in shown and "not retried" in shown, shown
        assert wrong not in shown and tls.mtls_password not in shown and tls.client_key_password not in shown
    assert _sql(tls, "SELECT to_regclass('mtls_out') IS NULL") == [(True,)]

    mark = tls.log_size()
    good = {**base, **client, "connection.sslpassword": tls.client_key_password}
    assert run_sink(good, sqlite_url).records == 30
    with tls.admin() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT id) FROM mtls_out").fetchone() == (30, 30)
    authorized = [line for line in tls.log_since(mark).splitlines()
                  if f"connection authorized: user={tls.mtls_user}" in line]
    assert authorized and all("SSL enabled" in line for line in authorized)
    for secret in (wrong, tls.client_key_password, tls.mtls_password):
        assert secret not in caplog.text, "a password reached the log"
