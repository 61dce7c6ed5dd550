"""read_lake: a source run's committed range read from the ParquetSink's files with ``spark.read.parquet``, exactly
the interval's records (real local SparkSession, real SQLite store, real sink runs, one per interval)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.lake import LakeRangeError
from connect_runtime.runtime.sink import run_sink

pytestmark = pytest.mark.spark
TOPIC = "orders"


@pytest.fixture(scope="module")
def spark(spark_session: object) -> object:
    return spark_session  # the one session of the process (tests/support/spark.py says why)

def test_read_lake_reads_exactly_each_interval(spark: object, sqlite_url: str, tmp_path: Path) -> None:
    from connect_runtime.spark import read_lake

    order = [{"order_id": f"o{i}", "customer": f"c{i % 3}", "amount": round(i * 1.25, 2), "items": i % 4 + 1}
             for i in range(90)]
    with open_backend(sqlite_url) as backend:
        backend.create_topics({TOPIC: 2})
        producer = backend.producer()
        producer.send([ProducerRecord(TOPIC, i % 2, None, json.dumps(o).encode()) for i, o in enumerate(order)])
        producer.flush(30)
        producer.close()
    root = f"file://{tmp_path / 'lake'}"
    config = {"name": "lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
              "path": root, "flush.size": "10",
              "parquet.schema": json.dumps({"amount": "double", "items": "int64"})}
    # two "days": a source result with its interval, then bare ranges; one bounded sink run per interval
    spans1, spans2 = {"0": [0, 25], "1": [0, 20]}, {"0": [25, 45], "1": [20, 45]}
    day1 = {"connector": "src", "records": 0, "ranges": {}, "interval_ranges": {TOPIC: spans1}}
    day2 = {TOPIC: spans2}
    for day in (day1, day2):
        run_sink(config, sqlite_url, until_offsets=day, max_seconds=60)

    def expected(spans: dict[str, list[int]]) -> list[tuple[str, float, int]]:
        rows = [order[2 * off + int(p)] for p, (a, b) in spans.items() for off in range(a, b)]
        return sorted((o["order_id"], o["amount"], o["items"]) for o in rows)

    for day, spans in ((day1, spans1), (day2, spans2)):
        df = read_lake(spark, root, day)
        got = sorted((r["order_id"], r["amount"], r["items"]) for r in df.collect())
        assert got == expected(spans)
        assert "FileScan parquet" in df._jdf.queryExecution().executedPlan().toString()

    schema = "order_id string, customer string, amount double, items long"
    totals = read_lake(spark, root, {TOPIC: {"0": [0, 45], "1": [0, 45]}}, schema=schema).agg(
        {"amount": "sum", "items": "sum"}).collect()[0]
    assert totals["sum(items)"] == sum(o["items"] for o in order)
    assert totals["sum(amount)"] == pytest.approx(sum(o["amount"] for o in order))
    empty = read_lake(spark, root, {TOPIC: {"0": [45, 45]}}, schema=schema)
    assert empty.count() == 0 and empty.columns == ["order_id", "customer", "amount", "items"]
    with pytest.raises(LakeRangeError, match=r"orders-0 \[5, 25\): the span starts inside"):
        read_lake(spark, root, {TOPIC: {"0": [5, 25]}})
