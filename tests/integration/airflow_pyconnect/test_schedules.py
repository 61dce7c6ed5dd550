"""Schedules and overlapping runs, as Airflow 3.3 parses and runs the DAG files (real ``DagBag``, real
``airflow dags list-import-errors`` and ``airflow dags test``, each in a subprocess with its own
``AIRFLOW_HOME``):

- a task whose connector config or identity uses the data interval (``INTERVAL_IDENTITY``, the SQL
  source's ``interval.start``/``interval.end``) on a schedule whose runs have empty data intervals
  (``"@daily"``, a cron string, ``None``, ``"@once"``) is an import error naming the task, the schedule
  and the fix; with ``CronDataIntervalTimetable`` or ``CronTriggerTimetable(..., interval=...)`` it
  parses, and ``{{ ds }}`` alone is fine on ``"@daily"``; mapped tasks (``.partial().expand()``) and tasks given
  their DAG after construction (``dag.add_task``, ``op.dag = dag``) too, through the provider's cluster policy;
- ``CronDataIntervalTimetable`` works end to end under ``airflow dags test`` (SqlSource interval mode on
  SQLite, ``INTERVAL_IDENTITY``);
- the task concurrency defaults, as the scheduler sees them (the serialized DAG): 1 for sinks and for
  sources without identity, unset with an identity and for the fan-out's mapped tasks, and an explicit
  value or ``default_args`` wins;
- the checks made when a task runs (an empty interval; no logical date at all).
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from tests.support.airflow_env import AirflowEnv, conn_env

pytestmark = pytest.mark.airflow

HEADER = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable
from airflow.timetables.trigger import CronTriggerTimetable
from airflow_pyconnect.operators.fanout import fan_out_source
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import INTERVAL_IDENTITY, PyConnectSourceOperator

FILES = {"name": "files", "connector.class": "connect_runtime.connectors.files.DirectorySource",
         "directory": "/tmp/in", "pattern": "{{ ds }}/*.jsonl", "topic": "t"}
SQL = {"name": "sql", "connector.class": "connect_runtime.connectors.sql.SqlSource",
       "connection.url": "sqlite:////tmp/x.db", "table.include.list": "orders", "mode": "timestamp",
       "timestamp.column.name": "ts", "interval.start": "{{ data_interval_start }}",
       "interval.end": "{{ data_interval_end }}", "topic.prefix": "sql-"}
SINK = {"name": "sink", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "t",
        "directory": "/tmp/out"}
"""

# name -> (schedule expression, body); None: parses; otherwise words the import error must contain
CASES: dict[str, tuple[str, str, list[str] | None]] = {
    "daily_interval_identity": ('"@daily"', 'PyConnectSourceOperator(task_id="ingest", connector_config=FILES, '
                                            'identity=INTERVAL_IDENTITY)',
                                ["'ingest'", "identity uses the data interval", "schedule='@daily'",
                                 "cron presets such as \"@daily\"", "CronTriggerTimetable", 'CronDataIntervalTimetable("@daily", timezone="UTC")',
                                 "interval=timedelta(days=1)"]),
    "cron_sql_interval": ('"0 3 * * *"', 'PyConnectSourceOperator(task_id="rows", connector_config=SQL)',
                          ["'rows'", "connector_config['interval.start'], connector_config['interval.end'] use",
                           "schedule='0 3 * * *'", "CronDataIntervalTimetable"]),
    "none_sql_interval": ("None", 'PyConnectSourceOperator(task_id="rows", connector_config=SQL)',
                          ["'rows'", "schedule=None (NullTimetable)", "manual runs"]),
    "once_interval_identity": ('"@once"', 'PyConnectSourceOperator(task_id="ingest", connector_config=FILES, '
                                          'identity=INTERVAL_IDENTITY)', ["schedule='@once'"]),
    "daily_sink_interval": ('"@daily"', 'PyConnectSinkOperator(task_id="out", connector_config={**SINK, '
                                        '"directory": "/tmp/out/{{ data_interval_end | ds }}"})',
                            ["'out'", "connector_config['directory'] uses"]),
    "daily_fanout_interval": ('"@daily"', 'fan_out_source("fan", FILES, identity=INTERVAL_IDENTITY)',
                              ["'fan_plan'", "identity uses"]),
    "data_interval_ok": ('CronDataIntervalTimetable("@daily", timezone="UTC")',
                         'PyConnectSourceOperator(task_id="rows", connector_config=SQL, identity=INTERVAL_IDENTITY)',
                         None),
    "trigger_with_interval_ok": ('CronTriggerTimetable("@daily", timezone="UTC", interval=timedelta(days=1))',
                                 'PyConnectSourceOperator(task_id="rows", connector_config=SQL)', None),
    "daily_ds_only_ok": ('"@daily"', 'PyConnectSourceOperator(task_id="ingest", connector_config=FILES, '
                                     'identity="{{ ds }}")', None),
    "none_no_interval_ok": ("None", 'PyConnectSinkOperator(task_id="out", connector_config=SINK)', None),
    # mapped tasks: the constructor runs only when a mapped instance runs; Airflow's task policy sees them
    "daily_mapped_identity": ('"@daily"', 'PyConnectSourceOperator.partial(task_id="m", connector_config=FILES)'
                                          '.expand(identity=["a", INTERVAL_IDENTITY])',
                              ["'m'", "identity uses the data interval", "schedule='@daily'"]),
    "daily_mapped_config": ('"@daily"', 'PyConnectSourceOperator.partial(task_id="m").expand(connector_config=[SQL])',
                            ["'m'", "connector_config['interval.start'], connector_config['interval.end'] use"]),
    "daily_mapped_sink_partial": ('"@daily"', 'PyConnectSinkOperator.partial(task_id="out", connector_config={**SINK, '
                                              '"directory": "/o/{{ data_interval_end | ds }}"}).expand(until_offsets=[None])',
                                  ["'out'", "connector_config['directory'] uses"]),
    "mapped_data_interval_ok": ('CronDataIntervalTimetable("@daily", timezone="UTC")',
                                'PyConnectSourceOperator.partial(task_id="m", connector_config=SQL)'
                                '.expand(identity=[INTERVAL_IDENTITY])', None),
}

# DAGs given to the task after it was built: the constructor saw no DAG; Airflow's task policy sees them
LATE = """
ingest = PyConnectSourceOperator(task_id="late", connector_config=FILES, identity=INTERVAL_IDENTITY)
dag = DAG(dag_id=NAME, schedule=SCHEDULE, start_date=datetime(2026, 1, 1), catchup=False)
ASSIGN
"""
LATE_CASES: dict[str, tuple[str, str, list[str] | None]] = {
    "late_add_task": ('"@daily"', "dag.add_task(ingest)", ["'late'", "identity uses the data interval",
                                                           "schedule='@daily'", "CronDataIntervalTimetable"]),
    "late_dag_attribute": ('"0 3 * * *"', "ingest.dag = dag", ["'late'", "schedule='0 3 * * *'"]),
    "late_ok": ('CronDataIntervalTimetable("@daily", timezone="UTC")', "ingest.dag = dag", None),
}


def _dag_file(name: str, schedule: str, body: str) -> str:
    return HEADER + textwrap.dedent(f"""
        with DAG(dag_id={name!r}, schedule={schedule}, start_date=datetime(2026, 1, 1), catchup=False):
            {body}
        """)


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> tuple[AirflowEnv, dict[str, str], list[str]]:
    """The case files parsed by a real DagBag: (env, import errors by DAG file stem, DAG ids loaded)."""
    home = tmp_path_factory.mktemp("schedules") / "home"
    af = AirflowEnv(home)
    af.dags.mkdir(parents=True)
    for name, (schedule, body, _) in CASES.items():
        (af.dags / f"{name}.py").write_text(_dag_file(name, schedule, body))
    for name, (schedule, assign, _) in LATE_CASES.items():
        late = LATE.replace("NAME", repr(name)).replace("SCHEDULE", schedule).replace("ASSIGN", assign)
        (af.dags / f"{name}.py").write_text(HEADER + late)
    out = af.python(textwrap.dedent("""
        import json
        from pathlib import Path
        from airflow.dag_processing.dagbag import DagBag
        bag = DagBag()
        print(json.dumps({"errors": {Path(k).stem: v for k, v in bag.import_errors.items()},
                          "dags": sorted(bag.dags)}))
        """))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return af, result["errors"], result["dags"]


@pytest.mark.parametrize("name", sorted(CASES) + sorted(LATE_CASES))
def test_dag_files_with_empty_intervals_are_import_errors_naming_the_fix(
        parsed: tuple[AirflowEnv, dict[str, str], list[str]], name: str) -> None:
    _, errors, dags = parsed
    want = {**CASES, **LATE_CASES}[name][2]
    if want is None:
        assert name not in errors, errors.get(name)
        assert name in dags
    else:
        assert name in errors and name not in dags
        for words in want:
            assert words in errors[name], f"{words!r} not in:\n{errors[name]}"


def test_list_import_errors_shows_it(parsed: tuple[AirflowEnv, dict[str, str], list[str]]) -> None:
    af, _, _ = parsed
    af.airflow("db", "migrate", timeout=180)
    af.airflow("dags", "reserialize", timeout=180)
    listed = af.airflow("dags", "list-import-errors", "--output", "json", check=False)
    assert listed.returncode == 1  # the command fails when there are import errors (CI's use of it)
    out = listed.stdout
    errors = {Path(e["filepath"]).stem: e["error"] for e in json.loads(out[out.index("[{"):])}
    assert sorted(errors) == sorted(n for n, c in {**CASES, **LATE_CASES}.items() if c[2] is not None)
    assert "Task 'ingest' of DAG 'daily_interval_identity'" in errors["daily_interval_identity"]
    assert 'schedule=CronDataIntervalTimetable("@daily", timezone="UTC")' in errors["daily_interval_identity"]


def test_cron_data_interval_timetable_runs_interval_mode_under_dags_test(tmp_path: Path) -> None:
    """SqlSource interval mode with INTERVAL_IDENTITY on ``CronDataIntervalTimetable``: ``dags test
    <dag> 2026-01-03`` covers the day 2026-01-02, and reads exactly its rows."""
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, ts TIMESTAMP NOT NULL)")
        conn.executemany("INSERT INTO orders VALUES (?, ?)",  # as SQLAlchemy stores a naive datetime
                         [(d * 100 + h, f"2026-01-0{d} {h:02d}:30:00.000000") for d in (1, 2, 3) for h in range(24)])
    af = AirflowEnv(tmp_path / "home")
    af.dags.mkdir(parents=True)
    (af.dags / "interval_ok.py").write_text(HEADER + textwrap.dedent(f"""
        from airflow.sdk import task
        with DAG(dag_id="interval_ok", schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
                 start_date=datetime(2026, 1, 1), catchup=False):
            rows = PyConnectSourceOperator(task_id="rows", identity=INTERVAL_IDENTITY,
                                           connector_config={{**SQL, "connection.url": "sqlite:///{db}"}})

            @task
            def show(result, data_interval_start=None, data_interval_end=None):
                print("INTERVAL_RESULT " + __import__("json").dumps(
                    {{"records": result["records"], "start": data_interval_start.isoformat(),
                      "end": data_interval_end.isoformat()}}))

            show(rows.output)
        """))
    env = conn_env("pyconnect_default", f"sqlite:///{tmp_path / 'pc.db'}")
    af.airflow("db", "migrate", extra_env=env, timeout=180)
    out = af.airflow("dags", "test", "interval_ok", "2026-01-03", extra_env=env)
    text = out.stdout + out.stderr
    line = next(x for x in text.splitlines() if "INTERVAL_RESULT " in x)
    shown = json.loads(line.split("INTERVAL_RESULT ", 1)[1].split("}", 1)[0] + "}")
    assert shown == {"records": 24, "start": "2026-01-02T00:00:00+00:00", "end": "2026-01-03T00:00:00+00:00"}


CONCURRENCY_DAG = HEADER + """
from airflow.sdk import task
with DAG(dag_id="concurrency", schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
         start_date=datetime(2026, 1, 1), catchup=False):
    plain = PyConnectSourceOperator(task_id="plain", connector_config=FILES)
    scoped = PyConnectSourceOperator(task_id="scoped", connector_config=FILES, identity=INTERVAL_IDENTITY)
    empty = PyConnectSourceOperator(task_id="empty_identity", connector_config=FILES, identity="")
    explicit = PyConnectSourceOperator(task_id="explicit", connector_config=FILES, max_active_tis_per_dag=None)
    three = PyConnectSourceOperator(task_id="three", connector_config=FILES, identity=INTERVAL_IDENTITY,
                                    max_active_tis_per_dag=3)
    sink = PyConnectSinkOperator(task_id="sink", connector_config=SINK, until_offsets=plain.output)
    sink2 = PyConnectSinkOperator(task_id="sink_task_default", connector_config=SINK,
                                  default_args={"max_active_tis_per_dag": 2})
    fan = fan_out_source("fan", FILES)

with DAG(dag_id="concurrency_defaults", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={"max_active_tis_per_dag": 4}):
    PyConnectSourceOperator(task_id="plain", connector_config=FILES)
    PyConnectSinkOperator(task_id="sink", connector_config=SINK)
"""


def test_task_concurrency_defaults_as_the_scheduler_sees_them(tmp_path: Path) -> None:
    af = AirflowEnv(tmp_path / "home")
    af.dags.mkdir(parents=True)
    (af.dags / "concurrency.py").write_text(CONCURRENCY_DAG)
    out = af.python(textwrap.dedent("""
        import json
        from airflow.dag_processing.dagbag import DagBag
        from airflow.serialization.serialized_objects import DagSerialization
        bag = DagBag()
        assert not bag.import_errors, bag.import_errors
        found = {}
        for dag_id, dag in bag.dags.items():
            ser = DagSerialization.from_dict(DagSerialization.to_dict(dag))  # what the scheduler reads
            for t in ser.tasks:
                found[f"{dag_id}.{t.task_id}"] = [t.max_active_tis_per_dag, dag.get_task(t.task_id).max_active_tis_per_dag]
        print(json.dumps(found))
        """))
    found = json.loads(out.stdout.strip().splitlines()[-1])
    scheduler = {k: v[0] for k, v in found.items()}
    assert scheduler == {
        "concurrency.plain": 1,            # no identity: runs fence each other, so one at a time
        "concurrency.scoped": None,        # an identity per interval: intervals run in parallel
        "concurrency.empty_identity": 1,   # "" is no identity
        "concurrency.explicit": None,      # the user's explicit value wins
        "concurrency.three": 3,
        "concurrency.sink": 1,             # a sink connector has one identity
        "concurrency.sink_task_default": 2,
        "concurrency.fan_plan": None,
        "concurrency.fan": None,           # the mapped tasks of one generation run in parallel
        "concurrency.fan_merge": None,
        "concurrency_defaults.plain": 4,   # the DAG's default_args win
        "concurrency_defaults.sink": 4,
    }, found
    assert all(a == b for a, b in found.values()), found  # the DAG file's objects say the same


def test_checks_when_the_task_runs(tmp_path: Path) -> None:
    """A run with an empty interval fails at once naming the fix (a DAG the parse-time check could not
    judge, e.g. the task created outside it); a run without a logical date (``airflow dags trigger``
    without ``--logical-date``) fails its rendering with a message saying so, not Jinja's."""
    af = AirflowEnv(tmp_path / "home")
    af.dags.mkdir(parents=True)
    out = af.python(HEADER + textwrap.dedent("""
        import pendulum
        from airflow.sdk.exceptions import AirflowFailException

        op = PyConnectSourceOperator(task_id="ingest", connector_config=FILES, identity=INTERVAL_IDENTITY)
        at = pendulum.datetime(2026, 1, 2, tz="UTC")
        try:
            op.execute({"data_interval_start": at, "data_interval_end": at})
        except AirflowFailException as exc:
            print("EMPTY " + str(exc))

        with DAG(dag_id="manual", schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
                 start_date=datetime(2026, 1, 1)) as dag:
            src = PyConnectSourceOperator(task_id="ingest", connector_config=FILES, identity=INTERVAL_IDENTITY)

        class Run:
            run_id = "manual__2026-11-25T10:00:00+00:00"

        try:
            src.render_template_fields({"dag_run": Run(), "run_id": Run.run_id})
        except AirflowFailException as exc:
            print("NOLOGICAL " + str(exc))
        """))
    lines = {x.split(" ", 1)[0]: x.split(" ", 1)[1] for x in out.stdout.splitlines() if x.startswith(("EMPTY ", "NOLOGICAL "))}
    assert "identity uses the data interval, but this run's is empty (2026-01-02T00:00:00+00:00 to" in lines["EMPTY"]
    assert 'CronDataIntervalTimetable("@daily", timezone="UTC")' in lines["EMPTY"]
    assert "has no logical date" in lines["NOLOGICAL"]
    assert "`airflow backfill create --dag-id manual --from-date" in lines["NOLOGICAL"]
    assert "manual__2026-11-25T10:00:00+00:00" in lines["NOLOGICAL"]
