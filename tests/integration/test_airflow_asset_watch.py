"""Event-driven DAGs under a real ``airflow standalone`` (scheduler, DAG processor, triggerer, API server
on 127.0.0.1, LocalExecutor, PostgreSQL metadata): ``dags/example_pyconnect_asset_watch.py`` as shipped,
its Asset watched by ``CommittedRecordsTrigger`` in the triggerer.

Records committed into the store by a source run outside Airflow make exactly one Asset event and one
DAG run, whose triggering event carries the committed ranges; the run's sink delivers exactly those
records. Committing more makes the next run with the next ranges; nothing fires or lands twice.

The deferrable committed-offsets sensor, in the same setup: it defers, a triggerer process runs its
``CommittedOffsetsTrigger``, and a sink commit outside Airflow resumes it (``dags test`` runs triggers in its
own process: tests/integration/test_airflow_pipeline.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_airflow_overlap import (  # the harness of the other standalone tests
    _base_env,
    _excerpt,
    _query,
    _standalone,
    _wait_dags,
    metadata_db,  # noqa: F401 - a fixture
)
from tests.support.airflow_env import REPO, AirflowEnv
from tests.support.ports import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

DAG_ID = "example_pyconnect_asset_watch"
TOPIC = "watched-orders"
GROUP = "airflow-watch-watched-orders"
BOUND_S = 150


def _generate(store: str, total: int) -> None:
    """A source run outside Airflow: DataGen records until ``total`` exist in the topic."""
    from connect_runtime import run_source

    result = run_source({"name": "watched-gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                         "topic": TOPIC, "max.records": str(total), "batch.size": "7"}, store)
    assert result.records > 0


def _watcher_position(store: str) -> int | None:
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    tp = TopicPartition(TOPIC, 0)
    with open_backend(store) as be:
        consumer = be.consumer(GROUP)
        try:
            return consumer.committed([tp], 10)[tp]
        finally:
            consumer.close()


def _until(what: str, check: Any, home: Path, proc: subprocess.Popen[bytes], log: Path,
           bound: float = BOUND_S) -> Any:
    deadline = time.monotonic() + bound
    while True:
        got = check()
        if got:
            return got
        assert proc.poll() is None, "airflow standalone exited:\n" + _excerpt(log)
        failed = _query(home, "SELECT task_id, run_id, state FROM task_instance WHERE state IN "
                              "('failed', 'up_for_retry', 'upstream_failed')")
        assert not failed, f"task instances failed: {failed}\n" + _task_logs(home)
        assert time.monotonic() < deadline, f"waited {bound} s for {what}\n" + _excerpt(log)
        time.sleep(0.5)


def _task_logs(home: Path) -> str:
    return "\n".join(f"--- {p}\n" + p.read_text(errors="replace")[-3000:]
                     for p in sorted((home / "logs").rglob("attempt=*.log"))[:3])


def _runs(home: Path) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Each DAG run of the example, oldest first: (run_id, state, the payloads of its triggering events)."""
    runs = _query(home, "SELECT id, run_id, state FROM dag_run WHERE dag_id = ? ORDER BY id", DAG_ID)
    out = []
    for rid, run_id, state in runs:
        extras = _query(home, "SELECT e.extra FROM dagrun_asset_event d JOIN asset_event e ON e.id = d.event_id "
                              "WHERE d.dag_run_id = ? ORDER BY e.id", rid)
        out.append((run_id, state, [_json(extra)["payload"] for (extra,) in extras]))
    return out


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def _events(home: Path) -> list[dict[str, Any]]:
    """Every Asset event of the watched Asset, oldest first: its extra."""
    rows = _query(home, "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                        "WHERE a.name = ? ORDER BY e.id", "example_pyconnect_watched_orders")
    return [_json(extra) for (extra,) in rows]


def _delivered(home: Path) -> dict[str, int]:
    """Records each run's ``archive`` task delivered (its XCom)."""
    rows = _query(home, "SELECT r.run_id, x.value FROM xcom x JOIN dag_run r ON r.id = x.dag_run_id "
                        "WHERE x.dag_id = ? AND x.task_id = 'archive' AND x.key = 'return_value'", DAG_ID)
    return {run_id: int(_json(value)["records"]) for run_id, value in rows}


def _archived(directory: Path) -> list[int]:
    """The DataGen ids in every file the FileSink published (``*.jsonl``), one record value per line."""
    return [json.loads(line)["id"] for f in sorted(directory.rglob("*.jsonl")) for line in f.read_text().splitlines()]


def test_committed_records_schedule_one_run_each_with_their_ranges(tmp_path: Path, metadata_db: str) -> None:  # noqa: F811
    from connect_runtime.backends import open_backend

    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    shutil.copy(REPO / "dags" / f"{DAG_ID}.py", home / "dags")
    af = AirflowEnv(home)
    port = free_port()
    store = f"sqlite:///{tmp_path / 'store.db'}"
    data = tmp_path / "data"
    env = {**_base_env(af, port, store, metadata_db, job_schedule=True), "PYCONNECT_EXAMPLE_DIR": str(data)}
    with open_backend(store) as be:
        be.create_topics({TOPIC: 1})
    log = tmp_path / "standalone.log"
    t0 = time.monotonic()
    with _standalone(af, env, log) as proc:
        _wait_dags(home, [DAG_ID], proc, log)
        af.airflow("dags", "unpause", DAG_ID, extra_env=env)
        # the watcher runs in the triggerer once it has committed its starting position (the end: 0)
        _until("the watcher to start", lambda: _watcher_position(store) == 0, home, proc, log)
        started = time.monotonic()

        _generate(store, 30)
        runs = _until("the first run", lambda: [r for r in _runs(home) if r[1] == "success"], home, proc, log)
        first = time.monotonic() - started
        assert len(runs) == 1, runs
        ((run_1, _, payloads),) = runs
        assert [p["ranges"] for p in payloads] == [{TOPIC: {"0": [0, 30]}}]
        assert payloads[0]["records_upper_bound"] == 30 and payloads[0]["watcher_group"] == GROUP
        assert sorted(_archived(data / "archive")) == list(range(30))
        assert _delivered(home) == {run_1: 30}

        started = time.monotonic()
        _generate(store, 50)
        runs = _until("the second run", lambda: [r for r in _runs(home) if r[1] == "success"][1:], home, proc, log)
        second = time.monotonic() - started
        (run_2, _, payloads) = runs[0]
        assert [p["ranges"] for p in payloads] == [{TOPIC: {"0": [30, 50]}}]
        assert _delivered(home) == {run_1: 30, run_2: 20}

        time.sleep(12)  # two more polls of the watcher: nothing new, nothing fires
        events = _events(home)
        assert [e["payload"]["ranges"] for e in events] == [{TOPIC: {"0": [0, 30]}}, {TOPIC: {"0": [30, 50]}}]
        assert all(e.get("from_trigger") is True for e in events)
        assert [r[0] for r in _runs(home)] == [run_1, run_2]
        assert _watcher_position(store) == 50
    archived = _archived(data / "archive")
    assert sorted(archived) == list(range(50)), f"{len(archived)} records archived, {len(set(archived))} distinct"
    print(f"standalone up to done {time.monotonic() - t0:.0f} s; commit to run done: {first:.1f} s, {second:.1f} s")


def _answers(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except (urllib.error.URLError, OSError):  # not listening yet, or slow
        return False


SENSOR_DAG = "pyconnect_test_deferral"
SENSOR_TOPIC = "late-events"


def test_the_deferrable_sensor_waits_in_the_real_triggerer(tmp_path: Path, metadata_db: str) -> None:  # noqa: F811
    """``PyConnectCommittedOffsetsSensor(deferrable=True)`` in a DAG run the scheduler started: the sensor finds
    the sink's offsets short of the target and defers; a triggerer process (not ``dags test``'s in-process one)
    takes its ``CommittedOffsetsTrigger``; a sink run outside Airflow then commits the target, the trigger's
    event resumes the sensor on its first try, and its XCom is the committed offsets."""
    from connect_runtime import run_sink, run_source

    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "support" / "dag_files" / f"{SENSOR_DAG}.py", home / "dags")
    af = AirflowEnv(home)
    store = f"sqlite:///{tmp_path / 'store.db'}"
    run_source({"name": "late-gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                "topic": SENSOR_TOPIC, "max.records": "40"}, store)
    target = {SENSOR_TOPIC: {"0": 40}}
    out = tmp_path / "sensor_xcom.json"
    port = free_port()
    env = {**_base_env(af, port, store, metadata_db, job_schedule=True),
           # a worker's calls to the API server wait 5 s by default: a just-started API server on a busy
           # machine took longer to answer the task's start (the task then fails before it runs)
           "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
           "AIRFLOW_CONN_PYCONNECT_TEST": json.dumps({"conn_type": "pyconnect", "host": store}),
           "PYCONNECT_TEST_TARGET": json.dumps(target), "PYCONNECT_TEST_TIMEOUT": str(BOUND_S * 2),
           "PYCONNECT_TEST_OUT": str(out)}
    log = tmp_path / "standalone.log"
    with _standalone(af, env, log) as proc:
        _wait_dags(home, [SENSOR_DAG], proc, log)
        _until("the API server to answer", lambda: _answers(f"http://127.0.0.1:{port}/api/v2/monitor/health"),
               home, proc, log)
        af.airflow("dags", "unpause", SENSOR_DAG, extra_env=env)
        af.airflow("dags", "trigger", SENSOR_DAG, extra_env=env)

        def deferred_in_a_triggerer() -> list[tuple[Any, ...]]:
            return _query(home, "SELECT t.classpath, t.triggerer_id FROM task_instance ti JOIN trigger t "
                                "ON t.id = ti.trigger_id WHERE ti.dag_id = ? AND ti.task_id = 'wait' "
                                "AND ti.state = 'deferred' AND t.triggerer_id IS NOT NULL", SENSOR_DAG)

        ((classpath, triggerer_id),) = _until("the sensor to defer to a running triggerer", deferred_in_a_triggerer,
                                              home, proc, log)
        assert classpath == "airflow_pyconnect.triggers.offsets.CommittedOffsetsTrigger"
        (job,) = _query(home, "SELECT job_type, state FROM job WHERE id = ?", triggerer_id)
        assert job == ("TriggererJob", "running")
        assert not out.exists()  # still waiting: the sink has committed nothing

        sink = run_sink({"name": "late-sink", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector",
                         "topics": SENSOR_TOPIC, "log.path": str(tmp_path / "sink.log")}, store, until_offsets=target)
        assert sink.to_dict()["committed"] == target
        _until("the DAG run to succeed", lambda: _query(
            home, "SELECT 1 FROM dag_run WHERE dag_id = ? AND state = 'success'", SENSOR_DAG), home, proc, log)
        states = _query(home, "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = ? ORDER BY task_id",
                        SENSOR_DAG)
        assert states == [("report", "success", 1), ("wait", "success", 1)], states
    assert json.loads(out.read_text()) == target
