"""DirectorySource: the files of a directory into a topic, planned from committed offsets (KIP-131); the
connector lists and deals the files, each task reads its files with a cursor per file
(:mod:`connect_runtime.connectors.files._cursor`). The rules are in the package docstring."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from connect_runtime.api.config import (
    ConfigDef,
    ConfigValue,
    Importance,
    Range,
    Type,
    ValidString,
    non_empty_string,
)
from connect_runtime.api.connector import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
)
from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import SourceRecord
from connect_runtime.api.source import COMMITTED_BEFORE, NothingRead, SourceTask
from connect_runtime.connectors.files._cursor import cursor
from connect_runtime.connectors.files._formats import VERSION, format_of

log = logging.getLogger(__name__)

_IDLE_WAIT = 0.1
"""Seconds a poll waits when no file has had anything new since the poll before it (Kafka Connect's file source
waits too); the first empty poll returns at once, so a bounded run whose idle timeout is 0 ends without waiting."""


def scan_directory(directory: str | os.PathLike[str], pattern: str) -> dict[str, int]:
    """Matching regular files under ``directory``: relative POSIX name to size in bytes (sorted).

    Names with a component starting with ``.`` are left out (temporary files of writers)."""
    root = Path(directory)
    out: dict[str, int] = {}
    for path in root.glob(pattern):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        try:
            st = path.stat()
        except FileNotFoundError:
            continue  # removed while we listed
        if path.is_file():
            out[rel.as_posix()] = st.st_size
    return dict(sorted(out.items()))


def is_finished(offset: Mapping[str, Any] | None, size: int) -> bool:
    """A committed offset says the file was read to its end and the file has not changed size since."""
    return bool(offset and offset.get("done") and offset.get("position") == size)


def _relative_glob(name: str, value: Any) -> None:
    non_empty_string(name, value)
    if value is not None and (Path(value).is_absolute() or ".." in Path(value).parts):
        raise ValueError(f"a glob relative to directory (no absolute path, no '..'), got {value!r}")

_SOURCE_CONFIG = (
    ConfigDef()
    .define("directory", Type.STRING, validator=non_empty_string, importance=Importance.HIGH,
            doc="Directory to read files from.")
    .define("topic", Type.STRING, validator=non_empty_string, importance=Importance.HIGH,
            doc="Topic to write the records to.")
    .define("pattern", Type.STRING, default="*", validator=_relative_glob,
            doc="Glob of the files to read, relative to directory (e.g. *.jsonl, **/*.csv).")
    .define("format", Type.STRING, default=None, validator=ValidString.in_("jsonl", "csv", "text"),
            doc="jsonl, csv or text (each line's text as a str value, as Kafka Connect's FileStreamSource; no "
                "parsing); default from each file's extension (.jsonl/.ndjson/.json, .csv, .txt).")
    .define("batch.size", Type.INT, default=1000, validator=Range.at_least(1), doc="Records per poll at most.")
    .define("key.field", Type.STRING, default=None,
            doc="Field of each record's value used as the record key (default: no key).")
    .define("directory.scan.interval.ms", Type.LONG, default=5000, validator=Range.at_least(0),
            doc="How often the connector looks for new files while running (0: never).")
    .define("file.final.ms", Type.LONG, default=5000, validator=Range.at_least(-1),
            doc="A file not modified for this long is final: text after its last newline is read as its "
                "last line (0: at once; -1: never, a line needs its newline).")
)

_TASK_FILES = "task.files"


class DirectorySource(SourceConnector):
    """Reads JSON-lines and CSV files of a directory; plans from committed offsets (KIP-131)."""

    VERSION = VERSION

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._plan: list[str] | None = None
        self._known: dict[str, int] = {}
        self._scan = (0, 0)  # matching files, finished files (the last plan's)

    def config_def(self) -> ConfigDef:
        return _SOURCE_CONFIG

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        values = super().validate(props)
        for cv in values:
            if cv.name == "directory" and not cv.errors and cv.value is not None and not Path(cv.value).is_dir():
                cv.errors.append(f"expected an existing directory, got {cv.value!r}")
        return values

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        # with transaction.boundary=connector a task ends a transaction at the end of each file
        return ConnectorTransactionBoundaries.SUPPORTED

    def task_class(self) -> type:
        return DirectorySourceTask

    def start(self, props: Mapping[str, str]) -> None:
        self._config = _SOURCE_CONFIG.parse(props)
        directory = self._config["directory"]
        if not Path(directory).is_dir():
            raise ConfigError(errors={"directory": f"expected an existing directory, got {directory!r}"})
        self._plan = self._make_plan()
        interval_ms = self._config["directory.scan.interval.ms"]
        if interval_ms > 0:
            self._stop.clear()
            self._watcher = threading.Thread(
                target=self._watch, args=(interval_ms / 1000.0,), name="DirectorySource-scan", daemon=True
            )
            self._watcher.start()

    def _make_plan(self) -> list[str]:
        """Names of the files still to read (in name order); remembers every file seen."""
        files = scan_directory(self._config["directory"], self._config["pattern"])
        for name in files:
            format_of(name, self._config["format"])  # fail fast on a file of unknown format
        committed = self.context.offset_storage_reader.offsets([{"file": name} for name in files])
        plan = []
        finished = 0
        for (_, offset), (name, size) in zip(committed, files.items(), strict=True):
            if is_finished(offset, size):
                finished += 1
            else:
                plan.append(name)
        self._known = files
        self._scan = (len(files), finished)
        log.info("DirectorySource: %d matching files in %s, %d finished, %d to read",
                 len(files), self._config["directory"], finished, len(plan))
        return plan

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        plan = self._plan if self._plan is not None else self._make_plan()
        self._plan = None  # a later call (after a reconfiguration request) plans again
        n = min(max_tasks, len(plan))
        if n <= 0:
            return []
        base = {
            "directory": str(self._config["directory"]),
            "topic": self._config["topic"],
            "batch.size": str(self._config["batch.size"]),
            "file.final.ms": str(self._config["file.final.ms"]),
        }
        if self._config["format"]:
            base["format"] = self._config["format"]
        if self._config["key.field"]:
            base["key.field"] = self._config["key.field"]
        groups: list[list[str]] = [[] for _ in range(n)]
        for i, name in enumerate(plan):
            groups[i % n].append(name)
        return [{**base, _TASK_FILES: json.dumps(group)} for group in groups]

    def nothing_read(self) -> NothingRead | None:
        """The directory and pattern looked at: no matching file, or every one read to its end before."""
        config = getattr(self, "_config", None)
        if config is None:
            return None
        where, pattern = str(config["directory"]), config["pattern"]
        files, finished = self._scan
        if not files:
            return NothingRead(where, detail=f"no file matches pattern {pattern!r}")
        if finished >= files:
            return NothingRead(where, COMMITTED_BEFORE,
                               f"{files} file{'s' if files != 1 else ''} matching {pattern!r}, each read to its end "
                               f"by an earlier run")
        return None

    def _watch(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                files = scan_directory(self._config["directory"], self._config["pattern"])
            except OSError as exc:
                log.warning("DirectorySource: cannot list %s: %s", self._config["directory"], exc)
                continue
            changed = [name for name, size in files.items() if self._known.get(name) != size]
            appeared = [name for name in changed if name not in self._known]
            # a file known before that changed size is either being read (it grows: tasks follow it)
            # or was finished and got appended to; only new files need new task configs
            if appeared:
                log.info("DirectorySource: new files %s; requesting task reconfiguration", appeared[:5])
                self._known = {**self._known, **files}
                self.context.request_task_reconfiguration()

    def stop(self) -> None:
        self._stop.set()
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.join(timeout=10)


_TASK_CONFIG = (
    ConfigDef()
    .define("directory", Type.STRING, validator=non_empty_string)
    .define("topic", Type.STRING, validator=non_empty_string)
    .define("format", Type.STRING, default=None, validator=ValidString.in_("jsonl", "csv", "text"))
    .define("batch.size", Type.INT, default=1000, validator=Range.at_least(1))
    .define("key.field", Type.STRING, default=None)
    .define(_TASK_FILES, Type.STRING, doc="JSON list of the files of this task.")
    .define("file.final.ms", Type.LONG, default=5000, validator=Range.at_least(-1))
)


class DirectorySourceTask(SourceTask):
    """Reads the files named in ``task.files`` from their committed byte offsets."""

    VERSION = VERSION

    def start(self, props: Mapping[str, str]) -> None:
        cfg = _TASK_CONFIG.parse(props)
        try:
            names = json.loads(cfg[_TASK_FILES])
        except ValueError as exc:
            raise ConfigError(errors={_TASK_FILES: f"expected a JSON list of file names: {exc}"}) from exc
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(errors={_TASK_FILES: "expected a JSON list of file names"})
        root = Path(cfg["directory"])
        self._topic = cfg["topic"]
        self._batch = cfg["batch.size"]
        self._key_field = cfg["key.field"]
        committed = self.context.offset_storage_reader.offsets([{"file": n} for n in names])
        self._cursors = [
            cursor(root, name, format_of(name, cfg["format"]), offset, cfg["file.final.ms"])
            for name, (_, offset) in zip(names, committed, strict=True)
        ]
        self._current = 0
        self._was_empty = False
        self._tx = self.context.transaction_context
        self._where = f"{root} ({len(names)} file{'s' if len(names) != 1 else ''}: {', '.join(names[:3])}" + (
            ", ...)" if len(names) > 3 else ")")

    def poll(self) -> list[SourceRecord] | None:
        for c in self._cursors:
            pending = c.error
            if pending is not None:  # a malformed line: alone in its poll, after the records before it
                c.error = None
                return self._alone(pending)
        out: list[SourceRecord] = []
        cursors = self._cursors
        # the files in order; then, if nothing came, the ones that grew since they hit their end
        while self._current < len(cursors) and len(out) < self._batch:
            c = cursors[self._current]
            c.read(self._batch - len(out), self._topic, self._key_field, out)
            if c.error is not None:
                break
            if c.at_end:
                self._current += 1
        if not out and self._current >= len(cursors):
            for c in cursors:
                if len(out) >= self._batch:
                    break
                if c.has_more():
                    c.read(self._batch - len(out), self._topic, self._key_field, out)
                    if c.error is not None:
                        break
        if out and self._tx is not None:
            for rec in out:
                if rec.source_offset and rec.source_offset.get("done"):
                    self._tx.commit_transaction(rec)
        if not out:
            bad = next((c for c in cursors if c.error is not None), None)
            if bad is not None and bad.error is not None:
                pending, bad.error = bad.error, None
                return self._alone(pending)
            if self._was_empty:  # not the first empty poll in a row: wait a little before the next look
                time.sleep(_IDLE_WAIT)
            self._was_empty = True
            return []
        self._was_empty = False
        return out

    def _alone(self, record: SourceRecord) -> list[SourceRecord]:
        """A malformed line's record as its own batch (ending the file's transaction if it ends the file)."""
        if self._tx is not None and record.source_offset and record.source_offset.get("done"):
            self._tx.commit_transaction(record)
        return [record]

    def nothing_read(self) -> NothingRead | None:
        """Its files had nothing past their committed positions (a last line without its newline waits for
        ``file.final.ms``)."""
        where = getattr(self, "_where", None)
        return None if where is None else NothingRead(where, COMMITTED_BEFORE, "nothing new past the committed "
                                                                               "positions")

    def stop(self) -> None:
        for c in getattr(self, "_cursors", ()):
            c.close()


__all__ = ["DirectorySource", "DirectorySourceTask", "is_finished", "scan_directory"]
