"""Kafka Connect itself (4.3.1: ``connect-runtime``, ``connect-json``, ``connect-file``), one distributed worker.

``scripts/fetch_connect_worker.sh`` puts its jars in ``$PYCONNECT_KAFKA_CONNECT_HOME`` or
``~/.cache/airflow-pyconnect/kafka-connect-4.3.1/libs`` (the pom is ``bench/kafka_connect/pom.xml``, which
``bench/bench_vs_kafka_connect.py`` fetches alike). :class:`ConnectWorker` runs
``org.apache.kafka.connect.cli.ConnectDistributed`` on an Apache Kafka broker with the worker settings given
(the offsets topic above all), logs to a file, and talks to its REST API on a free loopback port. Without the
jars or Java the tests skip, saying why, except in CI, where they fail naming the fetch command. Every wait is
bounded and says what it waited for; :meth:`ConnectWorker.stop` ends the JVM (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from tests.support import cache_home, find_java, unavailable
from tests.support.kafka_broker import _die_with_parent
from tests.support.ports import free_port

VERSION = "4.3.1"
HOME_ENV = "PYCONNECT_KAFKA_CONNECT_HOME"
FETCH_COMMAND = "bash scripts/fetch_connect_worker.sh"
MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
LOG4J = Path(__file__).resolve().parents[2] / "bench" / "kafka_connect" / "log4j2.properties"
JVM_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
"""Small and quick to start on a 2-core machine (as the test brokers' options); the worker moves a few records."""
START_TIMEOUT_S = 180.0
REST_RETRY_S = 60.0
STOP_TIMEOUT_S = 60.0


def connect_home() -> Path:
    return cache_home(HOME_ENV, f"kafka-connect-{VERSION}")


def _unavailable(reason: str) -> NoReturn:
    unavailable(f"Kafka Connect {VERSION} is not available: {reason}; fetch it with `{FETCH_COMMAND}`",
                "CI runs the Kafka Connect interoperability tests and never skips them")


def connect_libs() -> tuple[str, Path]:
    """``(java, libs)`` of Kafka Connect's worker, or skip/fail saying what is missing."""
    java = find_java()
    if java is None:
        _unavailable("no `java` on PATH (Java 17+ runs the worker)")
    libs = connect_home() / "libs"
    for jar in ("connect-runtime", "connect-file", "connect-json"):
        if not (libs / f"{jar}-{VERSION}.jar").is_file():
            _unavailable(f"{jar}-{VERSION}.jar is not in {libs} (set {HOME_ENV} to use another place)")
    return str(java), libs


class ConnectWorker:
    """One Kafka Connect distributed worker; ``settings`` are worker properties on top of the defaults here
    (group and internal topics named after ``group``, replication factor 1, offsets flushed every 500 ms)."""

    def __init__(self, work_dir: Path, bootstrap: str, group: str, settings: Mapping[str, str] = ()) -> None:
        self.java, self.libs = connect_libs()
        self.work_dir = work_dir
        self.port = free_port()
        self.props: dict[str, str] = {
            "bootstrap.servers": bootstrap, "group.id": group,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": f"{group}-configs", "config.storage.replication.factor": "1",
            "status.storage.topic": f"{group}-status", "status.storage.replication.factor": "1",
            "offset.storage.topic": "connect-offsets", "offset.storage.replication.factor": "1",
            "offset.flush.interval.ms": "500", "listeners": f"http://127.0.0.1:{self.port}",
            "plugin.discovery": "service_load", **dict(settings)}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = work_dir / "worker.log"
        self.starts = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ConnectWorker:
        """Start the JVM and wait (bounded) until its REST API answers."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        config = self.work_dir / "worker.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        self.log = self.work_dir / f"worker-{self.starts}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [self.java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={LOG4J}", "-cp", f"{self.libs}/*", MAIN,
                 str(config)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.work_dir,
                preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the Kafka Connect worker exited with {self.proc.returncode} while starting:\n"
                                     f"{self.tail()}")
            try:
                self.rest("GET", "/connectors")
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
        raise AssertionError(f"the Kafka Connect worker's REST API did not answer within {START_TIMEOUT_S} s:\n"
                             f"{self.tail()}")

    def rest(self, method: str, path: str, body: Any = None) -> Any:
        """One REST call; the parsed JSON answer (``None`` when empty). Answers 409 (the worker rebalances) and
        500 (it is still starting) are retried for at most :data:`REST_RETRY_S`; any other HTTP error, or those
        past that bound, raises ``HTTPError``."""
        data = None if body is None else json.dumps(body).encode()
        deadline = time.monotonic() + REST_RETRY_S
        while True:
            req = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    text = resp.read().decode()
                return json.loads(text) if text.strip() else None
            except urllib.error.HTTPError as exc:
                if exc.code not in (409, 500) or time.monotonic() >= deadline:
                    raise
            assert self.proc is not None and self.proc.poll() is None, f"the worker died:\n{self.tail()}"
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM (a graceful stop commits the tasks' last offsets), SIGKILL after :data:`STOP_TIMEOUT_S`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)
            raise AssertionError(f"the Kafka Connect worker did not stop within {STOP_TIMEOUT_S} s of SIGTERM:\n"
                                 f"{self.tail()}") from None

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


__all__ = ["FETCH_COMMAND", "VERSION", "ConnectWorker", "connect_home", "connect_libs"]
