"""``pyconnect validate DAG_FILE.py``: the connector configs of a DAG file, checked without running them.

Reading a DAG file needs Airflow and the provider, which the runtime never imports: this runs the provider's
validator (``python -m airflow_pyconnect.validate``, :mod:`airflow_pyconnect.validate`) in a child process of the
same interpreter, passing its output and exit code through. Without Airflow or the provider installed it is one
error saying what to install.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from connect_runtime.api.errors import ConnectError

PROVIDER_VALIDATOR = "airflow_pyconnect.validate"
"""The module that reads a DAG file (run with ``python -m``; never imported here)."""


def validate_dag_file(path: str, date: str | None = None) -> int:
    """Run the provider's DAG-file validator on ``path`` (``date``: the sample run for templates); its exit code."""
    for needed in ("airflow", "airflow_pyconnect"):
        if importlib.util.find_spec(needed) is None:
            raise ConnectError(f"validating a DAG file needs Airflow and the provider ({needed} is not installed): "
                               f"pip install 'airflow-pyconnect[airflow]'; or validate a connector config file "
                               f"(.json, .properties)")
    cmd = [sys.executable, "-m", PROVIDER_VALIDATOR, path, *(["--date", date] if date else [])]
    sys.stdout.flush()
    return subprocess.run(cmd, check=False).returncode  # its output goes straight to ours


__all__ = ["PROVIDER_VALIDATOR", "validate_dag_file"]
