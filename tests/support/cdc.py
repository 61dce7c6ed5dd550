"""Helpers for the change data capture tests (issue 36): the statements behind
``tests/unit/connect_runtime/connectors/pgoutput_capture.txt`` (:data:`CAPTURE_SQL`, run in a fresh database of the
``logical_postgres`` cluster after ``CREATE_REPLICATION_SLOT "s" LOGICAL pgoutput``), and reading a slot's state."""

from __future__ import annotations

CAPTURE_SQL = (
    "CREATE TABLE public.t (id int PRIMARY KEY, n numeric(10,2), s text, b boolean, d date, tm time, ts timestamp, "
    "tz timestamptz, j json, jb jsonb, u uuid, by bytea, a int[], ta text[], big text, i2 smallint, i8 bigint, "
    "f8 float8)",
    "CREATE TABLE public.u (k text PRIMARY KEY, v int)",
    "CREATE TYPE mood AS ENUM ('ok','sad')",
    "CREATE TABLE public.e (id int PRIMARY KEY, m mood)",
    "CREATE PUBLICATION p FOR TABLE t, u, e",
    # the slot is created here (its changes start after this point)
    "BEGIN",
    "INSERT INTO t VALUES (1, 12.30, 'hé \"x\"', true, '2026-01-02', '03:04:05.123456', '2026-01-02 03:04:05.5', "
    "'2026-01-02 03:04:05.123+02', '{\"a\": 1}', '{\"b\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
    "'\\x00ff10', '{1,NULL,3}', '{\"a b\",\"c\\\"d\",NULL,\"NULL\"}', "
    "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g), -5, 9000000000, 1.5)",
    "INSERT INTO u VALUES ('k1', 1), ('k2', NULL)",
    "COMMIT",
    "UPDATE t SET s = 'upd' WHERE id = 1",  # the big text, TOASTed and unchanged: 'u'
    "UPDATE u SET k = 'k9' WHERE k = 'k1'",  # a key change under the default identity: the old key 'K'
    "ALTER TABLE u REPLICA IDENTITY FULL",
    "UPDATE u SET v = 7 WHERE k = 'k2'",  # the old tuple 'O'
    "DELETE FROM u WHERE k = 'k9'",
    "DELETE FROM t WHERE id = 1",  # the old key 'K'
    "INSERT INTO e VALUES (1, 'sad')",  # a Type message for the enum
    "TRUNCATE u",
)
SLOT_AT = 5
"""The index in :data:`CAPTURE_SQL` before which the slot is created."""

__all__ = ["CAPTURE_SQL", "SLOT_AT"]
