"""How the SQL connectors tell database failures apart and name them: a **transient** failure (the database is
gone, restarting or busy: SqlSink delivers again from the last commit, bounded by ``max.retries``; SqlSource
reconnects and reads on from what it handed out, bounded by ``connection.attempts``) or a **data** error (this
row does not fit: found row by row, reported or failing the run); one message per failure naming what was done
where, the password hidden; a record named as ``topic-partition@offset``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connect_runtime.api.errors import ConnectError, DataError
from connect_runtime.api.records import SinkRecord
from connect_runtime.connectors.sql._common import DatabaseRefused, DatabaseUnavailable, cause
from connect_runtime.connectors.sql._tls import refusal

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

_DATA_ERRORS: tuple[type[BaseException], ...] = ()


def db_error(connector: str, what: str, url: URL, exc: BaseException) -> ConnectError:
    """A database failure as one message: what was done where (password hidden), the driver's cause."""
    return ConnectError(f"SqlSink {connector!r}: {what} failed: {cause(exc, url)}")


def transient(exc: BaseException | None) -> bool:
    """The database is gone, restarting or busy (worth a retry), as opposed to "this row does not fit": a
    connection the driver invalidated, an operational or interface error of psycopg (admin shutdown, connection
    refused or reset), SQLite's "database is locked". Follows the exception's chain. Never a refusal no retry
    fixes (:class:`DatabaseRefused`, or a driver error that :func:`~connect_runtime.connectors.sql._tls.refusal`
    recognises: a TLS verification or authentication failure, ``pg_hba.conf``)."""
    from sqlalchemy import exc as sa_exc

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DatabaseRefused):
            return False
        if isinstance(exc, DatabaseUnavailable):
            return True
        if _refused(exc):
            return False
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


def _refused(exc: BaseException) -> bool:
    from sqlalchemy.engine import make_url

    orig = getattr(exc, "orig", None) or exc
    if not type(orig).__module__.startswith("psycopg"):
        return False
    # no URL to hand: the cause alone decides (the certificate probe needs a host, so it does not run)
    return refusal(str(orig), make_url("postgresql://"), 0.1) is not None


def data_errors() -> tuple[type[BaseException], ...]:
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


def where(r: SinkRecord) -> str:
    return f"{r.topic}-{r.partition}@{r.offset}"


def short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 300 else s[:300] + "..."


__all__ = ["data_errors", "db_error", "short", "transient", "where"]
