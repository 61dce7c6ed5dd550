"""Repository-level contracts: import direction, cheap imports, README and CI agree."""

from __future__ import annotations

import json
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


_WITHOUT_EXTRAS = """
import json, sys, tempfile
from pathlib import Path
OPTIONAL = ("airflow", "confluent_kafka", "fastavro", "pyspark", "pyarrow", "fsspec", "sqlalchemy", "psycopg")
for name in OPTIONAL:
    sys.modules[name] = None  # import fails: as if only the base dependencies were installed
import connect_runtime, connect_runtime.runtime.source, connect_runtime.runtime.sink, connect_runtime.cli
from connect_runtime import run_sink, run_source
from connect_runtime.api.errors import ConfigError, MissingExtraError
from connect_runtime.backends import open_backend
from connect_runtime.cli import main
out, hint = {}, "pip install 'airflow-pyconnect[kafka]'"
with tempfile.TemporaryDirectory() as tmp:
    url = f"sqlite:///{tmp}/p.db"
    run_source({"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "t",
                "max.records": 7}, url)
    run_sink({"name": "files", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "t",
              "directory": f"{tmp}/out"}, url, until_offsets={"t": {"0": 7}})
    out["lines"] = sum(len(p.read_text().splitlines()) for p in Path(tmp, "out").rglob("*.jsonl"))
try:
    open_backend("kafka://broker:9092")
except MissingExtraError as exc:
    out["backend"] = hint in str(exc)
try:
    connect_runtime.runtime.plugins.load_class("io.confluent.connect.avro.AvroConverter", "value.converter")
except ConfigError as exc:
    out["converter"] = hint in str(exc)
out["cli"] = main(["--backend", "kafka://broker:9092", "topics", "list"])
print(json.dumps(out))
"""


def test_runtime_runs_with_only_its_base_dependencies() -> None:
    """``connect_runtime`` with only ``dependencies`` (no extra: Airflow, confluent-kafka, Spark, pyarrow,
    SQLAlchemy blocked) runs a source and a sink on SQLite; the Kafka backend, a Schema Registry converter and
    the CLI on a ``kafka://`` URL fail with one error naming the extra to install."""
    out = subprocess.run([sys.executable, "-c", _WITHOUT_EXTRAS], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == {"lines": 7, "backend": True, "converter": True, "cli": 1}
    assert out.stderr.strip().splitlines()[-1] == (
        "error: the Kafka backend (kafka:// URLs) needs confluent_kafka, which is not installed: "
        "pip install 'airflow-pyconnect[kafka]'"), out.stderr


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


def _runtime_privates(path: Path) -> list[str]:
    """``_private`` names a module imports from ``connect_runtime`` and ``module._private`` attributes of one."""
    import ast

    tree = ast.parse(path.read_text())
    modules: set[str] = set()
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("connect_runtime"):
            for alias in node.names:
                if alias.name.startswith("_"):
                    private.append(f"{path.relative_to(REPO)}:{node.lineno}: from {node.module} import {alias.name}")
                modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.startswith("connect_runtime"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            private.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value.id}.{node.attr}")
    return private


def test_the_cli_uses_only_public_runtime_names() -> None:
    """The CLI reaches the runtime through :mod:`connect_runtime.admin` and public names: no ``_private``
    name imported from ``connect_runtime`` and no ``module._private`` attribute of one."""
    private = _runtime_privates(REPO / "connect_runtime" / "cli.py")
    assert not private, "the CLI uses runtime privates:\n" + "\n".join(private)


def _imports(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, dotted name, annotations only)`` of every import of a module: ``from a.b import c`` gives
    ``a.b.c``; an import under ``if TYPE_CHECKING:`` is annotations only."""
    import ast

    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, id(node) in typing_only) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, f"{node.module}.{a.name}", id(node) in typing_only) for a in node.names]
    return out


def test_the_provider_uses_only_public_runtime_names() -> None:
    """The provider reaches the runtime through public names (``connect_runtime``, ``admin``, ``ranges``,
    ``api``, ``secrets``): no ``connect_runtime.runtime`` import, no runtime private, and only the hook opens
    backends (other modules may name the backend contract's types in annotations)."""
    hook = REPO / "airflow_pyconnect" / "hooks" / "pyconnect.py"
    bad = []
    for path in _py_files("airflow_pyconnect"):
        bad += _runtime_privates(path)
        for line, name, typing_only in _imports(path):
            where = f"{path.relative_to(REPO)}:{line}: {name}"
            if name.startswith("connect_runtime.runtime"):
                bad.append(where)
            elif name.startswith("connect_runtime.backends") and path != hook and not typing_only:
                bad.append(where + " (only the hook opens backends)")
    assert not bad, "the provider reaches past the runtime's public names:\n" + "\n".join(bad)


def test_the_provider_uses_only_public_airflow_modules() -> None:
    """No import of a private Airflow module (a dotted part starting with ``_``, such as ``airflow.sdk._shared``
    or ``airflow.sdk.definitions._internal``) nor of ``airflow.settings``: Airflow's public interface only."""
    bad = []
    for path in _py_files("airflow_pyconnect"):
        for line, name, _typing_only in _imports(path):
            parts = name.split(".")
            if parts[0] != "airflow":
                continue
            if any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts) or (
                    parts[:2] == ["airflow", "settings"]):
                bad.append(f"{path.relative_to(REPO)}:{line}: {name}")
    assert not bad, "the provider imports private Airflow modules:\n" + "\n".join(bad)


def test_test_modules_have_unique_basenames() -> None:
    """The test folders are not packages (pytest's rootdir-based import): two test modules of one basename stop the
    whole suite at collection ("import file mismatch"), so CI would run nothing."""
    seen: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"test modules sharing a basename: {clashes}"
