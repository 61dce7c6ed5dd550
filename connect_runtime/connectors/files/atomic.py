"""FileSink's atomic steps: a reader of the directory sees a file only once it is whole.

- A small file (the manifest) is replaced whole: temporary file, fsync, ``os.replace``, directory fsync
  (:func:`write_atomically`).
- Data not yet committed goes to a hidden in-flight file (``.inflight-...tmp``) that no ``*.jsonl`` /
  ``*.csv`` / ``*.txt`` glob matches (:func:`new_inflight`).
- At the commit point, fsynced in-flight files are **published whole** by ``rename`` to the name of the
  offsets they hold, ``<topic>+<p>+<first>+<last>.<ext>`` (both 20-digit zero-padded and inclusive, as
  Kafka Connect's HDFS connector names them; ``+`` cannot occur in a topic name) (:func:`publish`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import IO

from connect_runtime.api.records import TopicPartition
from connect_runtime.connectors._fs import fsync_dir
from connect_runtime.connectors.files._formats import extension

INFLIGHT_PREFIX = ".inflight-"
_PAD = 20


def write_atomically(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, ``os.replace``, directory fsync."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def file_name(tp: TopicPartition, first: int, last: int, fmt: str) -> str:
    """The published name of a file holding offsets ``first..last`` (inclusive) of ``tp``."""
    return f"{tp.topic}+{tp.partition}+{first:0{_PAD}d}+{last:0{_PAD}d}.{extension(fmt)}"


def published_name(tp: TopicPartition, fmt: str) -> re.Pattern[str]:
    """Matches the published names of ``tp``'s files (:func:`file_name`); groups: first and last offset."""
    return re.compile(
        re.escape(f"{tp.topic}+{tp.partition}+") + rf"(\d{{{_PAD}}})\+(\d{{{_PAD}}})\.{re.escape(extension(fmt))}$")


def new_inflight(directory: Path, generation: int, first: int, fmt: str) -> tuple[Path, IO[bytes]]:
    """A new hidden in-flight file for records from offset ``first`` on, open for writing."""
    path = directory / f"{INFLIGHT_PREFIX}{generation}-{os.getpid()}-{first}.{extension(fmt)}.tmp"
    return path, open(path, "wb")


def publish(directory: Path, tp: TopicPartition, fmt: str, pending: list[tuple[Path, int, int]], *,
            fsync: bool) -> None:
    """Rename fsynced temporary files ``(path, first, last)`` to their published names, in offset order (each
    rename is the commit point of its records)."""
    for tmp, first, last in pending:
        os.rename(tmp, directory / file_name(tp, first, last, fmt))
    if pending and fsync:
        fsync_dir(directory)


__all__ = ["INFLIGHT_PREFIX", "file_name", "fsync_dir", "new_inflight", "publish", "published_name",
           "write_atomically"]
