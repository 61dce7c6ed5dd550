"""The provider as the real Airflow CLI sees it: listed, its hook and connection type known, its
connection testable. (Each example DAG of ``dags/`` imports without errors and runs: tests/system/pyconnect.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connect_runtime.backends import open_backend
from tests.support.airflow_env import AirflowEnv, shared_airflow_env

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def af(tmp_path_factory: pytest.TempPathFactory) -> AirflowEnv:
    return shared_airflow_env(tmp_path_factory)


def test_providers_list_shows_the_provider(af: AirflowEnv) -> None:
    rows = json.loads(af.airflow("providers", "list", "-o", "json").stdout.strip().splitlines()[-1])
    mine = [r for r in rows if r["package_name"] == "airflow-pyconnect"]
    assert mine and mine[0]["version"] == "0.1.0", rows


def test_providers_hooks_knows_the_pyconnect_connection_type(af: AirflowEnv) -> None:
    rows = json.loads(af.airflow("providers", "hooks", "-o", "json").stdout.strip().splitlines()[-1])
    mine = [r for r in rows if r["connection_type"] == "pyconnect"]
    assert mine == [{"connection_type": "pyconnect", "class": "airflow_pyconnect.hooks.pyconnect.PyConnectHook",
                     "conn_id_attribute_name": "pyconnect_conn_id", "package_name": "airflow-pyconnect",
                     "hook_name": "PyConnect"}] or (mine and mine[0]["class"].endswith("PyConnectHook")), rows


def test_triggers_are_listed(af: AirflowEnv) -> None:
    out = af.airflow("providers", "triggers", "-o", "json").stdout.strip().splitlines()[-1]
    assert any(r.get("package_name") == "airflow-pyconnect" for r in json.loads(out)), out


def test_connection_of_type_pyconnect_is_added_and_tested(af: AirflowEnv, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    af.airflow("connections", "add", "pc_cli", "--conn-type", "pyconnect", "--conn-host", url,
               "--conn-extra", json.dumps({"busy.timeout.ms": 3000}))
    try:
        got = json.loads(af.airflow("connections", "get", "pc_cli", "-o", "json").stdout.strip().splitlines()[-1])
        assert got[0]["conn_type"] == "pyconnect" and got[0]["host"] == url
        enabled = {"AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}
        # the Test button opens the store read-only: a store not yet created fails, naming it, and stays absent
        missing = af.airflow("connections", "test", "pc_cli", check=False, extra_env=enabled)
        assert "Connection failed" in missing.stdout + missing.stderr, missing.stdout + missing.stderr
        assert "cli.db" in missing.stdout + missing.stderr and "no such file" in missing.stdout + missing.stderr
        assert not (tmp_path / "cli.db").exists(), "the hook's test_connection created the store"
        open_backend(url).close()  # the store a first run creates
        tested = af.airflow("connections", "test", "pc_cli", extra_env=enabled)
        assert "Connection success!" in tested.stdout, tested.stdout + tested.stderr
    finally:
        af.airflow("connections", "delete", "pc_cli")


def test_connection_test_reports_an_unreachable_backend(af: AirflowEnv, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    bad = {"AIRFLOW_CONN_PC_CLI_BAD": json.dumps({"conn_type": "pyconnect",
                                                  "host": f"sqlite:///{tmp_path / 'a-file' / 'cli.db'}"}),
           "AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}
    tested = af.airflow("connections", "test", "pc_cli_bad", check=False, extra_env=bad)
    assert "Connection failed" in tested.stdout + tested.stderr


def test_providers_manager_has_the_connection_form_without_importing_wtforms(af: AirflowEnv) -> None:
    code = (
        "import json, sys\n"
        "from airflow.providers_manager import ProvidersManager\n"
        "pm = ProvidersManager()\n"
        "hook = pm.hooks['pyconnect']\n"
        "widgets = sorted(k for k in pm.connection_form_widgets if k.startswith('extra__pyconnect__'))\n"
        "print(json.dumps({'hook': [hook.hook_class_name, hook.connection_id_attribute_name, hook.hook_name],"
        " 'behaviour': pm.field_behaviours['pyconnect'], 'widgets': widgets,"
        " 'wtforms': 'wtforms' in sys.modules}))\n"
    )
    got = json.loads(af.python(code).stdout.strip().splitlines()[-1])
    assert got["hook"] == ["airflow_pyconnect.hooks.pyconnect.PyConnectHook", "pyconnect_conn_id", "PyConnect"]
    assert got["behaviour"]["hidden_fields"] == ["schema"]  # port is read, so it is shown (issue 11)
    assert got["behaviour"]["relabeling"]["host"] == "Backend URL or Kafka bootstrap servers"
    assert got["widgets"] == ["extra__pyconnect__sasl_mechanism", "extra__pyconnect__security_protocol"]
    assert got["wtforms"] is False
