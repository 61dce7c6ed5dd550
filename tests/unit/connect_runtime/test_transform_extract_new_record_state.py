"""ExtractNewRecordState on real change events (PostgresCdcSource's records) and on their schemaless JSON form."""

from __future__ import annotations

from typing import Any

import pytest

from connect_runtime.api.config import ConfigError
from connect_runtime.api.data import Struct
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
