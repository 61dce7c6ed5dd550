"""Source throughput on Kafka against the hardware (issue 33.6), in one run, on Apache Kafka 4.4.0 by default.

Two sources, each beside a bare confluent-kafka transactional producer loop moving the same bytes with the same
commit interval (``--batch``, 10,000 by default: one transaction per poll of ``--batch`` records for ours,
``transaction.boundary=poll``, offsets in the same transaction):

- **directory**: ``--records`` compact JSON lines (``{"id":0,"customer":"c-17","amount":12.34,"ts":...}``) in
  one ``.jsonl`` file. Bare loop: reads the file's lines and produces each line's bytes. Ours: ``run_source``
  with DirectorySource, ``format=text`` and StringConverter (each line's text as its value, nothing parsed, the
  job of Kafka Connect's FileStreamSource with StringConverter; ``bench_vs_kafka_connect.py``'s set-up).
- **datagen**: DataGenSource's values. Bare loop: builds the same dicts (``generate_value``) and produces
  their compact JSON. Ours: ``run_source`` with DataGenSource and its default converter (JsonConverter,
  ``schemas.enable=false``).

Both sides are timed the same way, in this process: **from launch** (topic creation, producer creation and
``init_transactions`` included, as every bounded run pays them, to the last commit) and **after the first
record** (from the moment the first record is handed to the producer, ours: the first ``send`` of the task
thread, to the last commit). Rounds alternate which side goes first. Prints each round, the medians of
``--repeat`` rounds and, for each source, the ratios ours/bare of the medians and the median of the rounds' own
ratios against the targets (after the first record >= 0.5x, from launch >= 0.6x). ``--profile`` prints a
cProfile of the source task thread of the first round of each source.

The broker: an Apache Kafka 4.4.0 node this script starts on free loopback ports from the jars
``scripts/fetch_kafka.sh`` fetched (the tests' broker with ``kafka-server-start.sh``'s JVM options), shared by
every round (each round writes new topics under new names); ``--bootstrap HOST:PORT`` a running broker. Before
the rounds, an untimed warm-up of each kind (``--warm-up`` records): the broker's first large transactional
writes are slower (its JIT, its heap and log segments).

    .venv/bin/python bench/bench_source_kafka.py [--records 1000000] [--repeat 3] [--sources directory,datagen]
        [--bootstrap H:P] [--profile]

Measured on 2026-11-29 (1M records, medians of 3 rounds, 2 cores shared with other work): DirectorySource 316k
rec/s from launch and 357k after the first record beside the bare loop's 389k / 450k: **0.81x / 0.79x** (rounds'
own ratios 0.76x / 0.82x); DataGenSource 274k / 303k beside 220k / 250k: 1.24x / 1.21x (the bare loop encodes each
dict with ``json``, ours a batch at a time). Both above the targets. Before, the same day against the older, slower
bare loop (iterating the file): 0.70x after the first record, and 1.04x with ``gc.disable()`` for the whole
process: about a third of the task thread went to the cyclic garbage collector walking a poll's live records (py-
spy put its passes on ``zip(*records)`` and on the records' allocation in ``_emit_text``); the 0.35x of 2026-11-28
was measured on a machine loaded by other work; the collector is now paused from ``poll()`` to the batch's send
(``SourceWorkerTask.poll_and_dispatch``), as it already was for a sink's poll and put. A directory source's first
empty poll also no longer sleeps 0.1 s before a bounded run can end. The bare loop reads the file a MiB at a time
with one ``split`` per chunk (iterating the file line by line was 25% slower, a weaker baseline).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _kafka import apache_kafka
from _profile import profiled

AFTER_FIRST_TARGET = 0.5
"""ours/bare after the first record (issue 33.6)."""
LAUNCH_TARGET = 0.6
"""ours/bare from launch (issue 33.6)."""


@dataclass
class Run:
    records: int
    launch_s: float
    first_s: float  # launch to the first record handed to the producer

    @property
    def from_launch(self) -> float:
        return self.records / self.launch_s

    @property
    def after_first(self) -> float:
        return (self.records - 1) / (self.launch_s - self.first_s)


def write_lines(path: Path, records: int) -> None:
    """The input of the directory case: ``bench_vs_kafka_connect.py``'s lines."""
    with path.open("w") as f:
        for start in range(0, records, 100_000):
            f.write("".join(f'{{"id":{i},"customer":"c-{i % 100}","amount":{(i % 100_000) / 100},'
                            f'"ts":{1_700_000_000_000 + i * 1000}}}\n' for i in range(start, min(records, start + 100_000))))


def _lines_of(f: BinaryIO) -> Iterator[bytes]:
    """The file's lines without their newline, split a MiB at a time (the fastest plain way: one ``split`` per
    chunk, where iterating the file is a Python step and a ``readline`` per line)."""
    rest = b""
    while chunk := f.read(1 << 20):
        parts = (rest + chunk).split(b"\n")
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def bare_loop(bootstrap: str, source: str, records: int, per_txn: int, tag: str, lines: Path) -> Run:
    """A plain confluent-kafka transactional producer moving the same bytes, one commit per ``per_txn``."""
    import json

    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    from connect_runtime.connectors.datagen import generate_value

    topic = f"bench-bare-{source}-{tag}"
    t0 = time.perf_counter()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(10)
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": topic,
                     "enable.idempotence": True, "acks": "all"})
    p.init_transactions(30)
    produce = p.produce
    n = 0
    first = 0.0
    if source == "directory":
        with lines.open("rb") as f:
            it = _lines_of(f)
            while n < records:
                p.begin_transaction()
                chunk = 0
                for line in itertools.islice(it, per_txn):
                    if not first:
                        first = time.perf_counter()
                    produce(topic, line)
                    chunk += 1
                p.commit_transaction(30)
                n += chunk
                if chunk < per_txn:
                    break
    else:
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        while n < records:
            p.begin_transaction()
            end = min(records, n + per_txn)
            if not first:
                first = time.perf_counter()
            for i in range(n, end):
                produce(topic, dumps(generate_value(0, i)).encode())
            p.commit_transaction(30)
            n = end
    done = time.perf_counter()
    if n != records:
        raise SystemExit(f"the bare loop moved {n} records, expected {records}")
    return Run(records, done - t0, first - t0)


def ours(bootstrap: str, source: str, records: int, batch: int, tag: str, lines_dir: Path,
         profile: bool = False) -> tuple[Run, dict[str, Any]]:
    from connect_runtime.runtime.source import run_source
    from connect_runtime.runtime.source import task as source_module

    name = f"bench-{source}-{tag}"
    config: dict[str, Any] = {"name": name, "topic": name, "batch.size": batch, "tasks.max": 1,
                              "transaction.boundary": "poll",
                              "poll.idle.timeout.ms": 0}  # end once the input is exhausted (no idle wait)
    if source == "directory":
        config.update({"connector.class": "connect_runtime.connectors.files.DirectorySource",
                       "directory": str(lines_dir), "pattern": "*.jsonl", "format": "text", "file.final.ms": 0,
                       "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                       "value.converter": "org.apache.kafka.connect.storage.StringConverter"})
    else:
        config.update({"connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                       "max.records": records})
    cls = source_module.SourceWorkerTask
    original = cls.send
    first: list[float] = []

    def send(self: Any, recs: Any) -> None:  # the first record handed to the producer
        if not first:
            first.append(time.perf_counter())
        original(self, recs)

    cls.send = send  # type: ignore[method-assign]
    try:
        with profiled(cls, "run", 25, enabled=profile):
            started = time.perf_counter()
            result = run_source(config, f"kafka://{bootstrap}", exactly_once=True)
            seconds = time.perf_counter() - started
    finally:
        cls.send = original  # type: ignore[method-assign]
    if result.records != records:
        raise SystemExit(f"run_source wrote {result.records} records, expected {records}")
    return Run(records, seconds, first[0] - started), result.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000, help="records per transaction, both sides")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each source; medians are reported")
    parser.add_argument("--sources", default="directory,datagen", help="comma-separated: directory, datagen")
    parser.add_argument("--bootstrap", help="use this running broker (HOST:PORT) instead of starting one")
    parser.add_argument("--warm-up", type=int, default=300_000,
                        help="records of the untimed warm-up of each kind on the shared broker")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile of the source task thread of the first round of each source")
    args = parser.parse_args()
    sources = [s for s in args.sources.split(",") if s]
    unknown = set(sources) - {"directory", "datagen"}
    if unknown:
        parser.error(f"--sources: unknown {sorted(unknown)}; expected directory and/or datagen")

    with contextlib.ExitStack() as session:
        tmp = Path(session.enter_context(tempfile.TemporaryDirectory()))
        if args.bootstrap:
            bootstrap, broker_name = args.bootstrap, f"the broker at {args.bootstrap}"
        else:
            bootstrap, broker_name = session.enter_context(apache_kafka()), "Apache Kafka 4.4.0"
        lines_dir = tmp / "lines"
        lines_dir.mkdir()
        write_lines(lines_dir / "lines.jsonl", args.records)
        warm_dir = tmp / "warm"
        warm_dir.mkdir()
        warm = min(args.records, args.warm_up)
        write_lines(warm_dir / "lines.jsonl", warm)
        run_id = uuid.uuid4().hex[:6]
        for source in sources:  # untimed: the broker's first transactions and its JIT-compiled paths
            bare_loop(bootstrap, source, warm, args.batch, f"{run_id}-warm", warm_dir / "lines.jsonl")
            ours(bootstrap, source, warm, args.batch, f"{run_id}-warm", warm_dir)
        runs: dict[str, tuple[list[Run], list[Run]]] = {s: ([], []) for s in sources}
        for round_ in range(args.repeat):
            for source in sources:
                tag = f"{run_id}-{round_}"
                profile = args.profile and round_ == 0
                if round_ % 2 == 0:
                    bare = bare_loop(bootstrap, source, args.records, args.batch, tag, lines_dir / "lines.jsonl")
                    mine, result = ours(bootstrap, source, args.records, args.batch, tag, lines_dir, profile)
                else:
                    mine, result = ours(bootstrap, source, args.records, args.batch, tag, lines_dir, profile)
                    bare = bare_loop(bootstrap, source, args.records, args.batch, tag, lines_dir / "lines.jsonl")
                runs[source][0].append(bare)
                runs[source][1].append(mine)
                print(f"round {round_ + 1} {source:9}: bare {bare.from_launch:>9,.0f} rec/s from launch, "
                      f"{bare.after_first:>9,.0f} after the first record; ours {mine.from_launch:>9,.0f} / "
                      f"{mine.after_first:>9,.0f} ({result['transactions']} transactions): "
                      f"{mine.from_launch / bare.from_launch:.2f}x / {mine.after_first / bare.after_first:.2f}x",
                      flush=True)
    print(f"broker: {broker_name}; {args.records:,} records, {args.batch:,} per transaction; medians of "
          f"{args.repeat} rounds")

    def verdict(ratio: float, target: float) -> str:
        return f"{ratio:.2f}x {'OK' if ratio >= target else 'BELOW TARGET'}"

    for source, (bares, mine_all) in runs.items():
        b_launch = statistics.median(r.from_launch for r in bares)
        b_after = statistics.median(r.after_first for r in bares)
        o_launch = statistics.median(r.from_launch for r in mine_all)
        o_after = statistics.median(r.after_first for r in mine_all)
        p_launch = statistics.median(o.from_launch / b.from_launch for o, b in zip(mine_all, bares, strict=True))
        p_after = statistics.median(o.after_first / b.after_first for o, b in zip(mine_all, bares, strict=True))
        print(f"{source}: bare loop {b_launch:,.0f} rec/s from launch, {b_after:,.0f} after the first record; "
              f"ours {o_launch:,.0f} / {o_after:,.0f}")
        print(f"  ratio ours/bare from launch (target >= {LAUNCH_TARGET}x): medians {verdict(o_launch / b_launch, LAUNCH_TARGET)}, "
              f"rounds' own {verdict(p_launch, LAUNCH_TARGET)}")
        print(f"  ratio ours/bare after the first record (target >= {AFTER_FIRST_TARGET}x): medians "
              f"{verdict(o_after / b_after, AFTER_FIRST_TARGET)}, rounds' own {verdict(p_after, AFTER_FIRST_TARGET)}")


if __name__ == "__main__":
    main()
