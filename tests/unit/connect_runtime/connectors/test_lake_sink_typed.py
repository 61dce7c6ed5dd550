"""ParquetSink with typed records (Struct values of a Connect schema, every type and logical type): the files'
Parquet schema is the one derived from the Connect schema, values round-trip exactly, a schema change rotates to
a new file, a value that does not fit its column is named (or dead-lettered), and exactly-once holds as for
schemaless records. Real ``run_sink`` runs over a real SQLite backend, on local files and ``memory://``; the
records become typed in the run by the ``ToStruct`` test transform (tests/support/typed.py)."""

from __future__ import annotations

import json
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from connect_runtime.api import ConnectError
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.lake import committed_files
from connect_runtime.connectors.lake._typed import arrow_type
from connect_runtime.runtime.sink import run_sink
from tests.support.typed import ORDER, ORDER_V2, order, order_json

TOPIC = "orders"


def _fill(url: str, values: list[dict[str, Any]], start: int = 0) -> None:
    with open_backend(url) as be:
        be.create_topics({TOPIC: 1}, exist_ok=True)
        producer = be.producer()
        try:
            producer.send([ProducerRecord(TOPIC, 0, None, json.dumps(v).encode(),
                                          timestamp=1_700_000_000_000 + (start + i) * 1000)
                           for i, v in enumerate(values)])
            producer.flush(30)
        finally:
            producer.close()


def _config(root: str, schema: str = "order", **extra: str) -> dict[str, str]:
    return {"name": "typed-lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
            "path": root, "consumer.max.poll.records": "4", "flush.size": "5", "transforms": "typed",
            "transforms.typed.type": "tests.support.typed.ToStruct", "transforms.typed.schema": schema, **extra}


def _tables(root: str) -> list[pa.Table]:
    out = []
    for url in committed_files(root, TOPIC, 0):
        with fsspec.open(url, "rb") as fh:
            out.append(pq.read_table(fh))
    return out


def _names(root: str) -> list[str]:
    return [u.rsplit("/", 1)[-1] for u in committed_files(root, TOPIC, 0)]


def _plain(i: int, schema: Any = ORDER) -> dict[str, Any]:
    row = dict(order(i, schema))
    row["attrs"] = None if row["attrs"] is None else list(row["attrs"].items())  # a map reads as key/value pairs
    row["addr"] = None if row["addr"] is None else dict(row["addr"])
    return row


def test_the_files_have_the_schema_derived_from_the_connect_schema(root: str, sqlite_url: str) -> None:
    _fill(sqlite_url, [order_json(i) for i in range(12)])
    assert run_sink(_config(root), sqlite_url).records == 12
    assert _names(root) == [f"{TOPIC}+0+{s:010d}.parquet" for s in (0, 5, 10)]
    tables = _tables(root)
    schema = tables[0].schema.remove_metadata()
    assert schema == pa.schema([pa.field(f.name, arrow_type(f.schema), nullable=f.schema.optional)
                                for f in ORDER.fields])
    assert {f.name: str(f.type) for f in schema if f.name in ("amount", "total", "day", "at", "ts", "tiny")} == {
        "amount": "decimal128(10, 2)", "total": "decimal128(38, 3)", "day": "date32[day]", "at": "time64[us]",
        "ts": "timestamp[ms, tz=UTC]", "tiny": "int8"}
    assert not schema.field("id").nullable and schema.field("raw").nullable
    rows = [r for t in tables for r in t.to_pylist()]
    assert rows == [_plain(i) for i in range(12)]  # decimals, dates, times, instants exact


def test_a_schema_change_rotates_to_a_new_file(root: str, sqlite_url: str) -> None:
    values = [order_json(i) if not 4 <= i < 7 else {**order_json(i), "coupon": f"c{i}"} for i in range(9)]
    _fill(sqlite_url, values)
    run_sink(_config(root, "auto", **{"flush.size": "100"}), sqlite_url)
    assert _names(root) == [f"{TOPIC}+0+{s:010d}.parquet" for s in (0, 4, 7)]
    t0, t1, t2 = _tables(root)
    assert "coupon" not in t0.schema.names and t1.schema.field("coupon").type == pa.string()
    assert (t0.num_rows, t1.num_rows, t2.num_rows) == (4, 3, 2) and "coupon" not in t2.schema.names
    assert t1.to_pylist() == [_plain(i, ORDER_V2) for i in range(4, 7)]


def test_exactly_once_holds_for_typed_records(root: str, sqlite_url: str) -> None:
    _fill(sqlite_url, [order_json(i) for i in range(7)])
    run_sink(_config(root), sqlite_url)
    before = _names(root)
    assert run_sink(_config(root), sqlite_url).records == 0  # a rerun: nothing written twice
    assert _names(root) == before
    _fill(sqlite_url, [order_json(i) for i in range(7, 13)], start=7)
    run_sink(_config(root), sqlite_url)
    rows = [r["id"] for t in _tables(root) for r in t.to_pylist()]
    assert rows == list(range(13))  # no gap, no overlap


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_a_value_that_does_not_fit_its_column_is_named(root: str, sqlite_url: str, tolerance: str) -> None:
    values = [order_json(i) for i in range(6)]
    values[3]["amount"] = "123456789012.00"  # 14 digits: more than the field's precision, 10
    _fill(sqlite_url, values)
    cfg = _config(root, **{"errors.tolerance": tolerance})
    if tolerance == "none":
        with pytest.raises(ConnectError, match=r"orders-0@3: field 'amount' \(Decimal\) does not fit its column "
                                               r"decimal128\(10, 2\)"):
            run_sink(cfg, sqlite_url)
        assert _names(root) == []  # nothing of the commit group was published
    else:
        run_sink(cfg, sqlite_url)
        assert [r["id"] for t in _tables(root) for r in t.to_pylist()] == [0, 1, 2, 4, 5]


def test_parquet_schema_still_wins_for_the_fields_it_declares(root: str, sqlite_url: str) -> None:
    _fill(sqlite_url, [order_json(i) for i in range(3)])
    run_sink(_config(root, **{"parquet.schema": json.dumps({"addr": "json", "amount": "string", "qty": "int64"})}),
             sqlite_url)
    (table,) = _tables(root)
    assert str(table.schema.field("addr").type) == "string" and str(table.schema.field("amount").type) == "string"
    assert table.schema.field("qty").type == pa.int64() and str(table.schema.field("total").type) == "decimal128(38, 3)"
    rows = table.to_pylist()
    assert [r["amount"] for r in rows] == ["0.00", "1234567.01", "2469134.02"]
    assert json.loads(rows[0]["addr"]) == {"city": "Oslo", "zip": None} and rows[2]["addr"] is None
