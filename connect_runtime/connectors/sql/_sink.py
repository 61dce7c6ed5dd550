"""SqlSink: topics into tables of any SQLAlchemy database, exactly once. See the package docstring."""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from datetime import time as dtime
from decimal import Decimal, InvalidOperation
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, cast

from connect_runtime.api.config import (
    ConfigDef,
    ConfigValue,
    Importance,
    Range,
    Type,
    ValidString,
    non_empty_string,
)
from connect_runtime.api.connector import DestinationOffsets, SinkConnector
from connect_runtime.api.errors import (
    ConfigError,
    ConnectError,
    DataError,
    ProducerFencedError,
    RetriableError,
)
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.api.sink import SinkTask
from connect_runtime.connectors.sql._common import (
    VERSION,
    DatabaseUnavailable,
    connect,
    connection_fields,
    create_engine,
    log,
    safe_url,
    scrub,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine, Table
    from sqlalchemy.engine import URL, RootTransaction

OFFSETS_TABLE = "pyconnect_sink_offsets"

SINK_CONFIG = (
    connection_fields(ConfigDef())
    .define("table.name.format", Type.STRING, default="${topic}", validator=non_empty_string,
            doc="Destination table per topic; ${topic} is replaced by the record's topic.")
    .define("insert.mode", Type.STRING, default="insert", validator=ValidString.in_("insert", "upsert", "update"),
            importance=Importance.HIGH,
            doc="insert: INSERT (COPY on PostgreSQL); upsert: insert or update by key; update: update by key.")
    .define("pk.mode", Type.STRING, default="none", validator=ValidString.in_("none", "record_key", "record_value"),
            importance=Importance.HIGH, doc="Where the primary key comes from.")
    .define("pk.fields", Type.LIST, default=[],
            doc="Key columns: for record_key, the key's fields (a primitive key needs exactly one name; default all "
                "fields of an object key); for record_value, the value's fields (default all).")
    .define("auto.create", Type.BOOLEAN, default=False, doc="Create a missing table from the first records.")
    .define("auto.evolve", Type.BOOLEAN, default=False, doc="Add a nullable column for a field the table lacks.")
    .define("delete.enabled", Type.BOOLEAN, default=False,
            doc="A record with a null value deletes the row of its key (needs pk.mode=record_key).")
    .define("batch.size", Type.INT, default=3000, validator=Range.at_least(1),
            doc="Rows written per statement (or COPY) at most; commits happen at the runtime's commit points.")
    .define("offsets.table.name", Type.STRING, default=OFFSETS_TABLE, validator=non_empty_string,
            doc="Table (in the destination) holding the sink's consumed offsets and generation.")
    .define("max.retries", Type.INT, default=10, validator=Range.at_least(0),
            doc="Times in a row a lost or restarting database is retried (the JDBC sink's name) before the run "
                "fails; each retry rolls back, waits retry.backoff.ms and delivers again from the last commit.")
    .define("retry.backoff.ms", Type.INT, default=3000, validator=Range.at_least(0),
            doc="Wait before each such retry (the JDBC sink's name). A database that stays down fails the run "
                "after about max.retries x (retry.backoff.ms + connecting) ms, bounded by errors.retry.timeout.")
)

_DATA_ERRORS: tuple[type[BaseException], ...] = ()


def _offsets_table(cfg: Mapping[str, Any]) -> Table:
    """The offsets table (``offsets.table.name``, ``schema.name`` allowed): one row per connector and
    topic partition: the next offset to write (NULL: claimed by a run, nothing written yet) and the
    generation of the run that last claimed or wrote it."""
    import sqlalchemy as sa

    name = str(cfg["offsets.table.name"])
    table_name, schema = (name.split(".", 1)[::-1] if "." in name else (name, None))
    return sa.Table(
        table_name, sa.MetaData(),
        sa.Column("connector", sa.String(255), primary_key=True),
        sa.Column("topic", sa.String(255), primary_key=True),
        sa.Column("kafka_partition", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("next_offset", sa.BigInteger, nullable=True),
        sa.Column("generation", sa.BigInteger, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        schema=schema,
    )


def _create_offsets_table(conn: Connection, table: Table) -> None:
    """Create the offsets table if missing, committed at once (``conn`` outside a transaction); another
    task or process creating it at the same moment is fine."""
    try:
        table.create(conn, checkfirst=True)
        conn.commit()
    except Exception:
        conn.rollback()
        if not conn.dialect.has_table(conn, table.name, schema=table.schema):
            raise
        conn.rollback()


def _connector_name(props: Mapping[str, Any]) -> str:
    return str(props.get("name") or "sql-sink")


def _db_error(connector: str, what: str, url: URL, exc: BaseException) -> ConnectError:
    """A database failure as one message: what was done where (password hidden), the driver's cause."""
    orig = getattr(exc, "orig", None) or exc
    return ConnectError(f"SqlSink {connector!r}: {what} failed: {type(orig).__name__}: "
                        f"{scrub(str(orig).strip(), url)}")


def _transient(exc: BaseException | None) -> bool:
    """The database is gone, restarting or busy (worth a retry), as opposed to "this row does not fit": a
    connection the driver invalidated, an operational or interface error of psycopg (admin shutdown, connection
    refused or reset), SQLite's "database is locked". Follows the exception's chain."""
    from sqlalchemy import exc as sa_exc

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DatabaseUnavailable):
            return True
        if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
            return True
        if isinstance(exc, sa_exc.DisconnectionError):
            return True
        orig = getattr(exc, "orig", None)
        if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)) and orig is not None:
            if type(orig).__module__.startswith("sqlite3"):  # SQLite reports bad SQL as OperationalError too
                text = str(orig).lower()
                return "locked" in text or "busy" in text
            return True
        try:
            import psycopg

            if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
                return True
        except ImportError:  # pragma: no cover - psycopg is what the sql extra installs
            pass
        exc = exc.__cause__ or exc.__context__
    return False


def _data_errors() -> tuple[type[BaseException], ...]:
    """Driver errors that mean "this row does not fit" (not "the database is gone")."""
    global _DATA_ERRORS
    if not _DATA_ERRORS:
        from sqlalchemy import exc as sa_exc

        found: list[type[BaseException]] = [sa_exc.DataError, sa_exc.IntegrityError, sa_exc.ProgrammingError,
                                            sa_exc.StatementError, DataError]
        try:
            import psycopg

            found += [psycopg.DataError, psycopg.IntegrityError, psycopg.ProgrammingError]
        except ImportError:  # pragma: no cover - psycopg is what the sql extra installs
            pass
        _DATA_ERRORS = tuple(found)
    return _DATA_ERRORS


def _cross_check(cfg: Mapping[str, Any]) -> dict[str, str]:
    errors: dict[str, str] = {}
    mode, pk = str(cfg["insert.mode"]).lower(), str(cfg["pk.mode"]).lower()
    if mode in ("upsert", "update") and pk == "none":
        errors["pk.mode"] = f"record_key or record_value (insert.mode={mode} needs a key)"
    if cfg["delete.enabled"] and pk != "record_key":
        errors["delete.enabled"] = "false, or pk.mode=record_key (a delete is found by the record key)"
    return errors


class SqlSink(SinkConnector):
    """Writes topics into tables; every task keeps its offsets in the destination's offsets table."""

    VERSION = VERSION

    def config_def(self) -> ConfigDef:
        return SINK_CONFIG

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        values = super().validate(props)
        if any(cv.errors for cv in values):
            return values
        errors = _cross_check({cv.name: cv.value for cv in values})
        for cv in values:
            if cv.name in errors:
                cv.errors.append(f"expected {errors[cv.name]}")
        return values

    def start(self, props: Mapping[str, str]) -> None:
        cfg = SINK_CONFIG.parse(props)
        errors = _cross_check(cfg)
        if errors:
            raise ConfigError(errors=errors)
        self._props = {k: v for k, v in props.items() if k in SINK_CONFIG.keys or k == "name"}
        engine = create_engine(cfg)
        try:
            connect(engine, cfg, "checking the destination").close()  # fail fast, bounded
        finally:
            engine.dispose()

    def task_class(self) -> type:
        return SqlSinkTask

    # -- KIP-875: the offsets kept in the destination (called on a connector that is not started) -------

    @staticmethod
    def _parse(connector_config: Mapping[str, Any]) -> dict[str, Any]:
        cfg = SINK_CONFIG.parse(connector_config)
        errors = _cross_check(cfg)
        if errors:
            raise ConfigError(errors=errors)
        return cfg

    def read_offsets(self, connector_config: Mapping[str, Any]) -> DestinationOffsets:
        """The next offset per partition in the offsets table (rows of ``name``; a claimed row without an
        offset is none) and the newest generation there (``-1``: no row, or no table)."""
        import sqlalchemy as sa

        cfg = self._parse(connector_config)
        name = _connector_name(connector_config)
        table = _offsets_table(cfg)
        engine = create_engine(cfg)
        where = f"table {table.fullname} on {safe_url(engine.url)}"
        try:
            with connect(engine, cfg, f"reading the offsets of sink {name!r}") as conn:
                if not conn.dialect.has_table(conn, table.name, schema=table.schema):
                    return DestinationOffsets({}, -1, where)
                t = table.c
                rows = conn.execute(sa.select(t.topic, t.kafka_partition, t.next_offset, t.generation)
                                    .where(t.connector == name)).all()
        except ConnectError:
            raise
        except Exception as exc:
            raise _db_error(name, f"reading the offsets from {where}", engine.url, exc) from exc
        finally:
            engine.dispose()
        offsets = {TopicPartition(str(topic), int(p)): int(nxt) for topic, p, nxt, _ in rows if nxt is not None}
        return DestinationOffsets(offsets, max((int(r[3]) for r in rows), default=-1), where)

    def alter_offsets(self, connector_config: Mapping[str, Any], offsets: Mapping[TopicPartition, int | None],
                      generation: int) -> bool:
        """In one transaction: lock the connector's rows, refuse (:class:`ProducerFencedError`) when one
        holds a generation newer than ``generation``, then set each partition's next offset (an int) or
        reset it (``None``: the row keeps no offset, so the next run starts where the consumer group
        does), and raise every row of the connector to ``generation``: every older run is fenced, also
        on partitions not altered, and the generation stays recorded after a reset. Creates the offsets
        table when missing."""
        import sqlalchemy as sa

        cfg = self._parse(connector_config)
        name = _connector_name(connector_config)
        table = _offsets_table(cfg)
        changes = {TopicPartition(*tp): (None if off is None else int(off)) for tp, off in offsets.items()}
        bad = {f"{tp.topic}-{tp.partition}": off for tp, off in changes.items()
               if (off is not None and off < 0) or tp.partition < 0}
        if bad:
            raise ConnectError(f"SqlSink {name!r}: offsets and partitions must not be negative, got {bad}")
        engine = create_engine(cfg, serializable_sqlite=True)
        where = f"table {table.fullname} on {safe_url(engine.url)}"
        t = table.c
        try:
            with connect(engine, cfg, f"altering the offsets of sink {name!r}") as conn:
                _create_offsets_table(conn, table)
                with conn.begin():
                    stmt = sa.select(t.topic, t.kafka_partition, t.generation).where(t.connector == name)
                    if conn.dialect.name != "sqlite":  # SQLite: BEGIN IMMEDIATE already holds the write lock
                        stmt = stmt.with_for_update()
                    rows = conn.execute(stmt).all()
                    newest = max((int(r[2]) for r in rows), default=-1)
                    if newest > generation:
                        raise ProducerFencedError(
                            f"SqlSink {name!r}: generation {newest} of this connector already wrote offsets in "
                            f"{where}; refusing to alter them as generation {generation} (a newer run started "
                            "since: alter its offsets again)")
                    have = {TopicPartition(str(topic), int(p)) for topic, p, _ in rows}
                    now = int(time.time() * 1000)
                    new = [{"connector": name, "topic": tp.topic, "kafka_partition": tp.partition, "next_offset": off,
                            "generation": generation, "updated_ms": now}
                           for tp, off in changes.items() if tp not in have]
                    if new:
                        conn.execute(table.insert(), new)
                    old = [{"b_topic": tp.topic, "b_partition": tp.partition, "next_offset": off}
                           for tp, off in changes.items() if tp in have]
                    if old:
                        conn.execute(table.update().where(
                            t.connector == name, t.topic == sa.bindparam("b_topic"),
                            t.kafka_partition == sa.bindparam("b_partition")).values(next_offset=sa.bindparam(
                                "next_offset")), old)
                    conn.execute(table.update().where(t.connector == name).values(generation=generation,
                                                                                  updated_ms=now))
        except ConnectError:
            raise
        except Exception as exc:
            raise _db_error(name, f"altering the offsets in {where}", engine.url, exc) from exc
        finally:
            engine.dispose()
        log.info("SqlSink %s: offsets altered in %s as generation %d: %s", name, where, generation,
                 {f"{tp.topic}-{tp.partition}": off for tp, off in changes.items()})
        return True

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # PASSWORD values stay Password objects (the runtime hands them over as they are)
        return [cast("dict[str, str]", dict(self._props)) for _ in range(max_tasks)]


# ------------------------------------------------------------------------------------------------
# Column coercion: the documented JSON forms back into what each column type takes


def _b64(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return base64.b64decode(v.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise ValueError(f"base64 text for a binary column ({exc})") from None
    return v


def _decimal(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return Decimal(v)
        except InvalidOperation:
            raise ValueError(f"a decimal number, got {_short(v)}") from None
    return v


def _iso(kind: type) -> Callable[[Any], Any]:
    what = {datetime: "date-time", date: "date", dtime: "time"}[kind]

    def conv(v: Any) -> Any:
        if isinstance(v, str):
            s = v[:-1] + "+00:00" if v.endswith(("Z", "z")) else v
            try:
                return kind.fromisoformat(s)  # type: ignore[attr-defined]
            except ValueError:
                raise ValueError(f"an ISO 8601 {what}, got {_short(v)}") from None
        if kind is datetime and isinstance(v, (int, float)) and not isinstance(v, bool):

            return datetime.fromtimestamp(v / 1000, UTC)  # epoch milliseconds
        return v
    return conv


_ISO = {kind: _iso(kind) for kind in (datetime, date, dtime)}


def _coercer(col_type: Any, copy_json: bool) -> Callable[[Any], Any] | None:
    """The per-value coercion of one column type (None: values go to the driver as they are)."""
    import sqlalchemy as sa

    if isinstance(col_type, sa.JSON):
        return (lambda v: v if v is None else json.dumps(v)) if copy_json else None
    if isinstance(col_type, sa.LargeBinary):
        return _b64
    if isinstance(col_type, sa.Numeric) and not isinstance(col_type, sa.Float):
        return _decimal
    if isinstance(col_type, sa.DateTime):
        return _ISO[datetime]
    if isinstance(col_type, sa.Date):
        return _ISO[date]
    if isinstance(col_type, sa.Time):
        return _ISO[dtime]
    if isinstance(col_type, (sa.String, sa.Text)) and not isinstance(col_type, sa.Enum):
        # an object or array into a text column: its JSON text (a number or bool stays as the driver writes it)
        return _text
    return None


def _text(v: Any) -> Any:
    return json.dumps(v) if isinstance(v, (dict, list)) else v


# A column of values converted at once: ``(values, text_ok) -> values``. ``text_ok``: the values go into a
# PostgreSQL text COPY, so a string whose form PostgreSQL parses exactly as Python does may be passed on
# as it is (checked by Python first, then matched against the strict forms below), saving an object per
# value and its re-rendering by the driver. Raises ValueError/TypeError as the per-value coercion does.
ColumnCoercer = Callable[[Sequence[Any], bool], Sequence[Any]]

_STR, _STR_NONE = frozenset({str}), frozenset({str, type(None)})
# plain decimal numbers, joined by ",": each is one Decimal and PostgreSQL both read as the same number
_DECIMAL_TEXT = re.compile(r"(?:[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?(?:,|$))+")
_ISO_TEXT = {
    datetime: re.compile(r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"
                         r"(?:[+-][0-9]{2}:[0-9]{2})?(?:,|$))+"),
    date: re.compile(r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2}(?:,|$))+"),
    dtime: re.compile(r"(?:[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:,|$))+"),
}


def _each(conv: Callable[[Any], Any]) -> ColumnCoercer:
    def column(values: Sequence[Any], text_ok: bool) -> Sequence[Any]:
        return [v if v is None else conv(v) for v in values]
    return column


def _column_coercer(col_type: Any, copy_json: bool) -> ColumnCoercer | None:
    """The column-at-once form of :func:`_coercer` (the same values; see :data:`ColumnCoercer`)."""
    conv = _coercer(col_type, copy_json)
    if conv is None:
        return None
    each = _each(conv)
    if conv is _text:
        def text(values: Sequence[Any], text_ok: bool) -> Sequence[Any]:
            return values if set(map(type, values)) <= _STR_NONE else each(values, text_ok)
        return text
    if conv is _decimal:
        def decimal(values: Sequence[Any], text_ok: bool) -> Sequence[Any]:
            kinds = set(map(type, values))
            if kinds == _STR:
                if text_ok and _DECIMAL_TEXT.fullmatch(",".join(values)):
                    return values
                try:
                    return list(map(Decimal, values))
                except InvalidOperation:
                    return each(values, text_ok)  # raises, naming the value
            return each(values, text_ok)
        return decimal
    kind = next((k for k, c in _ISO.items() if c is conv), None)
    if kind is None:
        return each
    parse, form = kind.fromisoformat, _ISO_TEXT[kind]  # type: ignore[attr-defined]

    def iso(values: Sequence[Any], text_ok: bool) -> Sequence[Any]:
        if set(map(type, values)) == _STR:
            try:
                parsed = list(map(parse, values))
            except ValueError:
                return each(values, text_ok)  # "...z", or raises naming the value
            if text_ok and form.fullmatch(",".join(values)):
                return values
            return parsed
        return each(values, text_ok)
    return iso


# auto.create / auto.evolve: which strings are typed values (see the package docstring). Strict on purpose:
# a column gets a type only when every value seen reads back exactly from it.
_TIMESTAMPTZ_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?"
                               r"(?:Z|[+-][0-9]{2}:[0-9]{2})")
_DATE_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DECIMAL_FORM = re.compile(r"-?(?:0|[1-9][0-9]*)\.([0-9]+)")
_NON_FINITE = frozenset({"NaN", "Infinity", "-Infinity"})  # SqlSource's forms of non-finite floats
_INT64 = range(-(2**63), 2**63)


def _all_parse(values: list[str], form: re.Pattern[str], parse: Callable[[str], Any]) -> bool:
    """Every value in ``form`` and a real date/time (``2026-02-30`` is not)."""
    for v in values:
        if not form.fullmatch(v):
            return False
        try:
            parse(v[:-1] + "+00:00" if v.endswith("Z") else v)
        except ValueError:
            return False
    return True


def _sql_type(values: list[Any], dialect: str, key: bool) -> Any:
    """A column type for auto.create / auto.evolve from the JSON values seen (the rule of the package
    docstring): booleans, integers, numbers, objects/arrays by their JSON type; strings that are all ISO
    8601 date-times with an offset, all dates, or all canonical decimals get that type; the rest is text.
    SQLite has no such types: decimals and date-times stay TEXT there (the exact string is kept), dates
    get ``DATE`` (the text form is what SQLite stores)."""
    import sqlalchemy as sa

    present = [v for v in values if v is not None]
    kinds = set(map(type, present))
    if kinds and kinds <= {bool}:
        return sa.Boolean()
    if kinds and kinds <= {int}:
        if dialect == "postgresql" and not all(v in _INT64 for v in present):
            return sa.Numeric()  # beyond BIGINT: exact
        return sa.BigInteger()
    if kinds and kinds <= {int, float, str} and float in kinds \
            and all(v in _NON_FINITE for v in present if type(v) is str):
        return sa.Double()
    if kinds and kinds <= {dict, list}:
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return JSONB()
        return sa.JSON()
    if kinds == {str}:
        if _all_parse(present, _DATE_FORM, date.fromisoformat):
            return sa.Date()
        if dialect != "sqlite":
            if _all_parse(present, _TIMESTAMPTZ_FORM, datetime.fromisoformat):
                return sa.DateTime(timezone=True)
            scales = [m.end() - m.start(1) if (m := _DECIMAL_FORM.fullmatch(v)) else -1 for v in present]
            if min(scales) >= 0:
                if dialect == "postgresql":
                    return sa.Numeric()  # unconstrained: each value keeps its digits and scale
                scale = max(scales)
                digits = max(len(v.lstrip("-")) - 1 for v in present)
                return sa.Numeric(precision=max(38, digits), scale=scale)
    return sa.String(255) if key else sa.Text()


class _Tables:
    """The destination tables a task writes, reflected once (again after a rollback of DDL)."""

    def __init__(self, task: SqlSinkTask) -> None:
        self.task = task
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
        copy_json = self.task.copy_json
        self.tables[name] = table
        self.coercers[table.fullname] = {c.name: _coercer(c.type, copy_json) for c in table.columns}
        self.column_coercers[table.fullname] = {c.name: _column_coercer(c.type, copy_json) for c in table.columns}
        self.names[name] = frozenset(c.name for c in table.columns)

    def get(self, conn: Connection, name: str, rows: list[dict[str, Any]], pk: list[str],
            first: SinkRecord, fields: tuple[str, ...] | None = None) -> Table:
        """The table ``name``, reflected once (created with auto.create); a field of ``rows`` the table has no
        column for is added (auto.evolve) or refused. ``fields``: the fields every row has, when known."""
        import sqlalchemy as sa

        table = self.tables.get(name)
        if table is None:
            table_name, schema = (name.split(".", 1)[::-1] if "." in name else (name, None))
            if sa.inspect(conn).has_table(table_name, schema=schema):
                table = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=conn)
            elif self.task.cfg["auto.create"]:
                table = self._create(conn, table_name, schema, rows, pk)
            else:
                # a ConfigError: the run fails at once (as Kafka Connect's JDBC sink task does), not after
                # redelivering for the retry bound when it surfaces at a commit point
                raise ConfigError(f"SqlSink: table {name!r} does not exist in {safe_url(conn.engine.url)} (record "
                                  f"{_where(first)}); create it or set auto.create=true",
                                  errors={"auto.create": f"true, or create table {name!r} first"})
            self._remember(name, table)
        names = self.names[name]
        if rows and not (names.issuperset(fields) if fields is not None else set().union(*rows) <= names):
            unknown: dict[str, list[Any]] = {}  # a field the table has no column for
            for row in rows:
                for k, v in row.items():
                    if k not in names:
                        unknown.setdefault(k, []).append(v)
            table = self._evolve(conn, name, table, unknown, rows)
        return table

    def _create(self, conn: Connection, table_name: str, schema: str | None, rows: list[dict[str, Any]],
                pk: list[str]) -> Table:
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
        cols = [sa.Column(k, _sql_type(v, dialect, k in pk), primary_key=k in pk, nullable=k not in pk,
                          autoincrement=False)
                for k, v in names.items()]
        table = sa.Table(table_name, sa.MetaData(), *cols, schema=schema)
        shown = table_name if schema is None else f"{schema}.{table_name}"
        log.info("SqlSink: auto.create: creating table %s (%s)", shown,
                 ", ".join(f"{c.name} {c.type.compile(conn.dialect)}" for c in cols))
        task = self.task
        try:
            if dialect == "sqlite":
                with conn.begin_nested():
                    table.create(conn)
            else:
                with connect(task.engine, task.cfg, f"auto.create of table {shown}") as apart, apart.begin():
                    table.create(apart)
        except ConnectError:
            raise
        except Exception as exc:
            if not sa.inspect(conn).has_table(table_name, schema=schema):
                raise task._db_error(f"auto.create of table {shown}", exc) from exc
            log.info("SqlSink: auto.create: table %s was created by another task meanwhile (%s); using it",
                     shown, type(getattr(exc, "orig", None) or exc).__name__)
            table = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=conn)
        return table

    def _evolve(self, conn: Connection, key: str, table: Table, fields: dict[str, list[Any]],
                rows: list[dict[str, Any]]) -> Table:
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
        if not self.task.cfg["auto.evolve"]:
            first = next(r for r in rows if any(k in r for k in fields))
            raise DataError(f"SqlSink: table {name!r} has no column {sorted(fields)[0]!r} for field(s) "
                            f"{sorted(fields)} of row {_short(first)}; set auto.evolve=true or add the column(s)")
        prep = conn.dialect.identifier_preparer
        table_name, schema = table.name, table.schema
        inside = conn.dialect.name == "sqlite"
        if not inside:
            self.task._commit_written(conn)
        for col, values in fields.items():
            typ = _sql_type(values, conn.dialect.name, False)
            ddl = typ.compile(conn.dialect)
            for attempt in range(1, _DDL_ATTEMPTS + 1):
                log.info("SqlSink: auto.evolve: adding column %s.%s %s", name, col, ddl)
                try:
                    with conn.begin_nested() if inside else conn.begin():
                        conn.exec_driver_sql(f"ALTER TABLE {prep.format_table(table)} ADD COLUMN {prep.quote(col)} "
                                             f"{ddl} NULL")
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
                        raise self.task._db_error(f"auto.evolve (adding column {col!r} to table {name})",
                                                  exc) from exc
                    log.info("SqlSink: auto.evolve: adding column %s.%s failed (%s); trying again", name, col,
                             type(getattr(exc, "orig", None) or exc).__name__)
        if not inside:
            self.task._begin()
        fresh = sa.Table(table_name, sa.MetaData(), schema=schema, autoload_with=conn)
        self._remember(key, fresh)
        return fresh


_DDL_ATTEMPTS = 3  # auto.evolve: an ALTER that failed while the column is still missing is tried again


class _Run:
    """Buffered records of one table and one kind (rows to write, or deletes), in offset order: parallel
    lists, so a batch of records is buffered with a few list extends, not an object per record."""

    __slots__ = ("is_delete", "keys", "records", "rows", "table")

    def __init__(self, table: str, is_delete: bool, keyed: bool) -> None:
        self.table = table
        self.is_delete = is_delete
        self.records: list[SinkRecord] = []
        self.keys: list[dict[str, Any] | None] | None = [] if keyed else None  # None: no keys (pk.mode=none)
        self.rows: list[dict[str, Any]] = []  # deletes: the keys


_TOPIC_PARTITION = attrgetter("topic", "partition")
_VALUE = attrgetter("value")


def _where(r: SinkRecord) -> str:
    return f"{r.topic}-{r.partition}@{r.offset}"


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 300 else s[:300] + "..."


_COPY_COLUMN = re.compile(r'\bcolumn "?([^":]+)"?: ')  # PostgreSQL's COPY context: "COPY t, line 1, column c: ..."
_QUOTED_COLUMN = re.compile(r'\bcolumn "([^"]+)"')
_INT_BITS = {"SmallInteger": 16, "BigInteger": 64, "Integer": 32}  # subclasses of Integer first


def _bad_field(orig: BaseException, table: Table, row: Mapping[str, Any]) -> str | None:
    """The field of a row the database refused, when it can be told: the driver's diagnostics (PostgreSQL
    names the column of a NOT NULL or COPY failure, or in its message), else the first value that cannot
    fit its column's declared type (NULL into NOT NULL, text longer than its length, an integer out of
    range, an object or array into a column that is neither JSON nor text)."""
    import sqlalchemy as sa

    diag = getattr(orig, "diag", None)
    found: list[str | None] = [getattr(diag, "column_name", None)]
    for text in (getattr(diag, "context", None), str(orig)):
        m = text and (_COPY_COLUMN.search(text) or _QUOTED_COLUMN.search(text))
        found.append(m.group(1) if m else None)
    for name in found:
        if name and name in row:
            return name
    for k, v in row.items():
        col = table.c.get(k)
        if col is None:
            continue
        typ = col.type
        if v is None:
            if not col.nullable:
                return k
        elif isinstance(v, (dict, list)):
            if not isinstance(typ, (sa.JSON, sa.String, sa.ARRAY)):
                return k
        elif isinstance(typ, sa.String) and typ.length and isinstance(v, str) and len(v) > typ.length:
            return k
        elif isinstance(typ, sa.Integer) and isinstance(v, int):
            bits = next((b for name, b in _INT_BITS.items() if isinstance(typ, getattr(sa, name))), 64)
            if not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
                return k
    return None


class SqlSinkTask(SinkTask):
    """See the package docstring: rows and offsets in one transaction per commit point, ``pre_commit`` → {}."""

    VERSION = VERSION

    def start(self, props: Mapping[str, str]) -> None:
        self.cfg = SINK_CONFIG.parse(props)
        self.connector = _connector_name(props)
        self.engine: Engine = create_engine(self.cfg, serializable_sqlite=True)
        self.mode = str(self.cfg["insert.mode"]).lower()
        self.pk_mode = str(self.cfg["pk.mode"]).lower()
        self.pk_fields: list[str] = list(self.cfg["pk.fields"])
        self.delete = bool(self.cfg["delete.enabled"])
        self.batch_size: int = self.cfg["batch.size"]
        self.fmt: str = self.cfg["table.name.format"]
        self.conn: Connection | None = None
        self.txn: RootTransaction | None = None
        self.copy = self.copy_json = False
        self.tables = _Tables(self)
        self.committed: dict[TopicPartition, int] = {}  # next offset stored in the destination
        self.written: dict[TopicPartition, int] = {}    # next offset after what the open transaction holds
        self.buffer: list[_Run] = []
        self.buffered = 0  # records in the buffer
        self.table_names: dict[str, str] = {}  # topic -> table
        self.fenced: ProducerFencedError | None = None
        self.writing: tuple[list[_Run], int, int] | None = None  # _write's place: (buffer, run, first record)
        self.offsets_table = _offsets_table(self.cfg)
        self.max_retries: int = self.cfg["max.retries"]
        self.backoff_ms: int = self.cfg["retry.backoff.ms"]
        self.retries = 0  # transient database failures in a row
        self.lost: RetriableError | None = None  # the open transaction was lost: deliver again from the last commit
        self.failed: ConnectError | None = None  # max.retries ran out

    # -- the offsets table ----------------------------------------------------------------------------

    def _connection(self) -> Connection:
        if self.conn is None:
            # after a lost connection, one attempt: the retries are the sink's (max.retries, retry.backoff.ms)
            self.conn = connect(self.engine, self.cfg, "writing rows", attempts=1 if self.retries else None)
            self.copy = self.conn.dialect.name == "postgresql" and self.conn.dialect.driver == "psycopg"
            self.copy_json = self.copy and self.mode == "insert"  # COPY takes JSON columns as JSON text
        return self.conn

    def _lock_offsets(self, conn: Connection, partitions: list[TopicPartition]) -> dict[TopicPartition, tuple[
            int | None, int]]:
        """The stored ``(next_offset, generation)`` of these partitions, rows locked for this transaction;
        refuses (ProducerFencedError) when a newer generation of the connector already wrote one."""
        import sqlalchemy as sa

        t = self.offsets_table
        stmt = sa.select(t.c.topic, t.c.kafka_partition, t.c.next_offset, t.c.generation).where(
            t.c.connector == self.connector, t.c.topic.in_(sorted({tp.topic for tp in partitions})))
        if conn.dialect.name != "sqlite":
            stmt = stmt.with_for_update()
        out: dict[TopicPartition, tuple[int | None, int]] = {}
        mine = self.context.generation
        for topic, partition, nxt, gen in conn.execute(stmt):
            tp = TopicPartition(topic, int(partition))
            if tp not in partitions:
                continue
            if int(gen) > mine:
                raise ProducerFencedError(
                    f"SqlSink {self.connector!r}: generation {gen} of this connector already wrote offsets for "
                    f"{tp.topic}-{tp.partition} in {t.fullname}; this run is generation {mine} (a zombie), so it "
                    "writes nothing")
            out[tp] = (None if nxt is None else int(nxt), int(gen))
        return out

    def _store_offsets(self, conn: Connection, offsets: Mapping[TopicPartition, int | None],
                       known: Mapping[TopicPartition, Any]) -> None:
        import sqlalchemy as sa

        t = self.offsets_table
        now = int(time.time() * 1000)
        gen = self.context.generation
        new = [{"connector": self.connector, "topic": tp.topic, "kafka_partition": tp.partition, "next_offset": off,
                "generation": gen, "updated_ms": now} for tp, off in offsets.items() if tp not in known]
        old = [{"b_topic": tp.topic, "b_partition": tp.partition, "next_offset": off, "generation": gen,
                "updated_ms": now} for tp, off in offsets.items() if tp in known]
        if new:
            conn.execute(t.insert(), new)
        if old:
            conn.execute(t.update().where(t.c.connector == self.connector, t.c.topic == sa.bindparam("b_topic"),
                                          t.c.kafka_partition == sa.bindparam("b_partition")), old)

    def open(self, partitions: list[TopicPartition]) -> None:
        """Claim the partitions for this generation (fencing older runs) and rewind to the stored offsets."""
        parts = [TopicPartition(*tp) for tp in partitions]
        if not parts:
            return
        conn = self._connection()
        try:
            _create_offsets_table(conn, self.offsets_table)
        except Exception as exc:
            raise self._db_error("creating the offsets table", exc) from exc
        try:
            with conn.begin():
                stored = self._lock_offsets(conn, parts)
                self._store_offsets(conn, {tp: stored.get(tp, (None, 0))[0] for tp in parts}, stored)
        except ProducerFencedError:
            raise
        except Exception as exc:
            raise self._db_error("claiming the offsets rows", exc) from exc
        rewind = {}
        for tp in parts:
            nxt = stored.get(tp, (None, 0))[0]
            if nxt is not None:
                rewind[tp] = nxt
                self.committed[tp] = self.written[tp] = nxt
        if rewind:
            log.info("SqlSink %s (generation %d): resuming at %s", self.connector, self.context.generation,
                     {f"{tp.topic}-{tp.partition}": o for tp, o in rewind.items()})
            self.context.offset(rewind)

    # -- put ------------------------------------------------------------------------------------------

    def put(self, records: list[SinkRecord]) -> None:
        if self.fenced is not None:
            raise self.fenced
        if self.failed is not None:
            raise self.failed
        if not records or self.lost is not None:
            return  # after a lost transaction: these come again once the runtime rewinds to the last commit
        try:
            self._put(records)
        except Exception as exc:
            if not _transient(exc):
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

    def _put(self, records: list[SinkRecord]) -> None:
        written = self.written
        keyed, delete, row_of = self.pk_mode != "none", self.delete, self._row
        names = self.table_names
        if not keyed and self._put_run(records):
            return
        # the next offset of the partition of the previous record, kept locally while records of one
        # partition follow each other (they come in runs) and stored back when the partition changes
        tp: TopicPartition | None = None
        nxt: int | None = None
        try:
            for r in records:
                topic, offset = r.topic, r.offset
                if tp is None or r.partition != tp.partition or topic != tp.topic:
                    if tp is not None and nxt is not None:
                        written[tp] = nxt
                    tp = TopicPartition(topic, r.partition)
                    nxt = written.get(tp)
                if nxt is not None and offset < nxt:
                    continue  # already written (delivered again before the rewind took effect)
                nxt = offset + 1
                table = names.get(topic)
                if table is None:
                    table = names[topic] = self.fmt.replace("${topic}", topic)
                v = r.value
                if v is None and not delete:
                    continue  # a tombstone without delete.enabled: nothing to write (the JDBC sink fails the record instead)
                try:
                    key = self._key(r) if keyed else None
                    row = (key or {}) if v is None else row_of(r, key)  # a delete: its key
                except DataError as exc:
                    if self.buffer:  # write what came before first: dead letters keep the records' order
                        self._write()
                    self._report(r, exc)
                    continue
                run = self._run(table, v is None)
                run.records.append(r)
                run.rows.append(row)
                if run.keys is not None:
                    run.keys.append(key)
                self.buffered += 1
        finally:
            if tp is not None and nxt is not None:
                written[tp] = nxt
        if self.buffered >= self.batch_size:
            self._write()

    def _run(self, table: str, is_delete: bool) -> _Run:
        """The buffer's last run if it is of this table and kind, else a new one."""
        buf = self.buffer
        if buf and buf[-1].table == table and buf[-1].is_delete == is_delete:
            return buf[-1]
        run = _Run(table, is_delete, self.pk_mode != "none")
        buf.append(run)
        return run

    def _put_run(self, records: list[SinkRecord]) -> bool:
        """The common case at once: records of one partition, all new, every value an object, no key.
        False (nothing done) when that is not the case."""
        first, last = records[0], records[-1]
        topic, partition = first.topic, first.partition
        if len(records) > 1 and not (last.partition == partition and last.topic == topic
                                     and set(map(_TOPIC_PARTITION, records)) == {(topic, partition)}):
            return False
        tp = TopicPartition(topic, partition)
        nxt = self.written.get(tp)
        if nxt is not None and first.offset < nxt:
            return False  # some were written already (delivered again before the rewind took effect)
        values = list(map(_VALUE, records))
        if set(map(type, values)) != {dict}:
            return False
        table = self.table_names.get(topic)
        if table is None:
            table = self.table_names[topic] = self.fmt.replace("${topic}", topic)
        run = self._run(table, False)
        run.records += records
        run.rows += values
        self.buffered += len(records)
        self.written[tp] = last.offset + 1  # as the loop of put() leaves it
        if self.buffered >= self.batch_size:
            self._write()
        return True

    def _key(self, r: SinkRecord) -> dict[str, Any]:
        if self.pk_mode == "record_key":
            k = r.key
            if isinstance(k, dict):
                fields = self.pk_fields or list(k)
                missing = [f for f in fields if f not in k]
                if missing:
                    raise DataError(f"SqlSink: record {_where(r)} key {_short(k)} lacks pk.fields {missing}")
                return {f: k[f] for f in fields}
            if k is None:
                raise DataError(f"SqlSink: record {_where(r)} has no key; pk.mode=record_key needs one")
            if len(self.pk_fields) != 1:
                raise DataError(f"SqlSink: record {_where(r)} has a primitive key {k!r}; pk.fields must name exactly "
                                f"one column for it, got {self.pk_fields}")
            return {self.pk_fields[0]: k}
        v = r.value
        if not isinstance(v, dict):
            raise DataError(f"SqlSink: record {_where(r)} has a {type(v).__name__} value {_short(v)}; expected a "
                            "JSON object (pk.mode=record_value takes the key from its fields)")
        fields = self.pk_fields or list(v)
        missing = [f for f in fields if f not in v]
        if missing:
            raise DataError(f"SqlSink: record {_where(r)} value lacks pk.fields {missing}")
        return {f: v[f] for f in fields}

    def _row(self, r: SinkRecord, key: dict[str, Any] | None) -> dict[str, Any]:
        v = r.value
        if not isinstance(v, dict):
            raise DataError(f"SqlSink: record {_where(r)} has a {type(v).__name__} value {_short(v)}; expected a "
                            "JSON object (one field per column)")
        if key is not None and self.pk_mode == "record_key":
            return {**v, **key}
        return v

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
        """Write the buffer inside the open transaction: its runs in order, ``batch.size`` rows per statement."""
        buf, self.buffer, self.buffered = self.buffer, [], 0
        if not buf:
            return
        conn = self._begin()
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

    def _written_offsets(self) -> dict[TopicPartition, int]:
        """In the middle of :meth:`_write`: the next offset per partition after what the open transaction
        holds (every record below it written, skipped or dead-lettered). ``written`` counts the whole
        buffer (and may lag for the partition ``put`` is in the middle of): the records of the buffer
        written so far move it up, those not written yet take it back to the first of them."""
        out = dict(self.written)
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

    def _commit_offsets(self, connection: Callable[[], Connection], offsets: Mapping[TopicPartition, int],
                        changed: Mapping[TopicPartition, int], what: str) -> None:
        """The commit step: lock the offsets rows of ``offsets`` (fenced by a newer generation), store the
        ``changed`` ones in the open transaction with its rows, commit; on any failure roll it all back."""
        try:
            conn = connection()
            stored = self._lock_offsets(conn, list(offsets))
            self._store_offsets(conn, changed, stored)
            assert self.txn is not None
            self.txn.commit()
            self.txn = None
        except BaseException as exc:
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
        offsets = self._written_offsets()
        changed = {tp: off for tp, off in offsets.items() if self.committed.get(tp) != off}
        self._commit_offsets(lambda: conn, offsets, changed, "committing rows and offsets before auto.evolve")
        self.committed.update(changed)
        log.info("SqlSink %s: committed the rows written so far before changing a table (offsets %s)",
                 self.connector, {f"{tp.topic}-{tp.partition}": o for tp, o in changed.items()})

    def _write_run(self, conn: Connection, name: str, records: list[SinkRecord],
                   keys: list[dict[str, Any] | None] | None, rows: list[dict[str, Any]], is_delete: bool) -> None:
        first_key = keys[0] if keys else None
        pk = list(first_key) if first_key is not None else list(self.pk_fields)
        shaped = self._columns(rows)
        table = self.tables.get(conn, name, rows, pk if self.pk_mode != "none" else [], records[0],
                                None if shaped is None else shaped[0])
        coerce = self.tables.coercers[table.fullname]
        copy = self.copy and self.mode == "insert" and not is_delete
        try:
            batch = None if shaped is None else self._coerce_columns(shaped, self.tables.column_coercers[table.fullname],
                                                                     copy)
            prepared: list[dict[str, Any]] | None = None
            if batch is None:
                prepared = [self._coerce(row, coerce) for row in rows]
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
            except _data_errors() as exc:
                if _transient(exc):
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
            except _data_errors() as exc:
                if _transient(exc):
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
                one = self._coerce(row, coerce)
            except (ValueError, TypeError) as exc:
                self._report(r, DataError(f"SqlSink: record {_where(r)} does not fit table {table.fullname}: {exc}"))
                continue
            try:
                with conn.begin_nested():
                    self._execute(conn, table, [one], pk, is_delete)
            except _data_errors() as exc:
                if _transient(exc):
                    raise  # the database is gone, not the rows bad
                orig = getattr(exc, "orig", None) or exc
                msg = scrub(str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__,
                            self.engine.url)
                field = _bad_field(orig, table, row)
                named = "" if field is None else f"field {field!r}: "
                self._report(r, DataError(f"SqlSink: record {_where(r)} does not fit table {table.fullname}: "
                                          f"{named}{type(orig).__name__}: {msg}; row {_short(row)}"))

    @staticmethod
    def _columns(rows: list[dict[str, Any]]) -> tuple[tuple[str, ...], list[list[Any]]] | None:
        """Rows that all have the same fields as ``(field names, columns)``, each column its values in row
        order; None when the rows differ in their fields (then each row is coerced on its own)."""
        cols = tuple(rows[0])
        if not cols or set(map(len, rows)) != {len(cols)}:
            return None
        try:  # the same number of fields and every one of cols in each row: the same fields
            return cols, [list(map(itemgetter(col), rows)) for col in cols]
        except KeyError:
            return None

    @staticmethod
    def _coerce_columns(shaped: tuple[tuple[str, ...], list[list[Any]]],
                        coercers: Mapping[str, ColumnCoercer | None],
                        text_ok: bool) -> tuple[tuple[str, ...], list[Sequence[Any]]]:
        """The columns of :meth:`_columns` coerced a column at a time (rows are zipped from the columns only
        as they are written: no object kept per row)."""
        cols, columns = shaped
        out: list[Sequence[Any]] = []
        for col, values in zip(cols, columns, strict=True):
            conv = coercers.get(col)
            out.append(values if conv is None else conv(values, text_ok))
        return cols, out

    def _coerce(self, row: dict[str, Any], coerce: Mapping[str, Callable[[Any], Any] | None]) -> dict[str, Any]:
        out = dict(row)
        for k, v in row.items():
            c = coerce.get(k)
            if c is not None and v is not None:
                try:
                    out[k] = c(v)
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"field {k!r}: {exc}") from None
        return out

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
        if not changed and not self.buffer and self.txn is None:
            return {}
        def write_then_begin() -> Connection:
            self._write()
            return self._begin()

        try:
            self._commit_offsets(write_then_begin, target, changed, "committing rows and offsets")
        except Exception as exc:
            if not _transient(exc):
                raise
            self._lose(exc, "committing rows and offsets")  # sets self.lost (or raises when max.retries ran out)
            again = cast("RetriableError", self.lost)
            self.lost = None
            raise again from exc
        self.retries = 0
        self.committed.update(changed)
        for tp, off in changed.items():
            if self.written.get(tp, -1) < off:
                self.written[tp] = off
        return {}

    def _rollback(self) -> None:
        """Forget the open transaction: nothing of it was committed; redelivered records are written again."""
        txn, self.txn = self.txn, None
        self.buffer, self.buffered = [], 0
        if txn is not None:
            try:
                txn.rollback()
            except Exception as exc:
                (log.debug if _transient(exc) else log.warning)("SqlSink: rollback raised %r; dropping the "
                                                                 "connection", exc)
                self._drop_connection()
        self.tables.forget()  # DDL of the transaction (auto.create/evolve) was rolled back too
        self.written = dict(self.committed)

    def _drop_connection(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:
                log.debug("SqlSink: closing the connection raised %r", exc)

    def _db_error(self, what: str, exc: BaseException) -> ConnectError:
        return _db_error(self.connector, f"{what} on {safe_url(self.engine.url)}", self.engine.url, exc)

    def close(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            tp = TopicPartition(*tp)
            self.written.pop(tp, None)
            self.committed.pop(tp, None)
        if self.txn is not None and not self.written:
            self._rollback()

    def stop(self) -> None:
        if self.txn is not None:
            self._rollback()
        self._drop_connection()
        self.engine.dispose()


__all__ = ["OFFSETS_TABLE", "SINK_CONFIG", "SqlSink", "SqlSinkTask"]
