"""Secrets by type, under real Airflow, with a field named without any secret-looking word.

``signing.key`` is declared ``Type.PASSWORD`` by the test connector
(``tests/support/signed_connector.py``) and rendered from the Variable
``pc_plain_value`` (a name Airflow does not treat as secret). Its value must appear nowhere: not in
the task logs of ``airflow dags test``, not in the stored Rendered Templates, not in any XCom (the
fan-out plan included), not in ``airflow tasks render``. The same DAG run shows the idioms: a sink
bounded by ``src.output["ranges"]`` and a sensor on that FileSink's group failing at once with a
clear message (the sink keeps its offsets in its destination).

The last test: a missing ``pyconnect_default`` under an executor that may span machines is an error
naming the connection; an explicit setting allows the embedded default.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from connect_runtime.backends import open_backend
from connect_runtime.runtime.registry import Registry
from tests.support.airflow_env import AirflowEnv, conn_env, shared_airflow_env

pytestmark = pytest.mark.airflow

SECRET = "k7Qz-plain-looking-signature-material"
URL_PASSWORD = "url-pw-6e1f0b"  # inside connection.url's user-info
OPTIONS_SECRET = "opt-secret-93d2c4"  # inside storage.options' JSON
DAG_ID = "pyconnect_test_secrets"


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def _rows(home: Path, sql: str, *args: object) -> list[tuple]:
    db = sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True, timeout=10)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def test_a_password_field_with_a_harmless_name_never_shows(af: AirflowEnv, tmp_path: Path) -> None:
    env = {**conn_env("pyconnect_test", f"sqlite:///{tmp_path / 'pc.db'}"),
           "AIRFLOW_VAR_PC_PLAIN_VALUE": SECRET, "PYCONNECT_TEST_OUT": str(tmp_path / "out"),
           "AIRFLOW_VAR_PC_URL_PASSWORD": URL_PASSWORD, "AIRFLOW_VAR_PC_OPTIONS_SECRET": OPTIONS_SECRET}
    out = af.airflow("dags", "test", DAG_ID, extra_env=env, check=False)
    text = out.stdout + out.stderr
    assert SECRET not in text, "the signing key reached the task logs"
    assert URL_PASSWORD not in text, "the password inside connection.url reached the task logs"
    assert OPTIONS_SECRET not in text, "the secret inside storage.options reached the task logs"
    assert "cannot connect to postgresql+psycopg://svc:" in text, text[-4000:]  # the leaky error, masked
    assert "'signing.key': '[hidden]'" in text, text[-4000:]
    # the idioms: the sink ran up to src.output["ranges"]; the sensor on its group failed at once
    assert "Sink connector signed-archive delivered 40 records" in text, text[-4000:]
    assert "keeps its offsets in its destination" in text and "never commits" in text, text[-4000:]
    states = dict(_rows(af.home, "SELECT task_id || ':' || map_index, state FROM task_instance WHERE dag_id = ? "
                                  "AND run_id = (SELECT max(run_id) FROM dag_run WHERE dag_id = ?)", DAG_ID, DAG_ID))
    assert states == {"src:-1": "success", "fan_plan:-1": "success", "fan:0": "success", "fan:1": "success",
                      "fan_merge:-1": "success", "sink:-1": "success", "never:-1": "failed",
                      "leaky:-1": "failed", "typo:-1": "failed"}, states
    # a misspelt config key fails the task at once (a config error: its 3 retries are not used), naming the key meant
    assert "exactly.once.suport: unknown config key 'exactly.once.suport': did you mean 'exactly.once.support'?" \
        in text, text[-4000:]
    tries = _rows(af.home, "SELECT try_number FROM task_instance WHERE dag_id = ? AND task_id = 'typo'", DAG_ID)
    assert tries and max(t for (t,) in tries) == 1, tries

    rendered = _rows(af.home, "SELECT task_id, rendered_fields FROM rendered_task_instance_fields WHERE dag_id = ?",
                     DAG_ID)
    assert {t for t, _ in rendered} >= {"src", "fan_plan", "fan"}
    hidden = (SECRET, URL_PASSWORD, OPTIONS_SECRET)
    assert "leaky" in {t for t, _ in rendered}
    assert all(s not in str(fields) for _, fields in rendered for s in hidden), "a secret reached the Rendered Templates"
    xcoms = _rows(af.home, "SELECT task_id, key, value FROM xcom WHERE dag_id = ?", DAG_ID)
    assert xcoms and all(s not in str(value) for _, _, value in xcoms for s in hidden), "a secret reached XCom"
    # the run registry keeps the failed run's error for the Connectors view: masked there too
    with open_backend(f"sqlite:///{tmp_path / 'pc.db'}") as be:
        errors = [str(a.get("error")) for a in Registry(be).attempts("leaky")]
    assert errors and "cannot connect to" in errors[0], errors
    assert all(s not in e for e in errors for s in hidden), f"a secret reached the run registry: {errors}"
    plan = next(json.loads(v) for t, k, v in xcoms if t == "fan_plan" and k == "plan")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    assert all(task["config"]["signing.key"] == "[hidden:signing.key]" for task in plan["tasks"]), plan
    merged = next(json.loads(v) for t, k, v in xcoms if t == "fan_merge" and k == "return_value")
    merged = json.loads(merged) if isinstance(merged, str) else merged
    assert merged["tasks"] == 2 and merged["records"] == 40, merged

    shown = af.airflow("tasks", "render", DAG_ID, "src", "2026-01-01", extra_env=env)
    assert SECRET not in shown.stdout + shown.stderr, "airflow tasks render printed the key"
    assert "'signing.key': '[hidden]'" in shown.stdout, shown.stdout[-2000:]
    shown = af.airflow("tasks", "render", DAG_ID, "leaky", "2026-01-01", extra_env=env)
    assert all(s not in shown.stdout + shown.stderr for s in hidden), "airflow tasks render printed a secret"
    assert "postgresql+psycopg://svc:" in shown.stdout, shown.stdout[-2000:]


def test_missing_default_connection_outside_one_machine_names_the_connection(af: AirflowEnv) -> None:
    code = ("from airflow_pyconnect.hooks.pyconnect import PyConnectHook\n"
            "try:\n    print('URL', PyConnectHook().backend_config()[0])\n"
            "except Exception as exc:\n    print('ERROR', type(exc).__name__, exc)\n")
    celery = af.python(code, extra_env={"AIRFLOW__CORE__EXECUTOR": "CeleryExecutor"}).stdout
    assert "ERROR AirflowNotFoundException The pyconnect connection 'pyconnect_default' is not defined" in celery
    assert "CeleryExecutor" in celery and "allow_embedded_default" in celery
    allowed = af.python(code, extra_env={"AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                                         "AIRFLOW__PYCONNECT__ALLOW_EMBEDDED_DEFAULT": "True"}).stdout
    local = af.python(code, extra_env={"AIRFLOW__CORE__EXECUTOR": "LocalExecutor"}).stdout
    for shown in (allowed, local):
        urls = [line for line in shown.splitlines() if line.startswith("URL ")]
        assert len(urls) == 1 and urls[0].startswith("URL sqlite:///"), shown
        assert urls[0].endswith("pyconnect/pyconnect.db"), shown
