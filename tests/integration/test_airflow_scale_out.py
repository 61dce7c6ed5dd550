"""Past one worker, under a real ``airflow standalone`` (scheduler, DAG processor, API server,
LocalExecutor): one Airflow home, three DAGs, checked together (Airflow starts once).

- ``example_pyconnect_parallel_intervals``: unpausing it queues exactly its three catch-up runs
  (``end_date``), which run at the same time (``max_active_runs=3``, one task identity per interval:
  no interval fences another); then one interval is cleared and rerun by the scheduler: it writes
  nothing, its ``check`` task reads back exactly its interval's spans again, and the topic holds
  every order exactly once.
- ``example_pyconnect_fanout`` (embedded SQLite) and a copy of it on Kafka (a Tansu broker): one
  planning task, three mapped task instances running at the same time, each with its own
  transactional producer, merged ranges downstream; every generated record exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.integration.test_airflow_backfill import _query
from tests.support.airflow_env import REPO, AirflowEnv, conn_env, stop_group
from tests.support.ports import free_port

pytestmark = pytest.mark.airflow

PARALLEL = "example_pyconnect_parallel_intervals"
FANOUT = "example_pyconnect_fanout"
FANOUT_KAFKA = "fanout_on_kafka"
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
BOUND_S = 300


def _ts(value: object) -> float:
    text = str(value).replace(" ", "T")
    return datetime.fromisoformat(text if "+" in text[10:] else text + "+00:00").timestamp()


def _overlapping(spans: list[tuple[object, object]]) -> int:
    """How many of the [start, end] spans overlap another one."""
    ts = [(_ts(a), _ts(b)) for a, b in spans]
    return sum(any(i != j and a < d and c < b for j, (c, d) in enumerate(ts)) for i, (a, b) in enumerate(ts))


def _wait(home: Path, what: str, sql: str, want: object, log: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + BOUND_S
    seen: object = None
    while time.monotonic() < deadline:
        seen = _query(home, sql) if (home / "airflow.db").exists() else None
        if seen == want:
            return
        assert proc.poll() is None, "airflow standalone exited:\n" + log.read_text(errors="replace")[-3000:]
        failed = _query(home, "SELECT dag_id, task_id, map_index, run_id FROM task_instance WHERE state = 'failed'") \
            if (home / "airflow.db").exists() else []
        assert not failed, f"failed task instances while waiting for {what}: {failed}"
        time.sleep(1)
    raise AssertionError(f"waited {BOUND_S} s for {what}: want {want}, last saw {seen}\n"
                         + log.read_text(errors="replace")[-3000:])


def _values(url: str, topic: str, ranges: dict | None = None) -> list[dict]:
    from connect_runtime import ranges as ranges_mod
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    out = []
    with open_backend(url) as be:
        if ranges is None:
            parts = {topic: {p: [(0, 1 << 62)] for p in range(be.list_topics()[topic])}}
        else:
            parts = ranges_mod.parse(ranges)
        for t, spans_by_p in parts.items():
            for p, spans in spans_by_p.items():
                for first, nxt in spans:
                    out += [json.loads(r.value) for r in be.read_range(TopicPartition(t, p), first, nxt)]
    return out


def test_parallel_intervals_and_fan_out_on_local_executor(tmp_path: Path, kafka_url: str) -> None:
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    for name in (PARALLEL, FANOUT):
        (home / "dags" / f"{name}.py").write_bytes((REPO / "dags" / f"{name}.py").read_bytes())
    kafka_dag = (REPO / "dags" / f"{FANOUT}.py").read_text()
    kafka_dag = kafka_dag.replace(f'dag_id="{FANOUT}"', f'dag_id="{FANOUT_KAFKA}"').replace(
        "max_seconds=300,", 'max_seconds=300, pyconnect_conn_id="pyconnect_kafka",')
    assert "pyconnect_kafka" in kafka_dag
    (home / "dags" / f"{FANOUT_KAFKA}.py").write_text(kafka_dag)
    af = AirflowEnv(home)
    port = free_port()
    url = f"sqlite:///{tmp_path / 'pc.db'}"
    env = {
        **conn_env("pyconnect_default", url),
        **conn_env("pyconnect_kafka", kafka_url),
        "PYCONNECT_EXAMPLE_DIR": str(tmp_path / "data"),
        "AIRFLOW_VAR_PYCONNECT_FANOUT_POLL_DELAY_MS": "150",  # each mapped task polls for about 1.5 s
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__CORE__PARALLELISM": "8",
    }
    af.airflow("db", "migrate", extra_env=env, timeout=180)
    log = tmp_path / "standalone.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(Path(af.env()["PATH"].split(os.pathsep)[0]) / "airflow"), "standalone"],
                                env=af.env(env), stdout=out, stderr=subprocess.STDOUT, cwd=home,
                                start_new_session=True)
    try:
        _wait(home, "the DAG processor to store the DAGs", "SELECT count(*) FROM dag", [(3,)], log, proc)
        af.airflow("dags", "unpause", PARALLEL, extra_env=env)
        for dag_id in (FANOUT, FANOUT_KAFKA):
            af.airflow("dags", "unpause", dag_id, extra_env=env)
            af.airflow("dags", "trigger", dag_id, extra_env=env)
        _wait(home, "the three catch-up runs and both fan-out runs",
              "SELECT dag_id, count(*) FROM dag_run WHERE state = 'success' GROUP BY dag_id ORDER BY dag_id",
              sorted([(PARALLEL, 3), (FANOUT, 1), (FANOUT_KAFKA, 1)]), log, proc)

        # the intervals ran at the same time; no other catch-up run was queued
        runs = _query(home, "SELECT start_date, end_date FROM dag_run WHERE dag_id = ?", PARALLEL)
        assert len(runs) == 3 and _overlapping(runs) >= 2, runs

        af.airflow("tasks", "clear", PARALLEL, "-s", DAYS[1], "-e", DAYS[1], "-y", extra_env=env)
        _wait(home, "the scheduler to rerun the cleared interval",
              f"SELECT task_id, state FROM task_instance WHERE dag_id = '{PARALLEL}' "
              f"AND run_id LIKE 'scheduled__{DAYS[1]}%' AND try_number >= 2 ORDER BY task_id",
              [("check", "success"), ("ingest", "success"), ("land_orders", "success")], log, proc)
    finally:
        stop_group(proc, grace=10, settle=3)

    # parallel intervals: each order exactly once; the rerun wrote nothing and still knew its ranges
    ids = [v["order_id"] for v in _values(url, "parallel-orders")]
    assert sorted(ids) == sorted(f"{d}-{i:04d}" for d in DAYS for i in range(200))
    xcoms = dict(_query(home, "SELECT r.run_id, x.value FROM xcom x JOIN dag_run r ON r.id = x.dag_run_id "
                              "WHERE x.dag_id = ? AND x.task_id = 'ingest' AND x.key = 'return_value'", PARALLEL))
    rerun = json.loads(xcoms[next(k for k in xcoms if DAYS[1] in k)])
    rerun = json.loads(rerun) if isinstance(rerun, str) else rerun
    assert rerun["records"] == 0 and rerun["ranges"] == {} and rerun["interval_records"] >= 200
    assert sorted(v["order_id"] for v in _values(url, "parallel-orders", rerun["interval_ranges"])) == \
        [f"{DAYS[1]}-{i:04d}" for i in range(200)]
    events = _query(home, "SELECT count(*) FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.uri = ?",
                    "pyconnect://pyconnect_default/parallel-orders")
    assert events == [(3,)], "one asset event per interval; none for the rerun that wrote nothing"

    # fan-out: three mapped instances that overlapped in time, every record once, merged downstream
    for dag_id, backend in ((FANOUT, url), (FANOUT_KAFKA, kafka_url)):
        mapped = _query(home, "SELECT map_index, start_date, end_date FROM task_instance WHERE dag_id = ? "
                              "AND task_id = 'generate' AND state = 'success' ORDER BY map_index", dag_id)
        assert [m for m, _, _ in mapped] == [0, 1, 2], mapped
        assert _overlapping([(a, b) for _, a, b in mapped]) >= 2, (dag_id, mapped)
        merged = json.loads(_query(home, "SELECT value FROM xcom WHERE dag_id = ? AND task_id = 'generate_merge' "
                                         "AND key = 'return_value'", dag_id)[0][0])
        merged = json.loads(merged) if isinstance(merged, str) else merged
        assert merged["tasks"] == 3 and merged["records"] == 3000, merged
        got = sorted(v["id"] for v in _values(backend, "fanout-events", merged["interval_ranges"]))
        assert got == list(range(3000)), (dag_id, len(got), len(set(got)))
