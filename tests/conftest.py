"""Shared fixtures. Tests use real SQLite files, real subprocesses, real Airflow and real Spark."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

pytest_plugins = [
    "tests.fixtures.kafka_broker", "tests.fixtures.kafka_cluster", "tests.fixtures.moto_server", "tests.fixtures.postgres",
]


def slow_iterations(default_ci: int, default_full: int) -> int:
    """Iterations of a slow reliability loop: PYCONNECT_SLOW_ITERATIONS wins; CI runs the bounded count."""
    env = os.environ.get("PYCONNECT_SLOW_ITERATIONS")
    if env:
        return int(env)
    return default_ci if os.environ.get("CI") else default_full


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh embedded backend in a temporary file."""
    return f"sqlite:///{tmp_path / 'pyconnect.db'}"
