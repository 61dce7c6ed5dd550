"""Debezium's PostgreSQL connector (3.6.1.Final) in Kafka Connect's own worker (tests/support/kafka_connect.py).

``scripts/fetch_debezium.sh`` puts the connector in ``$PYCONNECT_DEBEZIUM_HOME`` or
``~/.cache/airflow-pyconnect/debezium-3.6.1`` (``plugins/debezium-connector-postgres``, one plugin directory);
:func:`debezium_worker` starts a :class:`~tests.support.kafka_connect.ConnectWorker` with that on its
``plugin.path``. Without it the tests skip, saying why, except in CI, where they fail naming the fetch command.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from tests.support import cache_home, unavailable
from tests.support.kafka_connect import ConnectWorker

VERSION = "3.6.1"
HOME_ENV = "PYCONNECT_DEBEZIUM_HOME"
FETCH_COMMAND = "bash scripts/fetch_debezium.sh"
CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"


def _unavailable(reason: str) -> NoReturn:
    unavailable(f"Debezium {VERSION} is not available: {reason}; fetch it with `{FETCH_COMMAND}`",
                "CI runs the comparison with Debezium and never skips it")


def plugins_dir() -> Path:
    """The plugin path holding Debezium's PostgreSQL connector, or skip/fail saying what is missing."""
    plugins = cache_home(HOME_ENV, f"debezium-{VERSION}") / "plugins"
    jar = plugins / "debezium-connector-postgres" / f"debezium-connector-postgres-{VERSION}.Final.jar"
    if not jar.is_file():
        _unavailable(f"{jar} is missing (set {HOME_ENV} to use another place)")
    return plugins


@contextmanager
def debezium_worker(work_dir: Path, bootstrap: str, group: str) -> Iterator[ConnectWorker]:
    """A started Kafka Connect worker that can run Debezium's PostgreSQL connector; stopped on exit."""
    worker = ConnectWorker(work_dir, bootstrap, group, {"plugin.path": str(plugins_dir()),
                                                        "offset.storage.topic": f"{group}-offsets",
                                                        "offset.storage.partitions": "1"})
    try:
        yield worker.start()
    finally:
        worker.stop()


def postgres_connector(url: str, prefix: str, slot: str, publication: str, tables: str) -> dict[str, str]:
    """Debezium's configuration for the database at ``url`` (``postgresql[+psycopg]://user:pw@host:port/db``):
    pgoutput, its own slot and publication (created filtered to ``tables``), JsonConverter with schemas."""
    from urllib.parse import urlsplit

    parts = urlsplit(url.replace("postgresql+psycopg://", "postgresql://"))
    json_converter = "org.apache.kafka.connect.json.JsonConverter"
    return {
        "connector.class": CONNECTOR, "tasks.max": "1", "plugin.name": "pgoutput",
        "database.hostname": parts.hostname or "127.0.0.1", "database.port": str(parts.port or 5432),
        "database.user": parts.username or "postgres", "database.password": parts.password or "",
        "database.dbname": parts.path.lstrip("/"), "topic.prefix": prefix, "slot.name": slot,
        "publication.name": publication, "publication.autocreate.mode": "filtered", "table.include.list": tables,
        "key.converter": json_converter, "key.converter.schemas.enable": "true",
        "value.converter": json_converter, "value.converter.schemas.enable": "true"}


__all__ = ["CONNECTOR", "FETCH_COMMAND", "VERSION", "debezium_worker", "plugins_dir", "postgres_connector"]
