"""PostgresCdcTask: one run's snapshot and stream; the slot advanced after commits only. See docs/cdc.md."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.errors import ConnectError
from connect_runtime.api.records import RecordMetadata, SourceRecord
from connect_runtime.api.source import COMMITTED_BEFORE, NothingRead, SourceTask
from connect_runtime.connectors.cdc import _db
from connect_runtime.connectors.cdc._config import CDC_CONFIG
from connect_runtime.connectors.cdc._events import ColumnInfo, TableEvents
from connect_runtime.connectors.cdc._pgoutput import Relation, lsn_text, parse_lsn
from connect_runtime.connectors.cdc._read import Pos, Snapshot, Stream, now_usec, table_columns
from connect_runtime.connectors.sql._common import build_url, log, safe_url

if TYPE_CHECKING:
    import psycopg

VERSION = "0.1.0"
ADVANCE_EVERY_S = 1.0
"""How often the slot is advanced at most while a stream is read (see ``_advance``)."""


class PostgresCdcTask(SourceTask):
    """Reads the snapshot (when one is due) and then the slot's changes up to the LSN current at ``start``.

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
        self.offset = self.context.offset_storage_reader.offset({"server": self.prefix})
        committed: Pos = (0, 0)
        if self.offset and self.offset.get("lsn_commit") is not None:
            committed = (int(self.offset["lsn_commit"]), int(self.offset.get("event", 1 << 62)))
        self.committed = self.emitted = committed
        self.finished: list[tuple[Pos, int]] = []
        snapshot_due = cfg["snapshot.mode"] == "initial" and (
            not self.offset or (self.offset.get("snapshot") and not self.offset.get("last_snapshot_record")))
        state = _db.slot_state(self.control, self.slot)
        if state is not None and state[0] != self.db:
            raise ConnectError(f"replication slot {self.slot!r} (slot.name) belongs to database {state[0]!r}, this "
                               f"connector reads {self.db!r}: choose another slot.name")
        if state is not None and state[1] != "pgoutput":
            raise ConnectError(f"replication slot {self.slot!r} (slot.name) uses the plugin {state[1]!r}; this "
                               "connector reads pgoutput: choose another slot.name")
        if state is not None and not snapshot_due:
            self._check_not_invalidated()
        if snapshot_due:
            self._begin_snapshot(state is not None)
        elif state is None and self.offset:
            raise ConnectError(
                f"replication slot {self.slot!r} (slot.name) is gone, and this connector has committed offsets "
                f"(lsn {self.offset.get('lsn')}): the changes since cannot be read any more. Delete the connector's "
                "offsets (pyconnect offsets reset) to take a new snapshot")
        elif state is None:
            self.control.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (self.slot,))
            log.info("PostgresCdcSource: created replication slot %s (snapshot.mode=never)", self.slot)
        # flushed WAL only: the peek decodes no further than the flush position, and at the end of the run the slot
        # is confirmed up to here (every transaction committing before it was read)
        self.target = parse_lsn(self.control.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()[0])  # type: ignore[index]
        self.at_target = False
        log.info("PostgresCdcSource: reading %s up to %s (committed: %s)", self.where, lsn_text(self.target),
                 self.offset or "nothing")

    def _check_not_invalidated(self) -> None:
        """A slot the server invalidated (``wal_status`` ``lost``: it held more WAL than ``max_slot_wal_keep_size``
        allows, PostgreSQL 13+) can never be read again: one error naming the slot, why, and the way back."""
        row = self.control.execute("SELECT wal_status FROM pg_replication_slots WHERE slot_name = %s",
                                   (self.slot,)).fetchone()
        if row is not None and row[0] == "unreserved":
            log.warning("PostgresCdcSource: replication slot %s keeps more WAL than max_slot_wal_keep_size allows "
                        "(wal_status unreserved): the next checkpoint may invalidate it; this run reads it now",
                        self.slot)
        if row is not None and row[0] == "lost":
            offset = self.offset or {}
            raise ConnectError(
                f"replication slot {self.slot!r} (slot.name) was invalidated by the server (wal_status lost): it "
                "kept more WAL than max_slot_wal_keep_size allows, so the changes after this connector's committed "
                f"offset (lsn {offset.get('lsn')}) are gone. To start again with a new snapshot: drop the slot "
                f"(SELECT pg_drop_replication_slot('{self.slot}')) and delete the connector's offsets (pyconnect "
                "offsets reset <connector>); to avoid it, run more often or raise max_slot_wal_keep_size "
                "(docs/cdc.md, \"A paused DAG\")")

    # -- the snapshot ---------------------------------------------------------------------------------------

    def _begin_snapshot(self, slot_exists: bool) -> None:
        """A new slot with an exported snapshot (a leftover slot of an unfinished snapshot dropped first), the
        snapshot imported by a ``REPEATABLE READ`` transaction, the tables listed in it."""
        import psycopg
        from psycopg import sql

        if slot_exists:
            _db.when_free(self.control, self.slot, "drop it for a new snapshot")
            self.control.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))
            log.info("PostgresCdcSource: dropped replication slot %s (its snapshot never committed)", self.slot)
        replication = _db.connect(self.cfg, "creating the replication slot", replication=True)
        try:
            command = f'CREATE_REPLICATION_SLOT "{self.slot}" LOGICAL pgoutput EXPORT_SNAPSHOT'.encode()
            res = replication.pgconn.exec_(command)
            if res.status != psycopg.pq.ExecStatus.TUPLES_OK:
                raise ConnectError(f"creating replication slot {self.slot!r} failed: "
                                   f"{(res.error_message or b'').decode(errors='replace').strip()}")
            consistent, snapshot_name = (res.get_value(0, 1) or b"").decode(), (res.get_value(0, 2) or b"").decode()
            conn = self._snapshot_conn = _db.connect(self.cfg, "reading the snapshot")
            conn.autocommit = False
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
        finally:
            replication.close()  # the snapshot lives on in the importing transaction
        xmin = conn.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint").fetchone()[0]  # type: ignore[index]
        rows = conn.execute("SELECT c.oid::int, n.nspname, c.relname FROM pg_publication_tables p "
                            "JOIN pg_namespace n ON n.nspname = p.schemaname "
                            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename "
                            "WHERE p.pubname = %s ORDER BY 2, 3", (self.publication,)).fetchall()
        tables = [(oid, self._events(schema, name, table_columns(conn, oid))) for oid, schema, name in rows
                  if not self.include or f"{schema}.{name}" in self.include]
        self.snapshot = Snapshot(conn, tables, parse_lsn(consistent), int(xmin), now_usec())
        log.info("PostgresCdcSource: created replication slot %s at %s; snapshot of %d table(s): %s", self.slot,
                 consistent, len(tables), ", ".join(f"{t.schema_name}.{t.table}" for _, t in tables)[:500])

    def _events(self, schema: str, table: str, columns: list[ColumnInfo]) -> TableEvents:
        return TableEvents(self.prefix, self.db, schema, table, columns)

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
            return records or None
        if self.stream is None:
            if self.target == 0:
                return None
            self._open_stream()
        assert self.stream is not None
        if self.stream.exhausted:
            self._advance()
            if not self.at_target and self.emitted <= self.committed:
                # everything up to the target was read and all of it is committed: transactions the stream never
                # showed (other tables only) are behind the slot too, so it does not hold their WAL
                _db.advance(self.control, self.slot, self.target)
                self.at_target = True
            import time

            time.sleep(0.05)
            return None
        records = self.stream.batch(self.batch, self.positions)
        self.emitted = self.stream.emitted
        self.finished.extend(self.stream.finished)
        self.stream.finished.clear()
        if txn is not None and records:
            txn.commit_transaction()
        self._advance()  # transactions with nothing (left) to write, once all before them are committed
        return records or None

    def _open_stream(self) -> None:
        _db.when_free(self.control, self.slot, "read it")
        conn = self._stream_conn = _db.connect(self.cfg, "reading the slot's changes")
        conn.autocommit = False
        self.stream = Stream(conn, self.slot, self.publication, self.target, self.committed, self._table_for)

    def _end_snapshot(self) -> None:
        conn, self._snapshot_conn, self.snapshot = self._snapshot_conn, None, None
        if conn is not None:
            conn.close()

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None = None) -> None:
        """KIP-416: ``record`` is in a committed transaction (``metadata`` None: filtered, still committed)."""
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



__all__ = ["PostgresCdcTask"]
