"""A committed range read from the lake at Spark's own speed: the ParquetSink's files that hold it (resolved by
``connect_runtime.connectors.lake.files_for``: names and footers, never data) read with ``spark.read.parquet``,
Spark's native reader (column pruning, vectorised decoding, no row crosses Python)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from connect_runtime.api.data import Schema
from connect_runtime.connectors.lake import LakeFile, files_for
from connect_runtime.ranges import interval_spans
from connect_runtime.spark._classpath import require_lake_filesystem
from connect_runtime.spark._types import spark_schema


def lake_files(path: str, ranges: Any, *, topics_dir: str = "topics",
               storage_options: Mapping[str, object] | None = None) -> list[LakeFile]:
    """The ParquetSink files under ``path`` holding exactly ``ranges``: a source run's result (its ``ranges`` with
    its ``interval_ranges``), a handoff holding ``ranges``, bare ranges in either form, or their JSON text
    (:func:`connect_runtime.ranges.interval_spans`). Raises ``LakeRangeError`` when the files' boundaries do not
    match the range (docs/lake.md)."""
    return files_for(path, interval_spans(ranges), topics_dir=topics_dir, storage_options=storage_options)


def read_lake(spark: SparkSession, path: str, ranges: Any, *, schema: StructType | Schema | str | None = None,
              topics_dir: str = "topics", storage_options: Mapping[str, object] | None = None,
              url_scheme: str | None = None, **options: Any) -> DataFrame:
    """``spark.read.parquet`` of exactly the files holding ``ranges`` (see :func:`lake_files`); the rows are the
    record values, their fields the columns.

    Without ``schema`` the columns have the files' Parquet types, as the ParquetSink wrote them (from the records'
    value schema: decimal, date, timestamp, int8/int16 as byte/short, ...; Spark reports every file column
    nullable). ``schema`` (DDL, :class:`StructType`, or a Connect struct :class:`Schema`, mapped by
    :func:`connect_runtime.spark.spark_schema`) goes to ``spark.read.schema`` (it must match the files' types: a
    ``double`` column stays ``double``; cast after reading) and gives the columns of an empty range. ``storage_options`` are
    fsspec's, for listing and footers; Spark reads with its own filesystem settings, and ``url_scheme`` replaces the
    files' scheme for it (``"s3a"`` for Hadoop's S3A). Extra ``options`` go to the reader
    (``mergeSchema="true"`` when later files added columns). Files with no rows (a range whose records were all
    skipped) are not read.
    """
    if isinstance(schema, Schema):
        schema = spark_schema(schema)
    require_lake_filesystem(spark, url_scheme or (path.split("://", 1)[0] if "://" in path else "file"))
    files = [f.url for f in lake_files(path, ranges, topics_dir=topics_dir, storage_options=storage_options)
             if f.rows]
    if url_scheme:
        files = [f"{url_scheme}://{u.split('://', 1)[1]}" if "://" in u else u for u in files]
    if not files:
        no_rows: list[Any] = []
        return spark.createDataFrame(no_rows, schema if schema is not None else StructType([]))
    reader = spark.read
    if schema is not None:
        reader = reader.schema(schema)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.parquet(*files)


__all__ = ["lake_files", "read_lake"]
