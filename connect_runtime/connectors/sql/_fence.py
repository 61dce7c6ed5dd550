"""SqlSink's destination as the fence: the offsets table ``pyconnect_sink_offsets`` (connector, topic,
kafka_partition, next_offset, generation) lives next to the rows and is written in their transaction.

- ``open()`` claims its partitions' rows for the run's generation (:meth:`SinkOffsets.claim`);
- every commit locks those rows and refuses (:class:`ProducerFencedError`, the transaction rolled back) when a
  newer generation claimed them (:meth:`SinkOffsets.lock`), then stores the next offsets (:meth:`SinkOffsets.store`);
- KIP-875: :func:`read_offsets` / :func:`alter_offsets` read and move them for a connector that is not running.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.connector import DestinationOffsets
from connect_runtime.api.errors import ConnectError, ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.connectors.sql._common import connect, create_engine, log, safe_url
from connect_runtime.connectors.sql._errors import db_error

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

OFFSETS_TABLE = "pyconnect_sink_offsets"


def offsets_table(cfg: Mapping[str, Any]) -> Table:
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


def create_offsets_table(conn: Connection, table: Table) -> None:
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


class SinkOffsets:
    """The offsets rows of one connector (one task's view): lock and fence, store, claim."""

    def __init__(self, table: Table, connector: str) -> None:
        self.table = table
        self.connector = connector

    def lock(self, conn: Connection, partitions: list[TopicPartition],
             generation: int) -> dict[TopicPartition, tuple[int | None, int]]:
        """The stored ``(next_offset, generation)`` of these partitions, rows locked for this transaction;
        refuses (ProducerFencedError) when a newer generation of the connector already wrote one."""
        import sqlalchemy as sa

        t = self.table
        stmt = sa.select(t.c.topic, t.c.kafka_partition, t.c.next_offset, t.c.generation).where(
            t.c.connector == self.connector, t.c.topic.in_(sorted({tp.topic for tp in partitions})))
        if conn.dialect.name != "sqlite":
            stmt = stmt.with_for_update()
        out: dict[TopicPartition, tuple[int | None, int]] = {}
        mine = generation
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

    def store(self, conn: Connection, offsets: Mapping[TopicPartition, int | None],
              known: Mapping[TopicPartition, Any], generation: int) -> None:
        """Write the next offsets (``None``: none yet) and ``generation`` into the rows of these partitions
        (``known``: those that have a row, as :meth:`lock` returned them), in the open transaction."""
        import sqlalchemy as sa

        t = self.table
        now = int(time.time() * 1000)
        gen = generation
        new = [{"connector": self.connector, "topic": tp.topic, "kafka_partition": tp.partition, "next_offset": off,
                "generation": gen, "updated_ms": now} for tp, off in offsets.items() if tp not in known]
        old = [{"b_topic": tp.topic, "b_partition": tp.partition, "next_offset": off, "generation": gen,
                "updated_ms": now} for tp, off in offsets.items() if tp in known]
        if new:
            conn.execute(t.insert(), new)
        if old:
            conn.execute(t.update().where(t.c.connector == self.connector, t.c.topic == sa.bindparam("b_topic"),
                                          t.c.kafka_partition == sa.bindparam("b_partition")), old)

    def claim(self, conn: Connection, partitions: list[TopicPartition],
              generation: int) -> dict[TopicPartition, int | None]:
        """``open()``, in a transaction of its own: lock the partitions' rows (fenced by a newer generation)
        and write ``generation`` into each (a new row holds no offset yet), so older runs are fenced from now
        on. Returns the stored next offset of each partition (``None``: none)."""
        with conn.begin():
            stored = self.lock(conn, partitions, generation)
            self.store(conn, {tp: stored.get(tp, (None, 0))[0] for tp in partitions}, stored, generation)
        return {tp: stored.get(tp, (None, 0))[0] for tp in partitions}


def read_offsets(cfg: Mapping[str, Any], name: str) -> DestinationOffsets:
    """The next offset per partition in the offsets table (rows of ``name``; a claimed row without an
    offset is none) and the newest generation there (``-1``: no row, or no table). ``cfg``: the parsed config."""
    import sqlalchemy as sa

    table = offsets_table(cfg)
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
        raise db_error(name, f"reading the offsets from {where}", engine.url, exc) from exc
    finally:
        engine.dispose()
    offsets = {TopicPartition(str(topic), int(p)): int(nxt) for topic, p, nxt, _ in rows if nxt is not None}
    return DestinationOffsets(offsets, max((int(r[3]) for r in rows), default=-1), where)


def alter_offsets(cfg: Mapping[str, Any], name: str, offsets: Mapping[TopicPartition, int | None],
                  generation: int) -> None:
    """In one transaction: lock the connector's rows, refuse (:class:`ProducerFencedError`) when one
    holds a generation newer than ``generation``, then set each partition's next offset (an int) or
    reset it (``None``: the row keeps no offset, so the next run starts where the consumer group
    does), and raise every row of the connector to ``generation``: every older run is fenced, also
    on partitions not altered, and the generation stays recorded after a reset. Creates the offsets
    table when missing. ``cfg``: the parsed config; ``name``: the connector's."""
    import sqlalchemy as sa

    table = offsets_table(cfg)
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
            create_offsets_table(conn, table)
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
        raise db_error(name, f"altering the offsets in {where}", engine.url, exc) from exc
    finally:
        engine.dispose()
    log.info("SqlSink %s: offsets altered in %s as generation %d: %s", name, where, generation,
             {f"{tp.topic}-{tp.partition}": off for tp, off in changes.items()})


__all__ = ["OFFSETS_TABLE", "SinkOffsets", "alter_offsets", "create_offsets_table", "offsets_table", "read_offsets"]
