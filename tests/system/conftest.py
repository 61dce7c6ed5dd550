"""The system tests' one ``dag.test()`` worker (see :mod:`tests.system.utils`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.airflow_env import shared_airflow_env
from tests.system.utils import DagTestWorker


@pytest.fixture(scope="session")
def _dag_test_worker_box() -> Iterator[list[DagTestWorker]]:
    box: list[DagTestWorker] = []
    yield box
    for worker in box:
        worker.close()


@pytest.fixture
def dag_test_worker(_dag_test_worker_box: list[DagTestWorker],
                    tmp_path_factory: pytest.TempPathFactory) -> DagTestWorker:
    """The session's worker, started on first use and again after one was stopped (a run that timed out)."""
    box = _dag_test_worker_box
    if not box or box[-1].proc.poll() is not None:
        af = shared_airflow_env(tmp_path_factory)
        box.append(DagTestWorker(af, tmp_path_factory.getbasetemp() / "dag_test_worker.log"))
    return box[-1]
