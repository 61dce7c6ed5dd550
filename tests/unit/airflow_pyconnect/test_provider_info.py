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
                      "airflow_pyconnect.operators.fanout"],
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
    assert read == set(section["options"]) == {"allow_embedded_default"}
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


def test_one_version_and_the_minimum_airflow_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib
    from pathlib import Path

    import airflow

    import airflow_pyconnect

    project = tomllib.loads((Path(airflow_pyconnect.__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "airflow_pyconnect.__version__"}
    assert get_provider_info()["versions"] == [airflow_pyconnect.__version__]
    monkeypatch.setattr(airflow, "__version__", "3.2.9")
    with pytest.raises(RuntimeError, match=r"airflow-pyconnect:0\.1\.0` needs Apache Airflow 3\.3\.0\+, found 3\.2\.9"):
        importlib.reload(airflow_pyconnect)
    monkeypatch.setattr(airflow, "__version__", "3.3.0.dev0")  # a pre-release of the minimum is accepted
    importlib.reload(airflow_pyconnect)


def test_the_secret_name_rule_agrees_with_airflows_masker() -> None:
    """The provider's copy of Airflow's sensitive-name rule (public API only) decides as Airflow's masker does."""
    from airflow.sdk._shared.secrets_masker import DEFAULT_SENSITIVE_FIELDS, should_hide_value_for_key

    from airflow_pyconnect.operators._base import AIRFLOW_SENSITIVE_NAMES, airflow_name_rule

    assert frozenset(DEFAULT_SENSITIVE_FIELDS) == AIRFLOW_SENSITIVE_NAMES
    for name in ("sasl.password", "db-Password", "my_api_key", "Authorization", "tokens", "ssl.key.location",
                 "topic", "connection.url", "dsn", "proxy.host", "name"):
        assert airflow_name_rule(name) == bool(should_hide_value_for_key(name)), name
