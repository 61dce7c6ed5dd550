"""ParquetSink and its task: topic partitions into Parquet files on any fsspec filesystem, exactly once, with the
files as the only state (rules: the package docstring; layout and recovery: :mod:`.store`; one partition's commit
groups: :mod:`._writer`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from connect_runtime.api.config import ConfigDef
from connect_runtime.api.connector import DestinationOffsets, SinkConnector
from connect_runtime.api.errors import ConnectError, ProducerFencedError
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.api.sink import SinkTask
from connect_runtime.connectors.lake._config import CONFIG, VERSION, LakeConfig
from connect_runtime.connectors.lake._partitioner import partitioner, timestamp_extractor
from connect_runtime.connectors.lake._writer import PartitionWriter, io_errors
from connect_runtime.connectors.lake.store import Lake, encode_file, file_name, recover


class ParquetSink(SinkConnector):
    """Writes topic partitions to Parquet files (pyarrow) on any fsspec filesystem, exactly once."""

    VERSION = VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        LakeConfig.parse(props)
        self._props = {k: v for k, v in props.items() if k in CONFIG.keys or k == "name"}

    def task_class(self) -> type:
        return ParquetSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        out = {k: (v.value if hasattr(v, "value") else ",".join(map(str, v)) if isinstance(v, list) else str(v))
               for k, v in self._props.items()}
        return [dict(out) for _ in range(max_tasks)]

    # -- offsets in the destination (KIP-875) -------------------------------------------------------------

    def read_offsets(self, connector_config: Mapping[str, Any]) -> DestinationOffsets:
        """The committed position of every topic partition with files, and the newest generation among them."""
        lake = Lake(LakeConfig.parse(connector_config))
        offsets: dict[TopicPartition, int] = {}
        generation = -1
        with io_errors(lake, "reading the offsets in"):
            for tp in _partitions(lake):
                rec = recover(lake, tp)
                generation = max(generation, rec.generation)
                if rec.next_offset is not None:
                    offsets[tp] = rec.next_offset
        return DestinationOffsets(offsets, generation, f"ParquetSink file names and footers under {lake.where}")

    def alter_offsets(self, connector_config: Mapping[str, Any], offsets: Mapping[TopicPartition, int | None],
                      generation: int) -> bool:
        """Move forward (an empty file covering the skipped range records it, as ``generation``); moving back or
        resetting is refused while files hold records at or past the new position (files are never deleted for
        you); a reset of a partition without files does nothing."""
        lake = Lake(LakeConfig.parse(connector_config))
        with io_errors(lake, "altering the offsets in"):
            plans = []
            for tp, off in offsets.items():
                tp = TopicPartition(*tp)
                rec = recover(lake, tp)
                if rec.generation > generation:
                    raise ProducerFencedError(f"ParquetSink: generation {rec.generation} wrote {tp.topic}-"
                                              f"{tp.partition}; this alteration is generation {generation}")
                target = 0 if off is None else int(off)
                if rec.next_offset is not None and target < rec.next_offset:
                    what = "reset" if off is None else f"move back to offset {target}"
                    holding = sorted(p.rsplit("/", 1)[-1] for p, start in lake.data_files(tp).items()
                                     if start >= target or p in rec.known)[-5:]
                    raise ConnectError(
                        f"ParquetSink keeps its offsets in its files: to {what} {tp.topic}-{tp.partition}, records "
                        f"up to offset {rec.next_offset} would be written again next to their copies under "
                        f"{lake.where} ({', '.join(holding)} ...). Remove those files first (they are the committed "
                        "data), then alter or reset again; or move forward")
                if off is not None and target > (rec.next_offset or 0):
                    plans.append((tp, rec.next_offset or 0, target))
            for tp, start, end in plans:
                data = encode_file(pa.table({}), start=start, end=end, generation=generation,
                                   connector=str(connector_config.get("name") or ""), group_size=1,
                                   codec=lake.cfg.codec)
                lake.publish(f"{lake.dir_of(tp, f'partition={tp.partition}')}/{file_name(tp, start)}", data)
        return True


def _partitions(lake: Lake) -> list[TopicPartition]:
    """The topic partitions with files under the config's topics (or ``topics.regex``)."""
    base = f"{lake.root}/{lake.cfg.topics_dir}"
    topics = list(lake.cfg.topics)
    if not topics and lake.cfg.topics_regex:
        rx = re.compile(lake.cfg.topics_regex)
        try:
            names = [p.rstrip("/").rsplit("/", 1)[-1] for p in lake.fs.ls(base, detail=False)]
        except FileNotFoundError:
            names = []
        topics = sorted(n for n in names if rx.fullmatch(n))
    out = set()
    for topic in topics:
        lake.fs.invalidate_cache(lake.topic_dir(topic))
        try:
            paths = lake.fs.find(lake.topic_dir(topic))
        except FileNotFoundError:
            continue
        rx = re.compile(re.escape(f"{topic}+") + r"(\d+)\+\d+\.parquet$")
        for p in paths:
            m = rx.match(p.rsplit("/", 1)[-1])
            if m:
                out.add(TopicPartition(topic, int(m.group(1))))
    return sorted(out)


class ParquetSinkTask(SinkTask):
    """See the package docstring: files published at commit points, ``pre_commit`` returns {}."""

    VERSION = VERSION

    def start(self, props: Mapping[str, str]) -> None:
        self.cfg = LakeConfig.parse(props)
        self.lake = Lake(self.cfg)
        if self.lake.object_store:  # as Kafka Connect's S3SinkTask.start: a missing bucket fails the run at once
            bucket = self.lake.root.split("/", 1)[0]
            with io_errors(self.lake, f"checking the bucket {bucket!r} of"):
                found = self.lake.fs.exists(bucket)
            if not found:
                raise ConnectError(f"ParquetSink {self.cfg.name!r}: the bucket {bucket!r} of {self.lake.where} does "
                                   "not exist or cannot be reached with the given storage.options")
        self.encode = partitioner(self.cfg)
        self.ts = timestamp_extractor(self.cfg) if self.cfg.rotate_interval_ms >= 0 else None
        self.writers: dict[TopicPartition, PartitionWriter] = {}

    def open(self, partitions: list[TopicPartition]) -> None:
        """Recover each partition's position from its files and rewind the consumer there."""
        rewind = {}
        for tp in partitions:
            tp = TopicPartition(*tp)
            if tp in self.writers:
                continue
            w = PartitionWriter(self.lake, tp, generation=self.context.generation, encode=self.encode, ts=self.ts,
                                reporter=self.context.errant_record_reporter)
            nxt = w.claim()
            self.writers[tp] = w
            if nxt is not None:
                rewind[tp] = nxt
        if rewind:
            self.context.offset(rewind)

    def put(self, records: list[SinkRecord]) -> None:
        groups: dict[tuple[str, int], list[SinkRecord]] = {}
        for r in records:
            g = groups.get((r.topic, r.partition))
            if g is None:
                groups[(r.topic, r.partition)] = [r]
            else:
                g.append(r)
        ready = False
        for (topic, partition), recs in groups.items():
            w = self.writers.get(TopicPartition(topic, partition))
            if w is None:
                raise ConnectError(
                    f"ParquetSink got records of {topic}-{partition}, a partition open() did not assign (did a "
                    "transform rename the topic? the sink keeps its offsets per consumed partition)")
            ready = w.add(recs) or ready
        if ready:
            self.context.request_commit()

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        closing = self.context.is_closing()
        for tp, w in self.writers.items():
            go_on = w.commit(current_offsets.get(tp), closing)
            if go_on is not None:  # another run published over this run's next group: its records come again
                self.context.offset({tp: go_on})
        return {}  # the files are the offsets; the consumer group commits nothing

    def close(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            w = self.writers.pop(TopicPartition(*tp), None)
            if w is not None:
                w.discard()

    def stop(self) -> None:
        self.writers = {}


__all__ = ["ParquetSink", "ParquetSinkTask"]
