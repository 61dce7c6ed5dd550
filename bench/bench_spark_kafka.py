"""Spark's own Kafka source over a committed range vs ``spark.read.schema(...).json(...)`` of the same records.

    .venv/bin/python bench/bench_spark_kafka.py [--records 300000 1000000] [--runs 3]

Needs Apache Kafka 4.4.0 (``bash scripts/fetch_kafka.sh``) and Spark's Kafka source
(``bash scripts/fetch_spark_kafka.sh``). One Apache Kafka broker (``_kafka.apache_kafka``) and one SparkSession
(``local[2]``, the Kafka source's jars as ``spark.jars``), warm: per size, N orders of about 60 bytes of JSON
(the records of ``bench_spark_read.py``) are committed to a Kafka topic in transactions of 10,000 records (a
transaction marker after each) and written to a JSON-lines file. Each run computes ``count(*)`` and
``sum(amount)`` over

- ``json file``: ``spark.read.schema(SCHEMA).json(path)`` (Spark prunes the parse to the columns the query uses);
- ``from_json``: :func:`connect_runtime.spark.read_kafka_range` over the committed range (``read_committed``,
  starting/ending offsets), the value parsed with ``from_json`` (``, fresh group``: a new ``kafka.group.id`` per
  query, Spark's own default and this project's before, so no pooled consumer is reused);
- ``schema=``: ``read_kafka_range(..., schema=SCHEMA)``, Spark's JSON reader over the values (the default parse);
  ``, used columns``: with the schema of the query's columns only (``amount double``): the JSON reader over a
  Dataset does not prune, so this is the parse the file read does;
- ``raw: read only``: the Kafka read alone, no parse (``amount`` is the value's length; not compared);
- ``, tuned`` / ``, minP 4``: the consumer settings of ``TUNED`` / ``minPartitions=4``.

Pick readers with ``--only NAME ...`` (the JSON file read always runs). Runs alternate between the readers after
one warm-up each; records/s per run, best and median, and the ratio of the medians (reader / json file). The
results are checked equal (but the raw read's). No timed asserts. The issue's target: the Kafka path at least
0.9x the JSON read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _kafka import apache_kafka
from bench_spark_read import QUERY_SCHEMA, SCHEMA, _fill, _run, _values

TUNED = {
    # a fetch that finds nothing (a transaction marker at the end of a split) returns at once, not after 500 ms
    "kafka.fetch.max.wait.ms": "10",
    # fewer, larger fetches than the consumer's 1 MiB per partition
    "kafka.max.partition.fetch.bytes": str(16 << 20),
    "kafka.fetch.max.bytes": str(64 << 20),
}


def _session() -> Any:
    from pyspark.sql import SparkSession

    from connect_runtime.spark import kafka_jars

    spark = (SparkSession.builder.master("local[2]").appName("bench_spark_kafka")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.jars", ",".join(kafka_jars()))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _readers(spark: Any, url: str, ranges: dict[str, Any], path: Path) -> dict[str, Callable[[], Any]]:
    from pyspark.sql import functions as F

    from connect_runtime.spark import read_kafka_range

    def from_json(**options: Any) -> Any:
        return (read_kafka_range(spark, url, ranges, **options)
                .select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("v")).select("v.*"))

    def fresh_group() -> dict[str, str]:  # Spark's own default: a new group id (new consumers) per query
        return {"kafka.group.id": f"spark-kafka-relation-{uuid.uuid4()}"}

    return {
        "json file": lambda: spark.read.schema(SCHEMA).json(str(path)),
        "from_json, fresh group": lambda: from_json(**fresh_group()),
        "from_json": from_json,
        "schema=, fresh group": lambda: read_kafka_range(spark, url, ranges, schema=SCHEMA, **fresh_group()),
        "schema=": lambda: read_kafka_range(spark, url, ranges, schema=SCHEMA),
        "schema=, minP 4": lambda: read_kafka_range(spark, url, ranges, schema=SCHEMA, minPartitions=4),
        "schema=, tuned": lambda: read_kafka_range(spark, url, ranges, schema=SCHEMA, **TUNED),
        "schema=, used columns": lambda: read_kafka_range(spark, url, ranges, schema=QUERY_SCHEMA["sum"]),
        "from_json, used columns": lambda: read_kafka_range(spark, url, ranges).select(
            F.from_json(F.col("value").cast("string"), QUERY_SCHEMA["sum"]).alias("v")).select("v.*"),
        # the read alone, no parse: `amount` is the value's length (its sum differs; not compared)
        "raw: read only": lambda: read_kafka_range(spark, url, ranges).select(
            F.length("value").cast("double").alias("amount")),
        "raw: read only, tuned": lambda: read_kafka_range(spark, url, ranges, **TUNED).select(
            F.length("value").cast("double").alias("amount")),
        "raw: read only, minP 4": lambda: read_kafka_range(spark, url, ranges, minPartitions=4).select(
            F.length("value").cast("double").alias("amount")),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[300_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="the readers to run (names as printed); "
                        "the JSON file read always runs")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    with tempfile.TemporaryDirectory(prefix="bench_spark_kafka_") as tmp, apache_kafka(Path(tmp) / "kafka") as boot:
        spark = _session()
        try:
            for n in args.records:
                url = f"kafka://{boot}"
                values = _values(n)
                ranges = _fill(url, values)  # topic "orders": a second size appends to the same topic
                path = Path(tmp) / f"orders-{n}.jsonl"
                path.write_bytes(b"\n".join(values) + b"\n")
                del values
                readers = _readers(spark, url, ranges, path)
                if args.only:
                    readers = {k: v for k, v in readers.items() if k == "json file" or k in args.only}
                rates: dict[str, list[float]] = {name: [] for name in readers}
                results: set[tuple[object, ...]] = set()
                for name, make in readers.items():  # warm-up: JIT, the Kafka consumers' first connections
                    result = _run(make())[1]
                    if not name.startswith("raw"):
                        results.add(result)
                for _ in range(args.runs):
                    for name, make in readers.items():
                        seconds, result = _run(make())
                        rates[name].append(n / seconds)
                        if not name.startswith("raw"):
                            results.add(result)
                if len(results) != 1 or next(iter(results))[0] != n:
                    raise SystemExit(f"readers disagree: {results}")
                base = statistics.median(rates["json file"])
                print(f"\n{n:,} records, {args.runs} runs, local[2], count(*) and sum(amount), ranges {ranges}")
                for name, rs in rates.items():
                    med = statistics.median(rs)
                    print(f"  {name:22s} best {max(rs):>12,.0f} rec/s  median {med:>12,.0f} rec/s  "
                          f"ratio {med / base:.2f}x")
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
