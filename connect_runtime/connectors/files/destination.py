"""FileSink's destination: one topic partition's directory, its published files and its manifest, and the
destination as the fence.

The directory is the only truth, as Kafka Connect's S3 and HDFS sinks make their objects the truth:

- **Published files** hold committed records only: each appears whole at a commit point, named by the
  offsets it covers (:mod:`connect_runtime.connectors.files.atomic`: names, in-flight files, publication).
- **``_manifest.json``** (replaced atomically) holds the partition's generation and its next offset
  (which can be past the last file's end when trailing records were filtered). The committed
  position is ``max(manifest next_offset, last file's end + 1)``, so a crash between publishing a file
  and rewriting the manifest loses nothing and writes nothing twice.
- **The destination is the fence.** Every step that changes the directory (claiming the partition in
  ``open()``, each commit, an offsets alteration) holds an exclusive ``flock`` on ``.lock`` and first
  checks the manifest's generation: a run claims the partition by writing its generation there, so
  once a newer run claimed it, an older run (a zombie, or an overlapping run that started earlier) can
  publish nothing; it fails with :class:`ProducerFencedError` and its temporary files are removed.
- **Offsets management** (KIP-875): :func:`read_offsets` / :func:`alter_offsets` read and move the
  committed positions, under the same lock and generation check.

Manifests of version 1 (one growing file or ``<topic>-<p>-<first>`` segments, and a committed
``size``) are taken over: bytes past the recorded size are cut off, the files stay where they are
(committed data) and count as covering the offsets before the manifest's ``next_offset``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connect_runtime.api.connector import DestinationOffsets
from connect_runtime.api.errors import ConnectError, ProducerFencedError
from connect_runtime.api.records import TopicPartition
from connect_runtime.connectors.files._formats import extension
from connect_runtime.connectors.files.atomic import (
    INFLIGHT_PREFIX,
    fsync_dir,
    published_name,
    write_atomically,
)

log = logging.getLogger(__name__)

MANIFEST = "_manifest.json"
LOCK = ".lock"
LOCK_TIMEOUT_S = 60.0
"""How long a step waits for another process's step on the same partition (each holds the lock for
one claim or commit: milliseconds, or one fsync)."""


def partition_dir(directory: str | os.PathLike[str], tp: TopicPartition) -> Path:
    return Path(directory) / tp.topic / f"partition={tp.partition}"


@dataclass(frozen=True)
class Published:
    """One published data file: offsets ``first..last`` inclusive."""

    path: Path
    first: int
    last: int


@dataclass
class State:
    """A partition directory as read under its lock."""

    generation: int = -1
    next_offset: int | None = None
    """The committed position: the next offset to write (``None``: nothing was ever committed)."""
    files: tuple[Published, ...] = ()
    legacy: tuple[Path, ...] = ()
    """Files of a version-1 manifest (committed data, offsets before ``legacy_next``)."""
    legacy_next: int = 0
    fmt: str | None = None


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at ``path``, ``None`` if there is none; ConnectError if it is unreadable."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ConnectError(f"{path}: corrupt FileSink manifest ({exc}); it is only ever replaced atomically, "
                           "so something else wrote it") from exc
    if not isinstance(data, dict) or not isinstance(data.get("next_offset"), (int, type(None))):
        raise ConnectError(f"{path}: not a FileSink manifest (needs next_offset)")
    return data


class PartitionDir:
    """One topic partition's directory (see the module docstring). Not thread-safe: one task owns it."""

    def __init__(self, directory: str | os.PathLike[str], tp: TopicPartition, fmt: str, *,
                 fsync: bool = True, lock_timeout: float = LOCK_TIMEOUT_S) -> None:
        self.tp = tp
        self.dir = partition_dir(directory, tp)
        self.fmt = fmt
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self.manifest_path = self.dir / MANIFEST
        self._name_re = published_name(tp, fmt)

    # -- reading ------------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.dir.is_dir()

    def _names(self) -> list[str]:
        try:
            return os.listdir(self.dir)
        except FileNotFoundError:
            return []

    def published(self) -> list[Published]:
        out = []
        for name in self._names():
            m = self._name_re.match(name)
            if m:
                out.append(Published(self.dir / name, int(m.group(1)), int(m.group(2))))
        return sorted(out, key=lambda f: f.first)

    def legacy_names(self) -> list[Path]:
        prefix, suffix = f"{self.tp.topic}-{self.tp.partition}", f".{extension(self.fmt)}"
        out = []
        for name in self._names():
            if not (name.startswith(prefix) and name.endswith(suffix)):
                continue
            middle = name[len(prefix):-len(suffix)]
            if middle == "" or (middle.startswith("-") and middle[1:].isdigit()):
                out.append(self.dir / name)
        return sorted(out)

    def state(self) -> State:
        """The directory as it is now (call under the lock for a consistent view)."""
        manifest = read_manifest(self.manifest_path)
        st = State()
        if manifest is not None:
            st.fmt = manifest.get("format")
            if st.fmt is not None and st.fmt != self.fmt:
                raise ConnectError(f"{self.manifest_path}: this partition was written as {st.fmt}, not {self.fmt}; "
                                   "use another directory to change the format")
            st.generation = int(manifest.get("generation", -1))
            st.next_offset = manifest.get("next_offset")
            if int(manifest.get("version", 1)) == 1:
                st.legacy = tuple(self.legacy_names())
                st.legacy_next = int(manifest["next_offset"])
            else:
                st.legacy = tuple(Path(self.dir / n) for n in manifest.get("legacy", []))
                st.legacy_next = int(manifest.get("legacy_next", 0))
        st.files = tuple(self.published())
        if st.files:
            end = st.files[-1].last + 1
            st.next_offset = end if st.next_offset is None else max(st.next_offset, end)
        return st

    # -- the lock -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self, what: str) -> Iterator[None]:
        """Hold the partition's exclusive lock for one step; bounded wait, naming what it waited for."""
        self.ensure_dir()
        fd = os.open(self.dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + self.lock_timeout
            delay = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise ConnectError(
                            f"FileSink: {what} of {self.tp.topic}-{self.tp.partition} waited {self.lock_timeout:g} s "
                            f"for the lock {self.dir / LOCK}, held by another run's step on the same partition "
                            "(a claim or a commit, which take milliseconds): is a process stuck there?") from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
            yield
        finally:
            os.close(fd)  # releases the flock

    def ensure_dir(self) -> None:
        if not self.dir.is_dir():
            self.dir.mkdir(parents=True, exist_ok=True)
            if self.fsync:  # the new directory entries survive a power loss too
                fsync_dir(self.dir.parent)
                fsync_dir(self.dir.parent.parent)

    # -- writing (call under the lock) ----------------------------------------------------------------

    def check_generation(self, st: State, mine: int, who: str) -> None:
        if st.generation > mine:
            raise ProducerFencedError(
                f"FileSink {who}: generation {st.generation} of this connector claimed "
                f"{self.tp.topic}-{self.tp.partition} in {self.dir}; this run is generation {mine} (older: a zombie "
                "or an overlapping run that started earlier), so it publishes nothing")

    def write_manifest(self, st: State, generation: int, next_offset: int | None) -> None:
        manifest: dict[str, Any] = {"version": 2, "topic": self.tp.topic, "partition": self.tp.partition,
                                    "format": self.fmt, "generation": generation, "next_offset": next_offset}
        if st.legacy:
            manifest["legacy"] = [p.name for p in st.legacy]
            manifest["legacy_next"] = st.legacy_next
        write_atomically(self.manifest_path, json.dumps(manifest, separators=(",", ":")).encode(), fsync=self.fsync)

    def _legacy_start(self, name: str) -> int:
        """First offset of a version-1 file (-1 for the single-file name, which always comes first)."""
        middle = name[len(f"{self.tp.topic}-{self.tp.partition}"):-len(f".{extension(self.fmt)}")]
        return int(middle[1:]) if middle else -1

    def take_over_v1(self, st: State) -> None:
        """A version-1 manifest: remove segments started after its current file and cut that file back to
        its committed size (both written by a run that did not reach its next commit point)."""
        manifest = read_manifest(self.manifest_path)
        if manifest is None or int(manifest.get("version", 1)) != 1:
            return
        current = self.dir / str(manifest.get("file", ""))
        current_start = self._legacy_start(current.name)
        for legacy in st.legacy:
            if self._legacy_start(legacy.name) > current_start:
                log.info("FileSink: removing %s (started after the last commit point)", legacy)
                legacy.unlink()
        st.legacy = tuple(p for p in st.legacy if p.exists())
        size = int(manifest.get("size", 0))
        if current.exists():
            actual = current.stat().st_size
            if actual < size:
                raise ConnectError(f"{current} has {actual} bytes but its manifest recorded {size}: the destination "
                                   "was changed outside the sink; refusing to continue")
            if actual > size:
                log.info("FileSink: truncating %s from %d to %d bytes (written after the last commit point)",
                         current, actual, size)
                with open(current, "r+b") as fh:
                    fh.truncate(size)
                    if self.fsync:
                        os.fsync(fh.fileno())

    def remove_inflight(self) -> None:
        """Remove temporary files of runs that did not reach their commit point."""
        for name in self._names():
            if name.startswith(INFLIGHT_PREFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.dir / name)


def committed_files(directory: str | os.PathLike[str], topic: str, partition: int, fmt: str = "jsonl") -> list[Path]:
    """The data files of one FileSink partition, in offset order: every record in them is committed, and
    nothing else is under a data file's name (what a reader of the directory reads; files of a version-1
    manifest first)."""
    dest = PartitionDir(directory, TopicPartition(topic, partition), fmt, fsync=False)
    st = dest.state()
    return [*st.legacy, *(f.path for f in st.files)]


def sink_partitions(cfg: Mapping[str, Any]) -> list[TopicPartition]:
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


def read_offsets(cfg: Mapping[str, Any]) -> DestinationOffsets:
    """The committed position of every partition directory of the (parsed) FileSink config ``cfg`` (manifest
    and file names), and the newest generation there."""
    offsets: dict[TopicPartition, int] = {}
    generation = -1
    for tp in sink_partitions(cfg):
        st = PartitionDir(cfg["directory"], tp, cfg["format"], fsync=False).state()
        generation = max(generation, st.generation)
        if st.next_offset is not None:
            offsets[tp] = int(st.next_offset)
    return DestinationOffsets(offsets, generation, f"FileSink manifests and file names under {cfg['directory']}")


def alter_offsets(cfg: Mapping[str, Any], offsets: Mapping[TopicPartition, int | None], generation: int,
                  who: str) -> None:
    """Move partitions forward (the records before the new offset are never written), or back / reset
    (``None``) where no published file holds records at or past the new offset: files are never
    removed for you (that would delete data); the error names them. ``cfg``: the parsed FileSink config;
    ``who``: the connector, as messages name it."""
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
                dest.check_generation(st, generation, who)
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


__all__ = ["LOCK", "MANIFEST", "PartitionDir", "Published", "State", "alter_offsets", "committed_files",
           "partition_dir", "read_manifest", "read_offsets", "sink_partitions"]
