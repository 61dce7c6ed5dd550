"""Parallel backfill intervals: one connector, several data intervals running at the same time.

Each interval reads its own source partitions: ``DirectorySource`` keys a partition by the file's
path, and the ``pattern`` ``{{ ds }}/*.jsonl`` puts the interval's date in it. So intervals never
share a source partition, and the source operator gives each interval its own **task identity**
(``identity="{{ ds }}"``, the same key as the partitions): transactional ids
``<cluster>-<connector>-<day>-<task>``, generations counted per day. Intervals do not fence each other
and run at the same time (``max_active_runs=3`` for the catch-up; ``airflow backfill create`` runs up to
10 at once by default), while a retry or a rerun of one day still fences that day's previous attempt.

Why ``"{{ ds }}"`` and not :data:`~airflow_pyconnect.operators.source.INTERVAL_IDENTITY`: Airflow 3's
``schedule="@daily"`` is a ``CronTriggerTimetable`` whose runs have an empty data interval
(``data_interval_start == data_interval_end``), so the day is the logical date. ``INTERVAL_IDENTITY``
(``data_interval_start``/``data_interval_end``) needs a schedule with data intervals, e.g.
``CronDataIntervalTimetable("@daily", timezone="UTC")``, and then the partitions should be keyed by the
same instant (``"{{ data_interval_start | ds }}/*.jsonl"``: ``{{ ds }}`` is the logical date, which a
manual run such as ``airflow dags test <dag> 2026-01-02`` sets to the *end* of the day it covers). The
operator refuses ``INTERVAL_IDENTITY`` on ``"@daily"`` when the DAG file is parsed.

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

from airflow.sdk import DAG, task

from airflow_pyconnect.operators.source import PyConnectSourceOperator

DATA_DIR = os.environ.get("PYCONNECT_EXAMPLE_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), "pyconnect", "example_parallel"
)
TOPIC = "parallel-orders"
ORDERS_PER_DAY = 200

with DAG(
    dag_id="example_pyconnect_parallel_intervals",
    description="Data intervals of one connector ingesting at the same time, exactly once",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    end_date=datetime(2026, 1, 3),
    catchup=True,
    max_active_runs=3,
    tags=["pyconnect", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def land_orders(ds: str | None = None) -> str:
        """Stands in for the upstream system: drops the interval's file once (atomic rename)."""
        import json

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

    # [START howto_operator_pyconnect_source_identity]
    ingest = PyConnectSourceOperator(
        task_id="ingest",
        connector_config={
            "name": "parallel-orders",
            "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": os.path.join(DATA_DIR, "incoming"),
            "pattern": "{{ ds }}/*.jsonl",
            "format": "jsonl",
            "topic": TOPIC,
            "batch.size": "10",
            "transaction.boundary": "poll",
            "directory.scan.interval.ms": "0",
        },
        identity="{{ ds }}",  # one identity per day, the key of its partitions (see above)
        max_seconds=300,
        retries=2,
    )
    # [END howto_operator_pyconnect_source_identity]

    @task
    def check(result: dict[str, object], ds: str | None = None) -> int:
        """Reads exactly the interval's spans back: the interval's orders, each once, nothing else."""
        import json

        from airflow_pyconnect.hooks.pyconnect import PyConnectHook
        from connect_runtime import ranges
        from connect_runtime.api.records import TopicPartition

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
