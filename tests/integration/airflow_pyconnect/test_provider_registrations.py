"""What the provider info declares, as real Airflow sees it: the ``[pyconnect]`` config section
(``airflow config get-value``, ``airflow providers configs``), the Connectors extra link (``airflow providers
links``) and the ``pyconnect://`` asset URI scheme (an ``Asset`` normalised and checked by our handler).

One Airflow home and one interpreter: the three commands run through Airflow's own CLI parser and command
functions (what the ``airflow`` script calls) in a single subprocess, so the module costs one Airflow start-up.
No metadata database is needed for any of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.airflow_env import AirflowEnv

pytestmark = pytest.mark.airflow

_SCRIPT = """
import contextlib, io, json
from airflow.cli import cli_parser

def cli(*argv):
    args = cli_parser.get_parser().parse_args(list(argv))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        args.func(args)
    return out.getvalue()

got = {
    "get_value": cli("config", "get-value", "pyconnect", "allow_embedded_default").strip(),
    "configs": json.loads(cli("providers", "configs", "-o", "json")),
    "links": json.loads(cli("providers", "links", "-o", "json")),
}
from airflow.configuration import conf
got["default_without_fallback"] = conf.getboolean("pyconnect", "allow_embedded_default")  # declared: no fallback
from airflow.sdk import Asset
got["asset"] = Asset("pyconnect://pc_a/orders/").uri
got["refused"] = {}
for bad in ("pyconnect://pc_a", "pyconnect:///orders", "pyconnect://pc_a/orders?x=1"):
    try:
        Asset(bad)
    except ValueError as exc:
        got["refused"][bad] = str(exc)
print(json.dumps(got))
"""


def test_config_extra_link_and_asset_scheme_are_known_to_airflow(tmp_path: Path) -> None:
    af = AirflowEnv(tmp_path / "airflow_home")
    af.dags.mkdir(parents=True)
    got = json.loads(af.python(_SCRIPT).stdout.strip().splitlines()[-1])
    assert got["get_value"] == "False"
    (mine,) = [r["provider_config"][1] for r in got["configs"] if r["provider_config"][0] == "airflow-pyconnect"]
    option = mine["pyconnect"]["options"]["allow_embedded_default"]
    assert (option["type"], option["default"], option["version_added"]) == ("boolean", "False", "0.1.0")
    assert {"extra_link_class_name": "airflow_pyconnect.plugins.links.ConnectorsLink"} in got["links"]
    assert got["asset"] == "pyconnect://pc_a/orders"
    assert sorted(got["refused"]) == ["pyconnect:///orders", "pyconnect://pc_a", "pyconnect://pc_a/orders?x=1"]
    assert "names a connection id" in got["refused"]["pyconnect:///orders"]
    assert "names a topic" in got["refused"]["pyconnect://pc_a"]
    assert got["default_without_fallback"] is False
