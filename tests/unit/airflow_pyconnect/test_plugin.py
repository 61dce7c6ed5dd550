"""The Connectors plugin: registration, import cost, the extra link, and the service layer over a real
SQLite store (the API and the page under a real API server: tests/integration/test_ui_connectors.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from airflow_pyconnect.get_provider_info import get_provider_info


def test_the_manifest_registers_the_plugin_class() -> None:
    (entry,) = get_provider_info()["plugins"]
    assert entry == {"name": "pyconnect", "plugin-class": "airflow_pyconnect.plugins.view.PyConnectPlugin"}
    from airflow_pyconnect.plugins.connectors import ENTRY_POINT_PLUGIN
    from airflow_pyconnect.plugins.links import ConnectorsLink
    from airflow_pyconnect.plugins.view import PyConnectPlugin

    assert PyConnectPlugin.name == "pyconnect"
    (view,) = PyConnectPlugin.external_views
    assert view["name"] == "Connectors" and view["href"].endswith("/pyconnect/ui") and view["destination"] == "nav"
    assert [type(link) for link in PyConnectPlugin.operator_extra_links] == [ConnectorsLink]
    # Airflow 3.3 loads manifest plugins only with lazy_discover_providers = False: the entry point covers
    # the default and yields nothing otherwise (never registered twice)
    from airflow.configuration import conf

    lazy = conf.getboolean("core", "lazy_discover_providers", fallback=True)
    assert ENTRY_POINT_PLUGIN is (PyConnectPlugin if lazy else None)
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="airflow.plugins") if e.value.startswith("airflow_pyconnect")]
    assert ep.value == "airflow_pyconnect.plugins.connectors:ENTRY_POINT_PLUGIN"


def test_the_extra_link_names_the_connection_and_the_connector(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_pyconnect.operators.source import PyConnectSourceOperator
    from airflow_pyconnect.plugins.links import ConnectorsLink

    op = PyConnectSourceOperator(task_id="t", connector_config={"name": "a b&c", "connector.class": "x"},
                                 pyconnect_conn_id="pc_x")
    (link,) = [lk for lk in op.operator_extra_links if isinstance(lk, ConnectorsLink)]
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/team/")
    assert link.get_link(op, ti_key=None) == (  # type: ignore[arg-type]
        "https://airflow.example.com/team/pyconnect/ui?conn=pc_x&connector=a+b%26c")
    assert link.xcom_key == "_link_ConnectorsLink" and link.name == "Connectors"
    op.connector_config = "{{ not rendered }}"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "/")
    assert link.get_link(op, ti_key=None) == "/pyconnect/ui?conn=pc_x"  # type: ignore[arg-type]


# -- the service layer over a real store -----------------------------------------------------------


def _conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "pyconnect", **fields}))


def test_overview_and_runs_of_a_store_filled_by_real_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_pyconnect.plugins import service
    from connect_runtime import run_sink, run_source

    url = f"sqlite:///{tmp_path / 's.db'}"
    _conn(monkeypatch, "pc_unit", host=url)
    key = {"dag_id": "d", "task_id": "t", "map_index": -1, "interval": "run:manual__1"}
    run_source({"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                "topic": "o", "max.records": 90, "tasks.max": 2}, url, ledger_key=key)
    run_sink({"name": "rd", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": "o",
              "log.path": str(tmp_path / "log.jsonl")}, url, max_records=60)
    got = service.overview("pc_unit")
    assert got["backend"] == "sqlite" and got["location"] == str(tmp_path / "s.db")
    by = {c["name"]: c for c in got["connectors"]}
    assert by["gen"]["offsets"] == [{"partition": {"task": 0}, "offset": {"position": 45}},
                                    {"partition": {"task": 1}, "offset": {"position": 90}}]
    assert by["rd"]["lag"] == [{"topic": "o", "partition": 0, "committed": 60, "end": 90, "lag": 30}]
    got = service.runs("pc_unit", run_ids=lambda keys: {})
    sink_run, entry = got["runs"]  # newest first: the sink ran last
    assert entry["type"] == "ranges" and entry["key"] == key and entry["records"] == 90 and entry["run_id"] is None
    assert entry["state"] == "stopped" and entry["generation"] == 0, "the source's attempt is its ranges row"
    assert sink_run["type"] == "attempt" and (sink_run["connector"], sink_run["kind"]) == ("rd", "sink")
    assert (sink_run["state"], sink_run["records"], sink_run["error"], sink_run["topics"]) == ("stopped", 60, None, ["o"])
    assert sink_run["started"] <= sink_run["finished"] == sink_run["updated"]
    assert (entry["host"], sink_run["host"], sink_run["workers"]) == (socket.gethostname(), socket.gethostname(), [])
    # what the sink run delivered and the lag it left at its end (90 written, 60 read), from its registry record
    assert (sink_run["ranges"], sink_run["lag"], sink_run["lag_partitions"]) == ({"o": {"0": [0, 60]}}, 30, {"o": {"0": 30}})
    assert (entry["lag"], entry["lag_partitions"]) == (None, None)
    assert got["colours"] == {"gen": service.colour("gen"), "rd": service.colour("rd")}
    assert "pc_unit" in [c["conn_id"] for c in service.connection_ids(db=lambda: [])]


def test_a_fanned_out_sink_run_records_what_each_task_delivered_and_left(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """A fanned-out sink generation (one plan, each task its own run): its attempt holds every task's range and the
    lag each left (task 0 stops 10 short of its target, task 1 reads to it)."""
    from airflow_pyconnect.plugins import service
    from connect_runtime import plan_sink, run_sink_task, run_source

    url = f"sqlite:///{tmp_path / 's.db'}"
    _conn(monkeypatch, "pc_fan", host=url)
    for topic in ("a", "b"):
        run_source({"name": f"gen-{topic}", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                    "topic": topic, "max.records": 20}, url)
    config = {"name": "fan", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": "a,b",
              "tasks.max": 2, "log.path": str(tmp_path / "log.jsonl")}
    plan = plan_sink(config, url)
    assert [[p[0] for p in t["partitions"]] for t in plan["tasks"]] == [["a"], ["b"]], plan
    run_sink_task(config, url, plan, 0, max_records=10)
    run_sink_task(config, url, plan, 1)
    (row,) = [r for r in service.runs("pc_fan", run_ids=lambda keys: {})["runs"] if r["connector"] == "fan"]
    assert (row["state"], row["records"]) == ("stopped", 30), row
    assert row["ranges"] == {"a": {"0": [0, 10]}, "b": {"0": [0, 20]}}, row
    assert (row["lag"], row["lag_partitions"]) == (10, {"a": {"0": 10}, "b": {"0": 0}}), row


def test_a_connectors_colour_depends_on_its_name_only() -> None:
    """FNV-1a of the name into the palette: the same colour whatever other connectors exist or in which order
    they come, the palette's colours all used, and known values (the page and its screenshots rely on them)."""
    from airflow_pyconnect.plugins import service

    names = [f"connector-{i}" for i in range(200)]
    alone = {n: service.colours([n])[n] for n in names}
    assert service.colours(list(reversed(names))) == alone
    together = service.colours(["aaa", *names, "zzz"])
    assert all(together[n] == alone[n] for n in names), "another connector changed a colour"
    assert set(alone.values()) == set(service.PALETTE) and len(set(service.PALETTE)) == 20
    assert (service.colour(""), service.colour("a"), service.colour("ui-orders")) == (
        service.PALETTE[0x811C9DC5 % 20], service.PALETTE[0xE40C292C % 20], service.PALETTE[15])
    assert all(c.startswith("#") and len(c) == 7 for c in service.PALETTE)


def test_an_attempt_recorded_before_hosts_were_kept_is_a_row_without_host() -> None:
    from airflow_pyconnect.plugins import service

    row = service._attempt_row({"connector": "old", "kind": "source", "generation": 3, "state": "stopped",
                                "started": 1, "finished": 2, "context": None, "topics": []}, [])
    assert (row["host"], row["workers"], row["state"]) == (None, [], "stopped")
    assert (row["ranges"], row["lag"], row["lag_partitions"]) == ({}, None, None), "no range or lag kept then"


def test_runs_show_failed_and_fenced_attempts_with_the_reason_masked(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """A fenced source run (a newer run of the same connector started while it ran) and a failed sink run are
    rows with their reason, the connection's secrets masked; the runs of Airflow tasks name them."""
    import threading
    import time

    from airflow_pyconnect.plugins import service
    from connect_runtime import run_sink, run_source
    from connect_runtime.api.errors import ProducerFencedError

    secret = "pw-runs-very-secret"
    url = f"sqlite:///{tmp_path / 's.db'}"
    _conn(monkeypatch, "pc_runs", host=url, extra={"sasl.password": secret})  # a secret of the connection
    busy = {"name": "busy", "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": "b",
            "max.records": -1, "batch.size": 5, "poll.delay.ms": 50}
    out: dict[str, BaseException] = {}

    def first() -> None:
        try:
            run_source(busy, url, max_seconds=60)
        except BaseException as exc:  # the fencing, checked below
            out["error"] = exc

    def running() -> bool:
        try:
            return any(c["name"] == "busy" and c["running"] for c in service.overview("pc_runs")["connectors"])
        except service.StoreUnavailable:  # the run has not created the store yet
            return False

    t = threading.Thread(target=first)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while not running():
            assert time.monotonic() < deadline and t.is_alive(), f"the first run never showed as running: {out}"
            time.sleep(0.1)
        for k, v in {"AIRFLOW_CTX_DAG_ID": "d", "AIRFLOW_CTX_TASK_ID": "again", "AIRFLOW_CTX_DAG_RUN_ID": "manual__2",
                     "AIRFLOW_CTX_TRY_NUMBER": "1"}.items():
            monkeypatch.setenv(k, v)
        run_source(busy, url, max_seconds=1)
    finally:
        t.join(60)
    assert isinstance(out.get("error"), ProducerFencedError), out
    bad = tmp_path / secret / "log.jsonl"  # the error quotes the path, hence the secret
    with pytest.raises(Exception, match=secret):
        run_sink({"name": "rd", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector", "topics": "b",
                  "log.path": str(bad)}, url, max_records=5)
    got = service.runs("pc_runs", run_ids=lambda keys: {})
    rows = got["runs"]
    assert secret not in json.dumps(got)
    failed, fencer, fenced = rows
    assert (failed["connector"], failed["kind"], failed["state"]) == ("rd", "sink", "failed")
    assert "No such file or directory" in failed["error"] and "/[hidden]/log.jsonl" in failed["error"]
    assert (fencer["connector"], fencer["state"], fencer["generation"]) == ("busy", "stopped", 1)
    assert fencer["key"] == {"dag_id": "d", "task_id": "again"} and fencer["run_id"] == "manual__2"
    assert fencer["try_number"] == "1"
    assert (fenced["connector"], fenced["state"], fenced["generation"]) == ("busy", "fenced", 0)
    assert fenced["error"].startswith("fenced by generation 1") and "ProducerFencedError" in fenced["error"]
    assert fenced["key"] == {} and fenced["run_id"] is None
    assert set(got["colours"]) == {"busy", "rd"} and len(set(got["colours"].values())) == 2


def test_offsets_of_a_connector_that_never_ran_are_not_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """GET, PATCH and DELETE of a name no run registered: ConnectorNotFound (the app's 404); nothing written."""
    from airflow_pyconnect.plugins import service
    from connect_runtime import admin, run_source
    from connect_runtime.backends import open_backend

    url = f"sqlite:///{tmp_path / 's.db'}"
    _conn(monkeypatch, "pc_404", host=url)
    run_source({"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                "topic": "o", "max.records": 10}, url)
    assert service.offsets("pc_404", "gen") == {"offsets": [{"partition": {"task": 0}, "offset": {"position": 10}}]}
    with pytest.raises(admin.ConnectorNotFound, match=r"^connector 'nope' not found"):
        service.offsets("pc_404", "nope")
    with pytest.raises(admin.ConnectorNotFound):
        service.alter("pc_404", "nope", [{"partition": {"task": 0}, "offset": {"position": 3}}])
    with pytest.raises(admin.ConnectorNotFound):
        service.reset("pc_404", "nope")
    with open_backend(url) as be:
        assert admin.source_offsets(be, "nope") == [] and [c["name"] for c in admin.list_connectors(be)] == ["gen"]


def test_a_name_with_offsets_and_no_run_is_listed_read_and_changed(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """Offsets another worker wrote in Kafka Connect's format (no run of ours): the page lists the name
    (``registered`` false) with its offsets, GET/PATCH/DELETE answer as for any connector; once its last offset
    is deleted the name is unknown again (404)."""
    from airflow_pyconnect.plugins import service
    from connect_runtime import admin
    from connect_runtime.backends import open_backend

    url = f"sqlite:///{tmp_path / 's.db'}"
    _conn(monkeypatch, "pc_kc", host=url)
    partition = {"filename": "/data/in.txt"}
    with open_backend(url) as be:
        store = be.offset_store(None)
        try:
            store.put([(b'["kc-source",{"filename":"/data/in.txt"}]', b'{"position":120}')], 5.0)
        finally:
            store.close()
    [listed] = service.overview("pc_kc")["connectors"]
    assert (listed["name"], listed["registered"], listed["kind"], listed["running"]) == ("kc-source", False, "source",
                                                                                         False)
    assert listed["offsets"] == [{"partition": partition, "offset": {"position": 120}}]
    assert service.offsets("pc_kc", "kc-source") == {"offsets": [{"partition": partition, "offset": {"position": 120}}]}
    assert service.alter("pc_kc", "kc-source", [{"partition": partition, "offset": {"position": 7}}]) == {
        "connector": "kc-source", "altered": 1}
    assert service.offsets("pc_kc", "kc-source") == {"offsets": [{"partition": partition, "offset": {"position": 7}}]}
    assert service.reset("pc_kc", "kc-source")["source_partitions_reset"] == 1
    with pytest.raises(admin.ConnectorNotFound):
        service.offsets("pc_kc", "kc-source")
    assert service.overview("pc_kc")["connectors"] == []


def test_a_sink_keeping_its_offsets_in_its_destination_shows_them_with_lag(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    """FileSink: the page shows the offsets its last run recorded in the destination, with lag; a change from
    the page (which has no connector config) is refused with the message saying what to do, nothing changed."""
    from airflow_pyconnect.plugins import service
    from connect_runtime import run_sink, run_source
    from connect_runtime.admin import OffsetsInDestination

    url = f"sqlite:///{tmp_path / 's.db'}"
    _conn(monkeypatch, "pc_dest", host=url)
    run_source({"name": "gen", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                "topic": "o", "max.records": 90}, url)
    run_sink({"name": "files", "connector.class": "connect_runtime.connectors.files.FileSink", "topics": "o",
              "directory": str(tmp_path / "out")}, url, until_offsets={"o": {"0": 50}})
    by = {c["name"]: c for c in service.overview("pc_dest")["connectors"]}
    files = by["files"]
    assert files["owns_offsets"] and files["destination"] == f"FileSink manifests and file names under {tmp_path / 'out'}"
    assert files["offsets"] == [{"partition": {"kafka_topic": "o", "kafka_partition": 0}, "offset": {"kafka_offset": 50}}]
    assert files["lag"] == [{"topic": "o", "partition": 0, "committed": 50, "end": 90, "lag": 40, "in": "destination"}]
    assert files["total_lag"] == 40
    change = [{"partition": {"kafka_topic": "o", "kafka_partition": 0}, "offset": {"kafka_offset": 0}}]
    with pytest.raises(OffsetsInDestination, match="pass the connector's config"):
        service.alter("pc_dest", "files", change)
    with pytest.raises(OffsetsInDestination):
        service.reset("pc_dest", "files")
    assert {c["name"]: c for c in service.overview("pc_dest")["connectors"]}["files"]["offsets"] == files["offsets"]


def test_an_unreachable_store_is_one_line_naming_the_connection_without_secrets(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_pyconnect.plugins import service

    _conn(monkeypatch, "pc_down", host="kafka://127.0.0.1:9", login="u", password="pw-unit-very-secret",
          extra={"connect.timeout.ms": 500, "sasl.jaas.config": "jaas-unit-very-secret"})
    with pytest.raises(service.StoreUnavailable) as err:
        service.overview("pc_down")
    text = str(err.value)
    assert text.startswith("pc_down: store unreachable: ") and "\n" not in text
    assert "pw-unit-very-secret" not in text and "jaas-unit-very-secret" not in text
    _conn(monkeypatch, "pc_bad", host="http://nope")
    with pytest.raises(service.StoreUnavailable, match=r"^pc_bad: store unreachable: ValueError: unsupported"):
        service.runs("pc_bad")
    # a password inside the host's URL (issue 25: it was echoed to viewers in the 503)
    for conn_id, host in (("pc_url_down", "kafka://svc:pw-in-host-secret@127.0.0.1:9"),
                          ("pc_url_bad", "http://svc:pw-in-host-secret@nope")):
        _conn(monkeypatch, conn_id, host=host, extra={"connect.timeout.ms": 500})
        with pytest.raises(service.StoreUnavailable) as err:
            service.overview(conn_id)
        assert "pw-in-host-secret" not in str(err.value), str(err.value)
    _conn(monkeypatch, "pc_missing", host=f"sqlite:///{tmp_path / 'missing.db'}")
    with pytest.raises(service.StoreUnavailable, match=r"^pc_missing: store unreachable: "):
        service.overview("pc_missing")
    assert not (tmp_path / "missing.db").exists(), "looking created nothing"
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    with pytest.raises(service.StoreUnavailable, match=r"^pyconnect_default: no store yet"):
        service.overview("pyconnect_default", embedded=True)
    assert not (tmp_path / "home" / "pyconnect" / "pyconnect.db").exists(), "looking created nothing"
