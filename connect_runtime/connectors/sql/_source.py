"""SqlSource: tables (or one query) of any SQLAlchemy database into topics. See the package docstring."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from connect_runtime.api.config import (
    ConfigDef,
    ConfigValue,
    Importance,
    Range,
    Type,
    ValidString,
)
from connect_runtime.api.connector import ConnectorTransactionBoundaries, ExactlyOnceSupport, SourceConnector
from connect_runtime.api.errors import ConfigError, ConnectError
from connect_runtime.api.records import SourceRecord
from connect_runtime.api.source import COMMITTED_BEFORE, NothingRead, SourceTask
from connect_runtime.connectors.sql._common import (
    VERSION,
    build_url,
    connect,
    connection_fields,
    create_engine,
    log,
    parse_instant,
    safe_url,
)
from connect_runtime.connectors.sql._reader import ConnectionLost, Reader, discover, needs_inc, needs_ts

if TYPE_CHECKING:
    from sqlalchemy import Connection

MODES = ("bulk", "incrementing", "timestamp", "timestamp+incrementing")

SOURCE_CONFIG = (
    connection_fields(ConfigDef())
    .define("mode", Type.STRING, default="bulk", validator=ValidString.in_(*MODES), importance=Importance.HIGH,
            doc="bulk: the whole table every run; incrementing: new rows by a strictly increasing column; "
                "timestamp: new or changed rows by a timestamp column; timestamp+incrementing: both (exact).")
    .define("table.include.list", Type.LIST, default=[],
            doc="Tables to read (name or schema.name); default: every table of the default schema.")
    .define("table.exclude.list", Type.LIST, default=[], doc="Tables not to read.")
    .define("query", Type.STRING, default=None,
            doc="Read this SELECT instead of tables (wrapped as a subquery; mode conditions are added).")
    .define("incrementing.column.name", Type.STRING, default=None, doc="Strictly increasing integer column.")
    .define("timestamp.column.name", Type.STRING, default=None, doc="Timestamp column (modification time).")
    .define("topic.prefix", Type.STRING, default="", importance=Importance.HIGH,
            doc="Topic = prefix + table name (query mode: the prefix is the topic).")
    .define("batch.max.rows", Type.INT, default=100, validator=Range.at_least(1),
            doc="Rows per poll at most (a group of rows sharing a timestamp may span polls).")
    .define("timestamp.delay.interval.ms", Type.LONG, default=0, validator=Range.at_least(0),
            doc="Read only rows whose timestamp is at least this old (lets slow transactions commit first).")
    .define("poll.interval.ms", Type.LONG, default=5000, validator=Range.at_least(0),
            doc="How often a table is queried again for new rows while the run goes on.")
    .define("interval.start", Type.STRING, default=None,
            doc="Interval mode (Airflow data interval): read only rows with timestamp >= this instant.")
    .define("interval.end", Type.STRING, default=None,
            doc="Interval mode: read only rows with timestamp < this instant.")
)

_TASK_CONFIG = SOURCE_CONFIG.merge(ConfigDef().define("tables", Type.STRING, doc="JSON list of this task's tables."))


def _cross_check(cfg: Mapping[str, Any]) -> dict[str, str]:
    """Errors between fields (each named), beyond what each field's validator checks."""
    errors: dict[str, str] = {}
    mode = str(cfg["mode"]).lower()
    if needs_ts(mode) and not cfg.get("timestamp.column.name"):
        errors["timestamp.column.name"] = f"a column name (mode={mode} needs one)"
    if needs_inc(mode) and not cfg.get("incrementing.column.name"):
        errors["incrementing.column.name"] = f"a column name (mode={mode} needs one)"
    if cfg.get("query") and (cfg.get("table.include.list") or cfg.get("table.exclude.list")):
        errors["query"] = "either query or table.include.list/table.exclude.list, not both"
    start, end = cfg.get("interval.start"), cfg.get("interval.end")
    if (start is None) != (end is None):
        errors["interval.start" if start is None else "interval.end"] = "both interval.start and interval.end, or neither"
    elif start is not None:
        if not needs_ts(mode):
            errors["mode"] = "timestamp or timestamp+incrementing (interval.start/end select rows by the timestamp column)"
        try:
            if parse_instant("interval.start", str(start)) >= parse_instant("interval.end", str(end)):
                errors["interval.end"] = f"an instant after interval.start ({start}), got {end!r}"
        except ConfigError as exc:
            errors.update(exc.errors)
    return errors


class SqlSource(SourceConnector):
    """Plans the tables of a database over at most ``tasks.max`` tasks (round-robin, name order)."""

    VERSION = VERSION

    def config_def(self) -> ConfigDef:
        return SOURCE_CONFIG

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        values = super().validate(props)
        if any(cv.errors for cv in values):
            return values
        errors = _cross_check({cv.name: cv.value for cv in values})
        for cv in values:
            if cv.name in errors:
                cv.errors.append(f"expected {errors[cv.name]}")
        return values

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED

    def task_class(self) -> type:
        return SqlSourceTask

    def start(self, props: Mapping[str, str]) -> None:
        self._props = dict(props)
        cfg = SOURCE_CONFIG.parse(props)
        errors = _cross_check(cfg)
        if errors:
            raise ConfigError(errors=errors)
        self._cfg = cfg
        engine = create_engine(cfg)
        try:
            conn = connect(engine, cfg, "discovering tables")
            try:
                self._tables = discover(conn, cfg)
            finally:
                conn.close()
        finally:
            engine.dispose()
        log.info("SqlSource: %d table(s) to read from %s: %s", len(self._tables), safe_url(engine.url),
                 ", ".join(self._tables)[:500])

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        n = min(max_tasks, len(self._tables))
        groups: list[list[str]] = [[] for _ in range(n)]
        for i, t in enumerate(self._tables):
            groups[i % n].append(t)
        # PASSWORD values stay Password objects (the runtime hands them over as they are)
        base = {k: v for k, v in self._props.items() if k in SOURCE_CONFIG.keys}
        return [cast("dict[str, str]", {**base, "tables": json.dumps(g)}) for g in groups]

    def nothing_read(self) -> NothingRead | None:
        """No table to read: none matched ``table.include.list`` / ``table.exclude.list``."""
        cfg = getattr(self, "_cfg", None)
        if cfg is None or getattr(self, "_tables", None):
            return None
        wanted = ", ".join(cfg["table.include.list"]) or "every table of the default schema"
        return NothingRead(f"{wanted} on {safe_url(build_url(cfg))}", detail="no table matched")



class SqlSourceTask(SourceTask):
    """Reads its tables in turn, ``batch.max.rows`` rows per poll, each table's rows in cursor order.

    A database that goes away under a query (a restart, the connection terminated by the server: what SqlSink
    rides out too, told apart by the same :func:`~connect_runtime.connectors.sql._errors.transient`) is ridden
    out inside ``poll``: every table rewinds to the last record this task handed to the runtime
    (:meth:`Reader.rewind`), the task connects again (:func:`~connect_runtime.connectors.sql._common.connect`:
    ``connection.attempts`` attempts ``connection.backoff.ms`` apart, Kafka Connect JDBC's
    ``CachedConnectionProvider``) and ``poll`` returns nothing, so the next one reads on. A database that stays
    down fails the run within that bound (:class:`DatabaseUnavailable`, naming host and port and what the task
    was reading); so does one lost again ``connection.attempts`` times in a row before a record came back.
    """

    VERSION = VERSION

    def start(self, props: Mapping[str, str]) -> None:
        self.cfg = _TASK_CONFIG.parse(props)
        self.batch: int = self.cfg["batch.max.rows"]
        self.engine = create_engine(self.cfg)
        self.sqlite_text_ts = False
        self._conn: Connection | None = None
        self.losses = 0  # connections lost in a row without a record read since
        tables: list[str] = json.loads(self.cfg["tables"])
        conn = self.conn
        self.sqlite_text_ts = conn.dialect.name == "sqlite" and bool(self.cfg.get("query"))
        self.readers = [Reader(self, t, conn) for t in tables]
        self.end_read()
        committed = self.context.offset_storage_reader.offsets([r.partition for r in self.readers])
        for reader, (_, offset) in zip(self.readers, committed, strict=True):
            reader.resume(offset)
        self._next = 0

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = connect(self.engine, self.cfg, "reading tables")
        return self._conn

    def end_read(self) -> None:
        """End the read transaction (the next pass sees rows committed since)."""
        if self._conn is not None:
            try:
                self._conn.rollback()
            except Exception as exc:
                log.warning("SqlSource: ending a read transaction raised %r; reconnecting", exc)
                self.reset_connection()

    def reset_connection(self) -> None:
        """The connection is lost: every table rewinds to what it handed out, the connection is dropped."""
        for r in getattr(self, "readers", []):
            r.rewind()
        self._drop_connection()

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:
                log.debug("SqlSource: closing a broken connection raised %r", exc)

    def poll(self) -> list[SourceRecord] | None:
        readers = self.readers
        for _ in range(len(readers)):
            reader = readers[self._next]
            try:
                records = reader.take()
            except ConnectionLost as exc:
                self._reconnect(reader, exc)
                return None
            self.losses = 0
            if not records:
                self._next = (self._next + 1) % len(readers)
                continue
            if not reader.buf and reader.result is None:
                self._next = (self._next + 1) % len(readers)
            self._boundary(reader, records)
            return records
        time.sleep(0.05)
        return None

    def _reconnect(self, reader: Reader, lost: ConnectionLost) -> None:
        """The connection was lost while ``reader`` read: rewind every table, connect again within
        ``connection.attempts`` x ``connection.backoff.ms`` (else :class:`DatabaseUnavailable` fails the run)."""
        self.losses += 1
        attempts: int = self.cfg["connection.attempts"]
        self.reset_connection()
        if self.losses > attempts:
            raise ConnectError(f"{lost}; lost {self.losses} times in a row, each time "
                               f"right after connecting again (connection.attempts={attempts}): giving up") from None
        log.warning("%s; reconnecting (connection.attempts=%d, connection.backoff.ms=%d), then reading "
                    "on after the last record handed out", lost, attempts, self.cfg["connection.backoff.ms"])
        self._conn = connect(self.engine, self.cfg, f"reading {reader.name} again after the connection was lost")

    def _boundary(self, reader: Reader, records: list[SourceRecord]) -> None:
        """Connector-defined transactions: commit after a record that ends its timestamp group (mode
        ``timestamp``), else after the batch; rows of one timestamp are never split across a commit."""
        txn = self.context.transaction_context
        if txn is None:
            return
        if not reader.group_atomic:
            txn.commit_transaction()
            return
        i = reader.last_end_index  # the last record that ends its group in this batch
        if i < 0:
            return  # the whole batch is inside one unfinished group: commit once the group ends
        if i == len(records) - 1:
            txn.commit_transaction()
        else:
            txn.commit_transaction(records[i])

    def nothing_read(self) -> NothingRead | None:
        """The tables (or query) read and the row filter: no row at all, or none past the committed offsets."""
        readers = getattr(self, "readers", None)
        if not readers:
            return None
        where = f"{', '.join(r.name for r in readers)} on {safe_url(self.engine.url)}"
        interval = readers[0].interval
        if interval is not None:
            where += (f", rows with {readers[0].ts_name} in [{interval[0].isoformat()}Z, "
                      f"{interval[1].isoformat()}Z)")
        if any(r.last_ts is not None or r.last_inc is not None for r in readers):
            return NothingRead(where, COMMITTED_BEFORE, "no row past the committed offsets")
        return NothingRead(where, detail="no row")

    def stop(self) -> None:
        for r in getattr(self, "readers", []):
            try:
                if r.result is not None:
                    r.result.close()
            except Exception as exc:
                log.debug("SqlSource: closing a result raised %r", exc)
        self._drop_connection()
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.dispose()


__all__ = ["SOURCE_CONFIG", "SqlSource", "SqlSourceTask"]
