"""The lake path: ParquetSink throughput, and Spark reading a committed range from its files, against plain loops.

    .venv/bin/python bench/bench_spark_lake.py --records 300000 1000000 --runs 3 [--flush-size 100000]
        [--skip-read] [--cold] [--profile]

Per size, N orders of about 60 bytes of JSON are committed to an embedded (SQLite) store (one partition), and:

(b) **write**, runs alternating (who goes first too), records/s best and median, the ratio of the medians:

- ``ParquetSink``: ``run_sink`` with ``connect_runtime.connectors.lake.ParquetSink`` (``flush.size``, snappy,
  local files; JsonConverter) into a fresh directory: everything, from consumer poll to the published files;
- ``pyarrow loop``: a hand-written loop reading the same records from the store (``backend.read_range``),
  ``orjson.loads`` of each value (the parser the runtime's JsonConverter uses), ``pa.Table.from_pylist`` per ``flush.size`` records and ``pq.write_table`` to
  the same names: the same files, with no offsets bookkeeping (no footer metadata, no recovery, no atomic
  publication). Target: ParquetSink >= 0.9x.

(a) **read**, one warm SparkSession (``local[2]``), or with ``--cold`` a fresh process and SparkSession for every
run (what one ``spark-submit`` per DAG run sees: JVM, JIT and Python cold; timed from building the DataFrame),
``count(*)`` and ``sum(amount)``, each run starting with another reader:

- ``read_lake``: ``connect_runtime.spark.read_lake`` of the committed range (listing and footers included);
- ``parquet (pyarrow files)``: ``spark.read.parquet`` of the pyarrow loop's files (the physical limit).
  Target: read_lake >= 0.9x of it;
- ``json file``: ``spark.read.schema(SCHEMA).json(...)`` of the same records as JSON lines.

Results are checked equal across readers and both writers' files hold the same rows. No timed asserts; the
machine may be shared (the figures are same-run ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

from _profile import profiled  # noqa: E402

from connect_runtime.api import TopicPartition  # noqa: E402
from connect_runtime.backends import ProducerRecord, open_backend  # noqa: E402
from connect_runtime.runtime.sink import run_sink  # noqa: E402
from connect_runtime.runtime.sink.task import SinkWorkerTask  # noqa: E402

SCHEMA = "order_id string, customer string, amount double, items int"
TOPIC = "orders"
TARGET = 0.9


def _values(n: int) -> list[bytes]:
    return [json.dumps({"order_id": f"o-{i:07d}", "customer": f"c-{i % 97}", "amount": round((i % 1000) * 0.37, 2),
                        "items": i % 7 + 1}, separators=(",", ":")).encode() for i in range(n)]


def _fill(url: str, values: list[bytes]) -> dict[str, dict[str, list[int]]]:
    with open_backend(url) as backend:
        backend.create_topics({TOPIC: 1})
        producer = backend.producer()
        for lo in range(0, len(values), 10_000):
            producer.send([ProducerRecord(TOPIC, 0, None, v, 1_767_225_600_000 + lo + i)
                           for i, v in enumerate(values[lo:lo + 10_000])])
        producer.flush(60)
        producer.close()
    return {TOPIC: {"0": [0, len(values)]}}


def sink(url: str, root: Path, n: int, flush_size: int, run: int, profile: bool = False) -> float:
    """``run_sink`` with the ParquetSink into ``root`` (a fresh connector name: a fresh consumer group)."""
    config = {"name": f"bench-lake-{run}", "connector.class": "connect_runtime.connectors.lake.ParquetSink",
              "topics": TOPIC, "path": str(root), "flush.size": str(flush_size),
              "consumer.max.poll.records": "10000"}
    with profiled(SinkWorkerTask, "run", 25, enabled=profile):
        t0 = time.perf_counter()
        result = run_sink(config, url, until_offsets={TOPIC: {"0": n}}, max_seconds=600)
        seconds = time.perf_counter() - t0
    if result.records != n:
        raise SystemExit(f"run_sink delivered {result.records} records, expected {n}")
    return seconds


def pyarrow_loop(url: str, root: Path, n: int, flush_size: int) -> float:
    """The hand-written loop: read, parse, a table per flush.size records, one file each (the same names)."""
    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    out = root / "topics" / TOPIC / "partition=0"
    out.mkdir(parents=True, exist_ok=True)
    loads = orjson.loads
    with open_backend(url) as backend:
        rows: list[dict[str, Any]] = []
        start = 0
        for rec in backend.read_range(TopicPartition(TOPIC, 0), 0, n):
            rows.append(loads(rec.value))
            if len(rows) == flush_size:
                pq.write_table(pa.Table.from_pylist(rows), out / f"{TOPIC}+0+{start:010d}.parquet", compression="snappy")
                start += len(rows)
                rows = []
        if rows:
            pq.write_table(pa.Table.from_pylist(rows), out / f"{TOPIC}+0+{start:010d}.parquet", compression="snappy")
    return time.perf_counter() - t0


def _same_rows(a: Path, b: Path) -> bool:
    import pyarrow.parquet as pq

    def table(root: Path) -> Any:
        return pq.read_table(str(root / "topics" / TOPIC), columns=["order_id", "customer", "amount", "items"])

    return bool(table(a).equals(table(b)))


def _session() -> Any:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("bench_spark_lake")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _readers(spark: Any, lake: Path, plain: Path, jsonl: Path, ranges: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    from connect_runtime.spark import read_lake

    return {
        "json file": lambda: spark.read.schema(SCHEMA).json(str(jsonl)),
        "parquet (pyarrow files)": lambda: spark.read.parquet(str(plain / "topics" / TOPIC)),
        "read_lake": lambda: read_lake(spark, str(lake), ranges),
    }


def _query(make: Callable[[], Any]) -> tuple[float, tuple[int, float]]:
    from pyspark.sql import functions as F

    t0 = time.perf_counter()  # from building the DataFrame: read_lake's listing and footers count
    row = make().agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("s")).collect()[0]
    return time.perf_counter() - t0, (int(row["n"]), round(float(row["s"]), 2))


def _child(name: str, lake: str, plain: str, jsonl: str, ranges: str) -> int:
    """One cold read: a fresh SparkSession (as one spark-submit per DAG run has), the query run once; prints the
    seconds from building the DataFrame to the result."""
    spark = _session()
    try:
        seconds, result = _query(_readers(spark, Path(lake), Path(plain), Path(jsonl), json.loads(ranges))[name])
        print(json.dumps({"seconds": seconds, "result": result}))
    finally:
        spark.stop()
    return 0


def _cold_query(name: str, lake: Path, plain: Path, jsonl: Path, ranges: dict[str, Any]) -> tuple[float, tuple[int, float]]:
    out = subprocess.run([sys.executable, __file__, "--child", name, str(lake), str(plain), str(jsonl),
                          json.dumps(ranges)], capture_output=True, text=True, timeout=600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        raise SystemExit(f"{name}: cold run failed (exit {out.returncode}): {out.stderr[-2000:]}")
    done = json.loads(lines[-1])
    return done["seconds"], (int(done["result"][0]), float(done["result"][1]))


def _report(title: str, n: int, rates: dict[str, list[float]], base: str, targets: dict[str, str]) -> None:
    print(f"\n{n:,} records, {len(next(iter(rates.values())))} runs: {title}")
    ref = statistics.median(rates[base])
    for name, rs in rates.items():
        med = statistics.median(rs)
        print(f"  {name:26s} best {max(rs):>12,.0f} rec/s  median {med:>12,.0f} rec/s  ratio {med / ref:.2f}x")
    for name, against in targets.items():
        ratio = statistics.median(rates[name]) / statistics.median(rates[against])
        print(f"  {name} / {against}: {ratio:.2f}x (target >= {TARGET}x: {'OK' if ratio >= TARGET else 'BELOW TARGET'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[300_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--flush-size", type=int, default=100_000, help="records per file (both writers)")
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile of the sink task thread of the first ParquetSink run")
    parser.add_argument("--skip-read", action="store_true", help="only the write half (no Spark)")
    parser.add_argument("--cold", action="store_true",
                        help="each read in a fresh process and SparkSession, as a DAG's spark-submit")
    parser.add_argument("--child", nargs=5, metavar=("READER", "LAKE", "PLAIN", "JSONL", "RANGES"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if args.child:
        return _child(*args.child)
    read = not args.skip_read
    spark = _session() if read and not args.cold else None
    try:
        with tempfile.TemporaryDirectory(prefix="bench_spark_lake_") as tmp:
            for n in args.records:
                values = _values(n)
                url = f"sqlite:///{tmp}/store-{n}.db"
                ranges = _fill(url, values)
                jsonl = Path(tmp) / f"orders-{n}.jsonl"
                jsonl.write_bytes(b"\n".join(values) + b"\n")
                del values
                writes: dict[str, list[float]] = {"ParquetSink": [], "pyarrow loop": []}
                lake = plain = Path()
                for run in range(args.runs):
                    lake, plain = Path(tmp) / f"lake-{n}-{run}", Path(tmp) / f"plain-{n}-{run}"
                    order = ["ParquetSink", "pyarrow loop"][::-1 if run % 2 else 1]  # who goes first alternates
                    for name in order:
                        writes[name].append(n / (sink(url, lake, n, args.flush_size, run, args.profile and not run)
                                                 if name == "ParquetSink" else
                                                 pyarrow_loop(url, plain, n, args.flush_size)))
                    if run:  # keep the last run's files for the reads
                        shutil.rmtree(Path(tmp) / f"lake-{n}-{run - 1}")
                        shutil.rmtree(Path(tmp) / f"plain-{n}-{run - 1}")
                if not _same_rows(lake, plain):
                    raise SystemExit("ParquetSink's files and the pyarrow loop's hold different rows")
                _report(f"writing Parquet (flush.size {args.flush_size:,}, snappy, local files)", n, writes,
                        "pyarrow loop", {"ParquetSink": "pyarrow loop"})
                if not read:
                    continue
                readers = _readers(spark, lake, plain, jsonl, ranges)
                if spark is not None:
                    for make in readers.values():  # warm-up: JIT, file listing caches of both sides
                        _query(make)
                reads: dict[str, list[float]] = {name: [] for name in readers}
                results: set[tuple[int, float]] = set()
                names = list(readers)
                for run in range(args.runs):
                    for name in names[run % len(names):] + names[:run % len(names)]:  # each run starts elsewhere
                        seconds, result = (_query(readers[name]) if spark is not None
                                           else _cold_query(name, lake, plain, jsonl, ranges))
                        reads[name].append(n / seconds)
                        results.add(result)
                if len(results) != 1 or next(iter(results))[0] != n:
                    raise SystemExit(f"readers disagree: {results}")
                how = "cold: a fresh process and session per read" if spark is None else "warm session"
                _report(f"Spark local[2], count(*) and sum(amount), {how}", n, reads, "json file",
                        {"read_lake": "parquet (pyarrow files)"})
    finally:
        if spark is not None:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
