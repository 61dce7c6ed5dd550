"""``pyconnect validate DAG_FILE.py`` through the installed console script: the provider's validator in a child
process, its report and exit code passed through; a config file keeps working beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.airflow

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))

DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_pyconnect.operators.source import PyConnectSourceOperator

with DAG(dag_id="first_day", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False):
    PyConnectSourceOperator(task_id="ingest", on_empty="{on_empty}", connector_config={{
        "name": "orders", "connector.class": "connect_runtime.connectors.files.DirectorySource",
        "directory": "{root}/{{{{ ds }}}}", "topic": "orders", "batch.size": "{batch}"}})
"""


def pyconnect(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    return subprocess.run([PYCONNECT, *args], env=env, capture_output=True, text=True, timeout=180, cwd=home)


def test_validate_a_dag_file_names_each_bad_field_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "2026-11-28").mkdir()
    bad = tmp_path / "bad_dag.py"
    bad.write_text(DAG.format(root=tmp_path, batch="0", on_empty="warn"))
    out = pyconnect("validate", str(bad), "--date", "2026-11-28", home=tmp_path)
    assert out.returncode == 1, out
    assert "first_day.ingest (DirectorySource): invalid: 1 field\n  batch.size: expected a value of at least 1, got 0" \
        in out.stdout, out.stdout

    good = tmp_path / "good_dag.py"
    good.write_text(DAG.format(root=tmp_path, batch="100", on_empty="fail"))
    out = pyconnect("validate", str(good), "--date", "2026-11-28", home=tmp_path)
    assert out.returncode == 0, out
    assert "first_day.ingest (DirectorySource): OK" in out.stdout and "1 task checked: OK" in out.stdout
    # another day's folder does not exist yet: a warning (it depends on the run), not an error
    out = pyconnect("validate", str(good), "--date", "2026-11-29", home=tmp_path)
    assert out.returncode == 0, out
    assert "warning: directory: expected an existing directory" in out.stdout and "2026-11-29" in out.stdout
