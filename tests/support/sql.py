"""SqlSink test helpers: records into a topic, SQL on a destination, a SqlSink config, an opened SqlSinkTask."""

from __future__ import annotations

import json
from typing import Any

from connect_runtime.api import SinkTaskContext, TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.sql import SqlSinkTask

SINK = "connect_runtime.connectors.sql.SqlSink"


def produce(url: str, topic: str, records: list[tuple[Any, Any]], partitions: int = 1) -> None:
    """(key, value) pairs as JSON (``None`` value: a tombstone), round-robin over the partitions."""
    with open_backend(url) as backend:
        backend.create_topics({topic: partitions}, exist_ok=True)
        producer = backend.producer()
        try:
            producer.send(
                [
                    ProducerRecord(
                        topic,
                        i % partitions,
                        None if k is None else json.dumps(k).encode(),
                        None if v is None else json.dumps(v).encode(),
                    )
                    for i, (k, v) in enumerate(records)
                ]
            )
            producer.flush(30)
        finally:
            producer.close()


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(sql)]
    finally:
        engine.dispose()


def execute(url: str, *statements: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for s in statements:
                conn.exec_driver_sql(s)
    finally:
        engine.dispose()


def cfg(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "sql-sink", "connector.class": SINK, "connection.url": url, "topics": "orders", **extra}


class TaskContext(SinkTaskContext):
    """A sink task context for driving a :class:`SqlSinkTask` by hand (a run of a given generation)."""

    def __init__(self, generation: int) -> None:
        self._generation = generation
        self.rewinds: dict[TopicPartition, int] = {}

    @property
    def configs(self) -> dict[str, str]:
        return {}

    def offset(self, offsets: Any, offset: int | None = None) -> None:
        self.rewinds.update({offsets: offset} if isinstance(offsets, TopicPartition) else offsets)

    def assignment(self) -> set[TopicPartition]:
        return set()

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def request_commit(self) -> None:
        pass

    @property
    def generation(self) -> int:
        return self._generation

    def timeout(self, timeout_ms: int) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    @property
    def errant_record_reporter(self) -> None:
        return None


def open_task(config: dict[str, Any], generation: int, partitions: list[TopicPartition]) -> tuple[
        SqlSinkTask, TaskContext]:
    """A started and opened SqlSinkTask of this generation (as the runtime makes one)."""
    task, ctx = SqlSinkTask(), TaskContext(generation)
    task.initialize(ctx)
    task.start({k: str(v) for k, v in config.items()})
    try:
        task.open(partitions)
    except BaseException:
        task.stop()
        raise
    return task, ctx
