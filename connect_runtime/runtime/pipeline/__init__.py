"""The transform + convert + error-tolerance pipeline between tasks and the backend.

Source path (per ``poll()`` batch): transformations in ``transforms`` order, each guarded by its
predicate (``transforms.<t>.predicate``, inverted by ``transforms.<t>.negate``) → key, value and
header converters → :class:`~connect_runtime.backends.base.ProducerRecord`. Sink path: the
converters' ``to_connect`` → transformations → :class:`~connect_runtime.api.records.SinkRecord`.

Schemas. A schema-aware key or value converter (``SCHEMA_AWARE``: Avro, JSON with ``schemas.enable=true``)
gets each record's ``key_schema`` / ``value_schema`` through ``from_connect_data`` on the source path, and on
the sink path its ``to_connect_data`` gives the schema the SinkRecord carries; records then go one by one.
With schemaless converters the batch fast path below is unchanged; a record that fails there is redone on
its own, where a record that has a schema is written with ``from_connect_data`` (a Struct value under the
default JsonConverter: the payload alone, as Kafka Connect writes it with ``schemas.enable=false``). A batch the
fast path does write is written schemaless even where records carry schemas (looking at every record's schema
would cost the fast path): the same bytes for ints, strings, booleans, lists and string-keyed maps; Python's float
text (``1e-05``) rather than Java's (``1.0E-5``), which read back the same; but a map with non-string keys is an
object with the keys as strings, not Kafka Connect's ``[[key, value], ...]``. Structs, decimals, dates, times,
timestamps and bytes always go through ``from_connect_data``.

Failures. A converter, transformation or predicate that raises makes the record fail; so does a
source record whose value is a :class:`~connect_runtime.api.errors.DataError`: a record the task
could not read (a malformed line of a file), handed over with its source offset so that the
runtime, not the connector, applies ``errors.tolerance`` (stage ``TASK_POLL``, as in Kafka Connect):

- ``errors.tolerance=none``: :meth:`process` raises :class:`RecordError` (a ``DataError``) whose
  message names the record (source: topic, source partition and offset; sink: topic, partition,
  offset), the stage and the plugin; the original exception is chained as ``__cause__``.
- ``errors.tolerance=all``: the record is left out and reported, never silently lost: a source
  record in :attr:`SourceBatch.skipped`, a sink record in :attr:`SinkBatch.dead` with its error
  (the sink run loop writes it with :meth:`SinkPipeline.dead_letter` when
  :attr:`SinkPipeline.dead_letter_topic` is set, and only counts it otherwise).
- A :class:`~connect_runtime.api.errors.ConfigError` raised for a record (a Schema Registry converter whose
  TLS handshake or credentials the registry refused) fails the run under either tolerance: the setting is wrong,
  not the record, and every record after it would fail the same way (Kafka Connect tolerates any exception of a
  converter stage, and would dead-letter every record; here nothing is skipped or committed for it).
- ``errors.log.enable=true`` logs every failure (with the record's key and value only when
  ``errors.log.include.messages=true``), whatever the tolerance.

Speed. Conversion runs as one list comprehension per batch inside one ``try``; with the default
JSON value converter the values are encoded as a batch (:meth:`JsonConverter.encode_many`, orjson)
and decoded with orjson (or the C JSON scanner) inline; StringConverter and ByteArrayConverter convert
a batch's values at once too (``encode_many`` / ``decode_many``). If anything in the batch fails,
the batch is redone record by record to find, name and (under ``all``) drop the bad records; the
redo gives the same bytes for every good record. The cyclic garbage collector is paused while a
batch is processed (see :func:`gc_paused`).
"""

from __future__ import annotations

from connect_runtime.runtime.pipeline._core import (
    HEADER_CONVERTER,
    KEY_CONVERTER,
    TASK_POLL,
    TRANSFORMATION,
    VALUE_CONVERTER,
    Pipeline,
    RecordError,
    gc_paused,
    to_bytes,
)
from connect_runtime.runtime.pipeline.sink import SinkBatch, SinkPipeline
from connect_runtime.runtime.pipeline.source import SourceBatch, SourcePipeline

__all__ = [
    "HEADER_CONVERTER",
    "KEY_CONVERTER",
    "TASK_POLL",
    "TRANSFORMATION",
    "VALUE_CONVERTER",
    "Pipeline",
    "RecordError",
    "SinkBatch",
    "SinkPipeline",
    "SourceBatch",
    "SourcePipeline",
    "gc_paused",
    "to_bytes",
]
