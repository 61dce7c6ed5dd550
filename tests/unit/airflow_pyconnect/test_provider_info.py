"""The provider manifest names real modules and classes, and the connection type ``pyconnect``."""

from __future__ import annotations

import importlib

import pytest

from airflow_pyconnect.get_provider_info import get_provider_info


def test_manifest_lists_every_part_of_the_provider() -> None:
    info = get_provider_info()
    assert info["package-name"] == "airflow-pyconnect"
    assert info["name"] == "PyConnect"
    assert info["versions"] == ["0.1.0"]
    assert [i["integration-name"] for i in info["integrations"]] == ["PyConnect"]
    modules = {kind: [m for entry in info[kind] for m in entry["python-modules"]]
               for kind in ("hooks", "operators", "sensors", "triggers")}
    assert modules == {
        "hooks": ["airflow_pyconnect.hooks.pyconnect"],
        "operators": ["airflow_pyconnect.operators.source", "airflow_pyconnect.operators.sink",
                      "airflow_pyconnect.operators.fanout", "airflow_pyconnect.operators.fanout_sink",
                      "airflow_pyconnect.operators.spark_submit"],
        "sensors": ["airflow_pyconnect.sensors.offsets"],
        "triggers": ["airflow_pyconnect.triggers.offsets", "airflow_pyconnect.triggers.committed"],
    }
    for names in modules.values():
        for name in names:
            importlib.import_module(name)


def test_connection_type_points_at_the_hook() -> None:
    (ct,) = get_provider_info()["connection-types"]
    assert ct["connection-type"] == "pyconnect"
    module, _, cls = ct["hook-class-name"].rpartition(".")
    hook = getattr(importlib.import_module(module), cls)
    assert hook.conn_type == "pyconnect"
    assert hook.default_conn_name == "pyconnect_default"
    assert hook.conn_name_attr == "pyconnect_conn_id"
    assert ct["hook-name"] == hook.hook_name == "PyConnect"
    behaviour = hook.get_ui_field_behaviour()
    assert behaviour["hidden_fields"] == ct["ui-field-behaviour"]["hidden-fields"]
    assert behaviour["relabeling"] == ct["ui-field-behaviour"]["relabeling"]


def test_entry_point_is_registered() -> None:
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("airflow_pyconnect")]
    assert ep.load() is get_provider_info


def test_the_manifest_validates_against_airflows_provider_info_schema() -> None:
    import json
    from pathlib import Path

    import airflow
    import jsonschema

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate({k: v for k, v in get_provider_info().items() if k != "versions"}, schema)


def test_every_pyconnect_option_the_provider_reads_is_declared() -> None:
    """Each ``conf.get*("pyconnect", "<key>")`` of the provider is in the manifest's ``config``, described as
    Airflow's own options are (so ``airflow config get-value`` and ``providers configs`` know it)."""
    import re
    from pathlib import Path

    import airflow_pyconnect

    root = Path(airflow_pyconnect.__file__).parent
    read = {m for p in root.rglob("*.py")
            for m in re.findall(r"conf\.get\w*\(\s*\"pyconnect\",\s*\"(\w+)\"", p.read_text())}
    section = get_provider_info()["config"]["pyconnect"]
    assert read == set(section["options"]) == {"allow_embedded_default", "workers_share_disk"}
    for option in section["options"].values():
        assert set(option) == {"description", "version_added", "type", "example", "default"}
        assert option["version_added"] == airflow_pyconnect.__version__


def test_extra_links_and_asset_uris_point_at_real_objects() -> None:
    from urllib.parse import urlsplit

    from airflow.sdk import BaseOperatorLink

    from airflow_pyconnect.assets import create_asset, pyconnect_asset, sanitize_uri
    from airflow_pyconnect.operators.source import PyConnectSourceOperator

    info = get_provider_info()
    (link_path,) = info["extra-links"]
    module, _, name = link_path.rpartition(".")
    link = getattr(importlib.import_module(module), name)
    assert issubclass(link, BaseOperatorLink) and link in {type(lk) for lk in PyConnectSourceOperator.operator_extra_links}
    (uris,) = info["asset-uris"]
    assert uris["schemes"] == ["pyconnect"]
    assert [getattr(importlib.import_module(p.rpartition(".")[0]), p.rpartition(".")[2])
            for p in (uris["handler"], uris["factory"])] == [sanitize_uri, create_asset]
    assert create_asset(topic="orders", pyconnect_conn_id="pc").uri == pyconnect_asset("orders", "pc").uri == (
        "pyconnect://pc/orders")
    assert sanitize_uri(urlsplit("pyconnect://pc/orders")) == urlsplit("pyconnect://pc/orders")
    for bad, why in (("pyconnect:///orders", "connection id"), ("pyconnect://pc/", "topic"),
                     ("pyconnect://pc/orders?x=1", "no query")):
        try:
            sanitize_uri(urlsplit(bad))
        except ValueError as exc:
            assert why in str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")


def test_asset_uris_accept_exactly_kafkas_topic_names() -> None:
    """``pyconnect://<connection>/<topic>`` takes Kafka's legal topic names (``[a-zA-Z0-9._-]``, 1 to 249
    characters, not ``.`` nor ``..``: ``Topic.validate``) and refuses the rest naming the rule, through Airflow's
    own Asset (the provider's URI handler) and through the factory."""
    from airflow.sdk import Asset

    from airflow_pyconnect.assets import TOPIC_RULE, create_asset, pyconnect_asset

    for good in ("orders", "a.b_c-D9", "x" * 249, "...", ".a", "_"):
        assert Asset(f"pyconnect://c/{good}").uri == pyconnect_asset(good, "c").uri == f"pyconnect://c/{good}"
    for bad in ("a/b", "or ders", "x" * 250, ".", "..", "or%20ders", "/orders", "caf\u00e9", "a+b"):
        for make in (lambda t: Asset(f"pyconnect://c/{t}"), lambda t: create_asset(topic=t, pyconnect_conn_id="c")):
            with pytest.raises(ValueError, match="is not a Kafka topic name") as caught:
                make(bad)
            assert TOPIC_RULE in str(caught.value) and "[a-zA-Z0-9._-]" in TOPIC_RULE
            assert len(str(caught.value)) < 300, "a long name is shortened in the error"


def test_one_version() -> None:
    import tomllib
    from pathlib import Path

    import airflow_pyconnect

    project = tomllib.loads((Path(airflow_pyconnect.__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "airflow_pyconnect.__version__"}
    assert get_provider_info()["versions"] == [airflow_pyconnect.__version__]


def test_beside_an_older_airflow_discovery_works_and_the_provider_registers_nothing_saying_why_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Airflow's own ProvidersManager (a fresh one, real entry points) lists providers beside an Airflow older
    than the minimum: the manifest registers nothing and says why, the plugin entry point yields nothing, the
    warning is logged once; importing a module with Airflow classes names the version needed."""
    import logging

    import airflow
    from airflow.providers_manager import ProvidersManager

    import airflow_pyconnect
    from airflow_pyconnect.plugins import connectors

    monkeypatch.setattr(airflow, "__version__", "3.2.9")
    monkeypatch.setattr(airflow_pyconnect, "_WARNED", [])
    monkeypatch.setattr(ProvidersManager, "_instance", None)
    monkeypatch.setattr(ProvidersManager, "_initialized", False)
    caplog.set_level(logging.WARNING, logger="airflow_pyconnect")
    manager = ProvidersManager()
    manager.initialize_providers_list()
    info = manager.providers["airflow-pyconnect"].data
    why = "it needs Apache Airflow 3.3.0+, found 3.2.9"
    assert why in info["description"] and info["description"].startswith("Registers nothing here: ")
    assert not {"hooks", "operators", "connection-types", "plugins", "asset-uris", "config"} & set(info)
    assert "apache-airflow-providers-standard" in manager.providers  # the others are still there
    try:
        importlib.reload(connectors)
        assert connectors.ENTRY_POINT_PLUGIN is None
        get_provider_info()
    finally:
        monkeypatch.undo()
        importlib.reload(connectors)
    warned = [r.getMessage() for r in caplog.records if r.name == "airflow_pyconnect"]
    assert len(warned) == 1 and why in warned[0] and "registers nothing" in warned[0], warned
    assert connectors.ENTRY_POINT_PLUGIN is not None or not airflow_pyconnect.unsupported_airflow()


def test_the_airflow_check_names_the_version_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import airflow

    import airflow_pyconnect

    assert airflow_pyconnect.unsupported_airflow() is None
    monkeypatch.setattr(airflow, "__version__", "3.3.0.dev0")  # a pre-release of the minimum is accepted
    assert airflow_pyconnect.unsupported_airflow() is None
    monkeypatch.setattr(airflow, "__version__", "2.11.0")
    with pytest.raises(RuntimeError, match=r"airflow-pyconnect:0\.1\.0` cannot run here: it needs Apache Airflow "
                                           r"3\.3\.0\+, found 2\.11\.0"):
        airflow_pyconnect.require_supported_airflow()
    monkeypatch.setattr(airflow, "__version__", "not a version")
    assert "not a version number" in (airflow_pyconnect.unsupported_airflow() or "")
    monkeypatch.setitem(sys.modules, "airflow", None)  # as if Airflow were not installed
    assert airflow_pyconnect.unsupported_airflow() == (
        "Apache Airflow is not installed (pip install 'airflow-pyconnect[airflow]')")


def test_the_secret_name_rule_agrees_with_airflows_masker() -> None:
    """The provider's copy of Airflow's sensitive-name rule (public API only) decides as Airflow's masker does."""
    from airflow.sdk._shared.secrets_masker import DEFAULT_SENSITIVE_FIELDS, should_hide_value_for_key

    from airflow_pyconnect.operators._base import AIRFLOW_SENSITIVE_NAMES, airflow_name_rule

    assert frozenset(DEFAULT_SENSITIVE_FIELDS) == AIRFLOW_SENSITIVE_NAMES
    for name in ("sasl.password", "db-Password", "my_api_key", "Authorization", "tokens", "ssl.key.location",
                 "topic", "connection.url", "dsn", "proxy.host", "name"):
        assert airflow_name_rule(name) == bool(should_hide_value_for_key(name)), name
