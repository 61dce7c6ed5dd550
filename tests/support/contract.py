"""Helpers of the contract suite, written against the backend interface only (``connect_runtime.backends.base``)
and the runtime's public entry points."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from connect_runtime import ranges as ranges_mod
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends import Backend, ConsumedRecord, open_backend
from tests.support import PYTHON, REPO

T = TypeVar("T")

HANGING_DEFENCE_ON_TANSU = (
    "Tansu shows records of aborted transactions to read_committed readers, and its last stable offset is not "
    "faithful, so the Kafka producer's defence against transactions Apache Kafka leaves hanging (before its first "
    "commit on a partition it aborts once when something is pending ahead there, and sends again) fires on every "
    "first commit there and its aborted copy shows as a duplicate")
"""Why a contract test whose source runs restart, or write a partition that others write, is not run on Tansu."""

SETTLE_S = 20.0
"""How long a read may wait for a commit that just returned to show (Kafka writes its markers just after
``commit_transaction`` returned; see ``tests.support.kafka_broker.eventually``)."""


class Broken(AssertionError):
    """The promise a test pins as broken (its strict ``xfail(raises=Broken)``) is broken in the way it names;
    any other failure of that test still fails it."""


def uid(prefix: str) -> str:
    """A name no other test uses (tests on the session's Kafka broker share it)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def settled(read: Callable[[], T], ok: Callable[[T], bool], timeout: float = SETTLE_S) -> T:
    """What ``read`` returns once ``ok`` holds for it, or its last answer after ``timeout`` seconds (the test
    then asserts on that answer and fails with it)."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if ok(got) or time.monotonic() >= deadline:
            return got
        time.sleep(0.05)


def wait_until(what: str, check: Callable[[], Any], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(0.02)


def in_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``fn`` in a daemon thread; ``out["result"]`` or ``out["error"]`` when it ended (``out["ended"]``:
    monotonic time)."""
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as exc:
            out["error"] = exc
        finally:
            out["ended"] = time.monotonic()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, out


def stacks() -> str:
    """Every live thread's stack, for the message of a test whose run did not end: where it waits."""
    frames = sys._current_frames()
    parts = []
    for t in threading.enumerate():
        frame = frames.get(t.ident) if t.ident is not None else None
        if frame is not None:
            parts.append(f"--- thread {t.name}:\n{''.join(traceback.format_stack(frame))}")
    return "\n".join(parts)


# -- reading what is committed -----------------------------------------------------------------------------


def partitions_of(be: Backend, topic: str) -> list[TopicPartition]:
    c = be.consumer(None)
    try:
        return c.partitions([topic])
    finally:
        c.close()


def ends(be: Backend, tps: Iterable[TopicPartition], timeout: float = 30.0) -> dict[TopicPartition, int]:
    c = be.consumer(None)
    try:
        return c.end_offsets(list(tps), timeout)
    finally:
        c.close()


def read_partition(be: Backend, tp: TopicPartition, start: int = 0, end: int | None = None) -> list[ConsumedRecord]:
    """Committed records of one partition from ``start`` (0: test topics have no retention) to its end."""
    if end is None:
        end = ends(be, [tp])[tp]
    return list(be.read_range(tp, start, end, timeout=30.0))


def read_topic(be: Backend, topic: str) -> list[ConsumedRecord]:
    """Every committed record of a topic, partition by partition in offset order ([] if it does not exist)."""
    if topic not in be.list_topics():
        return []
    out: list[ConsumedRecord] = []
    for tp in sorted(partitions_of(be, topic)):
        out.extend(read_partition(be, tp))
    return out


def json_values(records: Iterable[ConsumedRecord]) -> list[Any]:
    return [None if r.value is None else json.loads(r.value) for r in records]


def read_spans(be: Backend, ranges: Mapping[str, Any]) -> list[ConsumedRecord]:
    """The committed records a reader of ``ranges`` (a run's ranges, or a ranges record) gets: each exact span,
    nothing else."""
    out: list[ConsumedRecord] = []
    for topic, parts in ranges_mod.parse(ranges).items():
        for partition, spans in sorted(parts.items()):
            for first, nxt in spans:
                out.extend(be.read_range(TopicPartition(topic, partition), first, nxt, timeout=30.0))
    return out


def poll_all(be: Backend, positions: Mapping[TopicPartition, int], quiet: float = 1.0,
             limit: float = 20.0, group: str | None = None) -> list[ConsumedRecord]:
    """Everything ``Consumer.poll`` returns from ``positions`` until nothing came for ``quiet`` seconds."""
    c = be.consumer(group)
    try:
        c.assign(dict(positions))
        got: list[ConsumedRecord] = []
        deadline = time.monotonic() + limit
        last = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last < quiet:
            batch = c.poll(1000, 0.2)
            if batch:
                got.extend(batch)
                last = time.monotonic()
        return got
    finally:
        c.close()


# -- real subprocesses -------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def start_source(config: Mapping[str, Any], url: str, log: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
    """``run_source`` in a real subprocess (``tests.support.source_run``); its output goes to ``log``."""
    spec = json.dumps({"config": dict(config), "backend": url, "kwargs": kwargs})
    with open(log, "ab") as out:
        return subprocess.Popen([PYTHON, "-m", "tests.support.source_run", spec], cwd=REPO, env=_env(),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def start_sink(config: Mapping[str, Any], url: str, log: Path) -> subprocess.Popen[bytes]:
    """``run_sink`` in a real subprocess (``tests.support.sink_helpers``); its output goes to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen([PYTHON, "-m", "tests.support.sink_helpers", json.dumps(dict(config)), url], cwd=REPO,
                                env=_env(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def start_worker(command: str, spec: Mapping[str, Any], log: Path) -> subprocess.Popen[str]:
    """``tests.support.contract_worker`` in a real subprocess: its JSON lines on stdout, stderr to ``log``."""
    with open(log, "ab") as err:
        return subprocess.Popen([PYTHON, "-m", "tests.support.contract_worker", command, json.dumps(dict(spec))], cwd=REPO,
                                env=_env(), stdout=subprocess.PIPE, stderr=err, stdin=subprocess.PIPE, text=True)


def read_line(proc: subprocess.Popen[str], timeout: float, log: Path | None = None) -> dict[str, Any]:
    """The worker's next JSON line (bounded)."""
    assert proc.stdout is not None
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    t.start()
    t.join(timeout)
    if not out or not out[0]:
        tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
        raise AssertionError(f"the worker printed nothing within {timeout:g} s (exit {proc.poll()}): {tail}")
    return dict(json.loads(out[0]))


def sigkill(proc: subprocess.Popen[Any]) -> bool:
    """SIGKILL ``proc`` if it still runs; whether it did."""
    alive = proc.poll() is None
    if alive:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    return alive


def finish(proc: subprocess.Popen[Any], log: Path, timeout: float, what: str) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        sigkill(proc)
        pytest.fail(f"{what} did not finish within {timeout:g} s: {log.read_text()[-3000:]}")


def last_json(log: Path) -> dict[str, Any]:
    """The last JSON object line a subprocess printed into ``log``."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                continue
    raise AssertionError(f"no result line in {log}: {log.read_text()[-3000:]}")


def capabilities(url: str) -> Any:
    with open_backend(url) as be:
        return be.capabilities
