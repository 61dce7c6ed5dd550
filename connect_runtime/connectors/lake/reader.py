"""Reading the lake: which data files hold a committed range (what a Spark, DuckDB or pandas job reads).

- :func:`committed_files`: one topic partition's data files in offset order.
- :func:`files_for`: a committed range (``{topic: {partition: [(from, to), ...]}}``, the form
  ``connect_runtime.ranges.parse`` gives of a source run's ``ranges`` / ``interval_ranges``) to exactly the
  files whose ``[start, end)`` (name and footer) lie inside it, in offset order. Exact files, never an offset
  filter: the rows carry no offset column, and the sink publishes on the boundaries a reader asks for (a bounded
  run's last file ends at its ``until_offsets``, so a sink run per data interval cuts files at the interval's
  ends). A span that starts or ends inside a file, or offsets no complete commit group holds (not written yet,
  or a group a killed run left incomplete), is a :class:`LakeRangeError` naming the span and the files.

Footers of the candidate files only are read (no data), in parallel on object stores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from connect_runtime.api.errors import ConnectError
from connect_runtime.api.records import TopicPartition
from connect_runtime.connectors.lake._config import LakeConfig
from connect_runtime.connectors.lake.store import Footer, Lake


class LakeRangeError(ConnectError):
    """A committed range the lake's files do not hold exactly (the message names the span and the files)."""


@dataclass(frozen=True)
class LakeFile:
    """One data file of a resolved range: its full URL, what it covers and how many rows it holds."""

    url: str
    topic: str
    partition: int
    start: int
    end: int
    rows: int


def _lake(path: str, topics_dir: str, storage_options: Mapping[str, object] | None) -> Lake:
    return Lake(LakeConfig(path=path.rstrip("/"), topics_dir=topics_dir, storage_options=dict(storage_options or {}),
                           partitioner="default"))


def committed_files(path: str, topic: str, partition: int, *, topics_dir: str = "topics",
                    storage_options: dict[str, object] | None = None) -> list[str]:
    """The data files of one topic partition (every partitioner's directories) in offset order, as full URLs: what
    a reader of the lake reads (files of a group a killed run left incomplete are listed until the next ``open()``
    removes them; :func:`files_for` leaves them out; see docs/lake.md)."""

    lake = _lake(path, topics_dir, storage_options)
    files = lake.data_files(TopicPartition(topic, partition))
    return [lake.fs.unstrip_protocol(p) for p, _ in sorted(files.items(), key=lambda kv: (kv[1], kv[0]))]


def files_for(path: str, spans: Mapping[str, Mapping[Any, Sequence[Sequence[int]]]], *,
              topics_dir: str = "topics", storage_options: Mapping[str, object] | None = None) -> list[LakeFile]:
    """Exactly the data files holding ``spans`` (``{topic: {partition: [(from, to), ...]}}``), in topic, partition
    and offset order; every file of each commit group (one per encoded partition).

    :raises LakeRangeError: a span that does not start and end on file boundaries, or offsets no complete
        commit group holds; the message names the span and the files around it.
    """
    lake = _lake(path, topics_dir, storage_options)
    out: list[LakeFile] = []
    for topic in sorted(spans):
        for partition in sorted(spans[topic], key=int):
            todo = [(int(a), int(b)) for a, b in spans[topic][partition] if int(b) > int(a)]
            if todo:
                out += _partition_files(lake, TopicPartition(topic, int(partition)), sorted(todo))
    return out


def _partition_files(lake: Lake, tp: TopicPartition, spans: list[tuple[int, int]]) -> list[LakeFile]:
    by_start: dict[int, list[str]] = {}
    for p, start in lake.data_files(tp).items():
        by_start.setdefault(start, []).append(p)
    starts = sorted(by_start)
    wanted = {s for s in starts if any(a <= s < b for a, b in spans)}
    wanted |= {max((s for s in starts if s < a), default=-1) for a, _ in spans} - {-1}  # a span starting inside
    paths = [p for s in sorted(wanted) for p in sorted(by_start[s])]
    with ThreadPoolExecutor(max_workers=max(1, min(16 if lake.object_store else 4, len(paths)))) as pool:
        footers = dict(zip(paths, pool.map(lake.footer, paths), strict=True))
    groups = {s: [footers[p] for p in sorted(by_start[s])] for s in sorted(wanted)}
    where = f"{tp.topic}-{tp.partition}"
    out: list[LakeFile] = []
    for a, b in spans:
        pos = a
        while pos < b:
            group = groups.get(pos)
            if group is None:
                raise LakeRangeError(_not_held(lake, where, (a, b), pos, groups))
            first = group[0]
            if first.end <= first.start or any((f.start, f.end) != (first.start, first.end) for f in group):
                raise LakeRangeError(f"{where} [{a}, {b}): the files starting at offset {pos} cover different "
                                     f"ranges ({_names(group)}): written by two runs at once; see docs/lake.md")
            if len(group) < first.group_size:
                raise LakeRangeError(f"{where} [{a}, {b}): the commit group at offset {pos} has {len(group)} of its "
                                     f"{first.group_size} files ({_names(group)}): a run was killed while publishing "
                                     "it; the next sink run removes it and writes those records again")
            if first.end > b:
                raise LakeRangeError(f"{where} [{a}, {b}): the span ends inside {_names(group)}, which holds "
                                     f"[{first.start}, {first.end}): files are cut where the sink run that wrote "
                                     "them stopped (run the sink up to each interval's end: until_offsets)")
            out += [LakeFile(lake.fs.unstrip_protocol(f.path), tp.topic, tp.partition, f.start, f.end, f.rows)
                    for f in group]
            pos = first.end
    return out


def _not_held(lake: Lake, where: str, span: tuple[int, int], pos: int, groups: dict[int, list[Footer]]) -> str:
    a, b = span
    before = [g for s, g in groups.items() if s < pos and g[0].end > pos]
    if before:
        f = before[-1][0]
        return (f"{where} [{a}, {b}): the span starts inside {_names(before[-1])}, which holds [{f.start}, {f.end}): "
                "read the whole file's range, or cut files there (a sink run per interval: until_offsets)")
    nxt = min((s for s in groups if s > pos), default=None)
    missing = f"[{pos}, {min(b, nxt) if nxt is not None else b})"
    return (f"{where} [{a}, {b}): no file under {lake.where} holds offsets {missing}"
            + (f" (the next file starts at {nxt})" if nxt is not None else "")
            + ": the sink has not written them (yet), or they were moved away")


def _names(group: Sequence[Footer]) -> str:
    return ", ".join(f.path.rsplit("/", 1)[-1] for f in group)


__all__ = ["LakeFile", "LakeRangeError", "committed_files", "files_for"]
