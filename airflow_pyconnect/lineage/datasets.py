"""Which datasets a connector run reads and writes, named by OpenLineage's naming spec (plain data; no OpenLineage
import here, so it is tested and used without the provider).

Two sides to every run (docs/lineage.md has the table):

- **the topics**, on the run's backend: a Kafka topic is namespace ``kafka://{host}:{port}`` (the first bootstrap
  server of the connection; port 9092 when it names none) and name the topic, as the spec says; a topic of the
  embedded SQLite store is namespace ``pyconnect+sqlite://{path of the store file}`` (:data:`EMBEDDED_SCHEME`, ours:
  the spec has no SQLite) and name the topic;
- **the connector's external side**, by connector kind (:data:`EXTERNAL`): ``DirectorySource`` reads its
  ``directory`` (``file``, the path); ``FileSink`` writes ``<directory>/<topic>`` per topic (``file``);
  ``ParquetSink`` writes ``<path>/<topics.dir>/<topic>`` per topic (``file`` and the path for a local lake,
  ``s3://{bucket}`` and the key prefix on S3, ``{scheme}://{host}`` and the path on another fsspec store);
  ``SqlSource`` reads and ``SqlSink`` writes tables (``postgres://{host}:{port}`` and ``{database}.{schema}.{table}``
  on PostgreSQL; ``sqlite://{path}`` and the table on a SQLite database); ``PostgresCdcSource`` reads the tables it
  captures (``postgres://{host}:{port}`` and ``{database}.{schema}.{table}``); ``DataGenSource`` reads nothing
  outside.
  A connector class this module does not know reports its topics only.

Each dataset may carry the columns the run knows (:attr:`Dataset.fields`): a topic's, from the Connect value schema
of the records the run wrote or read (:func:`connect_fields`; schemaless records have none), the ParquetSink's
``parquet.schema``, the SqlSink's table as the database describes it. Credentials in a URL never reach a name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "EMBEDDED_SCHEME", "EXTERNAL", "Dataset", "backend_namespace", "connect_fields", "connector_kind",
    "external_datasets", "sql_table_dataset", "topic_datasets", "url_dataset",
]

EMBEDDED_SCHEME = "pyconnect+sqlite"
"""The namespace scheme of a topic in the embedded SQLite store: ``pyconnect+sqlite://{absolute path of the file}``."""

KAFKA_DEFAULT_PORT = 9092


@dataclass(frozen=True)
class Dataset:
    """One dataset: OpenLineage's ``namespace`` and ``name``; ``topic``: the topic it holds or receives (its
    statistics and ranges are that topic's); ``fields``: ``(column, type)`` pairs when known."""

    namespace: str
    name: str
    topic: str | None = None
    fields: tuple[tuple[str, str], ...] = field(default=())


def connector_kind(config: Mapping[str, Any]) -> str:
    """The connector's class name (``connect_runtime.connectors.files.FileSink`` -> ``FileSink``)."""
    return str(config.get("connector.class", "")).rpartition(".")[2]


def backend_namespace(url: str) -> str:
    """The namespace of the topics on the backend at ``url``: ``kafka://{host}:{port}`` of its first bootstrap
    server, or ``pyconnect+sqlite://{path}`` of the embedded store."""
    text = url.strip()
    lowered = text.lower()
    if lowered.startswith("kafka://"):
        first = text[len("kafka://"):].split(",", 1)[0].strip().rsplit("@", 1)[-1].split("/", 1)[0]
        host, sep, port = first.rpartition(":") if first.count(":") == 1 or first.startswith("[") else ("", "", "")
        if not sep:
            host, port = first, str(KAFKA_DEFAULT_PORT)
        return f"kafka://{host}:{port or KAFKA_DEFAULT_PORT}"
    if lowered.startswith(("sqlite:///", "sqlite+pysqlite:///")):
        path = text.split(":///", 1)[1].split("?", 1)[0]
        return f"{EMBEDDED_SCHEME}://{os.path.abspath(path)}"
    raise ValueError(f"no OpenLineage namespace for the backend URL scheme of {text.split('://', 1)[0]!r}://")


def connect_fields(schema: Any) -> tuple[tuple[str, str], ...]:
    """The columns of a Connect struct schema, ``(field, type)``: the logical type's name where it has one
    (``org.apache.kafka.connect.data.Decimal``), else the Connect type (``int64``, ``struct``, ...); ``()`` for a
    schema that is not a struct."""
    if schema is None or getattr(getattr(schema, "type", None), "value", None) != "struct":
        return ()
    return tuple((f.name, f.schema.name or f.schema.type.value) for f in schema.fields)


def topic_datasets(backend_url: str, topics: Sequence[str], schemas: Mapping[str, Any] | None = None) -> list[Dataset]:
    """The datasets of ``topics`` on the backend at ``backend_url`` (sorted, once each), with the columns of the
    Connect value schema the run saw in each (``schemas``, per topic) where it had one."""
    namespace = backend_namespace(backend_url)
    return [Dataset(namespace, t, t, connect_fields((schemas or {}).get(t))) for t in sorted(set(topics))]


def url_dataset(url: str, topic: str | None = None, fields: tuple[tuple[str, str], ...] = ()) -> Dataset:
    """A path or an fsspec URL as a dataset: a local path (or ``file://``) is ``file`` and the absolute path; S3 is
    ``s3://{bucket}`` and the key prefix (no leading ``/``); another scheme ``{scheme}://{host}`` and the path."""
    text = str(url).strip()
    if "://" not in text or text.lower().startswith("file://"):
        path = text[len("file://"):] if text.lower().startswith("file://") else text
        return Dataset("file", os.path.abspath(path), topic, fields)
    parts = urlsplit(text)
    scheme, host = parts.scheme.lower(), parts.hostname or ""
    if scheme in ("s3", "s3a", "s3n"):
        return Dataset(f"s3://{host}", parts.path.lstrip("/") or "/", topic, fields)
    return Dataset(f"{scheme}://{host}" if host else scheme, parts.path or "/", topic, fields)


def sql_table_dataset(connection_url: str, table: str, *, schema: str | None = None, database: str | None = None,
                      topic: str | None = None, fields: tuple[tuple[str, str], ...] = ()) -> Dataset:
    """A table of a SQL connector's database: ``postgres://{host}:{port}`` and ``{database}.{schema}.{table}``
    (schema ``public`` unless the table or ``schema`` names one); ``sqlite://{path}`` and the table on SQLite."""
    parts = urlsplit(str(connection_url).strip())
    dialect = parts.scheme.split("+", 1)[0].lower()
    if "." in table and schema is None:
        schema, table = table.split(".", 1)
    if dialect in ("postgresql", "postgres"):
        db = database or parts.path.lstrip("/") or "postgres"
        return Dataset(f"postgres://{parts.hostname or 'localhost'}:{parts.port or 5432}",
                       f"{db}.{schema or 'public'}.{table}", topic, fields)
    if dialect == "sqlite":
        path = str(connection_url).split(":///", 1)[1].split("?", 1)[0] if ":///" in connection_url else ""
        return Dataset(f"sqlite://{os.path.abspath(path) if path else ':memory:'}",
                       f"{schema}.{table}" if schema else table, topic, fields)
    host = f"{parts.hostname}:{parts.port}" if parts.port else (parts.hostname or "")
    db = database or parts.path.lstrip("/")
    return Dataset(f"{dialect}://{host}", ".".join(p for p in (db, schema, table) if p), topic, fields)


# -- the external side, per connector kind ------------------------------------------------------------------

def _directory_source(config: Mapping[str, Any], topics: Sequence[str], extra: Mapping[str, Any]) -> list[Dataset]:
    directory = config.get("directory")
    return [url_dataset(str(directory))] if directory else []


def _file_sink(config: Mapping[str, Any], topics: Sequence[str], extra: Mapping[str, Any]) -> list[Dataset]:
    directory = str(config.get("directory") or "")
    return [url_dataset(f"{directory.rstrip('/')}/{t}", t) for t in topics] if directory else []


def _parquet_sink(config: Mapping[str, Any], topics: Sequence[str], extra: Mapping[str, Any]) -> list[Dataset]:
    import json

    root = str(config.get("path") or "")
    if not root:
        return []
    columns: tuple[tuple[str, str], ...] = ()
    declared = config.get("parquet.schema")
    if declared:
        try:
            parsed = json.loads(declared) if isinstance(declared, str) else declared
        except ValueError:
            parsed = None
        if isinstance(parsed, Mapping):
            columns = tuple((str(k), str(v)) for k, v in parsed.items())
    topics_dir = str(config.get("topics.dir") or "topics").strip("/")
    return [url_dataset(f"{root.rstrip('/')}/{topics_dir}/{t}", t, columns) for t in topics]


def _sql_sink(config: Mapping[str, Any], topics: Sequence[str], extra: Mapping[str, Any]) -> list[Dataset]:
    url = str(config.get("connection.url") or "")
    if not url:
        return []
    described: Mapping[str, Mapping[str, Any]] = extra.get("tables") or {}
    fmt = str(config.get("table.name.format") or "${topic}")
    out = []
    for t in topics:
        d = described.get(t)
        if d is not None:
            out.append(sql_table_dataset(url, str(d["table"]), schema=d.get("schema"), database=d.get("database"),
                                         topic=t, fields=tuple((str(c), str(ty)) for c, ty in d["columns"])))
        else:
            out.append(sql_table_dataset(url, fmt.replace("${topic}", t), topic=t))
    return out


def _sql_source(config: Mapping[str, Any], topics: Sequence[str], extra: Mapping[str, Any]) -> list[Dataset]:
    url = str(config.get("connection.url") or "")
    if not url or config.get("query"):
        return []  # a query names no table (the spec's SQL job facet is where a query goes)
    prefix = str(config.get("topic.prefix") or "")
    included = [t.strip() for t in str(config.get("table.include.list") or "").split(",") if t.strip()]
    tables = included or [t[len(prefix):] for t in topics if t.startswith(prefix) and t[len(prefix):]]
    return [sql_table_dataset(url, table, topic=prefix + table.rpartition(".")[2]) for table in sorted(set(tables))]


def _cdc_source(config: Mapping[str, Any], topics: Sequence[str], extra: Mapping[str, Any]) -> list[Dataset]:
    """PostgresCdcSource: the tables of ``table.include.list`` (``public`` where no schema is named), else those
    whose topics the run wrote (``<topic.prefix>.<schema>.<table>``); each with its topic."""
    url = str(config.get("connection.url") or "")
    prefix = str(config.get("topic.prefix") or "")
    if not url or not prefix:
        return []
    listed = config.get("table.include.list") or ""
    entries = listed if isinstance(listed, (list, tuple)) else str(listed).split(",")
    included = [t if "." in t else f"public.{t}" for t in (str(e).strip() for e in entries) if t]
    tables = included or [t[len(prefix) + 1:] for t in topics
                          if t.startswith(prefix + ".") and t[len(prefix) + 1:].count(".") == 1]
    return [sql_table_dataset(url, table, topic=f"{prefix}.{table}") for table in sorted(set(tables))]


ExternalFn = Callable[[Mapping[str, Any], Sequence[str], Mapping[str, Any]], list[Dataset]]

EXTERNAL: dict[str, tuple[str, ExternalFn]] = {
    "DirectorySource": ("input", _directory_source),
    "SqlSource": ("input", _sql_source),
    "PostgresCdcSource": ("input", _cdc_source),
    "DataGenSource": ("input", lambda config, topics, extra: []),
    "FileSink": ("output", _file_sink),
    "ParquetSink": ("output", _parquet_sink),
    "SqlSink": ("output", _sql_sink),
}
"""Per shipped connector kind: which side its external datasets are on (``input`` for a source, ``output`` for a
sink) and how they are named from its config, the topics of the run and what was learnt after it (``extra``: the
SqlSink's ``tables``)."""


def external_datasets(config: Mapping[str, Any], topics: Sequence[str],
                      extra: Mapping[str, Any] | None = None) -> list[Dataset]:
    """The datasets outside the backend that a run of ``config`` read (a source) or wrote (a sink), ``[]`` for a
    connector kind not in :data:`EXTERNAL`."""
    entry = EXTERNAL.get(connector_kind(config))
    return entry[1](config, sorted(set(topics)), extra or {}) if entry else []
