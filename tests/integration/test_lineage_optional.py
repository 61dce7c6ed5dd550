"""OpenLineage is an optional extra (``airflow-pyconnect[lineage]``, docs/lineage.md): a DAG file imports none of it,
and without the provider the example DAG parses, ``spark_submit_kwargs`` asks no injection of the Spark operator,
and a lineage method says which extra to install. Each case is a fresh interpreter (what is imported is the point),
the provider hidden there, once Airflow started, by ``sys.modules`` entries of ``None`` (an import of it then fails
as if it were not installed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]

_SCRIPT = r'''
import importlib.util, json, sys
import airflow.sdk  # Airflow's start-up, its provider discovery included (which reads the installed manifests)
if HIDE:  # from here on, as if not installed: an import of it raises ModuleNotFoundError
    for name in [m for m in sys.modules if m.startswith(("openlineage", "airflow.providers.openlineage"))]:
        del sys.modules[name]
    for name in ("openlineage", "openlineage.client", "airflow.providers.openlineage"):
        sys.modules[name] = None
DISCOVERY = {"airflow.providers.openlineage", "airflow.providers.openlineage.get_provider_info"}
def loaded():  # Airflow's provider discovery reads every provider's manifest: that is not an import of ours
    return sorted(m for m in sys.modules if m.startswith(("openlineage", "airflow.providers.openlineage"))
                  and sys.modules[m] is not None and m not in DISCOVERY)
import airflow_pyconnect.assets, airflow_pyconnect.spark, airflow_pyconnect.sensors.offsets
import airflow_pyconnect.operators.fanout, airflow_pyconnect.operators.fanout_sink
from airflow_pyconnect.operators.source import PyConnectSourceOperator
PyConnectSourceOperator(task_id="i", connector_config={"name": "n", "connector.class": "x", "topic": "orders"})
out = {"loaded": loaded()}  # what a DAG file of pyconnect tasks imports (an outlet asset checked by its scheme)
out["ours"] = sorted(m for m in sys.modules if m.startswith("airflow_pyconnect.lineage"))
# the example DAG (its SparkSubmitOperator's provider imports OpenLineage's when it is installed: not ours)
spec = importlib.util.spec_from_file_location("example_dag", DAG_FILE)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)  # what the DAG processor does
out["example_tasks"] = sorted(t.task_id for t in module.example_orders_pipeline().tasks)
from airflow_pyconnect.spark import spark_submit_kwargs
out["inject"] = spark_submit_kwargs("handoff").get("openlineage_inject_parent_job_info")
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
op = PyConnectSinkOperator(task_id="s", connector_config={"name": "n", "connector.class": "x", "topics": "t"})
op._lineage_result = {"connector": "n", "records": 0}
try:
    op.get_openlineage_facets_on_complete(None)
    out["error"] = None
except ImportError as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
print("RESULT " + json.dumps(out))
'''


def _run(hide: bool) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    script = f"HIDE = {hide!r}\nDAG_FILE = {str(REPO / 'dags' / 'example_orders_pipeline.py')!r}\n" + _SCRIPT
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, proc.stdout[-2000:] + proc.stderr[-2000:]
    return dict(json.loads(line[-1][len("RESULT "):]))


def test_a_dag_file_imports_no_openlineage_and_works_without_the_provider() -> None:
    present = _run(hide=False)
    assert present["loaded"] == []  # the provider's modules import nothing of OpenLineage
    assert present["ours"] == []  # nor their own lineage package (its converter is imported when called)
    assert present["inject"] is True  # the provider installed: the Spark task passes its parent job
    absent = _run(hide=True)
    assert absent["loaded"] == [] and absent["inject"] is None
    assert absent["example_tasks"] == present["example_tasks"] == [
        "archive", "day_files", "handoff", "ingest", "input_complete", "lake", "totals"]
    assert absent["error"] is not None and "pip install 'airflow-pyconnect[lineage]'" in str(absent["error"])
    assert str(absent["error"]).startswith("MissingExtraError")
