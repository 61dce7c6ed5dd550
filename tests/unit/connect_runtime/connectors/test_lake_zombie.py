"""ParquetSink's zombie window under the field partitioner: two tasks of different generations on one topic
partition, one publishing while the other is between its listing and its files (the interleaving forced by a
lake whose ``publish`` runs the other task first). Whatever the order, the lake ends with every record of the
range in exactly one complete commit group, and the loser publishes nothing of its own range
(docs/lake.md, "Fencing and the window that remains")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pyarrow.parquet as pq
import pytest

from connect_runtime.api import ConnectError, ProducerFencedError, SinkRecord, TopicPartition
from connect_runtime.connectors.lake._config import LakeConfig
from connect_runtime.connectors.lake._partitioner import partitioner
from connect_runtime.connectors.lake._writer import PartitionWriter
from connect_runtime.connectors.lake.store import Lake, recover

TOPIC = "orders"
TP = TopicPartition(TOPIC, 0)


class HookedLake(Lake):
    """A lake that runs ``hook`` once, before or after its ``at``-th publish (1-based)."""

    hook: Callable[[], None] | None = None
    at = 1
    after = False
    published = 0

    def publish(self, path: str, data: bytes) -> None:
        self.published += 1
        due = self.hook is not None and self.published == self.at
        if due and not self.after:
            self._run_hook()
        super().publish(path, data)
        if due and self.after:
            self._run_hook()

    def _run_hook(self) -> None:
        hook, self.hook = self.hook, None
        assert hook is not None
        hook()


def cfg(root: str, flush: int) -> LakeConfig:
    return LakeConfig.parse({"name": "lake", "topics": TOPIC, "path": root, "flush.size": str(flush),
                             "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
                             "partition.field.name": "sku"})


def writer(root: str, generation: int, flush: int) -> PartitionWriter:
    c = cfg(root, flush)
    return PartitionWriter(HookedLake(c), TP, generation=generation, encode=partitioner(c), ts=None, reporter=None)


def records(skus: str) -> list[SinkRecord]:
    return [SinkRecord(topic=TOPIC, partition=0, offset=i, value={"id": i, "sku": s}) for i, s in enumerate(skus)]


def run(w: PartitionWriter, recs: list[SinkRecord]) -> None:
    """A whole task run over ``recs``: open, put, the closing commit."""
    nxt = w.claim()
    w.add([r for r in recs if nxt is None or r.offset >= nxt])
    w.commit(recs[-1].offset + 1, closing=True)


def lake_state(root: str) -> tuple[int | None, Counter[int], list[tuple[str, int, int, int]]]:
    """The committed position, how many times each record id is in a file, and the files as
    ``(directory, start, end, generation)``."""
    lake = Lake(cfg(root, 1))
    rec = recover(lake, TP)
    assert not rec.incomplete, f"incomplete groups left: {rec.incomplete}"
    ids: Counter[int] = Counter()
    files = []
    for path in sorted(lake.data_files(TP)):
        f = lake.footer(path)
        files.append((path.rsplit("/", 2)[-2], f.start, f.end, f.generation))
        with lake.fs.open(path, "rb") as fh:
            ids.update(pq.read_table(fh).column("id").to_pylist())
    return rec.next_offset, ids, files


def overtaken(root: str, recs: list[SinkRecord], *, generation: int, flush: int,
              other_generation: int) -> PartitionWriter:
    """A writer of ``generation`` holding ``recs`` from offset 0, whose first publish is preceded by another run's
    (``other_generation``, flush.size 1) publishing record 0 as [0, 1)."""
    mine, other = writer(root, generation, flush=flush), writer(root, other_generation, flush=1)
    assert mine.claim() is None and other.claim() is None
    other.add(recs[:1])
    mine.add(recs)
    mine.lake.hook = lambda: other.commit(1, closing=True)  # type: ignore[attr-defined]
    return mine


def test_a_newer_run_racing_a_zombie_from_the_same_offset_goes_on_after_the_zombies_file(root: str) -> None:
    """The newer run listed the partition, then the zombie published its group [0, 1) before the newer run's first
    file: the newer run's first file is the one holding the group's first row (sku=b, the zombie's name too), so
    its conditional create fails before it published anything (sorted by directory it would have published
    sku=a [0, 4) first, next to the zombie's [0, 1): a duplicate of record 0's range). It re-reads the committed
    position from the files, drops what it buffered and asks to go on from offset 1 (the task rewinds its
    consumer there); given the records again from there, it completes the partition."""
    recs = records("bac")
    newer = overtaken(root, recs, generation=2, flush=4, other_generation=1)
    assert newer.commit(3, closing=True) == 1
    assert lake_state(root) == (1, Counter({0: 1}), [("sku=b", 0, 1, 1)])
    assert newer.open is None and not newer.ready and newer.position == newer.committed == 1
    newer.add(recs)  # a redelivery before the rewind took effect: records below 1 are dropped
    assert newer.commit(3, closing=True) is None
    assert lake_state(root)[:2] == (3, Counter({0: 1, 1: 1, 2: 1}))


def test_an_older_run_overtaken_by_a_newer_one_is_fenced_at_once(root: str) -> None:
    """The newer run published [0, 1) over the name of the older run's next group: the older run is fenced
    (ProducerFencedError, never tried again), whatever the range."""
    older = overtaken(root, records("bac"), generation=1, flush=4, other_generation=2)
    with pytest.raises(ProducerFencedError, match="generation 2"):
        older.commit(3, closing=True)
    assert lake_state(root) == (1, Counter({0: 1}), [("sku=b", 0, 1, 2)])


def test_recovering_to_a_group_another_run_is_still_publishing_tries_the_commit_point_again(root: str) -> None:
    """The other run published the lead file of its group [0, 3) (sku=b) and not yet the others: going on from
    the files is not possible yet (their last complete group ends before it), so the commit point fails with a
    ConnectError naming the group (the runtime tries it again after its backoff), nothing published."""
    recs = records("bac")
    other, mine = writer(root, 1, flush=3), writer(root, 2, flush=1)
    assert other.claim() is None and mine.claim() is None
    other.add(recs)

    def stall() -> None:
        raise KeyboardInterrupt

    other.lake.hook, other.lake.at, other.lake.after = stall, 1, True  # type: ignore[attr-defined]
    with pytest.raises(KeyboardInterrupt):
        other.commit(3, closing=True)  # its lead file [0, 3) is published, the other two not
    mine.add(recs[:1])
    with pytest.raises(ConnectError, match=r"a commit group of 1 of 3 files at offset 0"):
        mine.commit(1, closing=True)
    assert not mine.ready and mine.open is None


def test_a_zombie_publishing_after_a_newer_run_is_fenced_and_publishes_nothing(root: str) -> None:
    """The zombie listed the partition; the newer run then published its group; the zombie's first file collides
    with the newer run's and names its generation."""
    recs = records("bacab")
    zombie, newer = writer(root, 1, flush=2), writer(root, 2, flush=5)
    assert zombie.claim() is None and newer.claim() is None
    zombie.add(recs)
    zombie.lake.hook = lambda: newer.commit(5, closing=True) if newer.add(recs) or True else None  # type: ignore[attr-defined]
    with pytest.raises(ProducerFencedError, match="generation 2"):
        zombie.commit(5, closing=True)
    assert lake_state(root) == (5, Counter({0: 1, 1: 1, 2: 1, 3: 1, 4: 1}),
                                [("sku=a", 0, 5, 2), ("sku=b", 0, 5, 2), ("sku=c", 0, 5, 2)])


def test_a_newer_run_completes_a_zombies_group_instead_of_removing_it(root: str) -> None:
    """The zombie published the first file of its group [0, 4) (sku=c) and stalled; a newer run with another
    flush.size opens: the group is incomplete, so the newer run's first group is exactly [0, 4) again (its
    sku=c file is the zombie's, kept; sku=a and sku=b are added), then [4, 6). The zombie wakes up and its next
    file collides with the newer run's. Removing the zombie's file instead would have let it publish sku=b
    [0, 4) next to the newer run's [0, 2) / [2, 4): record 3 twice."""
    recs = records("ccabca")
    zombie = writer(root, 1, flush=4)
    assert zombie.claim() is None
    zombie.add(recs[:4])
    zombie.lake.hook = lambda: run(writer(root, 2, flush=2), recs)  # type: ignore[attr-defined]
    zombie.lake.after = True  # type: ignore[attr-defined]
    with pytest.raises(ProducerFencedError, match="generation 2"):
        zombie.commit(4, closing=True)
    position, ids, files = lake_state(root)
    assert position == 6 and ids == Counter(range(6))
    assert files == [("sku=a", 0, 4, 2), ("sku=a", 4, 6, 2), ("sku=b", 0, 4, 2), ("sku=c", 0, 4, 1),
                     ("sku=c", 4, 6, 2)]


def test_an_incomplete_group_a_run_cannot_complete_is_removed(root: str) -> None:
    """A dead run's group [0, 4) lacks files; the next run is bounded before offset 4 (it was given less): it
    cannot write that range again, so it removes the dead run's files and publishes what it was given."""
    recs = records("ccab")
    dead = writer(root, 1, flush=4)
    dead.claim()
    dead.add(recs)

    def die() -> None:
        raise KeyboardInterrupt

    dead.lake.hook = die  # type: ignore[attr-defined]
    dead.lake.at, dead.lake.after = 1, True  # type: ignore[attr-defined]
    with pytest.raises(KeyboardInterrupt):
        dead.commit(4, closing=True)
    assert len(Lake(cfg(root, 1)).data_files(TP)) == 1
    rerun = writer(root, 2, flush=4)
    assert rerun.claim() == 0
    rerun.add(recs[:3])
    rerun.commit(3, closing=True)
    assert lake_state(root) == (3, Counter({0: 1, 1: 1, 2: 1}), [("sku=a", 0, 3, 2), ("sku=c", 0, 3, 2)])
