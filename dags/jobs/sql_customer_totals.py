"""PySpark job: one day's per-customer order totals from rows a SqlSource committed, as a JSON-lines file.

    spark-submit dags/jobs/sql_customer_totals.py --backend sqlite:///var/pyconnect.db \\
        --ranges '{"sql-shop_orders": {"0": [0, 40]}}' --date 2026-01-01 --output var/sql_totals

Reads exactly the records of ``--ranges`` (the source run's ``interval_ranges``: the day's rows, also
on a rerun that wrote nothing new) with the ``pyconnect`` data source, the rows arriving as typed
columns (``FAILFAST``: a record that is not a row of ``shop_orders`` fails the job, naming its topic,
partition and offset), and aggregates them in Spark per customer. The totals (one small row per
customer) are written as ``<output>/<date>/totals-<sha256[:16]>.jsonl``, named by their content and
written atomically (temp file, fsync, rename):

- a rerun that computes the same totals finds the file already there and writes nothing, so the
  ``DirectorySource`` that publishes these files finds nothing new either;
- totals that changed (rows of the day added later) get a new file, which the publisher reads and
  the SQL sink upserts over the old totals: the table ends with the latest totals, never twice.

Amounts are decimal strings (``"123.45"``), exact; the SQL sink turns them back into ``numeric``.
Prints one line ``SQL_CUSTOMER_TOTALS {json summary}`` at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

ROW_SCHEMA = "id long, customer string, amount string, created_at string"
SUMMARY_PREFIX = "SQL_CUSTOMER_TOTALS"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Per-customer totals of a day's rows committed by a SqlSource")
    parser.add_argument("--backend", required=True, help="backend URL (sqlite:///... or kafka://...)")
    parser.add_argument("--ranges", required=True, help='committed ranges JSON: {"topic": {"0": [from, to]}}')
    parser.add_argument("--date", required=True, help="the day (YYYY-MM-DD)")
    parser.add_argument("--output", required=True, help="directory of the day folders of totals files")
    return parser.parse_args(argv)


def write_once(folder: str, lines: list[str]) -> tuple[str, bool]:
    """``folder/totals-<hash>.jsonl`` holding ``lines``; ``(path, written)`` (False: it was there)."""
    data = "".join(line + "\n" for line in lines).encode()
    path = os.path.join(folder, f"totals-{hashlib.sha256(data).hexdigest()[:16]}.jsonl")
    if os.path.exists(path):
        return path, False
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path, True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t0 = time.monotonic()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from connect_runtime.spark import read_ranges

    spark = (SparkSession.builder.appName(f"sql_customer_totals {args.date}")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    try:
        rows = read_ranges(spark, args.backend, args.ranges, schema=ROW_SCHEMA, mode="FAILFAST",
                           metadata_columns="")
        amount = F.col("amount").cast("decimal(12,2)")
        totals = (rows.groupBy("customer")
                  .agg(F.count(F.lit(1)).alias("orders"), F.sum(amount).alias("amount"),
                       F.sum((F.col("customer").isNull() | amount.isNull()).cast("int")).alias("invalid"))
                  .orderBy("customer")
                  .collect())
        bad = sum(r["invalid"] for r in totals)
        if bad:
            raise SystemExit(f"{bad} records of {args.ranges} are not shop orders (no customer or amount)")
        lines = [json.dumps({"day": args.date, "customer": r["customer"], "orders": int(r["orders"]),
                             "amount": f"{r['amount']:.2f}"}, separators=(",", ":")) for r in totals]
        path, written = write_once(os.path.join(args.output, args.date), lines) if lines else (None, False)
        summary = {"date": args.date, "input_records": sum(int(r["orders"]) for r in totals),
                   "customers": len(lines), "file": path, "written": written,
                   "seconds": round(time.monotonic() - t0, 2)}
        print(f"{SUMMARY_PREFIX} {json.dumps(summary)}", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
