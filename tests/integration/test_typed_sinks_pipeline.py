"""Typed columns through the whole pipeline: Kafka Connect's JSON envelopes (JsonConverter with
schemas.enable=true, every Connect type and logical type) on a topic, then real sink runs with the same converter:
SqlSink auto-creates typed PostgreSQL columns, ParquetSink writes the Arrow schema derived from the Connect
schema, FileSink writes plain JSON; values round-trip exactly."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path

import fsspec
import pyarrow.parquet as pq

from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files as file_committed
from connect_runtime.connectors.lake import committed_files
from connect_runtime.connectors.lake._typed import arrow_field
from connect_runtime.converters import JsonConverter
from connect_runtime.runtime.sink import run_sink
from tests.support.sql import query
from tests.support.typed import ORDER, order

N = 10
CONVERTER = {"value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "true"}


def _fill(url: str) -> None:
    conv = JsonConverter()
    conv.configure({"schemas.enable": "true"}, False)
    with open_backend(url) as be:
        be.create_topics({"orders": 1})
        producer = be.producer()
        try:
            producer.send([ProducerRecord("orders", 0, None, conv.from_connect_data("orders", ORDER, order(i)))
                           for i in range(N)])
            producer.flush(30)
        finally:
            producer.close()


def test_envelopes_into_typed_postgresql_columns(pg_database: str, sqlite_url: str) -> None:
    _fill(sqlite_url)
    run_sink({"name": "typed-sql", "connector.class": "connect_runtime.connectors.sql.SqlSink",
              "connection.url": pg_database, "topics": "orders", "auto.create": "true", **CONVERTER}, sqlite_url)
    types = dict(query(pg_database, "SELECT column_name, format_type(atttypid, atttypmod) FROM "
                                    "information_schema.columns c JOIN pg_attribute a ON a.attrelid = 'orders'::regclass"
                                    " AND a.attname = c.column_name WHERE c.table_name = 'orders'"))
    assert {k: types[k] for k in ("id", "qty", "amount", "total", "day", "at", "ts", "raw", "addr")} == {
        "id": "bigint", "qty": "integer", "amount": "numeric(10,2)", "total": "numeric(38,3)", "day": "date",
        "at": "time without time zone", "ts": "timestamp with time zone", "raw": "bytea", "addr": "jsonb"}
    rows = query(pg_database, "SELECT id, amount, total, day, at, ts FROM orders ORDER BY id")
    assert rows == [(i, order(i)["amount"], order(i)["total"], order(i)["day"], order(i)["at"], order(i)["ts"])
                    for i in range(N)]
    assert rows[1][1] == decimal.Decimal("1234567.01") and rows[1][5] == dt.datetime(2026, 1, 1, 0, 1, 1, 1000,
                                                                                       tzinfo=dt.UTC)


def test_envelopes_into_typed_parquet_and_plain_json_files(sqlite_url: str, tmp_path: Path) -> None:
    _fill(sqlite_url)
    root = f"file://{tmp_path / 'lake'}"
    run_sink({"name": "typed-lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink",
              "topics": "orders", "path": root, **CONVERTER}, sqlite_url)
    (url,) = committed_files(root, "orders", 0)
    with fsspec.open(url, "rb") as fh:
        table = pq.read_table(fh)
    assert list(table.schema.remove_metadata()) == [arrow_field(f.name, f.schema) for f in ORDER.fields]
    got = table.to_pylist()
    assert [(r["amount"], r["total"], r["day"], r["at"], r["ts"]) for r in got] == [
        (order(i)["amount"], order(i)["total"], order(i)["day"], order(i)["at"], order(i)["ts"]) for i in range(N)]

    run_sink({"name": "typed-files", "connector.class": "connect_runtime.connectors.files.FileSink",
              "topics": "orders", "directory": str(tmp_path / "out"), **CONVERTER}, sqlite_url)
    lines = [json.loads(line) for f in file_committed(tmp_path / "out", "orders", 0, "jsonl")
             for line in f.read_bytes().splitlines()]
    assert [(v["amount"], v["day"], v["ts"]) for v in lines[:2]] == [
        ("0.00", "2026-01-01", "2026-01-01T00:00:00+00:00"),
        ("1234567.01", "2026-01-02", "2026-01-01T00:01:01.001000+00:00")]
