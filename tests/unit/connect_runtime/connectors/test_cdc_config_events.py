"""PostgresCdcSource's config (each bad key named) and Debezium's event shapes, without a database."""

from __future__ import annotations

import pytest

from connect_runtime.api.data import Struct
from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.connectors.cdc._config import CDC_CONFIG, tables_of
from connect_runtime.connectors.cdc._events import UNAVAILABLE, ColumnInfo, Position, TableEvents
from connect_runtime.connectors.cdc._pgoutput import UNCHANGED_TOAST

GOOD = {"connection.url": "postgresql://db:5432/shop", "topic.prefix": "shop"}


def errors(**changes: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        CDC_CONFIG.parse({**GOOD, **changes})
    return info.value.errors


def test_defaults_are_debeziums() -> None:
    cfg = CDC_CONFIG.parse(GOOD)
    assert (cfg["slot.name"], cfg["publication.name"], cfg["snapshot.mode"]) == ("debezium", "dbz_publication",
                                                                                 "initial")
    assert tables_of({**cfg, "table.include.list": ["orders", "sales.items"]}) == ["public.orders", "sales.items"]


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("slot.name", "My-Slot", "lower-case letters, digits and underscores"),
    ("slot.name", "s" * 64, "1 to 63"),
    ("publication.name", 'a"b', "without '\"'"),
    ("topic.prefix", "shop/eu", "letters, digits, '.', '_' and '-'"),
    ("table.include.list", "a.b.c", "schema.table or table"),
    ("snapshot.mode", "custom", "one of initial, initial_only, no_data, always, when_needed"),
    ("snapshot.mode", "configuration_based", "Java snapshotter SPI"),
    ("heartbeat.interval.ms", "-1", "at least 0"),
    ("topic.heartbeat.prefix", "beat/s", "letters, digits, '.', '_' and '-'"),
    ("batch.max.rows", "0", "at least 1"),
])
def test_a_bad_value_is_refused_naming_its_key(key: str, value: str, expected: str) -> None:
    assert expected in errors(**{key: value})[key]


def test_heartbeats_are_off_by_default_and_never_reads_as_no_data() -> None:
    from connect_runtime.connectors.cdc._config import snapshot_mode

    cfg = CDC_CONFIG.parse(GOOD)
    assert (cfg["heartbeat.interval.ms"], cfg["topic.heartbeat.prefix"], cfg["heartbeat.action.query"]) == (
        0, "__debezium-heartbeat", None)
    assert snapshot_mode(CDC_CONFIG.parse({**GOOD, "snapshot.mode": "never"})) == "no_data"


def test_a_heartbeat_is_debeziums_record() -> None:
    from connect_runtime.connectors.cdc._heartbeat import heartbeat, moved_offset

    offset = moved_offset({"lsn": 5, "txId": 7, "snapshot": True, "last_snapshot_record": True, "lsn_commit": 3}, 9)
    assert {k: v for k, v in offset.items() if k != "ts_usec"} == {"lsn": 9, "lsn_proc": 9, "txId": 7,
                                                                    "lsn_commit": 3}
    record = heartbeat("__debezium-heartbeat", "shop", offset)
    assert (record.topic, record.partition, record.source_partition) == ("__debezium-heartbeat.shop", 0,
                                                                               {"server": "shop"})
    assert record.key_schema is not None and record.value_schema is not None
    assert (record.key_schema.name, record.key_schema.version, record.value_schema.name,
            record.value_schema.version) == ("io.debezium.connector.common.ServerNameKey", 1,
                                             "io.debezium.connector.common.Heartbeat", 1)
    assert record.key.get("serverName") == "shop" and record.value.get("ts_ms") > 0


def test_topic_prefix_and_url_are_required() -> None:
    with pytest.raises(ConfigError) as info:
        CDC_CONFIG.parse({})
    assert {"connection.url", "topic.prefix"} <= set(info.value.errors)


COLUMNS = [ColumnInfo("id", 23, -1, False, True), ColumnInfo("name", 25, -1, False, False),
           ColumnInfo("note", 25, -1, True, False), ColumnInfo("big", 25, -1, True, False)]


def events() -> TableEvents:
    return TableEvents("shop", "db1", "public", "orders", COLUMNS)


def test_schemas_and_topic_have_debeziums_names() -> None:
    e = events()
    assert e.topic == "shop.public.orders"
    assert e.value_schema.name == "shop.public.orders.Value" and e.value_schema.optional
    assert e.key_schema is not None and e.key_schema.name == "shop.public.orders.Key"
    assert [f.name for f in e.key_schema.fields] == ["id"]
    assert e.envelope_schema.name == "shop.public.orders.Envelope"
    assert [f.name for f in e.envelope_schema.fields] == ["before", "after", "source", "transaction", "op", "ts_ms",
                                                          "ts_us", "ts_ns"]
    assert [f.name for f in e.value_schema.fields] == ["id", "name", "note", "big"]
    assert [f.schema.optional for f in e.value_schema.fields] == [False, False, True, True]


POS = Position(lsn=100, tx_id=7, ts_usec=1_700_000_000_123_456, commit_lsn=200, event=3, last_commit=90)


def test_insert_update_delete_records() -> None:
    e = events()
    (c,) = e.changes("I", POS, None, None, ("1", "a", None, "x"))
    assert c.topic == "shop.public.orders" and c.source_partition == {"server": "shop"}
    # Debezium's lsn_commit: the end of the transaction before; this transaction's commit LSN is ours
    assert c.source_offset == {"lsn": 100, "lsn_proc": 100, "lsn_commit": 90, "txId": 7,
                               "ts_usec": 1_700_000_000_123_456, "tx_commit_lsn": 200, "event": 3}
    assert isinstance(c.key, Struct) and dict(c.key) == {"id": 1}
    v = c.value
    assert isinstance(v, Struct) and v["op"] == "c" and v["before"] is None
    assert dict(v["after"]) == {"id": 1, "name": "a", "note": None, "big": "x"}
    src = v["source"]
    assert (src["connector"], src["name"], src["db"], src["schema"], src["table"]) == ("postgresql", "shop", "db1",
                                                                                       "public", "orders")
    assert (src["snapshot"], src["txId"], src["lsn"], src["ts_ms"]) == ("false", 7, 100, 1_700_000_000_123)
    assert src["sequence"] == '["90","100"]'
    first = Position(lsn=100, tx_id=7, ts_usec=1, commit_lsn=200, event=1)  # the first since the snapshot
    (c,) = e.changes("I", first, None, None, ("1", "a", None, "x"))
    assert "lsn_commit" not in c.source_offset  # type: ignore[operator]
    assert c.value["source"]["sequence"] == '[null,"100"]'

    (u,) = e.changes("U", POS, None, None, ("1", "b", None, UNCHANGED_TOAST))
    assert u.value["op"] == "u" and u.value["before"] is None and u.value["after"]["big"] == UNAVAILABLE

    d, tomb = e.changes("D", POS, ("1", None, None, None), "K", None)
    assert d.value["op"] == "d" and d.value["after"] is None
    assert dict(d.value["before"]) == {"id": 1, "name": "", "note": None, "big": None}  # NOT NULL: a stand-in
    assert (tomb.key, tomb.value, tomb.value_schema) == (d.key, None, None)


def test_a_key_change_is_delete_tombstone_create_and_full_identity_keeps_before() -> None:
    e = events()
    d, tomb, c = e.changes("U", POS, ("1", None, None, None), "K", ("2", "a", None, None))
    assert [r.value and r.value["op"] for r in (d, tomb, c)] == ["d", None, "c"]
    assert dict(d.key) == {"id": 1} == dict(tomb.key) and dict(c.key) == {"id": 2}  # type: ignore[arg-type]
    # Debezium's headers, as Kafka Connect's SimpleHeaderConverter writes the key Struct
    assert d.headers == tomb.headers == [("__debezium.newkey", b'{"id":2}')]
    assert c.headers == [("__debezium.oldkey", b'{"id":1}')]
    (u,) = e.changes("U", POS, ("1", "a", "n", None), "O", ("1", "b", "n", None))
    assert dict(u.value["before"])["name"] == "a" and dict(u.value["after"])["name"] == "b"


def test_a_row_that_does_not_fit_is_a_data_error_naming_table_and_column() -> None:
    e = events()
    with pytest.raises(DataError, match=r"shop\.public\.orders: column 'name' is NOT NULL"):
        e.changes("I", POS, None, None, ("1", None, None, None))
    with pytest.raises(DataError, match="a row of 2 columns"):
        e.changes("I", POS, None, None, ("1", "a"))


def test_snapshot_offsets_are_debeziums() -> None:
    pos = Position(lsn=50, tx_id=9, ts_usec=1, last_snapshot=True)
    r = events().event("r", pos, None, events().row(("1", "a", None, None)), snapshot="last")
    assert r.source_offset == {"last_snapshot_record": True, "lsn": 50, "txId": 9, "ts_usec": 1, "snapshot": True}
    assert r.value["op"] == "r" and r.value["source"]["snapshot"] == "last" and r.value["source"]["sequence"] == '[null,"50"]'


def test_key_headers_are_written_as_kafka_connects_simple_header_converter_writes_a_struct() -> None:
    from decimal import Decimal

    from connect_runtime.api.data import Schema, SchemaBuilder
    from connect_runtime.connectors.cdc._events import header_text

    schema = (SchemaBuilder.struct().name("k").field("s", Schema.STRING_SCHEMA).field("i", Schema.INT64_SCHEMA)
              .field("b", Schema.BOOLEAN_SCHEMA).field("y", Schema.BYTES_SCHEMA)
              .field("n", Schema.OPTIONAL_STRING_SCHEMA).field("d", Schema.OPTIONAL_STRING_SCHEMA).build())
    key = Struct.from_values(schema, ['a "q" \\ é', -5, True, b"\x00\xff", None, None])
    assert header_text(key) == '{"s":"a \\"q\\" \\\\ é","i":-5,"b":true,"y":"AP8=","n":null,"d":null}'.encode()
    assert header_text(Decimal("12.30")) == b"12.30" and header_text("plain") == b"plain"


def test_committed_position_reads_this_versions_offsets_and_the_previous_ones() -> None:
    from connect_runtime.connectors.cdc._task import committed_position

    assert committed_position(None) == ((0, 0), (None, None))
    assert committed_position({"lsn": 5, "txId": 1, "ts_usec": 1, "snapshot": True,
                               "last_snapshot_record": True}) == ((0, 0), (None, None))
    now = {"lsn": 100, "lsn_proc": 100, "lsn_commit": 90, "txId": 7, "ts_usec": 1, "tx_commit_lsn": 200, "event": 3}
    assert committed_position(now) == ((200, 3), (90, None))
    assert committed_position({**now, "tx_end_lsn": 230}) == ((200, 3), (90, 230))
    first = {k: v for k, v in now.items() if k != "lsn_commit"}  # the first transaction since the snapshot
    assert committed_position(first) == ((200, 3), (None, None))
    # the previous version: lsn_commit was the transaction's own commit LSN
    old = {"lsn": 100, "lsn_proc": 100, "lsn_commit": 200, "txId": 7, "ts_usec": 1, "event": 3,
           "messageType": "INSERT"}
    assert committed_position(old) == ((200, 3), (None, None))


def test_context_headers_are_debeziums_after_a_records_own() -> None:
    from connect_runtime.connectors.cdc._events import context_headers

    ctx = context_headers("shop", 0, "0190a2b4-0000-7000-8000-000000000001")
    assert ctx == [("__debezium.context.connectorLogicalName", b"shop"), ("__debezium.context.taskId", b"0"),
                   ("__debezium.context.connectorName", b"postgresql"),
                   ("__debezium.context.runId", b"0190a2b4-0000-7000-8000-000000000001")]
    e = TableEvents("shop", "db1", "public", "orders", events().columns, ctx)
    (c,) = e.changes("I", POS, None, None, ("1", "a", None, "x"))
    assert c.headers == ctx and c.headers is not ctx
    d, tomb, c = e.changes("U", POS, ("1", None, None, None), "K", ("2", "a", None, None))
    assert d.headers == tomb.headers == [("__debezium.newkey", b'{"id":2}'), *ctx]
    assert c.headers == [("__debezium.oldkey", b'{"id":1}'), *ctx]
