"""Spark read of committed ranges with typed columns vs ``spark.read.schema(...).json(...)`` of the same records.

    .venv/bin/python bench/bench_spark_read.py --records 300000 1000000 --runs 3 [--query all]

One SparkSession (``local[2]``). Per size: N orders of about 60 bytes of JSON are committed to an
embedded (SQLite) store and written to a JSON-lines file. Each run computes ``count(*)`` and
``sum(amount)`` (``--query all``: also ``sum(items)``, ``max(order_id)`` and ``max(customer)``, so every
column is used) over

- ``json file``: ``spark.read.schema(SCHEMA).json(path)`` (what a Spark user gets by default);
- ``pyconnect, typed only``: ``spark.read.format("pyconnect")`` over the run's committed ranges with the
  ``schema`` option and ``metadata.columns=`` (the typed columns alone, what the file has);
- ``pyconnect, typed + offset``: the same with ``metadata.columns=offset``;
- ``pyconnect, default columns``: the same with the default metadata columns (topic, partition, offset,
  key, timestamp, headers).

Runs alternate between the readers; records/s per run, then best and median, and the ratio of the
medians (pyconnect / json file). Results are checked equal across readers. No timed asserts.

Settings: the session is Spark's defaults (``local[2]``, no Arrow setting changed: the source hands Spark
``pyarrow.RecordBatch`` objects, which Spark takes as they are whatever ``spark.sql.execution.arrow.*``
says). ``read_ranges`` plans one input partition per core (``min.partitions`` = the default
parallelism), as many as Spark's JSON source makes of this file. Note what the query lets each side
skip: Spark prunes the JSON file source to the one column the query uses (``amount``), while a Python data
source (Spark 4.2) always produces every column of its schema.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCHEMA = "order_id string, customer string, amount double, items int"
TOPIC = "orders"


def _values(n: int) -> list[bytes]:
    return [json.dumps({"order_id": f"o-{i:07d}", "customer": f"c-{i % 97}", "amount": round((i % 1000) * 0.37, 2),
                        "items": i % 7 + 1}, separators=(",", ":")).encode() for i in range(n)]


def _fill(url: str, values: list[bytes]) -> dict[str, dict[str, list[int]]]:
    from connect_runtime.backends import ProducerRecord, open_backend

    with open_backend(url) as backend:
        backend.create_topics({TOPIC: 1})
        producer = backend.transactional_producer("bench-writer")
        producer.init_transactions(30)
        first = last = None
        for lo in range(0, len(values), 10_000):
            producer.begin_transaction()
            producer.send([ProducerRecord(TOPIC, 0, f"k{lo + i}".encode(), v, 1_767_225_600_000 + lo + i,
                                          [("source", b"bench")])
                           for i, v in enumerate(values[lo:lo + 10_000])])
            written = producer.commit_transaction([], 30)
            for a, b in written.ranges.values():
                first = a if first is None else min(first, a)
                last = b if last is None else max(last, b)
        producer.close()
    assert first is not None and last is not None
    return {TOPIC: {"0": [first, last]}}


def _run(df: object, query: str = "sum") -> tuple[float, tuple[object, ...]]:
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("n"), F.sum("amount").alias("s")]
    if query == "all":
        aggs += [F.sum("items"), F.max("order_id"), F.max("customer")]
    t0 = time.perf_counter()
    row = df.agg(*aggs).collect()[0]  # type: ignore[attr-defined]
    return time.perf_counter() - t0, (int(row["n"]), round(float(row["s"]), 2), *row[2:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[300_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--query", choices=["sum", "all"], default="sum",
                        help="sum: count(*) and sum(amount) (the issue's query); all: every column used")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from connect_runtime.spark import read_ranges

    spark = (SparkSession.builder.master("local[2]").appName("bench_spark_read")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory(prefix="bench_spark_read_") as tmp:
            for n in args.records:
                values = _values(n)
                url = f"sqlite:///{tmp}/store-{n}.db"
                ranges = _fill(url, values)
                path = Path(tmp) / f"orders-{n}.jsonl"
                path.write_bytes(b"\n".join(values) + b"\n")
                del values
                readers = {
                    "json file": lambda p=path: spark.read.schema(SCHEMA).json(str(p)),
                    "pyconnect, typed only": lambda u=url, r=ranges: read_ranges(spark, u, r, schema=SCHEMA,
                                                                                 metadata_columns=""),
                    "pyconnect, typed + offset": lambda u=url, r=ranges: read_ranges(spark, u, r, schema=SCHEMA,
                                                                                     metadata_columns="offset"),
                    "pyconnect, default columns": lambda u=url, r=ranges: read_ranges(spark, u, r, schema=SCHEMA),
                }
                for make in readers.values():  # warm-up: Python workers, JIT of the JSON path
                    _run(make(), args.query)
                rates: dict[str, list[float]] = {name: [] for name in readers}
                results: dict[str, set[tuple[int, float]]] = {name: set() for name in readers}
                for _ in range(args.runs):
                    for name, make in readers.items():
                        seconds, result = _run(make(), args.query)
                        rates[name].append(n / seconds)
                        results[name].add(result)
                if len({r for rs in results.values() for r in rs}) != 1 or next(iter(results["json file"]))[0] != n:
                    raise SystemExit(f"readers disagree: {results}")
                base = statistics.median(rates["json file"])
                what = "count(*) and sum(amount)" if args.query == "sum" else "count(*), sums and maxima of every column"
                print(f"\n{n:,} records, {args.runs} runs, local[2]: {what}")
                for name, rs in rates.items():
                    med = statistics.median(rs)
                    print(f"  {name:28s} best {max(rs):>12,.0f} rec/s  median {med:>12,.0f} rec/s  "
                          f"ratio {med / base:.2f}x")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
