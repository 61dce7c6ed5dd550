"""Repository-level contracts: import direction, cheap imports, README and CI agree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support import REPO


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


def test_spark_kafka_options_use_no_kafka_client_nor_spark() -> None:
    """The provider renders Spark's Kafka options at DAG parse time: the ``kafka://`` parser is the backends'
    public one, which loads no Kafka client."""
    code = (
        "import sys; from connect_runtime.spark_kafka import kafka_read_options;"
        "assert kafka_read_options({'t': {'0': [0, 1]}}, 'kafka://a:1')[0]['kafka.bootstrap.servers'] == 'a:1';"
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


def _py_files(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts)


MAX_FILE_LINES = 450
MAX_CLASS_LINES = 260
"""Issue 23's limits ("about 400" and "about 250") for the runtime and the backends, with a little slack."""


def test_runtime_and_backend_files_and_classes_stay_small() -> None:
    import ast

    too_big = []
    for path in _py_files("connect_runtime/runtime", "connect_runtime/backends"):
        text = path.read_text()
        lines = text.count("\n") + 1
        if lines > MAX_FILE_LINES:
            too_big.append(f"{path.relative_to(REPO)}: {lines} lines (at most about {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    too_big.append(f"{path.relative_to(REPO)}: class {node.name} has {size} lines "
                                   f"(at most about {MAX_CLASS_LINES})")
    assert not too_big, "\n".join(too_big)


def test_every_except_base_exception_says_why() -> None:
    """``except BaseException`` also catches KeyboardInterrupt and SystemExit: each one carries a one-line reason
    (a comment on its line or the line after) or re-raises at once."""
    bare = []
    for path in _py_files("connect_runtime", "airflow_pyconnect"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\s*except BaseException\b", line) is None:
                continue
            after = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if "#" in line or after.startswith("#") or after == "raise":
                continue
            bare.append(f"{path.relative_to(REPO)}:{i + 1}: {line.strip()}")
    assert not bare, "except BaseException without a reason:\n" + "\n".join(bare)


def test_the_cli_uses_only_public_runtime_names() -> None:
    """The CLI reaches the runtime through :mod:`connect_runtime.admin` and public names: no ``_private``
    name imported from ``connect_runtime`` and no ``module._private`` attribute of one."""
    import ast

    tree = ast.parse((REPO / "connect_runtime" / "cli.py").read_text())
    modules: set[str] = set()
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("connect_runtime"):
            for alias in node.names:
                if alias.name.startswith("_"):
                    private.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.startswith("connect_runtime"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            private.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    assert not private, "the CLI uses runtime privates:\n" + "\n".join(private)
