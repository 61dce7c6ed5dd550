"""Shared fixtures (the helpers live in tests/support). Tests use real SQLite files, processes, Airflow and Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = [
    "tests.support.kafka_broker", "tests.support.kafka_cluster", "tests.support.moto_server", "tests.support.postgres",
    "tests.support.schema_registry", "tests.support.spark",
]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh embedded backend in a temporary file."""
    return f"sqlite:///{tmp_path / 'pyconnect.db'}"
