"""The example DAG end to end: real Airflow 3 (`airflow dags test`), real Spark (local mode), the
embedded SQLite backend, in a temporary AIRFLOW_HOME.

Runs three days, checks the Parquet totals against totals computed straight from the input files
and that the archive holds every input order exactly once; then runs day two again and checks that
the topic, the Parquet rows and the archive did not change. About 2.5 minutes (spark-submit per day).
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
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
        "PYCONNECT_EXAMPLE_DATA": str(home / "data"),
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
    # the rerun's Spark job read the same records again (the day's remembered ranges)
    decoder = json.JSONDecoder()
    summaries = [decoder.raw_decode(line.split("ORDERS_DAILY_TOTALS ", 1)[1])[0]
                 for line in rerun_log.splitlines() if "ORDERS_DAILY_TOTALS {" in line]
    day_two = sum(1 for o in inputs if o["order_id"].startswith(DAYS[1]))
    assert [(s["date"], s["input_records"], s["rows"]) for s in summaries] == [(DAYS[1], day_two, len(parquet[DAYS[1]]))]
