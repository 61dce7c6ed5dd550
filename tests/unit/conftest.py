"""tests/unit stays fast: no subprocess, no Spark, no Airflow DAG run (those tests live in tests/integration).

An autouse fixture makes starting a process (``subprocess.Popen``, which ``subprocess.run`` and the CLI's
helpers use, and ``os.fork``, which ``multiprocessing`` uses) and ``DAG.test()`` raise, and fails a test that
imports ``pyspark``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

MOVE = "tests/unit is fast only: move this test to tests/integration"


def _refuse(what: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(f"{MOVE} (it {what})")

    return refused


@pytest.fixture(autouse=True)
def _fast_only(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("starts a subprocess"))
    monkeypatch.setattr(os, "fork", _refuse("forks a process"))
    if "airflow_pyconnect" in request.path.parts:  # connect_runtime's tests never import Airflow
        from airflow.sdk.definitions.dag import DAG

        monkeypatch.setattr(DAG, "test", _refuse("runs an Airflow DAG with dag.test()"))
    spark_before = "pyspark" in sys.modules  # the whole suite runs integration tests (Spark) first
    yield
    if not spark_before and "pyspark" in sys.modules:
        pytest.fail(f"{MOVE} (pyspark is imported, by it or by its module): {request.node.nodeid}",
                    pytrace=False)
