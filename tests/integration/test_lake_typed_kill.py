"""ParquetSink with typed records (a Connect schema per record, changing between records) SIGKILLed at a random
point of their work (on observed progress) and run again to the end: every record in exactly one file (no gap, no overlap), every file of one
schema, the one derived from its records' Connect schema. Real subprocesses; local files."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import fsspec
import pyarrow.parquet as pq

from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.lake import ParquetSink, committed_files
from connect_runtime.connectors.lake._typed import arrow_field
from connect_runtime.runtime.sink import run_sink
from tests.support import slow_iterations
from tests.support.kills import kill_loop
from tests.support.sink_helpers import run_sink_killed_on_progress
from tests.support.typed import ORDER, ORDER_V2, order_json

TOPIC = "typed"


def _value(i: int) -> dict[str, object]:
    v = order_json(i)
    return {**v, "coupon": f"c{i}"} if (i // 700) % 3 == 1 else v  # the schema changes every 700 records


def fill(url: str, start: int, n: int) -> None:
    with open_backend(url) as be:
        be.create_topics({TOPIC: 1})
        producer = be.producer()
        try:
            producer.send([ProducerRecord(TOPIC, 0, None, json.dumps(_value(i)).encode())
                           for i in range(start, start + n)])
            producer.flush(60)
        finally:
            producer.close()


def test_typed_parquet_sink_holds_each_record_once_after_sigkills(sqlite_url: str, tmp_path: Path) -> None:
    total = [40_000]
    fill(sqlite_url, 0, total[0])
    root = f"file://{tmp_path / 'lake'}"
    cfg = {"name": "typed-lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
           "path": root, "flush.size": "500", "consumer.max.poll.records": "200", "transforms": "typed",
           "transforms.typed.type": "tests.support.typed.ToStruct", "transforms.typed.schema": "auto"}
    rng = random.Random(int(os.environ.get("PYCONNECT_SEED", "7")))

    def committed() -> int:  # the records the lake holds (file names and the last group's footers)
        return sum(ParquetSink().read_offsets(cfg).offsets.values())

    def grow() -> None:  # a run ended before its kill: half as many records more
        more = total[0] // 2
        fill(sqlite_url, total[0], more)
        total[0] += more

    # each kill lands mid-run, at a random point of the run's work (tests/support/kills.py)
    kill_loop(lambda: run_sink_killed_on_progress(cfg, sqlite_url, rng, committed, total[0]), grow,
              kills=slow_iterations(4, 10), what="a typed ParquetSink run")
    n = total[0]
    run_sink(cfg, sqlite_url)
    ids: list[int] = []
    want = {False: [arrow_field(f.name, f.schema) for f in ORDER.fields],
            True: [arrow_field(f.name, f.schema) for f in ORDER_V2.fields]}
    for url in committed_files(root, TOPIC, 0):
        with fsspec.open(url, "rb") as fh:
            table = pq.read_table(fh)
        got = list(table.schema.remove_metadata())
        assert got == want["coupon" in table.schema.names], url
        file_ids = table.column("id").to_pylist()
        assert len({"coupon" in _value(i) for i in file_ids}) == 1, f"{url} mixes schemas"
        ids.extend(file_ids)
    assert ids == list(range(n)), "a gap or an overlap"
    fs, path = fsspec.core.url_to_fs(root)
    assert all(p.endswith(".parquet") and "/." not in p for p in fs.find(path))  # nothing but data files
