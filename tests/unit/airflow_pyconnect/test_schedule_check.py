"""The schedule check's view of a timetable (``empty_runs``, public Airflow API only) agrees with Airflow's own
scheduler for every timetable Airflow ships, and a timetable of Airflow's it does not know is an error, never a
check switched off. (The DAG files, mapped tasks and DAGs assigned later: tests/integration/airflow_pyconnect/
test_schedules.py.)"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow.sdk import (
    DAG,
    Asset,
    CronDataIntervalTimetable,
    CronPartitionTimetable,
    CronTriggerTimetable,
    DeltaDataIntervalTimetable,
    DeltaTriggerTimetable,
    EventsTimetable,
    MultipleCronTriggerTimetable,
    PartitionedAssetTimetable,
)

from airflow_pyconnect.operators._base import empty_runs

START = datetime(2026, 1, 1)


def _samples() -> dict[str, Any]:
    from airflow.sdk.definitions.timetables.assets import AssetOrTimeSchedule, PartitionedAtRuntime
    from airflow.timetables.interval import CronDataIntervalTimetable as CoreCronDataInterval
    from airflow.timetables.trigger import CronTriggerTimetable as CoreCronTrigger

    schedules: dict[str, Any] = {
        "@daily": "@daily", "cron": "0 3 * * *", "None": None, "@once": "@once", "timedelta": timedelta(hours=6),
        "assets": [Asset("pyconnect://c/t")],
        "CronDataInterval": CronDataIntervalTimetable("@daily", timezone="UTC"),
        "DeltaDataInterval": DeltaDataIntervalTimetable(timedelta(hours=1)),
        "CronTrigger+interval": CronTriggerTimetable("@daily", timezone="UTC", interval=timedelta(days=1)),
        "DeltaTrigger": DeltaTriggerTimetable(timedelta(hours=1)),
        "DeltaTrigger+interval": DeltaTriggerTimetable(timedelta(hours=1), interval=timedelta(hours=1)),
        "MultipleCron": MultipleCronTriggerTimetable("0 1 * * *", "0 2 * * *", timezone="UTC"),
        "MultipleCron+interval": MultipleCronTriggerTimetable("0 1 * * *", timezone="UTC", interval=timedelta(hours=1)),
        "Events": EventsTimetable(event_dates=[datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 5, tzinfo=UTC)]),
        "CronPartition": CronPartitionTimetable("0 1 * * *", timezone="UTC"),
        "PartitionedAsset": PartitionedAssetTimetable(assets=Asset("pyconnect://c/p")),
        "PartitionedAtRuntime": PartitionedAtRuntime(),
        "AssetOrTime": AssetOrTimeSchedule(timetable=CronDataIntervalTimetable("@daily", timezone="UTC"),
                                           assets=[Asset("pyconnect://c/u")]),
        "AssetOrTrigger": AssetOrTimeSchedule(timetable=CronTriggerTimetable("@daily", timezone="UTC"),
                                              assets=[Asset("pyconnect://c/v")]),
        "core CronDataInterval": CoreCronDataInterval("@daily", timezone="UTC"),
        "core CronTrigger": CoreCronTrigger("@daily", timezone="UTC"),
    }
    timetables = {name: DAG(f"d{i}", schedule=s, start_date=START).timetable for i, (name, s) in enumerate(schedules.items())}
    timetables["@continuous"] = DAG("cont", schedule="@continuous", start_date=START, max_active_runs=1).timetable
    return timetables


def _airflows_answer(timetable: Any) -> bool:
    """Whether Airflow's own scheduler gives the first run (or, scheduling none, a manual run) an empty data
    interval: the timetable turned into the scheduler's (a private function: tests may use it)."""
    from airflow.serialization.encoders import coerce_to_core_timetable
    from airflow.timetables.base import TimeRestriction
    from pendulum import instance

    if isinstance(timetable, EventsTimetable):  # Airflow 3.3.2 cannot decode its own encoding of it (KeyError)
        from airflow.timetables.events import EventsTimetable as CoreEvents

        core: Any = CoreEvents(event_dates=list(timetable.event_dates))
    else:
        core = coerce_to_core_timetable(timetable)
    start = instance(START, tz="UTC")
    info = core.next_dagrun_info(last_automated_data_interval=None,
                                 restriction=TimeRestriction(earliest=start, latest=None, catchup=True)
                                 ) if core.can_be_scheduled else None
    interval = info.data_interval if info is not None else core.infer_manual_data_interval(run_after=start)
    return interval.start == interval.end


def test_the_check_agrees_with_airflows_scheduler_on_every_timetable_airflow_ships() -> None:
    from airflow.sdk.bases.timetable import BaseTimetable
    from airflow.sdk.definitions import timetables as package

    samples = _samples()
    for name, timetable in samples.items():
        assert (empty_runs(timetable, START) is not None) == _airflows_answer(timetable), name
    shipped = {cls for info in pkgutil.iter_modules(package.__path__)
               for _, cls in inspect.getmembers(importlib.import_module(f"{package.__name__}.{info.name}"), inspect.isclass)
               if issubclass(cls, BaseTimetable) and cls is not BaseTimetable and cls.__module__.startswith(package.__name__)}
    seen = {type(t) for t in samples.values()}
    assert shipped - seen == set(), "a timetable Airflow ships has no sample here: add it (and to empty_runs)"


def test_a_timetable_of_airflows_it_does_not_know_is_an_error_not_a_check_switched_off() -> None:
    from airflow.sdk.bases.timetable import BaseTimetable

    new = type("FutureTimetable", (BaseTimetable,), {"__module__": "airflow.sdk.definitions.timetables.future"})
    with pytest.raises(RuntimeError, match=r"does not know Airflow .*'s timetable airflow\.sdk\.definitions\."
                                           r"timetables\.future\.FutureTimetable.*upgrade airflow-pyconnect"):
        empty_runs(new(), START)
    mine = type("MyTimetable", (BaseTimetable,), {"__module__": "my_dags.timetables"})
    assert empty_runs(mine(), START) is None  # an author's own: the run-time check sees the real interval


FILES = {"name": "files", "connector.class": "connect_runtime.connectors.files.DirectorySource",
         "directory": "/tmp/in", "pattern": "*.jsonl", "topic": "t"}


def test_the_cluster_policy_checks_mapped_and_late_assigned_tasks_and_leaves_others_alone() -> None:
    """``airflow_pyconnect.policy.task_policy`` (what Airflow calls for each parsed task): a mapped task's
    ``partial`` and literal ``expand`` values and a task given its DAG after construction are checked, the error
    is a cluster policy violation naming the task; an XCom-fed ``expand`` and other operators pass."""
    from airflow.exceptions import AirflowClusterPolicyViolation
    from airflow.sdk import BaseOperator

    from airflow_pyconnect.operators.source import INTERVAL_IDENTITY, PyConnectSourceOperator
    from airflow_pyconnect.policy import task_policy

    with DAG("daily", schedule="@daily", start_date=START) as dag:
        mapped = PyConnectSourceOperator.partial(task_id="m", connector_config=FILES).expand(
            identity=["a", INTERVAL_IDENTITY])
        as_config = PyConnectSourceOperator.partial(task_id="c").expand(
            connector_config=[{**FILES, "pattern": "{{ data_interval_start | ds }}/*"}])
        fine = PyConnectSourceOperator.partial(task_id="f", connector_config=FILES).expand(identity=["a", "{{ ds }}"])
        other = BaseOperator(task_id="other")
        from_xcom = PyConnectSourceOperator.partial(task_id="x", connector_config=FILES).expand(identity=other.output)
    late = PyConnectSourceOperator(task_id="late", connector_config=FILES, identity=INTERVAL_IDENTITY)
    dag.add_task(late)
    for task, words in ((mapped, "Task 'm' of DAG 'daily': identity uses"),
                        (as_config, "Task 'c' of DAG 'daily': connector_config['pattern'] uses"),
                        (late, "Task 'late' of DAG 'daily': identity uses")):
        with pytest.raises(AirflowClusterPolicyViolation, match=re.escape(words)):
            task_policy(task)
    for task in (fine, other, from_xcom):
        task_policy(task)
