"""The provider manifest names real modules and classes, and the connection type ``pyconnect``."""

from __future__ import annotations

import importlib

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
