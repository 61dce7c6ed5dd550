"""The backfill pattern of ``dags/example_pyconnect_backfill.py`` under real Airflow: three daily
intervals, then one cleared and run again. Every record is in the topic exactly once, the rerun
writes nothing and returns the ranges its interval committed the first time, and the archive sink
holds every record once.

A scheduler-driven ``airflow backfill create`` needs a scheduler, a DAG processor and an API server
running; the same intervals run here through ``airflow dags test <logical date>`` (the scheduler's
task path, in one process), and the rerun through ``airflow tasks clear`` + ``airflow dags test``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.unit.airflow_pyconnect.airflow_env import AirflowEnv, conn_env, shared_airflow_env

pytestmark = pytest.mark.airflow

DAG_ID = "example_pyconnect_backfill"
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
COMMITTED = re.compile(r"Source connector backfill-orders committed (\d+) records .*?; ranges (\{.*?\}\}) ")


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def _topic_values(url: str, topic: str) -> list[dict]:
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    values = []
    with open_backend(url) as be:
        for p in range(be.list_topics()[topic]):
            tp = TopicPartition(topic, p)
            values += [json.loads(r.value) for r in be.read_range(tp, 0, 1 << 62)]
    return values


def _run_day(af: AirflowEnv, day: str, env: dict[str, str]) -> tuple[int, dict]:
    out = af.airflow("dags", "test", DAG_ID, day, extra_env=env)
    found = COMMITTED.findall(out.stdout + out.stderr)
    assert len(found) == 1, (out.stdout + out.stderr)[-5000:]
    return int(found[0][0]), json.loads(found[0][1])


def test_three_intervals_then_a_cleared_rerun_leave_every_record_once(af: AirflowEnv, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'backfill.db'}"
    data = tmp_path / "data"
    env = {**conn_env("pyconnect_default", url), "PYCONNECT_EXAMPLE_DIR": str(data)}

    first = {day: _run_day(af, day, env) for day in DAYS}
    assert [n for n, _ in first.values()] == [50, 50, 50]
    assert [r["backfill-orders"]["0"] for _, r in first.values()] == [[0, 50], [50, 100], [100, 150]]

    af.airflow("tasks", "clear", DAG_ID, "-s", DAYS[1], "-e", DAYS[1], "-y", extra_env=env)
    records, ranges = _run_day(af, DAYS[1], env)
    assert records == 0, "the rerun of a finished interval wrote records"
    assert ranges == first[DAYS[1]][1], "the rerun must return the ranges its interval committed before"

    values = _topic_values(url, "backfill-orders")
    ids = [v["order_id"] for v in values]
    assert len(ids) == 150 and len(set(ids)) == 150
    assert sorted(ids) == sorted(f"{d}-{i:04d}" for d in DAYS for i in range(50))

    archived = (data / "archive" / "backfill-orders" / "partition=0" / "backfill-orders-0.jsonl").read_text()
    archived_ids = [json.loads(line)["order_id"] for line in archived.splitlines()]
    assert sorted(archived_ids) == sorted(ids)
