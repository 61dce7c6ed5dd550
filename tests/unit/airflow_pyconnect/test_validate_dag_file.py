"""``python -m airflow_pyconnect.validate DAG.py`` (and ``pyconnect validate DAG.py``): every pyconnect task's
connector config of a real DAG file, parsed with Airflow's DagBag, checked without running anything."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_pyconnect.validate import main, validate_dag_file

HEAD = """
from datetime import datetime
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable
from airflow_pyconnect.operators.source import PyConnectSourceOperator
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.fanout import PyConnectSourceTaskOperator
"""


def dag_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "my_dag.py"
    path.write_text(HEAD + textwrap.dedent(body))
    return str(path)


DAILY = """
with DAG(dag_id="daily", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False):
    PyConnectSourceOperator(task_id="ingest", connector_config={
        "name": "orders", "connector.class": "connect_runtime.connectors.files.DirectorySource",
        "directory": "/no/such/root/{{ ds }}", "topic": "orders", "batch.size": "0", "patern": "*.csv"})
    PyConnectSinkOperator(task_id="load", connector_config={
        "name": "orders-db", "connector.class": "connect_runtime.connectors.sql.SqlSink", "topics": "orders",
        "connection.url": "postgresql://u:pw-s3cret@db/dw", "batch.size": "{{ ti.xcom_pull('x') }}",
        "insert.mode": "merge"})
    PyConnectSinkOperator(task_id="fine", connector_config={
        "name": "ok", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "orders",
        "directory": "/tmp"})
"""


def test_every_task_is_checked_and_every_error_named(tmp_path: Path) -> None:
    reports, import_errors = validate_dag_file(dag_file(tmp_path, DAILY), datetime(2026, 11, 28, tzinfo=UTC))
    assert import_errors == {}
    by_task = {r.task_id: r for r in reports}
    assert set(by_task) == {"ingest", "load", "fine"}
    ingest = by_task["ingest"]
    assert ingest.connector_class == "connect_runtime.connectors.files.DirectorySource"
    assert set(ingest.errors) == {"batch.size", "patern"}
    assert "at least 1" in ingest.errors["batch.size"] and "did you mean 'pattern'" in ingest.errors["patern"]
    # a templated field is rendered for the sample run, and its errors are warnings (it depends on the run)
    assert any(w.startswith("directory: ") and "/no/such/root/2026-11-28" in w and "depends on the run" in w
               for w in ingest.warnings), ingest.warnings
    load = by_task["load"]
    assert set(load.errors) == {"insert.mode"}  # batch.size cannot render (ti): a note, no error
    assert any("batch.size" in n and "'ti' is undefined" in n for n in load.notes), load.notes
    assert by_task["fine"].errors == {} and by_task["fine"].warnings == []


def test_main_prints_per_task_and_exits_1_without_leaking_the_password(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([dag_file(tmp_path, DAILY), "--date", "2026-11-28"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "daily.ingest (DirectorySource): invalid: 2 fields" in out
    assert "  batch.size: expected a value of at least 1, got 0" in out
    assert "daily.fine (FileSink): OK" in out and "3 tasks checked, 2 with errors" in out
    assert "pw-s3cret" not in out
    assert "Filling up the DagBag" not in out  # Airflow's own log lines stay off the report


def test_data_interval_templates_render_from_the_timetable_and_a_clean_file_exits_0(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = """
    with DAG(dag_id="intervals", schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
             start_date=datetime(2026, 1, 1), catchup=False):
        PyConnectSourceOperator(task_id="rows", connector_config={
            "name": "rows", "connector.class": "connect_runtime.connectors.sql.SqlSource",
            "connection.url": "sqlite:////tmp/none.db", "mode": "timestamp", "timestamp.column.name": "ts",
            "interval.start": "{{ data_interval_start.isoformat() }}",
            "interval.end": "{{ data_interval_start.isoformat() }}"})
    """
    reports, _ = validate_dag_file(dag_file(tmp_path, body), datetime(2026, 11, 28, tzinfo=UTC))
    (rows,) = reports
    # rendered for the run of 2026-11-28: start == end is refused, as a warning (both fields are templated)
    assert rows.errors == {}
    assert any("interval.end" in w and "2026-11-28T00:00:00+00:00" in w for w in rows.warnings), rows.warnings
    body = body.replace('"interval.end": "{{ data_interval_start.isoformat() }}"',
                        '"interval.end": "{{ data_interval_end.isoformat() }}"')
    assert main([dag_file(tmp_path, body), "--date", "2026-11-28"]) == 0
    assert "intervals.rows (SqlSource): OK" in capsys.readouterr().out


def test_mapped_tasks_and_whole_config_templates(tmp_path: Path) -> None:
    body = """
    with DAG(dag_id="mapped", schedule=None, start_date=datetime(2026, 1, 1)):
        PyConnectSourceTaskOperator.partial(task_id="part", plan={}, connector_config={
            "name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
            "max.records": "-5"}).expand(task_index=[0, 1])
        PyConnectSourceOperator(task_id="whole", connector_config="{{ ti.xcom_pull('plan') }}")
    """
    reports, import_errors = validate_dag_file(dag_file(tmp_path, body))
    assert import_errors == {}
    by_task = {r.task_id: r for r in reports}
    assert set(by_task["part"].errors) == {"topic", "max.records"}
    assert by_task["whole"].errors == {} and "not checked" in by_task["whole"].notes[0]


def test_a_file_that_does_not_import_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([dag_file(tmp_path, "raise RuntimeError('broken on purpose')\n")]) == 1
    assert "does not import" in capsys.readouterr().out


def test_a_file_without_pyconnect_tasks_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([dag_file(tmp_path, 'DAG(dag_id="none", schedule=None, start_date=datetime(2026, 1, 1))\n')]) == 0
    assert "no pyconnect task found" in capsys.readouterr().out


FANOUT = """
from airflow_pyconnect.operators.fanout import fan_out_source
from airflow_pyconnect.operators.fanout_sink import fan_out_sink

with DAG(dag_id="fanned", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    merged = fan_out_source("gen", {"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                                    "topic": "orders", "tasks.max": "2"})
    fan_out_sink("files", {"name": "files", "connector.class": "connect_runtime.connectors.files.FileSink",
                           "topics": "orders", "tasks.max": "2", "directory": "/tmp", "fsync": "flase"},
                 until_offsets=merged.output)
"""


def test_a_fan_out_checks_its_plan_and_mapped_tasks_and_not_its_merge_tasks(tmp_path: Path) -> None:
    reports, import_errors = validate_dag_file(dag_file(tmp_path, FANOUT), datetime(2026, 11, 28, tzinfo=UTC))
    assert import_errors == {}
    by_task = {r.task_id: r for r in reports}
    assert set(by_task) == {"gen_plan", "gen", "files_plan", "files"}
    assert by_task["gen"].errors == {} and set(by_task["files"].errors) == {"fsync"}
