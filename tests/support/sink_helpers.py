"""Test sink connectors for the sink runtime tests, and a subprocess entry point.

``RecordingSinkConnector``: every task call (open, put, pre_commit, close, stop) is appended as one
JSON line to ``log.path`` (flushed before the call returns), with ``context.is_closing()`` at the
time of the call. Behaviour knobs (all optional task config fields) make it fail, retry, rewind,
pause, request commits or report errant records, so tests observe the runtime from the outside.

``LedgerSinkConnector``: an exactly-once sink that keeps its offsets in its destination: it appends
``topic\\tpartition\\toffset\\tvalue`` lines to one file per partition, rewinds every partition in ``open``
to the offset after the last complete line, and returns ``{}`` from ``pre_commit``.

Subprocess entry: ``python -m tests.support.sink_helpers CONFIG_JSON BACKEND_URL [MAX_SECONDS]`` runs one
``run_sink`` and prints its result as JSON.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from connect_runtime.api import (
    ConfigDef,
    RetriableError,
    SinkConnector,
    SinkRecord,
    SinkTask,
    TopicPartition,
    Type,
)
from tests.support.kills import run_killed_on_progress

_FIELDS = (
    ("log.path", "JSON lines file every task call is appended to."),
    ("start.fail", "true: start() raises after logging."),
    ("put.fail.at", "Raise ValueError on this put call (1-based, counting non-empty puts)..."),
    ("put.fail.task", "...only in the task with this task.id (default: every task)."),
    ("put.retriable.times", "Raise RetriableError on the first N put attempts."),
    ("put.sleep.ms", "Sleep this long in each non-empty put."),
    ("put.retry.timeout.ms", "Call context.timeout(ms) before each RetriableError of put.retriable.times."),
    ("put.block.at", "Block in this non-empty put (1-based)..."),
    ("put.block.file", "...until this file exists (at most 60 s), after logging 'blocked'."),
    ("put.hang", "true: every non-empty put sleeps 120 s (a stuck task)."),
    ("precommit.fail.times", "pre_commit raises OSError on its first N calls."),
    ("precommit.fail.from", "pre_commit raises OSError whenever a partition was given this offset."),
    ("precommit.ahead", "pre_commit returns current + this many for every partition."),
    ("precommit.empty", "true: pre_commit returns {}."),
    ("precommit.foreign", "true: pre_commit also returns an offset for a partition not assigned."),
    ("open.rewind", "topic:partition:offset,... rewound in open()."),
    ("put.rewind", "N:topic:partition:offset: rewind during the Nth non-empty put."),
    ("commit.request.at", "Call context.request_commit() during this non-empty put (1-based)."),
    ("pause.partition", "topic:partition paused during the first non-empty put..."),
    ("resume.after.empty", "...and resumed after this many empty puts."),
    ("report.values", "Comma list of record values (as str) reported to the errant record reporter."),
    ("report.at.commit", "'true': the report.values records are reported from pre_commit, after put returned."),
    ("required.field", "A field the test connector requires when set to 'required'."),
    ("int.field", "An int field of the test connector."),
)


def _config_def() -> ConfigDef:
    cd = ConfigDef()
    for name, doc in _FIELDS:
        if name == "int.field":
            cd.define(name, Type.INT, default=0, doc=doc)
        else:
            cd.define(name, Type.STRING, default="", doc=doc)
    return cd


def _tp(spec: str) -> TopicPartition:
    topic, _, p = spec.rpartition(":")
    return TopicPartition(topic, int(p))


class RecordingSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.path = props["log.path"]
        self.puts = 0
        self.attempts = 0
        self.late: list[SinkRecord] = []
        self.empty_puts = 0
        self.precommits = 0
        self._log("start", task=props.get("task.id"), generation=getattr(self.context, "generation", None))
        if props.get("start.fail") == "true":
            raise RuntimeError("no credentials")

    def _log(self, call: str, **fields: Any) -> None:
        line = {"call": call, "task": self.props.get("task.id"), "closing": self.context.is_closing(), **fields}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()

    def open(self, partitions: list[TopicPartition]) -> None:
        self._log("open", partitions=sorted([list(tp) for tp in partitions]))
        rewind = self.props.get("open.rewind")
        if rewind:
            for spec in rewind.split(","):
                topic, p, off = spec.rsplit(":", 2)
                self.context.offset({TopicPartition(topic, int(p)): int(off)})

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            self.empty_puts += 1
            self._log("put", records=[])
            after = self.props.get("resume.after.empty")
            if after and self.empty_puts >= int(after) and self.props.get("pause.partition"):
                self.context.resume(_tp(self.props["pause.partition"]))
                self._log("resumed")
            return
        self.attempts += 1
        if self.attempts <= int(self.props.get("put.retriable.times") or 0):
            self._log("put_retriable", offsets=[r.offset for r in records], t=time.monotonic())
            if self.props.get("put.retry.timeout.ms") and hasattr(self.context, "timeout"):
                self.context.timeout(int(self.props["put.retry.timeout.ms"]))
            raise RetriableError(f"transient failure on attempt {self.attempts}")
        self.puts += 1
        if self.props.get("put.hang") == "true":
            self._log("hanging")
            time.sleep(120)
        if self.props.get("put.block.at") and self.puts == int(self.props["put.block.at"]):
            self._log("blocked", offsets=[r.offset for r in records])
            deadline = time.monotonic() + 60
            while not os.path.exists(self.props["put.block.file"]) and time.monotonic() < deadline:
                time.sleep(0.01)
        failing_task = self.props.get("put.fail.task") or self.props.get("task.id")
        if (self.props.get("put.fail.at") and self.puts == int(self.props["put.fail.at"])
                and failing_task == self.props.get("task.id")):
            self._log("put_failed", offsets=[r.offset for r in records])
            raise ValueError("disk on fire")
        reported = set(filter(None, (self.props.get("report.values") or "").split(",")))
        kept = []
        for r in records:
            if str(r.value) in reported and self.props.get("report.at.commit") == "true":
                self.late.append(r)
            elif str(r.value) in reported:
                self.context.errant_record_reporter.report(r, ValueError(f"cannot write {r.value!r}"))
            else:
                kept.append(r)
        self._log("put", records=[[r.topic, r.partition, r.offset, r.value] for r in kept])
        if self.props.get("put.rewind"):
            at, topic, p, off = self.props["put.rewind"].split(":")
            if self.puts == int(at):
                self.context.offset(TopicPartition(topic, int(p)), int(off))
        if self.props.get("commit.request.at") and self.puts == int(self.props["commit.request.at"]):
            self.context.request_commit()
        if self.props.get("pause.partition") and self.puts == 1:
            self.context.pause(_tp(self.props["pause.partition"]))
            self._log("paused")
        if self.props.get("put.sleep.ms"):
            time.sleep(int(self.props["put.sleep.ms"]) / 1000)

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        self._log("pre_commit", current=sorted([[*tp, o] for tp, o in current_offsets.items()]))
        self.precommits += 1
        late, self.late = self.late, []
        for r in late:
            self.context.errant_record_reporter.report(r, ValueError(f"cannot write {r.value!r}"))
        fail_from = self.props.get("precommit.fail.from")
        if self.precommits <= int(self.props.get("precommit.fail.times") or 0) or (
                fail_from and any(o >= int(fail_from) for o in current_offsets.values())):
            self._log("pre_commit_failed")
            raise OSError(f"flush failed (call {self.precommits})")
        if self.props.get("precommit.empty") == "true":
            return {}
        out = dict(current_offsets)
        if self.props.get("precommit.ahead"):
            out = {tp: o + int(self.props["precommit.ahead"]) for tp, o in out.items()}
        if self.props.get("precommit.foreign") == "true":
            out[TopicPartition("not-assigned", 7)] = 3
        return out

    def close(self, partitions: list[TopicPartition]) -> None:
        self._log("close", partitions=sorted([list(tp) for tp in partitions]))

    def stop(self) -> None:
        self._log("stop")


class RecordingSinkConnector(SinkConnector):
    def config_def(self) -> ConfigDef:
        return _config_def()

    def validate(self, props: Mapping[str, Any]) -> list[Any]:
        values = super().validate(props)
        for cv in values:
            if cv.name == "required.field" and cv.value == "missing":
                cv.errors.append("expected anything but 'missing'")
        return values

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return RecordingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "task.id": str(i)} for i in range(max_tasks)]


def read_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The complete lines of a log another process may be appending to. One read, then the text after the last
    newline dropped: iterating the file line by line would yield a line half written at the first EOF, then read
    on and yield its other half as a line of its own once the writer finished it (seen in CI: a JSONDecodeError
    on a line starting mid-record)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]


class LedgerSinkTask(SinkTask):
    """Exactly-once by keeping offsets in the destination (see the module docstring): one ledger
    file per partition, ``<ledger.path>.<topic>-<partition>``."""

    def start(self, props: Mapping[str, str]) -> None:
        self.path = props["ledger.path"]
        self.sleep = int(props.get("put.sleep.ms") or 0) / 1000
        self.files: dict[TopicPartition, Any] = {}

    def open(self, partitions: list[TopicPartition]) -> None:
        rewind: dict[TopicPartition, int] = {}
        for tp in partitions:
            path = f"{self.path}.{tp.topic}-{tp.partition}"
            if os.path.exists(path):
                with open(path, "rb") as f:
                    data = f.read()
                good = data.rfind(b"\n") + 1  # a line cut by a kill is dropped
                with open(path, "r+b") as f:
                    f.truncate(good)
                lines = data[:good].splitlines()
                if lines:
                    rewind[tp] = int(lines[-1].decode().split("\t", 3)[2]) + 1
            self.files[tp] = open(path, "a", encoding="utf-8")  # noqa: SIM115
        if rewind:
            self.context.offset(rewind)

    def put(self, records: list[SinkRecord]) -> None:
        for r in records:
            self.files[r.topic_partition].write(f"{r.topic}\t{r.partition}\t{r.offset}\t{json.dumps(r.value)}\n")
        for f in self.files.values():
            f.flush()
        if records and self.sleep:
            time.sleep(self.sleep)

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        for f in self.files.values():
            f.flush()
        return {}

    def stop(self) -> None:
        for f in self.files.values():
            f.close()


def read_ledger(path: str | os.PathLike[str]) -> list[list[str]]:
    """Every line of every partition ledger of ``path``, split into topic, partition, offset, value."""
    directory, base = os.path.split(os.fspath(path))
    out = []
    for name in sorted(os.listdir(directory)):
        if name.startswith(base + "."):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                out.extend(line.rstrip("\n").split("\t", 3) for line in f)
    return out


class LedgerSinkConnector(SinkConnector):
    def config_def(self) -> ConfigDef:
        return (ConfigDef().define("ledger.path", Type.STRING, doc="The ledger file.")
                .define("put.sleep.ms", Type.STRING, default="", doc="Sleep per put."))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return LedgerSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]


SEEN: dict[str, Any] = {}
"""What ``SecretSink`` and its task were handed for ``secret`` (in-process tests)."""


class _SecretTask(SinkTask):
    def start(self, props: Mapping[str, Any]) -> None:
        SEEN["task"] = props["secret"]

    def put(self, records: list[SinkRecord]) -> None:
        pass


class SecretSink(SinkConnector):
    """Records what the connector and its task get for a ``Type.PASSWORD`` field."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("secret", Type.PASSWORD, doc="A password.")

    def start(self, props: Mapping[str, Any]) -> None:
        SEEN["connector"] = props["secret"]
        self.props = dict(props)

    def task_class(self) -> type:
        return _SecretTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        return [dict(self.props)]


class GreedySink(SinkConnector):
    """Returns more task configs than ``tasks.max``."""

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: Mapping[str, Any]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return _SecretTask

    def task_configs(self, max_tasks: int) -> list[dict[str, Any]]:
        return [dict(self.props)] * (max_tasks + 2)


def run_sink_killed_on_progress(config: Mapping[str, Any], backend_url: str, rng: random.Random,
                                progress: Callable[[], int], total: int, *, low: float = 0.1,
                                high: float = 0.9) -> bool:
    """One ``run_sink`` of ``config`` in a subprocess (this module's entry), SIGKILLed once ``progress()`` (what
    the destination shows committed, e.g. records) reaches a random point in ``[low, high)`` of the way from where
    it was at the start to ``total`` (:mod:`tests.support.kills`). True when the kill landed mid-run, False when
    the run ended first (exit 0); a run that failed otherwise fails the caller with the end of its stderr."""
    from tests.support import REPO

    return run_killed_on_progress([sys.executable, "-m", "tests.support.sink_helpers", json.dumps(config),
                                   backend_url], progress, total, rng=rng, low=low, high=high,
                                  env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO,
                                  what=f"sink run {config.get('name')!r}")


def main(argv: list[str]) -> int:
    from connect_runtime.runtime.sink import run_sink

    config = json.loads(argv[0])
    max_seconds = float(argv[2]) if len(argv) > 2 else None
    result = run_sink(config, argv[1], max_seconds=max_seconds)
    print(json.dumps(result.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
