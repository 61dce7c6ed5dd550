"""SqlSink ``auto.create`` / ``auto.evolve`` column types from records without a schema (the rule of the
package docstring), values round-tripping exactly through them, and bad input named by record and field."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from connect_runtime import ConnectError, run_sink, run_source
from connect_runtime.connectors.sql._coerce import sql_type
from tests.support.sql import cfg, execute, produce, query

VALUES: list[dict[str, Any]] = [
    {"id": 1, "amount": "12.50", "at": "2026-01-01T10:00:00+02:00", "d": "2026-01-02", "zip": "01234",
     "ver": "1.2.3", "e": "1e5", "n": 7, "f": 1.5, "b": True, "local": "2026-01-01T10:00:00", "mixed": 1,
     "doc": {"k": [1, 2]}, "big": "123456789012345678901234567890.000000001"},
    {"id": 2, "amount": "-0.5", "at": "2026-06-30T23:59:59.123456Z", "d": "2026-12-31", "zip": "98765",
     "ver": "2.0", "e": "2e5", "n": -(2**63), "f": "NaN", "b": False, "local": "2026-01-01T11:00:00",
     "mixed": "a", "doc": [1], "big": "0.0"},
    {"id": 3, "amount": None, "at": None, "d": None, "zip": None, "ver": None, "e": None, "n": None, "f": None,
     "b": None, "local": None, "mixed": None, "doc": None, "big": None},
]

PG_TYPES = {"id": "bigint", "amount": "numeric", "at": "timestamp with time zone", "d": "date", "zip": "text",
            "ver": "text", "e": "text", "n": "bigint", "f": "double precision", "b": "boolean", "local": "text",
            "mixed": "text", "doc": "jsonb", "big": "numeric"}


@pytest.mark.parametrize(("values", "pg", "sqlite"), [
    (["12.50", "-0.5", "0.0", None], "NUMERIC", "TEXT"),
    (["2026-01-01T10:00:00+00:00", "2026-01-01 10:00+05:30", "2026-01-01T10:00:00.5Z"],
     "TIMESTAMP WITH TIME ZONE", "TEXT"),
    (["2026-01-02", None], "DATE", "DATE"),
    ([1, 2**40], "BIGINT", "BIGINT"),
    ([2**63], "NUMERIC", "BIGINT"),
    ([1.5, 2, "Infinity"], "DOUBLE PRECISION", "DOUBLE"),
    ([True, False], "BOOLEAN", "BOOLEAN"),
    # anything else, or mixed: text
    (["01234"], "TEXT", "TEXT"), (["1.2.3"], "TEXT", "TEXT"), (["1e5"], "TEXT", "TEXT"),
    (["12"], "TEXT", "TEXT"), (["12."], "TEXT", "TEXT"), ([".5"], "TEXT", "TEXT"), (["+1.5"], "TEXT", "TEXT"),
    (["00.5"], "TEXT", "TEXT"), (["12.50", "x"], "TEXT", "TEXT"), (["2026-02-30"], "TEXT", "TEXT"),
    (["2026-01-01T10:00:00"], "TEXT", "TEXT"), (["2026-01-01T10:00:00.1234567+00:00"], "TEXT", "TEXT"),
    (["2026-01-02", "2026-01-02T00:00:00+00:00"], "TEXT", "TEXT"), ([1, "a"], "TEXT", "TEXT"),
    ([True, 1], "TEXT", "TEXT"), (["NaN"], "TEXT", "TEXT"), ([None], "TEXT", "TEXT"),
])
def test_the_type_rule(values: list[Any], pg: str, sqlite: str) -> None:
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.dialects import sqlite as sqlite_dialect

    assert sql_type(values, "postgresql", False).compile(dialect=postgresql.dialect()) == pg
    assert sql_type(values, "sqlite", False).compile(dialect=sqlite_dialect.dialect()) == sqlite


def test_other_dialects_get_a_numeric_scale_covering_the_values() -> None:
    from sqlalchemy.dialects import mysql

    typ = sql_type(["12.50", "-0.125", "1234567.0"], "mysql", False)
    assert typ.compile(dialect=mysql.dialect()) == "NUMERIC(38, 3)"


def _pg_types(url: str, table: str) -> dict[str, str]:
    return dict(query(url, "SELECT column_name, data_type FROM information_schema.columns "
                           f"WHERE table_name = '{table}'"))


@pytest.mark.parametrize("mode", ["insert", "upsert"])  # COPY, and INSERT ... ON CONFLICT
def test_auto_create_types_on_postgresql_and_exact_values(pg_database: str, sqlite_url: str, mode: str) -> None:
    produce(sqlite_url, "orders", [({"id": v["id"]}, v) for v in VALUES])
    run_sink(cfg(pg_database, **{"auto.create": "true", "insert.mode": mode, "pk.mode": "record_key"}), sqlite_url)
    assert _pg_types(pg_database, "orders") == PG_TYPES
    rows = query(pg_database, "SELECT amount::text, at, d, zip, ver, e, n, f, b, local, mixed, doc, big::text "
                              "FROM orders ORDER BY id")
    assert rows[0] == ("12.50", datetime(2026, 1, 1, 8, tzinfo=UTC), date(2026, 1, 2), "01234", "1.2.3", "1e5", 7,
                       1.5, True, "2026-01-01T10:00:00", "1", {"k": [1, 2]}, "123456789012345678901234567890.000000001")
    assert rows[1][:9] == ("-0.5", datetime(2026, 6, 30, 23, 59, 59, 123456, tzinfo=UTC), date(2026, 12, 31),
                           "98765", "2.0", "2e5", -(2**63), rows[1][7], False)
    assert rows[1][7] != rows[1][7] and rows[1][10:] == ("a", [1], "0.0")  # NaN; text; JSON; NUMERIC keeps "0.0"
    assert rows[2] == (None,) * 13


def test_auto_create_on_sqlite_keeps_every_value_exactly(tmp_path: Any, sqlite_url: str) -> None:
    db = f"sqlite:///{tmp_path / 'dst.db'}"
    produce(sqlite_url, "orders", [(None, v) for v in VALUES])
    run_sink(cfg(db, **{"auto.create": "true"}), sqlite_url)
    types = {name: typ for _, name, typ, *_ in query(db, "PRAGMA table_info(orders)")}
    assert types["amount"] == "TEXT" and types["at"] == "TEXT" and types["d"] == "DATE"
    assert types["n"] == "BIGINT" and types["f"] == "DOUBLE" and types["b"] == "BOOLEAN"
    row = query(db, "SELECT amount, at, d, zip, n, big, typeof(amount), typeof(d) FROM orders WHERE id = 1")[0]
    assert row == ("12.50", "2026-01-01T10:00:00+02:00", "2026-01-02", "01234", 7,
                   "123456789012345678901234567890.000000001", "text", "text")


def test_auto_evolve_adds_typed_columns(pg_database: str, sqlite_url: str) -> None:
    produce(sqlite_url, "orders", [(None, {"id": 1})])
    c = cfg(pg_database, **{"auto.create": "true", "auto.evolve": "true"})
    run_sink(c, sqlite_url)
    produce(sqlite_url, "orders", [(None, {"id": 2, "amount": "3.10", "at": "2026-01-01T00:00:00+00:00",
                                           "d": "2026-01-01", "zip": "01234"})])
    run_sink(c, sqlite_url)
    assert _pg_types(pg_database, "orders") == {"id": "bigint", "amount": "numeric",
                                                "at": "timestamp with time zone", "d": "date", "zip": "text"}
    assert query(pg_database, "SELECT amount::text, zip FROM orders WHERE id = 2") == [("3.10", "01234")]


def test_postgresql_round_trip_through_auto_created_columns(pg_database: str, sqlite_url: str) -> None:
    execute(
        pg_database,
        "CREATE TABLE src (id BIGINT PRIMARY KEY, amount NUMERIC(12, 2), rate NUMERIC, at TIMESTAMPTZ, d DATE, "
        "f DOUBLE PRECISION, flag BOOLEAN, note TEXT)",
        "INSERT INTO src VALUES (1, 12.50, 0.000125, '2026-01-02 03:04:05.123456+02', '2026-01-02', 0.1, true, "
        "'01234'), (2, -0.05, 7.0, '2026-03-29 01:30:00+00', '2024-02-29', -2.5, false, 'x'), "
        "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    run_source({"name": "rt", "connector.class": "connect_runtime.connectors.sql.SqlSource",
                "connection.url": pg_database, "table.include.list": "src", "topic.prefix": ""}, sqlite_url)
    run_sink(cfg(pg_database, name="dst", topics="src", **{"table.name.format": "dst", "auto.create": "true"}),
             sqlite_url)
    types = _pg_types(pg_database, "dst")
    assert types == {"id": "bigint", "amount": "numeric", "rate": "numeric", "at": "timestamp with time zone",
                     "d": "date", "f": "double precision", "flag": "boolean", "note": "text"}
    cols = "id, amount::text, rate::text, at, d, f, flag, note"
    assert query(pg_database, f"SELECT {cols} FROM dst ORDER BY id") == query(
        pg_database, f"SELECT {cols} FROM src ORDER BY id")


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_a_value_that_does_not_fit_an_auto_created_column_names_the_record_and_field(
    pg_database: str, sqlite_url: str, tolerance: str
) -> None:
    good = [(None, {"id": i, "amount": f"{i}.25", "at": "2026-01-01T00:00:00+00:00"}) for i in range(10)]
    produce(sqlite_url, "orders", good[:5])
    c = cfg(pg_database, **{"auto.create": "true", "errors.tolerance": tolerance})
    run_sink(c, sqlite_url)  # committed: 5 rows, a NUMERIC and a TIMESTAMPTZ column
    produce(sqlite_url, "orders", [good[5], (None, {"id": 6, "amount": "12,50", "at": "2026-01-01T00:00:00Z"}),
                                   (None, {"id": 7, "amount": "1.00", "at": "yesterday"}), *good[8:]])
    if tolerance == "none":
        with pytest.raises(ConnectError) as err:
            run_sink(c, sqlite_url)
        msg = str(err.value)
        assert "orders-0@6" in msg and "field 'amount'" in msg and "'12,50'" in msg
        assert query(pg_database, "SELECT count(*) FROM orders") == [(5,)]  # nothing committed is lost
        return
    r = run_sink(c, sqlite_url)
    assert r.records == 5 and r.skipped == 2
    assert query(pg_database, "SELECT count(*), sum(amount) FROM orders") == [
        (8, sum(Decimal(f"{i}.25") for i in (0, 1, 2, 3, 4, 5, 8, 9)))]


def test_database_refusals_name_the_field(pg_database: str, sqlite_url: str) -> None:
    execute(pg_database, "CREATE TABLE orders (id BIGINT NOT NULL, code VARCHAR(5), qty SMALLINT, d DATE)",
            "CREATE TABLE keyed (id BIGINT PRIMARY KEY, code VARCHAR(5), qty SMALLINT, d DATE)")
    cases = [({"id": 1, "code": "far-too-long", "qty": 1}, "code"),  # COPY: the column from its context
             ({"id": None, "code": "ok", "qty": 1}, "id"),
             ({"id": 1, "code": "ok", "qty": 40_000}, "qty"),
             ({"id": 1, "code": "ok", "d": {"not": "a date"}}, "d")]
    for mode in ("insert", "upsert"):
        for i, (value, field) in enumerate(cases):
            topic = f"t_{mode}_{i}"
            produce(sqlite_url, topic, [(None, {"id": 0, "code": "a"}), (None, value)])
            extra = {"insert.mode": mode, "pk.mode": "record_value", "pk.fields": "id"} if mode == "upsert" else {}
            with pytest.raises(ConnectError) as err:
                table = "keyed" if extra else "orders"
                run_sink(cfg(pg_database, name=topic, topics=topic, **{"table.name.format": table, **extra}),
                         sqlite_url)
            msg = str(err.value)
            assert f"{topic}-0@1" in msg and f"field {field!r}" in msg, (mode, value, msg)
    assert query(pg_database, "SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM keyed)") == [(0,)]


def test_timestamps_keep_their_instant_whatever_the_offset(pg_database: str, sqlite_url: str) -> None:
    base = datetime(2026, 3, 29, 0, 59, 59, 999999, tzinfo=UTC)
    forms = [base.astimezone(timezone(timedelta(hours=h, minutes=m))).isoformat()
             for h, m in ((0, 0), (5, 30), (-9, 0), (14, 0), (-3, -30))]
    produce(sqlite_url, "orders", [(None, {"id": i, "at": f}) for i, f in enumerate(forms)])
    run_sink(cfg(pg_database, **{"auto.create": "true"}), sqlite_url)
    assert query(pg_database, "SELECT DISTINCT at FROM orders") == [(base,)]
    assert len(set(forms)) == 5  # five texts, one instant
