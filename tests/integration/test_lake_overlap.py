"""Overlapping runs of ONE ParquetSink connector on one lake, as a backfill or a manual run beside a scheduled one
starts them (outside the operators' one-at-a-time rule): four ``run_sink`` processes with targets a quarter, half,
three quarters and all of each partition, started 0.02 to 0.2 s apart, on local files and on S3 (moto). Each run
goes on or stops at once (docs/lake.md, "Overlapping runs"): a run whose next name another run took re-reads the
committed position from the files and goes on from there, or is fenced by a newer generation. After every round:

- the lake is exact: each offset of a partition in exactly one file, the files tile ``[0, position)``, and the
  rows are the partition's records in order;
- no run tried a commit point again because of a taken name (the runner counts the runtime's ``pre_commit
  failed`` lines that name one), and every run ended before a generous bound (180 s; the runs take seconds);
- whatever a run reported done is in the lake, and a later run to the end tiles every partition exactly.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from typing import Any

import fsspec
import pyarrow.parquet as pq
import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.backends import ProducerRecord, open_backend
from connect_runtime.connectors.lake import committed_files
from connect_runtime.connectors.lake._config import LakeConfig
from connect_runtime.connectors.lake.store import Lake, recover
from tests.support import PYTHON, REPO, slow_iterations
from tests.support.moto_server import S3Lake

TOPIC = "orders"
PARTS = 2
PER_PART = 20_000
RUN_BOUND_S = 180.0
"""How long one round's runs may take in all before the test fails (they take seconds; a run that tries a
taken name again waits up to ``errors.retry.timeout``)."""

RUNNER = """
import json, logging, sys, time
from connect_runtime import run_sink
from connect_runtime.api import ConnectError, ProducerFencedError

class Retries(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []
        self.went_on = 0
    def emit(self, record):
        msg = record.getMessage()
        if "pre_commit failed" in msg or "pre_commit raised" in msg:
            self.lines.append(msg[:400])
        self.went_on += "going on from offset" in msg

retries = Retries()
logging.getLogger("connect_runtime").addHandler(retries)
logging.getLogger("connect_runtime").setLevel(logging.INFO)
config, url, target = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
until = {config["topics"]: {str(p): target for p in range(int(sys.argv[4]))}}
began = time.monotonic()
try:
    r = run_sink(config, url, until_offsets=until)
    out = {"ok": True, "records": r.records}
except ConnectError as exc:
    fenced = isinstance(exc, ProducerFencedError) or isinstance(exc.__cause__, ProducerFencedError)
    out = {"ok": False, "fenced": fenced, "error": str(exc)[:600]}
out.update(seconds=round(time.monotonic() - began, 2), retries=retries.lines, went_on=retries.went_on)
print(json.dumps(out))
"""

TAKEN = ("exists with", "took the name", "appeared since", "overlaps")
"""What a ``pre_commit`` failure on a name another run took says (before and after issue 32)."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('lake-overlap') / 'store.db'}"
    with open_backend(url) as backend:
        backend.create_topics({TOPIC: PARTS})
        producer = backend.producer()
        try:
            n = PER_PART * PARTS
            for start in range(0, n, 10_000):
                producer.send([ProducerRecord(TOPIC, i % PARTS, None, json.dumps({"i": i, "pad": "x" * 16}).encode())
                               for i in range(start, min(n, start + 10_000))])
            producer.flush(60)
        finally:
            producer.close()
    return url


def config(name: str, root: str, options: dict[str, Any]) -> dict[str, str]:
    return {"name": name, "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": TOPIC,
            "path": root, "storage.options": json.dumps(options), "flush.size": "997", "tasks.max": "2",
            "consumer.max.poll.records": "500", "offset.flush.interval.ms": "20", "errors.retry.timeout": "60000"}


def run_round(url: str, cfg: dict[str, str], spacing: float, targets: list[int]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = []
    try:
        for target in targets:
            procs.append(subprocess.Popen([PYTHON, "-c", RUNNER, json.dumps(cfg), url, str(target), str(PARTS)],
                                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            time.sleep(spacing)
        deadline = time.monotonic() + RUN_BOUND_S
        results = []
        for target, p in zip(targets, procs, strict=True):
            try:  # bounded: every run of the round ends before the round's bound
                stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"the run to {target} was still going {RUN_BOUND_S:.0f} s after the round started")
            assert p.returncode == 0, stderr.decode()[-2000:]
            results.append(json.loads(stdout.decode().strip().splitlines()[-1]))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)


def check_exact(root: str, options: dict[str, Any]) -> list[int]:
    """Each partition's files tile ``[0, position)`` and hold its records in order, each once; the positions."""
    lake = Lake(LakeConfig.parse({"name": "check", "topics": TOPIC, "path": root,
                                  "storage.options": json.dumps(options)}))
    lake.fs.invalidate_cache()
    positions = []
    for p in range(PARTS):
        tp = TopicPartition(TOPIC, p)
        rec = recover(lake, tp)
        assert not rec.incomplete, rec.incomplete
        spans = sorted((f.start, f.end) for f in (lake.footer(x) for x in lake.data_files(tp)))
        end = 0
        for s, e in spans:
            assert s == end, f"partition {p}: the files do not tile: {spans}"
            end = e
        assert end == (rec.next_offset or 0)
        ids: list[int] = []
        for url in committed_files(root, TOPIC, p, storage_options=options):
            with fsspec.open(url, "rb", **options) as fh:
                ids.extend(pq.read_table(fh, columns=["i"]).column("i").to_pylist())
        assert ids == list(range(p, end * PARTS, PARTS)), f"partition {p}: a gap, an overlap or a wrong row"
        positions.append(end)
    return positions


def overlapping_rounds(url: str, root: str, options: dict[str, Any], spacing: float, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(slow_iterations(1, 3)):
        where = f"{root}/round-{i}"
        cfg = config(f"lk-{seed}-{i}", where, options)
        targets = [PER_PART // 4, PER_PART // 2, 3 * PER_PART // 4, PER_PART]
        rng.shuffle(targets)
        results = run_round(url, cfg, spacing, targets)
        for target, r in zip(targets, results, strict=True):
            assert r["ok"] or r["fenced"], f"the run to {target} failed without being fenced: {r}"
            taken = [x for x in r["retries"] if any(t in x for t in TAKEN)]
            assert not taken, f"the run to {target} tried a taken name again: {taken[:3]}"
        positions = check_exact(where, options)
        done = [t for t, r in zip(targets, results, strict=True) if r["ok"]]
        assert done, results
        assert min(positions) >= max(done), (positions, results)
        later = run_round(url, cfg, 0, [PER_PART])[0]
        assert later["ok"] and not later["retries"], later
        assert check_exact(where, options) == [PER_PART] * PARTS


@pytest.mark.parametrize("spacing", [0.02, 0.05, 0.1, 0.2])
def test_overlapping_runs_on_local_files_go_on_or_stop_at_once(tmp_path: Any, store: str, spacing: float) -> None:
    overlapping_rounds(store, f"file://{tmp_path / 'lake'}", {}, spacing, int(spacing * 1000))


@pytest.mark.parametrize("spacing", [0.02, 0.2])
def test_overlapping_runs_on_s3_go_on_or_stop_at_once(s3_lake: S3Lake, store: str, spacing: float) -> None:
    overlapping_rounds(store, s3_lake.url, s3_lake.storage_options, spacing, 7 + int(spacing * 1000))
