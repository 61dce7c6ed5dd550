"""Parse time stays light: importing the provider or a DAG using it loads no Kafka, Spark, backend
or connector code (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import REPO

HEAVY = ("confluent_kafka", "pyspark", "connect_runtime.backends.sqlite", "connect_runtime.backends.kafka",
         "connect_runtime.connectors", "connect_runtime.runtime", "connect_runtime.spark", "wtforms",
         "flask_appbuilder")


def _loaded_after(code: str) -> list[str]:
    probe = code + (
        "\nimport sys, json\n"
        f"print(json.dumps(sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in {HEAVY!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_provider_modules_import_nothing_heavy() -> None:
    assert _loaded_after(
        "import airflow_pyconnect, airflow_pyconnect.get_provider_info, airflow_pyconnect.hooks.pyconnect, "
        "airflow_pyconnect.operators.source, airflow_pyconnect.operators.sink, airflow_pyconnect.sensors.offsets, "
        "airflow_pyconnect.triggers.offsets, airflow_pyconnect.triggers.committed, airflow_pyconnect.assets\n"
        "airflow_pyconnect.get_provider_info.get_provider_info()"
    ) == []


def test_parsing_the_example_dag_imports_nothing_heavy() -> None:
    dag_file = REPO / "dags" / "example_pyconnect_backfill.py"
    assert _loaded_after(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('example_dag', {str(dag_file)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "assert sorted(module.dag.task_ids) == ['archive', 'ingest', 'land_orders'], module.dag.task_ids"
    ) == []


def test_the_probe_does_see_heavy_imports() -> None:
    # the check above can fail: importing a backend is seen
    assert "connect_runtime.backends.sqlite" in _loaded_after("import connect_runtime.backends.sqlite")


def test_parsing_every_example_dag_imports_nothing_heavy() -> None:
    files = sorted((REPO / "dags").glob("*.py"))
    assert len(files) >= 6
    code = "import importlib.util\n" + "".join(
        f"spec = importlib.util.spec_from_file_location('dag_{i}', {str(f)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        for i, f in enumerate(files))
    assert _loaded_after(code) == []
