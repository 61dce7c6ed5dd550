"""The distributed deployment (``scripts/deploy/``) as a module-scoped pytest fixture, for tests that need Airflow
on Celery with two workers, three Kafka brokers, moto S3, PostgreSQL and a Spark cluster.

A test module opts in with ``from tests.support.distributed import deployment  # noqa: F401`` and takes
``deployment`` (a :class:`deploy.Deployment`): one deployment per module, stopped after its last test, also
after a failure. Starting it takes minutes on two cores: share it within a module.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["RECORDS_PER_DAY", "REPO", "deploy_module", "deployment"]

REPO = Path(__file__).resolve().parents[2]
RECORDS_PER_DAY = 1500
"""Records per day of the example DAG on the shared deployment: enough for two connector tasks and four
partitions each to carry records, few enough to keep the slow suite short."""


def deploy_module(name: str = "deploy") -> Any:
    """The ``deploy`` package of ``scripts/`` or one of its modules (``"deploy.example"``), imported the way
    scripts/run_example.py imports it."""
    if str(REPO / "scripts") not in sys.path:
        sys.path.insert(0, str(REPO / "scripts"))
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running :func:`deploy.distributed` with the repository's DAGs folder; the DAG
    ``example_orders_distributed`` reads ``pyconnect_distributed_records`` (1500 records per day here)."""
    deploy = deploy_module()
    base = tmp_path_factory.mktemp("distributed")
    with deploy.distributed(base, dags_folder=REPO / "dags",
                            env={"AIRFLOW_VAR_PYCONNECT_DISTRIBUTED_RECORDS": str(RECORDS_PER_DAY)}) as d:
        yield d
