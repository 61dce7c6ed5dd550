"""The generated config reference (docs/connectors-reference.md) matches every shipped connector's ConfigDef, and
the admin API's plugin config is Kafka Connect's ``GET /connector-plugins/{plugin}/config`` shape."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from connect_runtime.api import ConfigError
from connect_runtime.runtime.plugins import load_class
from connect_runtime.validation import SHIPPED_CONNECTORS, plugin_config, validate_config

REPO = Path(__file__).resolve().parents[3]


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("connectors_reference", REPO / "scripts" / "connectors_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_is_up_to_date() -> None:
    page = REPO / "docs" / "connectors-reference.md"
    assert page.read_text() == script().render(), (
        "docs/connectors-reference.md is out of date with the connectors' ConfigDefs: run "
        ".venv/bin/python scripts/connectors_reference.py")


def test_every_shipped_connector_and_every_key_is_in_the_reference() -> None:
    text = (REPO / "docs" / "connectors-reference.md").read_text()
    for path in SHIPPED_CONNECTORS:
        cls = load_class(path, "connector.class")
        assert f"## {cls.__name__}" in text and f"`connector.class={path}`" in text
        for key in cls().config_def().keys:
            assert f"| `{key}` |" in text, (path, key)
    for key in ("tasks.max", "exactly.once.support", "poll.idle.timeout.ms", "topics", "errors.deadletterqueue.topic.name"):
        assert f"| `{key}` |" in text, key


def test_every_connector_module_in_the_package_is_shipped() -> None:
    """A new connector under connect_runtime/connectors/ must be added to SHIPPED_CONNECTORS (and so to the page)."""
    import pkgutil

    import connect_runtime.connectors
    from connect_runtime.api.connector import Connector

    found = set()
    for module in (m.name for m in pkgutil.iter_modules(connect_runtime.connectors.__path__)
                   if not m.name.startswith("_")):
        mod = importlib.import_module(f"connect_runtime.connectors.{module}")
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if isinstance(obj, type) and issubclass(obj, Connector):
                found.add(f"connect_runtime.connectors.{module}.{name}")
    assert found == set(SHIPPED_CONNECTORS)


def test_plugin_config_is_kafka_connects_config_key_info() -> None:
    keys = {k["name"]: k for k in plugin_config("connect_runtime.connectors.files.DirectorySource")}
    assert keys["directory"] == {"name": "directory", "type": "STRING", "required": True, "default_value": None,
                                 "importance": "HIGH", "documentation": "Directory to read files from.",
                                 "group": None, "valid_values": "a string with at least one non-blank character"}
    assert keys["batch.size"]["default_value"] == "1000" and keys["batch.size"]["valid_values"] == "[1, ...]"
    assert keys["format"]["valid_values"] == "[jsonl, csv, text]" and keys["format"]["default_value"] is None
    sql = {k["name"]: k for k in plugin_config("connect_runtime.connectors.sql.SqlSource")}
    assert sql["connection.password"]["type"] == "PASSWORD"
    with pytest.raises(ConfigError, match="no_such"):
        plugin_config("no_such.Connector")


def test_validate_config_names_every_bad_field_and_unknown_keys() -> None:
    out = validate_config({"name": "x", "connector.class": "connect_runtime.connectors.files.DirectorySource",
                           "topic": "t", "batch.size": "0", "directry": "/tmp"})
    assert out["name"] == "x" and out["error_count"] == len(out["errors"]) >= 2
    assert "directory" in out["errors"] and "batch.size" in out["errors"]
