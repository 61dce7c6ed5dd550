"""The source connector of docs/writing-a-connector.md: a text file's lines into a topic, resumable.

Its source partition is the file, its offset the number of lines read, so a second run resumes after the last
committed line. It supports exactly-once (KIP-618) and, with ``transaction.boundary=connector``, commits a
transaction every ``lines.per.transaction`` lines. Public ``connect_runtime.api`` names only.
"""

from __future__ import annotations

# [START source]
import logging
from collections.abc import Mapping

from connect_runtime.api import (
    ConfigDef,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    RecordMetadata,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Type,
)

CONFIG = (ConfigDef()
          .define("file", Type.STRING, doc="The text file to read, one record per line.")
          .define("topic", Type.STRING, doc="The topic to write the lines to.")
          .define("lines.per.transaction", Type.INT, default=100, doc="transaction.boundary=connector: lines each"))


class LinesSource(SourceConnector):
    def config_def(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return LinesTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.props]  # one file: one task

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport:
        return ExactlyOnceSupport.SUPPORTED  # its offset says exactly where to resume

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class LinesTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        values = CONFIG.parse(props)
        self.topic, self.per_txn = values["topic"], values["lines.per.transaction"]
        self.partition = {"file": values["file"]}
        committed = self.context.offset_storage_reader.offset(self.partition)
        self.line = committed["line"] if committed else 0  # resume after the last committed line
        with open(values["file"]) as f:
            self.lines = f.read().splitlines()

    def poll(self) -> list[SourceRecord] | None:
        records = []
        for text in self.lines[self.line:self.line + 50]:
            self.line += 1
            records.append(SourceRecord(source_partition=self.partition, source_offset={"line": self.line},
                                        topic=self.topic, value={"line": self.line, "text": text}))
            txn = self.context.transaction_context  # set only with transaction.boundary=connector
            if txn is not None and (self.line % self.per_txn == 0 or self.line == len(self.lines)):
                txn.commit_transaction(records[-1])  # commit after it; later records wait for the next request
        return records or None

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None = None) -> None:
        # KIP-416: the record is durably written (in a committed transaction, when exactly-once); here a
        # source acknowledges it upstream. metadata is None for a record a transform filtered.
        logging.getLogger(__name__).debug("line %s written at %s", record.source_offset, metadata)
# [END source]
