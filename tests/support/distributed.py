"""The distributed deployment (``scripts/deploy/``) as a module-scoped pytest fixture, for tests that need Airflow
on Celery with two workers, three Kafka brokers, moto S3, PostgreSQL and a Spark cluster.

A test module opts in with ``from tests.support.distributed import deployment, deployment_dags  # noqa: F401``
(or defines its own ``deployment_dags``) and takes ``deployment`` (a :class:`deploy.Deployment`): one deployment per module, stopped after its last test, also
after a failure. Starting it takes minutes on two cores: share it within a module (the distributed example and the
faults across machines share one, tests/integration/test_distributed_faults.py). A module's own DAGs: its
``deployment_dags`` fixture (in the DAGs folder from the start, parsed with the repository's).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CONCURRENCY", "HEARTBEAT_TIMEOUT_S", "RECORDS_PER_DAY", "REPO", "deploy_module", "deployment",
           "deployment_dags"]

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


@pytest.fixture(scope="module")
def deployment_dags() -> dict[str, str]:
    """DAG files ``{name: source}`` the module's deployment starts with beside the repository's: none here; a module
    overrides this fixture (the DAG processor then stores them in its first pass, no wait for a later listing)."""
    return {}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, deployment_dags: dict[str, str]) -> Iterator[Any]:
    """A running :func:`deploy.distributed` whose DAGs folder holds the repository's DAGs (symbolic links: they
    find ``dags/jobs`` as in the checkout) and the module's ``deployment_dags``; the DAG
    ``example_orders_distributed`` reads ``pyconnect_distributed_records`` (1500 records per day here). Workers
    of :data:`CONCURRENCY` slots, ``task_instance_heartbeat_timeout`` :data:`HEARTBEAT_TIMEOUT_S`."""
    deploy = deploy_module()
    base = tmp_path_factory.mktemp("distributed")
    dags = base / "dag-bundle"
    dags.mkdir()
    for entry in sorted((REPO / "dags").iterdir()):
        if entry.name != "__pycache__":
            (dags / entry.name).symlink_to(entry)
    for name, source in deployment_dags.items():
        (dags / f"{name}.py").write_text(source)
    with deploy.distributed(base, dags_folder=dags, concurrency=CONCURRENCY, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S,
                            env={"AIRFLOW_VAR_PYCONNECT_DISTRIBUTED_RECORDS": str(RECORDS_PER_DAY)}) as d:
        yield d
