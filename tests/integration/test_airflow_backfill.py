"""The backfill pattern of ``dags/example_pyconnect_backfill.py`` under real Airflow: three daily
intervals, then one cleared and run again. Every record is in the topic exactly once, the rerun
writes nothing, emits no asset event and still says what its interval holds (``interval_ranges``),
and the archive sink holds every record once.

Two ways, both real:

- ``airflow dags test <logical date>`` per interval, then ``airflow tasks clear`` + ``dags test``
  again (one process per run, quick);
- ``airflow backfill create`` exactly as the DAG's docstring gives it (no ``--max-active-runs``: Airflow
  runs up to 10 of its DAG runs at once, whatever the DAG's ``max_active_runs``), executed by a running
  ``airflow standalone`` (scheduler, DAG processor, triggerer, API server, LocalExecutor) in its own
  ``AIRFLOW_HOME``, then ``airflow tasks clear`` of one interval, which the scheduler runs again
  (attempt 2 of its tasks). The source (no ``identity``) and the sink run one interval at a time by
  their default ``max_active_tis_per_dag=1``: every task instance succeeds on its first try.
  ``[scheduler] use_job_schedule=False`` keeps the scheduler from also catching up every day since
  the DAG's start date: only the backfill's runs exist.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.airflow_env import REPO, AirflowEnv, conn_env, shared_airflow_env, stop_group
from tests.support.ports import free_port

pytestmark = pytest.mark.airflow

DAG_ID = "example_pyconnect_backfill"
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
COMMITTED = re.compile(r"Source connector backfill-orders committed (\d+) records .*?; this attempt's ranges "
                       r"(\{.*?\}|\{\}); the interval \S+ holds (\{.*?\}\})")


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


def _run_day(af: AirflowEnv, day: str, env: dict[str, str]) -> tuple[int, dict, dict]:
    """(records, this attempt's ranges, the interval's ranges) of the day's ingest, from its log."""
    out = af.airflow("dags", "test", DAG_ID, day, extra_env=env)
    found = COMMITTED.findall(out.stdout + out.stderr)
    assert len(found) == 1, (out.stdout + out.stderr)[-5000:]
    return int(found[0][0]), json.loads(found[0][1]), json.loads(found[0][2])


def test_three_intervals_then_a_cleared_rerun_leave_every_record_once(af: AirflowEnv, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'backfill.db'}"
    data = tmp_path / "data"
    env = {**conn_env("pyconnect_default", url), "PYCONNECT_EXAMPLE_DIR": str(data)}

    first = {day: _run_day(af, day, env) for day in DAYS}
    assert [n for n, _, _ in first.values()] == [50, 50, 50]
    assert [r["backfill-orders"]["0"] for _, r, _ in first.values()] == [[0, 50], [50, 100], [100, 150]]
    assert all(attempt == interval for _, attempt, interval in first.values())

    af.airflow("tasks", "clear", DAG_ID, "-s", DAYS[1], "-e", DAYS[1], "-y", extra_env=env)
    records, ranges, interval = _run_day(af, DAYS[1], env)
    assert records == 0 and ranges == {}, "the rerun of a finished interval wrote records"
    assert interval == first[DAYS[1]][2], "the rerun must say what its interval committed before"

    values = _topic_values(url, "backfill-orders")
    ids = [v["order_id"] for v in values]
    assert len(ids) == 150 and len(set(ids)) == 150
    assert sorted(ids) == sorted(f"{d}-{i:04d}" for d in DAYS for i in range(50))

    assert sorted(_archived(data / "archive")) == sorted(ids)


def _archived(directory: Path) -> list[str]:
    """The order ids of every file the FileSink published under ``directory`` (``*.jsonl``, whatever
    their names: each commit publishes whole files named by the offsets they hold)."""
    return [json.loads(line)["order_id"] for f in sorted(directory.rglob("*.jsonl"))
            for line in f.read_text().splitlines()]


def _query(home: Path, sql: str, *args: object) -> list[tuple]:
    """Read Airflow's metadata DB (SQLite, WAL) directly: cheaper than a CLI process per poll."""
    import sqlite3

    db = sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def _runs(home: Path) -> dict[str, str]:
    rows = _query(home, "SELECT logical_date, state FROM dag_run WHERE dag_id = ?", DAG_ID)
    return {str(d)[:10]: state for d, state in rows}


def _wait_runs(home: Path, want: dict[str, str], bound: float, log: Path) -> None:
    deadline = time.monotonic() + bound
    seen: dict[str, str] = {}
    while time.monotonic() < deadline:
        seen = _runs(home)
        if seen == want:
            return
        assert "failed" not in seen.values(), f"a run failed: {seen}\n" + log.read_text(errors="replace")[-3000:]
        time.sleep(1)
    raise AssertionError(f"waited {bound} s for the runs {want}, last saw {seen}\n"
                         + log.read_text(errors="replace")[-3000:])


def _task_log_events(home: Path, day: str, attempt: int) -> list[str]:
    path = (home / "logs" / f"dag_id={DAG_ID}" / f"run_id=backfill__{day}T00:00:00+00:00" / "task_id=ingest"
            / f"attempt={attempt}.log")
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(str(json.loads(line).get("event", "")))
        except ValueError:
            continue
    return events


def test_backfill_create_with_a_scheduler_then_a_cleared_interval(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "example_pyconnect_backfill.py").write_bytes(
        (REPO / "dags" / "example_pyconnect_backfill.py").read_bytes())
    af = AirflowEnv(home)
    port = free_port()
    url = f"sqlite:///{tmp_path / 'backfill.db'}"
    env = {
        **conn_env("pyconnect_default", url),
        "PYCONNECT_EXAMPLE_DIR": str(tmp_path / "data"),
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    }
    af.airflow("db", "migrate", extra_env=env, timeout=180)
    log = tmp_path / "standalone.log"
    with open(log, "wb") as out:
        standalone = subprocess.Popen([str(Path(af.env()["PATH"].split(os.pathsep)[0]) / "airflow"), "standalone"],
                                      env=af.env(env), stdout=out, stderr=subprocess.STDOUT, cwd=home,
                                      start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:  # the DAG processor must have stored the DAG before it can be unpaused
            if (home / "airflow.db").exists() and _query(home, "SELECT 1 FROM dag WHERE dag_id = ?", DAG_ID):
                break
            assert standalone.poll() is None, "airflow standalone exited:\n" + log.read_text()[-3000:]
            assert time.monotonic() < deadline, "waited 120 s for the DAG processor to store the DAG\n" + \
                log.read_text()[-3000:]
            time.sleep(1)
        af.airflow("dags", "unpause", DAG_ID, extra_env=env)
        assert _query(home, "SELECT is_paused FROM dag WHERE dag_id = ?", DAG_ID) == [(0,)]
        for attempt in range(6):  # the SQLite metadata DB may be locked by the scheduler: the create rolls back
            out = af.airflow("backfill", "create", "--dag-id", DAG_ID, "--from-date", DAYS[0], "--to-date", DAYS[-1],
                             extra_env=env, check=False)
            if out.returncode == 0:
                break
            assert "database is locked" in out.stdout + out.stderr and attempt < 5, (out.stdout + out.stderr)[-4000:]
            time.sleep(2)
        _wait_runs(home, dict.fromkeys(DAYS, "success"), 240, log)
        assert _query(home, "SELECT max_active_runs FROM backfill") == [(10,)]
        tis = _query(home, "SELECT task_id, state, try_number, start_date, end_date FROM task_instance "
                           "WHERE dag_id = ?", DAG_ID)
        assert len(tis) == 9 and {(state, tries) for _, state, tries, _, _ in tis} == {("success", 1)}, tis
        for task in ("ingest", "archive"):  # one interval at a time (max_active_tis_per_dag=1 by default)
            spans = sorted((a, b) for t, _, _, a, b in tis if t == task)
            assert all(prev[1] <= nxt[0] for prev, nxt in itertools.pairwise(spans)), (task, spans)

        af.airflow("tasks", "clear", DAG_ID, "-s", DAYS[1], "-e", DAYS[1], "-y", extra_env=env)
        deadline = time.monotonic() + 240
        rerun = home / "logs" / f"dag_id={DAG_ID}" / f"run_id=backfill__{DAYS[1]}T00:00:00+00:00" / \
            "task_id=archive" / "attempt=2.log"
        while not (rerun.exists() and _runs(home).get(DAYS[1]) == "success"):
            assert standalone.poll() is None, "airflow standalone exited:\n" + log.read_text()[-3000:]
            assert time.monotonic() < deadline, "waited 240 s for the scheduler to rerun the cleared interval"
            time.sleep(1)
    finally:
        stop_group(standalone, grace=10, settle=5)  # the scheduler may ignore SIGINT and SIGTERM for long

    # the days ran one at a time, in an order the scheduler chose: each holds one block of 50 offsets
    first = [e for e in _task_log_events(home, DAYS[1], 1) if e.startswith("Source connector backfill-orders committed")]
    again = [e for e in _task_log_events(home, DAYS[1], 2) if e.startswith("Source connector backfill-orders committed")]
    assert len(first) == 1 and first[0].startswith("Source connector backfill-orders committed 50 records")
    held = first[0][first[0].index(" holds ") + len(" holds "):]
    start, end = json.loads(held)["backfill-orders"]["0"]
    assert end - start == 50 and start in (0, 50, 100), first[0]
    assert again and again[0].startswith("Source connector backfill-orders committed 0 records")
    assert "this attempt's ranges {};" in again[0]
    assert again[0].endswith(" holds " + held), "the rerun must say what its interval committed before"

    # one asset event per interval; the rerun that wrote nothing emits none
    events = _query(home, "SELECT a.uri, e.extra, e.source_run_id FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                          "ORDER BY e.id")
    assert {uri for uri, _, _ in events} == {"pyconnect://pyconnect_default/backfill-orders"}
    ranges = sorted((run_id[len("backfill__"):][:10], json.loads(extra)["ranges"]["0"]) for _, extra, run_id in events)
    assert [day for day, _ in ranges] == DAYS
    assert sorted(span for _, span in ranges) == [[0, 50], [50, 100], [100, 150]]
    assert dict(ranges)[DAYS[1]] == [start, end]

    ids = [v["order_id"] for v in _topic_values(url, "backfill-orders")]
    assert sorted(ids) == sorted(f"{d}-{i:04d}" for d in DAYS for i in range(50))
    assert sorted(_archived(tmp_path / "data" / "archive")) == sorted(ids)
