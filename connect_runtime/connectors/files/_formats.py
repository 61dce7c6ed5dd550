"""The line formats of the file connectors (``jsonl``, ``csv``, ``text``): which format a file name means,
splitting CSV records, and encoding a FileSink batch as lines.

A FileSink line of JSON is byte for byte what ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``
writes; a batch is encoded with one orjson call (:func:`encode_lines`), values whose orjson bytes could differ
by json. Connect data (a :class:`~connect_runtime.api.data.Struct` value of a schema-aware converter, its
decimals, dates, times and timestamps) is written as plain JSON in the forms of
:data:`connect_runtime.api.jsoncodec.JSON_FORMS` (a decimal as its exact string, the rest ISO 8601); bytes stay
what FileSink always wrote for them, their UTF-8 text."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from connect_runtime.api.errors import ConfigError, DataError
from connect_runtime.api.jsoncodec import JSON_FORMS, json_batch, typed_json_default
from connect_runtime.api.records import SinkRecord

VERSION = "0.1.0"
"""The version of the file connectors (DirectorySource, FileSink and their tasks)."""

FORMATS_BY_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".txt": "text"}

EXTENSIONS = {"text": "txt"}
"""The file name extension of a format, where it is not the format's name (jsonl, csv)."""


def extension(fmt: str) -> str:
    return EXTENSIONS.get(fmt, fmt)


def format_of(name: str, configured: str | None) -> str:
    if configured:
        return configured.lower()
    fmt = FORMATS_BY_SUFFIX.get(Path(name).suffix.lower())
    if fmt is None:
        raise ConfigError(errors={"format": f"cannot tell the format of {name!r} from its extension; "
                                            "set format=jsonl or format=csv (or format=text)"})
    return fmt


# -- reading ------------------------------------------------------------------------------------------


def csv_record_end(buf: bytes, start: int) -> int:
    """Index of the newline ending the CSV record at ``start`` (quoted newlines don't end it), or -1."""
    end = buf.find(b"\n", start)
    while end >= 0 and buf.count(b'"', start, end) % 2 == 1:
        end = buf.find(b"\n", end + 1)
    return end


def csv_row(raw: bytes) -> list[str]:
    text = raw.decode("utf-8")
    if text.endswith("\r"):
        text = text[:-1]
    return next(csv.reader([text]))


# -- writing ------------------------------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).decode("utf-8")
    # a Struct, Decimal, datetime, date, time: their plain JSON forms; Enum, UUID: as orjson writes them natively
    return typed_json_default(obj)


encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default).encode
"""One value -> its line's text (without the newline): the reference :func:`encode_lines` agrees with."""

def encode_lines(values: list[Any]) -> bytes:
    """Each value as one line of JSON (newline-terminated), byte for byte what :data:`encode` writes,
    encoded as one batch (:func:`connect_runtime.converters.json_batch`). A list orjson refuses is encoded
    by json alone, which raises what it raises (the caller then finds the bad records one by one)."""
    try:
        parts = json_batch(values, lambda v: encode(v).encode("utf-8"), _json_default)
    except TypeError:  # orjson.JSONEncodeError
        return ("\n".join([encode(v) for v in values]) + "\n").encode("utf-8")
    parts.append(b"")
    return b"\n".join(parts)


def text_line(r: SinkRecord) -> bytes:
    """One record's line of format=text (the slow path, which names what is wrong with a value)."""
    v = r.value
    if isinstance(v, str):
        line = v.encode("utf-8")
    elif isinstance(v, (bytes, bytearray, memoryview)):
        line = bytes(v)
    elif v is None:
        line = b""  # a tombstone: an empty line
    else:
        raise DataError(f"format=text writes str or bytes values (value.converter=StringConverter or "
                        f"ByteArrayConverter), got a {type(v).__name__}")
    if b"\n" in line:
        raise DataError("format=text writes one line per record, and this value holds a newline")
    return line + b"\n"


def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (Mapping, list)):
        return encode(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8")
    conv = JSON_FORMS.get(type(v))
    return v if conv is None else conv(v)


def csv_line(values: Iterable[Any]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([_csv_cell(v) for v in values])
    return buf.getvalue().encode("utf-8")


__all__ = ["EXTENSIONS", "FORMATS_BY_SUFFIX", "VERSION", "csv_line", "csv_record_end", "csv_row", "encode", "encode_lines", "extension", "format_of", "text_line"]
