"""PostgresCdcSource: the connector (config, the publication, one task). See docs/cdc.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from connect_runtime.api.config import ConfigDef
from connect_runtime.api.connector import ConnectorTransactionBoundaries, ExactlyOnceSupport, SourceConnector
from connect_runtime.api.errors import ConfigError, ConnectError
from connect_runtime.connectors.cdc import _db
from connect_runtime.connectors.cdc._config import CDC_CONFIG, tables_of
from connect_runtime.connectors.cdc._read import quote
from connect_runtime.connectors.cdc._task import VERSION, PostgresCdcTask
from connect_runtime.connectors.sql._common import log


class PostgresCdcSource(SourceConnector):
    """Change data capture from PostgreSQL with ``pgoutput``: Debezium's events, exactly once (docs/cdc.md).

    ``start`` checks the tables and the publication (``publication.name``): created ``FOR TABLE`` the
    ``table.include.list`` (``FOR ALL TABLES`` when the list is empty) when missing; an existing one must publish
    every listed table (else a :class:`ConfigError` naming it and the tables it lacks). One task: a slot has one
    reader."""

    VERSION = VERSION

    def config_def(self) -> ConfigDef:
        return CDC_CONFIG

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED

    def task_class(self) -> type:
        return PostgresCdcTask

    def start(self, props: Mapping[str, str]) -> None:
        self._props = dict(props)
        cfg = CDC_CONFIG.parse(props)
        tables = tables_of(cfg)
        publication = cfg["publication.name"]
        conn = _db.connect(cfg, "checking the publication")
        try:
            wal_level = conn.execute("SHOW wal_level").fetchone()[0]  # type: ignore[index]
            if wal_level != "logical":
                raise ConnectError(f"the PostgreSQL server of {conn.info.dbname!r} runs with wal_level={wal_level}; "
                                   "change data capture needs wal_level=logical (postgresql.conf or ALTER SYSTEM, "
                                   "then a restart)")
            missing = [t for t in tables if conn.execute("SELECT to_regclass(%s)", (_sql_name(t),)).fetchone()[0]  # type: ignore[index]
                       is None]
            if missing:
                raise ConfigError(errors={"table.include.list": f"tables of database {conn.info.dbname!r}, and "
                                                                f"{', '.join(missing)} do not exist"})
            if conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (publication,)).fetchone() is None:
                what = ", ".join(_sql_name(t) for t in tables) if tables else None
                conn.execute(f"CREATE PUBLICATION {quote(publication)} "
                             + (f"FOR TABLE {what}" if what else "FOR ALL TABLES"))
                log.info("PostgresCdcSource: created publication %s for %s", publication, what or "all tables")
            else:
                published = {f"{s}.{t}" for s, t in conn.execute(
                    "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (publication,))}
                lacking = [t for t in tables if t not in published]
                if lacking:
                    raise ConfigError(errors={"publication.name": (
                        f"a publication of every table of table.include.list; {publication!r} does not publish "
                        f"{', '.join(lacking)} (ALTER PUBLICATION {quote(publication)} ADD TABLE ...)")})
        finally:
            conn.close()

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        base: dict[str, Any] = {k: v for k, v in self._props.items() if k in CDC_CONFIG.keys}
        return [cast("dict[str, str]", base)]  # PASSWORD values stay Password objects


def _sql_name(table: str) -> str:
    schema, _, name = table.partition(".")
    return f"{quote(schema)}.{quote(name)}"


__all__ = ["PostgresCdcSource"]
