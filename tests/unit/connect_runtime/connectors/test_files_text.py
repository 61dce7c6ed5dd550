"""The byte pass-through fast paths: ``format=text`` of DirectorySource and FileSink (each line's text, as
Kafka Connect's FileStreamSource / FileStreamSink with StringConverter), the batch conversions of
StringConverter / ByteArrayConverter, and that JSON stays validated where JSON is configured (a bad value
fails naming the record, or goes to the dead letter queue).

Real ``run_source`` / ``run_sink`` runs over a real SQLite backend file; the Kafka consumer's batch builder
is checked on real ``confluent_kafka.Message`` objects.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from connect_runtime.api import ConfigError, ConnectError, DataError, SourceRecord, TopicPartition
from connect_runtime.backends import Backend, ProducerRecord, open_backend
from connect_runtime.backends.base import ConsumedRecord
from connect_runtime.backends.kafka.consumer import _consumed_records
from connect_runtime.connectors.files import committed_files
from connect_runtime.converters import ByteArrayConverter, StringConverter
from connect_runtime.runtime.pipeline import SinkPipeline, SourcePipeline
from connect_runtime.runtime.sink import run_sink
from connect_runtime.runtime.source import run_source

STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
TOPIC = "in"


@pytest.fixture
def backend(sqlite_url: str) -> Iterator[Backend]:
    with open_backend(sqlite_url) as be:
        yield be


def fill(backend: Backend, values: list[bytes | None], topic: str = TOPIC) -> None:
    backend.create_topics({topic: 1})
    producer = backend.producer()
    try:
        producer.send([ProducerRecord(topic, 0, None, v) for v in values])
        producer.flush(30)
    finally:
        producer.close()


def topic_values(backend: Backend, topic: str) -> list[bytes | None]:
    consumer = backend.consumer(None)
    try:
        end = consumer.end_offsets([TopicPartition(topic, 0)], 10)[TopicPartition(topic, 0)]
    finally:
        consumer.close()
    return [r.value for r in backend.read_range(TopicPartition(topic, 0), 0, end)]


def sink_config(out: Path, **extra: str) -> dict[str, str]:
    cfg = {"name": "text-sink", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": TOPIC,
           "directory": str(out), "format": "text", "value.converter": STRING, "consumer.max.poll.records": "4"}
    cfg.update({k.replace("_", "."): v for k, v in extra.items()})
    return cfg


def source_config(directory: Path, **extra: str) -> dict[str, str]:
    cfg = {"name": "text-source", "connector.class": "connect_runtime.connectors.files.DirectorySource",
           "directory": str(directory), "topic": "lines", "format": "text", "value.converter": STRING,
           "poll.idle.timeout.ms": "300", "batch.size": "3"}
    cfg.update({k.replace("_", "."): v for k, v in extra.items()})
    return cfg


def text_bytes(out: Path) -> bytes:
    return b"".join(p.read_bytes() for p in committed_files(out, TOPIC, 0, "text"))


# -- converters -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1", "utf-16"])
def test_string_converter_batches_agree_with_one_by_one(encoding: str) -> None:
    c = StringConverter()
    c.configure({"converter.encoding": encoding}, False)
    texts = ["", "a", "é€" if encoding != "latin-1" else "é", "two\nlines", "tab\tand\r", "x" * 1000]
    assert c.encode_many(texts) == [c.from_connect("t", s) for s in texts]
    data = [c.from_connect("t", s) for s in texts]
    assert c.decode_many(data) == texts
    assert c.encode_many([*texts, None]) == [*data, None]
    assert c.decode_many([*data, None]) == [*texts, None]
    with pytest.raises(DataError, match="expected a str"):
        c.encode_many(["a", 1])


def test_string_converter_batch_refuses_bytes_that_are_not_text() -> None:
    c = StringConverter()
    c.configure({}, False)
    with pytest.raises(UnicodeDecodeError):
        c.decode_many([b"ok", b"\xff"])


def test_byte_array_converter_batches_pass_bytes_through() -> None:
    c = ByteArrayConverter()
    c.configure({}, False)
    data = [b"a", b"", None, b"\n"]
    assert c.decode_many(data) == data
    assert c.encode_many(data) == data
    assert c.encode_many([bytearray(b"x"), memoryview(b"y")]) == [b"x", b"y"]
    with pytest.raises(DataError, match="expected bytes, got a str"):
        c.encode_many([b"a", "b"])


def test_a_sink_pipeline_with_string_values_decodes_the_batch_and_names_a_bad_record() -> None:
    records = [ConsumedRecord("t", 0, i, None, v, None, None) for i, v in enumerate([b"a", b"\xff", b"c"])]
    pipeline = SinkPipeline.from_config({"value.converter": STRING})
    with pytest.raises(DataError, match=r"offset 1 failed in the value converter"):
        pipeline.process(records)
    tolerant = SinkPipeline.from_config({"value.converter": STRING, "errors.tolerance": "all"})
    batch = tolerant.process(records)
    assert [r.value for r in batch.records] == ["a", "c"]
    assert [c.offset for c, _ in batch.dead] == [1]
    ok = SinkPipeline.from_config({"value.converter": STRING}).process(records[:1] + records[2:])
    assert [(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.headers) for r in ok.records] == [
        ("t", 0, 0, None, "a", None, None), ("t", 0, 2, None, "c", None, None)]


class ShoutingConverter(StringConverter):
    """Overrides the one-record methods only: the pipeline must call them, not the inherited batch ones."""

    def from_connect(self, topic: str, value: Any, headers: Any = None) -> bytes | None:
        return None if value is None else value.upper().encode()

    def to_connect(self, topic: str, data: bytes | None, headers: Any = None) -> Any:
        return None if data is None else data.decode().upper()


def test_a_converter_subclass_that_overrides_one_record_methods_is_not_batched() -> None:
    path = f"{__name__}.ShoutingConverter"
    source = SourcePipeline.from_config({"value.converter": path})
    batch = source.process([SourceRecord(source_partition={}, source_offset={}, topic="t", value=v) for v in "ab"])
    assert [r.value for r in batch.out] == [b"A", b"B"]
    sink = SinkPipeline.from_config({"value.converter": path})
    assert [r.value for r in sink.process([ConsumedRecord("t", 0, 0, None, b"x", None, None)]).records] == ["X"]


# -- FileSink format=text ---------------------------------------------------------------------------------


@pytest.mark.parametrize("converter", [STRING, BYTES])
def test_text_sink_writes_each_value_verbatim(tmp_path: Path, sqlite_url: str, backend: Backend,
                                              converter: str) -> None:
    values = [b'{"id": 1,  "x":[1e5]}', b"not json at all", "é€".encode(), b"", b'{"id":2}'] * 3
    fill(backend, values)
    out = tmp_path / "out"
    result = run_sink(sink_config(out, value_converter=converter), sqlite_url)
    assert result.records == len(values)
    assert text_bytes(out) == b"".join(v + b"\n" for v in values)
    data = [p.name for p in (out / TOPIC / "partition=0").iterdir() if not p.name.startswith((".", "_"))]
    assert data and all(n.endswith(".txt") for n in data)


def test_text_sink_writes_a_tombstone_as_an_empty_line(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    fill(backend, [b"a", None, b"c"])
    out = tmp_path / "out"
    run_sink(sink_config(out), sqlite_url)
    assert text_bytes(out) == b"a\n\nc\n"


def test_text_sink_names_a_value_that_would_be_two_lines(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    """A value holding a newline would make two lines of one record: it fails the run naming the record
    (errors.tolerance=none), or goes to the dead letter queue while the rest is written (all)."""
    fill(backend, [b"a", b"b\nc", b"d"])
    with pytest.raises(ConnectError, match=r"in\[0\]@1.*holds a newline"):
        run_sink(sink_config(tmp_path / "none"), sqlite_url)
    out = tmp_path / "all"
    result = run_sink({**sink_config(out), "name": "tolerant", "errors.tolerance": "all",
                       "errors.deadletterqueue.topic.name": "dlq"}, sqlite_url)
    assert (result.records, result.dead_lettered) == (3, 1)
    assert text_bytes(out) == b"a\nd\n"
    assert topic_values(backend, "dlq") == [b"b\nc"]


def test_text_sink_refuses_values_that_are_not_text(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    """JsonConverter gives dicts: format=text names the record and says which converters fit."""
    fill(backend, [b'{"a":1}'])
    with pytest.raises(ConnectError, match=r"in\[0\]@0.*str or bytes values.*StringConverter"):
        run_sink({**sink_config(tmp_path / "out"), "value.converter": "org.apache.kafka.connect.json.JsonConverter"},
                 sqlite_url)


def test_text_sink_writes_the_value_alone(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    fill(backend, [b"a"])
    with pytest.raises(ConnectError, match=r"output\.fields"):
        run_sink(sink_config(tmp_path / "out", output_fields="offset,value"), sqlite_url)


def test_text_sink_resumes_exactly_once_from_its_files(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    fill(backend, [f"r{i}".encode() for i in range(10)])
    out = tmp_path / "out"
    assert run_sink(sink_config(out), sqlite_url, until_offsets={TOPIC: {0: 6}}).records == 6
    assert run_sink(sink_config(out), sqlite_url).records == 4
    assert text_bytes(out) == b"".join(f"r{i}\n".encode() for i in range(10))


# -- JSON stays validated where it is configured ---------------------------------------------------------


def test_a_json_sink_still_names_bad_json_or_dead_letters_it(tmp_path: Path, sqlite_url: str,
                                                             backend: Backend) -> None:
    fill(backend, [b'{"a":1}', b'{"a":', b'{"a":3}'])
    base = {"name": "json-sink", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": TOPIC,
            "directory": str(tmp_path / "none")}
    with pytest.raises(ConnectError, match=r"offset 1 failed in the value converter .*JsonConverter"):
        run_sink(base, sqlite_url)
    out = tmp_path / "all"
    result = run_sink({**base, "name": "json-tolerant", "directory": str(out), "errors.tolerance": "all",
                       "errors.deadletterqueue.topic.name": "dlq"}, sqlite_url)
    assert (result.records, result.dead_lettered) == (2, 1)
    assert [json.loads(line) for line in
            b"".join(p.read_bytes() for p in committed_files(out, TOPIC, 0)).splitlines()] == [{"a": 1}, {"a": 3}]
    assert topic_values(backend, "dlq") == [b'{"a":']


# -- DirectorySource format=text --------------------------------------------------------------------------


def test_text_source_reads_every_line_as_its_text(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.txt").write_bytes(b"\xef\xbb\xbffirst\r\n{not json}\n\n  spaced  \n" + "é€\n".encode() + b"last\n")
    result = run_source(source_config(d), sqlite_url)
    assert result.records == 6
    assert topic_values(backend, "lines") == [b"first", b"{not json}", b"", b"  spaced  ", "é€".encode(), b"last"]


def test_text_source_resumes_at_its_byte_offset_and_follows_appends(tmp_path: Path, sqlite_url: str,
                                                                    backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    f = d / "a.txt"
    f.write_bytes(b"".join(f"line {i}\n".encode() for i in range(10)))
    assert run_source(source_config(d), sqlite_url).records == 10
    with open(f, "ab") as fh:
        fh.write(b"line 10\nline 11\n")
    assert run_source(source_config(d), sqlite_url).records == 2
    assert run_source(source_config(d), sqlite_url).records == 0
    assert topic_values(backend, "lines") == [f"line {i}".encode() for i in range(12)]


def test_text_source_reads_an_unterminated_last_line_once_the_file_is_final(tmp_path: Path, sqlite_url: str,
                                                                            backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    f = d / "a.txt"
    f.write_bytes(b"one\ntwo")
    assert run_source(source_config(d, file_final_ms="-1"), sqlite_url).records == 1
    old = time.time() - 60
    os.utime(f, (old, old))
    assert run_source(source_config(d, file_final_ms="1000"), sqlite_url).records == 1
    assert topic_values(backend, "lines") == [b"one", b"two"]


def test_text_source_names_a_line_that_is_not_utf8(tmp_path: Path, sqlite_url: str, backend: Backend) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.txt").write_bytes(b"one\ntwo\nbad \xff\nfour\nfive\n")
    with pytest.raises(DataError, match=r"a\.txt: line 3: not UTF-8 text"):
        run_source(source_config(d), sqlite_url)  # commits the poll before the bad line (one, two)
    result = run_source(source_config(d, errors_tolerance="all"), sqlite_url)
    assert (result.records, result.skipped) == (2, 1)
    assert topic_values(backend, "lines") == [b"one", b"two", b"four", b"five"]
    assert run_source(source_config(d, errors_tolerance="all"), sqlite_url).records == 0  # the file is finished


def test_a_jsonl_source_still_names_malformed_json(tmp_path: Path, sqlite_url: str) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"a": 1}\n{"a":\n')
    with pytest.raises(DataError, match=r"a\.jsonl: line 2: malformed JSON"):
        run_source({**source_config(d), "format": "jsonl",
                    "value.converter": "org.apache.kafka.connect.json.JsonConverter"}, sqlite_url)


def test_text_source_config_refuses_an_unknown_format(tmp_path: Path, sqlite_url: str) -> None:
    with pytest.raises(ConfigError, match="format"):
        run_source(source_config(tmp_path, format="lines"), sqlite_url)


# -- the Kafka consumer's batch of records ------------------------------------------------------------------


def test_consumed_records_are_built_field_for_field() -> None:
    msgs = [
        ck.Message(topic="t", partition=2, offset=7, key=b"k", value=b"v",
                   timestamp=(ck.TIMESTAMP_CREATE_TIME, 1234), headers=[("h", b"x")]),
        ck.Message(topic="u", partition=0, offset=8, key=None, value=None,
                   timestamp=(ck.TIMESTAMP_LOG_APPEND_TIME, 99), headers=None),
    ]
    got = _consumed_records(msgs)
    assert all(type(r) is ConsumedRecord for r in got)
    assert got == [ConsumedRecord("t", 2, 7, b"k", b"v", 1234, [("h", b"x")]),
                   ConsumedRecord("u", 0, 8, None, None, 99, None)]
    msgs.append(ck.Message(topic="t", partition=2, offset=9, value=b"w", timestamp=(ck.TIMESTAMP_NOT_AVAILABLE, 0)))
    got = _consumed_records(msgs)
    assert [r.timestamp for r in got] == [1234, 99, None]
    assert got[2].topic == "t" and got[2].offset == 9 and got[2].value == b"w"


