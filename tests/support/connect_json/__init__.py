"""Kafka Connect's own ``JsonConverter`` (``org.apache.kafka:connect-json`` 4.4.0), driven from Python.

``scripts/fetch_connect_json.sh`` puts the jars in ``$PYCONNECT_CONNECT_JSON_HOME`` or
``~/.cache/airflow-pyconnect/connect-json-4.4.0/jars``; :func:`harness` compiles ``Harness.java`` (this directory)
against them into ``<that home>/harness-<hash of the source>`` once, starts it, and returns a :class:`KafkaJson`
that sends it one request per line (see the Java file for the requests). Without the jars or a JDK the tests skip,
saying why, except in CI, where they fail naming the fetch command.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, NoReturn

from tests.support import cache_home, unavailable

VERSION = "4.4.0"
HOME_ENV = "PYCONNECT_CONNECT_JSON_HOME"
FETCH_COMMAND = "bash scripts/fetch_connect_json.sh"
SOURCE = Path(__file__).with_name("Harness.java")
ANSWER_TIMEOUT_S = 60.0


def connect_json_home() -> Path:
    return cache_home(HOME_ENV, f"connect-json-{VERSION}")


def _unavailable(reason: str) -> NoReturn:
    unavailable(f"Kafka Connect's JsonConverter {VERSION} is not available: {reason}; fetch it with "
                f"`{FETCH_COMMAND}`", "CI runs the byte-compatibility tests and never skips them")


class KafkaJson:
    """A running harness: :meth:`request` sends one JSON request and waits (bounded) for its answer."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc
        self._lock = threading.Lock()

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            self._proc.stdin.write(json.dumps(req) + "\n")
            self._proc.stdin.flush()
            answer: list[str] = []
            reader = threading.Thread(target=lambda: answer.append(self._proc.stdout.readline()),  # type: ignore[union-attr]
                                      daemon=True)
            reader.start()
            reader.join(ANSWER_TIMEOUT_S)
            if not answer or not answer[0]:
                raise AssertionError(f"the Kafka Connect harness gave no answer within {ANSWER_TIMEOUT_S} s "
                                     f"(exit code {self._proc.poll()})")
            out: dict[str, Any] = json.loads(answer[0])
            return out

    def echo(self, data: bytes | None, read: dict[str, Any], write: dict[str, Any],
             is_key: bool = False) -> dict[str, Any]:
        """Kafka reads ``data`` with ``read`` settings and writes what it read with ``write`` settings."""
        ans = self.request({"op": "echo", "read": _configs(read), "write": _configs(write), "key": is_key,
                            "data": None if data is None else base64.b64encode(data).decode()})
        if "error" not in ans:
            ans["out"] = None if ans["out"] is None else base64.b64decode(ans["out"])
        return ans

    def cases(self, write: dict[str, Any], is_key: bool = False) -> dict[str, bytes | None]:
        """The harness's own values (built in Java) written by Kafka's converter with ``write`` settings."""
        ans = self.request({"op": "cases", "write": _configs(write), "key": is_key})
        errors = {k: v for k, v in ans.items() if k.startswith("error")}
        assert not errors, errors
        return {k: None if v is None else base64.b64decode(v) for k, v in ans["cases"].items()}

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)


def _configs(c: dict[str, Any]) -> dict[str, str]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in c.items()}


def harness() -> KafkaJson:
    """Compile (once per source version) and start the harness; skip or fail (CI) when it cannot run here."""
    jars = connect_json_home() / "jars"
    if not (jars / f"connect-json-{VERSION}.jar").is_file():
        _unavailable(f"no {jars}/connect-json-{VERSION}.jar")
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} (a JDK 17+) is not on PATH")
    source = SOURCE.read_bytes()
    classes = connect_json_home() / f"harness-{hashlib.sha256(source).hexdigest()[:16]}"
    classpath = f"{jars}/*"
    if not (classes / "Harness.class").is_file():
        tmp = classes.with_name(classes.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        done = subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(tmp), str(SOURCE)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise AssertionError(f"javac of {SOURCE} failed:\n{done.stderr[-3000:]}")
        try:
            tmp.rename(classes)
        except OSError:  # compiled by another process meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    proc = subprocess.Popen(["java", "-Xmx256m", "-cp", f"{classes}{os.pathsep}{classpath}", "Harness"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, encoding="utf-8")
    return KafkaJson(proc)


__all__ = ["FETCH_COMMAND", "KafkaJson", "connect_json_home", "harness"]
