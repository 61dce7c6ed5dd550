"""SqlSource's reading: which tables a source reads (discovery, checking tables and columns), and one table
(or the query) of a task: its committed position, the mode's query (one streaming cursor per pass), the
look-ahead of one row that keeps a timestamp group out of two commits, and where a pass starts again after a
lost connection (:meth:`Reader.rewind`; the rules are in the package docstring)."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import TYPE_CHECKING, Any, cast

from connect_runtime.api.errors import ConfigError, ConnectError, DataError
from connect_runtime.api.records import SourceRecord
from connect_runtime.connectors.sql._common import (
    DatabaseUnavailable,
    cause,
    epoch_offset,
    from_epoch_offset,
    log,
    parse_instant,
    safe_url,
    to_json_column,
    utc_naive,
)
from connect_runtime.connectors.sql._errors import transient

if TYPE_CHECKING:
    from sqlalchemy import Connection, CursorResult, Engine, Select, Table

    from connect_runtime.connectors.sql._source import SqlSourceTask


def needs_ts(mode: str) -> bool:
    return mode.startswith("timestamp")


def needs_inc(mode: str) -> bool:
    return mode.endswith("incrementing")



_STORE_TABLES = frozenset({"meta", "topics", "partitions", "records", "source_offsets", "group_offsets",
                           "producer_epochs"})
"""The tables of pyconnect's embedded store (connect_runtime.backends.sqlite), when a SQL source is pointed at it."""
_SINK_OFFSETS_COLUMNS = frozenset({"connector", "topic", "kafka_partition", "next_offset", "generation", "updated_ms"})
"""The columns of SqlSink's offsets table (``offsets.table.name``, whatever it is called)."""


def _pyconnect_tables(insp: Any, names: Sequence[str]) -> set[str]:
    """Tables a SQL source discovering tables never reads unless listed: the embedded store's own (when every one
    of them is there), and SqlSink offsets tables (known by their columns)."""
    own = set(names) & _STORE_TABLES if set(names) >= _STORE_TABLES else set()
    for name in names:
        if name not in own and {c["name"] for c in insp.get_columns(name)} >= _SINK_OFFSETS_COLUMNS:
            own.add(name)
    return own


def discover(conn: Connection, cfg: Mapping[str, Any]) -> list[str]:
    """The tables to read (``"query"`` for query mode), checking that tables and columns exist."""
    import sqlalchemy as sa

    if cfg.get("query"):
        return ["query"]
    insp = sa.inspect(conn)
    include: list[str] = list(cfg["table.include.list"])
    exclude = set(cfg["table.exclude.list"])
    if include:
        missing = [t for t in include if not insp.has_table(split(t)[0], schema=split(t)[1])]
        if missing:
            raise ConfigError(errors={"table.include.list": f"existing tables; {', '.join(map(repr, missing))} "
                                                            f"not found in {safe_url(conn.engine.url)}"})
        tables = [t for t in include if t not in exclude]
    else:
        names = insp.get_table_names()
        own = _pyconnect_tables(insp, names)
        if own:
            log.info("sql source: not reading %s (pyconnect's own bookkeeping; list them in table.include.list to read "
                     "them)", ", ".join(sorted(own)))
        tables = sorted(t for t in names if t not in exclude and t not in own)
    for t in tables:
        name, schema = split(t)
        columns = {c["name"] for c in insp.get_columns(name, schema=schema)}
        for field in ("timestamp.column.name", "incrementing.column.name"):
            col = cfg.get(field)
            mode = str(cfg["mode"]).lower()
            wanted = needs_ts(mode) if field.startswith("timestamp") else needs_inc(mode)
            if wanted and col not in columns:
                raise ConfigError(errors={field: f"a column of table {t!r}; it has {sorted(columns)}, not {col!r}"})
    return tables


def split(qualified: str) -> tuple[str, str | None]:
    """``schema.name`` → ``(name, schema)``; ``name`` → ``(name, None)``."""
    if "." in qualified:
        schema, name = qualified.split(".", 1)
        return name, schema
    return qualified, None



class Reader:
    """One table (or the query) of a task: its committed position, its open pass and its look-ahead."""

    def __init__(self, task: SqlSourceTask, name: str, conn: Connection) -> None:
        import sqlalchemy as sa

        cfg = task.cfg
        self.task = task
        self.name = name
        self.mode = str(cfg["mode"]).lower()
        self.topic = cfg["topic.prefix"] + ("" if name == "query" else name)
        self.ts_name: str | None = cfg["timestamp.column.name"] if needs_ts(self.mode) else None
        self.inc_name: str | None = cfg["incrementing.column.name"] if needs_inc(self.mode) else None
        self.group_atomic = self.mode == "timestamp"  # rows sharing a timestamp must commit together
        self.interval: tuple[datetime, datetime] | None = None
        partition: dict[str, Any]
        if name == "query":
            partition = {"query": "query"}
            self.table: Table | None = None
            self.ts_aware = False
            self.key_names: list[str] = []
        else:
            table_name, schema = split(name)
            self.table = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=conn)
            partition = {"protocol": "1", "table": name}
            ts_col = self.table.c[self.ts_name] if self.ts_name else None
            self.ts_aware = bool(getattr(ts_col.type, "timezone", False)) if ts_col is not None else False
            self.key_names = [c.name for c in self.table.primary_key.columns]
        if cfg.get("interval.start") is not None:
            self.interval = (parse_instant("interval.start", cfg["interval.start"]),
                             parse_instant("interval.end", cfg["interval.end"]))
            partition["interval.start"] = self.interval[0].isoformat() + "+00:00"
            partition["interval.end"] = self.interval[1].isoformat() + "+00:00"
        self.partition = partition
        self.last_ts: datetime | None = None
        self.last_inc: int | None = None
        self.result: CursorResult[Any] | None = None
        self.names: list[str] = []
        self.ts_idx = self.inc_idx = -1
        self.key_idx: list[int] = []
        self.peek: Sequence[Any] | None = None
        self.buf: deque[tuple[Sequence[Any], bool]] = deque()
        self.next_query = 0.0
        self.last_end_index = -1
        self.done = False  # bulk: read once per run
        self.handed = 0  # records handed to the runtime from the open pass
        self.open_group: Counter[str] = Counter()
        """Mode ``timestamp``: the rows handed from a group whose end is not handed yet (its committed position
        is still before the group)."""
        self.skip: Counter[str] = Counter()  # rows of open_group a pass opened again after a lost connection skips

    def resume(self, offset: Mapping[str, Any] | None) -> None:
        if not offset:
            return
        try:
            if "timestamp" in offset and self.ts_name:
                self.last_ts = from_epoch_offset(int(offset["timestamp"]), offset.get("timestamp_nanos"))
            if "incrementing" in offset and self.inc_name:
                self.last_inc = int(offset["incrementing"])
        except (TypeError, ValueError) as exc:
            raise ConnectError(f"SqlSource: committed offset {offset!r} of {self.partition} is not a Kafka Connect "
                               f"JDBC offset ({exc})") from exc
        log.info("SqlSource: %s resumes after %s", self.name, offset)

    # -- queries ------------------------------------------------------------------------------------

    def _param(self, v: datetime) -> Any:
        """A naive-UTC instant as the column compares it."""
        if self.task.sqlite_text_ts:
            return v.strftime("%Y-%m-%d %H:%M:%S.%f")  # SQLAlchemy's storage form of DateTime on SQLite
        return v.replace(tzinfo=UTC) if self.ts_aware else v

    def query(self) -> Select[Any]:
        import sqlalchemy as sa

        cfg = self.task.cfg
        table = self.table

        def col(name: str) -> Any:
            return table.c[name] if table is not None else sa.column(name)

        stmt: Any
        if table is not None:
            stmt = sa.select(table)
        else:
            stmt = sa.select(sa.literal_column("*")).select_from(sa.text(f"({cfg['query']}) AS pyconnect_q"))
        conds: list[Any] = []
        order: list[Any] = []
        if self.ts_name:
            ts = col(self.ts_name)
            upper = utc_naive(datetime.now(UTC)) - timedelta(milliseconds=cfg["timestamp.delay.interval.ms"])
            if self.interval is not None:
                upper = min(upper, self.interval[1])
                conds.append(ts >= self._param(self.interval[0]))
            conds.append(ts < self._param(upper))
            if self.last_ts is not None:
                last = self._param(self.last_ts)
                if self.inc_name and self.last_inc is not None:
                    inc = col(self.inc_name)
                    conds.append(sa.or_(sa.and_(ts == last, inc > self.last_inc), ts > last))
                else:
                    conds.append(ts > last)
            order.append(ts)
            if self.inc_name:
                order.append(col(self.inc_name))
        elif self.inc_name:
            inc = col(self.inc_name)
            if self.last_inc is not None:
                conds.append(inc > self.last_inc)
            order.append(inc)
        if conds:
            stmt = stmt.where(*conds)
        if order:
            stmt = stmt.order_by(*order)
        return cast("Select[Any]", stmt)

    def open_pass(self) -> None:
        conn = self.task.conn
        stmt = self.query()
        try:
            self.result = conn.execution_options(stream_results=True, max_row_buffer=self.task.batch).execute(stmt)
        except Exception as exc:
            raise _db_error(f"SqlSource: querying {self.name}", exc, self.task.engine) from None
        self.handed = 0
        self.names = list(map(str, self.result.keys()))  # plain str: orjson refuses str subclasses as keys
        idx = {n: i for i, n in enumerate(self.names)}
        for what, wanted in (("timestamp.column.name", self.ts_name), ("incrementing.column.name", self.inc_name)):
            if wanted is not None and wanted not in idx:
                self.close_pass()
                raise ConfigError(errors={what: f"a column of {self.name}; its columns are {self.names}"})
        self.ts_idx = idx[self.ts_name] if self.ts_name else -1
        self.inc_idx = idx[self.inc_name] if self.inc_name else -1
        self.key_idx = [idx[k] for k in self.key_names if k in idx]

    def close_pass(self) -> None:
        result, self.result = self.result, None
        if result is not None:
            result.close()
        self.task.end_read()

    def fill(self, want: int) -> bool:
        """Fetch rows into the buffer until it holds ``want`` (or the pass ends). Returns False once the
        pass is over and nothing is buffered."""
        now = time.monotonic()
        if self.result is None and not self.buf:
            if self.done or now < self.next_query:
                return False
            self.open_pass()
        while self.result is not None and len(self.buf) < want:
            try:
                rows: list[Sequence[Any]] = list(self.result.fetchmany(self.task.batch))
            except Exception as exc:
                raise _db_error(f"SqlSource: reading {self.name}", exc, self.task.engine) from None
            ended = len(rows) < self.task.batch
            if self.skip and rows:
                rows = self._not_handed(rows)
            if self.peek is not None:
                rows = [self.peek, *rows]
                self.peek = None
            if not ended and rows:
                self.peek = rows.pop()  # one row of look-ahead: does the last row end its timestamp group?
            if self.group_atomic:
                ts = self.ts_idx
                if rows:
                    nxt = [r[ts] for r in rows[1:]]
                    nxt.append(self.peek[ts] if self.peek is not None else object())
                    self.buf.extend((r, r[ts] != n) for r, n in zip(rows, nxt, strict=True))
            else:
                self.buf.extend((r, True) for r in rows)
            if ended:
                self.close_pass()
                if self.mode == "bulk":
                    self.done = True
                self.next_query = time.monotonic() + self.task.cfg["poll.interval.ms"] / 1000
        return bool(self.buf)

    def _not_handed(self, rows: list[Sequence[Any]]) -> list[Sequence[Any]]:
        """The rows of a pass opened again inside a timestamp group, less those of the group already handed."""
        skip, kept = self.skip, []
        for row in rows:
            key = repr(tuple(row))
            if skip[key] > 0:
                skip[key] -= 1
                if not skip[key]:
                    del skip[key]
            else:
                kept.append(row)
        return kept

    def rewind(self) -> None:
        """The connection was lost: a pass that was open ends here, and what it fetched but did not hand out is
        forgotten; the next pass starts right away after the last record handed to the runtime in this run
        (``last_ts`` / ``last_inc``; mode ``timestamp`` re-reads an unfinished group less the rows of it already
        handed), so nothing handed is read twice and nothing is skipped. Rows of a pass that was read to its end
        stay buffered (they are whole). Mode ``bulk`` has no position: a pass that already handed rows cannot
        resume exactly, and the run fails (:class:`ConnectError`, a rerun reads the table again)."""
        if self.result is None:
            return
        self.result = None
        if self.mode == "bulk" and self.handed:
            raise ConnectError(
                f"SqlSource: the connection to {safe_url(self.task.engine.url)} was lost while mode=bulk was reading "
                f"{self.name}, {self.handed} rows of the pass already handed to the runtime; bulk keeps no offset, "
                f"so the pass cannot resume without repeating rows: the run fails (a rerun reads the table again)")
        self.buf.clear()
        self.peek = None
        self.next_query = 0.0
        self.skip = Counter(self.open_group)

    # -- records ------------------------------------------------------------------------------------

    def take(self) -> list[SourceRecord]:
        n = self.task.batch
        if not self.fill(n + 1):
            return []
        buf = self.buf
        k = min(n, len(buf))
        rows = [buf.popleft() for _ in range(k)]
        if self.group_atomic and not rows[-1][1]:
            last_end = max((i for i, (_, ends) in enumerate(rows) if ends), default=-1)
            if last_end >= 0:  # keep the unfinished group for the next poll: a poll ends where a group ends
                buf.extendleft(reversed(rows[last_end + 1:]))
                rows = rows[:last_end + 1]
        return self.records(rows)

    def records(self, rows: list[tuple[Sequence[Any], bool]]) -> list[SourceRecord]:
        """The records of a batch of rows: values (and keys) built a column at a time, then each record's
        offset in row order."""
        names, topic, partition = self.names, self.topic, self.partition
        ts_i, inc_i, key_idx = self.ts_idx, self.inc_idx, self.key_idx
        self.last_end_index = -1
        self.handed += len(rows)
        raw = [row for row, _ in rows]
        columns = [to_json_column(col) for col in zip(*raw, strict=True)]
        values: list[dict[str, Any]] = list(map(dict, map(zip, repeat(names), zip(*columns, strict=True))))
        keys: list[dict[str, Any] | None]
        if key_idx:
            key_names = [names[i] for i in key_idx]
            keys = list(map(dict, map(zip, repeat(key_names), zip(*(columns[i] for i in key_idx), strict=True))))
        else:
            keys = [None] * len(values)
        if ts_i < 0:
            if inc_i >= 0:
                incs = [int(row[inc_i]) for row in raw]
                if incs:
                    self.last_inc = incs[-1]
                offsets: list[dict[str, Any] | None] = [{"incrementing": i} for i in incs]
            else:
                offsets = [None] * len(values)
            return [SourceRecord(source_partition=partition, source_offset=o, topic=topic, value=v, key=k)
                    for v, k, o in zip(values, keys, offsets, strict=True)]
        out: list[SourceRecord] = []
        append = out.append
        for (row, ends), value, key in zip(rows, values, keys, strict=True):
            tsv = row[ts_i]
            if isinstance(tsv, str):
                tsv = datetime.fromisoformat(tsv)
            if not isinstance(tsv, datetime):
                raise DataError(f"SqlSource: {self.name} row {value!r}: timestamp column {self.ts_name!r} holds "
                                f"{type(tsv).__name__} {tsv!r}; expected a timestamp")
            ms, nanos = epoch_offset(tsv)
            timestamp = ms
            if ends:
                self.last_ts = utc_naive(tsv)
                self.last_end_index = len(out)
            else:  # inside a group: the committed position stays before the group (no loss if cut)
                ms, nanos = epoch_offset(utc_naive(tsv) - timedelta(microseconds=1))
            offset: dict[str, Any] = {"timestamp": ms, "timestamp_nanos": nanos}
            if inc_i >= 0:
                self.last_inc = int(row[inc_i])
                offset["incrementing"] = self.last_inc
            append(SourceRecord(source_partition=partition, source_offset=offset, topic=topic, value=value,
                                key=key, timestamp=timestamp))
        if self.group_atomic:
            if self.last_end_index >= 0:
                self.open_group.clear()
                self.skip.clear()  # the group ended: a pass opened again starts after it
            self.open_group.update(repr(tuple(row)) for row, _ in rows[self.last_end_index + 1:])
        return out



class ConnectionLost(ConnectError):
    """The database went away under a query (a restart, the connection terminated by the server): the task
    reconnects and reads again from what it handed out (:meth:`Reader.rewind`)."""


def _db_error(what: str, exc: BaseException, engine: Engine) -> ConnectError:
    kind = ConnectionLost if transient(exc) and not isinstance(exc, DatabaseUnavailable) else ConnectError
    return kind(f"{what} on {safe_url(engine.url)} failed: {cause(exc, engine.url)}")


__all__ = ["ConnectionLost", "Reader", "discover", "needs_inc", "needs_ts", "split"]
