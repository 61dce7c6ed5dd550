"""Repository-level contracts: import direction, cheap imports, README and CI agree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_readme_holds_the_ci_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    cmd = re.search(r"^TEST_CMD='(.+)'$", ci, re.M)
    assert cmd, ".ci/run must define TEST_CMD"
    assert cmd.group(1) in (REPO / "README.md").read_text()


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--config", str(REPO / "pyproject.toml")], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def test_runtime_imports_without_airflow_kafka_or_spark() -> None:
    code = (
        "import sys, connect_runtime, connect_runtime.runtime.source, connect_runtime.runtime.sink, "
        "connect_runtime.backends.sqlite, connect_runtime.cli;"
        "bad = sorted(m for m in ('airflow', 'confluent_kafka', 'pyspark') if m in sys.modules);"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_passes() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    out = subprocess.run([str(ruff), "check", "."], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_passes_on_the_runtime_and_the_provider() -> None:
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
