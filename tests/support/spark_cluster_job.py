"""The ``spark-submit`` application of the Spark cluster tests (tests/integration/connect_runtime/test_spark_cluster.py).

Reads one committed range, from Kafka (``--backend kafka://... --ranges JSON``: Spark's own Kafka source,
``read_kafka_range``) or from the lake (``--lake URL --ranges JSON``: ``read_lake``), and writes
``{"app": <application id>, "ids": [<the values' ids, sorted>]}`` to ``--out``. ``--slow-task-s`` makes each task
hold its rows that long in a Python worker (``mapInArrow``) before passing them on, so a test can kill a Spark
worker while tasks of the read run on it; ``--partitions`` is the Kafka read's ``minPartitions``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from typing import Any


def _held(seconds: float) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def hold(batches: Iterator[Any]) -> Iterator[Any]:
        time.sleep(seconds)  # a slow task, so a worker can be lost while it runs
        yield from batches

    return hold


def main() -> None:
    from pyspark.sql import SparkSession

    from connect_runtime.spark import read_kafka_range, read_lake

    parser = argparse.ArgumentParser()
    parser.add_argument("--backend")
    parser.add_argument("--lake")
    parser.add_argument("--ranges", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--slow-task-s", type=float, default=0.0)
    parser.add_argument("--partitions", type=int, default=0)
    args = parser.parse_args()
    spark = SparkSession.builder.appName("pyconnect-cluster-test").getOrCreate()
    ranges = json.loads(args.ranges)
    if args.lake:
        df = read_lake(spark, args.lake, ranges).select("id")
    else:
        options = {"minPartitions": args.partitions} if args.partitions else {}
        df = read_kafka_range(spark, args.backend, ranges, schema="id long", **options)
    if args.slow_task_s:
        df = df.mapInArrow(_held(args.slow_task_s), df.schema)
    ids = sorted(int(row.id) for row in df.collect())
    with open(args.out, "w") as out:
        json.dump({"app": spark.sparkContext.applicationId, "ids": ids}, out)
    spark.stop()


if __name__ == "__main__":
    main()
