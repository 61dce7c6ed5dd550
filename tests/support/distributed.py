"""The distributed deployment (``scripts/deploy/``) as a module-scoped pytest fixture, for tests that need Airflow
on Celery with two workers, three Kafka brokers, moto S3, PostgreSQL and a Spark cluster.

A test module opts in with ``from tests.support.distributed import deployment  # noqa: F401`` and takes
``deployment`` (a :class:`deploy.Deployment`): one deployment per module, stopped after its last test, also
after a failure. Starting it takes minutes on two cores: share it within a module (the distributed example and the
faults across machines share one, tests/integration/test_distributed_faults.py), adding DAGs with :func:`add_dag`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CONCURRENCY", "HEARTBEAT_TIMEOUT_S", "RECORDS_PER_DAY", "REPO", "add_dag", "deploy_module", "deployment"]

REPO = Path(__file__).resolve().parents[2]
RECORDS_PER_DAY = 1500
"""Records per day of the example DAG on the shared deployment: enough for two connector tasks and four
partitions each to carry records, few enough to keep the slow suite short."""
CONCURRENCY = 1
"""Task slots per Celery worker: one, so that two tasks running at once run on two workers (the faults' tests lose
the worker of one of them) and a lost worker's retry can only run on the other."""
HEARTBEAT_TIMEOUT_S = 20
"""``[scheduler] task_instance_heartbeat_timeout`` of the deployment (Airflow's default: 300 s): how long a task
instance whose supervisor stopped heart-beating (a lost worker) stays ``running`` before the scheduler fails it."""


def deploy_module(name: str = "deploy") -> Any:
    """The ``deploy`` package of ``scripts/`` or one of its modules (``"deploy.example"``), imported the way
    scripts/run_example.py imports it."""
    if str(REPO / "scripts") not in sys.path:
        sys.path.insert(0, str(REPO / "scripts"))
    return importlib.import_module(name)


def add_dag(d: Any, name: str, source: str) -> Path:
    """Write DAG file ``<name>.py`` (``source``) into the deployment's DAGs folder, whole at once (the DAG processor
    lists the folder every 5 s and never reads half a file); returns its path."""
    path = Path(d.airflow.env["AIRFLOW__CORE__DAGS_FOLDER"]) / f"{name}.py"
    partial = path.with_name(f".{name}.py.partial")
    partial.write_text(source)
    os.replace(partial, path)
    return path


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running :func:`deploy.distributed` whose DAGs folder holds the repository's DAGs (symbolic links: they
    find ``dags/jobs`` as in the checkout) and whatever a test adds with :func:`add_dag`; the DAG
    ``example_orders_distributed`` reads ``pyconnect_distributed_records`` (1500 records per day here). Workers
    of :data:`CONCURRENCY` slots, ``task_instance_heartbeat_timeout`` :data:`HEARTBEAT_TIMEOUT_S`."""
    deploy = deploy_module()
    base = tmp_path_factory.mktemp("distributed")
    dags = base / "dag-bundle"
    dags.mkdir()
    for entry in sorted((REPO / "dags").iterdir()):
        if entry.name != "__pycache__":
            (dags / entry.name).symlink_to(entry)
    with deploy.distributed(base, dags_folder=dags, concurrency=CONCURRENCY, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S,
                            env={"AIRFLOW_VAR_PYCONNECT_DISTRIBUTED_RECORDS": str(RECORDS_PER_DAY)}) as d:
        yield d
