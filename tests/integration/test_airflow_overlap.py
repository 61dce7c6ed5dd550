"""Overlapping runs of one connector as Airflow really makes them (issue 24), under a real ``airflow
standalone`` (scheduler, DAG processor, triggerer, API server on 127.0.0.1, LocalExecutor):

- a plain ``airflow backfill create`` (no ``--max-active-runs``: Airflow runs up to 10 DAG runs at
  once, whatever the DAG's ``max_active_runs``) of four days of a user DAG: ``DirectorySource`` with
  ``identity=INTERVAL_IDENTITY``, then a ``SqlSink`` (PostgreSQL, ``insert`` mode without a key) and a
  ``FileSink`` beside it, both with ``until_offsets=ingest.output``, default ``retries=0``;
- in the same Airflow, ``airflow backfill create`` of ``dags/example_pyconnect_sql.py`` as docs/sql.md
  gives it (three days; Spark included);
- a scheduler catch-up (``catchup=True``, ``max_active_runs=4``, ``start_date``/``end_date`` four days
  apart) of the same user DAG, in a second Airflow home.

Every task instance succeeds on its first try, every record lands once in every sink; the sinks'
task instances never overlap (``max_active_tis_per_dag=1`` by default) while the intervals' sources
do (``identity``), and the scheduler says why a sink waited.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.test_airflow_scale_out import _overlapping
from tests.support.airflow_env import REPO, AirflowEnv, conn_env, stop_group
from tests.support.ports import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(1500)]

USER_DAG = "overlap_user"
SQL_DAG = "example_pyconnect_sql"
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"]
SQL_DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]  # the backfill command of docs/sql.md
PER_DAY = 50
PASSWORD = "pw-overlap-shop-41"  # the test's own throwaway role
BOUND_S = 600

DAG_FILE = '''
from datetime import datetime
from typing import Any

from airflow.sdk import DAG, task
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import INTERVAL_IDENTITY, PyConnectSourceOperator

DATA = {data!r}

with DAG(dag_id={dag_id!r}, schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
         start_date=datetime(2026, 1, 1), end_date=datetime(2026, 1, 4), catchup=True, max_active_runs=4):

    @task
    def land(data_interval_start: Any = None) -> str:
        import json, os
        day = data_interval_start.strftime("%Y-%m-%d")
        path = os.path.join(DATA, "incoming", day, "orders.jsonl")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w") as f:
                f.writelines(json.dumps({{"order_id": f"{{day}}-{{i:04d}}", "day": day, "amount": i}}) + "\\n"
                             for i in range({per_day}))
            os.replace(path + ".tmp", path)
        return path

    ingest = PyConnectSourceOperator(
        task_id="ingest",
        connector_config={{
            "name": "overlap-orders", "connector.class": "connect_runtime.connectors.files.DirectorySource",
            "directory": DATA + "/incoming", "pattern": "{{{{ data_interval_start | ds }}}}/*.jsonl",
            "format": "jsonl", "topic": "overlap-orders", "batch.size": "10", "directory.scan.interval.ms": "0",
        }},
        identity=INTERVAL_IDENTITY,
        max_seconds=120,
    )
    sql_load = PyConnectSinkOperator(
        task_id="sql_load",
        connector_config={{
            "name": "overlap-orders-sql", "connector.class": "connect_runtime.connectors.sql.SqlSink",
            "connection.url": {pg_url!r}, "connection.user": "postgres", "topics": "overlap-orders",
            "table.name.format": "orders", "insert.mode": "insert", "pk.mode": "none", "auto.create": "true",
            "batch.size": "7",
        }},
        until_offsets=ingest.output,
        max_seconds=120,
    )
    archive = PyConnectSinkOperator(
        task_id="archive",
        connector_config={{
            "name": "overlap-orders-files", "connector.class": "connect_runtime.connectors.files.FileSink",
            "topics": "overlap-orders", "directory": DATA + "/archive",
        }},
        until_offsets=ingest.output,
        max_seconds=120,
    )
    land() >> ingest >> [sql_load, archive]
'''


def _write_user_dag(home: Path, data: Path, pg_url: str) -> None:
    (home / "dags" / f"{USER_DAG}.py").write_text(
        DAG_FILE.format(dag_id=USER_DAG, data=str(data), per_day=PER_DAY, pg_url=pg_url))


def _query(home: Path, sql: str, *args: object) -> list[tuple]:
    """Read Airflow's metadata DB (PostgreSQL, its URL in ``<home>/metadata_url``)."""
    import psycopg

    url = (home / "metadata_url").read_text().replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql.replace("?", "%s"), args)]


@pytest.fixture
def metadata_db(postgres_url: str) -> Iterator[str]:
    """A PostgreSQL database for Airflow's metadata. On SQLite, ``airflow backfill create`` beside a
    busy scheduler can fail with "database is locked", and once here the scheduler of ``airflow
    standalone`` died of it (``ObjectDeletedError`` on a DagRun the failed create removed), leaving
    every run queued: PostgreSQL is what Airflow wants where runs overlap."""
    import psycopg

    name = "t_airflow_" + os.urandom(4).hex()
    admin = _pg(postgres_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _base_env(af: AirflowEnv, port: int, store: str, metadata: str, *, job_schedule: bool) -> dict[str, str]:
    (af.home / "metadata_url").write_text(metadata)
    return {
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata,
        # Airflow's default async URL wants asyncpg; psycopg 3 (installed) does async too
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": metadata.replace("+psycopg://", "+psycopg_async://"),
        **conn_env("pyconnect_default", store),
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": str(job_schedule),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
    }


@contextmanager
def _standalone(af: AirflowEnv, env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    af.airflow("db", "migrate", extra_env=env, timeout=180)
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(Path(af.env()["PATH"].split(os.pathsep)[0]) / "airflow"), "standalone"],
                                env=af.env(env), stdout=out, stderr=subprocess.STDOUT, cwd=af.home,
                                start_new_session=True)
    try:
        yield proc
    finally:
        stop_group(proc, grace=10, settle=3)


def _wait_dags(home: Path, dag_ids: list[str], proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            stored = {d for (d,) in _query(home, "SELECT dag_id FROM dag")}
        except Exception:  # the DAG processor has not written yet
            stored = set()
        if set(dag_ids) <= stored:
            return
        assert proc.poll() is None, "airflow standalone exited:\n" + log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, f"waited 180 s for the DAG processor to store {dag_ids}\n" + \
            log.read_text(errors="replace")[-3000:]
        time.sleep(1)


def _backfill(af: AirflowEnv, env: dict[str, str], dag_id: str, first: str, last: str) -> None:
    """``airflow backfill create --dag-id D --from-date F --to-date T``, nothing else."""
    af.airflow("backfill", "create", "--dag-id", dag_id, "--from-date", first, "--to-date", last, extra_env=env)


def _excerpt(log: Path) -> str:
    """The end of the standalone log, with every error line of it first."""
    text = log.read_text(errors="replace")
    errors = [line for line in text.splitlines() if "[error" in line or "Exception when executing" in line]
    return "\n".join(errors[:20]) + "\n...\n" + text[-3000:]


def _token(home: Path, port: int) -> str:
    users = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())
    user, password = next(iter(users.items()))
    req = urllib.request.Request(f"http://127.0.0.1:{port}/auth/token", method="POST",
                                 data=json.dumps({"username": user, "password": password}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(json.loads(resp.read())["access_token"])


class _Watch:
    """Polls the task instances until the runs finish; fails at once on a failed task instance or a
    retry; asks the API (what the UI's task instance page shows) why a waiting sink instance waits."""

    def __init__(self, af: AirflowEnv, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.af, self.port, self.proc, self.log = af, port, proc, log
        self.token: str | None = None
        self.reasons: dict[str, set[str]] = {}

    def _blocking(self, dag_id: str, run_id: str, task_id: str) -> list[str]:
        try:
            self.token = self.token or _token(self.af.home, self.port)
            url = (f"http://127.0.0.1:{self.port}/api/v2/dags/{dag_id}/dagRuns/{urllib.request.quote(run_id)}"
                   f"/taskInstances/{task_id}/dependencies")
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                return [f"{d['name']}: {d['reason']}" for d in json.loads(resp.read())["dependencies"]]
        except OSError:
            return []

    def until_done(self, runs: dict[str, int], sinks: tuple[str, ...] = ("sql_load", "archive", "load")) -> None:
        deadline = time.monotonic() + BOUND_S
        seen: list[tuple] = []
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "airflow standalone exited:\n" + _excerpt(self.log)
            assert "Exception when executing SchedulerJob" not in self.log.read_text(errors="replace"), \
                "the scheduler died:\n" + _excerpt(self.log)
            tis = _query(self.af.home, "SELECT dag_id, task_id, run_id, state, try_number FROM task_instance")
            bad = [t for t in tis if t[3] in ("failed", "up_for_retry", "upstream_failed") or (t[4] or 0) > 1]
            assert not bad, f"task instances failed or retried: {bad}\n" + self._task_logs(bad)
            for dag_id, task_id, run_id, state, _ in tis:
                if task_id in sinks and state == "scheduled" and any(
                        o[0] == dag_id and o[1] == task_id and o[3] in ("queued", "running") for o in tis):
                    for reason in self._blocking(dag_id, run_id, task_id):
                        self.reasons.setdefault(f"{dag_id}.{task_id}", set()).add(reason)
            seen = _query(self.af.home, "SELECT dag_id, state, count(*) FROM dag_run GROUP BY dag_id, state")
            if sorted(seen) == sorted((d, "success", n) for d, n in runs.items()):
                return
            time.sleep(0.5)
        raise AssertionError(f"waited {BOUND_S} s for the runs {runs}, last saw {seen}\n" + _excerpt(self.log))

    def _task_logs(self, bad: list[tuple]) -> str:
        out = []
        for dag_id, task_id, run_id, _, try_number in bad[:3]:
            path = (self.af.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
                    / f"attempt={max(1, int(try_number or 1))}.log")
            if path.exists():
                out.append(f"--- {path}\n" + path.read_text(errors="replace")[-3000:])
        return "\n".join(out)


def _pg(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _rows(url: str, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(_pg(url)) as conn:
        return [tuple(r) for r in conn.execute(sql)]


def _archived(directory: Path) -> list[str]:
    """The order ids in every committed file of the FileSink (``*.jsonl`` under its directory,
    whatever their names), one per line."""
    ids = []
    for f in sorted(directory.rglob("*.jsonl")):
        for line in f.read_text().splitlines():
            record = json.loads(line)
            value = record.get("value", record) if isinstance(record, dict) else record
            value = json.loads(value) if isinstance(value, str) else value
            ids.append(value["order_id"])
    return ids


def _check_user_dag(home: Path, data: Path, pg_url: str, run_type: str) -> dict[str, object]:
    """Every task instance on try 1, every record once in PostgreSQL and in the files, the sinks'
    instances one at a time; returns the timings seen."""
    tis = _query(home, "SELECT ti.task_id, r.logical_date, ti.state, ti.try_number, ti.start_date, ti.end_date "
                       "FROM task_instance ti JOIN dag_run r ON r.dag_id = ti.dag_id AND r.run_id = ti.run_id "
                       "WHERE ti.dag_id = ? AND r.run_type = ? ORDER BY ti.task_id, ti.start_date", USER_DAG, run_type)
    assert len(tis) == 4 * len(DAYS), tis
    assert {(s, t) for _, _, s, t, _, _ in tis} == {("success", 1)}, tis
    assert {str(d)[:10] for _, d, *_ in tis} == set(DAYS), tis

    want = sorted(f"{d}-{i:04d}" for d in DAYS for i in range(PER_DAY))
    rows = [r[0] for r in _rows(pg_url, "SELECT order_id FROM orders")]
    assert sorted(rows) == want, f"PostgreSQL holds {len(rows)} rows, {len(set(rows))} distinct, want {len(want)}"
    files = _archived(data / "archive")
    assert sorted(files) == want, f"the FileSink holds {len(files)} lines, {len(set(files))} distinct"

    delivered = {task: _delivered(home, task) for task in ("sql_load", "archive")}
    for task, by_run in delivered.items():  # the runs between them delivered each record once, in any order
        assert len(by_run) == len(DAYS) and sum(by_run.values()) == len(want), (task, by_run)

    spans = {task: [(a, b) for t, _, _, _, a, b in tis if t == task] for task in ("ingest", "sql_load", "archive")}
    for task in ("sql_load", "archive"):
        assert _overlapping(spans[task]) == 0, f"{task} instances overlapped: {spans[task]}"
    runs = _query(home, "SELECT start_date, end_date FROM dag_run WHERE dag_id = ?", USER_DAG)
    return {"runs overlapping": _overlapping(runs), "ingest overlapping": _overlapping(spans["ingest"]),
            "delivered per run": delivered}


def _delivered(home: Path, task_id: str) -> dict[str, int]:
    """Records each run's sink task delivered, from its task log ("Sink connector ... delivered N records")."""
    out = {}
    for log in sorted((home / "logs" / f"dag_id={USER_DAG}").glob(f"run_id=*/task_id={task_id}/attempt=1.log")):
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = str(json.loads(line).get("event", ""))
            except ValueError:
                continue
            if event.startswith("Sink connector ") and " delivered " in event:
                out[log.parent.parent.name[len("run_id="):]] = int(event.split(" delivered ", 1)[1].split()[0])
    return out


@pytest.fixture
def sql_example_db(postgres_url: str) -> Iterator[tuple[str, dict[str, object]]]:
    """A database and a role for ``example_pyconnect_sql``: (admin URL, the Airflow connection)."""
    import psycopg

    name = "t_sqlex_" + os.urandom(4).hex()
    admin = _pg(postgres_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        conn.execute("DROP ROLE IF EXISTS overlap_app")
        conn.execute(f"CREATE ROLE overlap_app LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f'GRANT ALL ON DATABASE "{name}" TO overlap_app')
    url = admin.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("GRANT ALL ON SCHEMA public TO overlap_app")
    host, port = url.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)
    try:
        yield url, {"conn_type": "postgres", "host": host, "port": int(port), "schema": name,
                    "login": "overlap_app", "password": PASSWORD}
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_plain_backfill_create_of_a_user_dag_and_of_the_sql_example(
        tmp_path: Path, pg_database: str, sql_example_db: tuple[str, dict[str, object]], metadata_db: str) -> None:
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    data = tmp_path / "data"
    _write_user_dag(home, data, _pg(pg_database))
    shutil.copy(REPO / "dags" / f"{SQL_DAG}.py", home / "dags")
    shutil.copytree(REPO / "dags" / "jobs", home / "dags" / "jobs")
    (home / "dags" / ".airflowignore").write_text("jobs/\n")
    af = AirflowEnv(home)
    port = free_port()
    sql_admin, sql_conn = sql_example_db
    env = {**_base_env(af, port, f"sqlite:///{tmp_path / 'pyconnect.db'}", metadata_db, job_schedule=False),
           "AIRFLOW_CONN_PYCONNECT_EXAMPLE_SQL": json.dumps(sql_conn),
           "PYCONNECT_EXAMPLE_DATA": str(tmp_path / "example-data")}
    log = tmp_path / "standalone.log"
    t0 = time.monotonic()
    with _standalone(af, env, log) as proc:
        _wait_dags(home, [USER_DAG, SQL_DAG], proc, log)
        started = time.monotonic()
        for dag_id in (USER_DAG, SQL_DAG):
            af.airflow("dags", "unpause", dag_id, extra_env=env)
        _backfill(af, env, USER_DAG, DAYS[0], DAYS[-1])
        _backfill(af, env, SQL_DAG, SQL_DAYS[0], SQL_DAYS[-1])
        watch = _Watch(af, port, proc, log)
        watch.until_done({USER_DAG: len(DAYS), SQL_DAG: len(SQL_DAYS)})
        ran = time.monotonic() - started
    print(f"standalone up to done {time.monotonic() - t0:.0f} s; backfills ran {ran:.0f} s")

    # Airflow ran the backfills with its default of 10 active runs, ignoring the DAGs' max_active_runs
    assert _query(home, "SELECT dag_id, max_active_runs FROM backfill ORDER BY dag_id") == [
        (SQL_DAG, 10), (USER_DAG, 10)]
    timings = _check_user_dag(home, data, _pg(pg_database), "backfill")
    print("user DAG:", timings, "blocking reasons seen:", watch.reasons)
    assert timings["runs overlapping"] >= 2, timings

    # the SQL example: every task instance on try 1; the totals table equals SQL's own totals
    tis = _query(home, "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = ?", SQL_DAG)
    assert len(tis) == 6 * len(SQL_DAYS) and {(s, t) for _, s, t in tis} == {("success", 1)}, tis
    expected = _rows(sql_admin, "SELECT created_at::date, customer, count(*), sum(amount) FROM shop_orders "
                                "GROUP BY 1, 2 ORDER BY 1, 2")
    assert len(expected) == 3 * 7 and sum(r[2] for r in expected) == 3 * 60
    assert _rows(sql_admin, "SELECT day, customer, orders, amount FROM daily_customer_totals ORDER BY 1, 2") == expected
    sql_spans = {t: [(a, b) for (a, b) in _query(
        home, "SELECT start_date, end_date FROM task_instance WHERE dag_id = ? AND task_id = ?", SQL_DAG, t)]
        for t in ("ingest", "publish", "load")}
    for task, spans in sql_spans.items():
        assert _overlapping(spans) == 0, f"{SQL_DAG}.{task} instances overlapped: {spans}"

    # the waits were the task concurrency's: the scheduler said so, and so did the API the UI reads
    text = log.read_text(errors="replace")
    assert "since the task concurrency for this task has been reached" in text
    assert any(r.startswith("Task Concurrency: The max task concurrency has been reached")
               for reasons in watch.reasons.values() for r in reasons), watch.reasons


def test_catch_up_of_a_user_dag(tmp_path: Path, pg_database: str, metadata_db: str) -> None:
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    data = tmp_path / "data"
    _write_user_dag(home, data, _pg(pg_database))
    af = AirflowEnv(home)
    port = free_port()
    env = _base_env(af, port, f"sqlite:///{tmp_path / 'pyconnect.db'}", metadata_db, job_schedule=True)
    log = tmp_path / "standalone.log"
    with _standalone(af, env, log) as proc:
        _wait_dags(home, [USER_DAG], proc, log)
        started = time.monotonic()
        af.airflow("dags", "unpause", USER_DAG, extra_env=env)
        watch = _Watch(af, port, proc, log)
        watch.until_done({USER_DAG: len(DAYS)})
        ran = time.monotonic() - started
    timings = _check_user_dag(home, data, _pg(pg_database), "scheduled")
    print(f"catch-up ran {ran:.0f} s:", timings, "blocking reasons seen:", watch.reasons)
    assert timings["runs overlapping"] >= 2, timings
