"""PostgresCdcTask: one run's snapshot and stream; the slot advanced after commits only. See docs/cdc.md."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.errors import ConnectError
from connect_runtime.api.records import RecordMetadata, SourceRecord
from connect_runtime.api.source import COMMITTED_BEFORE, NothingRead, SourceTask
from connect_runtime.connectors.cdc import _db
from connect_runtime.connectors.cdc._config import CDC_CONFIG, snapshot_mode
from connect_runtime.connectors.cdc._events import (
    TX_COMMIT_LSN,
    TX_END_LSN,
    ColumnInfo,
    TableEvents,
    context_headers,
)
from connect_runtime.connectors.cdc._heartbeat import heartbeat, moved_offset
from connect_runtime.connectors.cdc._pgoutput import Relation, lsn_text, parse_lsn
from connect_runtime.connectors.cdc._read import Pos, Snapshot, Stream, now_usec, table_columns
from connect_runtime.connectors.sql._common import build_url, log, safe_url

if TYPE_CHECKING:
    import psycopg

VERSION = "0.1.0"
ADVANCE_EVERY_S = 1.0
"""How often the slot is advanced at most while a stream is read (see ``_advance``)."""


def committed_position(offset: Mapping[str, Any] | None) -> tuple[Pos, tuple[int | None, int | None]]:
    """The position a committed offset covers up to (``(commit LSN of its transaction, event)``; ``(0, 0)`` for
    none or a snapshot's) and what it says of the transactions before the next one: ``(lsn_commit, end LSN of its
    transaction)``, Debezium's ``lsn_commit`` of the next transaction being that end when it was read to its end.

    Two shapes: this version's (``tx_commit_lsn`` and ``event``; ``lsn_commit`` Debezium's, the end of the
    transaction before) and the previous version's (no ``tx_commit_lsn``: ``lsn_commit`` was the transaction's own
    commit LSN, with ``event``), which is read as it was written; what came before it is not known then."""
    if not offset or offset.get("snapshot"):
        return (0, 0), (None, None)
    event = int(offset.get("event", 1 << 62))
    if offset.get(TX_COMMIT_LSN) is not None:
        lsn_commit, end = offset.get("lsn_commit"), offset.get(TX_END_LSN)
        return ((int(offset[TX_COMMIT_LSN]), event),
                (None if lsn_commit is None else int(lsn_commit), None if end is None else int(end)))
    if offset.get("lsn_commit") is not None:  # the previous version's shape
        return (int(offset["lsn_commit"]), event), (None, None)
    return (0, 0), (None, None)


class PostgresCdcTask(SourceTask):
    """Reads the snapshot (when ``snapshot.mode`` makes one due) and then the slot's changes up to the LSN current at
    ``start``; with heartbeats on, Debezium's heartbeat records (docs/cdc.md, "Heartbeats").

    ``commit_record(record, metadata)`` (KIP-416; the runtime calls it after the record's transaction committed)
    records how far the committed records reach; ``commit()``, which follows in the same commit, advances the slot
    to the end of every transaction whose records are all committed: once per commit, never from ``poll`` for a
    record that is not committed, never backwards."""

    VERSION = VERSION
    _advanced_at = 0.0

    def start(self, props: Mapping[str, str]) -> None:
        cfg = CDC_CONFIG.parse(props)
        self.cfg = cfg
        self.prefix: str = cfg["topic.prefix"]
        self.slot: str = cfg["slot.name"]
        self.publication: str = cfg["publication.name"]
        self.batch: int = cfg["batch.max.rows"]
        # one task (a slot has one reader): task 0, as Debezium's; a new run id per run, as per task start there
        self.headers = context_headers(self.prefix, 0, str(uuid.uuid4())) if cfg["extended.headers.enabled"] else []
        self.include = {t if "." in t else f"public.{t}" for t in cfg["table.include.list"]}
        self.where = f"slot {self.slot} on {safe_url(build_url(cfg))}"
        self.control = _db.connect(cfg, "reading the replication slot")
        self.db: str = self.control.info.dbname
        self.positions: dict[int, Pos] = {}
        self.snapshot: Snapshot | None = None
        self.stream: Stream | None = None
        self._snapshot_conn: psycopg.Connection[Any] | None = None
        self._stream_conn: psycopg.Connection[Any] | None = None
        self.tables: dict[tuple[int, tuple[Any, ...]], TableEvents | None] = {}
        self.beat_prefix: str = cfg["topic.heartbeat.prefix"]
        self.offset = self.context.offset_storage_reader.offset({"server": self.prefix})
        committed, self.before = committed_position(self.offset)
        self.committed = self.emitted = committed
        self.finished: list[tuple[Pos, int]] = []
        self.mode = snapshot_mode(cfg)
        if cfg["snapshot.mode"] == "never":
            log.warning("PostgresCdcSource: snapshot.mode=never is deprecated (Debezium 3.6 no longer accepts it): "
                        "it reads as no_data")
        self.beat_ms: int = cfg["heartbeat.interval.ms"] if self.mode != "initial_only" else 0
        self.last_offset: dict[str, Any] | None = dict(self.offset) if self.offset else None
        self.last_beat = time.monotonic()
        self.marker: SourceRecord | None = None
        """``when_needed``'s heartbeat marking a snapshot begun, committed before the slot is dropped."""
        self._marker_sent = self._marker_committed = self._beat_done = False
        self.target = 0
        self.at_target = False
        unfinished = not self.offset or bool(self.offset.get("snapshot") and not self.offset.get("last_snapshot_record"))
        if self.mode == "initial_only" and not unfinished:
            self.done_only = True  # the snapshot was committed by an earlier run: nothing more, ever
            log.info("PostgresCdcSource: snapshot.mode=initial_only and the snapshot was committed (offset %s): "
                     "nothing to read", self.offset)
            return
        self.done_only = False
        if self.mode == "initial_only":  # no slot: nothing is streamed after it
            self._begin_snapshot(False, slot=False)
            return
        snapshot_due = self.mode == "always" or (self.mode != "no_data" and unfinished)
        state = _db.slot_state(self.control, self.slot)
        if state is not None and state[0] != self.db:
            raise ConnectError(f"replication slot {self.slot!r} (slot.name) belongs to database {state[0]!r}, this "
                               f"connector reads {self.db!r}: choose another slot.name")
        if state is not None and state[1] != "pgoutput":
            raise ConnectError(f"replication slot {self.slot!r} (slot.name) uses the plugin {state[1]!r}; this "
                               "connector reads pgoutput: choose another slot.name")
        if self.mode == "when_needed" and not snapshot_due and (state is None or self._wal_status() == "lost"):
            self._needs_new_snapshot(state is None)
        elif state is not None and not snapshot_due:
            self._check_not_invalidated()
        self._run_action_query()
        if self.marker is not None:
            return  # the snapshot begins once the marker is committed (poll)
        if snapshot_due:
            self._begin_snapshot(state is not None)
        elif state is None and self.offset:
            raise ConnectError(
                f"replication slot {self.slot!r} (slot.name) is gone, and this connector has committed offsets "
                f"(lsn {self.offset.get('lsn')}): the changes since cannot be read any more. Delete the connector's "
                "offsets (pyconnect offsets reset) to take a new snapshot, or set snapshot.mode=when_needed")
        elif state is None:
            self.control.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (self.slot,))
            log.info("PostgresCdcSource: created replication slot %s (snapshot.mode=%s)", self.slot, self.mode)
        self._take_target()

    def _take_target(self) -> None:
        # flushed WAL only: the peek decodes no further than the flush position, and at the end of the run the slot
        # is confirmed up to here (every transaction committing before it was read)
        self.target = parse_lsn(self.control.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0])  # type: ignore[index]
        log.info("PostgresCdcSource: reading %s up to %s (committed: %s)", self.where, lsn_text(self.target),
                 self.offset or "nothing")

    def _wal_status(self) -> str | None:
        row = self.control.execute("SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s",
                                   (self.slot,)).fetchone()
        return None if row is None else row[0]

    def _needs_new_snapshot(self, gone: bool) -> None:
        """``when_needed`` and the slot is gone or invalidated under committed offsets: a new snapshot, said loudly.
        A heartbeat record whose offset marks a snapshot begun is committed first (the marker), so a run killed
        between dropping the slot and committing the snapshot leaves an unfinished snapshot, which the next run
        takes again, rather than a new slot the old offsets would stream from."""
        offset = self.offset or {}
        log.warning("PostgresCdcSource: replication slot %s (slot.name) is %s, and this connector has committed "
                    "offsets (lsn %s); snapshot.mode=when_needed: taking a new snapshot. The changes between that "
                    "offset and the new snapshot were not captured one by one (a row deleted in between is in no "
                    "event; the snapshot shows the rows as they are now)", self.slot,
                    "gone" if gone else "invalidated by the server (wal_status lost)", offset.get("lsn"))
        marker_offset = {k: v for k, v in offset.items() if k in ("lsn", "txId", "ts_usec")}
        marker_offset.update(snapshot=True, last_snapshot_record=False)
        self.marker = heartbeat(self.beat_prefix, self.prefix, marker_offset)
        self.committed = self.emitted = (0, 0)

    def _run_action_query(self) -> None:
        """Debezium's ``heartbeat.action.query``, once, before the run takes its target LSN (so what it writes is
        read by this run); only with heartbeats on, as Debezium."""
        query = self.cfg["heartbeat.action.query"]
        if not self.beat_ms or not query or not str(query).strip():
            return
        import psycopg

        try:
            self.control.execute(str(query))
        except psycopg.Error as exc:
            raise ConnectError(f"heartbeat.action.query failed on {self.where}: {str(exc).strip()}") from None
        log.info("PostgresCdcSource: ran heartbeat.action.query")

    def _check_not_invalidated(self) -> None:
        """A slot the server invalidated (``wal_status`` ``lost``: it held more WAL than ``max_slot_wal_keep_size``
        allows, PostgreSQL 13+) can never be read again: one error naming the slot, why, and the way back."""
        status = self._wal_status()
        if status == "unreserved":
            log.warning("PostgresCdcSource: replication slot %s keeps more WAL than max_slot_wal_keep_size allows "
                        "(wal_status unreserved): the next checkpoint may invalidate it; this run reads it now",
                        self.slot)
        if status == "lost":
            offset = self.offset or {}
            raise ConnectError(
                f"replication slot {self.slot!r} (slot.name) was invalidated by the server (wal_status lost): it "
                "kept more WAL than max_slot_wal_keep_size allows, so the changes after this connector's committed "
                f"offset (lsn {offset.get('lsn')}) are gone. To start again with a new snapshot: drop the slot "
                f"(SELECT pg_drop_replication_slot('{self.slot}')) and delete the connector's offsets (pyconnect "
                "offsets reset <connector>), or let snapshot.mode=when_needed do it; to avoid it, run more often or "
                "raise max_slot_wal_keep_size (docs/cdc.md, \"A paused DAG\")")

    # -- the snapshot ---------------------------------------------------------------------------------------

    def _begin_snapshot(self, slot_exists: bool, *, slot: bool = True) -> None:
        """A new slot with an exported snapshot (a slot of that name dropped first: an unfinished snapshot's,
        ``always``'s previous one, ``when_needed``'s invalidated one), the snapshot imported by a ``REPEATABLE READ``
        transaction, the tables listed in it. ``slot=False`` (``initial_only``): no slot, the transaction's own
        snapshot at the WAL position current in it."""
        import psycopg
        from psycopg import sql

        self.committed = self.emitted = (0, 0)  # the snapshot's positions; the stream after it starts afresh
        if not slot:
            conn = self._snapshot_connection()
            consistent = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
            self._list_tables(conn, consistent)
            return
        if slot_exists:
            _db.when_free(self.control, self.slot, "drop it for a new snapshot")
            self.control.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
            log.info("PostgresCdcSource: dropped replication slot %s (%s)", self.slot,
                     "snapshot.mode=always" if self.mode == "always" else
                     "snapshot.mode=when_needed" if self.offset and not self.offset.get("snapshot") else
                     "its snapshot never committed")
        replication = _db.connect(self.cfg, "creating the replication slot", replication=True)
        try:
            command = f'CREATE_REPLICATION_SLOT "{self.slot}" LOGICAL pgoutput EXPORT_SNAPSHOT'.encode()
            res = replication.pgconn.exec_(command)
            if res.status != psycopg.pq.ExecStatus.TUPLES_OK:
                raise ConnectError(f"creating replication slot {self.slot!r} failed: "
                                   f"{(res.error_message or b'').decode(errors='replace').strip()}")
            consistent, snapshot_name = (res.get_value(0, 1) or b"").decode(), (res.get_value(0, 2) or b"").decode()
            conn = self._snapshot_connection()
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
        finally:
            replication.close()  # the snapshot lives on in the importing transaction
        self._list_tables(conn, consistent)

    def _snapshot_connection(self) -> psycopg.Connection[Any]:
        """The snapshot's own connection: one read-only ``REPEATABLE READ`` transaction (kept as ``_snapshot_conn``)."""
        import psycopg

        conn = self._snapshot_conn = _db.connect(self.cfg, "reading the snapshot")
        conn.autocommit = False
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        return conn

    def _list_tables(self, conn: psycopg.Connection[Any], consistent: str) -> None:
        xmin = conn.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint").fetchone()[0]  # type: ignore[index]
        rows = conn.execute("SELECT c.oid::int, n.nspname, c.relname FROM pg_publication_tables p "
                            "JOIN pg_namespace n ON n.nspname = p.schemaname "
                            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename "
                            "WHERE p.pubname = %s ORDER BY 2, 3", (self.publication,)).fetchall()
        tables = [(oid, self._events(schema, name, table_columns(conn, oid))) for oid, schema, name in rows
                  if not self.include or f"{schema}.{name}" in self.include]
        self.snapshot = Snapshot(conn, tables, parse_lsn(consistent), int(xmin), now_usec())
        log.info("PostgresCdcSource: %s at %s; snapshot of %d table(s): %s",
                 f"created replication slot {self.slot}" if self.mode != "initial_only" else "initial_only (no slot)",
                 consistent, len(tables), ", ".join(f"{t.schema_name}.{t.table}" for _, t in tables)[:500])

    def _events(self, schema: str, table: str, columns: list[ColumnInfo]) -> TableEvents:
        return TableEvents(self.prefix, self.db, schema, table, columns, self.headers)

    def _table_for(self, rel: Relation) -> TableEvents | None:
        """The events of a Relation message's table (None for a table not captured): its columns as the message
        says, with ``NOT NULL`` and the primary key from the catalog."""
        ident = (rel.relation_id, rel.columns)
        if ident not in self.tables:
            name = f"{rel.namespace or 'pg_catalog'}.{rel.name}"
            events = None
            if not self.include or name in self.include:
                catalog = {c.name: c for c in table_columns(self.control, rel.relation_id)}
                cols = [ColumnInfo(c.name, c.type_oid, c.type_modifier,
                                   catalog[c.name].optional if c.name in catalog else True,
                                   catalog[c.name].key if c.name in catalog else False) for c in rel.columns]
                events = self._events(rel.namespace or "pg_catalog", rel.name, cols)
            self.tables[ident] = events
        return self.tables[ident]

    # -- the loop -------------------------------------------------------------------------------------------

    def poll(self) -> list[SourceRecord] | None:
        txn = self.context.transaction_context
        if self.done_only:
            return None
        if self.marker is not None:
            return self._marker_then_snapshot(txn)
        if self.snapshot is not None:
            # all-or-nothing: one transaction (connector boundary: commit after the last record; else one poll)
            records = self.snapshot.batch(self.batch if txn is not None else None, self.positions)
            if self.snapshot.done:
                log.info("PostgresCdcSource: snapshot read, %d record(s)", self.snapshot.count)
                self._end_snapshot()
                if txn is not None and records:
                    txn.commit_transaction()
            if records:
                self.emitted = self.positions[id(records[-1])]
                self.last_offset = dict(records[-1].source_offset or {})
            return records or None
        if self.stream is None:
            if self.target == 0:
                return None
            self._open_stream()
        assert self.stream is not None
        if self.stream.exhausted:
            self._advance()
            if not self.at_target and self.emitted <= self.committed:
                beat = self._end_beat()
                if beat is not None:  # committed first; the next poll confirms the slot
                    if txn is not None:
                        txn.commit_transaction()
                    return [beat]
                # everything up to the target was read and all of it is committed: transactions the stream never
                # showed (other tables only) are behind the slot too, so it does not hold their WAL
                _db.advance(self.control, self.slot, self.target)
                self.at_target = True
            time.sleep(0.05)
            return None
        records = self.stream.batch(self.batch, self.positions)
        self.emitted = self.stream.emitted
        self.finished.extend(self.stream.finished)
        self.stream.finished.clear()
        if records:
            self.last_offset = dict(records[-1].source_offset or {})
            if self.beat_ms and (time.monotonic() - self.last_beat) * 1000 >= self.beat_ms:
                beat = heartbeat(self.beat_prefix, self.prefix, self.last_offset)
                self.positions[id(beat)] = self.emitted
                records.append(beat)
                self.last_beat = time.monotonic()
        if txn is not None and records:
            txn.commit_transaction()
        self._advance()  # transactions with nothing (left) to write, once all before them are committed
        return records or None

    def _end_beat(self) -> SourceRecord | None:
        """With heartbeats on, once per run: a heartbeat at the target LSN when the offset is behind it (the run read
        transactions with nothing to write, or none: an idle captured database), so the committed offset moves."""
        if not self.beat_ms or self._beat_done:
            return None
        self._beat_done = True
        if self.last_offset is not None and int(self.last_offset.get("lsn", 0)) >= self.target:
            return None
        self.last_offset = moved_offset(self.last_offset, self.target)
        beat = heartbeat(self.beat_prefix, self.prefix, self.last_offset)
        self.positions[id(beat)] = self.emitted = max(self.emitted, (self.target, 0))
        self.last_beat = time.monotonic()
        return beat

    def _marker_then_snapshot(self, txn: Any) -> list[SourceRecord] | None:
        """``when_needed`` after a lost slot: the marker first (its own transaction), the snapshot once it is
        committed."""
        assert self.marker is not None
        if not self._marker_sent:
            self._marker_sent = True
            if txn is not None:
                txn.commit_transaction()
            return [self.marker]
        if not self._marker_committed:
            time.sleep(0.05)
            return None
        self.marker = None
        self._begin_snapshot(_db.slot_state(self.control, self.slot) is not None)
        self._take_target()
        return self.poll()  # the snapshot's first batch

    def _open_stream(self) -> None:
        _db.when_free(self.control, self.slot, "read it")
        conn = self._stream_conn = _db.connect(self.cfg, "reading the slot's changes")
        conn.autocommit = False
        self.stream = Stream(conn, self.slot, self.publication, self.target, self.committed, self._table_for,
                             self.before)

    def _end_snapshot(self) -> None:
        conn, self._snapshot_conn, self.snapshot = self._snapshot_conn, None, None
        if conn is not None:
            conn.close()

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None = None) -> None:
        """KIP-416: ``record`` is in a committed transaction (``metadata`` None: filtered, still committed)."""
        if record is self.marker:
            self._marker_committed = True
        pos = self.positions.pop(id(record), None)
        if pos is not None and pos > self.committed:
            self.committed = pos

    def commit(self) -> None:
        """After a commit (its ``commit_record`` calls came first): the slot to the end of every transaction whose
        records are all committed."""
        self._advance()

    def _advance(self) -> None:
        """The slot to the end of every finished transaction whose records are all committed: mid-stream at most
        every ``ADVANCE_EVERY_S`` (each is a round trip in which the server decodes the WAL passed over; a slot
        behind the committed offset only means the next run skips those changes again), once read, every time."""
        stream = self.stream
        if stream is not None and not stream.exhausted and time.monotonic() < self._advanced_at + ADVANCE_EVERY_S:
            return
        done = [end for needs, end in self.finished if needs <= self.committed]
        if not done:
            return
        self._advanced_at = time.monotonic()
        self.finished = [(needs, end) for needs, end in self.finished if needs > self.committed]
        _db.advance(self.control, self.slot, max(done))

    def nothing_read(self) -> NothingRead | None:
        where = f"{self.where}, publication {self.publication}"
        if getattr(self, "done_only", False):
            return NothingRead(where, COMMITTED_BEFORE, "snapshot.mode=initial_only: the snapshot was committed by "
                                                        "an earlier run, and this mode streams nothing")
        if getattr(self, "offset", None):
            return NothingRead(where, COMMITTED_BEFORE, "no change past the committed offset")
        return NothingRead(where, detail="no row and no change")

    def stop(self) -> None:
        for name in ("_snapshot_conn", "_stream_conn", "control"):
            conn = getattr(self, name, None)
            if conn is not None:
                try:
                    conn.close()
                except Exception as exc:
                    log.debug("PostgresCdcSource: closing a connection raised %r", exc)



__all__ = ["PostgresCdcTask", "committed_position"]
