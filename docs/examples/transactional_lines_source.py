"""The exactly-once source of docs/writing-a-connector.md: ``LinesSource`` plus what KIP-618 asks of a connector.

It declares exactly-once support and, with ``transaction.boundary=connector``, commits a transaction every
``lines.per.transaction`` lines and at the end of its file; it acknowledges each written record (``commit_record``,
KIP-416). Public ``connect_runtime.api`` names only.
"""

from __future__ import annotations

# [START exactly-once]
import logging
from collections.abc import Mapping

from connect_runtime.api import (
    ConfigDef,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    RecordMetadata,
    SourceRecord,
    Type,
)
from docs.examples.lines_source import CONFIG, LinesSource, LinesTask

TXN_CONFIG = CONFIG.merge(ConfigDef().define("lines.per.transaction", Type.INT, default=100,
                                             doc="transaction.boundary=connector: lines per transaction"))


class TransactionalLinesSource(LinesSource):
    def config_def(self) -> ConfigDef:
        return TXN_CONFIG

    def task_class(self) -> type:
        return TransactionalLinesTask

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport:
        return ExactlyOnceSupport.SUPPORTED  # its offset says exactly where to resume

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class TransactionalLinesTask(LinesTask):
    def start(self, props: Mapping[str, str]) -> None:
        super().start(props)
        self.per_txn = TXN_CONFIG.parse(props)["lines.per.transaction"]

    def poll(self) -> list[SourceRecord] | None:
        records = super().poll() or []
        txn = self.context.transaction_context  # set only with transaction.boundary=connector
        for record in records if txn is not None else []:
            n = record.source_offset["line"]
            if n % self.per_txn == 0 or n == len(self.lines):
                txn.commit_transaction(record)  # commit after it; later records wait for the next request
        return records or None

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None = None) -> None:
        # KIP-416: the record is durably written (in a committed transaction, when exactly-once); here a
        # source acknowledges it upstream. metadata is None for a record a transform filtered.
        logging.getLogger(__name__).debug("line %s written at %s", record.source_offset, metadata)
# [END exactly-once]
