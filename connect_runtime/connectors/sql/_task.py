"""SqlSinkTask: the ``open`` / ``put`` / ``pre_commit`` / ``close`` loop of SqlSink, delegating: rows are
buffered (:mod:`._buffer`) and written (:mod:`._writer`) into tables managed by :mod:`._tables`, inside one
database transaction per commit point that also stores the next offsets, fenced by generation
(:mod:`._fence`). A database that goes away is ridden out here: roll back, deliver again from the last
commit, at most ``max.retries`` times in a row."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

from connect_runtime.api.errors import ConnectError, DataError, ProducerFencedError, RetriableError
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.api.sink import SinkTask
from connect_runtime.connectors.sql._buffer import Buffer
from connect_runtime.connectors.sql._common import VERSION, connect, create_engine, log, safe_url
from connect_runtime.connectors.sql._config import SINK_CONFIG, connector_name
from connect_runtime.connectors.sql._errors import db_error, transient
from connect_runtime.connectors.sql._fence import SinkOffsets, create_offsets_table, offsets_table
from connect_runtime.connectors.sql._tables import Tables
from connect_runtime.connectors.sql._writer import Writer

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine
    from sqlalchemy.engine import RootTransaction


class SqlSinkTask(SinkTask):
    """See the package docstring: rows and offsets in one transaction per commit point, ``pre_commit`` → {}."""

    VERSION = VERSION

    def start(self, props: Mapping[str, str]) -> None:
        self.cfg = SINK_CONFIG.parse(props)
        self.connector = connector_name(props)
        self.engine: Engine = create_engine(self.cfg, serializable_sqlite=True)
        self.conn: Connection | None = None
        self.txn: RootTransaction | None = None
        self.tables = Tables(self.cfg, self.engine, self._db_error, self._commit_written, self._begin)
        self.buffer = Buffer(self.cfg, self._write, self._report)
        self.writer = Writer(self.cfg, self.tables, self.engine.url, self._report)
        self.committed: dict[TopicPartition, int] = {}  # next offset stored in the destination
        self.fenced: ProducerFencedError | None = None
        self.offsets = SinkOffsets(offsets_table(self.cfg), self.connector)
        self.max_retries: int = self.cfg["max.retries"]
        self.backoff_ms: int = self.cfg["retry.backoff.ms"]
        self.retries = 0  # transient database failures in a row
        self.lost: RetriableError | None = None  # the open transaction was lost: deliver again from the last commit
        self.failed: ConnectError | None = None  # max.retries ran out

    def _connection(self) -> Connection:
        if self.conn is None:
            # after a lost connection, one attempt: the retries are the sink's (max.retries, retry.backoff.ms)
            self.conn = connect(self.engine, self.cfg, "writing rows", attempts=1 if self.retries else None)
            copy = self.writer.copy = self.conn.dialect.name == "postgresql" and self.conn.dialect.driver == "psycopg"
            self.tables.copy_json = copy and self.writer.mode == "insert"  # COPY takes JSON columns as JSON text
        return self.conn

    def open(self, partitions: list[TopicPartition]) -> None:
        """Claim the partitions for this generation (fencing older runs) and rewind to the stored offsets."""
        parts = [TopicPartition(*tp) for tp in partitions]
        if not parts:
            return
        conn = self._connection()
        try:
            create_offsets_table(conn, self.offsets.table)
        except Exception as exc:
            raise self._db_error("creating the offsets table", exc) from exc
        try:
            stored = self.offsets.claim(conn, parts, self.context.generation)
        except ProducerFencedError:
            raise
        except Exception as exc:
            raise self._db_error("claiming the offsets rows", exc) from exc
        rewind = {tp: nxt for tp, nxt in stored.items() if nxt is not None}
        for tp, nxt in rewind.items():
            self.committed[tp] = self.buffer.written[tp] = nxt
        if rewind:
            log.info("SqlSink %s (generation %d): resuming at %s", self.connector, self.context.generation,
                     {f"{tp.topic}-{tp.partition}": o for tp, o in rewind.items()})
            self.context.offset(rewind)

    def put(self, records: list[SinkRecord]) -> None:
        if self.fenced is not None:
            raise self.fenced
        if self.failed is not None:
            raise self.failed
        if not records or self.lost is not None:
            return  # after a lost transaction: these come again once the runtime rewinds to the last commit
        try:
            self.buffer.add(records)
        except Exception as exc:
            if not transient(exc):
                raise
            self._lose(exc, "writing rows")

    def _lose(self, exc: BaseException, what: str) -> None:
        """The database went away under the open transaction (a restart, a dropped connection): what it held is
        gone. Roll back, drop the connection and, within ``max.retries``, have the runtime deliver again from
        the last commit after ``retry.backoff.ms`` (``pre_commit`` raises :attr:`lost`; ``put`` ignores records
        until then). Past ``max.retries``, fail naming the server."""
        self._rollback()
        self._drop_connection()
        self.retries += 1
        err = self._db_error(what, exc)
        if self.retries > self.max_retries:
            self.failed = ConnectError(f"{err}; gave up after {self.max_retries} retries (max.retries) "
                                       f"{self.backoff_ms} ms apart (retry.backoff.ms)")
            raise self.failed from exc
        self.lost = RetriableError(f"{err}; retry {self.retries} of {self.max_retries} (max.retries) in "
                                   f"{self.backoff_ms} ms, delivering again from the last commit")
        self.context.offset(dict(self.committed))  # exactly where the destination stands
        self.context.timeout(self.backoff_ms)
        self.context.request_commit()

    def _report(self, r: SinkRecord, err: Exception) -> None:
        reporter = self.context.errant_record_reporter
        if reporter is None:
            raise err
        reporter.report(r, err)

    # -- writing --------------------------------------------------------------------------------------

    def _begin(self) -> Connection:
        conn = self._connection()
        if self.txn is None:
            self.txn = conn.begin()
        return conn

    def _write(self) -> None:
        """Write the buffer inside the open transaction (:class:`Writer`)."""
        runs = self.buffer.take()
        if runs:
            self.writer.write(self._begin(), runs)

    def _commit_offsets(self, connection: Callable[[], Connection], offsets: Mapping[TopicPartition, int],
                        changed: Mapping[TopicPartition, int], what: str) -> None:
        """The commit step: lock the offsets rows of ``offsets`` (fenced by a newer generation), store the
        ``changed`` ones in the open transaction with its rows, commit; on any failure roll it all back."""
        try:
            conn = connection()
            stored = self.offsets.lock(conn, list(offsets), self.context.generation)
            self.offsets.store(conn, changed, stored, self.context.generation)
            assert self.txn is not None
            self.txn.commit()
            self.txn = None
        except BaseException as exc:  # an interrupt too: the transaction is rolled back, never left half done
            self._rollback()
            if isinstance(exc, ProducerFencedError):
                self.fenced = exc
                raise
            if isinstance(exc, (DataError, ConnectError)):
                raise
            raise self._db_error(what, exc) from exc

    def _commit_written(self, conn: Connection) -> None:
        """Commit the open transaction early (before DDL that other tasks may race on): the rows written so
        far and, with them, the offsets after them; fenced as at a commit point. A new transaction begins
        with the next write."""
        offsets = self.writer.written_offsets(self.buffer.written)
        changed = {tp: off for tp, off in offsets.items() if self.committed.get(tp) != off}
        self._commit_offsets(lambda: conn, offsets, changed, "committing rows and offsets before auto.evolve")
        self.committed.update(changed)
        log.info("SqlSink %s: committed the rows written so far before changing a table (offsets %s)",
                 self.connector, {f"{tp.topic}-{tp.partition}": o for tp, o in changed.items()})

    # -- commit points --------------------------------------------------------------------------------

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Write what is buffered, store the offsets in the same transaction, commit. Returns ``{}``: the
        offsets table is the only truth, the consumer group commits nothing."""
        if self.fenced is not None:
            raise self.fenced
        if self.failed is not None:
            raise self.failed
        if self.lost is not None:
            lost = self.lost
            self.lost = None
            raise lost  # the runtime rewinds (to self.committed: context.offset) and delivers again
        target = {TopicPartition(*tp): off for tp, off in current_offsets.items()}
        changed = {tp: off for tp, off in target.items() if self.committed.get(tp) != off}
        if not changed and not self.buffer.runs and self.txn is None:
            return {}
        def write_then_begin() -> Connection:
            self._write()
            return self._begin()

        try:
            self._commit_offsets(write_then_begin, target, changed, "committing rows and offsets")
        except Exception as exc:
            if not transient(exc):
                raise
            self._lose(exc, "committing rows and offsets")  # sets self.lost (or raises when max.retries ran out)
            again = cast("RetriableError", self.lost)
            self.lost = None
            raise again from exc
        self.retries = 0
        self.committed.update(changed)
        written = self.buffer.written
        for tp, off in changed.items():
            if written.get(tp, -1) < off:
                written[tp] = off
        return {}

    def _rollback(self) -> None:
        """Forget the open transaction: nothing of it was committed; redelivered records are written again."""
        txn, self.txn = self.txn, None
        self.buffer.discard(self.committed)
        if txn is not None:
            try:
                txn.rollback()
            except Exception as exc:
                (log.debug if transient(exc) else log.warning)("SqlSink: rollback raised %r; dropping the "
                                                                 "connection", exc)
                self._drop_connection()
        self.tables.forget()  # DDL of the transaction (auto.create/evolve) was rolled back too

    def _drop_connection(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:
                log.debug("SqlSink: closing the connection raised %r", exc)

    def _db_error(self, what: str, exc: BaseException) -> ConnectError:
        return db_error(self.connector, f"{what} on {safe_url(self.engine.url)}", self.engine.url, exc)

    def close(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            tp = TopicPartition(*tp)
            self.buffer.written.pop(tp, None)
            self.committed.pop(tp, None)
        if self.txn is not None and not self.buffer.written:
            self._rollback()

    def stop(self) -> None:
        if self.txn is not None:
            self._rollback()
        self._drop_connection()
        self.engine.dispose()


__all__ = ["SqlSinkTask"]
