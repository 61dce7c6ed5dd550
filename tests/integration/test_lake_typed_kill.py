"""ParquetSink with typed records (a Connect schema per record, changing between records) SIGKILLed at random
instants and run again to the end: every record in exactly one file (no gap, no overlap), every file of one
schema, the one derived from its records' Connect schema. Real subprocesses; local files."""

from __future__ import annotations

import json
import os
import random
import signal
from pathlib import Path

import fsspec
import pyarrow.parquet as pq

from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.lake import committed_files
from connect_runtime.connectors.lake._typed import arrow_field
from connect_runtime.runtime.sink import run_sink
from tests.support import slow_iterations
from tests.support.sink_helpers import run_sink_killed_at_random
from tests.support.typed import ORDER, ORDER_V2, order_json

TOPIC = "typed"


def _value(i: int) -> dict[str, object]:
    v = order_json(i)
    return {**v, "coupon": f"c{i}"} if (i // 700) % 3 == 1 else v  # the schema changes every 700 records


def test_typed_parquet_sink_holds_each_record_once_after_sigkills(sqlite_url: str, tmp_path: Path) -> None:
    n = 40_000
    with open_backend(sqlite_url) as be:
        be.create_topics({TOPIC: 1})
        producer = be.producer()
        try:
            producer.send([ProducerRecord(TOPIC, 0, None, json.dumps(_value(i)).encode()) for i in range(n)])
            producer.flush(60)
        finally:
            producer.close()
    root = f"file://{tmp_path / 'lake'}"
    cfg = {"name": "typed-lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
           "path": root, "flush.size": "500", "consumer.max.poll.records": "200", "transforms": "typed",
           "transforms.typed.type": "tests.support.typed.ToStruct", "transforms.typed.schema": "auto"}
    rng = random.Random(int(os.environ.get("PYCONNECT_SEED", "7")))
    killed = mid_run = 0
    for _ in range(slow_iterations(4, 10)):
        was_killed = run_sink_killed_at_random(cfg, sqlite_url, rng, 0.8, 2.5) == -signal.SIGKILL
        killed += was_killed
        rows = sum(pq.read_metadata(u.removeprefix("file://")).num_rows for u in committed_files(root, TOPIC, 0))
        mid_run += was_killed and 0 < rows < n
    assert killed >= 1 and mid_run >= 1, "no kill landed mid-run: make the topic bigger"
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
