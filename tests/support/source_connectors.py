"""Real source connectors written for the source-runtime tests (in-process and in subprocesses).

Each behaves like a small real connector: it keeps its position in committed source offsets and
resumes from them. What the runtime told them (``commit_record``, ``commit``, planning) is written to
:data:`PROBES` under the config's ``probe`` key so in-process tests can assert on it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from connect_runtime.api import (
    ConfigDef,
    ConnectError,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    Range,
    RecordMetadata,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Type,
    ValidString,
)
from connect_runtime.backends import open_backend
from connect_runtime.runtime.offsets import StoreOffsetReader

PROBES: dict[str, dict[str, list[Any]]] = {}
_LOCK = threading.Lock()


def probe(name: str) -> dict[str, list[Any]]:
    with _LOCK:
        return PROBES.setdefault(name, {})


def note(name: str | None, what: str, item: Any) -> None:
    if not name:
        return
    with _LOCK:
        PROBES.setdefault(name, {}).setdefault(what, []).append(item)


def read_topic(url: str, topic: str) -> list[Any]:
    """Every committed value of a topic (JSON-decoded), partition by partition in offset order."""
    be = open_backend(url)
    try:
        if topic not in be.list_topics():
            return []
        consumer = be.consumer(None)
        try:
            parts = consumer.partitions([topic])
            ends = consumer.end_offsets(parts, 10.0)
        finally:
            consumer.close()
        # from offset 0, not beginning_offsets(): test topics have no retention, and Tansu's ListOffsets
        # (EARLIEST) now and then answers 1 for a partition whose record 0 is there (seen under load)
        return [json.loads(r.value) if r.value is not None else None
                for tp in sorted(parts) for r in be.read_range(tp, 0, ends[tp])]
    finally:
        be.close()


def committed_offset(url: str, connector: str, partition: Mapping[str, Any], store: str | None = None) -> Any:
    be = open_backend(url)
    try:
        offsets = be.offset_store(store)
        try:
            return StoreOffsetReader(offsets, connector).offset(partition)
        finally:
            offsets.close()
    finally:
        be.close()


def visible(url: str, topic: str, connector: str, partition: Mapping[str, Any]) -> tuple[int, Any]:
    """How many records of one ScriptedTask partition are readable, and its committed offset."""
    mine = [v for v in read_topic(url, topic)
            if isinstance(v, dict) and v.get("task") == partition["task"] and v.get("round") == partition["round"]]
    return len(mine), committed_offset(url, connector, partition)


_SUPPORT = {"supported": ExactlyOnceSupport.SUPPORTED, "unsupported": ExactlyOnceSupport.UNSUPPORTED, "none": None}

SCRIPTED_CONFIG = (
    ConfigDef()
    .define("topic", Type.STRING, doc="Topic to write to.")
    .define("count", Type.LONG, default=100, validator=Range.at_least(-1), doc="Records per task (-1: endless).")
    .define("batch", Type.INT, default=10, validator=Range.at_least(1), doc="Records per poll.")
    .define("tag", Type.STRING, default="", doc="Written into every value (tells runs apart).")
    .define("probe", Type.STRING, default="", doc="PROBES key.")
    .define("poll.sleep.ms", Type.LONG, default=0, validator=Range.at_least(0), doc="Sleep before each poll.")
    .define("marker.file", Type.STRING, default="", doc="Touched after the first non-empty poll.")
    .define("fail.after", Type.LONG, default=-1, doc="poll() raises once this many records were returned.")
    .define("commit.every", Type.INT, default=0, validator=Range.at_least(0),
            doc="transaction.boundary=connector: commit_transaction(record) after every n-th record.")
    .define("abort.ids", Type.LIST, default=[], doc="transaction.boundary=connector: abort_transaction(record) at these ids.")
    .define("abort.batch.ids", Type.LIST, default=[],
            doc="transaction.boundary=connector: abort_transaction() (whole batch) for a batch holding one of these ids.")
    .define("header.every", Type.INT, default=0, validator=Range.at_least(0),
            doc="Records with n % header.every == 0 carry a header ('drop', 'yes') (for a Filter predicate).")
    .define("bad.every", Type.INT, default=0, validator=Range.at_least(0),
            doc="Records with n % bad.every == bad.every - 1 carry a value JSON cannot encode (a set).")
    .define("bad.partition.at", Type.LONG, default=-1,
            doc="Record n gets partition 7, which the backend refuses when it writes (flush or commit).")
    .define("track.records", Type.BOOLEAN, default=False, doc="Use a task class that overrides commit_record.")
    .define("eos.support", Type.STRING, default="supported", validator=ValidString.in_("supported", "unsupported", "none"),
            doc="What exactly_once_support() returns.")
    .define("boundaries", Type.STRING, default="supported", validator=ValidString.in_("supported", "unsupported"),
            doc="What can_define_transaction_boundaries() returns.")
    .define("raise.error.after.ms", Type.LONG, default=-1, doc="The connector calls context.raise_error after this.")
    .define("check.url", Type.STRING, default="",
            doc="At every commit(), note how many of this task's records and which offset are visible there.")
    .define("rounds", Type.INT, default=1, validator=Range.at_least(1),
            doc="task_configs requests reconfiguration until this many plans were made.")
    .define("reconfigure.after.ms", Type.LONG, default=-1,
            doc="The connector calls context.request_task_reconfiguration() once, this long after start().")
)


class ScriptedSource(SourceConnector):
    """Task ``i`` writes ``{"task": i, "n": n, "tag": tag, "round": r}`` for ``n`` in ``0..count-1``,
    source partition ``{"task": i, "round": r}``, offset ``{"n": n + 1}``."""

    def config_def(self) -> ConfigDef:
        return SCRIPTED_CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.values = SCRIPTED_CONFIG.parse(props)
        self.round = 0
        note(self.values["probe"], "connector.start", True)
        delay = self.values["raise.error.after.ms"]
        if delay >= 0:
            def later() -> None:
                time.sleep(delay / 1000)
                self.context.raise_error(ConnectError("the external system went away (raised by the connector)"))

            threading.Thread(target=later, daemon=True).start()
        reconfigure = self.values["reconfigure.after.ms"]
        if reconfigure >= 0:
            def replan() -> None:
                time.sleep(reconfigure / 1000)
                note(self.values["probe"], "reconfiguration.requested", time.monotonic())
                self.context.request_task_reconfiguration()

            threading.Thread(target=replan, daemon=True).start()

    def task_class(self) -> type:
        return TrackingTask if self.values["track.records"] else ScriptedTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        self.round += 1
        note(self.values["probe"], "plans", self.round)
        if self.round < self.values["rounds"]:
            self.context.request_task_reconfiguration()
        return [{**{k: str(v) for k, v in self.props.items() if v is not None},
                 "task.index": str(i), "round": str(self.round)} for i in range(max_tasks)]

    def stop(self) -> None:
        note(self.values["probe"], "connector.stop", True)

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return _SUPPORT[SCRIPTED_CONFIG.parse(props)["eos.support"]]

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        if SCRIPTED_CONFIG.parse(props)["boundaries"] == "supported":
            return ConnectorTransactionBoundaries.SUPPORTED
        return ConnectorTransactionBoundaries.UNSUPPORTED


class ScriptedTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        v = SCRIPTED_CONFIG.parse(props)
        self.v = v
        self.index = int(props["task.index"])
        self.round = int(props.get("round", "1"))
        self.partition = {"task": self.index, "round": self.round}
        committed = self.context.offset_storage_reader.offset(self.partition)
        self.n = int(committed["n"]) if committed else 0
        self.returned = 0
        self.aborts = {int(x) for x in v["abort.ids"]}
        self.batch_aborts = {int(x) for x in v["abort.batch.ids"]}
        note(v["probe"], "task.start", (self.index, self.round, self.n))

    def poll(self) -> list[SourceRecord] | None:
        v = self.v
        note(v["probe"], "events", ("poll", self.index, self.n))
        if v["poll.sleep.ms"]:
            time.sleep(v["poll.sleep.ms"] / 1000)
        if 0 <= v["fail.after"] <= self.returned:
            raise ConnectError(f"task {self.index} failed on purpose after {self.returned} records")
        count = v["count"]
        stop = self.n + v["batch"] if count < 0 else min(self.n + v["batch"], count)
        if self.n >= stop:
            return None
        every = v["header.every"]
        out = [SourceRecord(source_partition=self.partition, source_offset={"n": n + 1}, topic=v["topic"],
                            key=None, value={"task": self.index, "n": n, "tag": v["tag"], "round": self.round},
                            headers=[("drop", "yes")] if every and n % every == 0 else None)
               for n in range(self.n, stop)]
        for r in out:
            if r.value["n"] == v["bad.partition.at"]:
                r.partition = 7
        bad = v["bad.every"]
        if bad:
            for r in out:
                if r.value["n"] % bad == bad - 1:
                    r.value["oops"] = {"a set"}
        self.n = stop
        self.returned += len(out)
        ctx = self.context.transaction_context
        if ctx is not None:
            every = v["commit.every"]
            for r in out:
                n = r.value["n"]
                if n in self.aborts:
                    ctx.abort_transaction(r)
                elif every and (n + 1) % every == 0:
                    ctx.commit_transaction(r)
            if any(r.value["n"] in self.batch_aborts for r in out):
                ctx.abort_transaction()
        if v["marker.file"] and not Path(v["marker.file"]).exists():
            Path(v["marker.file"]).write_text("polled")
        return out

    def commit(self) -> None:
        note(self.v["probe"], "task.commit", self.index)
        note(self.v["probe"], "events", ("commit", self.index))
        if self.v["check.url"]:
            note(self.v["probe"], "visible.at.commit", visible(self.v["check.url"], self.v["topic"],
                                                              self.context.configs["name"], self.partition))

    def stop(self) -> None:
        note(self.v["probe"], "task.stop", self.index)


class TrackingTask(ScriptedTask):
    """Overrides ``commit_record`` (KIP-416), so the runtime tracks record metadata for it."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None = None) -> None:
        note(self.v["probe"], "commit_record", (record.value["n"], metadata))
        note(self.v["probe"], "events", ("record", record.value["n"]) if not self.index else
             ("record", self.index, record.value["n"]))


class PlanningSource(SourceConnector):
    """KIP-131: plans one task per *unfinished* file, reading committed offsets in ``start()``.

    ``files`` is a list of ``name:lines``; the "file" ``name`` has ``lines`` lines; offset
    ``{"line": k}`` means lines ``0..k-1`` are done.
    """

    CONFIG = (
        ConfigDef()
        .define("topic", Type.STRING)
        .define("files", Type.LIST)
        .define("probe", Type.STRING, default="")
        .define("poll.sleep.ms", Type.LONG, default=0, doc="Sleep before each poll of a task.")
    )

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        v = self.CONFIG.parse(props)
        self.topic, self.probe_name = v["topic"], v["probe"]
        files = {f.split(":")[0]: int(f.split(":")[1]) for f in v["files"]}
        reader = self.context.offset_storage_reader
        done = reader.offsets([{"file": f} for f in files])
        self.todo = [(p["file"], files[p["file"]], 0 if o is None else int(o["line"]))
                     for p, o in done if (0 if o is None else int(o["line"])) < files[p["file"]]]
        note(self.probe_name, "todo", [f for f, _, _ in self.todo])

    def task_class(self) -> type:
        return PlanningTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        groups: list[list[str]] = [[] for _ in range(min(max_tasks, len(self.todo)))]
        for i, (f, lines, _) in enumerate(self.todo):
            groups[i % len(groups)].append(f"{f}:{lines}")
        sleep = str(self.CONFIG.parse(self.props)["poll.sleep.ms"]) if hasattr(self, "props") else "0"
        return [{"topic": self.topic, "files": ",".join(g), "poll.sleep.ms": sleep} for g in groups]


class PlanningTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.topic = props["topic"]
        self.files = [(f.split(":")[0], int(f.split(":")[1])) for f in props["files"].split(",")]
        committed = dict((p["file"], o) for p, o in self.context.offset_storage_reader.offsets(
            [{"file": f} for f, _ in self.files]))
        self.pos = {f: (0 if committed[f] is None else int(committed[f]["line"])) for f, _ in self.files}
        self.sleep = int(props.get("poll.sleep.ms", "0")) / 1000

    def poll(self) -> list[SourceRecord] | None:
        if self.sleep:
            time.sleep(self.sleep)
        for f, lines in self.files:
            k = self.pos[f]
            if k < lines:
                end = min(k + 5, lines)
                self.pos[f] = end
                return [SourceRecord(source_partition={"file": f}, source_offset={"line": i + 1},
                                     topic=self.topic, value={"file": f, "line": i}) for i in range(k, end)]
        return None


TASK_GATE: list[Callable[[], None] | None] = [None]
"""While it holds a callable, a :class:`GatedTaskPlanningSource` task calls it in ``start()`` (after its producer's
``init_transactions`` and the runtime's generation check): a test's barrier, e.g. a line on stdin."""


class GatedTaskPlanningSource(PlanningSource):
    """:class:`PlanningSource` whose tasks call :data:`TASK_GATE` when they start: a task (of a fan-out plan) that
    holds its producer and passed every start-up check, held exactly as long as the test needs."""

    def task_class(self) -> type:
        return GatedPlanningTask


class GatedPlanningTask(PlanningTask):
    def start(self, props: Mapping[str, str]) -> None:
        gate = TASK_GATE[0]
        if gate is not None:
            gate()
        super().start(props)


START_GATE: list[threading.Event | None] = [None]
"""While it holds an event, :class:`GatedStartPlanningSource` waits for it (at most 60 s) in ``task_class()``."""
START_WAITING = threading.Event()
"""Set once a :class:`GatedStartPlanningSource` waits at :data:`START_GATE`."""


class GatedStartPlanningSource(PlanningSource):
    """:class:`PlanningSource` whose ``task_class()`` waits while :data:`START_GATE` holds an event that is not set:
    a task of a fan-out plan that is slow to start (its runtime asks for the task class before the task's producer
    exists), held exactly as long as an in-process test needs."""

    def task_class(self) -> type:
        gate = START_GATE[0]
        if gate is not None:
            START_WAITING.set()
            gate.wait(60)
        return super().task_class()
