"""A Python data source that does no work, for ``bench_spark_read.py``: the floor of any Python source.

It reads no store and parses nothing: each Python worker builds one typed Arrow batch of 32,768 orders
once (cached for the worker's life), then every read yields slices of it until ``n`` rows are given over
two input partitions. Options: ``n`` (rows) and ``schema`` (a subset of the bench's order columns).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

_ROWS = 32_768
_BATCHES: dict[str, Any] = {}


def _batch(names: tuple[str, ...]) -> Any:
    import pyarrow as pa

    key = ",".join(names)
    if key not in _BATCHES:
        columns = {
            "order_id": pa.array([f"o-{i:07d}" for i in range(_ROWS)], pa.string()),
            "customer": pa.array([f"c-{i % 97}" for i in range(_ROWS)], pa.string()),
            "amount": pa.array([round((i % 1000) * 0.37, 2) for i in range(_ROWS)], pa.float64()),
            "items": pa.array([i % 7 + 1 for i in range(_ROWS)], pa.int32()),
        }
        _BATCHES[key] = pa.RecordBatch.from_arrays([columns[n] for n in names], names=list(names))
    return _BATCHES[key]


class NoWorkReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, n: int, names: tuple[str, ...]) -> None:
        self.n = n
        self.names = names

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0), InputPartition(1)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        rows = self.n // 2 + (self.n % 2 if partition.value == 0 else 0)
        batch = _batch(self.names)
        while rows > 0:
            take = min(rows, batch.num_rows)
            yield batch.slice(0, take)
            rows -= take


class NoWorkSource(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "bench_no_work"

    def schema(self) -> str:
        return str(self.options["schema"])

    def reader(self, schema: Any) -> NoWorkReader:
        names = tuple(field.strip().split()[0] for field in str(self.options["schema"]).split(","))
        return NoWorkReader(int(self.options["n"]), names)
