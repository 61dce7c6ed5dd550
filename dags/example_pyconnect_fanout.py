"""Fan-out by dynamic task mapping: one connector, its tasks as parallel mapped task instances.

::

    generate_plan ─▶ generate [0..2] (mapped, one per connector task) ─▶ generate_merge ─▶ report

``fan_out_source`` (:mod:`airflow_pyconnect.operators.fanout`) plans the connector once
(``tasks.max`` = 3 ``DataGenSource`` tasks, a new generation), runs each task as a mapped task
instance with its own transactional producer, and merges their committed ranges for downstream
tasks (a sink's ``until_offsets``, a Spark job). On LocalExecutor the three instances run at the
same time (``[core] parallelism`` permitting); on Kafka (a ``pyconnect_default`` connection with a
``kafka://`` host) they may run on any worker. A retry of the plan task starts a new generation and
fences every instance of the old one; a retry of one mapped instance resumes its task's source
partition from its committed offset, so every record is written once.

Manual runs only (``schedule=None``): ``airflow dags test example_pyconnect_fanout`` or trigger it.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task

from airflow_pyconnect.operators.fanout import fan_out_source

TOPIC = "fanout-events"


@dag(dag_id="example_pyconnect_fanout", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
     tags=["pyconnect", "example"], doc_md=__doc__)
def example_pyconnect_fanout() -> None:
    # [START howto_operator_pyconnect_fan_out]
    merged = fan_out_source(
        "generate",
        {
            "name": "fanout-datagen",
            "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
            "topic": TOPIC,
            "tasks.max": "3",
            "max.records": "3000",
            "batch.size": "100",
            "poll.delay.ms": "{{ var.value.get('pyconnect_fanout_poll_delay_ms', '0') }}",
        },
        max_seconds=300,
        retries=1,
    )

    @task
    def report(result: dict[str, object]) -> dict[str, object]:
        """What the three tasks committed together."""
        print(f"{result['tasks']} tasks committed {result['records']} records: {result['interval_ranges']}")
        return result

    report(merged.output)
    # [END howto_operator_pyconnect_fan_out]


example_pyconnect_fanout()
