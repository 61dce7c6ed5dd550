"""Fixtures of the contract suite: every test runs on every backend.

- ``backend_url``: parametrised over ``sqlite`` (a fresh file), ``kafka`` (the session's Apache Kafka broker,
  marked ``kafka``; tests use unique topic, store, group and connector names, see :func:`uid`) and ``tansu``
  (a fresh Tansu broker, a second Kafka-protocol implementation). A test that needs what Tansu does not do
  faithfully (read_committed filtering of aborted or fenced records, ListOffsets) opts out with
  ``@pytest.mark.not_on_tansu("why")``: it is skipped there with that reason.
- ``backend``: ``open_backend(backend_url)``, closed after the test; Tansu with :data:`TANSU_SETTINGS`.
- ``backend_kind``: the parameter's name, only for the few places where the suite must make a store
  unreachable or lose it (``test_lost_store``): everything else is written against the interface.

A backend added later gets a parameter here (and its way of being unreachable in ``test_lost_store``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connect_runtime.backends import Backend, open_backend

KINDS = ("sqlite", "kafka", "tansu")

TANSU_SETTINGS = {"group.offsets.in.transactions": False}
"""Tansu does not keep KIP-447's transactional group offsets faithfully (after an abort, the producer's later ones
never land; after a plain commit of the group, no transactional one does): its backend commits them after the fence."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "not_on_tansu(reason): the contract test needs what Tansu does not do faithfully (skipped there)")


@pytest.fixture(params=["sqlite", pytest.param("kafka", marks=pytest.mark.kafka), "tansu"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    kind = str(request.param)
    marker = request.node.get_closest_marker("not_on_tansu")
    if kind == "tansu" and marker is not None:
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
        pytest.skip(f"not on Tansu: {reason}")
    return kind


@pytest.fixture
def backend_url(backend_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend_kind == "sqlite":
        return f"sqlite:///{tmp_path / 'contract.db'}"
    if backend_kind == "kafka":
        return str(request.getfixturevalue("kafka_url"))
    return str(request.getfixturevalue("tansu_url"))


@pytest.fixture
def backend(backend_url: str, backend_kind: str) -> Iterator[Backend]:
    with open_backend(backend_url, TANSU_SETTINGS if backend_kind == "tansu" else None) as be:
        yield be
