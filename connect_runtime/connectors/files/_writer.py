"""FileSink's writer of one partition: records go to a hidden in-flight file (rolled at ``file.max.bytes``); the
commit point publishes the in-flight files whole and records the position in the manifest, under the
partition's lock and fenced by its generation; what was not committed is discarded."""

from __future__ import annotations

import contextlib
import csv
import logging
import os
from pathlib import Path
from typing import Any

from connect_runtime.api.errors import ConnectError
from connect_runtime.api.records import TopicPartition
from connect_runtime.connectors.files.atomic import new_inflight, publish
from connect_runtime.connectors.files.destination import PartitionDir

log = logging.getLogger(__name__)


class PartitionWriter:
    """One partition of one FileSink task: records go to a hidden in-flight file; a commit point renames
    it (and any rolled ones) to its published name under the partition's lock, after checking that no
    newer generation claimed the partition (see :mod:`connect_runtime.connectors.files.destination`).
    ``name``: the connector, as messages name it."""

    def __init__(self, directory: str, tp: TopicPartition, fmt: str, *, generation: int, name: str, max_bytes: int,
                 fsync: bool) -> None:
        self.tp = tp
        self.name = name
        self.fmt = fmt
        self.generation = generation
        self.max_bytes = max_bytes
        self.fsync = fsync
        self.dest = PartitionDir(directory, tp, fmt, fsync=fsync)
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
        who = repr(self.name)
        with self.dest.locked("claiming the partition"):
            st = self.dest.state()
            self.dest.check_generation(st, self.generation, who)
            if st.generation < 0 and not self.dest.manifest_path.exists():
                for stale in self.dest.legacy_names():  # a version-1 run that died before any commit point
                    log.info("FileSink: removing %s (written before any commit point)", stale)
                    stale.unlink()
            self.dest.take_over_v1(st)
            self.dest.remove_inflight()
            self.dest.write_manifest(st, self.generation, st.next_offset)  # the claim
        self.committed_next = self.next_offset = st.next_offset
        if self.fmt == "csv":
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
        self.path, self.fh = new_inflight(self.dest.dir, self.generation, first, self.fmt)
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
                self.dest.check_generation(st, self.generation, repr(self.name))
                if st.next_offset != self.committed_next:
                    raise ConnectError(
                        f"FileSink {self.name!r}: {self.tp.topic}-{self.tp.partition} in {self.dest.dir} is at "
                        f"offset {st.next_offset} (generation {st.generation}), not where this run (generation "
                        f"{self.generation}) found it ({self.committed_next}): another run of the same generation "
                        "wrote it, or it was changed outside the sink; this run publishes nothing")
                publish(self.dest.dir, self.tp, self.fmt, self.pending, fsync=self.fsync)
                self.dest.write_manifest(st, self.generation, nxt)
        except BaseException:  # an interrupt too: nothing of this commit point stays, its in-flight files go
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


__all__ = ["PartitionWriter"]
