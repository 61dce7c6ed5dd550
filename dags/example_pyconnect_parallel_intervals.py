"""Parallel backfill intervals: one connector, several data intervals running at the same time.

Each interval reads its own source partitions: ``DirectorySource`` keys a partition by the file's
path, and the ``pattern`` ``{{ data_interval_start | ds }}/*.jsonl`` puts the interval's day in it. So
intervals never share a source partition, and the source operator gives each interval its own **task
identity** (``identity=INTERVAL_IDENTITY``): transactional ids ``<cluster>-<connector>-<interval>-<task>``,
generations counted per interval. Intervals do not fence each other (``max_active_runs=3``, and
``airflow backfill create`` runs them at the same time too), while a retry or a rerun of one interval
still fences that interval's previous attempt.

The schedule has data intervals (``CronDataIntervalTimetable``: each run covers one day): Airflow 3's
plain ``"@daily"`` gives every run an empty interval, and a task using ``INTERVAL_IDENTITY`` refuses it
when the file is parsed. The partitions are keyed by ``data_interval_start``, the same instant the
identity names (``{{ ds }}`` is the logical date, which differs from it for a manual run:
``airflow dags test example_pyconnect_parallel_intervals 2026-01-02`` covers the day 2026-01-01).

The intervals' records interleave in the topic; each interval's ``interval_ranges`` lists exactly
its own records (exact spans, see :mod:`connect_runtime.ranges`). ``check`` reads back exactly those
spans and fails unless they hold the interval's orders, each once.

Catch-up is bounded (``end_date``): unpausing the DAG queues the three sample days, no more. Data
lives under ``$PYCONNECT_EXAMPLE_DIR`` (default ``$AIRFLOW_HOME/pyconnect/example_parallel``); the
topic ``parallel-orders`` on the backend of ``pyconnect_default``.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_pyconnect.operators.source import INTERVAL_IDENTITY, PyConnectSourceOperator

DATA_DIR = os.environ.get("PYCONNECT_EXAMPLE_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), "pyconnect", "example_parallel"
)
TOPIC = "parallel-orders"
ORDERS_PER_DAY = 200

with DAG(
    dag_id="example_pyconnect_parallel_intervals",
    description="Data intervals of one connector ingesting at the same time, exactly once",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime(2026, 1, 1),
    end_date=datetime(2026, 1, 3),
    catchup=True,
    max_active_runs=3,
    tags=["pyconnect", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def land_orders(data_interval_start: Any = None) -> str:
        """Stands in for the upstream system: drops the interval's file once (atomic rename)."""
        import json

        ds = data_interval_start.strftime("%Y-%m-%d")
        day_dir = os.path.join(DATA_DIR, "incoming", str(ds))
        path = os.path.join(day_dir, "orders.jsonl")
        if not os.path.exists(path):
            os.makedirs(day_dir, exist_ok=True)
            tmp = os.path.join(day_dir, ".orders.jsonl.tmp")
            with open(tmp, "w") as f:
                for i in range(ORDERS_PER_DAY):
                    f.write(json.dumps({"order_id": f"{ds}-{i:04d}", "day": ds}) + "\n")
            os.replace(tmp, path)
        return path

    ingest = PyConnectSourceOperator(
        task_id="ingest",
        connector_config={
            "name": "parallel-orders",
            "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": os.path.join(DATA_DIR, "incoming"),
            "pattern": "{{ data_interval_start | ds }}/*.jsonl",
            "format": "jsonl",
            "topic": TOPIC,
            "batch.size": "10",
            "transaction.boundary": "poll",
            "directory.scan.interval.ms": "0",
        },
        identity=INTERVAL_IDENTITY,
        max_seconds=300,
        retries=2,
    )

    @task
    def check(result: dict[str, object], data_interval_start: Any = None) -> int:
        """Reads exactly the interval's spans back: the interval's orders, each once, nothing else."""
        import json

        from airflow_pyconnect.hooks.pyconnect import PyConnectHook
        from connect_runtime import ranges
        from connect_runtime.api.records import TopicPartition

        ds = data_interval_start.strftime("%Y-%m-%d")
        ids = []
        with PyConnectHook().get_conn() as backend:
            for topic, parts in ranges.parse(result["interval_ranges"]).items():  # type: ignore[arg-type]
                for p, spans in parts.items():
                    for first, nxt in spans:
                        ids += [json.loads(r.value)["order_id"]
                                for r in backend.read_range(TopicPartition(topic, p), first, nxt)]
        want = sorted(f"{ds}-{i:04d}" for i in range(ORDERS_PER_DAY))
        if sorted(ids) != want:
            raise ValueError(f"interval {ds}: its ranges hold {len(ids)} records ({len(set(ids))} distinct), "
                             f"expected its {ORDERS_PER_DAY} orders once each")
        return len(ids)

    land_orders() >> ingest
    check(ingest.output)
