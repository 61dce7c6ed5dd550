"""File connectors: :class:`DirectorySource` (a KIP-131 planner) and :class:`FileSink` (exactly-once
by keeping its offsets in the destination).

Where things are: ``source`` (DirectorySource and its task), ``_cursor`` (reading one file's lines),
``sink`` (FileSink and its task), ``_writer`` (one partition's in-flight files and commit point), ``atomic``
(atomic replacement, in-flight files, whole-file publication), ``destination`` (the partition directory
as the fence, offsets kept there), ``_formats`` (jsonl, csv, text lines).

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
  finished file changes size; ``stop()`` ends that check. A run that reads nothing says why
  (``nothing_read``): no file matches ``pattern`` in ``directory``, or every matching file was read before.
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
(details: :mod:`connect_runtime.connectors.files.destination`):

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

from connect_runtime.connectors.files._formats import VERSION as VERSION
from connect_runtime.connectors.files.destination import MANIFEST, committed_files, read_manifest
from connect_runtime.connectors.files.sink import FileSink, FileSinkTask
from connect_runtime.connectors.files.source import (
    DirectorySource,
    DirectorySourceTask,
    is_finished,
    scan_directory,
)

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
