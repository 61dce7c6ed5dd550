"""PySpark job: per-customer totals of one day's orders, read from exactly a committed offset range.

    spark-submit dags/jobs/orders_daily_totals.py --backend sqlite:///var/pyconnect.db \\
        --ranges '{"orders": {"0": [0, 381]}}' --date 2026-01-01 --output var/out/orders_daily_totals \\
        [--lake var/data/lake]

Reads the records of ``--ranges`` (the committed ranges of the source run, in its XCom shape, either
form: ``[from, to]`` or exact span lists). With ``--lake`` (the example DAG): from the ParquetSink's files
under that path that hold exactly those ranges (:func:`connect_runtime.spark.read_lake`: Spark's own
``spark.read.parquet``; a range that is not exactly a set of files fails the job, naming it), amounts
cast to ``decimal(12,2)``. Without it: from the store with the ``pyconnect`` data source, the JSON orders
arriving as typed columns (``schema`` option, parsed in Arrow batches; ``FAILFAST``: a record that is not
an order fails the job, naming its topic, partition and offset). Either way it writes one row per customer
(``customer, orders, items, amount, date``) as Parquet partitioned by ``date``. The write replaces
only the partition ``date=<--date>`` (``partitionOverwriteMode=dynamic``): running the job again for
the same day and ranges gives the same rows, and other days are never touched. An empty range
writes nothing (the partition, if any, stays as it is).

Prints one line ``ORDERS_DAILY_TOTALS {json summary}`` at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

ORDER_SCHEMA = "order_id string, customer string, amount decimal(12,2), items int, ts string, channel string"
LAKE_SCHEMA = "order_id string, customer string, amount double, items long, ts string, channel string"
"""The lake's Parquet types (the DAG's ``parquet.schema``)."""
SUMMARY_PREFIX = "ORDERS_DAILY_TOTALS"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Per-customer daily order totals from a committed offset range")
    parser.add_argument("--backend", required=True, help="backend URL (sqlite:///... or kafka://...)")
    parser.add_argument("--ranges", required=True, help='committed ranges JSON: {"orders": {"0": [from, to]}}')
    parser.add_argument("--date", required=True, help="the day (YYYY-MM-DD): the output partition")
    parser.add_argument("--output", required=True, help="Parquet dataset directory")
    parser.add_argument("--lake", default=None,
                        help="read the ranges from the ParquetSink's files under this path (fsspec URL or directory)")
    parser.add_argument("--max-records-per-partition", type=int, default=None,
                        help="input partitions no longer than this (default: the data source's)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t0 = time.monotonic()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from connect_runtime.spark import read_lake, read_ranges

    spark = (SparkSession.builder.appName(f"orders_daily_totals {args.date}")
             .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    try:
        limits = ({} if args.max_records_per_partition is None
                  else {"max_records_per_partition": args.max_records_per_partition})
        if args.lake:
            orders = (read_lake(spark, args.lake, args.ranges, schema=LAKE_SCHEMA)
                      .select("customer", F.col("amount").cast("decimal(12,2)").alias("amount"),
                              F.col("items").cast("int").alias("items")))
        else:
            orders = read_ranges(spark, args.backend, args.ranges, schema=ORDER_SCHEMA, mode="FAILFAST",
                                 metadata_columns="", **limits)
        invalid = (F.col("customer").isNull() | F.col("amount").isNull() | F.col("items").isNull()).cast("int")
        totals = (orders.groupBy("customer")
                  .agg(F.count(F.lit(1)).alias("orders"), F.sum("items").cast("long").alias("items"),
                       F.sum("amount").alias("amount"), F.sum(invalid).alias("invalid"))
                  .cache())
        collected = totals.collect()  # one row per customer: the only pass over the records
        bad = sum(r["invalid"] for r in collected)
        if bad:
            raise SystemExit(f"{bad} records of {args.ranges} are not orders (no customer, amount or items)")
        rows = len(collected)
        input_records = sum(r["orders"] for r in collected)
        if rows:
            (totals.drop("invalid").withColumn("date", F.lit(args.date))
             .coalesce(1).sortWithinPartitions("customer")
             .write.mode("overwrite").partitionBy("date").parquet(args.output))
        summary = {"date": args.date, "input_records": int(input_records), "rows": rows,
                   "output": f"{args.output}/date={args.date}" if rows else None,
                   "ranges": json.loads(args.ranges),
                   "read": "lake" if args.lake else "store", "seconds": round(time.monotonic() - t0, 2)}
        print(f"{SUMMARY_PREFIX} {json.dumps(summary)}", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
