"""The pgoutput decoder and the type mapping on bytes captured from PostgreSQL 15 (``pgoutput_capture.txt``: the
``lsn xid data`` rows of ``pg_logical_slot_peek_binary_changes`` after the statements of
:data:`tests.support.cdc.CAPTURE_SQL`; ``tests/integration/test_cdc.py`` decodes the same statements live)."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api.data import Decimal, Schema, SchemaType, Struct
from connect_runtime.api.errors import DataError
from connect_runtime.connectors.cdc._pgoutput import (
    PG_EPOCH_US,
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Delete,
    Insert,
    Relation,
    Truncate,
    TypeInfo,
    Update,
    decode,
    lsn_text,
    parse_lsn,
)
from connect_runtime.connectors.cdc._types import column_type, parse_array

CAPTURE = Path(__file__).with_name("pgoutput_capture.txt")


def messages() -> list[tuple[int, int, Any]]:
    rows = [line.split() for line in CAPTURE.read_text().splitlines()]
    return [(parse_lsn(lsn), int(xid), decode(bytes.fromhex(data))) for lsn, xid, data in rows]


def test_the_captured_stream_decodes_message_by_message() -> None:
    kinds = [type(m).__name__ for _, _, m in messages()]
    assert kinds == ["Begin", "Relation", "Insert", "Relation", "Insert", "Insert", "Commit",
                     "Begin", "Update", "Commit", "Begin", "Update", "Commit",
                     "Begin", "Relation", "Update", "Commit", "Begin", "Delete", "Commit", "Begin", "Delete", "Commit",
                     "Begin", "TypeInfo", "Relation", "Insert", "Commit", "Begin", "Relation", "Truncate", "Commit"]


def test_begin_and_commit_carry_the_commit_lsn_end_lsn_xid_and_time() -> None:
    ms = messages()
    begin, commit = ms[0][2], ms[6][2]
    assert isinstance(begin, Begin) and isinstance(commit, Commit)
    assert begin.xid == ms[0][1] == 729
    assert begin.final_lsn == commit.commit_lsn < commit.end_lsn
    assert begin.commit_ts == commit.commit_ts
    when = dt.datetime.fromtimestamp((commit.commit_ts + PG_EPOCH_US) / 1e6, dt.UTC)
    assert when.year == 2026
    # the next transaction's commit comes after this one's end
    assert isinstance(ms[9][2], Commit) and ms[9][2].commit_lsn >= commit.end_lsn


def test_relation_names_columns_types_modifiers_and_identity() -> None:
    rel = messages()[1][2]
    assert isinstance(rel, Relation)
    assert (rel.namespace, rel.name, rel.replica_identity) == ("public", "t", "d")
    assert [c.name for c in rel.columns] == ["id", "n", "s", "b", "d", "tm", "ts", "tz", "j", "jb", "u", "by", "a",
                                             "ta", "big", "i2", "i8", "f8"]
    assert [c.type_oid for c in rel.columns] == [23, 1700, 25, 16, 1082, 1083, 1114, 1184, 114, 3802, 2950, 17, 1007,
                                                 1009, 25, 21, 20, 701]
    assert [c.name for c in rel.columns if c.key] == ["id"]
    assert rel.columns[1].type_modifier == (10 << 16 | 2) + 4  # numeric(10,2)
    full = messages()[14][2]
    assert isinstance(full, Relation) and full.replica_identity == "f"
    assert all(c.key for c in full.columns)  # FULL: every column is part of the identity


def test_insert_text_tuple_with_null() -> None:
    ms = messages()
    insert = ms[2][2]
    assert isinstance(insert, Insert) and insert.relation_id == ms[1][2].relation_id
    assert insert.new[:4] == ("1", "12.30", 'hé "x"', "t")
    assert len(insert.new[14]) == 12800  # type: ignore[arg-type]
    assert ms[5][2] == Insert(ms[3][2].relation_id, ("k2", None))


def test_update_with_unchanged_toast_old_key_and_old_tuple() -> None:
    ms = messages()
    toast = ms[8][2]
    assert isinstance(toast, Update) and toast.old is None
    assert toast.new[2] == "upd" and toast.new[14] is UNCHANGED_TOAST
    key_change = ms[11][2]
    assert key_change == Update(ms[3][2].relation_id, ("k1", None), "K", ("k9", "1"))
    full = ms[15][2]
    assert isinstance(full, Update) and (full.old, full.old_kind, full.new) == (("k2", None), "O", ("k2", "7"))


def test_delete_old_key_and_old_tuple() -> None:
    ms = messages()
    full, key = ms[18][2], ms[21][2]
    assert isinstance(full, Delete) and (full.old_kind, full.old) == ("O", ("k9", "1"))
    assert isinstance(key, Delete) and key.old_kind == "K"
    assert key.old[0] == "1" and set(key.old[1:]) == {None}


def test_type_and_truncate() -> None:
    ms = messages()
    assert isinstance(ms[24][2], TypeInfo) and (ms[24][2].namespace, ms[24][2].name) == ("public", "mood")
    trunc = ms[30][2]
    assert isinstance(trunc, Truncate) and trunc.options == 0
    assert trunc.relation_ids == (ms[3][2].relation_id,)


def test_bad_bytes_are_a_data_error_naming_the_kind() -> None:
    with pytest.raises(DataError, match="'I'"):
        decode(b"I\x00\x00")
    with pytest.raises(DataError, match="unknown kind 'Z'"):
        decode(b"Z")
    assert decode(b"M\x00") is None  # a logical decoding message: not used


def test_lsn_text_round_trip() -> None:
    assert parse_lsn("16/B374D848") == 0x16B374D848
    assert lsn_text(0x16B374D848) == "16/B374D848"
    with pytest.raises(DataError, match="16/B374D848"):
        parse_lsn("nope")


def typed(ms: list[tuple[int, int, Any]]) -> dict[str, object]:
    rel, insert = ms[1][2], ms[2][2]
    assert isinstance(rel, Relation) and isinstance(insert, Insert)
    out: dict[str, object] = {}
    for col, text in zip(rel.columns, insert.new, strict=True):
        ct = column_type(col.type_oid, col.type_modifier, True, col.name)
        out[col.name] = (ct.schema, None if text is None else ct.convert(str(text)))
    return out


def test_types_map_to_debeziums_schemas_and_values() -> None:
    t = typed(messages())

    def schema(name: str) -> Schema:
        return t[name][0]  # type: ignore[index,no-any-return]

    def value(name: str) -> object:
        return t[name][1]  # type: ignore[index]

    assert (schema("id").type, value("id")) == (SchemaType.INT32, 1)
    assert (schema("i2").type, value("i2")) == (SchemaType.INT16, -5)
    assert (schema("i8").type, value("i8")) == (SchemaType.INT64, 9_000_000_000)
    assert (schema("f8").type, value("f8")) == (SchemaType.FLOAT64, 1.5)
    assert schema("n").name == Decimal.LOGICAL_NAME and Decimal.scale(schema("n")) == 2
    assert schema("n").parameters["connect.decimal.precision"] == "10"  # type: ignore[index]
    assert value("n") == decimal.Decimal("12.30")
    assert value("b") is True and value("s") == 'hé "x"'
    assert (schema("d").name, value("d")) == ("io.debezium.time.Date", (dt.date(2026, 1, 2) - dt.date(1970, 1, 1)).days)
    assert (schema("tm").name, value("tm")) == ("io.debezium.time.MicroTime", (3 * 3600 + 4 * 60 + 5) * 10**6 + 123456)
    assert schema("ts").name == "io.debezium.time.MicroTimestamp"
    assert value("ts") == int(dt.datetime(2026, 1, 2, 3, 4, 5, 500000, dt.UTC).timestamp() * 10**6)
    assert (schema("tz").name, value("tz")) == ("io.debezium.time.ZonedTimestamp", "2026-01-02T01:04:05.123000Z")
    assert (schema("j").name, value("j")) == ("io.debezium.data.Json", '{"a": 1}')
    assert (schema("jb").name, value("jb")) == ("io.debezium.data.Json", '{"b": [1, 2]}')
    assert (schema("u").name, value("u")) == ("io.debezium.data.Uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
    assert (schema("by").type, value("by")) == (SchemaType.BYTES, b"\x00\xff\x10")
    assert schema("a").type == SchemaType.ARRAY and schema("a").value_schema.type == SchemaType.INT32
    assert value("a") == [1, None, 3]
    assert value("ta") == ["a b", 'c"d', None, "NULL"]
    for name in t:
        assert schema(name).optional


def test_numeric_without_scale_time_precision_and_unknown_types() -> None:
    vsd = column_type(1700, -1, False, "x")
    assert vsd.schema.name == "io.debezium.data.VariableScaleDecimal" and not vsd.schema.optional
    v = vsd.convert("-12.345")
    assert isinstance(v, Struct) and v["scale"] == 3 and int.from_bytes(v["value"], "big", signed=True) == -12345
    assert vsd.convert("NaN") is None
    assert column_type(1083, 3, True, "t").schema.name == "io.debezium.time.Time"
    assert column_type(1083, 3, True, "t").convert("03:04:05.123") == (3 * 3600 + 4 * 60 + 5) * 1000 + 123
    assert column_type(1114, 0, True, "t").schema.name == "io.debezium.time.Timestamp"
    mood = column_type(16399, -1, True, "m")
    assert (mood.schema.type, mood.convert("sad")) == (SchemaType.STRING, "sad")
    arr = column_type(1231, -1, True, "xs")
    assert [e["scale"] for e in arr.convert("{1.5,2}")] == [1, 0]


def test_values_without_a_debezium_form_name_the_column() -> None:
    with pytest.raises(DataError, match=r"column 'd'.*infinity"):
        column_type(1082, -1, True, "d").convert("infinity")
    with pytest.raises(DataError, match=r"column 'm'.*more than one dimension"):
        column_type(1007, -1, True, "m").convert("{{1,2},{3,4}}")
    with pytest.raises(DataError, match=r"column 'i'.*'x1'"):
        column_type(23, -1, True, "i").convert("x1")


def test_array_literals() -> None:
    assert parse_array("{}") == []
    assert parse_array('{"",NULL,"\\\\"}') == ["", None, "\\"]
    assert parse_array("[0:1]={7,8}") == ["7", "8"]
