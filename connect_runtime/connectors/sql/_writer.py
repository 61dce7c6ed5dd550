"""SqlSink's writer: runs of rows into their table inside the open transaction, ``batch.size`` rows per
statement: ``COPY ... FROM STDIN`` (PostgreSQL through psycopg, insert mode), executemany ``INSERT``,
``UPDATE`` by key, upsert (``ON CONFLICT`` / ``ON DUPLICATE KEY`` / update-then-insert) and deletes. A batch the
database refuses is rolled back to its savepoint and written again one row per savepoint (the slow path), so
the bad record is named and reported; a transient failure is never taken for a bad row."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from connect_runtime.api.errors import DataError
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.connectors.sql._buffer import Run
from connect_runtime.connectors.sql._coerce import bad_field, coerce_columns, coerce_row, columns_of
from connect_runtime.connectors.sql._common import log, scrub
from connect_runtime.connectors.sql._errors import data_errors, short, transient, where
from connect_runtime.connectors.sql._tables import Tables

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy import Connection, Table
    from sqlalchemy.engine import URL


class Writer:
    """Writes a task's runs; :attr:`copy` is set on connecting. ``report`` hands a bad record to the dead letter
    queue, or raises."""

    def __init__(self, cfg: Mapping[str, Any], tables: Tables, url: URL,
                 report: Callable[[SinkRecord, Exception], None]) -> None:
        self.mode = str(cfg["insert.mode"]).lower()
        self.pk_mode = str(cfg["pk.mode"]).lower()
        self.pk_fields: list[str] = list(cfg["pk.fields"])
        self.batch_size: int = cfg["batch.size"]
        self.tables = tables
        self.url = url
        self.report = report
        self.copy = False  # PostgreSQL through psycopg: COPY for inserts
        self.writing: tuple[list[Run], int, int] | None = None  # write()'s place: (runs, run, first record)

    def write(self, conn: Connection, buf: list[Run]) -> None:
        """Write ``buf`` inside the open transaction of ``conn``: its runs in order, ``batch.size`` rows per
        statement."""
        size = self.batch_size
        try:
            for n, run in enumerate(buf):
                keys = run.keys
                for i in range(0, len(run.records), size):
                    self.writing = (buf, n, i)  # what is written so far, should the transaction commit early
                    self._write_run(conn, run.table, run.records[i:i + size],
                                    None if keys is None else keys[i:i + size], run.rows[i:i + size], run.is_delete)
        finally:
            self.writing = None

    def written_offsets(self, written: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """In the middle of :meth:`write`: the next offset per partition after what the open transaction
        holds (every record below it written, skipped or dead-lettered). ``written`` (the buffer's) counts the
        whole buffer (and may lag for the partition ``put`` is in the middle of): the records of the buffer
        written so far move it up, those not written yet take it back to the first of them."""
        out = dict(written)
        if self.writing is None:
            return out
        buf, n, i = self.writing
        for run in buf[:n + 1]:
            for r in run.records[:i] if run is buf[n] else run.records:
                tp = TopicPartition(r.topic, r.partition)
                if out.get(tp, -1) <= r.offset:
                    out[tp] = r.offset + 1
        pending: dict[TopicPartition, int] = {}
        for run in buf[n:]:
            for r in run.records[i:] if run is buf[n] else run.records:
                tp = TopicPartition(r.topic, r.partition)
                if tp not in pending:
                    pending[tp] = r.offset
        out.update(pending)  # a partition's records come in offset order through the runs
        return out

    def _write_run(self, conn: Connection, name: str, records: list[SinkRecord],
                   keys: list[dict[str, Any] | None] | None, rows: list[dict[str, Any]], is_delete: bool) -> None:
        first_key = keys[0] if keys else None
        pk = list(first_key) if first_key is not None else list(self.pk_fields)
        shaped = columns_of(rows)
        table = self.tables.get(conn, name, rows, pk if self.pk_mode != "none" else [], records,
                                None if shaped is None else shaped[0])
        coerce, column_coercers = self.tables.coercers[table.fullname], self.tables.column_coercers[table.fullname]
        copy = self.copy and self.mode == "insert" and not is_delete
        try:
            batch = None if shaped is None else coerce_columns(shaped, column_coercers, copy)
            prepared: list[dict[str, Any]] | None = None
            if batch is None:
                prepared = [coerce_row(row, coerce) for row in rows]
            elif not copy:
                cols, columns = batch
                prepared = [dict(zip(cols, t, strict=True)) for t in zip(*columns, strict=True)]
        except (ValueError, TypeError):
            batch = prepared = None
        if copy and batch is not None:
            # the savepoint through psycopg itself (COPY is psycopg's too): SQLAlchemy's costs more per batch
            raw = conn.connection.driver_connection
            assert raw is not None
            raw.execute("SAVEPOINT pyconnect_copy")
            try:
                self._copy_rows(conn, table, [(batch[0], zip(*batch[1], strict=True))])
            except data_errors() as exc:
                if transient(exc):
                    raise  # the database is gone, not the rows bad
                raw.execute("ROLLBACK TO SAVEPOINT pyconnect_copy")
                raw.execute("RELEASE SAVEPOINT pyconnect_copy")
                log.info("SqlSink: writing %d rows into %s failed (%s); finding the bad record(s) row by row",
                         len(rows), table.fullname, type(exc).__name__)
            else:
                raw.execute("RELEASE SAVEPOINT pyconnect_copy")
                return
        elif prepared is not None:
            try:
                with conn.begin_nested():
                    self._execute(conn, table, prepared, pk, is_delete)
                return
            except data_errors() as exc:
                if transient(exc):
                    raise  # the database is gone, not the rows bad
                log.info("SqlSink: writing %d rows into %s failed (%s); finding the bad record(s) row by row",
                         len(rows), table.fullname, type(exc).__name__)
        self._one_by_one(conn, table, records, rows, pk, is_delete)

    def _one_by_one(self, conn: Connection, table: Table, records: list[SinkRecord], rows: list[dict[str, Any]],
                    pk: list[str], is_delete: bool) -> None:
        """The slow path: one savepoint per row, so the bad record is named (and dead-lettered when tolerated)."""
        coerce = self.tables.coercers[table.fullname]
        for r, row in zip(records, rows, strict=True):
            try:
                one = coerce_row(row, coerce)
            except (ValueError, TypeError) as exc:
                self.report(r, DataError(f"SqlSink: record {where(r)} does not fit table {table.fullname}: {exc}"))
                continue
            try:
                with conn.begin_nested():
                    self._execute(conn, table, [one], pk, is_delete)
            except data_errors() as exc:
                if transient(exc):
                    raise  # the database is gone, not the rows bad
                orig = getattr(exc, "orig", None) or exc
                msg = scrub(str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__, self.url)
                field = bad_field(orig, table, row)
                named = "" if field is None else f"field {field!r}: "
                self.report(r, DataError(f"SqlSink: record {where(r)} does not fit table {table.fullname}: "
                                          f"{named}{type(orig).__name__}: {msg}; row {short(row)}"))

    def _execute(self, conn: Connection, table: Table, rows: list[dict[str, Any]], pk: list[str],
                 is_delete: bool) -> None:
        import sqlalchemy as sa

        if is_delete:
            stmt = table.delete().where(*[table.c[k] == sa.bindparam(f"b_{k}") for k in pk])
            conn.execute(stmt, [{f"b_{k}": row[k] for k in pk} for row in rows])
            return
        if self.mode == "insert":
            if self.copy:
                self._copy(conn, table, rows)
            else:
                conn.execute(table.insert(), rows)
            return
        if self.mode == "update":
            groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for row in rows:
                groups.setdefault(tuple(row), []).append(row)
            for cols, group in groups.items():
                sets: dict[str, Any] = {c: sa.bindparam(f"v_{c}") for c in cols if c not in pk}
                if not sets:
                    continue
                upd = table.update().where(*[table.c[k] == sa.bindparam(f"b_{k}") for k in pk]).values(sets)
                conn.execute(upd, [{**{f"b_{k}": row[k] for k in pk}, **{f"v_{c}": row[c] for c in sets}}
                                    for row in group])
            return
        # upsert: the last row of a key wins (one statement may not touch a row twice)
        latest: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            latest[tuple(json.dumps(row.get(k), default=str) for k in pk)] = row
        by_cols: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in latest.values():
            by_cols.setdefault(tuple(row), []).append(row)
        for cols, group in by_cols.items():
            self._upsert(conn, table, list(cols), group, pk)

    def _upsert(self, conn: Connection, table: Table, cols: list[str], rows: list[dict[str, Any]],
                pk: list[str]) -> None:
        dialect = conn.dialect.name
        updates = [c for c in cols if c not in pk]
        if dialect in ("postgresql", "sqlite"):
            if dialect == "postgresql":
                from sqlalchemy.dialects.postgresql import insert as pg_insert
                stmt: Any = pg_insert(table)
            else:
                from sqlalchemy.dialects.sqlite import insert as sqlite_insert
                stmt = sqlite_insert(table)
            if updates:
                stmt = stmt.on_conflict_do_update(index_elements=[table.c[k] for k in pk],
                                                  set_={c: stmt.excluded[c] for c in updates})
            else:
                stmt = stmt.on_conflict_do_nothing(index_elements=[table.c[k] for k in pk])
            conn.execute(stmt, rows)
            return
        if dialect in ("mysql", "mariadb"):
            from sqlalchemy.dialects.mysql import insert as my_insert

            mstmt = my_insert(table)
            mstmt = mstmt.on_duplicate_key_update({c: mstmt.inserted[c] for c in (updates or pk[:1])})
            conn.execute(mstmt, rows)
            return
        import sqlalchemy as sa  # any other dialect: update, then insert what matched nothing

        for row in rows:
            where = [table.c[k] == row[k] for k in pk]
            done = conn.execute(table.update().where(*where).values({c: row[c] for c in updates})).rowcount \
                if updates else conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar()
            if not done:
                conn.execute(table.insert(), [row])

    def _copy(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
        """PostgreSQL: ``COPY ... FROM STDIN`` through psycopg 3, inside the open transaction."""
        by_cols: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for row in rows:
            by_cols.setdefault(tuple(row), []).append(tuple(row.values()))
        if () in by_cols:  # objects without fields: rows of column defaults (COPY needs a column)
            conn.execute(table.insert(), [{} for _ in by_cols.pop(())])
        self._copy_rows(conn, table, list(by_cols.items()))

    @staticmethod
    def _copy_rows(conn: Connection, table: Table,
                   groups: list[tuple[tuple[str, ...], Iterable[tuple[Any, ...]]]]) -> None:
        raw = conn.connection.driver_connection
        assert raw is not None
        prep = conn.dialect.identifier_preparer
        for cols, group in groups:
            sql = f"COPY {prep.format_table(table)} ({', '.join(prep.quote(c) for c in cols)}) FROM STDIN"
            with raw.cursor() as cur, cur.copy(sql) as copy:
                write = copy.write_row
                for values in group:
                    write(values)


__all__ = ["Writer"]
