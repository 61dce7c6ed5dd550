"""Event-driven: one DAG run for each batch of records committed to a topic, whoever committed them.

The pattern
-----------
An Asset with an ``AssetWatcher`` whose trigger is
:class:`~airflow_pyconnect.triggers.committed.CommittedRecordsTrigger`: the triggerer polls the store
of the ``pyconnect_default`` connection every 5 seconds, and each time records were committed to the
topic ``watched-orders`` (by a source operator in any DAG, ``pyconnect run`` on the command line,
another Airflow...) it fires one Asset event; the DAG is scheduled on the Asset, so each event makes a
DAG run. The event's ``extra["payload"]`` holds the committed ranges::

    {"topics": ["watched-orders"], "ranges": {"watched-orders": {"0": [120, 170]}},
     "records_upper_bound": 50, "watcher_group": "airflow-watch-watched-orders", ...}

``archive`` is a sink bounded by those ranges: ``committed_ranges(triggering_asset_events)`` merges the
ranges of every event of the run (the scheduler may put several events in one run), and the sink reads
from its own group's position up to each range's end. An event fired twice (the trigger delivers at
least once) or a run cleared and run again delivers nothing twice.

The watched Asset is not ``pyconnect_asset("watched-orders")``: a source operator in this Airflow
updates that Asset itself after each run, and a DAG scheduled on both would run twice for one batch.

Try it: unpause the DAG (a triggerer must run: ``airflow standalone`` starts one), then commit records
with a connector config ``gen.json`` of ``{"name": "watched-gen", "connector.class":
"connect_runtime.connectors.datagen.DataGenSource", "topic": "watched-orders", "max.records": 50}``::

    pyconnect --backend sqlite:///$AIRFLOW_HOME/pyconnect/pyconnect.db run gen.json

A DAG run starts within seconds, and its ``archive`` task writes those 50 records under
``$PYCONNECT_EXAMPLE_DIR/archive`` (default ``$AIRFLOW_HOME/pyconnect/example_asset_watch/archive``).
Run it again with ``"max.records": 80``: the next run archives the 30 new ones.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, Asset, AssetWatcher

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.triggers.committed import CommittedRecordsTrigger, committed_ranges

DATA_DIR = os.environ.get("PYCONNECT_EXAMPLE_DIR") or os.path.join(
    os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow"), "pyconnect", "example_asset_watch"
)
TOPIC = "watched-orders"

# [START howto_trigger_pyconnect_committed_records]
watched_orders = Asset(
    "example_pyconnect_watched_orders",
    watchers=[AssetWatcher(name="watched_orders_committed",
                           trigger=CommittedRecordsTrigger(topics=[TOPIC], poll_interval=5.0))],
)

with DAG(
    dag_id="example_pyconnect_asset_watch",
    description="A run per batch of records committed to a topic (AssetWatcher + CommittedRecordsTrigger)",
    schedule=[watched_orders],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    user_defined_macros={"committed_ranges": committed_ranges},
    tags=["pyconnect", "example"],
    doc_md=__doc__,
) as dag:
    archive = PyConnectSinkOperator(
        task_id="archive",
        connector_config={
            "name": "watched-orders-archive",
            "connector.class": "connect_runtime.connectors.files.FileSink",
            "topics": TOPIC,
            "directory": os.path.join(DATA_DIR, "archive"),
        },
        until_offsets="{{ committed_ranges(triggering_asset_events) | tojson }}",
        max_seconds=300,
        retries=2,
    )
# [END howto_trigger_pyconnect_committed_records]
