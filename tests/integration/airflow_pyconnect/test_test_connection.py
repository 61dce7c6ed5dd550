"""The connection's Test (``PyConnectHook.test_connection``) against a Kafka address nothing listens on: it fails,
naming the servers and the bound it waited, and returns (the UI's Test button must not hang the API server)."""

from __future__ import annotations

import json

import pytest

from airflow_pyconnect.hooks.pyconnect import PyConnectHook
from tests.support.ports import free_port


@pytest.mark.timeout(120)
def test_a_dead_kafka_address_fails_the_test_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("AIRFLOW_CONN_PC_DEAD", json.dumps({"conn_type": "pyconnect", "host": f"kafka://127.0.0.1:{port}"}))
    ok, message = PyConnectHook("pc_dead").test_connection()
    assert not ok, message
    assert f"127.0.0.1:{port} could not be reached" in message and "within" in message, message
