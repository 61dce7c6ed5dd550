"""The runtime's own connector-level config fields (Kafka Connect's names where one exists).

A connector config is the runtime's fields (below) plus the connector's own ``config_def()``.
``source_config_def()`` / ``sink_config_def()`` give the runtime's part for each kind.
"""

from __future__ import annotations

from connect_runtime.api.config import (
    ConfigDef,
    Importance,
    Range,
    Type,
    ValidString,
    non_empty_string,
    valid_regex,
)

_COMMON = (
    ConfigDef()
    .define("name", Type.STRING, validator=non_empty_string, importance=Importance.HIGH,
            doc="Unique connector name; offsets, producer ids and the sink group are keyed by it.")
    .define("connector.class", Type.CLASS, importance=Importance.HIGH,
            doc="Dotted path of the connector class, e.g. connect_runtime.connectors.datagen.DataGenSource.")
    .define("tasks.max", Type.INT, default=1, validator=Range.at_least(1), importance=Importance.HIGH,
            doc="Maximum number of tasks.")
    .define("key.converter", Type.CLASS, default="connect_runtime.converters.JsonConverter",
            doc="Converter for record keys (JsonConverter, StringConverter, ByteArrayConverter).")
    .define("value.converter", Type.CLASS, default="connect_runtime.converters.JsonConverter",
            doc="Converter for record values.")
    .define("header.converter", Type.CLASS, default="connect_runtime.converters.StringConverter",
            doc="Converter for header values.")
    .define("transforms", Type.LIST, default=[], doc="Aliases of the transformations, applied in order.")
    .define("predicates", Type.LIST, default=[], doc="Aliases of the predicates.")
    .define("errors.tolerance", Type.STRING, default="none", validator=ValidString.in_("none", "all"),
            doc="none: a bad record fails the run; all: it is skipped (source) or dead-lettered (sink).")
    .define("errors.retry.timeout", Type.LONG, default=0, validator=Range.at_least(-1),
            doc="Total ms to retry a retriable failure (-1: forever, bounded by the run's bound).")
    .define("errors.retry.delay.max.ms", Type.LONG, default=60000, validator=Range.at_least(1),
            doc="Maximum ms between retries (exponential backoff up to this).")
    .define("errors.log.enable", Type.BOOLEAN, default=False, doc="Log each failed record.")
    .define("errors.log.include.messages", Type.BOOLEAN, default=False,
            doc="Include the record's key/value in those logs.")
    .define("offset.flush.interval.ms", Type.LONG, default=60000, validator=Range.at_least(0),
            doc="At-least-once source: ms between offset flushes. Sink: ms between commit points (0: after every put).")
    .define("offset.flush.timeout.ms", Type.LONG, default=5000, validator=Range.at_least(1),
            doc="Bound on one offset flush or commit.")
)

SOURCE_CONFIG = _COMMON.merge(
    ConfigDef()
    .define("exactly.once.support", Type.STRING, default="requested",
            validator=ValidString.in_("requested", "required"),
            doc="required: fail fast unless the run is exactly-once and the connector says SUPPORTED.")
    .define("transaction.boundary", Type.STRING, default="poll",
            validator=ValidString.in_("poll", "interval", "connector"),
            doc="Where transactions end: after each poll batch, every interval, or where the connector says.")
    .define("transaction.boundary.interval.ms", Type.LONG, default=None, validator=Range.at_least(0),
            doc="With transaction.boundary=interval: ms per transaction (default offset.flush.interval.ms).")
    .define("offsets.storage.topic", Type.STRING, default=None,
            doc="This connector's own offsets store (default: the global connect-offsets).")
    .define("topic.creation.default.partitions", Type.INT, default=1, validator=Range.at_least(1),
            doc="Partitions of topics the run creates.")
    .define("topic.creation.default.replication.factor", Type.INT, default=-1, validator=Range.at_least(-1),
            doc="Replication factor of topics the run creates (-1: broker default).")
    .define("producer.max.batch.records", Type.INT, default=10000, validator=Range.at_least(1),
            doc="Records written per backend call at most.")
)

SINK_CONFIG = _COMMON.merge(
    ConfigDef()
    .define("topics", Type.LIST, default=[], doc="Topics to consume (comma list).")
    .define("topics.regex", Type.STRING, default=None, validator=valid_regex,
            doc="Consume every topic whose whole name matches this regex.")
    .define("errors.deadletterqueue.topic.name", Type.STRING, default="",
            doc="Dead letter topic for records that fail conversion or a transform (errors.tolerance=all).")
    .define("errors.deadletterqueue.context.headers.enable", Type.BOOLEAN, default=False,
            doc="Add __connect.errors.* headers (class, message, original topic/partition/offset).")
    .define("errors.deadletterqueue.topic.partitions", Type.INT, default=1, validator=Range.at_least(1),
            doc="Partitions of the dead letter topic when it is created.")
    .define("consumer.max.poll.records", Type.INT, default=500, validator=Range.at_least(1),
            doc="Records per put at most.")
    .define("pause.timeout.ms", Type.LONG, default=300000, validator=Range.at_least(1),
            doc="Bound on how long a task may keep every partition it still has to read paused; "
                "past it the run fails with a WaitTimeoutError naming the partitions.")
)


def source_config_def() -> ConfigDef:
    return SOURCE_CONFIG


def sink_config_def() -> ConfigDef:
    return SINK_CONFIG


__all__ = ["SINK_CONFIG", "SOURCE_CONFIG", "sink_config_def", "source_config_def"]
