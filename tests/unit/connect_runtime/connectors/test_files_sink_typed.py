"""FileSink with typed records (Struct values of a Connect schema, with decimals, dates, times, timestamps and
bytes): written as plain JSON in the forms of ``connect_runtime.api.jsoncodec.JSON_FORMS`` (jsonl and csv),
byte for byte what ``json.dumps`` writes, through a real ``run_sink`` and straight through the encoder."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path

from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.files import committed_files
from connect_runtime.connectors.files._formats import encode, encode_lines
from connect_runtime.runtime.sink import run_sink
from tests.support.typed import order, order_json

TOPIC = "typed"
N = 12


def _fill(url: str) -> None:
    with open_backend(url) as be:
        be.create_topics({TOPIC: 1})
        producer = be.producer()
        try:
            producer.send([ProducerRecord(TOPIC, 0, None, json.dumps(order_json(i)).encode()) for i in range(N)])
            producer.flush(30)
        finally:
            producer.close()


def _config(out: Path, **extra: str) -> dict[str, str]:
    return {"name": "typed-archive", "connector.class": "connect_runtime.connectors.files.FileSink",
            "topics": TOPIC, "directory": str(out), "consumer.max.poll.records": "5",
            "transforms": "typed", "transforms.typed.type": "tests.support.typed.ToStruct",
            "transforms.typed.schema": "order", **extra}


def _expected(i: int) -> dict[str, object]:
    want = order_json(i)
    want["status"] = want["status"] or "new"  # a field left null reads as its schema's default
    if want["at"] is not None:
        want["at"] = str(want["at"]) + "000"  # time.isoformat(): microseconds
    return want


def test_struct_values_are_written_as_plain_json(tmp_path: Path, sqlite_url: str) -> None:
    _fill(sqlite_url)
    result = run_sink(_config(tmp_path / "out"), sqlite_url)
    assert result.records == N
    lines = b"".join(p.read_bytes() for p in committed_files(tmp_path / "out", TOPIC, 0, "jsonl")).splitlines()
    got = [json.loads(line) for line in lines]
    assert got == [_expected(i) for i in range(N)]
    first = got[0]
    assert first["amount"] == "0.00" and first["total"] == "-0.125"  # exact digits and scale, as strings
    assert base64.b64decode(first["raw"]) == bytes([0, 255, 0])  # a BYTES field (not UTF-8): base64
    assert first["addr"] == {"city": "Oslo", "zip": None}  # a nested struct: an object
    assert lines == [encode(order(i)).encode() for i in range(N)]  # byte for byte json.dumps's


def test_struct_values_in_csv_cells(tmp_path: Path, sqlite_url: str) -> None:
    _fill(sqlite_url)
    run_sink(_config(tmp_path / "out", format="csv"), sqlite_url)
    text = b"".join(p.read_bytes() for p in committed_files(tmp_path / "out", TOPIC, 0, "csv")).decode()
    rows = list(csv.DictReader(text.splitlines()))
    assert [r["id"] for r in rows] == [str(i) for i in range(N)]
    assert rows[2]["amount"] == "2469134.02" and rows[2]["day"] == "2026-01-03"
    assert rows[2]["ts"] == "2026-01-01T00:02:02.002000+00:00" and rows[2]["ok"] == "True"
    assert rows[0]["raw"] == "AP8A" and rows[0]["at"] == "00:04:05.123000"
    assert json.loads(rows[0]["addr"]) == {"city": "Oslo", "zip": None} and rows[2]["addr"] == ""


def test_the_batch_encoder_and_json_agree_on_typed_values() -> None:
    values = [order(i) for i in range(30)]
    assert encode_lines(values) == ("\n".join(json.dumps(json.loads(encode(v)), ensure_ascii=False,
                                                         separators=(",", ":")) for v in values) + "\n").encode()
