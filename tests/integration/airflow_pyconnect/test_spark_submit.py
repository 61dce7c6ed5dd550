"""airflow_pyconnect.spark in real processes: the helper and the example DAGs import nothing heavy (a fresh
interpreter each), and a real DAG under `airflow dags test` (temporary AIRFLOW_HOME) whose SparkSubmitOperator
runs a real spark-submit of a tiny application that records its argv and environment, with a PATH that does not
hold the virtualenv: the rendered arguments and the environment are what the application actually received."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import REPO


def test_helper_module_is_cheap_to_import() -> None:
    """No pyspark, backend, nor Spark provider operator or hook. Airflow itself is imported: the package's
    minimum-Airflow check reads ``airflow.__version__``, as every official provider's ``__init__`` does (and
    Airflow's start-up then reads the Spark provider's manifest, its package ``__init__`` only)."""
    code = ("import sys, airflow_pyconnect.spark; "
            "bad = [m for m in ('pyspark', 'connect_runtime.backends', 'airflow.providers.apache.spark.operators', "
            "'airflow.providers.apache.spark.hooks') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr


_APP = '''
import json, os, sys
out = sys.argv[sys.argv.index("--out") + 1]
with open(out, "w") as f:
    json.dump({"argv": sys.argv[1:], "python": sys.executable, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON"),
               "PATH": os.environ.get("PATH")}, f)
'''


_DAG = '''
from datetime import datetime

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import dag, task

from airflow_pyconnect.spark import spark_handoff, spark_submit_kwargs


@dag(dag_id="helper_check", schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def helper_check():
    @task
    def ingest():
        # the shape of PyConnectSourceOperator's XCom
        return {{"connector": "orders-files", "records": 3, "ranges": {{"orders": {{"0": [5, 8], "1": [0, 2]}}}},
                "source_offsets": [], "transactions": 1, "filtered": 0, "skipped": 0, "seconds": 0.1}}

    @task
    def handoff(result):
        return spark_handoff(result)

    h = handoff(ingest())
    h >> SparkSubmitOperator(task_id="spark", application={app!r}, name="helper_check",
                             **spark_submit_kwargs("handoff", args=["--date", "{{{{ ds }}}}", "--out", {out!r}],
                                                   conf={{"spark.ui.enabled": "false"}}))


helper_check()
'''


@pytest.mark.airflow
@pytest.mark.spark
@pytest.mark.timeout(600)
def test_spark_submit_operator_receives_the_rendered_ranges_backend_and_environment(tmp_path: Path) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    app, out = tmp_path / "app.py", tmp_path / "received.json"
    app.write_text(_APP)
    (dags / "helper_check.py").write_text(textwrap.dedent(_DAG.format(app=str(app), out=str(out))))
    home = tmp_path / "airflow"
    home.mkdir()
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYSPARK"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"})})
    airflow = str(Path(sys.executable).with_name("airflow"))
    for args, timeout in ((["db", "migrate"], 300), (["dags", "test", "helper_check", "2026-01-05"], 400)):
        proc = subprocess.run([airflow, *args], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=timeout, check=False)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert "state=success" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-6000:]
    received = json.loads(out.read_text())
    argv = received["argv"]
    assert argv[argv.index("--backend") + 1] == f"sqlite:///{home / 'pyconnect' / 'pyconnect.db'}"
    assert json.loads(argv[argv.index("--ranges") + 1]) == {"orders": {"0": [5, 8], "1": [0, 2]}}
    assert argv[argv.index("--date") + 1] == "2026-01-05"
    assert received["PYSPARK_PYTHON"] == received["python"] == sys.executable
    assert received["PATH"].split(os.pathsep)[0] == venv_bin


def test_example_dags_parse_without_heavy_imports() -> None:
    heavy = ("pyspark", "confluent_kafka", "connect_runtime.backends.sqlite", "connect_runtime.runtime",
             "connect_runtime.connectors", "connect_runtime.spark")
    code = textwrap.dedent(f"""
        import importlib.util, json, sys, time
        t0 = time.monotonic()
        tasks = {{}}
        for name in ("example_orders_pipeline", "example_orders_downstream"):
            spec = importlib.util.spec_from_file_location(name, {str(REPO / 'dags')!r} + "/" + name + ".py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            dag = getattr(module, name)()
            tasks[name] = sorted(dag.task_ids)
        heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in {heavy!r}))
        print(json.dumps({{"tasks": tasks, "heavy": heavy, "seconds": time.monotonic() - t0}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    assert result["tasks"] == {
        "example_orders_pipeline": ["archive", "day_files", "handoff", "ingest", "input_complete", "lake", "totals"],
        "example_orders_downstream": ["order_stats"],
    }
