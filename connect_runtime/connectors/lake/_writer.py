"""ParquetSink's writer of one topic partition: records are converted into Arrow tables as they arrive (bad input
fails at ``put``, naming the record), cut into commit groups by ``flush.size`` and ``rotate.interval.ms``, and
published at commit points, fenced by the generations in the files' footers (see
:mod:`connect_runtime.connectors.lake.store`)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from connect_runtime.api.data import Schema
from connect_runtime.api.errors import ConnectError, DataError, ProducerFencedError
from connect_runtime.api.records import SinkRecord, TopicPartition
from connect_runtime.api.sink import ErrantRecordReporter
from connect_runtime.connectors.lake._partitioner import default_partition
from connect_runtime.connectors.lake._rows import Columns
from connect_runtime.connectors.lake.store import (
    FileExists,
    Footer,
    Lake,
    Recovered,
    encode_file,
    file_name,
    recover,
)

log = logging.getLogger(__name__)


class _Overtaken(ConnectError):
    """Another run of the connector (not newer) published a file over the group about to be published (a signal
    inside the writer, never raised out of it; a ConnectError so that :func:`io_errors` lets it through)."""

    def __init__(self, footer: Footer) -> None:
        super().__init__(footer.path)
        self.footer = footer


@dataclass
class Group:
    """One commit group: the records of ``[start, end)`` by encoded partition."""

    start: int
    end: int = 0
    tables: dict[str, list[pa.Table]] = field(default_factory=dict)
    records: int = 0
    first_ts: int | None = None
    opened_at: float = field(default_factory=time.monotonic)
    schema: Schema | None = None  # the value schema of its records (None: schemaless)


@contextlib.contextmanager
def io_errors(lake: Lake, doing: str) -> Iterator[None]:
    """A storage failure as one ConnectError naming the lake (never its credentials)."""
    try:
        yield
    except (ConnectError, DataError):
        raise
    except Exception as exc:  # fsspec backends raise their own (botocore, aiohttp): all named, none leaked
        raise ConnectError(f"{lake.failure(doing, exc)}; nothing of the commit point in progress is published "
                           "and its records come again") from None


class PartitionWriter:
    """One topic partition of one task. ``encode``: the partitioner (``None``: the default one); ``ts``: the
    timestamp extractor when ``rotate.interval.ms`` is on."""

    def __init__(self, lake: Lake, tp: TopicPartition, *, generation: int,
                 encode: Callable[[SinkRecord], str] | None, ts: Callable[[SinkRecord], int] | None,
                 reporter: ErrantRecordReporter | None) -> None:
        self.lake, self.tp, self.generation = lake, tp, generation
        self.cfg = lake.cfg
        self.encode, self.ts, self.reporter = encode, ts, reporter
        self.columns = Columns(self.cfg.schema)
        self.known: set[str] = set()
        self.committed: int | None = None
        self.position: int | None = None  # next offset after the last record taken
        self.open: Group | None = None
        self.ready: list[Group] = []
        self.unfinished: tuple[int, int, list[Footer]] | None = None
        """A dead run's incomplete group at the committed position: this run's first group is cut at its end."""
        self.recovered: int | None = None
        """Where the last :meth:`go_on_after` went on from (``None``: since then this run published a group)."""

    def _fenced(self, gen: int, path: str) -> ProducerFencedError:
        return ProducerFencedError(
            f"ParquetSink {self.cfg.name!r}: generation {gen} of this connector wrote {path}; this run is generation "
            f"{self.generation} (older: a zombie or an overlapping run that started earlier), so it publishes nothing")

    def claim(self) -> int | None:
        """``open()``: remove what killed runs left, find the committed position, refuse if a newer generation
        wrote the partition. Returns the offset to rewind to."""
        with io_errors(self.lake, f"recovering {self.tp.topic}-{self.tp.partition} from"):
            self.lake.remove_temporary(self.tp)
            rec = recover(self.lake, self.tp)
            if rec.generation > self.generation:
                raise self._fenced(rec.generation, f"{self.tp.topic}-{self.tp.partition} under {self.lake.where}")
            if not self._take_unfinished(rec):
                self._remove(rec.incomplete)
                rec.known.difference_update(f.path for f in rec.incomplete)
        self._adopt(rec)
        return rec.next_offset

    def _take_unfinished(self, rec: Recovered) -> bool:
        """The one incomplete group at the committed position, if any, is completed by this run (never removed:
        its writer may still be publishing it): ``rec.next_offset`` moves to its start."""
        unfinished = rec.unfinished
        if unfinished is None:
            return False
        self.unfinished = (*unfinished, rec.incomplete)
        rec.next_offset = unfinished[0]
        log.info("ParquetSink %r: completing the commit group [%d, %d) of %s-%d (%d of its %d files exist: "
                 "a run died or is still publishing it)", self.cfg.name, *unfinished, self.tp.topic,
                 self.tp.partition, len(rec.incomplete), rec.incomplete[0].group_size)
        return True

    def _adopt(self, rec: Recovered) -> None:
        if rec.schema is not None:
            self.columns.adopt(rec.schema, f"the files of {self.tp.topic}-{self.tp.partition}")
        self.known = rec.known
        self.committed = self.position = rec.next_offset

    def go_on_after(self, other: Footer) -> int:
        """Another run of the connector, not newer than this one, published ``other`` over this run's next
        group: re-read the committed position from the files (as :meth:`claim`, removing nothing: the other
        run is alive) and go on from there, everything buffered dropped (its records come again from the
        returned offset, which the task rewinds its consumer to: Kafka Connect's S3 sink drops its writer and
        calls ``context.offset`` the same way). A newer generation among the files fences this run at once.
        Files above the committed position that do not make a complete group yet (the other run is between a
        group's files, under a partitioner with several files per group) or a position that did not move since
        the last recovery make a ConnectError: the commit point is tried again, after the task's backoff."""
        where = f"{self.tp.topic}-{self.tp.partition}"
        with io_errors(self.lake, f"recovering {where} from"):
            self._check_new(None, None)
            rec = recover(self.lake, self.tp)
            if rec.generation > self.generation:
                raise self._fenced(rec.generation, f"{where} under {self.lake.where}")
        position = rec.next_offset
        if rec.incomplete or position is None or position == self.recovered \
                or (self.committed is not None and position < self.committed):
            why = (f"a commit group of {len(rec.incomplete)} of {rec.incomplete[0].group_size} files at offset "
                   f"{rec.incomplete[0].start}" if rec.incomplete else f"the files ending at offset {position}")
            raise ConnectError(
                f"ParquetSink {self.cfg.name!r}: {other.path} (generation {other.generation}, [{other.start}, "
                f"{other.end})) took the name of this run's next file; {where} under {self.lake.where} now has "
                f"{why} (this run published up to {self.committed}): another run is still publishing there, "
                "so this run publishes nothing at this commit point")
        log.info("ParquetSink %r: %s holds [%d, %d) (generation %d, another run of this connector; this run is "
                 "generation %d): going on from offset %d of %s, where the files now end", self.cfg.name,
                 other.path, other.start, other.end, other.generation, self.generation, position, where)
        self.open, self.ready, self.unfinished = None, [], None
        self._adopt(rec)
        self.recovered = position
        return position

    # -- put --------------------------------------------------------------------------------------------

    def add(self, records: list[SinkRecord]) -> bool:
        """Take records (in offset order); returns whether a group is ready to publish."""
        if self.position is not None and records[0].offset < self.position:
            records = [r for r in records if r.offset >= self.position]  # redelivered before a rewind took effect
        flush_size, interval = self.cfg.flush_size, self.cfg.rotate_interval_ms
        while records:
            g = self.open
            if g is None:
                g = self.open = Group(self.position if self.position is not None else records[0].offset)
            take = self._same_schema(g, records, min(len(records), flush_size - g.records))
            if interval >= 0 and self.ts is not None and self.cfg.timestamp_extractor != "Wallclock":
                take = self._before_rotation(g, records, take, interval)
            elif interval >= 0 and g.records and self.cfg.timestamp_extractor == "Wallclock" \
                    and (time.monotonic() - g.opened_at) * 1000 >= interval:
                take = 0  # Wallclock: records arriving this long after the group's first go to the next group
            finish = self._finish_at(g)
            if finish is not None:  # completing a dead run's group: exactly its range, whatever the sizes
                take = sum(1 for r in records if r.offset < finish)
            if take == 0:
                self._cut(finish if finish is not None else
                          self.position if self.position is not None else records[0].offset)
                continue
            chunk, records = records[:take], records[take:]
            self._convert(g, chunk)
            g.records += len(chunk)
            self.position = chunk[-1].offset + 1
            if (g.records >= flush_size) if finish is None else (self.position >= finish):
                self._cut(self.position)
        return bool(self.ready)

    @staticmethod
    def _same_schema(g: Group, records: list[SinkRecord], take: int) -> int:
        """How many of the first ``take`` records share the group's value schema: a schema change rotates to a
        new file (Kafka Connect S3's ``schema.compatibility=NONE``), so each file has one schema."""
        if not g.records:
            g.schema = records[0].value_schema
        schema = g.schema
        for i in range(take):
            s = records[i].value_schema
            if s is not schema and s != schema:
                return i
        return take

    def _before_rotation(self, g: Group, records: list[SinkRecord], take: int, interval: int) -> int:
        assert self.ts is not None
        for i in range(take):
            t = self.ts(records[i])
            if g.first_ts is None:
                g.first_ts = t
            elif t - g.first_ts >= interval:
                return i
        return take

    def _convert(self, g: Group, chunk: list[SinkRecord]) -> None:
        if self.encode is None:
            parts = {default_partition(self.tp.partition): chunk}
        else:
            parts = {}
            for r in chunk:
                try:
                    key = self.encode(r)
                except DataError as err:
                    if self.reporter is None:
                        raise
                    self.reporter.report(r, err)
                    continue
                parts.setdefault(key, []).append(r)
        for key, recs in parts.items():
            table = self.columns.table(recs, self.reporter)
            if table is not None and table.num_rows:
                g.tables.setdefault(key, []).append(table)

    def _finish_at(self, g: Group) -> int | None:
        """The end ``g`` must have: the unfinished group's when ``g`` completes it."""
        return self.unfinished[1] if self.unfinished is not None and g.start == self.unfinished[0] else None

    def _cut(self, end: int) -> None:
        g, self.open = self.open, None
        if g is not None:
            g.end = end
            self.position = max(self.position or end, end)
            self.ready.append(g)

    def _remove(self, footers: list[Footer]) -> None:
        for f in footers:
            log.info("ParquetSink %r: removing %s (its commit group [%d, %d) is incomplete: a run died while "
                     "publishing it; its records come again)", self.cfg.name, f.path, f.start, f.end)
            self.lake.remove(f.path)

    # -- commit points ----------------------------------------------------------------------------------

    def commit(self, delivered: int | None, closing: bool) -> int | None:
        """Publish the ready groups; when ``closing`` (the run's end, a revocation) or a wall-clock rotation is
        due, the open group too, extended over records delivered but not written (filtered, errant). Returns
        the offset the task must rewind its consumer to when another run of the connector had published over
        the next group (:meth:`go_on_after`), else ``None``."""
        g = self.open
        wallclock_due = (g is not None and self.cfg.timestamp_extractor == "Wallclock"
                         and self.cfg.rotate_interval_ms >= 0
                         and (time.monotonic() - g.opened_at) * 1000 >= self.cfg.rotate_interval_ms)
        if closing or wallclock_due:
            end = self.position
            if delivered is not None and (end is None or delivered > end):
                end = delivered
            last = self.ready[-1].end if self.ready else self.committed  # the end of what is cut already
            if g is None and end is not None and last is not None and end > last:
                g = self.open = Group(last)  # only skipped records since the last file
            finish = None if g is None else self._finish_at(g)
            if g is not None and end is not None and finish is not None and (closing or end >= finish):
                if end < finish:  # the run ends inside the dead run's group: that group cannot be completed
                    assert self.unfinished is not None
                    with io_errors(self.lake, f"recovering {self.tp.topic}-{self.tp.partition} from"):
                        self._remove(self.unfinished[2])
                    self.known.difference_update(f.path for f in self.unfinished[2])
                    self.unfinished = None
                else:
                    self._cut(finish)
                    g = self.open = Group(finish) if end > finish else None
            if g is not None and end is not None and self._finish_at(g) is None:
                self._cut(end)
                self.position = end
        try:
            while self.ready:
                self._publish(self.ready[0])
                self.ready.pop(0)
                self.recovered = None
        except _Overtaken as taken:
            try:
                return self.go_on_after(taken.footer)
            except BaseException:  # an interrupt too: as below
                self.discard()
                raise
        except BaseException:  # an interrupt too: forget what was not published; the records come again
            self.discard()
            raise
        return None

    def _check_new(self, s: int | None, e: int | None) -> None:
        """Read the footers of the partition's files that appeared since this run last looked (another run of
        the connector published them): a newer generation's fences this run; one overlapping ``[s, e)`` with
        another range overtook it (:class:`_Overtaken`, before anything of the group is published)."""
        for path in sorted(set(self.lake.data_files(self.tp)) - self.known):
            f = self.lake.footer(path)
            if f.generation > self.generation:
                raise self._fenced(f.generation, path)
            if s is not None and e is not None and f.start < e and f.end > s and (f.start, f.end) != (s, e):
                raise _Overtaken(f)
            self.known.add(path)

    def _publish(self, g: Group) -> None:
        s, e, tp = g.start, g.end, self.tp
        # in the order rows arrived: the first file published holds the group's first row, the same name for every
        # run starting at ``s`` with the same records, so of two runs racing from ``s`` the conditional create lets
        # one publish and the other stop before publishing anything (docs/lake.md, "Fencing")
        tables = {k: pa.concat_tables(v, promote_options="default") for k, v in g.tables.items()}
        if not tables:  # every record of the range was skipped: an empty file keeps the range accounted for
            tables = {default_partition(tp.partition): pa.table({})}
        with io_errors(self.lake, f"publishing {tp.topic}-{tp.partition} [{s}, {e}) to"):
            self._check_new(s, e)
            if self.unfinished is not None and self.unfinished[0] == s:
                left = [f for f in self.unfinished[2] if f.group_size != len(tables) or f.path not in
                        {f"{self.lake.dir_of(tp, k)}/{file_name(tp, s)}" for k in tables}]
                if left:  # another partitioning of the same range (Wallclock, a changed config): start it afresh
                    self._remove(self.unfinished[2])
                    self.known.difference_update(f.path for f in self.unfinished[2])
                self.unfinished = None
            for i, (key, table) in enumerate(tables.items()):
                path = f"{self.lake.dir_of(tp, key)}/{file_name(tp, s)}"
                data = encode_file(table, start=s, end=e, generation=self.generation, connector=self.cfg.name,
                                   group_size=len(tables), codec=self.cfg.codec)
                try:
                    self.lake.publish(path, data)
                except FileExists:
                    f = self.lake.footer(path)
                    if f.generation > self.generation:
                        raise self._fenced(f.generation, path) from None
                    if (f.start, f.end) != (s, e) and i == 0:  # the lead file: nothing of the group published
                        raise _Overtaken(f) from None
                    if (f.start, f.end) != (s, e):
                        raise ConnectError(
                            f"ParquetSink {self.cfg.name!r}: {path} exists with [{f.start}, {f.end}) (generation "
                            f"{f.generation}), not [{s}, {e}); this run publishes nothing") from None
                    log.info("ParquetSink %r: %s already holds [%d, %d) (generation %d): kept", self.cfg.name, path,
                             s, e, f.generation)
                self.known.add(path)
        self.committed = e

    def discard(self) -> None:
        """Forget everything not published (the records come again from the committed position)."""
        self.open, self.ready = None, []
        self.position = self.committed


__all__ = ["Group", "PartitionWriter", "io_errors"]
