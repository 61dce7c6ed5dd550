"""The sink connector of docs/writing-a-connector.md: appends each record's value to a JSON-lines file.

It buffers what ``put`` gives it and commits nothing (``pre_commit`` returns ``{}``) until ``flush.records``
records are buffered or the run's final commit (``is_closing()``, KIP-275); then it writes them, fsyncs and
returns the offsets to commit. At-least-once: a run killed between the write and the commit writes those lines
again. Public ``connect_runtime.api`` names only.
"""

from __future__ import annotations

# [START sink]
import json
import os
from collections.abc import Mapping

from connect_runtime.api import ConfigDef, SinkConnector, SinkRecord, SinkTask, TopicPartition, Type

CONFIG = (ConfigDef()
          .define("file", Type.STRING, doc="The JSON-lines file to append to.")
          .define("flush.records", Type.INT, default=1000, doc="Buffered records that make a commit."))


class JsonLinesSink(SinkConnector):
    def config_def(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return JsonLinesTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.props]


class JsonLinesTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        values = CONFIG.parse(props)
        self.path, self.flush_records = values["file"], values["flush.records"]
        self.buffer: list[SinkRecord] = []

    def put(self, records: list[SinkRecord]) -> None:
        self.buffer.extend(records)  # called many times between commits
        if len(self.buffer) >= self.flush_records:
            self.context.request_commit()  # a commit point right after this put

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        if len(self.buffer) < self.flush_records and not self.context.is_closing():
            return {}  # commit nothing yet: these records stay ours, uncommitted
        with open(self.path, "a") as f:
            f.writelines(json.dumps(r.value) + "\n" for r in self.buffer)
            f.flush()
            os.fsync(f.fileno())
        self.buffer.clear()
        return dict(current_offsets)  # the next offset to read, per partition: all of it is durable

    def close(self, partitions: list[TopicPartition]) -> None:
        self.buffer = [r for r in self.buffer if TopicPartition(r.topic, r.partition) not in partitions]
# [END sink]
