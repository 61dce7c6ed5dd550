"""connect_runtime.spark.read_kafka_range: Spark's own Kafka source reads exactly a committed range.

Real Apache Kafka 4.4.0 (the session broker), real local SparkSession and a real ``spark-submit`` with the jars
``scripts/fetch_spark_kafka.sh`` fetched: a source run's range (transaction markers inside it) and a range that
holds another writer's aborted transaction, interleaved with the committed records, read back exactly (count
and values). The options themselves: tests/unit/connect_runtime/test_spark_kafka.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import ranges as ranges_mod
from connect_runtime import run_source
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.datagen import generate_value
from tests.support import REPO
from tests.support.kafka_broker import settled_end

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.faithful_kafka]


@pytest.fixture(scope="module")
def spark(spark_with_kafka: Any) -> Any:
    return spark_with_kafka  # the one session of the process, with the jars (tests/support/spark.py says why)

def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _source_run(kafka_url: str, records: int) -> dict[str, Any]:
    """A datagen source run on Kafka, 100 records per transaction (markers inside its range)."""
    topic = _name("spark-kafka")
    result = run_source({"name": _name("sk"), "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                         "topic": topic, "max.records": records, "batch.size": 100,
                         "topic.creation.default.partitions": 2}, kafka_url)
    assert result.records == records
    return result.to_dict()


def _ids_and_values(rows: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    values = [json.loads(bytes(r.value)) for r in rows]
    return sorted((v["id"], v) for v in values)


def test_a_source_runs_range_reads_back_exactly(spark: Any, kafka_url: str) -> None:
    from connect_runtime.spark import read_kafka_range

    result = _source_run(kafka_url, 1000)
    assert ranges_mod.count(result["ranges"]) > 1000  # the commit markers take offsets inside the range
    rows = read_kafka_range(spark, kafka_url, result).collect()
    assert len(rows) == 1000
    assert _ids_and_values(rows) == [(i, generate_value(0, i)) for i in range(1000)]
    empty = read_kafka_range(spark, kafka_url, {})  # a run that committed nothing: no read at all
    assert empty.count() == 0 and empty.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                    "timestampType"]


def test_with_a_schema_the_values_come_back_parsed_as_its_columns(spark: Any, kafka_url: str) -> None:
    """``schema=``: Spark's JSON reader over the range's values (the parse bench/bench_spark_kafka.py measures),
    exactly the range's records, the schema's columns only; an empty range has them too."""
    from connect_runtime.spark import read_kafka_range

    result = _source_run(kafka_url, 500)
    df = read_kafka_range(spark, kafka_url, result, schema="id long, ts long")
    assert df.columns == ["id", "ts"]
    assert sorted((r.id, r.ts) for r in df.collect()) == [(i, generate_value(0, i)["ts"]) for i in range(500)]
    empty = read_kafka_range(spark, kafka_url, {}, schema="id long, ts long")
    assert empty.count() == 0 and empty.columns == ["id", "ts"]


def test_another_writers_aborted_transaction_inside_the_range_is_not_read(spark: Any, kafka_url: str) -> None:
    """Writer A's transaction interleaves with writer B's, which aborts; A's range [first, end) holds B's records
    and both markers. Then a committed writer C between two spans of A: read span by span (a union)."""
    from connect_runtime.spark import read_kafka_range

    topic = _name("spark-kafka-aborted")

    def recs(tag: str, first: int, n: int) -> list[ProducerRecord]:
        return [ProducerRecord(topic, 0, None, json.dumps({"tag": tag, "n": i}).encode(), None, None)
                for i in range(first, first + n)]

    tp = (topic, 0)
    with open_backend(kafka_url) as backend:
        backend.create_topics({topic: 1})
        a, b, c = (backend.transactional_producer(_name(w)) for w in "abc")
        try:
            for p in (a, b, c):
                p.init_transactions(30)
            a.begin_transaction()
            b.begin_transaction()
            a.send(recs("a", 0, 10))
            a1 = a.flush(30).ranges[tp]  # a flush inside a transaction reports what it wrote since the last one
            b.send(recs("b-aborted", 0, 7))
            b.flush(30)
            a.send(recs("a", 10, 10))
            a.flush(30)
            b.abort_transaction(30)
            a.commit_transaction([], 30)
            c.begin_transaction()
            c.send(recs("c-other-writer", 0, 5))
            c1 = c.commit_transaction([], 30).ranges[tp]
            a.begin_transaction()
            a.send(recs("a", 20, 5))
            a2 = a.commit_transaction([], 30).ranges[tp]
        finally:
            for p in (a, b, c):
                p.close()
    end = settled_end(kafka_url, tp, a2[1] + 1)
    # Usually: A 0..9, B 10..16, A 17..26, B's abort marker 27, A's commit marker 28, C 29..33 + marker 34,
    # A 35..39 + marker 40. The markers land after EndTxn returns, so C may start before A's did: C's records then
    # precede A's marker, and C's producer, seeing the partition's last stable offset below its first record,
    # aborts its first copy once and sends it again (transactions.py, _HangingTransactions). So the spans come from
    # what each commit wrote: A's first span runs up to C's first record (B's records and both markers inside it)
    ranges = {topic: {"0": [[a1[0], c1[0]], [a2[0], end]]}}
    rows = read_kafka_range(spark, kafka_url, ranges).collect()
    values = [json.loads(bytes(r.value)) for r in rows]
    assert sorted(v["n"] for v in values) == list(range(25))
    assert {v["tag"] for v in values} == {"a"}
    whole = read_kafka_range(spark, kafka_url, {topic: {"0": [a1[0], end]}}).collect()
    assert sorted(json.loads(bytes(r.value))["tag"] for r in whole) == ["a"] * 25 + ["c-other-writer"] * 5


_APP = '''
import json, sys
from pyspark.sql import SparkSession
from connect_runtime.spark import read_kafka_range

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
spark = SparkSession.builder.appName("spark_kafka_job").getOrCreate()
rows = read_kafka_range(spark, args["--backend"], json.loads(args["--ranges"])).collect()
with open(args["--out"], "w") as f:
    json.dump(sorted(json.loads(bytes(r.value))["id"] for r in rows), f)
spark.stop()
'''


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("spark_kafka_jars")  # skip (fail in CI) when they were not fetched
def test_a_spark_submit_job_with_the_jars_reads_the_range(kafka_url: str, tmp_path: Path) -> None:
    from airflow_pyconnect.spark import spark_env, spark_kafka_jars

    jars = spark_kafka_jars()
    result = _source_run(kafka_url, 300)
    app, out = tmp_path / "job.py", tmp_path / "ids.json"
    app.write_text(_APP)
    env = {**os.environ, **spark_env(), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(["spark-submit", "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                           "--jars", jars, str(app), "--backend", kafka_url,
                           "--ranges", json.dumps(result["ranges"]), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text()) == list(range(300))
