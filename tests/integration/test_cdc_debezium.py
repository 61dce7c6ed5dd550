"""PostgresCdcSource against Debezium's PostgreSQL connector itself (3.6.1.Final in Kafka Connect's own worker 4.3.1,
on the tests' Apache Kafka broker): both capture the same snapshot and the same changes of one PostgreSQL 15
database (every mapped type, a TOASTed column left unchanged, a key change, ``REPLICA IDENTITY FULL``, an
``ADD COLUMN``), each through its own slot and publication, both with Kafka Connect's JsonConverter and
``schemas.enable=true``; their records are compared topic by topic, key and value, schema and payload, field by field,
their headers (a key change's ``__debezium.newkey`` / ``oldkey``, as the worker's default SimpleHeaderConverter
writes them), and their committed offsets key by key; ours are written to the same Kafka broker (topics renamed
``ours.*`` by a RegexRouter). What may differ is named in :data:`ALLOWED` (and in docs/cdc.md)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from connect_runtime import run_source
from tests.support.cdc import committed_offset, topic_events, topic_headers
from tests.support.debezium import debezium_worker, postgres_connector

pytestmark = pytest.mark.kafka

T = TypeVar("T")
PREFIX = "shop"
WAIT_S = 180.0

TABLES = (
    "CREATE TABLE t (id int PRIMARY KEY, n numeric(10,2), s text, b boolean, d date, tm time, ts timestamp, "
    "tz timestamptz, j json, jb jsonb, u uuid, by bytea, a int[], ta text[], big text, i2 smallint, i8 bigint, "
    "f8 float8, ch char(3), vc varchar(20) NOT NULL, f4 real, tz3 timestamptz(3), tz0 timestamptz(0))",
    "CREATE TABLE u (k text PRIMARY KEY, v int)",
    "ALTER TABLE u REPLICA IDENTITY FULL",
)
ROW = ("12.30, 'hé \"x\"', true, '2026-01-02', '03:04:05.123456', '2026-01-02 03:04:05.5', "
       "'2026-01-02 03:04:05.123+02', '{\"a\": 1}', '{\"b\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
       "'\\x00ff10', '{1,NULL,3}', '{\"a b\",\"c\\\"d\",NULL,\"NULL\"}', "
       "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g), -5, 9000000000, 1.5, 'ab', 'v', 2.25, "
       "'2026-01-02 03:04:05.5+00', '2026-01-02 03:04:05+01'")
BEFORE_SNAPSHOT = (
    f"INSERT INTO t VALUES (1, {ROW})",
    "INSERT INTO t (id, vc, tz) VALUES (5, 'nulls', '2026-01-02 03:04:05+00')",
    "INSERT INTO u VALUES ('k1', 1), ('k2', NULL)",
)
CHANGES = (
    f"INSERT INTO t VALUES (2, {ROW})",
    "UPDATE t SET s = 'upd' WHERE id = 1",  # big: TOASTed and unchanged, REPLICA IDENTITY DEFAULT
    "UPDATE t SET id = 3 WHERE id = 2",  # a key change: d + tombstone + c
    "UPDATE u SET v = 7 WHERE k = 'k2'",  # REPLICA IDENTITY FULL: before is the old row
    "UPDATE u SET k = 'k9' WHERE k = 'k1'",
    "DELETE FROM u WHERE k = 'k9'",
    "DELETE FROM t WHERE id = 1",
    "ALTER TABLE t ADD COLUMN note text",
    f"INSERT INTO t VALUES (4, {ROW}, 'a note')",
)
SPLIT = 4
"""Ours reads the changes before this index in one run, the rest in the next (Debezium streams them all at once)."""
EXPECTED = {"t": 2 + 1 + 1 + 3 + 2 + 1, "u": 2 + 1 + 3 + 2}
"""Records per topic: the snapshot's, then the changes' (a delete is two: the event and its tombstone)."""

ALLOWED: dict[str, str] = {
    "payload.ts_ms": "when the connector processed the change",
    "payload.ts_us": "when the connector processed the change",
    "payload.ts_ns": "when the connector processed the change",
    "payload.source.version": "the connector's own version (Debezium's: 3.6.1.Final)",
    "offset.tx_commit_lsn": "ours only: this transaction's commit LSN (the exactly-once filter, with event; "
                            "docs/cdc.md, Offsets)",
    "offset.tx_end_lsn": "ours only, on a transaction's last change: its end LSN (the next run's lsn_commit)",
    "offset.event": "ours only: the change's ordinal in its transaction (docs/cdc.md, Offsets)",
}
"""Paths where ours may differ from Debezium's, and why."""
SNAPSHOT_ALLOWED: dict[str, str] = {
    "payload.source.ts_ms": "each snapshot's own time", "payload.source.ts_us": "each snapshot's own time",
    "payload.source.ts_ns": "each snapshot's own time",
    "payload.source.lsn": "each slot's own consistent point", "payload.source.sequence[1]": "the same LSN",
    "payload.source.txId": "each snapshot's own transaction",
}
"""Where a snapshot record (``op`` r) may differ too: each connector took its own snapshot, with its own slot."""


RUN_ID = "__debezium.context.runId"
"""Debezium 3's context header of the run (``extended.headers.enabled``): each connector's own UUID."""


def wait_for(what: str, read: Callable[[], T], done: Callable[[T], bool], timeout: float = WAIT_S) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}; last seen: {value!r}"
        time.sleep(0.5)


def differences(ours: Any, theirs: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``(path, ours, theirs)`` of every leaf where the two JSON values differ (a missing key is ``<absent>``)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out: list[tuple[str, Any, Any]] = []
        for k in sorted(set(ours) | set(theirs)):
            p = f"{path}.{k}" if path else k
            if k not in ours or k not in theirs:
                out.append((p, ours.get(k, "<absent>"), theirs.get(k, "<absent>")))
            else:
                out += differences(ours[k], theirs[k], p)
        return out
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for n, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in differences(a, b, f"{path}[{n}]")]
    return [] if ours == theirs and type(ours) is type(theirs) else [(path, ours, theirs)]


def _allowed(path: str, snapshot: bool = False) -> bool:
    return path in ALLOWED or (snapshot and path in SNAPSHOT_ALLOWED)


def _comparable(value: Any) -> Any:
    """``source.sequence`` as the list its JSON holds, so its two LSNs compare one by one."""
    if isinstance(value, dict) and isinstance(value.get("payload"), dict):
        source = value["payload"].get("source")
        if isinstance(source, dict) and isinstance(source.get("sequence"), str):
            source["sequence"] = json.loads(source["sequence"])
    return value


Captured = tuple[dict[str, list[Any]], dict[str, list[Any]], Any, Any, dict[str, list[Any]], dict[str, list[Any]]]


@pytest.fixture
def captured(tmp_path: Path, logical_database: str, kafka_url: str, kafka_bootstrap: str) -> Captured:
    """Both connectors' records per table (``(key, value)``, JSON), their last offsets and their records' headers:
    ``(ours, theirs, our offset, their offset, our headers, their headers)``."""

    import psycopg

    plain = logical_database.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        for statement in TABLES + BEFORE_SNAPSHOT:
            conn.execute(statement)  # type: ignore[arg-type]
    group = f"dbz-{uuid.uuid4().hex[:8]}"
    ours_cfg = {"name": "cdc", "connector.class": "connect_runtime.connectors.cdc.PostgresCdcSource",
                "connection.url": logical_database, "topic.prefix": PREFIX, "table.include.list": "t,u",
                "slot.name": "ours", "publication.name": "ours_publication", "exactly.once.support": "required",
                "poll.idle.timeout.ms": "300", "transforms": "ours", "transforms.ours.type": "org.apache.kafka.connect.transforms.RegexRouter",
                "transforms.ours.regex": rf"{PREFIX}\.(.*)", "transforms.ours.replacement": "ours.$1",
                **{f"{side}.converter{key}": value for side in ("key", "value")
                   for key, value in ((".schemas.enable", "true"),
                                      ("", "org.apache.kafka.connect.json.JsonConverter"))}}
    ns = f"{PREFIX}"
    with debezium_worker(tmp_path / "worker", kafka_bootstrap, group) as worker:
        worker.rest("PUT", "/connectors/dbz/config",
                    postgres_connector(logical_database, ns, "dbz", "dbz_publication", "public.t,public.u"))

        def counts() -> dict[str, int]:
            return {t: len(topic_events(kafka_url, f"{ns}.public.{t}")) for t in EXPECTED}

        wait_for("Debezium's snapshot (3 rows of t, 2 of u)", counts, lambda c: c == {"t": 2, "u": 2})
        run_source(ours_cfg, kafka_url)
        with psycopg.connect(plain, autocommit=True) as conn:
            for n, statement in enumerate(CHANGES):
                if n == SPLIT:  # a run of ours in the middle: the next run's first lsn_commit is from the offset
                    run_source(ours_cfg, kafka_url)
                conn.execute(statement)  # type: ignore[arg-type]
        wait_for(f"Debezium's records of the changes ({EXPECTED})", counts, lambda c: c == EXPECTED)
        run_source(ours_cfg, kafka_url)
        time.sleep(1.5)  # offset.flush.interval.ms is 500

        def their_offset() -> Any:
            events = topic_events(kafka_url, f"{group}-offsets")
            return next((v for k, v in reversed(events) if k == ["dbz", {"server": ns}]), None)

        theirs_offset = wait_for("Debezium's committed offset of the last change", their_offset,
                                 lambda o: o is not None and "lsn_commit" in o, 60)
    ours = {t: topic_events(kafka_url, f"ours.public.{t}") for t in EXPECTED}
    theirs = {t: topic_events(kafka_url, f"{ns}.public.{t}") for t in EXPECTED}
    return (ours, theirs, committed_offset(kafka_url, "cdc", PREFIX), theirs_offset,
            {t: topic_headers(kafka_url, f"ours.public.{t}") for t in EXPECTED},
            {t: topic_headers(kafka_url, f"{ns}.public.{t}") for t in EXPECTED})


def test_events_match_debeziums_field_by_field(captured: Captured) -> None:
    ours, theirs, our_offset, their_offset, our_headers, their_headers = captured
    found: list[str] = []
    for table in EXPECTED:
        assert len(ours[table]) == len(theirs[table]) == EXPECTED[table], (table, len(ours[table]),
                                                                           len(theirs[table]))
        # the snapshot's rows in any order (ours and Debezium's read the table each its own way)
        n_snap = sum(1 for _, v in theirs[table] if v and v["payload"]["op"] == "r")
        key = lambda e: json.dumps(e[0], sort_keys=True)  # noqa: E731
        pairs = list(zip(sorted(ours[table][:n_snap], key=key), sorted(theirs[table][:n_snap], key=key),
                         strict=True)) + list(zip(ours[table][n_snap:], theirs[table][n_snap:], strict=True))
        for n, ((ok, ov), (tk, tv)) in enumerate(pairs):
            snapshot = bool(tv) and tv["payload"]["op"] == "r"
            for part, a, b in (("key", ok, tk), ("value", _comparable(ov), _comparable(tv))):
                for path, x, y in differences(a, b):
                    if not _allowed(path, snapshot):
                        found.append(f"{table} record {n} {part} {path}: ours {x!r}, Debezium's {y!r}")
    run_ids: set[tuple[bytes | None, bytes | None]] = set()
    for table in EXPECTED:  # the headers, record by record, in order; the run ids are each connector's own
        for n, (oh, th) in enumerate(zip(our_headers[table], their_headers[table], strict=True)):
            run_ids |= {(dict(oh).get(RUN_ID), dict(th).get(RUN_ID))}
            assert [h for h in oh if h[0] != RUN_ID] == [h for h in th if h[0] != RUN_ID], (table, n, oh, th)
    for ours_id, theirs_id in run_ids:
        assert ours_id is not None and theirs_id is not None and len(uuid.UUID(ours_id.decode()).hex) == 32
    key_change = [[h for h in hs if not h[0].startswith("__debezium.context.")] for hs in our_headers["t"][-6:-3]]
    assert key_change == [[("__debezium.newkey", b'{"id":3}')]] * 2 + [[("__debezium.oldkey", b'{"id":2}')]], \
        our_headers["t"]
    assert len(run_ids) == 3, f"one run id per run of ours (three runs), Debezium's one: {run_ids}"
    for path, x, y in differences(our_offset, their_offset):
        if not _allowed(f"offset.{path}"):
            found.append(f"offset {path}: ours {x!r}, Debezium's {y!r}")
    assert not found, "differences from Debezium outside ALLOWED:\n" + "\n".join(found)
