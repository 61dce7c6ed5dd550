"""What the SQL source and sink share: connection fields, engines, bounded connects, value forms.

SQLAlchemy (and psycopg, through it) is imported inside the functions here, never at module import:
the provider and DAG files may import ``connect_runtime.connectors`` names at parse time.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from datetime import time as dtime
from decimal import Decimal
from operator import attrgetter
from typing import TYPE_CHECKING, Any
from uuid import UUID

from connect_runtime.api.config import ConfigDef, Importance, Password, Range, Type, non_empty_string
from connect_runtime.api.errors import ConfigError, ConnectError
from connect_runtime.api.jsoncodec import JSON_FORMS
from connect_runtime.connectors.sql._tls import SECRET_QUERY, apply_tls, refusal, server, tls_fields

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Connection, Engine

log = logging.getLogger("connect_runtime.connectors.sql")

VERSION = "0.1.0"


def connection_fields(config: ConfigDef) -> ConfigDef:
    """The connection fields of both connectors (Kafka Connect JDBC names; the ``connection.ssl*`` fields are
    libpq's names, :mod:`connect_runtime.connectors.sql._tls`)."""
    return tls_fields(
        config
        .define("connection.url", Type.STRING, validator=_sqlalchemy_url, importance=Importance.HIGH,
                doc="SQLAlchemy URL, e.g. postgresql+psycopg://host:5432/db or sqlite:///path/file.db. Put the "
                    "credentials in connection.user / connection.password (they are masked everywhere).")
        .define("connection.user", Type.PASSWORD, default=None, importance=Importance.HIGH,
                doc="Database user (overrides the URL's).")
        .define("connection.password", Type.PASSWORD, default=None, importance=Importance.HIGH,
                doc="Database password (overrides the URL's).")
        .define("connection.attempts", Type.INT, default=3, validator=Range.at_least(1),
                doc="Attempts to connect (a positive integer; Kafka Connect JDBC's name and default) at start and, "
                    "for SqlSource, again after the database went away under a query (a restart, the connection "
                    "terminated): the run fails once they all failed, naming host and port.")
        .define("connection.backoff.ms", Type.LONG, default=10000, validator=Range.at_least(0),
                doc="Milliseconds between connection attempts (Kafka Connect JDBC's name and default). A database "
                    "that stays down fails the run after about connection.attempts x (connection.timeout.ms + "
                    "this) ms.")
        .define("connection.timeout.ms", Type.LONG, default=10000, validator=Range.at_least(1),
                doc="Bound on one connection attempt (PostgreSQL connect_timeout, SQLite busy timeout).")
    )


def _sqlalchemy_url(name: str, value: Any) -> None:
    non_empty_string(name, value)
    if value is None:
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(str(value))
    except ArgumentError:
        raise ValueError("a SQLAlchemy URL like postgresql+psycopg://host:5432/db or sqlite:///file.db") from None


def _secret(value: Any) -> str | None:
    if value is None:
        return None
    return value.value if isinstance(value, Password) else str(value)


def build_url(cfg: Mapping[str, Any]) -> URL:
    """The URL the connector connects to: ``connection.url`` with ``connection.user`` / ``connection.password``
    and the ``connection.ssl*`` fields applied, but ``connection.sslpassword`` (:func:`create_engine` hands it to
    the driver as a keyword: never in a URL)."""
    return _url_and_keywords(cfg)[0]


def _url_and_keywords(cfg: Mapping[str, Any]) -> tuple[URL, dict[str, Any]]:
    from sqlalchemy.engine import make_url

    url = make_url(str(cfg["connection.url"]))
    user, password = _secret(cfg.get("connection.user")), _secret(cfg.get("connection.password"))
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")  # psycopg 3, not SQLAlchemy's psycopg2 default
    if user:
        url = url.set(username=user)
    if password:
        url = url.set(password=password)
    return apply_tls(url, cfg)


def safe_url(url: URL) -> str:
    """The URL with its password hidden (for messages and logs), and a key password in its query too."""
    if url.query.get(SECRET_QUERY):
        url = url.update_query_dict({SECRET_QUERY: "***"})
    return url.render_as_string(hide_password=True)


def scrub(message: str, url: URL) -> str:
    """A driver message with the password (and a key password in the URL's query) removed wherever it appears."""
    secrets = [url.password, url.query.get(SECRET_QUERY)]
    for secret in secrets:
        for value in secret if isinstance(secret, tuple) else (secret,):
            if value:
                message = message.replace(str(value), "***")
    return message


def cause(exc: BaseException, url: URL) -> str:
    """A database failure's cause for a message: the driver's exception (SQLAlchemy's ``orig``), its type and
    text, the password removed."""
    orig = getattr(exc, "orig", None) or exc
    return f"{type(orig).__name__}: {scrub(str(orig).strip(), url)}"


def create_engine(cfg: Mapping[str, Any], *, serializable_sqlite: bool = False) -> Engine:
    """An engine for one task (or the connector). PostgreSQL sessions run in UTC, so naive timestamps
    compare as UTC; SQLite waits for the write lock up to ``connection.timeout.ms`` and, for the sink,
    begins every transaction with ``BEGIN IMMEDIATE`` (one writer, no lost updates)."""
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    url, keywords = _url_and_keywords(cfg)
    timeout_ms = int(cfg.get("connection.timeout.ms") or 10000)
    kwargs: dict[str, Any] = {"poolclass": NullPool}
    backend = url.get_backend_name()
    if backend == "postgresql":
        kwargs["connect_args"] = {"connect_timeout": max(1, math.ceil(timeout_ms / 1000)),
                                  "options": "-c timezone=UTC", **keywords}
    elif backend == "sqlite":
        kwargs["connect_args"] = {"timeout": timeout_ms / 1000}
    try:
        engine = sa.create_engine(url, **kwargs)
    except Exception as exc:  # a dialect or driver that is not installed
        raise ConfigError(errors={"connection.url": f"cannot use {safe_url(url)}: {scrub(str(exc), url)}"}) from None
    if backend == "sqlite" and serializable_sqlite:
        from sqlalchemy import event

        @event.listens_for(engine, "connect")
        def _autocommit_driver(dbapi_connection: Any, record: Any) -> None:
            dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)

        @event.listens_for(engine, "begin")
        def _begin_immediate(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


class DatabaseUnavailable(ConnectError):
    """The database could not be reached within ``connection.attempts`` (a server down or restarting)."""


class DatabaseRefused(ConnectError):
    """The server refused the connection for a reason no retry fixes (TLS verification, authentication,
    ``pg_hba.conf``, an unknown role or database): raised at the first attempt, never taken for transient."""


def connect(engine: Engine, cfg: Mapping[str, Any], what: str, attempts: int | None = None) -> Connection:
    """A connection, bounded by ``connection.attempts`` times (timeout + backoff; ``attempts`` overrides it);
    the error (:class:`DatabaseUnavailable`) names the database (password hidden) and what the connection was
    for. A refusal no retry fixes (:func:`~connect_runtime.connectors.sql._tls.refusal`) is
    :class:`DatabaseRefused` at once, naming the server, the cause and the setting to look at."""
    from sqlalchemy.exc import DBAPIError

    attempts = attempts or int(cfg.get("connection.attempts") or 3)
    backoff = int(cfg.get("connection.backoff.ms") or 0) / 1000
    timeout_s = max(1.0, int(cfg.get("connection.timeout.ms") or 10000) / 1000)
    t0 = time.monotonic()
    last: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            return engine.connect()
        except DBAPIError as exc:
            last = exc
            why = refusal(scrub(str(getattr(exc, "orig", exc)), engine.url), engine.url, timeout_s)
            if why is not None:
                raise DatabaseRefused(
                    f"cannot connect to the {server(engine.url)} for {what}: "
                    f"{scrub(why, engine.url)}; not retried (a retry would fail the same way)") from None
            if attempt < attempts:  # the last one is the error raised
                log.warning("SQL connector: connecting to %s for %s failed (attempt %d of %d): %s",
                            safe_url(engine.url), what, attempt, attempts, scrub(str(exc.orig), engine.url))
                time.sleep(backoff)
    assert last is not None
    orig = getattr(last, "orig", last)
    raise DatabaseUnavailable(
        f"cannot connect to {safe_url(engine.url)} (host {engine.url.host or 'local file'}) for {what}: "
        f"{attempts} attempts over {time.monotonic() - t0:.1f} s (connection.attempts, connection.backoff.ms, "
        f"connection.timeout.ms); last error: {scrub(str(orig).strip(), engine.url)}") from None


# ------------------------------------------------------------------------------------------------
# Value forms (documented in the package docstring): how a column value becomes JSON, and back


def _float(v: float) -> float | str:
    if math.isfinite(v):
        return v
    return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")


def _duration(v: timedelta) -> str:
    """ISO 8601 duration, days and (fractional) seconds: ``P1DT3723.5S``; negative: ``-P...``."""
    us = (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds
    sign = "-" if us < 0 else ""
    us = abs(us)
    days, rest = divmod(us, 86_400_000_000)
    secs = Decimal(rest) / Decimal(1_000_000)
    return f"{sign}P{days}DT{secs.normalize():f}S"


def _list(v: list[Any] | tuple[Any, ...]) -> list[Any]:
    return [to_json(x) for x in v]


_TO_JSON: dict[type, Callable[[Any], Any]] = {
    **JSON_FORMS,  # Decimal, datetime, date, time, bytes: the forms Connect's typed values take in JSON too
    timedelta: _duration,
    UUID: str,
    float: _float,
    list: _list,
    tuple: _list,
}
_PLAIN = frozenset({int, str, bool, type(None), dict})
_TZINFO = attrgetter("tzinfo")


def to_json(v: Any) -> Any:
    """One column value in its documented JSON form (see the package docstring)."""
    t = type(v)
    if t in _PLAIN:
        return v
    conv = _TO_JSON.get(t)
    if conv is not None:
        return conv(v)
    for base, c in _TO_JSON.items():  # subclasses (e.g. pendulum DateTime, psycopg Range types fall through)
        if isinstance(v, base):
            return c(v)
    return str(v)


_NONE = type(None)
_ZERO = timedelta(0)


def _fixed_utc(tz: Any) -> bool:
    """A zone whose offset is zero at every instant (``timezone.utc``, ``timezone(timedelta(0))``, UTC zones)."""
    if tz is UTC:
        return True
    if isinstance(tz, timezone):
        return tz.utcoffset(None) == _ZERO
    return str(getattr(tz, "key", "")) in ("UTC", "Etc/UTC", "Etc/UCT", "UCT", "Zulu", "Etc/Zulu")


def _datetimes(values: Sequence[Any]) -> list[Any] | None:
    """Every value a datetime in one zero-offset zone (or all naive): their forms at once, else None."""
    zones = set(map(_TZINFO, values))
    if len(zones) == 1:
        tz = zones.pop()
        if tz is None or _fixed_utc(tz):  # astimezone(UTC) would change nothing isoformat shows
            return list(map(datetime.isoformat, values))
    return None


def to_json_column(values: Sequence[Any]) -> Sequence[Any]:
    """One column's values (a batch of rows) in their documented JSON forms: the same as :func:`to_json`
    of each value, done a column at a time where the column holds one type (a batch of a query's rows
    nearly always does). The sequence itself when no value needs a change."""
    kinds = set(map(type, values))
    if kinds <= _PLAIN:
        return values
    nulls = _NONE in kinds
    if len(kinds) - nulls == 1:
        kind = next(k for k in kinds if k is not _NONE)
        present = [v for v in values if v is not None] if nulls else values
        out: Sequence[Any] | None = None
        if kind is float:
            out = present if all(map(math.isfinite, present)) else None
        elif kind is Decimal or kind is UUID:
            out = list(map(str, present))
        elif kind is datetime:
            out = _datetimes(present)
        elif kind is date or kind is dtime:
            out = list(map(kind.isoformat, present))
        if out is not None:
            if not nulls:
                return out
            it = iter(out)
            return [None if v is None else next(it) for v in values]
    return [to_json(v) for v in values]


def utc_naive(v: datetime) -> datetime:
    """A datetime as naive UTC (aware values converted; naive values are taken as UTC)."""
    if v.tzinfo is not None:
        return v.astimezone(UTC).replace(tzinfo=None)
    return v


def epoch_offset(v: datetime) -> tuple[int, int]:
    """Kafka Connect JDBC's timestamp offset: ``(timestamp, timestamp_nanos)``: epoch milliseconds, and the
    nanoseconds within the second (``java.sql.Timestamp.getTime()`` / ``getNanos()``)."""
    n = utc_naive(v)
    delta = n - datetime(1970, 1, 1)
    micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros // 1000, n.microsecond * 1000


def from_epoch_offset(ms: int, nanos: int | None) -> datetime:
    """The naive UTC datetime of a JDBC timestamp offset (microsecond precision)."""
    seconds = ms // 1000
    micros = (nanos // 1000) if nanos is not None else (ms % 1000) * 1000
    return datetime(1970, 1, 1) + timedelta(seconds=seconds, microseconds=micros)


def parse_instant(name: str, text: str) -> datetime:
    """An ISO 8601 instant (``2026-01-02T00:00:00+00:00``, ``2026-01-02 00:00:00``, ``...Z``) as naive UTC."""
    s = str(text).strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        return utc_naive(datetime.fromisoformat(s))
    except ValueError:
        raise ConfigError(errors={name: f"expected an ISO 8601 timestamp like 2026-01-02T00:00:00+00:00, "
                                        f"got {text!r}"}) from None


__all__ = [
    "VERSION",
    "DatabaseRefused",
    "DatabaseUnavailable",
    "build_url",
    "cause",
    "connect",
    "connection_fields",
    "create_engine",
    "epoch_offset",
    "from_epoch_offset",
    "parse_instant",
    "safe_url",
    "scrub",
    "to_json",
    "to_json_column",
    "utc_naive",
]
