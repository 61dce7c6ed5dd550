"""The distributed example: ``dags/example_orders_distributed.py`` for three days on :func:`deploy.distributed`,
then a summary checked from the data (``scripts/run_example.py --distributed`` runs it).

The days are run the way a user runs them on a scheduler: the DAG is unpaused and its three days are triggered
with their logical dates (``airflow dags trigger --logical-date``). The summary names the worker (Airflow's ``hostname``) of every task instance and checks, from the
data and not from our own counters, that every record of the topic is exactly once in every sink: the Parquet lake
on S3, the ``orders`` table in PostgreSQL, and the Spark totals (computed on the Spark cluster) equal to totals
computed here from the topic.
"""

from __future__ import annotations

import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from . import Deployment
from .airflow_celery import task_states, wait_dag_runs

__all__ = ["DAG_ID", "DAYS", "main", "prepare", "print_summary", "run_days", "summary"]

DAG_ID = "example_orders_distributed"
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")
TOPIC = "orders"
PARTITIONS = 4


def prepare(d: Deployment, timeout_s: float = 180) -> None:
    """The topic (RF 3, ``min.insync.replicas=2``, 4 partitions; the warehouse sink creates its table); wait until
    the DAG processor stored the DAG."""
    from confluent_kafka.admin import NewTopic

    futures = d.kafka.admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])
    for fut in futures.values():
        fut.result(60)
    deadline = time.monotonic() + timeout_s
    while not d.airflow.query("SELECT 1 FROM dag WHERE dag_id = %s", DAG_ID):
        d.airflow.check_alive()
        if time.monotonic() > deadline:
            errors = d.airflow.query("SELECT filename, stacktrace FROM import_error")
            raise TimeoutError(f"waited {timeout_s:.0f} s for the DAG processor to store {DAG_ID}: {errors}")
        time.sleep(1)


def run_days(d: Deployment, timeout_s: float = 1200) -> list[tuple[Any, ...]]:
    """Unpause the DAG and trigger its three days with their logical dates, as a user would (the deployment runs
    no cron schedule: ``[scheduler] use_job_schedule`` is off); the scheduler runs them one at a time on the Celery
    workers. Wait for them with a bound."""
    d.airflow.airflow("dags", "unpause", DAG_ID)
    for day in DAYS:
        d.airflow.airflow("dags", "trigger", DAG_ID, "--logical-date", f"{day}T00:00:00+00:00")
    return wait_dag_runs(d.airflow, DAG_ID, len(DAYS), timeout_s)


def _topic_records(d: Deployment) -> list[dict[str, Any]]:
    """Every committed record of the topic (``read_committed``), as values."""
    import orjson
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": d.kafka.bootstrap, "group.id": "summary", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        values: list[dict[str, Any]] = []
        done: set[int] = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 120
        while len(done) < PARTITIONS:
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited 120 s to read {TOPIC} to its ends {ends}")
            for msg in consumer.consume(10000, 1.0):
                if msg.error():
                    continue
                values.append(orjson.loads(msg.value()))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
            for p in range(PARTITIONS):  # a partition ending in a transaction marker
                if p not in done and consumer.position([TopicPartition(TOPIC, p)])[0].offset >= ends[p]:
                    done.add(p)
        return values
    finally:
        consumer.close()


def _lake_rows(d: Deployment) -> list[tuple[str, int]]:
    import pyarrow.dataset as ds
    import s3fs

    fs = s3fs.S3FileSystem(**d.storage_options)
    files = [f for f in fs.find(d.lake_url.removeprefix("s3://")) if f.endswith(".parquet")]
    if not files:
        return []
    table = ds.dataset(files, format="parquet", filesystem=fs).to_table(columns=["day", "id"])
    return list(zip(table.column("day").to_pylist(), table.column("id").to_pylist(), strict=True))


def _warehouse(d: Deployment, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(d.warehouse_url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=30) as c:
        return list(c.execute(sql).fetchall())


def summary(d: Deployment, records_per_day: int) -> dict[str, Any]:
    """What ran where, and each sink checked against the topic; ``ok`` is true when every check held."""
    tis = task_states(d.airflow, DAG_ID)
    records = _topic_records(d)
    in_topic = Counter((r["day"], int(r["id"])) for r in records)
    expected = Counter({(day, i): 1 for day in DAYS for i in range(records_per_day)})
    lake = Counter(_lake_rows(d))
    rows = Counter((str(day), int(i)) for day, i in _warehouse(d, "SELECT day, id FROM orders"))
    totals_here: dict[tuple[str, str], tuple[int, Decimal]] = {}
    for r in records:
        n, amount = totals_here.get((r["day"], r["customer"]), (0, Decimal(0)))
        totals_here[(r["day"], r["customer"])] = (n + 1, amount + Decimal(str(r["amount"])).quantize(Decimal("0.01")))
    spark_totals = {(str(day), str(c)): (int(n), Decimal(a)) for day, c, n, a in
                    _warehouse(d, "SELECT day, customer, orders, amount FROM orders_daily_totals")}
    apps = [a for a in d.spark.status().get("completedapps", []) if str(a.get("name", "")).startswith("orders_totals")]
    checks = {
        "topic: each record once": in_topic == expected,
        "lake (Parquet on S3): each record once": lake == expected,
        "warehouse (PostgreSQL): each record once": rows == expected,
        "totals (Spark on the cluster) equal the topic's": spark_totals == totals_here,
        "the Spark step ran on the cluster": len(apps) >= len(DAYS),
        "tasks ran on both workers": len({h for *_, h in tis if h}) >= 2,
    }
    return {
        "ok": all(checks.values()), "checks": checks,
        "counts": {"expected": sum(expected.values()), "topic": sum(in_topic.values()), "lake": sum(lake.values()),
                   "warehouse": sum(rows.values()),
                   "duplicates": {"topic": sum(v - 1 for v in in_topic.values() if v > 1),
                                  "lake": sum(v - 1 for v in lake.values() if v > 1),
                                  "warehouse": sum(v - 1 for v in rows.values() if v > 1)}},
        "tasks": [{"run": run_id, "task": task, "map_index": mi, "state": state, "try": tries, "host": host}
                  for run_id, task, mi, state, tries, host in tis],
        "spark_apps": [{"name": a.get("name"), "cores": a.get("cores"), "state": a.get("state")} for a in apps],
    }


def print_summary(result: dict[str, Any], out: Any = None) -> None:
    import sys

    out = out or sys.stdout
    print(f"{'run':<40} {'task':<14} {'map':>3} {'try':>3}  {'state':<8} host", file=out)
    for t in result["tasks"]:
        print(f"{t['run']:<40} {t['task']:<14} {t['map_index']:>3} {t['try']:>3}  {t['state']:<8} {t['host']}",
              file=out)
    print(f"records: {result['counts']}", file=out)
    print(f"Spark applications on the cluster: {len(result['spark_apps'])}", file=out)
    for name, held in result["checks"].items():
        print(f"  [{'OK' if held else 'FAILED'}] {name}", file=out)


def main(base: Path, records_per_day: int, *, timeout_s: float = 1500, out: Any = None) -> dict[str, Any]:
    """Start the deployment under ``base``, run the three days, print and return the summary; everything is
    stopped on return, on an error and on Ctrl-C (SIGTERM is turned into the same interrupt)."""
    import signal
    import sys

    from . import REPO, distributed

    out = out or sys.stdout

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    t0 = time.monotonic()
    try:
        with distributed(base, dags_folder=REPO / "dags",
                         env={"AIRFLOW_VAR_PYCONNECT_DISTRIBUTED_RECORDS": str(records_per_day)}) as d:
            print(f"  deployment up (Redis, PostgreSQL, 3 Kafka brokers, moto S3, Spark master + 2 workers, "
                  f"Airflow on Celery with 2 workers)  {time.monotonic() - t0:6.1f} s", file=out)
            print(f"  Airflow UI: {d.airflow.api_url}  Spark master: {d.spark.master_url}", file=out)
            prepare(d)
            t = time.monotonic()
            run_days(d, timeout_s)
            print(f"  three days run by the scheduler on the Celery workers  {time.monotonic() - t:6.1f} s\n",
                  file=out)
            result = summary(d, records_per_day)
            print_summary(result, out)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"\nrun_example --distributed: {'OK' if result['ok'] else 'FAILED'} in {time.monotonic() - t0:.1f} s "
          f"(everything stopped)", file=out)
    return result


