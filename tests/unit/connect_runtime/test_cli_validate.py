"""``pyconnect validate``'s DAG-file form, from the runtime's side: it needs Airflow and the provider, and says so;
``--date`` belongs to a DAG file. (The DAG-file validation itself: tests/unit/airflow_pyconnect/
test_validate_dag_file.py; through the real CLI: tests/integration/test_cli_validate_dag.py.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.cli import main


def test_a_dag_file_without_airflow_is_one_error_saying_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "airflow" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    dag = tmp_path / "my_dag.py"
    dag.write_text("raise SystemExit('never imported')\n")
    assert main(["validate", str(dag)]) == 1
    err = capsys.readouterr().err
    assert "needs Airflow and the provider (airflow is not installed)" in err
    assert "airflow-pyconnect[airflow]" in err


def test_date_applies_to_a_dag_file_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.json"
    config.write_text('{"name": "x", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", '
                      '"topic": "t"}')
    assert main(["validate", str(config), "--date", "2026-11-28"]) == 2
    assert "--date applies to a DAG file" in capsys.readouterr().err
    assert main(["validate", str(config)]) == 0
