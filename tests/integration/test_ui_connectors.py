"""The Connectors view under a real ``airflow api-server``: its JSON API and the page in Chromium.

One Airflow home and one API server for the module. Before the server starts, ``airflow dags test``
runs a small pipeline twice (two data intervals: a DataGen source, a sink that commits through its
consumer group and stops short of the end, so it lags, and a FileSink that keeps its own offsets) on
the embedded SQLite store, and the test fills a Kafka store (a Tansu broker) with a real source and
sink run. The plugin comes from the provider manifest, as in any installation.

The API tests go through Airflow's real authentication (tokens from ``POST /auth/token`` of the
simple auth manager, users ``admin`` and ``viewer``), so they also prove the plugin app is not an
open door. The browser test logs in with the ``_token`` cookie, opens the "Connectors" entry of
Airflow's navigation and saves a screenshot (``docs/connectors-view.png`` when
``PYCONNECT_UPDATE_SCREENSHOT=1``).
"""

from __future__ import annotations

import json
import os
import signal
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

from tests.unit.airflow_pyconnect.airflow_env import REPO, AirflowEnv

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

DAG_ID = "pyconnect_ui_demo"
TOPIC = "ui-orders"
SECRET = "ui-very-secret-pw-7"
START_TIMEOUT_S = 180
CHROMIUM = "/usr/bin/chromium"

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
        connector_config={{"name": "{TOPIC}-reader", "connector.class": "tests.sink_helpers.RecordingSinkConnector",
                          "topics": "{TOPIC}", "log.path": "{{{{ var.value.get('ui_log', '/tmp/ui-reader.jsonl') }}}}"}},
        max_records=120,
    )
    archive = PyConnectSinkOperator(
        task_id="archive",
        connector_config={{"name": "{TOPIC}-archive", "connector.class": "connect_runtime.connectors.files.FileSink",
                          "topics": "{TOPIC}", "directory": "{{{{ var.value.get('ui_archive', '/tmp/ui-archive') }}}}"}},
        until_offsets=generate.output,
    )
    generate >> [read, archive]
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, af: AirflowEnv, env: dict[str, str], port: int, home: Path) -> None:
        self.af, self.env, self.port, self.home = af, env, port, home
        self.base = f"http://localhost:{port}"
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
    run_sink({"name": "kafka-orders-reader", "connector.class": "tests.sink_helpers.RecordingSinkConnector",
              "topics": "ui-kafka-orders", "log.path": os.devnull}, kafka_url, max_records=50)
    return kafka_url


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, kafka_store: str) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui")
    home = tmp / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / f"{DAG_ID}.py").write_text(DAG)
    af = AirflowEnv(home)
    port = _free_port()
    env = {
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://localhost:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW_VAR_UI_LOG": str(tmp / "reader.jsonl"),
        "AIRFLOW_VAR_UI_ARCHIVE": str(tmp / "archive"),
    }
    af.airflow("db", "migrate", extra_env=env, timeout=180)
    conns = {
        "pyconnect_kafka": {"conn_type": "pyconnect", "host": kafka_store},
        "pyconnect_broken": {"conn_type": "pyconnect", "host": "kafka://127.0.0.1:9", "login": "svc",
                             "password": SECRET, "extra": json.dumps({"connect.timeout.ms": 1500})},
    }
    (tmp / "conns.json").write_text(json.dumps(conns))
    af.airflow("connections", "import", str(tmp / "conns.json"), extra_env=env)
    for day in ("2026-01-01", "2026-01-02"):
        af.airflow("dags", "test", DAG_ID, day, extra_env=env, timeout=300)
    log = tmp / "api-server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(Path(af.env()["PATH"].split(os.pathsep)[0]) / "airflow"), "api-server",
                                 "--port", str(port)], env=af.env(env), stdout=out, stderr=subprocess.STDOUT,
                                cwd=home, start_new_session=True)
    try:
        _wait_http(f"http://localhost:{port}/api/v2/monitor/health", proc, log, START_TIMEOUT_S)
        srv = Server(af, env, port, home)
        passwords = json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())
        srv.tokens = {u: srv.token(u, p) for u, p in passwords.items()}
        yield srv
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
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
    assert set(c) == {TOPIC, f"{TOPIC}-reader", f"{TOPIC}-archive"}
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
    assert [r["key"]["interval"][:10] for r in runs] == ["2026-01-02", "2026-01-01"]
    assert [r["records"] for r in runs] == [150, 150]
    assert [r["ranges"] for r in runs] == [{TOPIC: {"0": [150, 300]}}, {TOPIC: {"0": [0, 150]}}]
    assert runs[0]["updated"] >= runs[1]["updated"]
    for r in runs:
        assert r["key"]["dag_id"] == DAG_ID and r["key"]["task_id"] == "generate"
        status, run = server.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{r['run_id']}", "viewer")
        assert status == 200 and run["data_interval_start"][:10] == r["key"]["interval"][:10], run
        status, ti = server.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{r['run_id']}/taskInstances/generate",
                                    "viewer")
        assert status == 200 and ti["task_id"] == "generate", ti


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


def test_the_page_in_chromium(server: Server, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    shot = tmp_path / "connectors-view.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            ctx = browser.new_context(viewport={"width": 1500, "height": 1250})
            ctx.add_cookies([{"name": "_token", "value": server.tokens["admin"], "url": server.base}])
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
            frame.locator("table.runs-table tr.run").first.wait_for(timeout=60_000)
            assert "total lag 60" in card.inner_text()
            assert "240" in card.inner_text() and "300" in card.inner_text()
            src = frame.locator(f'.card[data-connector="{TOPIC}"]').inner_text()
            assert '{"position":300}' in src and "source" in src
            assert "keeps its own offsets" in frame.locator(f'.card[data-connector="{TOPIC}-archive"]').inner_text()
            assert frame.locator("svg.runs-chart rect.bar").count() >= 2
            links = frame.locator("a.ti-link")
            assert links.count() >= 2 and f"/dags/{DAG_ID}/runs/" in (links.first.get_attribute("href") or "")
            broken = frame.locator('.connection[data-conn="pyconnect_broken"] .store-error')
            broken.wait_for(timeout=60_000)
            assert broken.inner_text().startswith("pyconnect_broken: store unreachable")
            assert SECRET not in page.content() and SECRET not in frame.locator("body").inner_text()
            frame.locator('.connection[data-conn="pyconnect_kafka"] .card').first.wait_for(timeout=60_000)
            page.screenshot(path=str(shot), full_page=False)

            # the operator's extra link opens the page on its connector
            page.goto(f"{server.base}/pyconnect/ui?conn=pyconnect_default&connector={TOPIC}-reader",
                      wait_until="domcontentloaded")
            page.locator(f'.card.focus[data-connector="{TOPIC}-reader"]').wait_for(timeout=60_000)
            assert page.locator(".card.focus").count() == 1
        finally:
            browser.close()
    assert shot.stat().st_size > 20_000
    if os.environ.get("PYCONNECT_UPDATE_SCREENSHOT"):
        (REPO / "docs").mkdir(exist_ok=True)
        (REPO / "docs" / "connectors-view.png").write_bytes(shot.read_bytes())


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
