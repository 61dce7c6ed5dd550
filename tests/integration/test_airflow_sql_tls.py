"""The SQL connectors over TLS under real Airflow (``airflow dags test``): the connector fields come from Airflow
``postgres`` connections with the Postgres provider's TLS extras (``sslmode``, ``sslrootcert``) through
``airflow_pyconnect.sql.sql_connection_config`` (tests/support/dag_files/pyconnect_test_sql_tls.py). Rows move once
with ``sslmode=verify-full`` and SCRAM; the task with a wrong password fails at its first connection attempt naming
the server and the cause; neither password reaches the task logs, the rendered templates or XCom."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.airflow_env import AirflowEnv, conn_env, metadata_rows, shared_airflow_env
from tests.support.postgres import TlsCluster

pytestmark = pytest.mark.airflow

DAG_ID = "pyconnect_test_sql_tls"
WRONG_PASSWORD = "af-wrong-pw-0c93b7"


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def _conn(tls: TlsCluster, password: str) -> str:
    return json.dumps({"conn_type": "postgres", "host": tls.host, "port": tls.port, "schema": tls.database,
                       "login": tls.user, "password": password,
                       "extra": {"sslmode": "verify-full", "sslrootcert": str(tls.ca)}})


def test_airflow_connections_with_tls_extras_move_rows_and_a_wrong_password_fails_at_once(
        af: AirflowEnv, tls_postgres: TlsCluster, tmp_path: Path) -> None:
    tls = tls_postgres
    with tls.admin() as conn:
        conn.execute(f"SET ROLE {tls.user}")
        conn.execute("CREATE TABLE af_orders (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)")
        conn.execute("INSERT INTO af_orders SELECT i, i * 3 FROM generate_series(1, 40) i")
    env = {**conn_env("pyconnect_test", f"sqlite:///{tmp_path / 'pc.db'}"),
           "AIRFLOW_CONN_PYCONNECT_TEST_PG_TLS": _conn(tls, tls.password),
           "AIRFLOW_CONN_PYCONNECT_TEST_PG_BAD": _conn(tls, WRONG_PASSWORD)}
    mark = tls.log_size()
    out = af.airflow("dags", "test", DAG_ID, extra_env=env, check=False)
    text = out.stdout + out.stderr

    states = dict(metadata_rows(af.home, "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = "
                                 "(SELECT max(run_id) FROM dag_run WHERE dag_id = ?)", DAG_ID, DAG_ID))
    assert states == {"src": "success", "sink": "success", "bad": "failed"}, (states, text[-4000:])
    with tls.admin() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT id), sum(amount) FROM af_copy").fetchone() == (
            40, 40, 3 * 40 * 41 // 2)
    authorized = [line for line in tls.log_since(mark).splitlines() if "connection authorized: user=app_tls" in line]
    assert authorized and all("SSL enabled" in line for line in authorized)

    # (connection.user is a PASSWORD field: Airflow masks the user name too)
    failed = [line for line in text.splitlines() if "cannot connect to the PostgreSQL server" in line]
    assert failed and all(f"server 127.0.0.1:{tls.port}, database 'shop_tls'" in line and "for discovering "
                          "tables: authentication failed (FATAL: password authentication failed for user" in line
                          and "not retried" in line for line in failed), failed or text[-4000:]
    assert "attempt 1 of" not in text, "the refusal was retried inside the task"
    assert tls.log_since(mark).count("password authentication failed for user") == 1

    for secret in (tls.password, WRONG_PASSWORD):
        assert secret not in text, "a password reached the task logs"
        rendered = metadata_rows(af.home, "SELECT task_id, rendered_fields FROM rendered_task_instance_fields "
                                  "WHERE dag_id = ?", DAG_ID)
        assert {t for t, _ in rendered} >= {"src", "sink", "bad"}
        assert all(secret not in str(fields) for _, fields in rendered), "a password reached the Rendered Templates"
        xcoms = metadata_rows(af.home, "SELECT task_id, key, value FROM xcom WHERE dag_id = ?", DAG_ID)
        assert xcoms and all(secret not in str(v) for _, _, v in xcoms), "a password reached XCom"
    rendered_src = next(json.loads(f) for t, f in rendered if t == "src")
    assert "sslmode" in json.dumps(rendered_src) and "verify-full" in json.dumps(rendered_src)
