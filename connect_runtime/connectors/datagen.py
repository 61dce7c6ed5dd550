"""DataGenSource: deterministic records for demos, tests and benchmarks.

Record ``n`` (``0 <= n < max.records``) always has the same value for the same ``seed``::

    {"id": n, "customer": "c-17", "amount": 12.34, "ts": 1700000000000}

(about 60 bytes of JSON). The ``max.records`` ids are split into contiguous ranges, one per task;
task ``i`` writes source partition ``{"task": i}`` with offset ``{"position": p}``, where ``p`` is the
id of the next record to generate. A task resumes from its committed offset, so an exactly-once run
that is killed and started again continues where its last transaction committed. Changing
``tasks.max`` between runs of the same connector name changes the split; use a new ``name`` then.

Config: ``topic`` (required), ``max.records`` (total across tasks, ``-1`` = unbounded), ``batch.size``
(records per poll, default 1000), ``seed`` (default 0), ``poll.delay.ms`` (sleep before each poll,
default 0, to make demos slow), plus the runtime's fields (``tasks.max``, ...).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Importance, Range, Type, non_empty_string
from connect_runtime.api.connector import ExactlyOnceSupport, SourceConnector
from connect_runtime.api.records import SourceRecord
from connect_runtime.api.source import COMMITTED_BEFORE, NO_INPUT, NothingRead, SourceTask

CONFIG = (
    ConfigDef()
    .define("topic", Type.STRING, validator=non_empty_string, importance=Importance.HIGH,
            doc="Topic to write the generated records to.")
    .define("max.records", Type.LONG, default=1000, validator=Range.at_least(-1), importance=Importance.HIGH,
            doc="Records to generate in total, split across tasks (-1: unbounded).")
    .define("batch.size", Type.INT, default=1000, validator=Range.at_least(1),
            doc="Records returned per poll at most.")
    .define("seed", Type.LONG, default=0, doc="Seed of the generated values (same seed, same records).")
    .define("poll.delay.ms", Type.LONG, default=0, validator=Range.at_least(0),
            doc="Milliseconds to sleep before each poll (slows a demo down).")
)

BASE_TS = 1_700_000_000_000
_MASK = (1 << 64) - 1


_CUSTOMERS = [f"c-{i}" for i in range(100)]


def generate_value(seed: int, n: int) -> dict[str, Any]:
    """The value of record ``n`` for ``seed`` (deterministic, cheap)."""
    h = ((n + 1) * 0x9E3779B97F4A7C15 ^ seed * 0xBF58476D1CE4E5B9) & _MASK
    return {"id": n, "customer": _CUSTOMERS[h % 100], "amount": ((h >> 16) % 100_000) / 100, "ts": BASE_TS + n * 1000}


class DataGenSource(SourceConnector):
    """Plans ``tasks.max`` tasks, each generating a contiguous range of record ids."""

    VERSION = "0.1.0"

    def config_def(self) -> ConfigDef:
        return CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self._props = dict(props)
        self._values = CONFIG.parse(props)

    def task_class(self) -> type:
        return DataGenTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        total: int = self._values["max.records"]
        out = []
        for i in range(max_tasks):
            if total < 0:
                # unbounded: task i generates ids i, i + max_tasks, ... (interleaved, never ending)
                start, end, stride = i, -1, max_tasks
            else:
                start, end, stride = total * i // max_tasks, total * (i + 1) // max_tasks, 1
            cfg = {k: str(v) for k, v in self._props.items() if v is not None}
            cfg.update({"task.index": str(i), "task.start": str(start), "task.end": str(end),
                        "task.stride": str(stride)})
            out.append(cfg)
        return out

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport:
        return ExactlyOnceSupport.SUPPORTED


class DataGenTask(SourceTask):
    """Generates ids ``task.start, task.start + stride, ...`` below ``task.end`` (``-1``: no end)."""

    VERSION = DataGenSource.VERSION

    def start(self, props: Mapping[str, str]) -> None:
        values = CONFIG.parse(props)
        self._topic: str = values["topic"]
        self._batch: int = values["batch.size"]
        self._seed: int = values["seed"]
        self._delay = values["poll.delay.ms"] / 1000
        self._index = int(props["task.index"])
        self._end = int(props["task.end"])
        self._stride = int(props["task.stride"])
        self._partition = {"task": self._index}
        self._start = int(props["task.start"])
        committed = self.context.offset_storage_reader.offset(self._partition)
        self._next = int(committed["position"]) if committed else int(props["task.start"])

    def poll(self) -> list[SourceRecord] | None:
        if self._delay:
            time.sleep(self._delay)
        n, stride, end = self._next, self._stride, self._end
        stop = n + self._batch * stride
        if end >= 0:
            stop = min(stop, end)
        if n >= stop:
            return None
        seed, topic, part = self._seed, self._topic, self._partition
        # the same records as SourceRecord(source_partition=part, source_offset={"position": i + stride},
        # topic=topic, value=generate_value(seed, i), timestamp=BASE_TS + i * 1000), built without the
        # keyword-argument __init__ call (about 3x cheaper per record; this loop is the benchmarks' source)
        new, cls, customers = object.__new__, SourceRecord, _CUSTOMERS
        salt = seed * 0xBF58476D1CE4E5B9
        out: list[SourceRecord] = []
        append = out.append
        for i in range(n, stop, stride):
            h = ((i + 1) * 0x9E3779B97F4A7C15 ^ salt) & _MASK
            ts = BASE_TS + i * 1000
            r = new(cls)
            r.source_partition = part
            r.source_offset = {"position": i + stride}
            r.topic = topic
            r.partition = None
            r.key = None
            r.value = {"id": i, "customer": customers[h % 100], "amount": ((h >> 16) % 100_000) / 100, "ts": ts}
            r.timestamp = ts
            r.headers = None
            append(r)
        self._next = out[-1].source_offset["position"]  # type: ignore[index]
        return out

    def nothing_read(self) -> NothingRead | None:
        """Its id range was generated before (or is empty: ``max.records`` 0, more tasks than records)."""
        empty = self._end >= 0 and self._start >= self._end
        return NothingRead(f"generated ids of task {self._index} in [{self._start}, {self._end})",
                           NO_INPUT if empty else COMMITTED_BEFORE,
                           "an empty range" if empty else f"every id committed before (next {self._next})")


__all__ = ["CONFIG", "DataGenSource", "DataGenTask", "generate_value"]
