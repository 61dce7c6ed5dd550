"""Records into Arrow tables: each record value (a JSON object, a mapping, a dataclass, or JSON-object bytes from
``ByteArrayConverter``) is one row and its fields are columns. Records with a value schema (a schema-aware
converter's Structs) take their column types from it (:mod:`._typed`); the rest of this docstring is about
schemaless records.

Column types come from ``parquet.schema`` first, then from the files already written for the partition (their
Parquet schema), then from the first records that carry the field (inferred by pyarrow). A field that appears
later adds a nullable column (readers merge the schemas); a field whose values change type is an error naming
the record, the field and both types. A value that is not an object is an error naming the record. Errors go to
the errant record reporter when the run tolerates them (the record is skipped), else fail the run: nothing of a
file that was not published is kept, nothing published is touched.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from connect_runtime.api.data import Schema
from connect_runtime.api.errors import DataError
from connect_runtime.api.jsoncodec import json_default, json_loads_exact
from connect_runtime.api.records import SinkRecord
from connect_runtime.api.sink import ErrantRecordReporter
from connect_runtime.connectors.lake._typed import TypedTables

_DECLARED: dict[str, pa.DataType] = {
    "string": pa.string(), "int64": pa.int64(), "int32": pa.int32(), "double": pa.float64(),
    "float": pa.float32(), "boolean": pa.bool_(), "binary": pa.binary(), "timestamp_ms": pa.timestamp("ms"),
    "date32": pa.date32(), "json": pa.string(),
}


def _where(r: SinkRecord) -> str:
    return f"{r.topic}-{r.partition}@{r.offset}"


def _as_object(r: SinkRecord) -> dict[str, Any]:
    v = r.value
    if type(v) is dict:
        return v
    if isinstance(v, Mapping):
        return dict(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        try:
            parsed = json_loads_exact(bytes(v))
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    raise DataError(f"ParquetSink cannot write record {_where(r)}: its value is a {type(v).__name__}, not an "
                    "object (each record value is one row: a JSON object, a mapping or a structured value)")


class Columns:
    """The columns of one topic partition's files and the conversion of records into rows of them."""

    def __init__(self, declared: Mapping[str, str]) -> None:
        self.json_fields = {k for k, t in declared.items() if t == "json"}
        self.types: dict[str, pa.DataType] = {k: _DECLARED[t] for k, t in declared.items()}
        self.origin: dict[str, str] = {k: "parquet.schema" for k in declared}
        self.typed = TypedTables(dict(self.types), self.json_fields)

    def adopt(self, schema: pa.Schema, where: str) -> None:
        """Take the column types of a file already written (fields ``parquet.schema`` does not declare)."""
        for f in schema:
            if f.name not in self.types and not pa.types.is_null(f.type):
                self.types[f.name] = f.type
                self.origin[f.name] = where

    def schema_for(self, present: set[str]) -> pa.Schema:
        return pa.schema([pa.field(k, t) for k, t in self.types.items() if k in present])

    def table(self, records: list[SinkRecord], reporter: ErrantRecordReporter | None) -> pa.Table | None:
        """The rows of ``records`` (``None``: every record was reported as errant). Records of a value schema
        (all of one: the writer rotates files where it changes) go through :class:`TypedTables`."""
        schema = records[0].value_schema
        if schema is not None:
            return self._typed_table(records, schema, reporter)
        values = [r.value for r in records]
        try:  # the common case, every value a dict (JsonConverter), checked in one pass over the types
            return self._table(records, values if set(map(type, values)) == {dict} else
                               [_as_object(r) for r in records])
        except (DataError, pa.ArrowException, TypeError, ValueError, OverflowError):
            pass
        rows, kept = [], []
        for r in records:  # slow path: find the bad records, report them or fail naming the first
            try:
                row = _as_object(r)
                self._check(r, row)
            except DataError as err:
                if reporter is None:
                    raise
                reporter.report(r, err)
                continue
            rows.append(row)
            kept.append(r)
        return self._table(kept, rows) if kept else None

    def _typed_table(self, records: list[SinkRecord], schema: Schema,
                     reporter: ErrantRecordReporter | None) -> pa.Table | None:
        try:
            return self.typed.table(records, schema)
        except DataError:
            if reporter is None and len(records) == 1:
                raise
        kept = []
        for r in records:  # slow path: find the bad records, report them or fail naming the first
            try:
                self.typed.table([r], schema)
            except DataError as err:
                if reporter is None:
                    raise
                reporter.report(r, err)
                continue
            kept.append(r)
        return self.typed.table(kept, schema) if kept else None

    def _table(self, records: list[SinkRecord], rows: list[dict[str, Any]]) -> pa.Table:
        present: set[str] = set().union(*rows)
        for k in sorted(present - self.types.keys()):
            col = pa.array([row.get(k) for row in rows])  # a mixed column raises: the slow path names it
            if not pa.types.is_null(col.type):
                self.types[k] = col.type
                self.origin[k] = f"the records from {_where(records[0])}"
        if self.json_fields & present:
            for row in rows:
                for k in self.json_fields & row.keys():
                    row[k] = (json.dumps(row[k], separators=(",", ":"), ensure_ascii=False, default=json_default)
                              if row[k] is not None else None)
        return pa.Table.from_pylist(rows, schema=self.schema_for(present))

    def _check(self, r: SinkRecord, row: dict[str, Any]) -> None:
        for k, v in row.items():
            if v is None or k in self.json_fields:
                continue
            t = self.types.get(k)
            try:
                arr = pa.array([v], type=t)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                got = type(v).__name__
                if t is None:
                    raise DataError(f"ParquetSink cannot write record {_where(r)}: field {k!r} ({got}) has no "
                                    "Parquet type") from None
                raise DataError(
                    f"ParquetSink cannot write record {_where(r)}: field {k!r} is a {got}, but its column is {t} "
                    f"(from {self.origin.get(k, 'earlier records')}); a field keeps its type in a topic's files: "
                    "declare it in parquet.schema (e.g. json or string) or fix the producer") from None
            if t is None and not pa.types.is_null(arr.type):
                self.types[k] = arr.type
                self.origin[k] = f"record {_where(r)}"


__all__ = ["Columns"]
