"""PySpark job of the distributed example: one day's per-customer totals from exactly the committed range on
Kafka, into a PostgreSQL table every machine can reach (the workers share no disk).

    spark-submit --master spark://HOST:7077 --deploy-mode client --jars <spark-sql-kafka jars> \\
        dags/jobs/orders_totals_to_sql.py --backend kafka://b1,b2,b3 \\
        --ranges '{"orders": {"0": [0, 40]}}' --date 2026-01-01 --warehouse postgresql://.../warehouse

The executors read the range with Spark's own Kafka source (:func:`connect_runtime.spark.read_kafka_range`:
``read_committed``, exactly the committed offsets, nothing of an aborted transaction), the aggregate (one small row
per customer) is collected to the driver and replaces the day's rows of ``orders_daily_totals`` in one
transaction: a rerun writes the same rows again, never twice. Prints ``ORDERS_TOTALS {json summary}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

SUMMARY_PREFIX = "ORDERS_TOTALS"
VALUE_SCHEMA = "id long, customer string, amount double, day string"
TABLE = """CREATE TABLE IF NOT EXISTS orders_daily_totals (
    day text NOT NULL, customer text NOT NULL, orders bigint NOT NULL, amount numeric(14, 2) NOT NULL,
    PRIMARY KEY (day, customer))"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Per-customer totals of a committed Kafka range, into PostgreSQL")
    parser.add_argument("--backend", required=True, help="the Kafka backend URL (kafka://host:port,...)")
    parser.add_argument("--ranges", required=True, help='committed ranges JSON: {"orders": {"0": [from, to]}}')
    parser.add_argument("--date", required=True, help="the day (YYYY-MM-DD)")
    parser.add_argument("--warehouse", required=True, help="PostgreSQL URL of the totals table")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t0 = time.monotonic()
    import psycopg
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from connect_runtime.spark import read_kafka_range

    spark = SparkSession.builder.appName(f"orders_totals_to_sql {args.date}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        orders = read_kafka_range(spark, args.backend, args.ranges, schema=VALUE_SCHEMA)
        collected = (orders.groupBy("customer")
                     .agg(F.count(F.lit(1)).alias("orders"),
                          F.sum(F.col("amount").cast("decimal(12,2)")).alias("amount"),
                          F.sum((F.col("day") != F.lit(args.date)).cast("int")).alias("other_days"))
                     .collect())
        other = sum(int(r["other_days"] or 0) for r in collected)
        if other:
            raise SystemExit(f"{other} records of {args.ranges} are not of {args.date}")
        url = args.warehouse.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url, connect_timeout=30) as conn:  # one transaction: the day's rows replaced
            conn.execute(TABLE)
            conn.execute("DELETE FROM orders_daily_totals WHERE day = %s", (args.date,))
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO orders_daily_totals (day, customer, orders, amount) "
                                "VALUES (%s, %s, %s, %s)",
                                [(args.date, r["customer"], int(r["orders"]), r["amount"]) for r in collected])
        summary = {"date": args.date, "input_records": sum(int(r["orders"]) for r in collected),
                   "customers": len(collected), "ranges": json.loads(args.ranges),
                   "master": spark.sparkContext.master, "seconds": round(time.monotonic() - t0, 2)}
        print(f"{SUMMARY_PREFIX} {json.dumps(summary)}", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
