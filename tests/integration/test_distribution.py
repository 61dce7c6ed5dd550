"""The distribution as a user installs it: its wheel and sdist (built with uv, as ``uv build`` does), the LICENSE
in both, and the provider installed without the ``airflow`` extra, alone and beside an Airflow older than the
minimum, in a throwaway virtualenv: Airflow and its commands keep working and the provider says once why it
registered nothing.

Both tests need uv (in the virtualenv's ``bin/``) and the package registry, or uv's cache holding what they
install; without them they skip, naming what failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support import REPO, unavailable

OLDER_AIRFLOWS = ["3.2.2", "2.10.5"]
"""Airflow releases older than ``airflow_pyconnect.MIN_AIRFLOW_VERSION``: the last 3.x before it, and Airflow 2."""

_OFFLINE = ("Failed to fetch", "failed to lookup address", "dns error", "Connection refused", "Network is unreachable",
            "error sending request", "Could not connect", "offline")

UV = Path(sys.executable).parent / "uv"


def _uv(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run uv; a missing uv or an unreachable registry (uv's words for it) skips the test, printing why, and fails it in
    CI (tests.support.unavailable)."""
    if not UV.exists():
        unavailable(f"uv is not installed next to {sys.executable}", "scripts/bootstrap.sh installs it")
    out = subprocess.run([str(UV), *args], capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "UV_NO_PROGRESS": "1"})
    if out.returncode != 0 and any(word in out.stderr for word in _OFFLINE):
        unavailable(f"uv {args[0]} could not reach the package registry: {out.stderr.strip()[-300:]}",
                    "CI installs from the same registry")
    assert out.returncode == 0, f"uv {' '.join(args)}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and the sdist of this checkout (built in isolation, as uv builds them for an index)."""
    out = tmp_path_factory.mktemp("dist")
    _uv("build", "--quiet", "--out-dir", str(out), str(REPO), timeout=300)
    return out


def test_the_wheel_and_the_sdist_hold_the_license(dist: Path) -> None:
    """LICENSE (the Apache License 2.0, as the providers ship it) is in the repository, the wheel and the sdist,
    and the metadata names it with the SPDX expression; the wheel declares the three entry points (provider
    manifest, plugin, cluster policy)."""
    import tarfile

    license_text = (REPO / "LICENSE").read_text()
    assert license_text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in license_text
    (wheel,) = dist.glob("airflow_pyconnect-*.whl")
    (sdist,) = dist.glob("airflow_pyconnect-*.tar.gz")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (in_wheel,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert zf.read(in_wheel).decode() == license_text
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = zf.read(metadata).decode().split("\n\n", 1)[0].splitlines()
    assert "License-Expression: Apache-2.0" in headers and "License-File: LICENSE" in headers, headers
    assert not [h for h in headers if h.startswith("Classifier: License ::")], "the SPDX field replaces it"
    with zipfile.ZipFile(wheel) as zf:
        (points,) = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        declared = zf.read(points).decode()
    for entry in ("[apache_airflow_provider]\nprovider_info = airflow_pyconnect.get_provider_info:get_provider_info",
                  "[airflow.plugins]\npyconnect = airflow_pyconnect.plugins.connectors:ENTRY_POINT_PLUGIN",
                  "[airflow.policy]\npyconnect = airflow_pyconnect.policy"):
        assert entry in declared, declared
    with tarfile.open(sdist) as tf:
        (in_sdist,) = [m for m in tf.getmembers() if m.name.count("/") == 1 and m.name.endswith("/LICENSE")]
        extracted = tf.extractfile(in_sdist)
        assert extracted is not None and extracted.read().decode() == license_text


_NO_AIRFLOW = """
import json, connect_runtime
from airflow_pyconnect.get_provider_info import get_provider_info
from airflow_pyconnect.plugins.connectors import ENTRY_POINT_PLUGIN
print(json.dumps({"info": get_provider_info(), "plugin": ENTRY_POINT_PLUGIN}))
"""


@pytest.mark.airflow
@pytest.mark.parametrize("older_airflow", OLDER_AIRFLOWS)
def test_beside_no_airflow_and_an_older_airflow_airflow_keeps_working(dist: Path, tmp_path: Path,
                                                                      older_airflow: str) -> None:
    """The wheel installed without extras in a fresh virtualenv: alone, its entry points register nothing and
    say Airflow is missing; with an older Apache Airflow beside it, ``import airflow``, ``airflow version`` and
    ``airflow providers list`` work, the list shows the provider registering nothing and why, and each command
    that lists providers (all of them on Airflow 3, which does on import) logs that once."""
    (wheel,) = dist.glob("airflow_pyconnect-*.whl")
    venv = tmp_path / "venv"
    _uv("venv", "--quiet", "--python", sys.executable, str(venv))
    python = venv / "bin" / "python"
    _uv("pip", "install", "--quiet", "--python", str(python), str(wheel))
    alone = subprocess.run([str(python), "-c", _NO_AIRFLOW], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert alone.returncode == 0, alone.stderr[-3000:]
    got = json.loads(alone.stdout.strip().splitlines()[-1])
    assert got["plugin"] is None
    assert got["info"]["description"] == (
        "Registers nothing here: Apache Airflow is not installed (pip install 'airflow-pyconnect[airflow]').")

    _uv("pip", "install", "--quiet", "--python", str(python), f"apache-airflow=={older_airflow}", timeout=600)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path / "home"), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    why = f"it needs Apache Airflow 3.3.0+, found {older_airflow} (install Apache Airflow 3.3.0 or newer)"
    for command in ([str(python), "-c", "import airflow; print(airflow.__version__)"],
                    [str(venv / "bin" / "airflow"), "version"],
                    [str(venv / "bin" / "airflow"), "providers", "list", "--output", "json"]):
        out = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
        shown = f"{command}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        assert out.returncode == 0, shown
        warnings = [line for line in (out.stdout + out.stderr).splitlines()
                    if "airflow-pyconnect 0.1.0 registers nothing" in line]
        # Airflow 3 discovers providers on import; Airflow 2 when a command needs them
        assert len(warnings) == (1 if older_airflow.startswith("3.") or command[-1] == "json" else 0), shown
        assert all(why in w for w in warnings), shown
        if command[-1] == "json":
            listed = {p["package_name"]: p for p in json.loads(out.stdout[out.stdout.index("[{"):])}
            assert listed["airflow-pyconnect"]["description"].startswith(f"Registers nothing here: {why}"), shown
        else:
            assert out.stdout.strip().splitlines()[-1] == older_airflow, shown


_MAPPED_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_pyconnect.operators.source import INTERVAL_IDENTITY, PyConnectSourceOperator

FILES = {"name": "files", "connector.class": "connect_runtime.connectors.files.DirectorySource",
         "directory": "/tmp/in", "pattern": "*.jsonl", "topic": "t"}
with DAG(dag_id="mapped_daily", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False):
    PyConnectSourceOperator.partial(task_id="m", connector_config=FILES).expand(identity=[INTERVAL_IDENTITY])
"""

_PARSE = """
import json
from airflow.dag_processing.dagbag import DagBag
bag = DagBag()
print(json.dumps({"dags": sorted(bag.dags), "errors": list(bag.import_errors.values())}))
"""


@pytest.mark.airflow
def test_an_installed_wheel_checks_mapped_tasks_through_its_cluster_policy(dist: Path, tmp_path: Path) -> None:
    """The wheel with Apache Airflow 3.3.2 in a fresh virtualenv: Airflow loads the provider's cluster policy
    from the wheel's ``airflow.policy`` entry point, and a mapped task using the data interval on ``"@daily"``
    (whose runs have empty intervals) is the DAG file's import error, naming the task and the fix."""
    (wheel,) = dist.glob("airflow_pyconnect-*.whl")
    venv = tmp_path / "venv"
    _uv("venv", "--quiet", "--python", sys.executable, str(venv))
    _uv("pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel), "apache-airflow==3.3.2",
        timeout=600)
    dags = tmp_path / "home" / "dags"
    dags.mkdir(parents=True)
    (dags / "mapped_daily.py").write_text(_MAPPED_DAG)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path / "home"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__DAGS_FOLDER=str(dags))
    out = subprocess.run([str(venv / "bin" / "python"), "-c", _PARSE], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    parsed = json.loads(out.stdout.strip().splitlines()[-1])
    assert parsed["dags"] == [], parsed
    (error,) = parsed["errors"]
    for words in ("AirflowClusterPolicyViolation", "Task 'm' of DAG 'mapped_daily'", "identity uses the data interval",
                  "schedule='@daily'", 'CronDataIntervalTimetable("@daily", timezone="UTC")'):
        assert words in error, error
