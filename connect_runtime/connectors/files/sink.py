"""FileSink: topic partitions into files, exactly once by keeping its offsets in the destination. The task
encodes each batch (:mod:`connect_runtime.connectors.files._formats`) and hands it to a writer per partition
(:mod:`connect_runtime.connectors.files._writer`); the destination is the fence
(:mod:`connect_runtime.connectors.files.destination`). The rules are in the package docstring."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from operator import attrgetter
from pathlib import Path
from typing import Any

from connect_runtime.api.config import ConfigDef, Importance, Range, Type, ValidString, non_empty_string
from connect_runtime.api.connector import DestinationOffsets, SinkConnector
from connect_runtime.api.data import Struct
from connect_runtime.api.errors import ConfigError, ConnectError, DataError
from connect_runtime.api.jsoncodec import typed_json_default
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.api.sink import SinkTask
from connect_runtime.connectors.files._formats import VERSION, csv_line, encode, encode_lines, text_line
from connect_runtime.connectors.files._writer import PartitionWriter
from connect_runtime.connectors.files.destination import alter_offsets, read_offsets

_OUTPUT_FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
_topic_of = attrgetter("topic")
_partition_of = attrgetter("partition")
_value_of = attrgetter("value")


def _output_fields(name: str, value: Any) -> None:
    bad = [v for v in value or () if v not in _OUTPUT_FIELDS]
    if bad:
        raise ValueError(f"fields among {', '.join(_OUTPUT_FIELDS)}, got {', '.join(bad)}")
    if not value:
        raise ValueError("at least one field")


_SINK_CONFIG = (
    ConfigDef()
    .define("directory", Type.STRING, validator=non_empty_string, importance=Importance.HIGH,
            doc="Directory to write into (<directory>/<topic>/partition=<p>/...).")
    .define("format", Type.STRING, default="jsonl", validator=ValidString.in_("jsonl", "csv", "text"),
            doc="jsonl (one JSON document per line), csv (a header row, then one row per record) or text (each "
                "value's own bytes as a line, as Kafka Connect's FileStreamSink: str or bytes values, e.g. from "
                "StringConverter or ByteArrayConverter; files named *.txt).")
    .define("output.fields", Type.LIST, default=["value"], validator=_output_fields,
            doc="What each line holds: 'value' alone writes the value; several fields write an object "
                "(jsonl) or leading columns (csv) of topic, partition, offset, timestamp, key, value, headers.")
    .define("csv.columns", Type.LIST, default=[],
            doc="csv: the value's columns (default: the keys of the first record's value).")
    .define("file.max.bytes", Type.LONG, default=0, validator=Range.at_least(0),
            doc="Roll to a new file once the current one holds at least this many bytes (0: one file per "
                "partition and commit point).")
    .define("fsync", Type.BOOLEAN, default=True,
            doc="fsync data and manifest at each commit point (false survives process crashes, not power loss).")
)


class FileSink(SinkConnector):
    """Writes topic partitions to JSON-lines or CSV files, exactly once (offsets in the destination)."""

    VERSION = VERSION

    def config_def(self) -> ConfigDef:
        return _SINK_CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self._props = {k: v for k, v in props.items() if k in _SINK_CONFIG.keys}
        _SINK_CONFIG.parse(self._props)
        if props.get("name"):
            self._props["name"] = props["name"]  # named in the tasks' messages

    def task_class(self) -> type:
        return FileSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        out = {}
        for k, v in self._props.items():
            out[k] = ",".join(map(str, v)) if isinstance(v, list) else str(v)
        return [dict(out) for _ in range(max_tasks)]

    # -- offsets in the destination (KIP-875) -------------------------------------------------------

    def _parse(self, connector_config: Mapping[str, Any]) -> dict[str, Any]:
        cfg = dict(_SINK_CONFIG.parse({k: v for k, v in connector_config.items() if k in _SINK_CONFIG.keys}))
        cfg["topics"] = _list_of(connector_config.get("topics"))
        cfg["topics.regex"] = connector_config.get("topics.regex")
        return cfg

    def read_offsets(self, connector_config: Mapping[str, Any]) -> DestinationOffsets:
        """The committed positions in the destination
        (:func:`connect_runtime.connectors.files.destination.read_offsets`)."""
        return read_offsets(self._parse(connector_config))

    def alter_offsets(self, connector_config: Mapping[str, Any], offsets: Mapping[TopicPartition, int | None],
                      generation: int) -> bool:
        """Move, or reset, positions in the destination as ``generation``
        (:func:`connect_runtime.connectors.files.destination.alter_offsets`)."""
        alter_offsets(self._parse(connector_config), offsets, generation, repr(connector_config.get("name")))
        return True


def _list_of(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return [str(t) for t in value]


class FileSinkTask(SinkTask):
    """See the module docstring: data per partition, manifest after fsync, ``pre_commit`` returns {}."""

    VERSION = VERSION

    def start(self, props: Mapping[str, str]) -> None:
        cfg = _SINK_CONFIG.parse({k: v for k, v in props.items() if k in _SINK_CONFIG.keys})
        self._name = str(props.get("name") or "file-sink")
        self._directory = cfg["directory"]
        self._format = cfg["format"]
        self._fields: list[str] = cfg["output.fields"]
        self._value_only = self._fields == ["value"]
        if self._format == "text" and not self._value_only:
            raise ConfigError(errors={"output.fields": "format=text writes the value alone: expected output.fields="
                                                       f"value, got {','.join(self._fields)}"})
        self._csv_columns: list[str] = cfg["csv.columns"]
        self._fsync = cfg["fsync"]
        self._max_bytes = cfg["file.max.bytes"]
        self._writers: dict[TopicPartition, PartitionWriter] = {}

    def open(self, partitions: list[TopicPartition]) -> None:
        """Claim each partition for this run's generation and rewind to its committed position."""
        rewind = {}
        for tp in partitions:
            tp = TopicPartition(*tp)
            if tp in self._writers:
                continue
            w = PartitionWriter(self._directory, tp, self._format, generation=self.context.generation,
                                name=self._name, max_bytes=self._max_bytes, fsync=self._fsync)
            w.claim()
            self._writers[tp] = w
            if w.next_offset is not None:
                rewind[tp] = w.next_offset
        if rewind:
            self.context.offset(rewind)

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        first = records[0]
        topic, partition = first.topic, first.partition
        if (records[-1].partition == partition and records[-1].topic == topic
                and len(set(map(_partition_of, records))) == 1 and len(set(map(_topic_of, records))) == 1):
            groups: dict[tuple[str, int], list[SinkRecord]] = {(topic, partition): records}  # one partition
        else:
            groups = {}
            for r in records:
                key = (r.topic, r.partition)
                g = groups.get(key)
                if g is None:
                    groups[key] = [r]
                else:
                    g.append(r)
        for (topic, partition), recs in groups.items():
            tp = TopicPartition(topic, partition)
            w = self._writers.get(tp)
            if w is None:
                raise ConnectError(
                    f"FileSink got records of {topic}-{partition}, a partition open() did not assign (did a "
                    "transform rename the topic? the sink keeps its exactly-once offsets per consumed partition)")
            if w.next_offset is not None and recs[0].offset < w.next_offset:
                # already written (redelivered before the rewind took effect)
                recs = [r for r in recs if r.offset >= w.next_offset]
                if not recs:
                    continue
            fmt = self._format
            try:
                w.prepare(recs[0].offset)
                data = (self._encode_jsonl(recs) if fmt == "jsonl" else self._encode_text(recs) if fmt == "text"
                        else self._encode_csv(w, recs))
                w.write(data, recs[-1].offset + 1)
            except OSError as exc:
                raise _disk_error(self._name, "writing", w.path or w.dest.dir, exc) from exc

    # -- encoding -----------------------------------------------------------------------------------

    def _fields_of(self, r: SinkRecord) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self._fields:
            if f == "headers":
                out[f] = [[k, v] for k, v in (r.headers or [])]
            else:
                out[f] = getattr(r, f)
        return out

    def _encode_jsonl(self, recs: list[SinkRecord]) -> bytes:
        try:
            if self._value_only:
                return encode_lines(list(map(_value_of, recs)))
            return encode_lines(list(map(self._fields_of, recs)))
        except (TypeError, ValueError, UnicodeError):
            enc = encode
            return self._encode_one_by_one(recs, lambda r: (enc(r.value if self._value_only
                                                                 else self._fields_of(r)) + "\n").encode())

    def _encode_text(self, recs: list[SinkRecord]) -> bytes:
        """format=text: each value's bytes as they are (a str in UTF-8), one line per record, joined as a batch
        with one ``join``; a value that is neither (or that holds a newline, which would make it two lines)
        is found record by record, named, and reported (dead letter queue) or fails the run."""
        values = list(map(_value_of, recs))
        try:
            blob = b"\n".join(values)  # bytes, bytearray, memoryview: verbatim
        except TypeError:
            try:
                blob = "\n".join(values).encode("utf-8")
            except (TypeError, UnicodeError):
                blob = None
        if blob is not None and blob.count(b"\n") == len(values) - 1:
            return blob + b"\n"
        return self._encode_one_by_one(recs, text_line)

    def _encode_one_by_one(self, recs: list[SinkRecord], encode_one: Any) -> bytes:
        """Slow path after a batch failed to encode: find the bad records and report or raise."""
        parts = []
        reporter = self.context.errant_record_reporter
        for r in recs:
            try:
                parts.append(encode_one(r))
            except (TypeError, ValueError, UnicodeError, DataError) as exc:
                err = DataError(f"FileSink cannot write record {r.topic}-{r.partition}@{r.offset}: {exc}")
                if reporter is None:
                    raise err from exc
                reporter.report(r, err)
        return b"".join(parts)

    def _encode_csv(self, w: PartitionWriter, recs: list[SinkRecord]) -> bytes:
        meta = [f for f in self._fields if f != "value"]
        if w.columns is None:
            first = recs[0].value
            value_cols = self._csv_columns or (list(first) if isinstance(first, Mapping) else ["value"])
            w.columns = meta + value_cols
        header = csv_line(w.columns) if w.size == 0 else b""  # every file starts with the header
        value_cols = w.columns[len(meta):]

        def row_of(r: SinkRecord) -> bytes:
            v = r.value
            if value_cols == ["value"] and not isinstance(v, Mapping):
                vals: list[Any] = [v]
            else:
                if not isinstance(v, Mapping):  # a dict, or a Struct of a schema-aware converter
                    raise DataError(f"csv needs a dict value, got {type(v).__name__}")
                if isinstance(v, Struct):
                    v = typed_json_default(v)  # its fields, BYTES ones in base64 (as in jsonl)
                extra = [k for k in v if k not in value_cols]
                if extra:
                    raise DataError(f"value has fields {extra} not among the CSV columns {value_cols}")
                vals = [v.get(c) for c in value_cols]
            m = self._fields_of(r) if meta else {}
            return csv_line([m[f] for f in meta] + vals)

        return header + self._encode_one_by_one(recs, row_of)

    # -- commit points ------------------------------------------------------------------------------

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        for tp, w in self._writers.items():
            try:
                w.commit(current_offsets.get(tp))
            except OSError as exc:
                raise _disk_error(self._name, "publishing the files of a commit point in", w.dest.dir, exc) from exc

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        self.flush(current_offsets)
        return {}  # the manifests are the offsets; the consumer group commits nothing

    def close(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            w = self._writers.pop(TopicPartition(*tp), None)
            if w is not None:
                w.discard()  # not committed: its in-flight files go, its records come again

    def stop(self) -> None:
        for w in self._writers.values():
            w.discard()
        self._writers = {}


def _disk_error(name: str, doing: str, path: Path, exc: OSError) -> ConnectError:
    """A failed write as one error naming the path and the cause (a full disk says so): nothing of the commit
    point in progress is published, and the records come again."""
    code = errno.errorcode.get(exc.errno or 0, "")
    why = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
           errno.EROFS: "the filesystem is read-only", errno.EACCES: "permission denied"}.get(exc.errno or 0, "")
    return ConnectError(
        f"FileSink {name!r}: {doing} {path} failed: {exc.strerror or exc}{f' ({code})' if code else ''}"
        f"{f': {why}' if why else ''}; nothing of the commit point in progress is published, and its records are "
        "delivered again (by a retry of this commit point, or by the next run)")


__all__ = ["FileSink", "FileSinkTask"]
