"""The example DAG end to end: real Airflow 3 (`airflow dags test`), real Spark (local mode), the
embedded SQLite backend, in a temporary AIRFLOW_HOME.

Runs three days, checks the Parquet totals against totals computed straight from the input files
and that the archive holds every input order exactly once; then runs day two again and checks that
the topic, the Parquet rows and the archive did not change. About 2.5 minutes (spark-submit per day).

OpenLineage is on (the file transport, docs/lineage.md): every connector task's COMPLETE event names what it
read and wrote, with the schema, the output statistics of what it committed (its XCom) and the committed ranges;
the rerun's say row count 0; the Spark task passed its parent job information to spark-submit.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "example_orders_pipeline"
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
DAG_TEST_TIMEOUT_S = 420

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.timeout(1500)]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYSPARK", "PYCONNECT_EXAMPLE"))}
    # PATH without the virtualenv: the DAG's spark_env() must find spark-submit and the Python itself
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p) != Path(sys.executable).parent)
    env.update({
        "AIRFLOW_HOME": str(home / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",  # as tests/support/airflow_env.py: a busy CI machine
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
        "PYCONNECT_EXAMPLE_DATA": str(home / "data"),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(home / "lineage.jsonl"), "append": True}),
        # the listener gives up on an event after this many seconds (default 10): a busy CI machine needs more
        "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "120",
    })
    return env


def _airflow(env: dict[str, str], *args: str, log: Path, timeout: float) -> None:
    airflow = Path(sys.executable).with_name("airflow")
    with open(log, "w") as out:
        proc = subprocess.run([str(airflow), *args], env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"airflow {' '.join(args)} exited {proc.returncode}:\n" + "\n".join(
        text.splitlines()[-60:])
    if args[:2] == ("dags", "test"):
        assert "state=success" in text.replace(" ", "") or "DagRunState.SUCCESS" in text, (
            f"the DAG run of {args} did not succeed:\n" + "\n".join(text.splitlines()[-60:]))


def _expected_totals(data: Path, day: str) -> list[tuple[str, int, int, Decimal]]:
    acc: dict[str, list[Any]] = {}
    for f in sorted((data / "orders" / day).glob("*.jsonl")):
        for line in f.read_text().splitlines():
            o = json.loads(line)
            a = acc.setdefault(o["customer"], [0, 0, Decimal("0.00")])
            a[0] += 1
            a[1] += o["items"]
            a[2] += Decimal(str(o["amount"])).quantize(Decimal("0.01"))
    return sorted((c, n, i, s) for c, (n, i, s) in acc.items())


def _parquet(data: Path) -> dict[str, list[tuple[str, int, int, Decimal]]]:
    import pyarrow.parquet as pq

    out = {}
    for part in sorted((data / "out" / "orders_daily_totals").glob("date=*")):
        rows = pq.read_table(str(part)).to_pylist()
        out[part.name.split("=", 1)[1]] = sorted((r["customer"], r["orders"], r["items"], r["amount"]) for r in rows)
    return out


def _input_orders(data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted((data / "orders").glob("*/*.jsonl")) for line in f.read_text().splitlines()]


def _archive(data: Path) -> tuple[list[dict[str, Any]], str]:
    files = sorted((data / "archive" / "orders").glob("partition=*/*.jsonl"))
    blob = b"".join(f.read_bytes() for f in files)
    return [json.loads(line) for line in blob.splitlines() if line.strip()], hashlib.sha256(blob).hexdigest()


def _topic(home: Path) -> list[tuple[int, int, bytes | None]]:
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    with open_backend(f"sqlite:///{home / 'airflow' / 'pyconnect' / 'pyconnect.db'}") as backend:
        parts = backend.list_topics()["orders"]
        return [(r.partition, r.offset, r.value) for p in range(parts)
                for r in backend.read_range(TopicPartition("orders", p), 0, 1 << 62)]


def _run_ids(home: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(home / "airflow" / "airflow.db") as db:
        return [r[0] for r in db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id", (DAG_ID,))]


def _xcom(home: Path, run_id: str, task_id: str) -> dict[str, Any]:
    import sqlite3

    with sqlite3.connect(home / "airflow" / "airflow.db") as db:
        row = db.execute("SELECT value FROM xcom WHERE run_id = ? AND task_id = ? AND key = 'return_value'",
                         (run_id, task_id)).fetchone()
    assert row is not None, f"no XCom of {task_id} in {run_id}"
    value = json.loads(row[0])
    return json.loads(value) if isinstance(value, str) else value


def _check_lineage(home: Path, runs: list[str], rerun_log: str) -> None:
    """Each connector task's COMPLETE event of each DAG run (``runs``: run ids in order, the last a rerun that moved
    nothing): datasets by OpenLineage's naming, schema, output statistics equal to its XCom, the ranges facet."""
    data, store = home / "data", home / "airflow" / "pyconnect" / "pyconnect.db"
    topic = ("pyconnect+sqlite://" + str(store), "orders")
    lake_fields = [("order_id", "string"), ("customer", "string"), ("amount", "double"), ("items", "int64"),
                   ("ts", "string"), ("channel", "string")]
    expected = {  # task: (inputs, outputs, output schema)
        "ingest": ([("file", str(data / "orders"))], [topic], None),
        "lake": ([topic], [("file", str(data / "lake" / "topics" / "orders"))], lake_fields),
        "archive": ([topic], [("file", str(data / "archive" / "orders"))], None),
    }
    events = [json.loads(line) for line in (home / "lineage.jsonl").read_text().splitlines() if line.strip()]
    complete: dict[tuple[str, str], dict[str, Any]] = {}
    for e in events:
        job = e["job"]["name"]
        if e["eventType"] == "COMPLETE" and job.startswith(f"{DAG_ID}."):
            complete[(e["run"]["facets"]["airflow"]["dagRun"]["run_id"], job.split(".", 1)[1])] = e
    for n, run_id in enumerate(runs):
        rerun = n == len(runs) - 1
        for task_id, (inputs, outputs, fields) in expected.items():
            event = complete.get((run_id, task_id))
            assert event is not None, f"no COMPLETE event of {task_id} in {run_id}: {sorted(complete)}"
            xcom = _xcom(home, run_id, task_id)
            assert [(d["namespace"], d["name"]) for d in event["inputs"]] == inputs, (task_id, event["inputs"])
            (out,) = event["outputs"]
            assert (out["namespace"], out["name"]) == outputs[0], (task_id, out)
            stats = out["outputFacets"]["outputStatistics"]
            assert (stats["rowCount"], stats["size"]) == (xcom["records"], xcom["bytes"]), (task_id, run_id, stats)
            assert (stats["rowCount"] == 0) == rerun and (stats["size"] == 0) == rerun, (task_id, run_id, stats)
            got = [(f["name"], f["type"]) for f in out["facets"].get("schema", {}).get("fields", [])]
            assert got == (fields or []), (task_id, got)
            facet = event["run"]["facets"]["pyconnectRanges"]
            assert facet["_schemaURL"].endswith("PyConnectRangesRunFacet.json#/$defs/PyConnectRangesRunFacet")
            assert (facet["records"], facet["bytes"], facet["ranges"]) == (xcom["records"], xcom["bytes"],
                                                                          xcom["ranges"]), (task_id, facet)
            if task_id == "ingest":
                assert facet["intervalRanges"] == xcom["interval_ranges"] and facet["intervalRanges"]
    # the Spark task of the rerun handed OpenLineage's parent job, itself, to spark-submit (spark_submit_kwargs)
    totals = complete[(runs[-1], "totals")]
    assert f"spark.openlineage.parentRunId={totals['run']['runId']}" in rerun_log
    assert f"spark.openlineage.parentJobName={DAG_ID}.totals" in rerun_log


def test_example_pipeline_three_days_then_rerun_of_day_two(tmp_path: Path) -> None:
    home = tmp_path
    env = _env(home)
    (home / "airflow").mkdir()
    subprocess.run([sys.executable, str(REPO / "scripts" / "generate_sample_data.py"), "--out",
                    str(home / "data" / "orders"), "--days", "3"], check=True, timeout=60, capture_output=True)
    _airflow(env, "db", "migrate", log=home / "migrate.log", timeout=300)
    for day in DAYS:
        _airflow(env, "dags", "test", DAG_ID, day, log=home / f"{day}.log", timeout=DAG_TEST_TIMEOUT_S)

    data = home / "data"
    inputs = _input_orders(data)
    assert 900 < len(inputs) < 1200

    # Spark totals, per day, equal the totals computed straight from the files
    parquet = _parquet(data)
    assert sorted(parquet) == DAYS
    for day in DAYS:
        assert parquet[day] == _expected_totals(data, day), day

    # every input order is archived exactly once, in topic order, and the topic holds each once
    archived, archive_digest = _archive(data)
    assert sorted(o["order_id"] for o in archived) == sorted(o["order_id"] for o in inputs)
    assert len({o["order_id"] for o in archived}) == len(archived)
    topic = _topic(home)
    assert [json.loads(v)["order_id"] for _, _, v in topic] == [o["order_id"] for o in archived]

    # a rerun of day two changes nothing: topic, Parquet rows, archive bytes
    _airflow(env, "dags", "test", DAG_ID, DAYS[1], log=home / "rerun.log", timeout=DAG_TEST_TIMEOUT_S)
    assert _topic(home) == topic
    assert _parquet(data) == parquet
    assert _archive(data)[1] == archive_digest
    rerun_log = (home / "rerun.log").read_text(errors="replace")
    _check_lineage(home, _run_ids(home), rerun_log)
    # the rerun's Spark job read the same records again (the day's remembered ranges)
    decoder = json.JSONDecoder()
    summaries = [decoder.raw_decode(line.split("ORDERS_DAILY_TOTALS ", 1)[1])[0]
                 for line in rerun_log.splitlines() if "ORDERS_DAILY_TOTALS {" in line]
    day_two = sum(1 for o in inputs if o["order_id"].startswith(DAYS[1]))
    assert [(s["date"], s["input_records"], s["rows"]) for s in summaries] == [(DAYS[1], day_two, len(parquet[DAYS[1]]))]
