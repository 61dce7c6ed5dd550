"""SqlSink's table management (Kafka Connect JDBC sink's ``DbStructure``): the destination tables a task writes,
reflected once with their coercers; ``auto.create`` of a missing table and ``auto.evolve`` of a missing column,
where a CREATE or ALTER that lost a race with another task reads the table again and goes on. A column's type
comes from the records' schema when they carry one (:mod:`._typed`), else from the values seen (:mod:`._coerce`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.data import Schema
from connect_runtime.api.errors import ConfigError, ConnectError, DataError
from connect_runtime.api.records import SinkRecord
from connect_runtime.connectors.sql._coerce import ColumnCoercer, coercer, column_coercer, sql_type
from connect_runtime.connectors.sql._common import connect, log, safe_url
from connect_runtime.connectors.sql._errors import short, where
from connect_runtime.connectors.sql._typed import (
    column_type,
    default_text,
    field_schemas,
    nullable,
    sql_literal,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine, Table

_DDL_ATTEMPTS = 3  # auto.evolve: an ALTER that failed while the column is still missing is tried again


class Tables:
    """The destination tables a task writes, reflected once (again after a rollback of DDL). ``db_error`` names a
    failure; before an ALTER outside SQLite, ``commit_written`` commits the open transaction (rows and offsets),
    and ``begin`` starts the next one after it."""

    def __init__(self, cfg: Mapping[str, Any], engine: Engine, db_error: Callable[[str, BaseException], ConnectError],
                 commit_written: Callable[[Connection], None], begin: Callable[[], Connection]) -> None:
        self.cfg = cfg
        self.engine = engine
        self.db_error = db_error
        self.commit_written = commit_written
        self.begin = begin
        self.copy_json = False
        """COPY takes JSON columns as JSON text (PostgreSQL through psycopg, insert mode): set on connecting."""
        self.tables: dict[str, Table] = {}
        self.coercers: dict[str, dict[str, Callable[[Any], Any] | None]] = {}
        self.column_coercers: dict[str, dict[str, ColumnCoercer | None]] = {}
        self.names: dict[str, frozenset[str]] = {}

    def forget(self) -> None:
        self.tables.clear()
        self.coercers.clear()
        self.column_coercers.clear()
        self.names.clear()

    def _remember(self, name: str, table: Table) -> None:
        """Keep a reflected (or created) table and its coercers, computed once per table."""
        copy_json = self.copy_json
        self.tables[name] = table
        self.coercers[table.fullname] = {c.name: coercer(c.type, copy_json) for c in table.columns}
        self.column_coercers[table.fullname] = {c.name: column_coercer(c.type, copy_json) for c in table.columns}
        self.names[name] = frozenset(c.name for c in table.columns)

    def _typed(self, records: list[SinkRecord]) -> dict[str, Schema]:
        return field_schemas(records, str(self.cfg["pk.mode"]).lower(), list(self.cfg["pk.fields"]))

    def get(self, conn: Connection, name: str, rows: list[dict[str, Any]], pk: list[str],
            records: list[SinkRecord], fields: tuple[str, ...] | None = None) -> Table:
        """The table ``name`` for the ``rows`` of ``records``, reflected once (created with auto.create); a field
        of ``rows`` the table has no column for is added (auto.evolve) or refused. ``fields``: the fields every
        row has, when known."""
        import sqlalchemy as sa

        first = records[0]
        table = self.tables.get(name)
        if table is None:
            table_name, schema = (name.split(".", 1)[::-1] if "." in name else (name, None))
            if sa.inspect(conn).has_table(table_name, schema=schema):
                table = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=conn)
            elif self.cfg["auto.create"]:
                table = self._create(conn, table_name, schema, rows, pk, self._typed(records))
            else:
                # a ConfigError: the run fails at once (as Kafka Connect's JDBC sink task does), not after
                # redelivering for the retry bound when it surfaces at a commit point
                raise ConfigError(f"SqlSink: table {name!r} does not exist in {safe_url(conn.engine.url)} (record "
                                  f"{where(first)}); create it or set auto.create=true",
                                  errors={"auto.create": f"true, or create table {name!r} first"})
            self._remember(name, table)
        names = self.names[name]
        if rows and not (names.issuperset(fields) if fields is not None else set().union(*rows) <= names):
            unknown: dict[str, list[Any]] = {}  # a field the table has no column for
            for row in rows:
                for k, v in row.items():
                    if k not in names:
                        unknown.setdefault(k, []).append(v)
            table = self._evolve(conn, name, table, unknown, rows, self._typed(records), records)
        return table

    def _create(self, conn: Connection, table_name: str, schema: str | None, rows: list[dict[str, Any]],
                pk: list[str], typed: dict[str, Schema]) -> Table:
        """auto.create. Other tasks of the connector may create the same table at the same moment (as Kafka
        Connect's JDBC sink, a create that lost the race refreshes its view of the table and goes on):

        - SQLite: inside the data transaction (``BEGIN IMMEDIATE`` holds the one write lock: no race);
        - other databases: in a short transaction of its own on a second connection, committed at once,
          so a failed CREATE never aborts the data transaction and the new table's locks are not held
          until the data commits (two tasks creating two tables could deadlock on them otherwise).
        """
        import sqlalchemy as sa

        dialect = conn.dialect.name
        names: dict[str, list[Any]] = {}
        for row in rows:
            for k, v in row.items():
                names.setdefault(k, []).append(v)
        cols = [sa.Column(k, sql_type(v, dialect, k in pk), primary_key=k in pk, nullable=k not in pk,
                          autoincrement=False) if k not in typed else
                sa.Column(k, column_type(typed[k], dialect, k in pk), primary_key=k in pk,
                          nullable=k not in pk and nullable(typed[k]), server_default=default_text(typed[k]),
                          autoincrement=False)
                for k, v in names.items()]
        table = sa.Table(table_name, sa.MetaData(), *cols, schema=schema)
        shown = table_name if schema is None else f"{schema}.{table_name}"
        log.info("SqlSink: auto.create: creating table %s (%s)", shown,
                 ", ".join(f"{c.name} {c.type.compile(conn.dialect)}" for c in cols))
        try:
            if dialect == "sqlite":
                with conn.begin_nested():
                    table.create(conn)
            else:
                with connect(self.engine, self.cfg, f"auto.create of table {shown}") as apart, apart.begin():
                    table.create(apart)
        except ConnectError:
            raise
        except Exception as exc:
            if not sa.inspect(conn).has_table(table_name, schema=schema):
                raise self.db_error(f"auto.create of table {shown}", exc) from exc
            log.info("SqlSink: auto.create: table %s was created by another task meanwhile (%s); using it",
                     shown, type(getattr(exc, "orig", None) or exc).__name__)
            table = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=conn)
        return table

    def _evolve(self, conn: Connection, key: str, table: Table, fields: dict[str, list[Any]],
                rows: list[dict[str, Any]], typed: dict[str, Schema], records: list[SinkRecord]) -> Table:
        """auto.evolve: ``ALTER TABLE ... ADD COLUMN`` for each missing field. Another task may add the same
        column at the same moment: a column that exists when the ALTER failed is simply used (the JDBC
        sink's refresh-and-go-on).

        - SQLite: inside the data transaction, in a savepoint (``BEGIN IMMEDIATE``: no other writer).
        - Other databases: the data transaction may already hold locks on the table (rows written to it
          since the last commit), and so may the other tasks': two ALTERs would deadlock. So the task first
          commits what it has written (rows and their offsets, as at a commit point, fenced the same way),
          then runs each ALTER in a short transaction of its own (it waits, holding nothing, for other
          tasks' transactions on the table to end), and goes on in a new data transaction.
        """
        import sqlalchemy as sa

        name = table.fullname
        if not self.cfg["auto.evolve"]:
            first = next(r for r in rows if any(k in r for k in fields))
            raise DataError(f"SqlSink: table {name!r} has no column {sorted(fields)[0]!r} for field(s) "
                            f"{sorted(fields)} of row {short(first)}; set auto.evolve=true or add the column(s)")
        for col in sorted(fields):
            field = typed.get(col)
            if field is not None and not nullable(field):
                r = next((r for r, row in zip(records, rows, strict=True) if col in row), records[0])
                shown = f" (schema {r.value_schema.name}" + (f" version {r.value_schema.version})"
                                                             if r.value_schema.version is not None else ")") \
                    if r.value_schema is not None and r.value_schema.name else ""
                # a ConfigError: the run fails at once (never redelivered), as for a missing table
                raise ConfigError(
                    f"SqlSink: auto.evolve cannot add column {col!r} to table {name!r} for field {col!r} of record "
                    f"{where(r)}{shown}: the field is required and has no default, so the rows already in the "
                    "table could not hold it (as Kafka Connect's JDBC sink, auto.evolve adds optional fields and "
                    "fields with a default); make the field optional or give it a default, or add the column",
                    errors={"auto.evolve": f"a column {col!r} in table {name!r} added by hand first"})
        prep = conn.dialect.identifier_preparer
        table_name, schema = table.name, table.schema
        inside = conn.dialect.name == "sqlite"
        if not inside:
            self.commit_written(conn)
        for col, values in fields.items():
            field = typed.get(col)
            typ = sql_type(values, conn.dialect.name, False) if field is None else \
                column_type(field, conn.dialect.name, False)
            default = None if field is None else default_text(field)
            ddl = typ.compile(conn.dialect) + (" NULL" if default is None else f" DEFAULT {sql_literal(default)}")
            for attempt in range(1, _DDL_ATTEMPTS + 1):
                log.info("SqlSink: auto.evolve: adding column %s.%s %s", name, col, ddl)
                try:
                    with conn.begin_nested() if inside else conn.begin():
                        conn.exec_driver_sql(f"ALTER TABLE {prep.format_table(table)} ADD COLUMN {prep.quote(col)} "
                                             f"{ddl}")
                    break
                except Exception as exc:
                    have = {c["name"] for c in sa.inspect(conn).get_columns(table_name, schema=schema)}
                    if not inside:
                        conn.rollback()  # the inspection's implicit transaction
                    if col in have:
                        log.info("SqlSink: auto.evolve: column %s.%s was added by another task meanwhile (%s); "
                                 "using it", name, col, type(getattr(exc, "orig", None) or exc).__name__)
                        break
                    if attempt == _DDL_ATTEMPTS:
                        raise self.db_error(f"auto.evolve (adding column {col!r} to table {name})", exc) from exc
                    log.info("SqlSink: auto.evolve: adding column %s.%s failed (%s); trying again", name, col,
                             type(getattr(exc, "orig", None) or exc).__name__)
        if not inside:
            self.begin()
        fresh = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=conn)
        self._remember(key, fresh)
        return fresh


__all__ = ["Tables"]
