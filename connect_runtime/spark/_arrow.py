"""Arrow record batches of committed records: metadata columns next to raw or typed (parsed JSON) values.

Columns are built from a backend's column batches (:meth:`Backend.read_range_batches`), never record by
record: metadata arrays straight from the column lists, typed values by pyarrow's JSON reader over the
batch's values joined by newlines (the SQLite backend hands them over already joined), stored headers
decoded by vectorised numpy over their bytes. A batch that does not parse as a whole is bisected until
the records that do not match the schema are found, so one bad record costs a few extra parses, not a
slow path.
"""

from __future__ import annotations

import base64
import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StringType, StructField, StructType

from connect_runtime.api.errors import ConfigError, DataError

METADATA_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")
"""Every metadata column, in the order they appear."""
DEFAULT_TYPED_METADATA = ("topic", "partition", "offset", "key", "timestamp", "headers")
"""The metadata columns next to typed columns unless ``metadata.columns`` says otherwise."""
MODES = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")
DEFAULT_CORRUPT_COLUMN = "_corrupt_record"

_TS_MS = pa.timestamp("ms", tz="UTC")
_PARSE_ERRORS = (ValueError, TypeError, ArithmeticError, pa.ArrowException)
_ROW_IN = re.compile(r" in row \d+$")


def metadata_ddl(columns: Sequence[str], key_kind: str, value_kind: str) -> str:
    """The DDL of the chosen metadata columns (in :data:`METADATA_COLUMNS` order)."""
    types = {
        "topic": "string", "partition": "int", "offset": "long",
        "key": "binary" if key_kind == "bytes" else "string",
        "value": "binary" if value_kind == "bytes" else "string",
        "timestamp": "timestamp", "headers": "array<struct<key: string, value: string>>",
    }
    return ", ".join(f"`{c}` {types[c]}" for c in METADATA_COLUMNS if c in columns)


def check_typed_schema(typed: StructType, corrupt: str) -> None:
    """Refuse what the typed path cannot read faithfully, naming the column."""
    def has_map(t: DataType) -> bool:
        if isinstance(t, MapType):
            return True
        if isinstance(t, StructType):
            return any(has_map(f.dataType) for f in t.fields)
        if isinstance(t, ArrayType):
            return has_map(t.elementType)
        return False

    bad = {}
    for f in typed.fields:
        if has_map(f.dataType):
            bad[f"schema.{f.name}"] = ("map types are not supported by the typed path: declare a struct, or read "
                                       "the value as text and use from_json")
        if f.name == corrupt and not isinstance(f.dataType, StringType):
            bad[f"schema.{f.name}"] = f"the corrupt record column {corrupt!r} must be a string, got {f.dataType.simpleString()}"
    if bad:
        raise ConfigError(errors=bad)


def _read_type(t: pa.DataType, top: bool) -> pa.DataType:
    """What pyarrow's JSON reader is asked for, to be cast to ``t`` afterwards."""
    if pa.types.is_date32(t):
        return pa.string()
    if pa.types.is_decimal(t) and top:
        return pa.decimal128(38, max(t.scale, 18))  # round to the declared scale afterwards (HALF_UP)
    if pa.types.is_binary(t) and top:
        return pa.string()  # base64 text, decoded afterwards
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _read_type(f.type, False), f.nullable) for f in t])
    if pa.types.is_list(t):
        v = t.value_field
        return pa.list_(pa.field(v.name, _read_type(v.type, False), v.nullable))
    return t


class JsonParser:
    """JSON object values into typed Arrow columns (one per schema field), in batches."""

    def __init__(self, target: pa.Schema) -> None:
        self.target = target
        self.read_schema = pa.schema([pa.field(f.name, _read_type(f.type, True), True) for f in target])
        self.read_options = pj.ReadOptions(use_threads=False, block_size=1 << 20)
        self.parse_options = pj.ParseOptions(explicit_schema=self.read_schema, unexpected_field_behavior="ignore")
        self.single_options = pj.ParseOptions(explicit_schema=self.read_schema, unexpected_field_behavior="ignore",
                                              newlines_in_values=True)

    def parse(self, values: Sequence[bytes | None]) -> tuple[list[pa.Array], list[tuple[int, str]]]:
        """Columns of ``len(values)`` rows and the records that do not match (index, reason); their rows are
        null. A null value (a tombstone) is an empty object: every column null, not malformed."""
        chunks: list[list[pa.Array]] = []
        bad: list[tuple[int, str]] = []
        joined = getattr(values, "joined", None)  # the values already joined by newlines (SQLite backend)
        if isinstance(joined, bytes) and values:
            try:
                return self._parse_buffer(joined, len(values)), bad
            except _PARSE_ERRORS:
                pass  # find the records that do not match, one half at a time
        if values:
            self._parse(values, 0, chunks, bad)
        if len(chunks) == 1:
            return chunks[0], bad
        return [pa.concat_arrays([c[i] for c in chunks]) for i in range(len(self.target))], bad

    def _parse(self, values: Sequence[bytes | None], base: int, chunks: list[list[pa.Array]],
               bad: list[tuple[int, str]]) -> None:
        try:
            chunks.append(self._parse_block(values))
            return
        except _PARSE_ERRORS as exc:
            if len(values) == 1:
                chunks.append([pa.nulls(1, f.type) for f in self.target])
                bad.append((base, _ROW_IN.sub("", str(exc)) or type(exc).__name__))
                return
        mid = len(values) // 2
        self._parse(values[:mid], base, chunks, bad)
        self._parse(values[mid:], base + mid, chunks, bad)

    def _parse_block(self, values: Sequence[bytes | None]) -> list[pa.Array]:
        n = len(values)
        if None in values:
            values = [b"{}" if v is None else v for v in values]
        return self._parse_buffer(b"\n".join(values), n)  # type: ignore[arg-type]

    def _parse_buffer(self, buf: bytes, n: int) -> list[pa.Array]:
        """The columns of ``n`` values joined by newlines (a value holding a newline parses alone)."""
        options = self.single_options if n == 1 else self.parse_options
        read_options = self.read_options
        if len(buf) >= (1 << 20):
            read_options = pj.ReadOptions(use_threads=False, block_size=min(len(buf) + 1, (1 << 31) - 1))
        table = pj.read_json(pa.BufferReader(buf), read_options=read_options, parse_options=options)
        if table.num_rows != n:
            raise ValueError(f"expected one JSON object per record, found {table.num_rows} in {n} record(s)")
        out = []
        for field, column in zip(self.target, table.columns, strict=True):
            arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
            out.append(_finish(arr, field.type))
        return out


def _finish(arr: pa.Array, t: pa.DataType) -> pa.Array:
    if arr.type == t:
        return arr
    if pa.types.is_decimal(t) and pa.types.is_decimal(arr.type):
        arr = pc.round(arr, t.scale, round_mode="half_towards_infinity")
    elif pa.types.is_binary(t) and pa.types.is_string(arr.type):
        return pa.array([None if s is None else base64.b64decode(s, validate=True) for s in arr.to_pylist()],
                        pa.binary())
    return arr.cast(t)


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return bytes(v).decode("utf-8", errors="replace")


def _headers(headers: Sequence[Any], t: pa.DataType) -> pa.Array:
    """``list<struct<key, value>>`` from per-record header lists, built from flat columns (from the stored
    bytes, vectorised, when the backend hands them over undecoded)."""
    encoded = getattr(headers, "encoded", None)
    if encoded is not None:
        built = _headers_encoded(encoded, t)
        if built is not None:
            return built
        headers = list(headers)  # decoded one by one: the same values, or the backend's error
    names: list[str] = []
    values: list[Any] = []
    ends = [0]
    valid = []
    for h in headers:
        if h is None:
            valid.append(False)
        else:
            valid.append(True)
            for k, v in h:
                names.append(k)
                values.append(v)
        ends.append(len(names))
    raw = pa.array(values, pa.binary())
    try:
        text = raw.cast(pa.string())
    except pa.ArrowInvalid:  # undecodable header bytes are replaced, never fatal
        text = pa.array([_text(v) for v in values], pa.string())
    struct = pa.StructArray.from_arrays([pa.array(names, pa.string()), text], fields=list(t.value_type))
    mask = None if all(valid) else pa.array([not v for v in valid], pa.bool_())
    return pa.ListArray.from_arrays(pa.array(ends, pa.int32()), struct, type=t, mask=mask)


def _joined_ints(text: str, n: int) -> np.ndarray | None:
    """Integers from a backend's comma-separated text (``n`` of them), or ``None`` if it is not that."""
    if not n:
        return np.zeros(0, np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            out = np.fromstring(text, dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning):
            return None
    return out if len(out) == n else None


def _joined_binary(blobs: Any) -> pa.Array | None:
    """A binary array straight from a backend's concatenated bytes and their lengths (``-1`` for null),
    when ``blobs`` comes so and is consistent; ``None`` otherwise."""
    data, text = getattr(blobs, "data", None), getattr(blobs, "lengths", None)
    if not isinstance(data, bytes) or not isinstance(text, str) or len(data) >= (1 << 31) - 1:
        return None
    lengths = _joined_ints(text, len(blobs))
    if lengths is None:
        return None
    valid = lengths >= 0
    ends = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(np.where(valid, lengths, 0), out=ends[1:])
    if ends[-1] != len(data):
        return None
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
    return pa.Array.from_buffers(pa.binary(), len(lengths), [validity, pa.py_buffer(ends.astype(np.int32).tobytes()),
                                                             pa.py_buffer(data)], null_count=int((~valid).sum()))


def _binary(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """A binary array of the slices ``data[start:start + length]``, gathered without a Python object each."""
    ends = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=ends[1:])
    total = int(ends[-1])
    gathered = data[np.repeat(starts - ends[:-1], lengths) + np.arange(total)] if total else data[:0]
    validity = None
    nulls = 0
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
        nulls = int(len(valid) - valid.sum())
    return pa.Array.from_buffers(pa.binary(), len(lengths),
                                 [validity, pa.py_buffer(ends.astype(np.int32).tobytes()),
                                  pa.py_buffer(gathered.tobytes())], null_count=nulls)


def _headers_encoded(encoded: Sequence[bytes | None], t: pa.DataType) -> pa.Array | None:
    """The headers column from stored headers (version byte ``1``, then per header a big-endian ``uint16``
    name length, the name, a big-endian ``int32`` value length, ``-1`` for null, the value), decoded for
    all records at once, one header position per pass. ``None`` when a blob is not well formed: the caller
    decodes one by one, which raises the backend's own error."""
    raw = _joined_binary(encoded)
    if raw is None:
        raw = pa.array(encoded, pa.binary())
    n = len(raw)
    if raw.buffers()[2] is None or raw.buffers()[2].size >= (1 << 31) - 1:
        return None
    valid = raw.is_valid().to_numpy(zero_copy_only=False)
    offs = np.frombuffer(raw.buffers()[1], np.int32, n + 1, raw.offset * 4).astype(np.int64)
    data = np.frombuffer(raw.buffers()[2], np.uint8)
    starts, ends = offs[:-1], offs[1:]
    if ((ends <= starts) & valid).any() or (data[starts[valid]] != 1).any():
        return None
    pos = starts + 1
    which = np.nonzero(valid & (pos < ends))[0]
    recs, name_at, name_len, value_at, value_len = [], [], [], [], []
    while which.size:
        at, stop = pos[which], ends[which]
        if (at + 2 > stop).any():
            return None
        nlen = (data[at].astype(np.int64) << 8) | data[at + 1]
        ne = at + 2 + nlen
        if (ne + 4 > stop).any():
            return None
        vlen = ((data[ne].astype(np.int64) << 24) | (data[ne + 1].astype(np.int64) << 16)
                | (data[ne + 2].astype(np.int64) << 8) | data[ne + 3])
        vlen = np.where(vlen >= 1 << 31, vlen - (1 << 32), vlen)
        after = ne + 4 + np.maximum(vlen, 0)
        if (after > stop).any():
            return None
        recs.append(which)
        name_at.append(at + 2)
        name_len.append(nlen)
        value_at.append(ne + 4)
        value_len.append(vlen)
        pos[which] = after
        which = which[after < stop]
    if recs:
        rec = np.concatenate(recs)
        order = np.argsort(rec, kind="stable")  # by record, then header position
        rec = rec[order]
        n_at, n_len = np.concatenate(name_at)[order], np.concatenate(name_len)[order]
        v_at, v_len = np.concatenate(value_at)[order], np.concatenate(value_len)[order]
    else:
        rec = n_at = n_len = v_at = v_len = np.zeros(0, np.int64)
    list_ends = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rec, minlength=n), out=list_ends[1:])
    try:
        names = _binary(data, n_at, n_len, None).cast(pa.string())
    except pa.ArrowInvalid:
        return None
    raw_values = _binary(data, v_at, np.maximum(v_len, 0), v_len >= 0)
    try:
        values = raw_values.cast(pa.string())
    except pa.ArrowInvalid:  # undecodable header bytes are replaced, never fatal
        values = pa.array([_text(v) for v in raw_values.to_pylist()], pa.string())
    struct = pa.StructArray.from_arrays([names, values], fields=list(t.value_type))
    mask = None if valid.all() else pa.array(~valid, pa.bool_())
    return pa.ListArray.from_arrays(pa.array(list_ends, pa.int32()), struct, type=t, mask=mask)


class BatchBuilder:
    """Builds the output record batches of one reader: the full output schema (metadata then typed)."""

    def __init__(self, schema: StructType, metadata: Sequence[str], key_kind: str, value_kind: str,
                 typed: bool, mode: str, corrupt: str) -> None:
        self.schema = to_arrow_schema(schema, timezone="UTC")
        self.metadata = [c for c in METADATA_COLUMNS if c in metadata]
        self.key_kind = key_kind
        self.value_kind = value_kind
        self.mode = mode
        self.headers = "headers" in self.metadata
        self.keys = "key" in self.metadata
        self.timestamps = "timestamp" in self.metadata
        self.parser: JsonParser | None = None
        self.corrupt_index: int | None = None
        if typed:
            fields = [f for f in self.schema if f.name not in self.metadata and f.name != corrupt]
            self.parser = JsonParser(pa.schema(fields))
            if corrupt in self.schema.names[len(self.metadata):]:
                self.corrupt_index = self.schema.get_field_index(corrupt)

    def build(self, topic: str, partition: int, cols: tuple[Any, ...]) -> pa.RecordBatch | None:
        offsets, keys, values, stamps, headers = cols
        n = len(offsets)
        if n == 0:
            return None
        arrays: list[pa.Array] = []
        for name in self.metadata:
            if name == "topic":
                arrays.append(pa.repeat(pa.scalar(topic, pa.string()), n))
            elif name == "partition":
                arrays.append(pa.repeat(pa.scalar(partition, pa.int32()), n))
            elif name == "offset":
                arrays.append(pa.array(np.arange(offsets.start, offsets.stop, dtype=np.int64))
                              if isinstance(offsets, range) and offsets.step == 1 else pa.array(offsets, pa.int64()))
            elif name == "key":
                arrays.append(self._bytes(keys, self.key_kind, "key", topic, partition, offsets))
            elif name == "value":
                arrays.append(self._bytes(values, self.value_kind, "value", topic, partition, offsets))
            elif name == "timestamp":
                ints = _joined_ints(stamps.text, n) if isinstance(getattr(stamps, "text", None), str) else None
                arr = pa.array(stamps, pa.int64()) if ints is None else pa.array(ints)
                arrays.append(arr.view(_TS_MS).cast(self.schema.field("timestamp").type))
            else:
                arrays.append(_headers(headers, self.schema.field("headers").type))
        keep = None
        if self.parser is not None:
            typed, bad = self.parser.parse(values)
            if bad and self.mode == "FAILFAST":
                i, reason = bad[0]
                raise DataError(
                    f"record {topic}[{partition}] offset {offsets[i]}: the value does not match the schema "
                    f"({reason}); mode FAILFAST stops at the first malformed record (PERMISSIVE keeps it with "
                    f"null columns, DROPMALFORMED leaves it out)")
            if self.corrupt_index is not None:
                texts: list[str | None] = [None] * n
                for i, _reason in bad:
                    texts[i] = _text(values[i])
                typed.insert(self.corrupt_index - len(self.metadata), pa.array(texts, pa.string()))
            arrays.extend(typed)
            if bad and self.mode == "DROPMALFORMED":
                mask = [True] * n
                for i, _reason in bad:
                    mask[i] = False
                keep = pa.array(mask, pa.bool_())
        batch = pa.RecordBatch.from_arrays(
            [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, self.schema, strict=True)],
            schema=self.schema)
        if keep is not None:
            batch = batch.filter(keep)
        return batch if batch.num_rows else None

    def _bytes(self, data: Sequence[bytes | None], kind: str, what: str, topic: str, partition: int,
               offsets: Sequence[int]) -> pa.Array:
        arr = _joined_binary(data)
        if arr is None:
            arr = pa.array(data, pa.binary())
        if kind == "bytes":
            return arr
        try:
            return arr.cast(pa.string())
        except pa.ArrowInvalid:
            for off, v in zip(offsets, data, strict=True):
                if v is not None:
                    try:
                        bytes(v).decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise DataError(f"record {topic}[{partition}] offset {off}: the {what} is not UTF-8 text "
                                        f"({exc}); read it with {what}.converter=bytes") from exc
            raise


def typed_fields(schema: StructType, metadata: Sequence[str]) -> StructType:
    """The user's columns of a full output schema (everything after the metadata columns)."""
    return StructType([StructField(f.name, f.dataType, True) for f in schema.fields[len(metadata):]])


__all__ = ["DEFAULT_CORRUPT_COLUMN", "DEFAULT_TYPED_METADATA", "METADATA_COLUMNS", "MODES", "BatchBuilder",
           "JsonParser", "check_typed_schema", "metadata_ddl", "typed_fields"]
