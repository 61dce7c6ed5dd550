"""File connectors: :class:`DirectorySource` (a KIP-131 planner) and :class:`FileSink` (exactly-once
by keeping its offsets in the destination).

DirectorySource
---------------
Reads every file matching ``pattern`` under ``directory``, one record per line (``jsonl``: the parsed
JSON value; ``csv``: a dict keyed by the header row; ``text``: the line's text, a ``str``), into ``topic``.

- ``format=text`` is Kafka Connect's FileStreamSource: no parsing, each line's text (UTF-8, without its
  newline and a ``\r`` before it) is the value, blank lines included, and with
  ``value.converter=StringConverter`` the line's bytes reach the topic as they are. It splits a chunk at
  a time and decodes a poll's lines with one call. A line that is not UTF-8 is handled like a malformed
  JSON line (below). ``jsonl`` keeps validating every line: a line that is not JSON is never passed on.

- Source partition ``{"file": "<path relative to directory>"}``; source offset
  ``{"position": <byte offset after the line>, "line": <lines consumed>, "done": <bool>}``.
  ``done`` is true on the record that consumed the file to its end (trailing blank lines included).
- The **connector** plans: in ``start()`` it lists the matching files, reads their committed offsets
  through ``context.offset_storage_reader`` (KIP-131), leaves out finished files (``done`` and the
  size is still the committed position) and deals the rest round-robin to at most ``tasks.max``
  tasks (task config ``task.files``: a JSON list). While the run goes on, a background check every
  ``directory.scan.interval.ms`` asks for task reconfiguration when a new matching file appears or a
  finished file changes size; ``stop()`` ends that check.
- A **task** resumes each file at its committed byte offset (re-reading a CSV header first), emits
  whole lines only, and follows files that grow while it runs. Text after the last newline is a line
  still being written and waits, until the file is **final**: not modified for ``file.final.ms``
  (default 5000; ``0``: as soon as it is read to its end; ``-1``: never, a last line needs its
  newline). A writer that appends in pieces therefore never has half a line read, and a file written
  without a trailing newline still has its last line read once it stopped changing. A file shorter
  than its committed position was replaced: it is read again from the start (logged as a warning).
- A malformed line is handed to the runtime, which applies ``errors.tolerance``: the records before
  it in the same poll are returned first, then the line alone as a record whose value is the
  :class:`DataError` naming the file and line (its source offset is past the line). With
  ``errors.tolerance=none`` that fails the run (nothing after the last committed boundary is
  committed); with ``all`` the runtime skips it, counts it in the run result's ``skipped`` and commits
  its offset, so the next run does not read it again.
- Files and directories whose name starts with ``.`` are ignored (writers' temporary files).

FileSink
--------
Writes each topic partition under ``<directory>/<topic>/partition=<p>/`` and keeps its offsets **in the
destination**, exactly once, the way Kafka Connect's S3 and HDFS sinks make their objects the truth
(details: :mod:`connect_runtime.connectors._files_dest`):

- Each commit point **publishes whole files** named by the offsets they hold,
  ``<topic>+<p>+<first>+<last>.jsonl`` (or ``.csv``; 20-digit zero-padded, inclusive, as the HDFS
  connector names them), by ``rename`` after the bytes were fsynced. Until then records are in a hidden
  in-flight file (``.inflight-...tmp``). A reader of the directory (``*.jsonl``) sees committed records
  only, never a growing or half-written file. ``file.max.bytes`` > 0 also rolls to a new file within a
  commit; each file (CSV: each with its header) stands alone. :func:`committed_files` lists them in
  offset order.
- ``_manifest.json`` holds the partition's **generation** and next offset; the committed position is
  the later of it and the last file's end, so a crash between a rename and the manifest loses nothing.
- **The destination is the fence**: ``open()`` claims each partition for the run's generation under an
  exclusive lock (``.lock``), removes in-flight files of runs that died, and rewinds the consumer to the
  committed position; every commit re-checks, under the same lock, that no newer generation claimed the
  partition. An older run (a zombie, or an overlapping run that started earlier, as a backfill makes
  them) publishes nothing: it fails with ``ProducerFencedError`` and its in-flight files are removed.
- ``pre_commit()`` publishes and returns ``{}``: the consumer group commits nothing.
- Offsets management (KIP-875): ``read_offsets`` / ``alter_offsets`` read and move the position in the
  destination. Moving forward skips records; moving back or resetting is refused while published files
  hold records at or past the new position (files are never deleted for you; the error names them).
- Directories written by earlier versions (one growing file and a manifest with its committed size) are
  taken over: bytes past that size are cut off, the old files stay as committed data.

``put()`` encodes a whole batch per partition with one orjson call (split into lines with msgspec; byte for
byte what ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` writes, values whose orjson bytes
could differ are written by json) and writes it with one call.
Each line is the record value as JSON (``output.fields=value``, the default) or an object with the
chosen fields of ``topic, partition, offset, timestamp, key, value, headers``.

``format=text`` is Kafka Connect's FileStreamSink: each value's own bytes as a line (``bytes`` as they are,
a ``str`` in UTF-8; files ``*.txt``), for ``value.converter=StringConverter`` or ``ByteArrayConverter``: the
topic's bytes pass through, a batch joined with one ``join``, nothing parsed or encoded again. A tombstone
is an empty line. A value of another type (JsonConverter's dicts), or one holding a newline (it would be
two lines), is named and reported (dead letter queue under ``errors.tolerance=all``, else the run fails).
The exactly-once machinery is the same for every format.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from itertools import accumulate, count, islice
from operator import attrgetter
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
    DestinationOffsets,
    ExactlyOnceSupport,
    SinkConnector,
    SourceConnector,
)
from connect_runtime.api.errors import ConfigError, ConnectError, DataError
from connect_runtime.api.records import SinkRecord, SourceRecord, TopicPartition
from connect_runtime.api.sink import SinkTask
from connect_runtime.api.source import SourceTask
from connect_runtime.connectors._files_dest import MANIFEST, PartitionDir, read_manifest
from connect_runtime.converters import json_batch, json_default, json_loads_exact

log = logging.getLogger(__name__)

VERSION = "0.1.0"

_FORMATS_BY_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".txt": "text"}
_CHUNK = 1 << 20
_IDLE_WAIT = 0.1
"""Seconds a poll waits when no file has anything new (Kafka Connect's file source waits too)."""


def _format_of(name: str, configured: str | None) -> str:
    if configured:
        return configured.lower()
    fmt = _FORMATS_BY_SUFFIX.get(Path(name).suffix.lower())
    if fmt is None:
        raise ConfigError(errors={"format": f"cannot tell the format of {name!r} from its extension; "
                                            "set format=jsonl or format=csv (or format=text)"})
    return fmt


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


# ================================================================================ DirectorySource


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
            _format_of(name, self._config["format"])  # fail fast on a file of unknown format
        committed = self.context.offset_storage_reader.offsets([{"file": name} for name in files])
        plan = []
        finished = 0
        for (_, offset), (name, size) in zip(committed, files.items(), strict=True):
            if is_finished(offset, size):
                finished += 1
            else:
                plan.append(name)
        self._known = files
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

_BOM = b"\xef\xbb\xbf"
_BLANK = frozenset(b" \t\r\f\v")


class _FileCursor:
    """Reading position in one file: whole lines only, from a committed byte offset."""

    def __init__(self, root: Path, name: str, fmt: str, offset: Mapping[str, Any] | None) -> None:
        self.name = name
        self.path = root / name
        self.fmt = fmt
        self.partition = {"file": name}
        self.position = int(offset.get("position", 0)) if offset else 0
        self.line = int(offset.get("line", 0)) if offset else 0
        self.header: list[str] | None = None
        self.error: SourceRecord | None = None
        """A malformed line, as the record the next poll hands to the runtime (value: the DataError)."""
        self.final_ms = 5000
        self.gone = False
        self._fh: io.BufferedReader | None = None
        self._buf = b""
        self._eof = False
        self._lines: list[bytes] = []
        """format=text: complete lines read ahead (without their newline), from ``_li`` on not yet
        returned; ``_buf`` then holds only the text after the last newline read."""
        self._li = 0

    # -- file handling ------------------------------------------------------------------------------

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, closed in close()
        except FileNotFoundError:
            log.warning("DirectorySource: %s disappeared; skipping it", self.path)
            self.gone = True
            return False
        size = os.fstat(fh.fileno()).st_size
        if size < self.position:
            log.warning("DirectorySource: %s is shorter (%d bytes) than its committed position %d: "
                        "it was replaced; reading it again from the start", self.path, size, self.position)
            self.position = 0
            self.line = 0
        if self.fmt == "csv" and self.position > 0 and self.header is None:
            self.header = self._read_header(fh)
        fh.seek(self.position + len(self._buf))
        self._fh = fh
        return True

    def _read_header(self, fh: io.BufferedReader) -> list[str]:
        fh.seek(0)
        data = b""
        while True:
            chunk = fh.read(65536)
            data += chunk
            start = 0
            while True:
                end = _csv_record_end(data, start)
                if end < 0:
                    break
                text = data[start:end]
                if text.startswith(_BOM):
                    text = text[3:]
                if text.strip():
                    return _csv_row(text)
                start = end + 1
            if not chunk:
                raise DataError(f"{self.path}: cannot re-read the CSV header to resume at byte {self.position}")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def has_more(self) -> bool:
        """Whether the file may have bytes this cursor has not seen (it grew since the last EOF), or an
        unterminated last line that became final."""
        if self.gone:
            return False
        if not self._eof:
            return True
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        if st.st_size != self.position + len(self._buf):
            return True
        return bool(self._buf if self.fmt == "text" else self._buf.strip()) and self._final(st.st_mtime)

    def _final(self, mtime: float) -> bool:
        """The file stopped changing: not modified for ``file.final.ms``."""
        return self.final_ms >= 0 and time.time() - mtime >= self.final_ms / 1000

    # -- reading ------------------------------------------------------------------------------------

    def read(self, limit: int, topic: str, key_field: str | None, out: list[SourceRecord]) -> int:
        """Append up to ``limit`` records to ``out``; stop early at EOF or before a malformed line
        (which is then left in ``self.error``, the cursor already past it)."""
        if self.gone or (self._fh is None and not self._open()):
            return 0
        if self.fmt == "text":
            return self._read_text(limit, topic, out)
        fh = self._fh
        assert fh is not None
        csv_fmt = self.fmt == "csv"
        decode = json_loads_exact
        partition = self.partition
        buf = self._buf
        i = 0
        n = 0
        line = self.line
        last: dict[str, Any] | None = None
        base = self.position
        eof = False
        tail = False  # reading the unterminated last line of a final file
        while True:
            end = _csv_record_end(buf, i) if csv_fmt else buf.find(b"\n", i)
            if end < 0:
                chunk = fh.read(_CHUNK)
                if chunk:
                    base += i
                    buf = buf[i:] + chunk
                    i = 0
                    continue
                if tail or i >= len(buf) or not buf[i:].strip() or not self._final(os.fstat(fh.fileno()).st_mtime):
                    eof = True
                    break
                tail = True
                end = len(buf)  # the file is final: its last line has no newline, read it as it is
            raw = buf[i:end]
            lines = raw.count(b"\n") + 1 if csv_fmt else 1
            if line == 0 and raw.startswith(_BOM):
                raw = raw[3:]
            # blank (or whitespace-only) lines are consumed without a record
            if not raw or (raw[0] in _BLANK and not raw.strip()):
                i = end + 1
                line += lines
                continue
            if n >= limit:
                break
            i = end + 1 if end < len(buf) else end  # a final file's unterminated last line ends at buf's end
            line_no = line + 1
            line += lines
            try:
                if csv_fmt:
                    row = _csv_row(raw)
                    if self.header is None:
                        self.header = row
                        continue
                    if len(row) != len(self.header):
                        raise ValueError(f"expected {len(self.header)} fields as in the header, got {len(row)}")
                    value: Any = dict(zip(self.header, row, strict=True))
                else:
                    value = decode(raw)
            except (ValueError, csv.Error) as exc:
                kind = "CSV" if csv_fmt else "JSON"
                error = DataError(f"{self.path}: line {line_no}: malformed {kind}: {exc}")
                # the runtime decides (errors.tolerance): the line goes to it as a record of its own; it
                # finishes the file when only blank lines follow it
                rest = buf[i:]
                done = not rest.strip() and fh.tell() >= os.fstat(fh.fileno()).st_size
                offset = ({"position": base + len(buf), "line": line + rest.count(b"\n"), "done": True} if done
                          else {"position": base + i, "line": line, "done": False})
                self.error = SourceRecord(source_partition=partition, source_offset=offset, topic=topic,
                                          value=error)
                break
            last = {"position": base + i, "line": line, "done": False}
            key = value.get(key_field) if key_field and isinstance(value, dict) else None
            out.append(SourceRecord(source_partition=partition, source_offset=last,
                                    topic=topic, key=key, value=value))
            n += 1
        self.line = line
        self._buf = buf[i:]
        self.position = base + i
        self._eof = eof
        if eof:
            self.close()  # reopened by read() when has_more() says the file grew
        if last is not None and eof and not self._buf and self.error is None:
            # this record consumed the file to its end (blank lines after it included)
            last["position"] = self.position
            last["line"] = self.line
            last["done"] = True
        return n


    def _read_text(self, limit: int, topic: str, out: list[SourceRecord]) -> int:
        """format=text: every line is a record whose value is its text (UTF-8, without the newline and a
        ``\\r`` before it). Lines are split a chunk at a time (one ``split``), and a poll's lines decoded with
        one ``decode``; a line that is not UTF-8 is named like a malformed JSON line (``self.error``)."""
        fh = self._fh
        assert fh is not None
        n = 0
        eof = False
        while True:
            lines, li = self._lines, self._li
            if li >= len(lines):
                chunk = fh.read(_CHUNK)
                if chunk:
                    lines = (self._buf + chunk).split(b"\n")
                    self._buf = lines.pop()
                    self._lines, self._li = lines, 0
                    continue
                tail = self._buf
                if not tail or not self._final(os.fstat(fh.fileno()).st_mtime):
                    eof = True
                    break
                if n >= limit:
                    break
                # the file is final: its last line has no newline, it is read as it is
                self._buf = b""
                n += self._emit_text([tail], topic, out, newline=False)
                if self.error is not None:
                    break
                continue
            if n >= limit:
                break
            take = lines[li:li + limit - n]
            self._li = li + len(take)
            n += self._emit_text(take, topic, out, newline=True)
            if self.error is not None:
                break
        self._eof = eof
        if eof:
            self.close()  # reopened by read() when has_more() says the file grew
            self._lines, self._li = [], 0
            if n and self.error is None and not self._buf:
                last = out[-1].source_offset
                assert isinstance(last, dict)  # made by _emit_text
                last["done"] = True  # this record consumed the file to its end
        return n

    def _emit_text(self, lines: list[bytes], topic: str, out: list[SourceRecord], *, newline: bool) -> int:
        """Append the records of ``lines`` (whole lines, in order, from the cursor's position) to ``out``.
        A line that is not UTF-8 ends them: it becomes ``self.error`` (the cursor past it; what was read
        ahead after it is read again)."""
        if self.line == 0 and self.position == 0 and lines[0].startswith(_BOM):
            lines = [lines[0][3:], *lines[1:]]
            self.position = 3
        line, base = self.line, self.position
        try:
            text = b"\n".join(lines).decode("utf-8")
        except UnicodeDecodeError:
            good, why = 0, ""
            for raw in lines:  # find the bad line (the ones before it are records)
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    why = str(exc)
                    break
                good += 1
            n = self._emit_text(lines[:good], topic, out, newline=newline) if good else 0
            self.line += 1
            self.position += len(lines[good]) + newline
            self._lines, self._li, self._buf = [], 0, b""
            done = False
            if self._fh is not None:
                self._fh.seek(self.position)
                done = self.position >= os.fstat(self._fh.fileno()).st_size
            self.error = SourceRecord(
                source_partition=self.partition, topic=topic,
                source_offset={"position": self.position, "line": self.line, "done": done},
                value=DataError(f"{self.path}: line {self.line}: not UTF-8 text (format=text): {why}"))
            return n
        values = text.split("\n")
        if "\r" in text:
            values = [v[:-1] if v.endswith("\r") else v for v in values]
        ends = list(accumulate(map(len, lines), _line_end, initial=base))
        if not newline:
            ends[-1] -= 1
        partition = self.partition
        new, SR = object.__new__, SourceRecord
        append = out.append
        # records made with plain attribute stores: about twice as fast as SourceRecord(**fields), the same records
        for value, end, no in zip(values, islice(ends, 1, None), count(line + 1)):
            r = new(SR)
            r.source_partition = partition
            r.source_offset = {"position": end, "line": no, "done": False}
            r.topic = topic
            r.partition = r.key = r.timestamp = r.headers = None
            r.value = value
            append(r)
        self.line = line + len(values)
        self.position = ends[-1]
        return len(values)


def _line_end(position: int, length: int) -> int:
    return position + length + 1


def _csv_record_end(buf: bytes, start: int) -> int:
    """Index of the newline ending the CSV record at ``start`` (quoted newlines don't end it), or -1."""
    end = buf.find(b"\n", start)
    while end >= 0 and buf.count(b'"', start, end) % 2 == 1:
        end = buf.find(b"\n", end + 1)
    return end


def _csv_row(raw: bytes) -> list[str]:
    text = raw.decode("utf-8")
    if text.endswith("\r"):
        text = text[:-1]
    return next(csv.reader([text]))


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
            _FileCursor(root, name, _format_of(name, cfg["format"]), offset)
            for name, (_, offset) in zip(names, committed, strict=True)
        ]
        for c in self._cursors:
            c.final_ms = cfg["file.final.ms"]
        self._current = 0
        self._tx = self.context.transaction_context

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
            if c._eof or c.gone:
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
            time.sleep(_IDLE_WAIT)
            return []
        return out

    def _alone(self, record: SourceRecord) -> list[SourceRecord]:
        """A malformed line's record as its own batch (ending the file's transaction if it ends the file)."""
        if self._tx is not None and record.source_offset and record.source_offset.get("done"):
            self._tx.commit_transaction(record)
        return [record]

    def stop(self) -> None:
        for c in getattr(self, "_cursors", ()):
            c.close()


# ======================================================================================== FileSink

_OUTPUT_FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
_topic_of = attrgetter("topic")
_partition_of = attrgetter("partition")
_value_of = attrgetter("value")


def _output_fields(name: str, value: Any) -> None:
    bad = [v for v in value or () if v not in _OUTPUT_FIELDS]
    if bad:
        raise ValueError(f"fields among {', '.join(_OUTPUT_FIELDS)}, got {', '.join(bad)}")
    if not value:
        raise ValueError("at least one field")


_SINK_CONFIG = (
    ConfigDef()
    .define("directory", Type.STRING, validator=non_empty_string, importance=Importance.HIGH,
            doc="Directory to write into (<directory>/<topic>/partition=<p>/...).")
    .define("format", Type.STRING, default="jsonl", validator=ValidString.in_("jsonl", "csv", "text"),
            doc="jsonl (one JSON document per line), csv (a header row, then one row per record) or text (each "
                "value's own bytes as a line, as Kafka Connect's FileStreamSink: str or bytes values, e.g. from "
                "StringConverter or ByteArrayConverter; files named *.txt).")
    .define("output.fields", Type.LIST, default=["value"], validator=_output_fields,
            doc="What each line holds: 'value' alone writes the value; several fields write an object "
                "(jsonl) or leading columns (csv) of topic, partition, offset, timestamp, key, value, headers.")
    .define("csv.columns", Type.LIST, default=[],
            doc="csv: the value's columns (default: the keys of the first record's value).")
    .define("file.max.bytes", Type.LONG, default=0, validator=Range.at_least(0),
            doc="Roll to a new file once the current one holds at least this many bytes (0: one file per "
                "partition and commit point).")
    .define("fsync", Type.BOOLEAN, default=True,
            doc="fsync data and manifest at each commit point (false survives process crashes, not power loss).")
)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).decode("utf-8")
    return json_default(obj)  # Enum, UUID: as orjson writes them natively, so both give the same bytes


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default).encode
"""One value -> its line's text (without the newline): the reference :func:`_encode_lines` agrees with."""

def _encode_lines(values: list[Any]) -> bytes:
    """Each value as one line of JSON (newline-terminated), byte for byte what :data:`_encode` writes,
    encoded as one batch (:func:`connect_runtime.converters.json_batch`). A list orjson refuses is encoded
    by json alone, which raises what it raises (the caller then finds the bad records one by one)."""
    try:
        parts = json_batch(values, lambda v: _encode(v).encode("utf-8"), _json_default)
    except TypeError:  # orjson.JSONEncodeError
        return ("\n".join([_encode(v) for v in values]) + "\n").encode("utf-8")
    parts.append(b"")
    return b"\n".join(parts)


class _PartitionWriter:
    """One partition of one FileSink task: records go to a hidden in-flight file; a commit point renames
    it (and any rolled ones) to its published name under the partition's lock, after checking that no
    newer generation claimed the partition (see :mod:`connect_runtime.connectors._files_dest`)."""

    def __init__(self, task: FileSinkTask, tp: TopicPartition) -> None:
        self.tp = tp
        self.task = task
        self.generation = task.context.generation
        self.max_bytes = task._max_bytes
        self.fsync = task._fsync
        self.dest = PartitionDir(task._directory, tp, task._format, fsync=task._fsync)
        self.fh: Any = None
        self.path: Path | None = None
        self.first = 0  # first offset the in-flight file covers
        self.size = 0   # bytes in the in-flight file
        self.pending: list[tuple[Path, int, int]] = []  # rolled in-flight files: (path, first, last)
        self.columns: list[str] | None = None
        self.committed_next: int | None = None
        self.next_offset: int | None = None

    def claim(self) -> None:
        """``open()``: take the partition for this generation (an older run can publish nothing after
        this), clean up what runs that died left, and learn the committed position."""
        who = repr(self.task._name)
        with self.dest.locked("claiming the partition"):
            st = self.dest.state()
            self.dest.check_generation(st, self.generation, who)
            if st.generation < 0 and not self.dest.manifest_path.exists():
                for stale in self.dest._legacy_names():  # a version-1 run that died before any commit point
                    log.info("FileSink: removing %s (written before any commit point)", stale)
                    stale.unlink()
            self.dest.take_over_v1(st)
            self.dest.remove_inflight()
            self.dest.write_manifest(st, self.generation, st.next_offset)  # the claim
        self.committed_next = self.next_offset = st.next_offset
        if self.task._format == "csv":
            last = st.files[-1].path if st.files else (st.legacy[-1] if st.legacy else None)
            if last is not None and last.stat().st_size > 0:
                with open(last, "rb") as rf:
                    self.columns = next(csv.reader([rf.readline().decode("utf-8").rstrip("\r\n")]))

    def prepare(self, first_offset: int) -> None:
        """Before writing records starting at ``first_offset``: open an in-flight file, or roll."""
        if self.fh is not None and not (self.max_bytes and self.size >= self.max_bytes):
            return
        if self.fh is not None:
            assert self.next_offset is not None
            self._close_inflight(self.next_offset - 1)
            first = self.next_offset
        else:
            first = self.next_offset if self.next_offset is not None else first_offset
        self.path, self.fh = self.dest.new_inflight(self.generation, first)
        self.first, self.size = first, 0

    def _close_inflight(self, last: int) -> None:
        fh, path = self.fh, self.path
        self.fh = self.path = None
        assert fh is not None and path is not None
        fh.flush()
        if self.fsync:  # durable before a rename can publish it
            os.fsync(fh.fileno())
        fh.close()
        if self.size:
            self.pending.append((path, self.first, last))
        else:
            path.unlink()

    def write(self, data: bytes, next_offset: int) -> None:
        assert self.fh is not None
        self.fh.write(data)
        self.size += len(data)
        self.next_offset = next_offset

    def commit(self, delivered: int | None) -> None:
        """The commit point: publish the in-flight files and record the position, or be fenced."""
        nxt = self.next_offset
        if delivered is not None and (nxt is None or delivered > nxt):
            nxt = delivered  # records delivered but not written (filtered, reported as errant)
        if nxt is None or (nxt == self.committed_next and self.fh is None and not self.pending):
            return
        if self.fh is not None:
            self._close_inflight(nxt - 1)
        try:
            with self.dest.locked("committing"):
                st = self.dest.state()
                self.dest.check_generation(st, self.generation, repr(self.task._name))
                if st.next_offset != self.committed_next:
                    raise ConnectError(
                        f"FileSink {self.task._name!r}: {self.tp.topic}-{self.tp.partition} in {self.dest.dir} is at "
                        f"offset {st.next_offset} (generation {st.generation}), not where this run (generation "
                        f"{self.generation}) found it ({self.committed_next}): another run of the same generation "
                        "wrote it, or it was changed outside the sink; this run publishes nothing")
                self.dest.publish(self.pending)
                self.dest.write_manifest(st, self.generation, nxt)
        except BaseException:
            self.discard()
            raise
        self.pending = []
        self.next_offset = self.committed_next = nxt

    def discard(self) -> None:
        """Forget what was not committed (its in-flight files are removed; the records come again)."""
        if self.fh is not None:
            self.fh.close()
            self.fh = None
        for path, _, _ in self.pending + ([(self.path, 0, 0)] if self.path is not None else []):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self.pending, self.path = [], None
        self.next_offset = self.committed_next

    close = discard


def committed_files(directory: str | os.PathLike[str], topic: str, partition: int, fmt: str = "jsonl") -> list[Path]:
    """The data files of one FileSink partition, in offset order: every record in them is committed, and
    nothing else is under a data file's name (what a reader of the directory reads; files of a version-1
    manifest first)."""
    dest = PartitionDir(directory, TopicPartition(topic, partition), fmt, fsync=False)
    st = dest.state()
    return [*st.legacy, *(f.path for f in st.files)]


def _sink_partitions(cfg: Mapping[str, Any]) -> list[TopicPartition]:
    """The partitions a FileSink config has directories for (``topics``, or ``topics.regex`` matched
    against the topic directories)."""
    root = Path(cfg["directory"])
    topics = [str(t) for t in cfg.get("topics") or []]
    if not topics and cfg.get("topics.regex"):
        rx = re.compile(str(cfg["topics.regex"]))
        topics = sorted(p.name for p in root.iterdir() if p.is_dir() and rx.fullmatch(p.name)) if root.is_dir() else []
    out = []
    for topic in topics:
        for p in sorted((root / topic).glob("partition=*")) if (root / topic).is_dir() else []:
            num = p.name[len("partition="):]
            if num.isdigit():
                out.append(TopicPartition(topic, int(num)))
    return out


class FileSink(SinkConnector):
    """Writes topic partitions to JSON-lines or CSV files, exactly once (offsets in the destination)."""

    VERSION = VERSION

    def config_def(self) -> ConfigDef:
        return _SINK_CONFIG

    def start(self, props: Mapping[str, str]) -> None:
        self._props = {k: v for k, v in props.items() if k in _SINK_CONFIG.keys}
        _SINK_CONFIG.parse(self._props)
        if props.get("name"):
            self._props["name"] = props["name"]  # named in the tasks' messages

    def task_class(self) -> type:
        return FileSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        out = {}
        for k, v in self._props.items():
            out[k] = ",".join(map(str, v)) if isinstance(v, list) else str(v)
        return [dict(out) for _ in range(max_tasks)]

    # -- offsets in the destination (KIP-875) -------------------------------------------------------

    def _parse(self, connector_config: Mapping[str, Any]) -> dict[str, Any]:
        cfg = dict(_SINK_CONFIG.parse({k: v for k, v in connector_config.items() if k in _SINK_CONFIG.keys}))
        cfg["topics"] = _list_of(connector_config.get("topics"))
        cfg["topics.regex"] = connector_config.get("topics.regex")
        return cfg

    def read_offsets(self, connector_config: Mapping[str, Any]) -> DestinationOffsets:
        """The committed position of every partition directory (manifest and file names)."""
        cfg = self._parse(connector_config)
        offsets: dict[TopicPartition, int] = {}
        generation = -1
        for tp in _sink_partitions(cfg):
            st = PartitionDir(cfg["directory"], tp, cfg["format"], fsync=False).state()
            generation = max(generation, st.generation)
            if st.next_offset is not None:
                offsets[tp] = int(st.next_offset)
        return DestinationOffsets(offsets, generation, f"FileSink manifests and file names under {cfg['directory']}")

    def alter_offsets(self, connector_config: Mapping[str, Any], offsets: Mapping[TopicPartition, int | None],
                      generation: int) -> bool:
        """Move partitions forward (the records before the new offset are never written), or back / reset
        (``None``) where no published file holds records at or past the new offset: files are never
        removed for you (that would delete data); the error names them."""
        cfg = self._parse(connector_config)
        dests = {TopicPartition(*tp): PartitionDir(cfg["directory"], TopicPartition(*tp), cfg["format"],
                                                   fsync=cfg["fsync"]) for tp in offsets}
        for check_only in (True, False):
            for tp, off in offsets.items():
                tp = TopicPartition(*tp)
                dest = dests[tp]
                if not dest.exists() and (off is None or check_only):
                    continue
                with dest.locked("altering offsets"):
                    st = dest.state()
                    dest.check_generation(st, generation, repr(connector_config.get("name")))
                    target = 0 if off is None else int(off)
                    holding = [f.path.name for f in st.files if f.last >= target]
                    if st.legacy and target < st.legacy_next:
                        holding = [p.name for p in st.legacy] + holding
                    if holding and (st.next_offset is None or target < st.next_offset):
                        what = "reset" if off is None else f"move back to offset {target}"
                        raise ConnectError(
                            f"FileSink keeps its offsets in its destination: to {what} {tp.topic}-{tp.partition}, the "
                            f"records at or after offset {target} would be written again next to their copies in "
                            f"{dest.dir}: {', '.join(holding[:5])}{' ...' if len(holding) > 5 else ''}. Remove those "
                            "files first (they are the committed data), then alter or reset again; or move forward")
                    if check_only:
                        continue
                    # a reset keeps the manifest (with no position): its generation keeps older runs fenced
                    dest.write_manifest(st, generation, None if off is None else target)
        return True


def _list_of(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    return [str(t) for t in value]


class FileSinkTask(SinkTask):
    """See the module docstring: data per partition, manifest after fsync, ``pre_commit`` returns {}."""

    VERSION = VERSION

    def start(self, props: Mapping[str, str]) -> None:
        cfg = _SINK_CONFIG.parse({k: v for k, v in props.items() if k in _SINK_CONFIG.keys})
        self._name = str(props.get("name") or "file-sink")
        self._directory = cfg["directory"]
        self._format = cfg["format"]
        self._fields: list[str] = cfg["output.fields"]
        self._value_only = self._fields == ["value"]
        if self._format == "text" and not self._value_only:
            raise ConfigError(errors={"output.fields": "format=text writes the value alone: expected output.fields="
                                                       f"value, got {','.join(self._fields)}"})
        self._csv_columns: list[str] = cfg["csv.columns"]
        self._fsync = cfg["fsync"]
        self._max_bytes = cfg["file.max.bytes"]
        self._writers: dict[TopicPartition, _PartitionWriter] = {}

    def open(self, partitions: list[TopicPartition]) -> None:
        """Claim each partition for this run's generation and rewind to its committed position."""
        rewind = {}
        for tp in partitions:
            tp = TopicPartition(*tp)
            if tp in self._writers:
                continue
            w = _PartitionWriter(self, tp)
            w.claim()
            self._writers[tp] = w
            if w.next_offset is not None:
                rewind[tp] = w.next_offset
        if rewind:
            self.context.offset(rewind)

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        first = records[0]
        topic, partition = first.topic, first.partition
        if (records[-1].partition == partition and records[-1].topic == topic
                and len(set(map(_partition_of, records))) == 1 and len(set(map(_topic_of, records))) == 1):
            groups: dict[tuple[str, int], list[SinkRecord]] = {(topic, partition): records}  # one partition
        else:
            groups = {}
            for r in records:
                key = (r.topic, r.partition)
                g = groups.get(key)
                if g is None:
                    groups[key] = [r]
                else:
                    g.append(r)
        for (topic, partition), recs in groups.items():
            tp = TopicPartition(topic, partition)
            w = self._writers.get(tp)
            if w is None:
                raise ConnectError(
                    f"FileSink got records of {topic}-{partition}, a partition open() did not assign (did a "
                    "transform rename the topic? the sink keeps its exactly-once offsets per consumed partition)")
            if w.next_offset is not None and recs[0].offset < w.next_offset:
                # already written (redelivered before the rewind took effect)
                recs = [r for r in recs if r.offset >= w.next_offset]
                if not recs:
                    continue
            fmt = self._format
            try:
                w.prepare(recs[0].offset)
                data = (self._encode_jsonl(recs) if fmt == "jsonl" else self._encode_text(recs) if fmt == "text"
                        else self._encode_csv(w, recs))
                w.write(data, recs[-1].offset + 1)
            except OSError as exc:
                raise _disk_error(self._name, "writing", w.path or w.dest.dir, exc) from exc

    # -- encoding -----------------------------------------------------------------------------------

    def _fields_of(self, r: SinkRecord) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self._fields:
            if f == "headers":
                out[f] = [[k, v] for k, v in (r.headers or [])]
            else:
                out[f] = getattr(r, f)
        return out

    def _encode_jsonl(self, recs: list[SinkRecord]) -> bytes:
        try:
            if self._value_only:
                return _encode_lines(list(map(_value_of, recs)))
            return _encode_lines(list(map(self._fields_of, recs)))
        except (TypeError, ValueError, UnicodeError):
            enc = _encode
            return self._encode_one_by_one(recs, lambda r: (enc(r.value if self._value_only
                                                                 else self._fields_of(r)) + "\n").encode())

    def _encode_text(self, recs: list[SinkRecord]) -> bytes:
        """format=text: each value's bytes as they are (a str in UTF-8), one line per record, joined as a batch
        with one ``join``; a value that is neither (or that holds a newline, which would make it two lines)
        is found record by record, named, and reported (dead letter queue) or fails the run."""
        values = list(map(_value_of, recs))
        try:
            blob = b"\n".join(values)  # bytes, bytearray, memoryview: verbatim
        except TypeError:
            try:
                blob = "\n".join(values).encode("utf-8")
            except (TypeError, UnicodeError):
                blob = None
        if blob is not None and blob.count(b"\n") == len(values) - 1:
            return blob + b"\n"
        return self._encode_one_by_one(recs, _text_line)

    def _encode_one_by_one(self, recs: list[SinkRecord], encode_one: Any) -> bytes:
        """Slow path after a batch failed to encode: find the bad records and report or raise."""
        parts = []
        reporter = self.context.errant_record_reporter
        for r in recs:
            try:
                parts.append(encode_one(r))
            except (TypeError, ValueError, UnicodeError, DataError) as exc:
                err = DataError(f"FileSink cannot write record {r.topic}-{r.partition}@{r.offset}: {exc}")
                if reporter is None:
                    raise err from exc
                reporter.report(r, err)
        return b"".join(parts)

    def _encode_csv(self, w: _PartitionWriter, recs: list[SinkRecord]) -> bytes:
        meta = [f for f in self._fields if f != "value"]
        if w.columns is None:
            first = recs[0].value
            value_cols = self._csv_columns or (list(first) if isinstance(first, dict) else ["value"])
            w.columns = meta + value_cols
        header = _csv_line(w.columns) if w.size == 0 else b""  # every file starts with the header
        value_cols = w.columns[len(meta):]

        def row_of(r: SinkRecord) -> bytes:
            v = r.value
            if value_cols == ["value"] and not isinstance(v, dict):
                vals: list[Any] = [v]
            else:
                if not isinstance(v, dict):
                    raise DataError(f"csv needs a dict value, got {type(v).__name__}")
                extra = [k for k in v if k not in value_cols]
                if extra:
                    raise DataError(f"value has fields {extra} not among the CSV columns {value_cols}")
                vals = [v.get(c) for c in value_cols]
            m = self._fields_of(r) if meta else {}
            return _csv_line([m[f] for f in meta] + vals)

        return header + self._encode_one_by_one(recs, row_of)

    # -- commit points ------------------------------------------------------------------------------

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        for tp, w in self._writers.items():
            try:
                w.commit(current_offsets.get(tp))
            except OSError as exc:
                raise _disk_error(self._name, "publishing the files of a commit point in", w.dest.dir, exc) from exc

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        self.flush(current_offsets)
        return {}  # the manifests are the offsets; the consumer group commits nothing

    def close(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            w = self._writers.pop(TopicPartition(*tp), None)
            if w is not None:
                w.discard()  # not committed: its in-flight files go, its records come again

    def stop(self) -> None:
        for w in self._writers.values():
            w.discard()
        self._writers = {}


def _disk_error(name: str, doing: str, path: Path, exc: OSError) -> ConnectError:
    """A failed write as one error naming the path and the cause (a full disk says so): nothing of the commit
    point in progress is published, and the records come again."""
    code = errno.errorcode.get(exc.errno or 0, "")
    why = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
           errno.EROFS: "the filesystem is read-only", errno.EACCES: "permission denied"}.get(exc.errno or 0, "")
    return ConnectError(
        f"FileSink {name!r}: {doing} {path} failed: {exc.strerror or exc}{f' ({code})' if code else ''}"
        f"{f': {why}' if why else ''}; nothing of the commit point in progress is published, and its records are "
        "delivered again (by a retry of this commit point, or by the next run)")


def _text_line(r: SinkRecord) -> bytes:
    """One record's line of format=text (the slow path, which names what is wrong with a value)."""
    v = r.value
    if isinstance(v, str):
        line = v.encode("utf-8")
    elif isinstance(v, (bytes, bytearray, memoryview)):
        line = bytes(v)
    elif v is None:
        line = b""  # a tombstone: an empty line
    else:
        raise DataError(f"format=text writes str or bytes values (value.converter=StringConverter or "
                        f"ByteArrayConverter), got a {type(v).__name__}")
    if b"\n" in line:
        raise DataError("format=text writes one line per record, and this value holds a newline")
    return line + b"\n"


def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return _encode(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8")
    return v


def _csv_line(values: Iterable[Any]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([_csv_cell(v) for v in values])
    return buf.getvalue().encode("utf-8")


__all__ = [
    "MANIFEST",
    "DirectorySource",
    "DirectorySourceTask",
    "FileSink",
    "FileSinkTask",
    "committed_files",
    "is_finished",
    "read_manifest",
    "scan_directory",
]
