"""Real Airflow 3 runs of the provider's operators, sensor and trigger on the embedded SQLite backend.

Each test runs ``airflow dags test`` (or ``airflow tasks test``) in a subprocess against the
session's migrated ``AIRFLOW_HOME`` (see ``tests/support/airflow_env.py``), with a
``pyconnect_test`` connection to a fresh SQLite file, and checks what landed in the backend.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.airflow_env import AirflowEnv, conn_env, shared_airflow_env

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def _read_topic(url: str, topic: str) -> list[tuple[int, int, dict]]:
    """Every committed record of ``topic``: (partition, offset, JSON value)."""
    from connect_runtime.backends import open_backend

    out = []
    with open_backend(url) as be:
        parts = be.list_topics().get(topic, 0)
        consumer = be.consumer(None)
        try:
            from connect_runtime.api.records import TopicPartition

            tps = [TopicPartition(topic, p) for p in range(parts)]
            ends = consumer.end_offsets(tps, 10)
        finally:
            consumer.close()
        for tp in tps:
            for rec in be.read_range(tp, 0, ends[tp]):
                out.append((rec.partition, rec.offset, json.loads(rec.value)))
    return out


def test_source_sensor_sink_pipeline_passes_committed_ranges_through_xcom(af: AirflowEnv, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pipe.db'}"
    out, sink_log = tmp_path / "out.json", tmp_path / "sink.log"
    env = {**conn_env("pyconnect_test", url), "PYCONNECT_TEST_OUT": str(out), "PYCONNECT_TEST_SINK_LOG": str(sink_log)}
    run = af.airflow("dags", "test", "pyconnect_test_pipeline", "2026-03-04", extra_env=env)
    logs = run.stdout + run.stderr
    xcoms = json.loads(out.read_text())

    src = xcoms["src"]
    assert src["connector"] == "pipe-gen" and src["records"] == 500
    assert set(src) == {"connector", "records", "ranges", "source_offsets", "transactions", "filtered",
                        "skipped", "seconds", "generation", "interval_ranges", "interval_records",
                        "source_offsets_total", "source_offsets_truncated", "empty", "bytes"}
    assert src["empty"] is None
    assert src["interval_records"] == 500 and src["interval_ranges"] == src["ranges"]
    assert src["source_offsets_total"] == 2 and src["source_offsets_truncated"] is False
    written = sum(to - frm for parts in src["ranges"].values() for frm, to in parts.values())
    assert written == 500 and list(src["ranges"]) == ["pipe-events"]
    assert len(src["source_offsets"]) == 2  # one source partition per task

    # the source sensor saw exactly the source offsets the run committed
    assert sorted(map(json.dumps, xcoms["wait_src"])) == sorted(map(json.dumps, src["source_offsets"]))

    # the sink consumed exactly up to the source's ranges and committed their ends
    ends = {t: {p: r[1] for p, r in parts.items()} for t, parts in src["ranges"].items()}
    sink = xcoms["sink"]
    assert sink["records"] == 500 and sink["committed"] == ends
    assert xcoms["wait_sink"] == ends

    # every record reached the sink exactly once
    topic = _read_topic(url, "pipe-events")
    assert sorted(v["id"] for _, _, v in topic) == list(range(500))
    puts = [line for line in map(json.loads, sink_log.read_text().splitlines()) if line.get("call") == "put"]
    delivered = [(part, offset, value["id"]) for p in puts for _, part, offset, value in p["records"]]
    assert sorted(delivered) == sorted((p, o, v["id"]) for p, o, v in topic)

    # asset events through the alias, carrying the committed ranges
    events = af.python(
        "import json\n"
        "from airflow.models.asset import AssetEvent, AssetModel\n"
        "from airflow.utils.session import create_session\n"
        "from sqlalchemy import select\n"
        "with create_session() as s:\n"
        "    rows = s.execute(select(AssetModel.uri, AssetEvent.extra).join(AssetModel, AssetEvent.asset_id == AssetModel.id)"
        ".where(AssetEvent.source_dag_id == 'pyconnect_test_pipeline')).all()\n"
        "print(json.dumps([[u, e] for u, e in rows]))\n"
    ).stdout.strip().splitlines()[-1]
    uri_extras = json.loads(events)
    mine = [e for u, e in uri_extras if u == "pyconnect://pyconnect_test/pipe-events"]
    assert mine, uri_extras
    assert mine[-1]["ranges"] == src["ranges"]["pipe-events"] and mine[-1]["connector"] == "pipe-gen"

    # the secret in the source config never shows in logs, XCom or the rendered fields
    assert "jaas-secret-123" not in logs
    assert "jaas-secret-123" not in out.read_text()
    rendered = af.python(
        "from airflow.models.renderedtifields import RenderedTaskInstanceFields as R\n"
        "from airflow.utils.session import create_session\n"
        "from sqlalchemy import select\n"
        "with create_session() as s:\n"
        "    print(repr(s.scalars(select(R.rendered_fields).where(R.dag_id == 'pyconnect_test_pipeline',"
        " R.task_id == 'src')).all()))\n"
    ).stdout
    assert "pipe-events" in rendered and "jaas-secret-123" not in rendered


def _run_source_now(url: str, name: str, topic: str, n: int) -> dict:
    from connect_runtime import run_source

    return run_source({"name": name, "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                       "topic": topic, "max.records": str(n)}, url).to_dict()


def _wait_for_log(proc: subprocess.Popen[bytes], log: Path, text: str, bound: float) -> None:
    deadline = time.monotonic() + bound
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None, f"airflow ended before logging {text!r}:\n" + log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"waited {bound} s for {text!r} in {log}"
        time.sleep(0.1)


def test_sensor_defers_and_resumes_through_the_trigger(af: AirflowEnv, tmp_path: Path) -> None:
    """The sensor finds nothing committed, defers; ``dags test`` runs the trigger inline through the
    in-process triggerer supervisor; the sink commits only once the trigger is polling; the trigger's
    event resumes the sensor, whose XCom is the committed offsets."""
    from connect_runtime import run_sink

    url = f"sqlite:///{tmp_path / 'late.db'}"
    src = _run_source_now(url, "late-gen", "late-events", 300)
    out, log = tmp_path / "out.json", tmp_path / "dags_test.log"
    env = {**conn_env("pyconnect_test", url), "PYCONNECT_TEST_OUT": str(out),
           "PYCONNECT_TEST_TARGET": json.dumps(src), "PYCONNECT_TEST_TIMEOUT": "90"}
    proc = af.popen("dags", "test", "pyconnect_test_deferral", "2026-03-05", extra_env=env, log=log)
    try:
        _wait_for_log(proc, log, "running trigger in line", 90)
        _wait_for_log(proc, log, "short of the target: late-events[0]: committed nothing, target 300", 30)
        sink = run_sink({"name": "late-sink", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector",
                         "topics": "late-events", "log.path": str(tmp_path / "sink.log")}, url, until_offsets=src)
        assert proc.wait(timeout=90) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    logs = log.read_text()
    assert "Pausing task as DEFERRED" in logs
    assert "[DAG TEST] Trigger completed" in logs
    assert "reached its target after" in logs
    assert sink.to_dict()["committed"] == {"late-events": {"0": 300}}
    assert json.loads(out.read_text()) == {"late-events": {"0": 300}}


@pytest.mark.parametrize("deferrable", [True, False])
def test_sensor_timeout_names_reached_and_target_offsets(af: AirflowEnv, tmp_path: Path, deferrable: bool) -> None:
    url = f"sqlite:///{tmp_path / 'never.db'}"
    env = {**conn_env("pyconnect_test", url), "PYCONNECT_TEST_OUT": str(tmp_path / "out.json"),
           "PYCONNECT_TEST_TARGET": json.dumps({"late-events": {"0": 5}}), "PYCONNECT_TEST_TIMEOUT": "3",
           "PYCONNECT_TEST_DEFERRABLE": "true" if deferrable else "false"}
    day = "2026-03-08" if deferrable else "2026-03-09"
    run = af.airflow("dags", "test", "pyconnect_test_deferral", day, extra_env=env, check=False)
    logs = run.stdout + run.stderr
    assert ("running trigger in line" in logs) is deferrable
    if deferrable:
        assert ("AirflowSensorTimeout: timed out waiting for the committed offsets of sink connector 'late-sink' "
                "to reach the target after") in logs
        assert "short: late-events[0]: committed nothing, target 5" in logs
    else:
        assert "AirflowSensorTimeout: Sensor has timed out" in logs, logs[-3000:]
        assert ("the committed offsets of sink connector 'late-sink' did not reach the target: "
                "late-events[0]: committed nothing, target 5") in logs
    assert not (tmp_path / "out.json").exists()


def test_retried_source_attempt_fences_its_predecessor(af: AirflowEnv, tmp_path: Path) -> None:
    """Two attempts of the same task run at once (a zombie and its retry): the same transactional id,
    so the retry's producer init fences the zombie, whose next commit fails; no record twice."""
    url = f"sqlite:///{tmp_path / 'fence.db'}"
    env = conn_env("pyconnect_test", url)
    # the zombie polls slowly (1,200 records would take 72 s), so it is surely still running when its
    # successor's producer init fences it, however long the second `airflow tasks test` takes to start
    first = af.popen("tasks", "test", "pyconnect_test_fencing", "gen", "2026-03-06",
                     extra_env={**env, "AIRFLOW_VAR_FENCE_POLL_DELAY_MS": "300"}, log=tmp_path / "first.log")
    try:
        # wait (bounded) until the first attempt committed some transactions
        deadline = time.monotonic() + 90
        while True:
            n = len(_read_topic(url, "fence-events")) if (tmp_path / "fence.db").exists() else 0
            if n >= 50:
                break
            assert first.poll() is None, "the first attempt ended before it was fenced:\n" + \
                (tmp_path / "first.log").read_text()[-4000:]
            assert time.monotonic() < deadline, f"waited 90 s for the first attempt to commit 50 records, saw {n}"
            time.sleep(0.2)
        second = af.airflow("tasks", "test", "pyconnect_test_fencing", "gen", "2026-03-06", extra_env=env,
                            timeout=180, check=False)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=10)
    first_log = (tmp_path / "first.log").read_text()
    assert "ProducerFencedError" in first_log and "AirflowException" in first_log, first_log[-4000:]
    assert "Source connector fence-gen committed" not in first_log, "the first attempt was not fenced"
    assert "Source connector fence-gen committed" in second.stdout + second.stderr
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-4000:]
    ids = [v["id"] for _, _, v in _read_topic(url, "fence-events")]
    assert sorted(ids) == list(range(1200)), f"{len(ids)} records, {len(set(ids))} distinct"
