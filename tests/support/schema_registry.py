"""A real Schema Registry server for the schema tests: Apicurio Registry 3.0.9 on loopback (session fixtures).

The registry is a Quarkus application fetched from Maven Central by ``scripts/fetch_schema_registry.sh`` (the pom
is ``scripts/schema_registry/``; the artifact ``io.apicurio:apicurio-registry-app:3.0.9``, classifier ``all``)
into a cache outside the work tree, ``$PYCONNECT_SCHEMA_REGISTRY_HOME`` or
``~/.cache/airflow-pyconnect/apicurio-registry-3.0.9``. It is started once per session (``java -jar
apicurio-registry-app-3.0.9-runner.jar``, its default in-memory H2 storage, ``quarkus.http.host=127.0.0.1`` on a
free port) in a temp dir holding its log, waited for (bounded, until ``GET /apis/ccompat/v7/subjects`` answers
200; the failure names what it waited for and shows the end of the log) and stopped at the end (SIGTERM, SIGKILL
after a bound; SIGKILL too if pytest dies first). It listens on that one port only.

- ``schema_registry`` (session): the running :class:`ApicurioRegistry`; tests sharing it use unique subjects.
- ``schema_registry_url`` (session): its Confluent-compatible API, ``http://127.0.0.1:PORT/apis/ccompat/v7``: the
  URL confluent-kafka's ``SchemaRegistryClient`` and the converters' ``schema.registry.url`` take.

Without Java or the fetched registry: in CI (``CI`` set, as ``.ci/run`` does) every test using it FAILS, naming
the fetch command; elsewhere they skip with that reason printed.

What confluent-kafka 2.16.1's ``SchemaRegistryClient`` gets from this API, checked by
``tests/integration/test_schema_registry.py``: ``register_schema``, ``get_schema`` (by id), ``get_versions``,
``get_version``, ``get_latest_version``, ``lookup_schema``, ``set_compatibility`` / ``get_compatibility`` and
``test_compatibility`` work, and so do confluent-kafka's ``AvroSerializer`` / ``AvroDeserializer``. Where it
answers otherwise than Confluent's Schema Registry:

- An incompatible schema is refused with HTTP 409 and ``error_code`` 409, as Confluent's, but the message is
  Apicurio's: ``io.apicurio.registry.rules.RuleViolationException: Incompatible artifact: <subject> [AVRO], num of
  incompatible diffs: {1}, list of diff types: [age at /fields/1]``: it names the subject and the field with its
  path, not the compatibility level nor the Avro rule (Confluent's names the subject and, in its details, the
  error type such as ``READER_FIELD_MISSING_DEFAULT_VALUE`` and the level, ``BACKWARD``).
- ``test_compatibility(..., verbose=True)`` gets ``{"is_compatible": false}`` with no ``messages``.
- ``PUT /config/<subject>`` answers ``{"compatibilityLevel": ...}`` (Confluent's key is ``compatibility``);
  ``set_compatibility`` returns that dict as it came.
- The default compatibility is ``NONE`` (Confluent's is ``BACKWARD``): a test that wants a rule sets it.
- Ids are Apicurio's content ids: the same schema under two subjects has one id, as in Confluent's.
- A schema is stored and returned as it was sent (Confluent's server canonicalises Avro).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests.support import cache_home, find_java, unavailable
from tests.support.kafka_broker import _die_with_parent, _tail
from tests.support.ports import free_port

REGISTRY_VERSION = "3.0.9"
HOME_ENV = "PYCONNECT_SCHEMA_REGISTRY_HOME"
FETCH_COMMAND = "bash scripts/fetch_schema_registry.sh"
CCOMPAT_PATH = "/apis/ccompat/v7"
RUNNER = f"apicurio-registry-app-{REGISTRY_VERSION}-runner.jar"
START_TIMEOUT_S = float(os.environ.get("PYCONNECT_SCHEMA_REGISTRY_START_TIMEOUT", "90"))
STOP_TIMEOUT_S = 20.0
# A small heap (in-memory H2 holding a few test schemas), C1 only and the serial collector, as the Kafka broker's.
JVM_OPTIONS = ["-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


def registry_home() -> Path:
    """Where scripts/fetch_schema_registry.sh unpacks Apicurio Registry (the runner jar and ``lib/``)."""
    return cache_home(HOME_ENV, f"apicurio-registry-{REGISTRY_VERSION}")


def _unavailable(reason: str) -> NoReturn:
    """No registry here: fail in CI (which fetches it, naming the fetch command), skip elsewhere, printing why."""
    unavailable(f"Apicurio Registry {REGISTRY_VERSION} is not available: {reason}; fetch it with `{FETCH_COMMAND}`",
                "CI fetches it and runs every schema registry test")


def _java_and_runner() -> tuple[str, Path]:
    java = find_java()
    if java is None:
        _unavailable("no `java` on PATH (Java 17+ runs it, e.g. apt-get install openjdk-17-jre-headless)")
    runner = registry_home() / RUNNER
    if not runner.is_file() or not (runner.parent / "lib").is_dir():
        _unavailable(f"{RUNNER} and lib/ are not in {runner.parent} (set {HOME_ENV} to use another place)")
    return str(java), runner


class ApicurioRegistry:
    """One Apicurio Registry JVM on 127.0.0.1, in-memory storage, in a directory of its own."""

    def __init__(self, work_dir: Path, java: str, runner: Path) -> None:
        self.work_dir = work_dir
        self.java = java
        self.runner = runner
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = work_dir / "apicurio-registry.log"
        self.start_seconds = 0.0

    @property
    def url(self) -> str:
        """The Confluent-compatible API: what ``schema.registry.url`` takes."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    def log_tail(self, chars: int = 3000) -> str:
        return _tail(self.log_path, chars)

    def _command(self) -> list[str]:
        return [self.java, *JVM_OPTIONS, "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={self.port}",
                "-jar", str(self.runner)]

    def start(self) -> ApicurioRegistry:
        started = time.monotonic()
        failures = []
        for _attempt in range(3):  # a free port may be taken between probing and binding
            self.port = free_port()
            with open(self.log_path, "ab") as out:
                self.proc = subprocess.Popen(self._command(), cwd=self.work_dir, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            outcome = self._wait_until_it_answers(started + START_TIMEOUT_S)
            if outcome is None:
                self.start_seconds = time.monotonic() - started
                return self
            failures.append(outcome)
            self.stop()
            if "already in use" not in _tail(self.log_path, 20000):
                break
        pytest.fail(f"Apicurio Registry {REGISTRY_VERSION} ({self.runner}) did not answer GET {self.url}/subjects "
                    f"with 200 within {START_TIMEOUT_S:g} s ({'; '.join(failures)}); the end of its log "
                    f"{self.log_path}:\n{self.log_tail()}", pytrace=False)

    def _wait_until_it_answers(self, deadline: float) -> str | None:
        """None once ``GET <ccompat>/subjects`` answers 200 with a JSON list; else what went wrong."""
        assert self.proc is not None
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"the JVM exited with code {self.proc.returncode}"
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
                    body = json.loads(response.read())
                if response.status == 200 and isinstance(body, list):
                    return None
                last = f"HTTP {response.status}: {body!r:.200}"
            except (OSError, ValueError) as exc:  # refused while starting; URLError and HTTPError are OSErrors
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)
        return f"last answer: {last}"

    def stop(self) -> None:
        """SIGTERM (Quarkus shuts down), SIGKILL when it takes longer than STOP_TIMEOUT_S."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApicurioRegistry]:
    """The session's Apicurio Registry (in memory: empty at the start of the session)."""
    java, runner = _java_and_runner()
    registry = ApicurioRegistry(tmp_path_factory.mktemp("apicurio"), java, runner).start()
    try:
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def schema_registry_url(schema_registry: ApicurioRegistry) -> str:
    """``http://127.0.0.1:PORT/apis/ccompat/v7``: the session registry's Confluent-compatible API."""
    return schema_registry.url
