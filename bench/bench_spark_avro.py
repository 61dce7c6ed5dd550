"""An Avro topic's committed range as typed columns: ``read_kafka_avro`` vs ``from_avro`` written by hand.

    .venv/bin/python bench/bench_spark_avro.py [--records 300000] [--runs 3]

Needs Apache Kafka 4.4.0 (``bash scripts/fetch_kafka.sh``) and Spark's Kafka source with spark-avro
(``bash scripts/fetch_spark_kafka.sh``). One broker, one warm ``local[2]`` SparkSession. N orders (``order_id``
string, ``customer`` string, ``amount`` decimal(12,2), ``items`` int) are written by confluent-kafka's
``AvroSerializer`` (a ``mock://`` registry) in Confluent's wire format, committed in transactions of 10,000. Each
run computes ``count(*)`` and ``sum(amount)``, timed from building the DataFrame to the result:

- ``by hand``: :func:`connect_runtime.spark.read_kafka_range`, then ``from_avro`` of the body with the writer
  schema the job states itself (one schema, no registry, no scan): the least a job can do;
- ``read_kafka_avro``: the same range through :func:`connect_runtime.spark.read_kafka_avro`: the scan of the
  schema ids (one more Spark job over the range), the registry lookups, one ``CASE`` branch per id;
- ``ids of subject``: the same with ``schema_ids="subject"``: the ids of the subject's versions, no scan.

Runs alternate after one warm-up each; records/s per run, best and median, and the ratio of the medians. The
results are checked equal. No timed asserts.
"""

from __future__ import annotations

import argparse
import decimal
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _kafka import apache_kafka
from bench_spark_read import _fill

WRITER = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "order_id", "type": "string"}, {"name": "customer", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "items", "type": "int"}]}


def _session() -> Any:
    from pyspark.sql import SparkSession

    from connect_runtime.spark import kafka_jars

    spark = (SparkSession.builder.master("local[2]").appName("bench_spark_avro")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.jars", ",".join(kafka_jars(avro=True)))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _values(n: int, registry: Any) -> list[bytes]:
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(registry, json.dumps(WRITER))
    ctx = SerializationContext("orders", MessageField.VALUE)
    return [serialize({"order_id": f"o-{i:07d}", "customer": f"c-{i % 97}",
                       "amount": decimal.Decimal((i % 1000) * 37).scaleb(-2), "items": i % 7 + 1}, ctx)
            for i in range(n)]


def _readers(spark: Any, url: str, ranges: dict[str, Any], registry: Any) -> dict[str, Callable[[], Any]]:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from connect_runtime.spark import read_kafka_avro, read_kafka_range

    def by_hand() -> Any:
        return (read_kafka_range(spark, url, ranges)
                .select(from_avro(F.expr("substr(value, 6)"), json.dumps(WRITER)).alias("v")).select("v.*"))

    return {"by hand": by_hand, "read_kafka_avro": lambda: read_kafka_avro(spark, url, ranges, registry),
            "ids of subject": lambda: read_kafka_avro(spark, url, ranges, registry, schema_ids="subject")}


def _run(make: Callable[[], Any]) -> tuple[float, tuple[int, str]]:
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    row = make().agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("s")).collect()[0]
    return time.perf_counter() - t0, (int(row["n"]), str(row["s"]))


def main() -> int:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    registry = SchemaRegistryClient.new_client({"url": "mock://bench-spark-avro"})

    with tempfile.TemporaryDirectory(prefix="bench_spark_avro_") as tmp, apache_kafka(Path(tmp) / "kafka") as boot:
        url = f"kafka://{boot}"
        ranges = _fill(url, _values(args.records, registry))
        spark = _session()
        try:
            readers = _readers(spark, url, ranges, registry)
            rates: dict[str, list[float]] = {name: [] for name in readers}
            results = {_run(make)[1] for make in readers.values()}  # warm-up
            for _ in range(args.runs):
                for name, make in readers.items():
                    seconds, result = _run(make)
                    rates[name].append(args.records / seconds)
                    results.add(result)
            if len(results) != 1 or next(iter(results))[0] != args.records:
                raise SystemExit(f"readers disagree: {results}")
            base = statistics.median(rates["by hand"])
            print(f"\n{args.records:,} records, {args.runs} runs, local[2], count(*) and sum(amount)")
            for name, rs in rates.items():
                med = statistics.median(rs)
                print(f"  {name:16s} best {max(rs):>12,.0f} rec/s  median {med:>12,.0f} rec/s  ratio {med / base:.2f}x")
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
