"""Spark read of committed ranges with typed columns vs ``spark.read.schema(...).json(...)`` of the same records.

    .venv/bin/python bench/bench_spark_read.py --records 300000 1000000 --runs 3 [--query all] [--cold]

One SparkSession (``local[2]``), or with ``--cold`` a fresh process and session for every run (one query
each, timed from building the DataFrame: what one ``spark-submit`` per DAG run sees, JIT and Python
workers cold). Per size: N orders of about 60 bytes of JSON are committed to an
embedded (SQLite) store and written to a JSON-lines file. Each run computes ``count(*)`` and
``sum(amount)`` (``--query all``: also ``sum(items)``, ``max(order_id)`` and ``max(customer)``, so every
column is used) over

- ``json file``: ``spark.read.schema(SCHEMA).json(path)`` (what a Spark user gets by default);
- ``pyconnect, typed only``: ``spark.read.format("pyconnect")`` over the run's committed ranges with the
  ``schema`` option and ``metadata.columns=`` (the typed columns alone, what the file has);
- ``pyconnect, query columns``: the same with a ``schema`` of only the columns the query uses
  (``amount double``; every column for ``--query all``): what Spark's file source reads after pruning;
- ``pyconnect, typed + offset``: the same with ``metadata.columns=offset``;
- ``pyconnect, default columns``: the same with the default metadata columns (topic, partition, offset,
  key, timestamp, headers);
- ``pyconnect text + from_json``: the value as text (``metadata.columns=value``), parsed by Spark's
  ``from_json`` (the issue's starting point, then 0.24x);
- ``no-work source, schema`` / ``query cols``: a Python data source that reads nothing and parses nothing
  (it yields one prebuilt Arrow batch again and again): the floor of any Python data source here.

Runs alternate between the readers; records/s per run, then best and median, and the ratio of the
medians (pyconnect / json file). Results are checked equal across readers (the no-work source's: its
count only, as it repeats one batch). No timed asserts.

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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# Spark's Python workers import the no-work source by name (pickled by reference, as a real source is)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "bench"), os.environ.get("PYTHONPATH")) if p)

SCHEMA = "order_id string, customer string, amount double, items int"
TOPIC = "orders"
QUERY_SCHEMA = {"sum": "amount double", "all": SCHEMA}
"""The schema holding only the columns each query uses: what Spark's file source reads after pruning."""


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


def _session() -> Any:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("bench_spark_read")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from _no_work_source import NoWorkSource

    spark.dataSource.register(NoWorkSource)
    return spark


def _readers(spark: Any, url: str, ranges: dict[str, Any], path: Path, query: str, n: int
             ) -> dict[str, Callable[[], Any]]:
    from pyspark.sql import functions as F

    from connect_runtime.spark import read_ranges

    return {
        "json file": lambda: spark.read.schema(SCHEMA).json(str(path)),
        "pyconnect, typed only": lambda: read_ranges(spark, url, ranges, schema=SCHEMA, metadata_columns=""),
        "pyconnect, query columns": lambda: read_ranges(spark, url, ranges, schema=QUERY_SCHEMA[query],
                                                        metadata_columns=""),
        "pyconnect, typed + offset": lambda: read_ranges(spark, url, ranges, schema=SCHEMA, metadata_columns="offset"),
        "pyconnect, default columns": lambda: read_ranges(spark, url, ranges, schema=SCHEMA),
        # the starting point: the value as text, parsed by Spark's from_json
        "pyconnect text + from_json": lambda: read_ranges(spark, url, ranges, metadata_columns="value",
                                                          value_converter="string")
        .select(F.from_json("value", SCHEMA).alias("v")).select("v.*"),
        # the floor of any Python data source: no store, no parsing
        "no-work source, schema": lambda: spark.read.format("bench_no_work").option("n", n).option("schema", SCHEMA).load(),
        "no-work source, query cols": lambda: spark.read.format("bench_no_work").option("n", n)
        .option("schema", QUERY_SCHEMA[query]).load(),
    }


def _run(df: object, query: str = "sum") -> tuple[float, tuple[object, ...]]:
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("n"), F.sum("amount").alias("s")]
    if query == "all":
        aggs += [F.sum("items"), F.max("order_id"), F.max("customer")]
    t0 = time.perf_counter()
    row = df.agg(*aggs).collect()[0]  # type: ignore[attr-defined]
    return time.perf_counter() - t0, (int(row["n"]), round(float(row["s"]), 2), *row[2:])


def _child(name: str, url: str, ranges: str, path: str, query: str, n: int) -> int:
    """One cold run: a fresh SparkSession (as one spark-submit per DAG run has), the reader's DataFrame
    built and the query run once; prints the seconds from building the DataFrame to the result."""
    spark = _session()
    try:
        make = _readers(spark, url, json.loads(ranges), Path(path), query, n)[name]
        t0 = time.perf_counter()
        _seconds, result = _run(make(), query)
        print(json.dumps({"seconds": time.perf_counter() - t0, "result": result}))
    finally:
        spark.stop()
    return 0


def _report(n: int, runs: int, rates: dict[str, list[float]], what: str) -> None:
    base = statistics.median(rates["json file"])
    print(f"\n{n:,} records, {runs} runs, local[2]: {what}")
    for name, rs in rates.items():
        med = statistics.median(rs)
        print(f"  {name:28s} best {max(rs):>12,.0f} rec/s  median {med:>12,.0f} rec/s  ratio {med / base:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[300_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--query", choices=["sum", "all"], default="sum",
                        help="sum: count(*) and sum(amount) (the issue's query); all: every column used")
    parser.add_argument("--cold", action="store_true",
                        help="each run in a fresh process and SparkSession (one query each), as a DAG's spark-submit")
    parser.add_argument("--child", nargs=4, metavar=("READER", "URL", "RANGES", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if args.child:
        reader, url, ranges, path = args.child
        return _child(reader, url, ranges, path, args.query, args.records[0])
    what = "count(*) and sum(amount)" if args.query == "sum" else "count(*), sums and maxima of every column"
    spark = None if args.cold else _session()
    try:
        with tempfile.TemporaryDirectory(prefix="bench_spark_read_") as tmp:
            for n in args.records:
                values = _values(n)
                url = f"sqlite:///{tmp}/store-{n}.db"
                ranges = _fill(url, values)
                path = Path(tmp) / f"orders-{n}.jsonl"
                path.write_bytes(b"\n".join(values) + b"\n")
                del values
                names = list(_readers(None, url, ranges, path, args.query, n))
                rates: dict[str, list[float]] = {name: [] for name in names}
                results: dict[str, set[tuple[object, ...]]] = {name: set() for name in names}
                if spark is None:
                    for _ in range(args.runs):
                        for name in names:
                            out = subprocess.run(
                                [sys.executable, __file__, "--query", args.query, "--records", str(n), "--child", name, url,
                                 json.dumps(ranges), str(path)], capture_output=True, text=True, timeout=600)
                            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                            if out.returncode or not lines:
                                raise SystemExit(f"{name}: cold run failed (exit {out.returncode}): {out.stderr[-2000:]}")
                            done = json.loads(lines[-1])
                            rates[name].append(n / done["seconds"])
                            results[name].add(tuple(done["result"]))
                else:
                    readers = _readers(spark, url, ranges, path, args.query, n)
                    for make in readers.values():  # warm-up: Python workers, JIT of the JSON path
                        _run(make(), args.query)
                    for _ in range(args.runs):
                        for name, make in readers.items():
                            seconds, result = _run(make(), args.query)
                            rates[name].append(n / seconds)
                            results[name].add(result)
                real = {r for name, rs in results.items() if not name.startswith("no-work") for r in rs}
                counts = {r[0] for rs in results.values() for r in rs}  # the no-work source repeats its batch
                if len(real) != 1 or counts != {n}:
                    raise SystemExit(f"readers disagree: {results}")
                _report(n, args.runs, rates, what + (", cold (a fresh session per run)" if args.cold else ""))
    finally:
        if spark is not None:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
