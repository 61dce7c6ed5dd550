"""SqlSink with typed records (a Connect value schema, Struct values with decimals, dates, times, timestamps):
``auto.create`` / ``auto.evolve`` take each column's type, nullability and default from the schema (Kafka Connect
JDBC's PostgreSQL mapping, TIMESTAMPTZ for timestamps, NUMERIC(precision, scale) for decimals), and the values
round-trip exactly through COPY (insert) and executemany (upsert) on a real PostgreSQL, and on SQLite. Records
become typed in the run by the ``ToStruct`` test transform (tests/support/typed.py)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from typing import Any

import pytest

from connect_runtime import ConnectError, run_sink
from connect_runtime.api import SinkRecord, TopicPartition
from connect_runtime.api.data import Schema, SchemaBuilder, Struct
from connect_runtime.connectors.sql._typed import column_type
from tests.support.sql import cfg, execute, open_task, produce, query
from tests.support.typed import ORDER, order, order_json, struct_of

N = 9

COLUMNS = {  # information_schema: data_type, numeric precision, numeric scale, is_nullable, default
    "id": ("bigint", 64, 0, "NO", None), "qty": ("integer", 32, 0, "NO", None),
    "small": ("smallint", 16, 0, "YES", None), "tiny": ("smallint", 16, 0, "YES", None),
    "price": ("real", 24, None, "YES", None), "ratio": ("double precision", 53, None, "YES", None),
    "ok": ("boolean", None, None, "NO", None), "name": ("text", None, None, "NO", None),
    "raw": ("bytea", None, None, "YES", None), "amount": ("numeric", 10, 2, "NO", None),
    "total": ("numeric", 38, 3, "YES", None), "day": ("date", None, None, "NO", None),
    "at": ("time without time zone", None, None, "YES", None),
    "ts": ("timestamp with time zone", None, None, "NO", None), "status": ("text", None, None, "YES", "'new'::text"),
    "tags": ("jsonb", None, None, "YES", None), "attrs": ("jsonb", None, None, "YES", None),
    "addr": ("jsonb", None, None, "YES", None),
}


def _typed(url: str, schema: str = "order", **extra: Any) -> dict[str, Any]:
    return cfg(url, **{"auto.create": "true", "transforms": "typed", "transforms.typed.type":
                       "tests.support.typed.ToStruct", "transforms.typed.schema": schema, **extra})


def _columns(url: str, table: str = "orders") -> dict[str, tuple[Any, ...]]:
    return {r[0]: tuple(r[1:]) for r in query(
        url, "SELECT column_name, data_type, numeric_precision, numeric_scale, is_nullable, column_default "
             f"FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position")}


def _expected_row(i: int) -> tuple[Any, ...]:
    s = order(i)
    plain = order_json(i)
    return (s["id"], s["qty"], s["small"], s["tiny"], s["price"], s["ratio"], s["ok"], s["name"], s["raw"],
            s["amount"], s["total"], s["day"], s["at"], s["ts"], s["status"], plain["tags"], plain["attrs"],
            plain["addr"])


def _rows(url: str) -> list[tuple[Any, ...]]:
    out = []
    for r in query(url, f"SELECT {', '.join(COLUMNS)} FROM orders ORDER BY id"):
        r = list(r)
        r[8] = None if r[8] is None else bytes(r[8])
        out.append(tuple(r))
    return out


@pytest.mark.parametrize("mode", ["insert", "upsert"])  # COPY, and INSERT ... ON CONFLICT (executemany)
def test_auto_create_from_the_value_schema(pg_database: str, sqlite_url: str, mode: str) -> None:
    produce(sqlite_url, "orders", [({"id": i}, order_json(i)) for i in range(N)])
    extra = {"insert.mode": mode, "pk.mode": "record_value", "pk.fields": "id"} if mode == "upsert" else {}
    result = run_sink(_typed(pg_database, **extra), sqlite_url)
    assert result.records == N
    assert _columns(pg_database) == COLUMNS
    got = _rows(pg_database)
    assert got == [_expected_row(i) for i in range(N)]
    assert got[0][9] == decimal.Decimal("0.00") and str(got[0][10]) == "-0.125"  # digits and scale kept
    assert got[1][13] == dt.datetime(2026, 1, 1, 0, 1, 1, 1000, tzinfo=dt.UTC)  # the instant, to the ms
    assert got[1][14] == "new" and got[0][14] == "paid"  # a field left null reads as its default
    assert query(pg_database, "SELECT amount::text, total::text FROM orders WHERE id = 1") == [("1234567.01",
                                                                                                 "-1.125")]
    assert run_sink(_typed(pg_database, **extra), sqlite_url).records == 0  # exactly once: nothing again
    assert query(pg_database, "SELECT count(*) FROM orders") == [(N,)]


def test_a_schemaless_run_into_the_typed_table_keeps_its_inference(pg_database: str, sqlite_url: str) -> None:
    produce(sqlite_url, "orders", [(None, {"id": 1, "amount": "2.50", "ts": "2026-01-01T00:00:00+00:00"})])
    run_sink(cfg(pg_database, **{"auto.create": "true"}), sqlite_url)
    assert {k: v[0] for k, v in _columns(pg_database).items()} == {
        "id": "bigint", "amount": "numeric", "ts": "timestamp with time zone"}


def test_auto_evolve_adds_a_new_optional_field_as_a_nullable_column(pg_database: str, sqlite_url: str) -> None:
    produce(sqlite_url, "orders", [(None, order_json(i)) for i in range(3)])
    run_sink(_typed(pg_database), sqlite_url)
    produce(sqlite_url, "orders", [(None, {**order_json(i), "coupon": f"c{i}"}) for i in range(3, 6)])
    run_sink(_typed(pg_database, "order_v2", **{"auto.evolve": "true"}), sqlite_url)
    assert _columns(pg_database)["coupon"] == ("text", None, None, "YES", None)
    assert query(pg_database, "SELECT id, coupon FROM orders ORDER BY id") == [
        (0, None), (1, None), (2, None), (3, "c3"), (4, "c4"), (5, "c5")]


def test_auto_evolve_refuses_a_new_required_field_without_a_default(pg_database: str, sqlite_url: str) -> None:
    produce(sqlite_url, "orders", [(None, order_json(i)) for i in range(3)])
    run_sink(_typed(pg_database), sqlite_url)
    produce(sqlite_url, "orders", [(None, {**order_json(i), "must": i}) for i in range(3, 5)])
    with pytest.raises(ConnectError) as err:
        run_sink(_typed(pg_database, "order_v3", **{"auto.evolve": "true"}), sqlite_url)
    msg = str(err.value)
    assert "column 'must'" in msg and "table 'orders'" in msg and "orders-0@3" in msg
    assert "required and has no default" in msg and "shop.Order version 3" in msg
    assert "must" not in _columns(pg_database)
    assert query(pg_database, "SELECT count(*) FROM orders") == [(3,)]  # what was committed stays
    rows = query(pg_database, "SELECT next_offset FROM pyconnect_sink_offsets WHERE topic = 'orders'")
    assert rows == [(3,)]


def test_a_required_field_with_a_default_is_added_with_its_default(pg_database: str, sqlite_url: str) -> None:
    execute(pg_database, "CREATE TABLE orders (id BIGINT, qty INT, small INT, tiny INT, price REAL, ratio FLOAT, "
                         "ok BOOLEAN, name TEXT, raw BYTEA, amount NUMERIC, total NUMERIC, day DATE, at TIME, "
                         "ts TIMESTAMPTZ, tags JSONB, attrs JSONB, addr JSONB)",
            "INSERT INTO orders (id, name) VALUES (-1, 'old')")
    produce(sqlite_url, "orders", [(None, order_json(i)) for i in range(2)])
    run_sink(_typed(pg_database, **{"auto.evolve": "true"}), sqlite_url)
    assert _columns(pg_database)["status"] == ("text", None, None, "YES", "'new'::text")
    assert query(pg_database, "SELECT id, status, amount::text FROM orders ORDER BY id") == [
        (-1, "new", None), (0, "paid", "0.00"), (1, "new", "1234567.01")]


def test_typed_values_into_existing_columns_of_other_types(pg_database: str, sqlite_url: str) -> None:
    """A typed value into a column the user made: text columns take the plain JSON forms."""
    execute(pg_database, "CREATE TABLE orders (id BIGINT, amount TEXT, ts TEXT, day TEXT, addr TEXT, raw BYTEA, "
                         "qty BIGINT, ok BOOLEAN, name TEXT, total NUMERIC, at TIME, status TEXT, small INT, "
                         "tiny INT, price FLOAT, ratio FLOAT, tags JSON, attrs JSONB)")
    produce(sqlite_url, "orders", [(None, order_json(i)) for i in range(2)])
    run_sink(_typed(pg_database), sqlite_url)
    assert query(pg_database, "SELECT amount, ts, day, addr FROM orders ORDER BY id") == [
        ("0.00", "2026-01-01T00:00:00+00:00", "2026-01-01", '{"city": "Oslo", "zip": null}'),
        ("1234567.01", "2026-01-01T00:01:01.001000+00:00", "2026-01-02", '{"city": "Oslo", "zip": null}')]


def test_typed_records_into_sqlite(tmp_path: Any, sqlite_url: str) -> None:
    db = f"sqlite:///{tmp_path / 'dst.db'}"
    produce(sqlite_url, "orders", [(None, order_json(i)) for i in range(N)])
    run_sink(_typed(db), sqlite_url)
    types = {name: typ for _, name, typ, *_ in query(db, "PRAGMA table_info(orders)")}
    assert types["amount"] == "TEXT" and types["ts"] == "TEXT" and types["day"] == "DATE"
    assert types["qty"] == "INTEGER" and types["small"] == "SMALLINT" and types["price"] == "REAL"
    assert query(db, "SELECT amount, total, ts, day, at, raw, addr FROM orders WHERE id = 1") == [
        ("1234567.01", "-1.125", "2026-01-01T00:01:01.001000+00:00", "2026-01-02", "01:04:05.123000",
         bytes([0, 255, 1]), '{"city": "Oslo", "zip": null}')]
    assert base64.b64encode(bytes([0, 255, 1])).decode() == order_json(1)["raw"]


@pytest.mark.parametrize(("field", "pg"), [
    (ORDER.field("amount"), "NUMERIC(10, 2)"), (ORDER.field("total"), "NUMERIC(38, 3)"),
    (ORDER.field("ts"), "TIMESTAMP WITH TIME ZONE"), (ORDER.field("tiny"), "SMALLINT"),
    (ORDER.field("raw"), "BYTEA"), (ORDER.field("tags"), "JSONB"), (ORDER.field("price"), "REAL"),
])
def test_the_schema_type_rule(field: Any, pg: str) -> None:
    from sqlalchemy.dialects import postgresql

    assert column_type(field.schema, "postgresql", False).compile(dialect=postgresql.dialect()) == pg


def test_sink_records_with_a_struct_key_and_key_schema_upsert(pg_database: str) -> None:
    """SinkRecords built directly (as a schema-aware converter gives them): a Struct key of a key schema makes
    the primary key column, typed by the key schema; upserts replace the row of a key."""
    key_schema = SchemaBuilder.struct().name("shop.OrderKey").field("order_no", Schema.INT32_SCHEMA).build()
    tp = TopicPartition("orders", 0)

    def rec(offset: int, i: int, qty: int) -> SinkRecord:
        value = struct_of(ORDER, {**order_json(i), "qty": qty})
        return SinkRecord(topic="orders", partition=0, offset=offset, key=Struct(key_schema).put("order_no", i),
                          key_schema=key_schema, value=value, value_schema=ORDER)

    config = cfg(pg_database, **{"auto.create": "true", "insert.mode": "upsert", "pk.mode": "record_key"})
    task, _ = open_task(config, 1, [tp])
    try:
        task.put([rec(0, 1, 10), rec(1, 2, 20), rec(2, 1, 11)])
        assert task.pre_commit({tp: 3}) == {}
    finally:
        task.stop()
    cols = _columns(pg_database)
    assert cols["order_no"] == ("integer", 32, 0, "NO", None) and cols["qty"][0] == "integer"
    assert query(pg_database, "SELECT order_no, qty, amount::text, ts FROM orders ORDER BY order_no") == [
        (1, 11, "1234567.01", dt.datetime(2026, 1, 1, 0, 1, 1, 1000, tzinfo=dt.UTC)),
        (2, 20, "2469134.02", dt.datetime(2026, 1, 1, 0, 2, 2, 2000, tzinfo=dt.UTC))]
    pk = query(pg_database, "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND "
                            "a.attnum = ANY(i.indkey) WHERE i.indrelid = 'orders'::regclass AND i.indisprimary")
    assert pk == [("order_no",)]
