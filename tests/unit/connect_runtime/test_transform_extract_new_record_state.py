"""ExtractNewRecordState on real change events (PostgresCdcSource's records) and on their schemaless JSON form."""

from __future__ import annotations

from typing import Any

import pytest

from connect_runtime.api.config import ConfigError
from connect_runtime.api.data import Schema, SchemaBuilder, Struct
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import SourceRecord
from connect_runtime.connectors.cdc._events import ColumnInfo, Position, TableEvents
from connect_runtime.transforms import ALIASES, ExtractNewRecordState

EVENTS = TableEvents("shop", "db1", "public", "orders",
                     [ColumnInfo("id", 23, -1, False, True), ColumnInfo("name", 25, -1, True, False)])
POS = Position(lsn=100, tx_id=7, ts_usec=1_700_000_000_123_456, commit_lsn=200, event=1)


def smt(**cfg: str) -> ExtractNewRecordState:
    t = ExtractNewRecordState()
    t.configure(cfg)
    return t


def insert() -> SourceRecord:
    return EVENTS.changes("I", POS, None, None, ("1", "a"))[0]


def delete() -> list[SourceRecord]:
    return EVENTS.changes("D", POS, ("1", None), "K", None)


def test_the_alias_is_debeziums_class_name() -> None:
    assert ALIASES["io.debezium.transforms.ExtractNewRecordState"] == "connect_runtime.transforms.ExtractNewRecordState"


def test_a_create_becomes_its_after_row_with_the_value_schema() -> None:
    out = smt().apply(insert())
    assert out is not None and isinstance(out.value, Struct)
    assert dict(out.value) == {"id": 1, "name": "a"}
    assert out.value_schema is EVENTS.value_schema and out.key == insert().key


def test_deletes_and_tombstones_by_default_are_dropped() -> None:
    d, tomb = delete()
    assert smt().apply(d) is None and smt().apply(tomb) is None
    kept = smt(**{"drop.tombstones": "false", "delete.handling.mode": "none"})
    nulled = kept.apply(d)
    assert nulled is not None and (nulled.value, nulled.value_schema) == (None, None)
    assert kept.apply(tomb) is tomb


def test_rewrite_marks_every_row_and_add_fields_prefixes_metadata() -> None:
    t = smt(**{"delete.handling.mode": "rewrite", "add.fields": "op,table,lsn,source.ts_ms"})
    c = t.apply(insert())
    d = t.apply(delete()[0])
    assert c is not None and d is not None
    assert dict(c.value) == {"id": 1, "name": "a", "__op": "c", "__table": "orders", "__lsn": 100,
                             "__source_ts_ms": 1_700_000_000_123, "__deleted": "false"}
    assert dict(d.value)["__deleted"] == "true" and dict(d.value)["id"] == 1 and dict(d.value)["__op"] == "d"
    assert c.value_schema is d.value_schema  # built once per input schema
    assert c.value_schema is not None and c.value_schema.name == "shop.public.orders.Value"
    assert all(f.schema.optional for f in c.value_schema.fields[2:])


def test_schemaless_envelopes_and_other_records() -> None:
    envelope: dict[str, Any] = {"before": None, "after": {"id": 1}, "op": "u",
                                "source": {"table": "orders", "lsn": 5}}
    rec = SourceRecord(source_partition=None, source_offset=None, topic="t", value=envelope)
    out = smt(**{"add.fields": "table"}).apply(rec)
    assert out is not None and out.value == {"id": 1, "__table": "orders"}
    plain = SourceRecord(source_partition=None, source_offset=None, topic="t", value={"hello": 1})
    assert smt().apply(plain) is plain  # not an envelope: unchanged
    with pytest.raises(DataError, match=r"add\.fields names nope"):
        smt(**{"add.fields": "nope"}).apply(rec)


def test_a_bad_mode_names_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        smt(**{"delete.handling.mode": "soft"})
    assert "delete.handling.mode" in info.value.errors


def key_change() -> list[SourceRecord]:
    return EVENTS.changes("U", POS, ("1", None), "K", ("2", "b"))


@pytest.mark.parametrize(("mode", "delete_becomes", "tombstone_kept"), [
    ("drop", "dropped", False),
    ("tombstone", "null value, the row's schema", False),
    ("rewrite", "before row, __deleted true", False),
    ("rewrite-with-tombstone", "before row, __deleted true", True),
    ("delete-to-tombstone", "tombstone", False),
])
def test_delete_tombstone_handling_mode_is_debeziums(mode: str, delete_becomes: str, tombstone_kept: bool) -> None:
    """Debezium 3.6's DefaultDeleteHandlingStrategy, mode by mode: what a delete becomes, whether the tombstone after
    it stays, and what a create becomes (``__deleted: "false"`` in the rewrite modes)."""
    t = smt(**{"delete.tombstone.handling.mode": mode})
    d, tomb = delete()
    out = t.apply(d)
    if delete_becomes == "dropped":
        assert out is None
    elif delete_becomes == "tombstone":
        assert out is not None and (out.value, out.value_schema) == (None, None) and out.key == d.key
    elif delete_becomes.startswith("null value"):  # a null payload with the Value schema, not a Kafka tombstone
        assert out is not None and out.value is None and out.value_schema is EVENTS.value_schema
    else:
        assert out is not None and dict(out.value) == {"id": 1, "name": None, "__deleted": "true"}
    assert (t.apply(tomb) is tomb) if tombstone_kept else (t.apply(tomb) is None)
    c = t.apply(insert())
    assert c is not None
    assert dict(c.value) == ({"id": 1, "name": "a", "__deleted": "false"} if mode.startswith("rewrite")
                             else {"id": 1, "name": "a"})


def test_the_new_mode_with_debezium_2s_options_is_an_error_naming_them() -> None:
    with pytest.raises(ConfigError) as info:
        smt(**{"delete.tombstone.handling.mode": "rewrite", "drop.tombstones": "false"})
    assert set(info.value.errors) == {"drop.tombstones"}
    with pytest.raises(ConfigError) as info:
        smt(**{"delete.tombstone.handling.mode": "soft"})
    assert "delete.tombstone.handling.mode" in info.value.errors


def test_rewrite_field_is_debeziums_constant_whatever_the_prefix() -> None:
    out = smt(**{"delete.handling.mode": "rewrite", "add.fields": "op", "add.fields.prefix": "m_"}).apply(insert())
    assert out is not None and dict(out.value) == {"id": 1, "name": "a", "m_op": "c", "__deleted": "false"}


def test_add_fields_renames_with_a_colon() -> None:
    out = smt(**{"add.fields": "op:OP,source.ts_ms:EVENT_TS,table"}).apply(insert())
    assert out is not None and dict(out.value) == {"id": 1, "name": "a", "__OP": "c",
                                                   "__EVENT_TS": 1_700_000_000_123, "__table": "orders"}
    with pytest.raises(ConfigError) as info:
        smt(**{"add.fields": "op:"})
    assert "add.fields" in info.value.errors


def test_add_headers_are_debeziums() -> None:
    """``add.headers``: Debezium's references as headers after the record's own, their values as text; a tombstone
    gets only ``op`` (``d``); the headers are there whatever the delete mode makes of the record."""
    t = smt(**{"add.headers": "op,source.ts_ms,table:TBL,lsn,transaction.id", "add.headers.prefix": "h_",
               "delete.tombstone.handling.mode": "rewrite-with-tombstone"})
    c = t.apply(insert())
    assert c is not None and c.headers == [("h_op", "c"), ("h_source_ts_ms", "1700000000123"), ("h_TBL", "orders"),
                                           ("h_lsn", "100"), ("h_transaction_id", None)]
    assert dict(c.value) == {"id": 1, "name": "a", "__deleted": "false"}  # headers, not fields
    d, tomb = delete()
    out_d, out_t = t.apply(d), t.apply(tomb)
    assert out_d is not None and out_d.headers is not None and ("h_op", "d") in out_d.headers
    assert out_t is not None and out_t.headers == [("h_op", "d")]
    old_new = key_change()  # a record's own headers (Debezium's key change headers) stay first
    out = smt(**{"add.headers": "op"}).apply(old_new[2])
    assert out is not None and out.headers == [("__debezium.oldkey", b'{"id":1}'), ("__op", "c")]
    with pytest.raises(DataError, match=r"add\.headers names nope"):
        smt(**{"add.headers": "nope"}).apply(insert())


TOPIC = "shop.public.orders"


def full_delete() -> list[SourceRecord]:
    """A delete and its tombstone under REPLICA IDENTITY FULL (``before`` has every column)."""
    return EVENTS.changes("D", POS, ("1", "gone"), "O", None)


def update(name: str | None) -> SourceRecord:
    return EVENTS.changes("U", POS, None, None, ("1", name))[0]


def test_route_by_field_sends_each_row_to_the_topic_it_names() -> None:
    """Debezium's ``route.by.field``: ``after``'s field for a create or update, ``before``'s for a delete (rewritten or
    turned into a null value); a null value keeps the topic, and so does a tombstone."""
    t = smt(**{"route.by.field": "name", "delete.tombstone.handling.mode": "rewrite-with-tombstone"})
    c, u, same = t.apply(insert()), t.apply(update("b")), t.apply(update(None))
    assert c is not None and u is not None and same is not None
    assert (c.topic, u.topic, same.topic) == ("a", "b", TOPIC)
    assert dict(c.value) == {"id": 1, "name": "a", "__deleted": "false"}
    d, tomb = full_delete()
    out_d, out_t = t.apply(d), t.apply(tomb)
    assert out_d is not None and out_d.topic == "gone" and dict(out_d.value)["__deleted"] == "true"
    assert out_t is tomb and out_t.topic == TOPIC
    nulled = smt(**{"route.by.field": "name", "delete.tombstone.handling.mode": "tombstone"}).apply(d)
    assert nulled is not None and nulled.value is None and nulled.topic == "gone"
    envelope: dict[str, Any] = {"before": {"id": 1, "dest": "x"}, "after": None, "op": "d"}
    rec = SourceRecord(source_partition=None, source_offset=None, topic="t", value=envelope)
    out = smt(**{"route.by.field": "dest", "delete.handling.mode": "rewrite"}).apply(rec)
    assert out is not None and out.topic == "x" and out.value == {"id": 1, "dest": "x", "__deleted": "true"}
    envelope = {"before": None, "after": {"id": 1, "dest": ""}, "op": "c"}
    blank = SourceRecord(source_partition=None, source_offset=None, topic="t", value=envelope)
    out = smt(**{"route.by.field": "dest"}).apply(blank)
    assert out is not None and out.topic == "t"  # blank: the topic stays, as Debezium's


def test_route_by_field_errors_name_the_field_and_the_record() -> None:
    with pytest.raises(DataError, match=r"route\.by\.field names nope, which is not a field of the after row .*"
                                        r"shop\.public\.orders"):
        smt(**{"route.by.field": "nope"}).apply(insert())
    with pytest.raises(DataError, match=r"route\.by\.field names id, which is a INT32, not a STRING"):
        smt(**{"route.by.field": "id"}).apply(insert())
    envelope: dict[str, Any] = {"before": None, "after": None, "op": "d"}
    rec = SourceRecord(source_partition=None, source_offset=None, topic="t", value=envelope)
    with pytest.raises(DataError, match=r"reads dest from the before row, which the change event of topic 't'"):
        smt(**{"route.by.field": "dest", "delete.handling.mode": "rewrite"}).apply(rec)
    envelope = {"before": None, "after": {"dest": 5}, "op": "c"}
    rec = SourceRecord(source_partition=None, source_offset=None, topic="t", value=envelope)
    with pytest.raises(DataError, match=r"route\.by\.field names dest, which is a int, not a string"):
        smt(**{"route.by.field": "dest"}).apply(rec)


def with_header(record: SourceRecord, value: Any, name: str = "unchanged") -> SourceRecord:
    return record.new_record(headers=[*(record.headers or []), (name, value)])


def test_drop_fields_drops_the_optional_fields_the_header_lists() -> None:
    """``drop.fields.header.name`` with ``drop.fields.keep.schema.compatible`` (true, Debezium's default): only the
    listed fields that are optional go, from the value and its schema; the header as a list or as JSON text."""
    t = smt(**{"drop.fields.header.name": "unchanged"})
    for header in (["name", "id"], '["name","id"]', b'["name"]'):
        out = t.apply(with_header(insert(), header))
        assert out is not None and dict(out.value) == {"id": 1}, header  # id is required: kept
        assert out.value_schema is not None and [f.name for f in out.value_schema.fields] == ["id"]
        assert out.value_schema.name == "shop.public.orders.Value" and out.key == insert().key
    again = t.apply(with_header(insert(), ["name"]))
    assert again is not None and again.value_schema is out.value_schema  # built once per schema and fields dropped
    kept = t.apply(with_header(insert(), ["id"]))
    assert kept is not None and kept.value_schema is EVENTS.value_schema and dict(kept.value) == {"id": 1, "name": "a"}
    for untouched in (insert(), with_header(insert(), None), with_header(insert(), []),
                      with_header(insert(), ["name"], name="other")):
        out = t.apply(untouched)
        assert out is not None and dict(out.value) == {"id": 1, "name": "a"}
    rewritten = smt(**{"drop.fields.header.name": "unchanged", "delete.tombstone.handling.mode": "rewrite",
                       "add.fields": "op"}).apply(with_header(full_delete()[0], ["name", "__op"]))
    assert rewritten is not None and dict(rewritten.value) == {"id": 1, "__deleted": "true"}


def test_drop_fields_not_schema_compatible_and_from_the_key() -> None:
    t = smt(**{"drop.fields.header.name": "unchanged", "drop.fields.keep.schema.compatible": "false",
               "drop.fields.from.key": "true"})
    out = t.apply(with_header(insert(), ["id"]))
    assert out is not None and dict(out.value) == {"name": "a"} and isinstance(out.key, Struct)
    assert out.key_schema is not None and not out.key_schema.fields and out.key_schema.name == "shop.public.orders.Key"
    compatible = smt(**{"drop.fields.header.name": "unchanged", "drop.fields.from.key": "true"})
    out = compatible.apply(with_header(insert(), ["id", "name"]))
    assert out is not None and out.key == insert().key and dict(out.value) == {"id": 1}  # the key's id is required
    only_value = smt(**{"drop.fields.header.name": "unchanged", "drop.fields.keep.schema.compatible": "false"})
    out = only_value.apply(with_header(insert(), ["id"]))
    assert out is not None and out.key == insert().key and dict(out.value) == {"name": "a"}
    kept = smt(**{"drop.fields.header.name": "unchanged", "drop.fields.keep.schema.compatible": "false",
                  "drop.fields.from.key": "true", "delete.tombstone.handling.mode": "rewrite-with-tombstone"})
    tomb = with_header(delete()[1], ["id"])
    assert kept.apply(tomb) is tomb  # a tombstone is left as it is, as Debezium's


def test_drop_fields_on_schemaless_rows_drops_every_listed_field() -> None:
    envelope: dict[str, Any] = {"before": None, "after": {"id": 1, "name": "a", "note": None}, "op": "c"}
    rec = SourceRecord(source_partition=None, source_offset=None, topic="t", key={"id": 1, "region": "eu"},
                       value=envelope, headers=[("unchanged", '["name","region"]')])
    out = smt(**{"drop.fields.header.name": "unchanged"}).apply(rec)
    assert out is not None and out.value == {"id": 1, "note": None} and out.key == {"id": 1, "region": "eu"}
    out = smt(**{"drop.fields.header.name": "unchanged", "drop.fields.from.key": "true"}).apply(rec)
    assert out is not None and out.value == {"id": 1, "note": None} and out.key == {"id": 1}
    assert rec.value["after"] == {"id": 1, "name": "a", "note": None}  # the input is not modified


def test_drop_fields_errors_and_config() -> None:
    t = smt(**{"drop.fields.header.name": "unchanged"})
    for bad in ("name", '{"name": 1}', [1], b"\xff"):
        with pytest.raises(DataError, match=r"the header unchanged \(drop\.fields\.header\.name\) of topic "
                                            r"'shop\.public\.orders' is a .* not a list of field names"):
            t.apply(with_header(insert(), bad))
    with pytest.raises(ConfigError) as info:
        smt(**{"drop.fields.from.key": "true", "drop.fields.keep.schema.compatible": "false"})
    assert set(info.value.errors) == {"drop.fields.from.key", "drop.fields.keep.schema.compatible"}
    with pytest.raises(ConfigError) as info:
        smt(**{"drop.fields.header.name": "unchanged", "drop.fields.from.key": "maybe"})
    assert set(info.value.errors) == {"drop.fields.from.key"}
    keyless = SourceRecord(source_partition=None, source_offset=None, topic="t", key="k",
                           value={"before": None, "after": {"id": 1}, "op": "c"}, headers=[("unchanged", ["id"])])
    with pytest.raises(DataError, match=r"drop\.fields\.from\.key needs a Struct or dict key, got a str"):
        smt(**{"drop.fields.header.name": "unchanged", "drop.fields.from.key": "true"}).apply(keyless)


ROW = (SchemaBuilder.struct().optional().name("t.Value")
       .field("id", Schema.INT32_SCHEMA)
       .field("status", SchemaBuilder.string().optional().default_value("new").build())
       .build())
ENVELOPE = (SchemaBuilder.struct().name("t.Envelope")
            .field("before", ROW).field("after", ROW).field("op", Schema.STRING_SCHEMA).build())


def null_status(op: str = "c") -> SourceRecord:
    """A change event whose row has ``status`` null, a field with a default (``new``)."""
    env = Struct(ENVELOPE).put("before" if op == "d" else "after", Struct(ROW).put("id", 1)).put("op", op)
    return SourceRecord(source_partition=None, source_offset=None, topic="t", value=env, value_schema=ENVELOPE,
                        headers=[("unchanged", ["nope"])])


def status(t: ExtractNewRecordState, record: SourceRecord) -> Any:
    out = t.apply(record)
    assert out is not None and isinstance(out.value, Struct)
    return out.value.get_without_default("status")


def test_replace_null_with_default_where_debezium_copies_the_row() -> None:
    """Debezium's ``replace.null.with.default`` (true): the rewrite modes' copy of the row (its ``InsertField`` adding
    ``__deleted``) and the drop of fields give a null field its default; false keeps the null; a row passed as it is
    or copied for ``add.fields`` only keeps its nulls either way, as Debezium's."""
    for mode in ("rewrite", "rewrite-with-tombstone"):
        assert status(smt(**{"delete.tombstone.handling.mode": mode}), null_status()) == "new"
        assert status(smt(**{"delete.tombstone.handling.mode": mode}), null_status("d")) == "new"
        assert status(smt(**{"delete.tombstone.handling.mode": mode, "replace.null.with.default": "false"}),
                      null_status()) is None
    assert status(smt(), null_status()) is None
    assert status(smt(**{"add.fields": "op"}), null_status()) is None
    # keep.schema.compatible=false: a listed field, even one the row lacks, makes Debezium copy the row
    dropping = {"drop.fields.header.name": "unchanged", "drop.fields.keep.schema.compatible": "false"}
    assert status(smt(**dropping), null_status()) == "new"
    assert status(smt(**dropping, **{"replace.null.with.default": "false"}), null_status()) is None
    assert status(smt(**{"drop.fields.header.name": "unchanged"}), null_status()) is None  # nothing to drop
