"""The Connectors view under a real ``airflow api-server``: its JSON API and the page in Chromium.

One Airflow home and one API server for the module. Before the server starts, ``airflow dags test``
runs a small pipeline twice (two data intervals: a DataGen source, a sink that commits through its
consumer group and stops short of the end, so it lags, and a FileSink that keeps its own offsets) on
the embedded SQLite store, each day on a worker of its own name (``[core] hostname_callable``), and the
test fills a Kafka store (a Tansu broker) with a real source and sink run. The plugin comes from the provider manifest, as in any installation.

The API tests go through Airflow's real authentication (tokens from ``POST /auth/token`` of the
simple auth manager, users ``admin`` and ``viewer``), so they also prove the plugin app is not an
open door. The browser test logs in with the ``_token`` cookie, opens the "Connectors" entry of
Airflow's navigation and saves a screenshot (``docs/connectors-view.png`` when
``PYCONNECT_UPDATE_SCREENSHOT=1``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_pyconnect.plugins import service
from scripts.deploy import worker_hostname
from tests.support import unavailable
from tests.support.airflow_env import REPO, AirflowEnv, stop_group
from tests.support.ports import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

DAG_ID = "pyconnect_ui_demo"
TOPIC = "ui-orders"
SECRET = "ui-very-secret-pw-7"
START_TIMEOUT_S = 180
WORKER = worker_hostname.WORKER_HOSTNAME_ENV
HOSTS = ("ui-worker-a.example", "ui-worker-b.example")
"""The worker names Airflow gives the tasks of day 1 and day 2 (``[core] hostname_callable``)."""
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
AUDIT_MISSING = "/nonexistent/" + "pyconnect_ui_audit_trail_of_every_order_kept_for_the_compliance_team_by_day_" * 2
"""A long path with no break opportunity: the failed attempt's reason quotes it, and the page must still fit
(the page before issue 25 was 1,989 px wide at 1,280 with it)."""

DAG = f'''
from datetime import datetime
from airflow.sdk import DAG
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator

with DAG("{DAG_ID}", schedule="@daily", start_date=datetime(2026, 1, 1), catchup=False) as dag:
    generate = PyConnectSourceOperator(
        task_id="generate",
        connector_config={{"name": "{TOPIC}", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                          "topic": "{TOPIC}", "max.records": "{{{{ 150 * logical_date.day }}}}"}},
    )
    read = PyConnectSinkOperator(
        task_id="read",
        connector_config={{"name": "{TOPIC}-reader", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector",
                          "topics": "{TOPIC}", "log.path": "{{{{ var.value.get('ui_log', '/tmp/ui-reader.jsonl') }}}}"}},
        max_records=120,
    )
    archive = PyConnectSinkOperator(
        task_id="archive",
        connector_config={{"name": "{TOPIC}-archive", "connector.class": "connect_runtime.connectors.files.FileSink",
                          "topics": "{TOPIC}", "directory": "{{{{ var.value.get('ui_archive', '/tmp/ui-archive') }}}}"}},
        until_offsets=generate.output,
    )
    audit = PyConnectSinkOperator(  # day 1 runs; day 2 fails in start: its log folder does not exist
        task_id="audit",
        connector_config={{"name": "{TOPIC}-audit", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector",
                          "topics": "{TOPIC}",
                          "log.path": "{{{{ var.value.get('ui_audit', '/tmp/ui-audit.jsonl') if logical_date.day == 1 "
                                      "else '{AUDIT_MISSING}/' ~ ds_nodash ~ '/audit.jsonl' }}}}"}},
        until_offsets=generate.output,
    )
    generate >> [read, archive, audit]
'''


class Server:
    def __init__(self, af: AirflowEnv, env: dict[str, str], port: int, home: Path) -> None:
        self.af, self.env, self.port, self.home = af, env, port, home
        self.base = f"http://127.0.0.1:{port}"
        self.tokens: dict[str, str] = {}

    def request(self, method: str, path: str, user: str | None = None, body: Any = None,
                cookie: bool = False) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if user is not None:
            if cookie:
                headers["Cookie"] = f"_token={self.tokens[user]}"
            else:
                headers["Authorization"] = f"Bearer {self.tokens[user]}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                raw = resp.read().decode()
                status = resp.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read().decode(), exc.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def token(self, user: str, password: str) -> str:
        status, body = self.request("POST", "/auth/token", body={"username": user, "password": password})
        assert status in (200, 201), (status, body)
        return str(body["access_token"])


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "airflow api-server exited:\n" + log.read_text(errors="replace")[-4000:]
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    raise AssertionError(f"airflow api-server did not answer {url} within {timeout} s:\n"
                         + log.read_text(errors="replace")[-4000:])


@pytest.fixture(scope="module")
def kafka_store(kafka_url: str) -> str:
    """A Kafka store (Tansu) filled by a real source run and a real sink run that stops short."""
    from connect_runtime import run_sink, run_source

    run_source({"name": "kafka-orders", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                "topic": "ui-kafka-orders", "max.records": 80}, kafka_url)
    run_sink({"name": "kafka-orders-reader", "connector.class": "tests.support.sink_helpers.RecordingSinkConnector",
              "topics": "ui-kafka-orders", "log.path": os.devnull}, kafka_url, max_records=50)
    _kafka_connect_offsets(kafka_url, KC_NAME, {"filename": "/data/in.txt"}, 120)
    return kafka_url


KC_NAME = "ui-kc-file-source"
"""A name with offsets in ``connect-offsets`` in Kafka Connect's format and no run of ours (its FileStreamSource's)."""


def _kafka_connect_offsets(url: str, name: str, partition: dict[str, Any], position: int) -> None:
    """One offset record as a Kafka Connect worker writes it to ``connect-offsets`` (JsonConverter's bytes)."""
    from connect_runtime.backends import open_backend

    with open_backend(url) as be:
        store = be.offset_store(None)
        try:
            store.put([(json.dumps([name, partition], separators=(",", ":")).encode(),
                        json.dumps({"position": position}).encode())], 30.0)
        finally:
            store.close()


def _fenced_attempt(store: str) -> None:
    """Connector ``ui-fenced``: a run that a second run of the same connector fences while it runs."""
    from connect_runtime import run_source
    from connect_runtime.api.errors import ProducerFencedError
    from connect_runtime.backends import open_backend
    from connect_runtime.runtime.registry import Registry

    config = {"name": "ui-fenced", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
              "topic": "ui-fenced", "max.records": -1, "batch.size": 5, "poll.delay.ms": 50}
    out: dict[str, BaseException] = {}

    def first() -> None:
        try:
            run_source(config, store, max_seconds=120)
        except BaseException as exc:  # the fencing, checked below
            out["error"] = exc

    t = threading.Thread(target=first, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    with open_backend(store) as be:
        while not ((r := Registry(be).get("ui-fenced")) is not None and r.running):
            assert time.monotonic() < deadline and t.is_alive(), f"ui-fenced never ran: {out}"
            time.sleep(0.1)
    run_source(config, store, max_seconds=1)
    t.join(60)
    assert isinstance(out.get("error"), ProducerFencedError), out


def _forget_hosts(store: str, name: str) -> None:
    """Make ``name``'s registry entry one written before hosts were kept (no ``host`` / ``workers`` anywhere)."""
    from connect_runtime.backends import open_backend
    from connect_runtime.backends.base import REGISTRY_STORE
    from connect_runtime.runtime.registry import registry_key

    def strip(entry: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in entry.items() if k not in ("host", "workers")}

    with open_backend(store) as be:
        offsets = be.offset_store(REGISTRY_STORE)
        try:
            key = registry_key(name)
            entry = strip(json.loads(offsets.get([key])[key]))
            entry["attempts"] = [strip(a) for a in entry["attempts"]]
            offsets.put([(key, json.dumps(entry).encode())], 30.0)
        finally:
            offsets.close()


TRICKLE = f"{TOPIC}-trickle"
TRICKLE_RUNS, TRICKLE_RECORDS = 9, 30
"""A sink that reads the 300 records of TOPIC 30 at a time: nine runs, each leaving 30 less behind (the lag chart)."""
FILES, FILE_COUNT = "ui-files", 220
"""A DirectorySource over 220 files: one source partition per file (the card shows the first few)."""


def _trickle(store: str) -> None:
    from connect_runtime import run_sink

    for _ in range(TRICKLE_RUNS):
        run_sink({"name": TRICKLE, "connector.class": "tests.support.sink_helpers.RecordingSinkConnector",
                  "topics": TOPIC, "log.path": os.devnull}, store, max_records=TRICKLE_RECORDS)


def _files_source(store: str, directory: Path) -> None:
    from connect_runtime import run_source

    directory.mkdir()
    for i in range(FILE_COUNT):
        (directory / f"orders-{i:04d}.jsonl").write_text(json.dumps({"id": i}) + "\n")
    result = run_source({"name": FILES, "connector.class": "connect_runtime.connectors.files.DirectorySource",
                         "directory": str(directory), "topic": FILES, "file.final.ms": 0,
                         "directory.scan.interval.ms": 0}, store, ledger_key={"interval": "files"})
    assert result.records == FILE_COUNT, result


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, kafka_store: str) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui")
    home = tmp / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / f"{DAG_ID}.py").write_text(DAG)
    af = AirflowEnv(home)
    port = free_port()
    env = {
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW_VAR_UI_LOG": str(tmp / "reader.jsonl"),
        "AIRFLOW_VAR_UI_ARCHIVE": str(tmp / "archive"),
        "AIRFLOW_VAR_UI_AUDIT": str(tmp / "audit.jsonl"),
    }
    af.airflow("db", "migrate", extra_env=env, timeout=180)
    conns = {
        "pyconnect_kafka": {"conn_type": "pyconnect", "host": kafka_store},
        "pyconnect_broken": {"conn_type": "pyconnect", "host": "kafka://127.0.0.1:9", "login": "svc",
                             "password": SECRET, "extra": json.dumps({"connect.timeout.ms": 1500})},
    }
    (tmp / "conns.json").write_text(json.dumps(conns))
    af.airflow("connections", "import", str(tmp / "conns.json"), extra_env=env)
    on = {"AIRFLOW__CORE__HOSTNAME_CALLABLE": worker_hostname.CALLABLE}  # each day on a worker of its own name
    af.airflow("dags", "test", DAG_ID, "2026-01-01", extra_env={**env, **on, WORKER: HOSTS[0]}, timeout=300)
    af.airflow("dags", "test", DAG_ID, "2026-01-02", extra_env={**env, **on, WORKER: HOSTS[1]}, timeout=300,
               check=False)  # audit fails
    _fenced_attempt(f"sqlite:///{home / 'pyconnect' / 'pyconnect.db'}")
    _forget_hosts(f"sqlite:///{home / 'pyconnect' / 'pyconnect.db'}", "ui-fenced")
    _trickle(f"sqlite:///{home / 'pyconnect' / 'pyconnect.db'}")
    _files_source(f"sqlite:///{home / 'pyconnect' / 'pyconnect.db'}", tmp / "files")
    log = tmp / "api-server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(Path(af.env()["PATH"].split(os.pathsep)[0]) / "airflow"), "api-server",
                                 "--host", "127.0.0.1", "--port", str(port)], env=af.env(env), stdout=out, stderr=subprocess.STDOUT,
                                cwd=home, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/api/v2/monitor/health", proc, log, START_TIMEOUT_S)
        srv = Server(af, env, port, home)
        passwords = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())
        srv.tokens = {u: srv.token(u, p) for u, p in passwords.items()}
        yield srv
    finally:
        stop_group(proc, grace=15)
    assert SECRET not in log.read_text(errors="replace"), "the connection password reached the server log"


def _by_name(overview: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in overview["connectors"]}


# -- the API ----------------------------------------------------------------------------------------


def test_unauthenticated_requests_are_refused(server: Server) -> None:
    for method, path in (("GET", "/pyconnect/api/connections"),
                         ("GET", "/pyconnect/api/connections/pyconnect_default"),
                         ("GET", "/pyconnect/api/connections/pyconnect_default/runs"),
                         ("DELETE", f"/pyconnect/api/connections/pyconnect_default/connectors/{TOPIC}/offsets")):
        status, body = server.request(method, path)
        assert status == 401, (method, path, status, body)
    server.tokens["forged"] = server.tokens["admin"][:-8] + "AAAAAAAA"  # a token whose signature is wrong
    status, body = server.request("GET", "/pyconnect/api/connections", "forged")
    assert status == 403 and body["detail"] == "Invalid JWT token", body


def test_connections_list_the_embedded_default_and_the_db_connections(server: Server) -> None:
    status, body = server.request("GET", "/pyconnect/api/connections", "viewer")
    assert status == 200, body
    conns = {c["conn_id"]: c for c in body["connections"]}
    assert set(conns) == {"pyconnect_default", "pyconnect_kafka", "pyconnect_broken"}
    assert conns["pyconnect_default"]["embedded"] is True
    assert not any(c["can_edit"] for c in conns.values()), "a viewer may not change offsets"
    status, body = server.request("GET", "/pyconnect/api/connections", "admin", cookie=True)  # the UI's cookie
    assert status == 200 and all(c["can_edit"] for c in body["connections"]), body


def test_offsets_lag_and_own_offsets_on_sqlite(server: Server) -> None:
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_default", "viewer")
    assert status == 200, body
    assert body["backend"] == "sqlite" and body["location"].endswith("pyconnect/pyconnect.db")
    c = _by_name(body)
    assert set(c) == {TOPIC, f"{TOPIC}-reader", f"{TOPIC}-archive", f"{TOPIC}-audit", "ui-fenced", TRICKLE, FILES}
    assert c[f"{TOPIC}-audit"]["state"] == "failed" and AUDIT_MISSING in c[f"{TOPIC}-audit"]["error"]
    src = c[TOPIC]
    assert src["kind"] == "source" and src["topics"] == [TOPIC] and not src["running"]
    assert src["offsets"] == [{"partition": {"task": 0}, "offset": {"position": 300}}]  # 150 + 150
    reader = c[f"{TOPIC}-reader"]
    assert reader["kind"] == "sink" and not reader["owns_offsets"]
    assert reader["offsets"] == [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0},
                                  "offset": {"kafka_offset": 240}}]  # two runs of max_records=120
    assert reader["lag"] == [{"topic": TOPIC, "partition": 0, "committed": 240, "end": 300, "lag": 60}]
    assert reader["total_lag"] == 60
    archive = c[f"{TOPIC}-archive"]
    # A FileSink keeps its offsets in its files: the page shows what its last run recorded there, and lag.
    assert archive["owns_offsets"] is True
    assert archive["offsets"] == [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0},
                                   "offset": {"kafka_offset": 300}}]
    assert archive["lag"] == [{"topic": TOPIC, "partition": 0, "committed": 300, "end": 300, "lag": 0,
                               "in": "destination"}]
    assert archive["total_lag"] == 0


def test_offsets_and_lag_on_kafka(server: Server) -> None:
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_kafka", "viewer")
    assert status == 200, body
    assert body["backend"] == "kafka"
    c = _by_name(body)
    assert c["kafka-orders"]["offsets"] == [{"partition": {"task": 0}, "offset": {"position": 80}}]
    reader = c["kafka-orders-reader"]
    assert reader["offsets"] == [{"partition": {"kafka_topic": "ui-kafka-orders", "kafka_partition": 0},
                                  "offset": {"kafka_offset": 50}}]
    (lag,) = reader["lag"]
    # Tansu's ListOffsets end is not exact (see ENVIRONMENT.md); the shape and the arithmetic are
    assert lag["committed"] == 50 and lag["end"] >= 50 and lag["lag"] == lag["end"] - 50


def test_runs_newest_first_with_their_dag_runs(server: Server) -> None:
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_default/runs", "viewer")
    assert status == 200, body
    runs = [r for r in body["runs"] if r["connector"] == TOPIC]
    assert [r["type"] for r in runs] == ["ranges", "ranges"], "each source run is its ranges row, state merged in"
    assert [r["key"]["interval"][:10] for r in runs] == ["2026-01-02", "2026-01-01"]
    assert [r["records"] for r in runs] == [150, 150]
    assert [r["ranges"] for r in runs] == [{TOPIC: {"0": [150, 300]}}, {TOPIC: {"0": [0, 150]}}]
    assert [(r["state"], r["generation"], r["try_number"]) for r in runs] == [("stopped", 1, "1"), ("stopped", 0, "1")]
    assert [r["host"] for r in runs] == [HOSTS[1], HOSTS[0]], "the worker Airflow ran each attempt on, by its name"
    assert runs[0]["updated"] >= runs[1]["updated"]
    for r in runs:
        assert r["key"]["dag_id"] == DAG_ID and r["key"]["task_id"] == "generate"
        status, run = server.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{r['run_id']}", "viewer")
        assert status == 200 and run["data_interval_start"][:10] == r["key"]["interval"][:10], run
        status, ti = server.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{r['run_id']}/taskInstances/generate",
                                    "viewer")
        assert status == 200 and ti["task_id"] == "generate", ti


def test_runs_show_sink_runs_and_failed_or_fenced_attempts_with_the_reason(server: Server) -> None:
    """Sink runs (records delivered), the audit sink's failed Airflow attempt with its reason and task instance,
    and a fenced attempt (a second run of ``ui-fenced`` started while the first ran), each in one colour."""
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_default/runs", "viewer")
    assert status == 200, body
    by: dict[str, list[dict[str, Any]]] = {}
    for r in body["runs"]:
        by.setdefault(r["connector"], []).append(r)
    day_runs = [r["run_id"] for r in by[TOPIC]]  # newest first: day 2, day 1
    assert all(day_runs), by[TOPIC]
    for name, task, records in ((f"{TOPIC}-reader", "read", 120), (f"{TOPIC}-archive", "archive", 150)):
        rows = by[name]
        assert [(r["type"], r["kind"], r["state"], r["records"]) for r in rows] == [("attempt", "sink", "stopped", records)] * 2
        assert [r["run_id"] for r in rows] == day_runs and [r["generation"] for r in rows] == [1, 0]
        assert all(r["key"] == {"dag_id": DAG_ID, "task_id": task} and r["topics"] == [TOPIC] for r in rows)
        assert [r["host"] for r in rows] == [HOSTS[1], HOSTS[0]]
    # the range each sink run delivered and the lag it left at its end (its target, or the end as it started,
    # minus what it committed), as its registry record keeps them
    reader, archive = by[f"{TOPIC}-reader"], by[f"{TOPIC}-archive"]
    assert [(r["ranges"], r["lag"]) for r in reader] == [({TOPIC: {"0": [120, 240]}}, 60), ({TOPIC: {"0": [0, 120]}}, 30)]
    assert [(r["ranges"], r["lag"], r["lag_partitions"]) for r in archive] == [
        ({TOPIC: {"0": [150, 300]}}, 0, {TOPIC: {"0": 0}}), ({TOPIC: {"0": [0, 150]}}, 0, {TOPIC: {"0": 0}})]
    trickle = by[TRICKLE]
    assert [r["lag"] for r in trickle] == [300 - TRICKLE_RECORDS * k for k in range(TRICKLE_RUNS, 0, -1)]
    assert [r["ranges"] for r in trickle][-2:] == [{TOPIC: {"0": [30, 60]}}, {TOPIC: {"0": [0, 30]}}]
    failed, ok = by[f"{TOPIC}-audit"]
    assert (ok["state"], ok["records"], ok["run_id"]) == ("stopped", 150, day_runs[1])
    assert (ok["lag"], failed["lag"], failed["ranges"]) == (0, None, {}), "a failed run delivered nothing for good"
    assert (failed["state"], failed["kind"], failed["records"], failed["run_id"]) == ("failed", "sink", None, day_runs[0])
    assert "FileNotFoundError" in failed["error"] and AUDIT_MISSING in failed["error"], failed
    assert failed["key"] == {"dag_id": DAG_ID, "task_id": "audit"} and failed["try_number"] == "1"
    status, ti = server.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{failed['run_id']}/taskInstances/audit", "viewer")
    assert status == 200 and ti["state"] == "failed", ti  # the row is that task instance's attempt
    fencer, fenced = by["ui-fenced"]
    assert (fencer["state"], fencer["generation"], fencer["error"]) == ("stopped", 1, None)
    assert (fenced["state"], fenced["generation"], fenced["kind"]) == ("fenced", 0, "source")
    assert fenced["error"].startswith("fenced by generation 1") and "ProducerFencedError" in fenced["error"], fenced
    assert fenced["started"] < fencer["started"] <= fenced["finished"]
    assert (fencer["host"], fenced["host"]) == (None, None), "an entry written before hosts were kept still shows"
    # one colour per connector, every connector of the store named, from its name only
    colours = body["colours"]
    assert colours == {n: service.colour(n) for n in by}, colours
    status, kafka = server.request("GET", "/pyconnect/api/connections/pyconnect_kafka/runs", "viewer")
    assert status == 200, kafka
    assert {(r["connector"], r["kind"], r["state"], r["records"]) for r in kafka["runs"]} >= {
        ("kafka-orders", "source", "stopped", None), ("kafka-orders-reader", "sink", "stopped", 50)}
    assert {r["host"] for r in kafka["runs"] if r["connector"] == "kafka-orders-reader"} == {socket.gethostname()}
    (kreader,) = [r for r in kafka["runs"] if r["connector"] == "kafka-orders-reader"]
    (span,) = kreader["ranges"]["ui-kafka-orders"].values()  # 50 records; on Kafka offsets count commit markers too
    assert span[0] == 0 and span[1] >= 50 and kreader["lag"] > 0, kreader


def test_offsets_of_a_connector_that_never_ran_are_404(server: Server) -> None:
    """GET, PATCH and DELETE of the offsets of a name no run registered: 404 (Kafka Connect's "Connector X not
    found"), on SQLite and Kafka; nothing is written under that name; a real name answers 200."""
    base = "/pyconnect/api/connections/pyconnect_default/connectors"
    status, body = server.request("GET", f"{base}/{TOPIC}/offsets", "viewer")
    assert status == 200 and body == {"offsets": [{"partition": {"task": 0}, "offset": {"position": 300}}]}, body
    change = {"offsets": [{"partition": {"task": 0}, "offset": {"position": 7}}]}
    for method, user, payload in (("GET", "viewer", None), ("PATCH", "admin", change), ("DELETE", "admin", None),
                                  ("GET", "admin", None)):
        status, body = server.request(method, f"{base}/ui-orderz/offsets", user, payload)
        assert status == 404, (method, status, body)
        assert body["detail"].startswith("connector 'ui-orderz' not found") and "did you mean 'ui-orders'" in body["detail"]
    status, body = server.request("PATCH", f"{base}/ui-orderz/offsets", "viewer", change)
    assert status == 403, body  # permissions first
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_default", "admin")
    assert "ui-orderz" not in _by_name(body)
    status, body = server.request("DELETE", "/pyconnect/api/connections/pyconnect_kafka/connectors/nope/offsets", "admin")
    assert status == 404 and body["detail"].startswith("connector 'nope' not found"), body
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_kafka/connectors/kafka-orders/offsets",
                                  "viewer")
    assert status == 200 and body["offsets"] == [{"partition": {"task": 0}, "offset": {"position": 80}}], body


def test_a_name_with_offsets_and_no_run_is_a_connector_of_the_page_and_the_api(server: Server, kafka_store: str) -> None:
    """Offsets in ``connect-offsets`` in Kafka Connect's format under a name no run of ours registered (a Kafka
    Connect FileStreamSource sharing the topic): the page lists it (``registered`` false) with its offsets, GET
    answers them, PATCH and DELETE change them; with its last offset deleted, the name is 404 again."""
    name = f"kc-source-{os.getpid()}-{time.monotonic_ns()}"
    partition = {"filename": "/data/in.txt"}
    _kafka_connect_offsets(kafka_store, name, partition, 120)
    conn = "/pyconnect/api/connections/pyconnect_kafka"
    path = f"{conn}/connectors/{name}/offsets"
    status, body = server.request("GET", conn, "viewer")
    assert status == 200, body
    listed = _by_name(body)[name]
    assert (listed["registered"], listed["kind"], listed["running"]) == (False, "source", False)
    assert listed["offsets"] == [{"partition": partition, "offset": {"position": 120}}]
    status, body = server.request("GET", path, "viewer")
    assert status == 200 and body == {"offsets": [{"partition": partition, "offset": {"position": 120}}]}, body
    status, body = server.request("PATCH", path, "admin", {"offsets": [{"partition": partition, "offset": {"position": 7}}]})
    assert status == 200 and body == {"connector": name, "altered": 1}, body
    status, body = server.request("GET", path, "viewer")
    assert status == 200 and body == {"offsets": [{"partition": partition, "offset": {"position": 7}}]}, body
    status, body = server.request("DELETE", path, "admin")
    assert status == 200 and body["source_partitions_reset"] == 1, body
    status, body = server.request("GET", path, "viewer")
    assert status == 404 and body["detail"].startswith(f"connector {name!r} not found"), body


def test_the_extra_link_points_at_the_connector(server: Server) -> None:
    status, body = server.request("GET", f"/pyconnect/api/connections/pyconnect_default/runs?connector={TOPIC}",
                                  "viewer")
    run_id = body["runs"][0]["run_id"]
    for task_id, connector in (("generate", TOPIC), ("read", f"{TOPIC}-reader")):
        status, links = server.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/links",
                                       "viewer")
        assert status == 200, links
        assert links["extra_links"]["Connectors"] == (f"{server.base}/pyconnect/ui?conn=pyconnect_default&connector={connector}")


def test_an_unreachable_store_is_one_line_without_secrets(server: Server) -> None:
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_broken", "admin")
    assert status == 503, body
    detail = body["detail"]
    assert detail.startswith("pyconnect_broken: store unreachable: ") and "\n" not in detail, detail
    assert "Traceback" not in detail and SECRET not in json.dumps(body)
    status, body = server.request("GET", "/pyconnect/api/connections/nope", "admin")
    assert status == 404 and "nope" in body["detail"]


def test_a_viewer_cannot_change_offsets(server: Server) -> None:
    path = f"/pyconnect/api/connections/pyconnect_default/connectors/{TOPIC}-reader/offsets"
    status, body = server.request("DELETE", path, "viewer")
    assert status == 403, body
    status, body = server.request("PATCH", path, "viewer", {"offsets": [
        {"partition": {"kafka_topic": TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 0}}]})
    assert status == 403, body
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_default", "viewer")
    assert _by_name(body)[f"{TOPIC}-reader"]["lag"][0]["committed"] == 240, "nothing changed"


# -- the page ---------------------------------------------------------------------------------------


OVERFLOW_JS = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
OVERLAPS_JS = """svg => {  // pairs of time labels whose boxes intersect
  const boxes = [...svg.querySelectorAll('text.tick')].map(t => [t.textContent, t.getBoundingClientRect()]);
  const out = [];
  boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
    if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) out.push([a, b]);
  }));
  return [boxes.length, out];
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's page tests (each opens its own context)."""
    if not os.path.exists(CHROMIUM):
        unavailable("no Chromium (chromium on PATH or /usr/bin/chromium): apt-get install -y chromium",
                    ".ci/run installs chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            yield chromium
        finally:
            chromium.close()


def _logged_in(browser: Any, server: Server, width: int) -> Any:
    """A browser context of the given width with Airflow's session: the ``_token`` cookie of user admin."""
    ctx = browser.new_context(viewport={"width": width, "height": 1500})
    ctx.add_cookies([{"name": "_token", "value": server.tokens["admin"], "url": server.base}])
    return ctx


def _no_label_overlaps(scope: Any) -> int:
    """Asserts that no two time labels of any chart in ``scope`` overlap; the number of labels drawn."""
    drawn = 0
    for svg in scope.locator("svg.chart-svg").all():
        count, overlaps = svg.evaluate(OVERLAPS_JS)
        assert not overlaps, f"time labels overlap in {svg.get_attribute('class')}: {overlaps}"
        drawn += count
    return drawn


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_page_in_chromium(server: Server, browser: Any, tmp_path: Path, width: int) -> None:
    """Through Airflow's navigation (Browse > Connectors) at ``width`` px: the cards, the runs table with sink
    runs and failed / fenced attempts and their reasons and the host of each attempt, the charts in one colour per
    connector with their legend, time labels that never overlap; no horizontal overflow, neither of Airflow's page
    nor of the view in its iframe. Screenshots: ``docs/connectors-view.png`` (1,280) and
    ``docs/connectors-view-1920.png`` with ``PYCONNECT_UPDATE_SCREENSHOT=1``."""
    shot = tmp_path / f"connectors-view-{width}.png"
    status, api_runs = server.request("GET", "/pyconnect/api/connections/pyconnect_default/runs", "admin")
    assert status == 200, api_runs
    ctx = _logged_in(browser, server, width)
    try:
        page = ctx.new_page()
        page.goto(f"{server.base}/", wait_until="domcontentloaded", timeout=60_000)
        try:  # the navigation: Browse > Connectors
            page.get_by_text("Browse", exact=True).first.click(timeout=60_000)
            page.get_by_text("Connectors", exact=True).first.click(timeout=30_000)
            page.wait_for_url("**/plugin/pyconnect_connectors", timeout=30_000)
        except Exception:
            page.screenshot(path=str(tmp_path / "nav-failed.png"))
            raise
        frame = page.frame_locator("iframe").first
        card = frame.locator(f'.card[data-connector="{TOPIC}-reader"]')
        card.wait_for(timeout=60_000)
        default = frame.locator('.connection[data-conn="pyconnect_default"]')
        default.locator("table.runs-table tr.run").first.wait_for(timeout=60_000)
        assert "total lag 60" in card.inner_text()
        assert "240" in card.inner_text() and "300" in card.inner_text()
        src = frame.locator(f'.card[data-connector="{TOPIC}"]').inner_text()
        assert '{"position":300}' in src and "source" in src
        archive = frame.locator(f'.card[data-connector="{TOPIC}-archive"]').inner_text()
        assert "keeps its own offsets" in archive and "total lag 0" in archive  # its lag, from its destination
        links = frame.locator("a.ti-link")
        assert links.count() >= 2 and f"/dags/{DAG_ID}/runs/" in (links.first.get_attribute("href") or "")

        # the runs table: sink runs, a failed attempt with its reason, a fenced one
        rows = default.locator("table.runs-table tr.run")
        assert default.locator(f'tr.run[data-connector="{TOPIC}-reader"][data-state="succeeded"]').count() == 2
        failed = default.locator(f'tr.run[data-connector="{TOPIC}-audit"][data-state="failed"]')
        assert failed.count() == 1 and AUDIT_MISSING in failed.inner_text() and "audit" in failed.inner_text()
        fenced = default.locator('tr.run[data-connector="ui-fenced"][data-state="fenced"]')
        assert fenced.count() == 1 and "fenced by generation 1" in fenced.inner_text()
        assert rows.count() == len(api_runs["runs"])
        # the host column: the worker of each attempt as Airflow names it; none for an entry written before
        assert "host" in default.locator("table.runs-table th").all_inner_texts()
        hosts = default.locator(f'tr.run[data-connector="{TOPIC}"] td.host').all_inner_texts()
        assert hosts == [HOSTS[1], HOSTS[0]], hosts
        assert fenced.locator("td.host").inner_text() == "\u2013"  # an en dash: unknown

        # the records chart: one colour per connector, as the API says, named in its legend
        colours = api_runs["colours"]
        legend = {e.get_attribute("data-connector"): e.get_attribute("data-colour")
                  for e in default.locator(".legend-item[data-connector]").all()}
        fills = {b.get_attribute("data-connector"): b.get_attribute("fill")
                 for b in default.locator("svg.runs-chart rect.bar").all()}
        counted = {r["connector"] for r in api_runs["runs"] if r["records"] is not None}
        assert set(fills) == counted == {TOPIC, f"{TOPIC}-reader", f"{TOPIC}-archive", f"{TOPIC}-audit", TRICKLE,
                                         FILES}, fills
        assert all(fills[n] == colours[n] == legend[n] for n in fills), (fills, legend, colours)
        assert set(legend) == set(fills) | {"ui-fenced"}  # ui-fenced has crosses only (no records counted)
        assert default.locator("svg.runs-chart .attempt-mark").count() == 2  # the failed and the fenced one
        for chart in ("runs-chart", "rate-chart", "lag-chart"):
            default.locator(f"svg.{chart}").wait_for(timeout=30_000)
        assert len(api_runs["runs"]) >= 12 and _no_label_overlaps(default) >= 6

        broken = frame.locator('.connection[data-conn="pyconnect_broken"] .store-error')
        broken.wait_for(timeout=60_000)
        assert broken.inner_text().startswith("pyconnect_broken: store unreachable")
        assert SECRET not in page.content() and SECRET not in frame.locator("body").inner_text()
        frame.locator('.connection[data-conn="pyconnect_kafka"] table.runs-table').wait_for(timeout=60_000)
        kc = frame.locator(f'.connection[data-conn="pyconnect_kafka"] .card[data-connector="{KC_NAME}"]')
        kc.wait_for(timeout=60_000)  # a name with offsets and no run: its card says so, with its offsets
        assert "No run of it in this store" in kc.inner_text() and '{"position":120}' in kc.inner_text()

        # no horizontal overflow: Airflow's page, and the view inside its iframe
        view = next(f for f in page.frames if "/pyconnect/ui" in f.url)
        outer, inner = page.evaluate(OVERFLOW_JS), view.evaluate(OVERFLOW_JS)
        assert outer[0] <= outer[1] and inner[0] <= inner[1], f"overflow at {width} px: page {outer}, view {inner}"
        page.screenshot(path=str(shot), full_page=False)

        # the page on its own at this width (the operator's extra link opens it on its connector)
        page.goto(f"{server.base}/pyconnect/ui?conn=pyconnect_default&connector={TOPIC}-reader",
                  wait_until="domcontentloaded")
        page.locator(f'.card.focus[data-connector="{TOPIC}-reader"]').wait_for(timeout=60_000)
        page.locator('.connection[data-conn="pyconnect_default"] table.runs-table').wait_for(timeout=60_000)
        assert page.locator(".card.focus").count() == 1
        alone = page.evaluate(OVERFLOW_JS)
        assert alone[0] <= alone[1], f"the page alone overflows at {width} px: {alone}"
    finally:
        ctx.close()
    assert shot.stat().st_size > 20_000
    if os.environ.get("PYCONNECT_UPDATE_SCREENSHOT"):
        (REPO / "docs").mkdir(exist_ok=True)
        name = "connectors-view.png" if width == 1280 else f"connectors-view-{width}.png"
        (REPO / "docs" / name).write_bytes(shot.read_bytes())


def _points(scope: Any, selector: str) -> list[tuple[str, int, float]]:
    return [(p.get_attribute("data-connector") or "", int(p.get_attribute("data-updated") or 0),
             float(p.get_attribute("data-value") or "nan")) for p in scope.locator(selector).all()]


def test_the_charts_and_what_a_new_user_reads_in_chromium(server: Server, browser: Any) -> None:
    """At 1,280 px, the page alone: the records/s points are records / duration of the runs the API lists, the lag
    points the lags their records keep; successful runs read "succeeded" (the connector's badge keeps Kafka
    Connect's state, named as such); each sink run shows the range it delivered; the card of a source with 220
    partitions shows ten and "… and 210 more", a toggle away from all of them."""
    status, api = server.request("GET", "/pyconnect/api/connections/pyconnect_default/runs", "admin")
    assert status == 200, api
    ctx = _logged_in(browser, server, 1280)
    try:
        page = ctx.new_page()
        page.goto(f"{server.base}/pyconnect/ui", wait_until="domcontentloaded", timeout=60_000)
        default = page.locator('.connection[data-conn="pyconnect_default"]')
        default.locator("svg.lag-chart circle.lag-point").first.wait_for(timeout=60_000)

        rates = sorted(_points(default, "svg.rate-chart circle.rate-point"))
        want = sorted((r["connector"], r["updated"], r["records"] / ((r["finished"] - r["started"]) / 1000))
                      for r in api["runs"] if r["records"] is not None and r["state"] == "stopped"
                      and r["finished"] and r["started"] and r["finished"] > r["started"])
        assert [p[:2] for p in rates] == [w[:2] for w in want] and len(want) >= 12, (rates, want)
        assert all(p[2] == pytest.approx(w[2], rel=1e-9) for p, w in zip(rates, want, strict=True)), (rates, want)
        lags = sorted(_points(default, "svg.lag-chart circle.lag-point"))
        assert lags == sorted((r["connector"], r["updated"], float(r["lag"])) for r in api["runs"]
                              if r["kind"] == "sink" and r["lag"] is not None), lags
        trickle = [v for n, _, v in lags if n == TRICKLE]
        assert trickle == [300 - TRICKLE_RECORDS * k for k in range(1, TRICKLE_RUNS + 1)], "oldest first"
        assert default.locator(f'svg.lag-chart polyline.series[data-connector="{TRICKLE}"]').count() == 1
        assert _no_label_overlaps(default) >= 6

        # outcomes: "succeeded" where a run ended well; the card's badge is the connector's state, said to be so
        outcomes = default.locator("table.runs-table td.outcome .badge.state").all_inner_texts()
        assert "stopped" not in outcomes and outcomes.count("succeeded") >= 12 and {"failed", "fenced"} <= set(outcomes)
        audit = default.locator(f'.card[data-connector="{TOPIC}-audit"]')
        assert audit.locator(".badge.conn-state").inner_text() == "connector FAILED"
        assert "Kafka Connect" in (audit.locator(".badge.conn-state").get_attribute("title") or "")
        assert audit.locator(".badge.last-run").inner_text() == "last run failed"
        reader = default.locator(f'.card[data-connector="{TOPIC}-reader"]')
        assert (reader.locator(".badge.conn-state").inner_text(), reader.locator(".badge.last-run").inner_text()) == (
            "connector STOPPED", "last run succeeded")

        # the range each sink run delivered, and the lag it left
        delivered = default.locator(f'tr.run[data-connector="{TOPIC}-reader"] td.ranges').all_inner_texts()
        assert delivered == [f"{TOPIC}/0 120\u2192240", f"{TOPIC}/0 0\u2192120"], delivered
        assert default.locator(f'tr.run[data-connector="{TOPIC}-reader"] .end-lag').all_inner_texts() == ["lag 60", "lag 30"]

        # a source with 220 partitions: ten rows and "… and 210 more", the card stays short; the toggle shows all
        files = default.locator(f'.card[data-connector="{FILES}"]')
        visible = files.locator("table.offsets tr:visible")
        assert visible.count() == 1 + 10 and "… and 210 more source partitions" in files.inner_text()
        short = files.bounding_box()
        assert short is not None and short["height"] < 600, short
        files.locator("button.more-toggle").click()
        assert visible.count() == 1 + FILE_COUNT
        files.locator("button.more-toggle").click()
        assert visible.count() == 1 + 10
    finally:
        ctx.close()


def test_a_connectors_colour_stays_when_other_connectors_appear(server: Server, browser: Any) -> None:
    """Every connector's colour in the page is :func:`service.colour` of its name; a new connector run into the store
    takes its own, and every other colour stays what it was."""
    from connect_runtime import run_source

    def legend(page: Any) -> dict[str, str]:
        page.goto(f"{server.base}/pyconnect/ui", wait_until="domcontentloaded", timeout=60_000)
        default = page.locator('.connection[data-conn="pyconnect_default"]')
        default.locator(".legend-item[data-connector]").first.wait_for(timeout=60_000)
        return {e.get_attribute("data-connector") or "": e.get_attribute("data-colour") or ""
                for e in default.locator(".legend-item[data-connector]").all()}

    ctx = _logged_in(browser, server, 1280)
    try:
        page = ctx.new_page()
        before = legend(page)
        assert before == {n: service.colour(n) for n in before} and len(before) >= 7, before
        newcomer = "ui-aaa-newcomer"  # sorts first: a colour by position would shift every other one
        run_source({"name": newcomer, "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                    "topic": newcomer, "max.records": 5}, f"sqlite:///{server.home / 'pyconnect' / 'pyconnect.db'}",
                   ledger_key={"interval": "newcomer"})
        after = legend(page)
        assert after == {**before, newcomer: service.colour(newcomer)}, (before, after)
        swatch = page.locator(f'.card[data-connector="{newcomer}"] .swatch').get_attribute("style") or ""
        assert service.colour(newcomer) in swatch, swatch
    finally:
        ctx.close()


# -- changing offsets -------------------------------------------------------------------------------


def test_changes_are_refused_while_the_connector_runs_then_applied(server: Server) -> None:
    from connect_runtime import run_source

    store = f"sqlite:///{server.home / 'pyconnect' / 'pyconnect.db'}"
    stop = threading.Event()
    out: dict[str, Any] = {}

    def busy() -> None:
        try:
            out["result"] = run_source({"name": "ui-busy", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                                        "topic": "ui-busy", "max.records": -1, "batch.size": 5, "poll.delay.ms": 50},
                                       store, max_seconds=120, stop=stop)
        except BaseException as exc:  # reported below
            out["error"] = exc

    t = threading.Thread(target=busy, daemon=True)
    t.start()
    path = "/pyconnect/api/connections/pyconnect_default/connectors/ui-busy/offsets"
    try:
        deadline = time.monotonic() + 60
        while True:
            status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_default", "admin")
            if status == 200 and _by_name(body).get("ui-busy", {}).get("running"):
                break
            assert time.monotonic() < deadline and t.is_alive(), f"ui-busy never showed as running: {body} {out}"
            time.sleep(0.3)
        status, body = server.request("DELETE", path, "admin")
        assert status == 409 and "running" in body["detail"].lower(), body
        status, body = server.request("PATCH", path, "admin", {"offsets": [
            {"partition": {"task": 0}, "offset": {"position": 0}}]})
        assert status == 409, body
    finally:
        stop.set()
        t.join(60)
    assert not t.is_alive() and "error" not in out, out
    status, body = server.request("PATCH", path, "admin", {"offsets": [
        {"partition": {"task": 0}, "offset": {"position": 7}}]})
    assert status == 200, body
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_default", "admin")
    assert _by_name(body)["ui-busy"]["offsets"] == [{"partition": {"task": 0}, "offset": {"position": 7}}]

    # a sink rewound through the API lags by the whole topic; bad input names the entry
    reader = f"/pyconnect/api/connections/pyconnect_default/connectors/{TOPIC}-reader/offsets"
    status, body = server.request("PATCH", reader, "admin", {"offsets": [{"partition": {"kafka_topic": TOPIC,
                                                                                      "kafka_partition": 0}}]})
    assert status == 200, body
    status, body = server.request("GET", "/pyconnect/api/connections/pyconnect_default", "admin")
    assert _by_name(body)[f"{TOPIC}-reader"]["lag"] == [{"topic": TOPIC, "partition": 0, "committed": 0,
                                                          "end": 300, "lag": 300}]
    status, body = server.request("PATCH", reader, "admin", {"offsets": [{"partition": {"kafka_topic": TOPIC,
                                                                                      "kafka_partition": 0},
                                                                        "offset": {"kafka_offset": -3}}]})
    assert status == 400 and "offsets[0]" in body["detail"], body
    status, body = server.request("DELETE", f"/pyconnect/api/connections/pyconnect_default/connectors/{TOPIC}/offsets",
                                  "admin")
    assert status == 200 and body["source_partitions_reset"] == 1, body
