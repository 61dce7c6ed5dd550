"""The Connectors plugin's import cost, probed in a fresh interpreter: loading it builds no app until the API
server asks, and parsing a DAG loads only its link."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import REPO


def _modules_after(code: str, prefix: str) -> list[str]:
    probe = code + f"\nimport sys, json\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith({prefix!r}))))\n"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_loading_the_plugin_builds_no_app_until_the_api_server_asks() -> None:
    loaded = _modules_after("import airflow_pyconnect.plugins.connectors", "airflow_pyconnect.plugins")
    assert loaded == ["airflow_pyconnect.plugins", "airflow_pyconnect.plugins.connectors",
                      "airflow_pyconnect.plugins.links", "airflow_pyconnect.plugins.view"]
    loaded = _modules_after(
        "from airflow_pyconnect.plugins.view import PyConnectPlugin\n"
        "(app,) = PyConnectPlugin.fastapi_apps\n"
        "assert app['url_prefix'] == '/pyconnect' and PyConnectPlugin.fastapi_apps[0] is app\n"
        "assert {r.path for r in app['app'].routes} >= {'/ui', '/api/connections', '/api/connections/{conn_id}',"
        " '/api/connections/{conn_id}/runs', '/api/connections/{conn_id}/connectors/{name}/offsets'}",
        "airflow_pyconnect.plugins")
    assert "airflow_pyconnect.plugins.app" in loaded  # the probe does see the app when it is built


def test_parsing_a_dag_loads_only_the_link_of_the_plugin() -> None:
    dag_file = REPO / "dags" / "example_pyconnect_backfill.py"
    loaded = _modules_after(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('example_dag', {str(dag_file)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "assert module.dag.get_task('ingest').operator_extra_links",
        "airflow_pyconnect.plugins")
    assert loaded == ["airflow_pyconnect.plugins", "airflow_pyconnect.plugins.links"]
