"""Backends: where records and offsets live. ``open_backend(url)`` picks one by URL scheme.

- ``sqlite:///path/to/file.db`` (embedded default; ``sqlite:///:memory:`` is refused: processes must share it)
- ``kafka://host:9092[,host2:9092]`` with client settings (any librdkafka property)

Backend modules are imported only when a URL needs them, so ``confluent_kafka`` is never imported
for the SQLite backend.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.errors import ConfigError, missing_extra
from connect_runtime.backends.base import (
    Backend,
    ConsumedRecord,
    Consumer,
    OffsetStore,
    Producer,
    ProducerRecord,
    TransactionalProducer,
    Written,
)


def open_backend(url: str | Backend, settings: Mapping[str, Any] | None = None, *,
                 read_only: bool = False) -> Backend:
    """Open the backend a URL names. ``settings`` are backend client settings (Kafka: librdkafka
    properties and ``producer.override.*`` / ``consumer.override.*`` / ``admin.override.*``;
    SQLite: ``busy.timeout.ms``, ``synchronous``, ``default.partitions``).

    ``read_only=True`` is for inspecting (``pyconnect offsets get``, ``topics list|read``): SQLite then
    creates nothing (a path naming no file is a :class:`~connect_runtime.api.errors.BackendError`) and
    opens a file the user may only read; Kafka creates nothing on open anyway."""
    if isinstance(url, Backend):
        return url
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        from connect_runtime.backends.sqlite import SQLiteBackend

        return SQLiteBackend.from_url(url, settings or {}, read_only=read_only)
    if scheme == "kafka":
        try:
            from connect_runtime.backends.kafka import KafkaBackend
        except ImportError as exc:
            raise missing_extra(exc, "the Kafka backend (kafka:// URLs)") from exc
        return KafkaBackend.from_url(url, settings or {})
    raise ConfigError(
        errors={"backend": f"expected a URL sqlite:///path/to/file.db or kafka://host:port[,host:port], got {url!r}"}
    )


def kafka_bootstrap_servers(url: str) -> str:
    """``host:port[,host:port]`` of a ``kafka://host:port[,host:port]`` backend URL: the one parser of such URLs
    (the Kafka backend's, and Spark's Kafka source options). Imports no Kafka client.

    :raises ConfigError: naming ``backend``, when the URL names no ``host:port``.
    """
    rest = url.split("://", 1)[1] if "://" in url else ""
    rest = rest.split("?", 1)[0].strip("/")
    servers = [s.strip() for s in rest.split(",") if s.strip()]
    bad = [s for s in servers if not re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[^:/\s\[\]]+):\d{1,5}", s)]
    if not servers or bad:
        raise ConfigError(errors={"backend": f"expected a URL kafka://host:port[,host:port], got {url!r}"})
    return ",".join(servers)


__all__ = [
    "Backend",
    "ConsumedRecord",
    "Consumer",
    "OffsetStore",
    "Producer",
    "ProducerRecord",
    "TransactionalProducer",
    "Written",
    "kafka_bootstrap_servers",
    "open_backend",
]
