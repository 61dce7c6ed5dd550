"""Scheduled backfills with exactly-once slices: one data interval = one set of source partitions.

The pattern
-----------
A daily DAG with ``catchup=True``. Each run ingests *its own* slice of the source: here the files an
upstream system dropped under ``<data dir>/<ds>/``. ``DirectorySource`` keys its source partitions
by file path relative to ``directory``, and the ``pattern`` ``{{ ds }}/*.jsonl`` makes that path
start with the interval's date, so every interval has its own source partitions (``{"file":
"2026-01-02/orders.jsonl"}``) and its own committed offsets.

What that buys:

- a **rerun** of a finished interval (clear, retry, a second backfill over the same dates) resumes
  each of its partitions at the committed offset, finds every file done, and writes **nothing**;
- an interrupted interval resumes where its last transaction committed: no duplicate, no loss;
- the rerun still knows the ranges its interval committed before: the runtime records them per
  task and data interval in the same transaction as each commit (``interval_ranges`` of the XCom,
  see :mod:`airflow_pyconnect.operators.source`), so the ``archive`` task downstream gets the same
  ``until_offsets=ingest.output`` on every rerun.

The same works for any source whose partitions can carry the interval, e.g. a ``DataGenSource``
configured per interval with ``"name": "gen-{{ ds_nodash }}"`` (its partitions are keyed by the
connector name), or an API source with ``{"day": "{{ ds }}"}`` in its partitions.

One interval at a time: all intervals share one connector name, so one transactional id per task;
two intervals running at the same time would fence each other (by design: it is the same task). The
catch-up has ``max_active_runs=1``, but ``airflow backfill create`` ignores it (it runs up to 10 DAG
runs at once unless given ``--max-active-runs``): so ``ingest`` (no ``identity``) and ``archive`` (a
sink) default to ``max_active_tis_per_dag=1``, and Airflow runs each of them one interval at a time
while the other days' instances wait in state *scheduled*. To run intervals in parallel, give each
its own task identity (``example_pyconnect_parallel_intervals``). ``end_date`` bounds the catch-up to
the three sample days: unpausing the DAG queues three runs, not one per day since 2026.

Run it: ``airflow backfill create --dag-id example_pyconnect_backfill --from-date 2026-01-01
--to-date 2026-01-03`` (with a scheduler and the DAG unpaused; every task instance succeeds on its
first try), or ``airflow dags test example_pyconnect_backfill 2026-01-02``. Data lives under ``$PYCONNECT_EXAMPLE_DIR`` (default
``$AIRFLOW_HOME/pyconnect/example_backfill``); the topic ``backfill-orders`` on the backend of the
``pyconnect_default`` connection (the embedded ``$AIRFLOW_HOME/pyconnect/pyconnect.db`` if it is
not defined).
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator

DATA_DIR = os.environ.get("PYCONNECT_EXAMPLE_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), "pyconnect", "example_backfill"
)
TOPIC = "backfill-orders"
ORDERS_PER_DAY = 50

with DAG(
    dag_id="example_pyconnect_backfill",
    description="Daily exactly-once ingestion with source partitions keyed by the data interval",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    end_date=datetime(2026, 1, 3),
    catchup=True,
    max_active_runs=1,
    tags=["pyconnect", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def land_orders(ds: str | None = None) -> str:
        """Stands in for the upstream system: drops the interval's file once (atomic rename), so
        every rerun finds the same bytes."""
        import json

        day_dir = os.path.join(DATA_DIR, "incoming", str(ds))
        path = os.path.join(day_dir, "orders.jsonl")
        if not os.path.exists(path):
            os.makedirs(day_dir, exist_ok=True)
            tmp = os.path.join(day_dir, ".orders.jsonl.tmp")
            with open(tmp, "w") as f:
                for i in range(ORDERS_PER_DAY):
                    f.write(json.dumps({"order_id": f"{ds}-{i:04d}", "day": ds, "amount": (i * 37) % 1000 / 10}) + "\n")
            os.replace(tmp, path)
        return path

    ingest = PyConnectSourceOperator(
        task_id="ingest",
        connector_config={
            "name": "backfill-orders",
            "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": os.path.join(DATA_DIR, "incoming"),
            "pattern": "{{ ds }}/*.jsonl",
            "format": "jsonl",
            "topic": TOPIC,
            "key.field": "order_id",
        },
        max_seconds=300,
        retries=2,
    )

    archive = PyConnectSinkOperator(
        task_id="archive",
        connector_config={
            "name": "backfill-orders-archive",
            "connector.class": "connect_runtime.connectors.files.FileSink",
            "topics": TOPIC,
            "directory": os.path.join(DATA_DIR, "archive"),
        },
        until_offsets=ingest.output,
        max_seconds=300,
        retries=2,
    )

    land_orders() >> ingest >> archive
