"""A cluster, not one node: three Apache Kafka 4.4.0 KRaft nodes (tests/fixtures/kafka_cluster.py), replication
factor 3 and ``min.insync.replicas=2`` everywhere, and one node SIGKILLed in the middle of

(a) an exactly-once source run (DataGenSource, 300,000 records, 3 tasks, 6 partitions), and
(b) a FileSink run over what (a) wrote (3 tasks, offsets kept in the destination).

The runs are ``pyconnect --backend kafka://h1,h2,h3 --setting ... run CONFIG`` subprocesses (the
documented way to point the runtime at a cluster). The node killed is the one that coordinates the most of
the run's transactional ids (the leader of their ``__transaction_state`` partitions), ties broken by the
most partitions led; it stays dead until the run has ended and been checked. Each run must end with exit 0,
or with one clear error whose retry (on the two nodes left) ends with exit 0; then the topic, read
``read_committed`` from the beginning, holds every record exactly once (a), and the FileSink's committed
files hold every record exactly once (b). Every topic the runtime created must have three replicas and
``min.insync.replicas=2`` set on the topic (the cluster's defaults are one replica, see the fixture).
Every wait is bounded."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.connectors.datagen import generate_value
from connect_runtime.connectors.files import committed_files
from tests.fixtures.kafka_cluster import MIN_ISR, REPLICATION, KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))
RECORDS = 300_000
TASKS = 3
PARTITIONS = 6
TOPIC = "orders"
RUN_TIMEOUT_S = 300.0
"""Bound on one run (it includes the cluster noticing the dead node: broker.session.timeout.ms, 9 s)."""

# what the runtime needs to create its topics right on a cluster (README, Kafka)
SETTINGS = {
    "offset.storage.replication.factor": REPLICATION,        # connect-offsets and every store topic
    "topic.creation.default.replication.factor": REPLICATION,  # data and dead letter topics
    "topic.creation.default.min.insync.replicas": MIN_ISR,     # every topic the backend creates
}


def pyconnect(cluster: KafkaCluster, *args: str) -> list[str]:
    settings = [a for k, v in SETTINGS.items() for a in ("--setting", f"{k}={v}")]
    return [PYCONNECT, "--backend", cluster.url, *settings, *args]


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


class Run:
    """One ``pyconnect run`` subprocess; its stdout (the result JSON) and stderr go to files."""

    def __init__(self, cluster: KafkaCluster, config: Path, log_dir: Path, label: str) -> None:
        self.out = log_dir / f"{label}.out"
        self.err = log_dir / f"{label}.err"
        self.label = label
        self.started = time.monotonic()
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(pyconnect(cluster, "run", str(config)), stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL)

    def wait(self, timeout: float = RUN_TIMEOUT_S) -> int:
        try:
            rc = self.proc.wait(max(1.0, self.started + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            raise AssertionError(f"{self.label} did not end within {timeout:.0f} s; its stderr:\n"
                                 f"{self.err.read_text()[-4000:]}") from None
        self.seconds = time.monotonic() - self.started
        return rc

    def result(self) -> dict[str, Any]:
        return dict(json.loads(self.out.read_text().strip().splitlines()[-1]))

    def errors(self) -> list[str]:
        return [line for line in self.err.read_text().splitlines() if line.startswith("error:")]


def run_through_a_kill(cluster: KafkaCluster, config: Path, log_dir: Path, label: str,
                       progress: Callable[[], int], total: int, pick: Callable[[], int],
                       rng: random.Random) -> dict[str, Any]:
    """Start a run, SIGKILL node ``pick()`` once ``progress()`` passes a random 20-60 % of ``total``, and wait
    for the run to end: exit 0, or one clear error and then a retry (node still dead) that exits 0. The
    killed node is restarted afterwards (bounded) and every partition is fully in sync again. Returns what
    happened: the node, progress at the kill, the attempts' errors and seconds, the final result."""
    target = int(total * rng.uniform(0.2, 0.6))
    run = Run(cluster, config, log_dir, f"{label}-1")
    try:
        wait_for(f"{label} to reach {target} of {total} records",
                 lambda: run.proc.poll() is not None or progress() >= target, RUN_TIMEOUT_S)
        assert run.proc.poll() is None, (f"{label} ended (exit {run.proc.returncode}) before the kill: "
                                         f"{run.err.read_text()[-3000:]}")
        node = pick()
        at_kill = progress()
        killed_at = time.monotonic()
        cluster.kill(node)
        rc = run.wait()
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(30)
    report: dict[str, Any] = {"node": node, "at_kill": at_kill, "target": target, "errors": [],
                              "seconds": [round(run.seconds, 1)],
                              "after_kill_s": round(time.monotonic() - killed_at, 1)}
    if rc != 0:
        errors = run.errors()
        assert rc == 1 and len(errors) == 1, (
            f"{label} failed after node {node} was killed without one clear error (exit {rc}): "
            f"{run.err.read_text()[-4000:]}")
        report["errors"].append(errors[0])
        retry = Run(cluster, config, log_dir, f"{label}-2")
        rc = retry.wait()
        report["seconds"].append(round(retry.seconds, 1))
        assert rc == 0, f"the retry of {label} (node {node} still dead) failed: {retry.err.read_text()[-4000:]}"
        run = retry
    report["result"] = run.result()
    return report


def read_committed(cluster: KafkaCluster, topic: str, expect: int, timeout: float = 60.0) -> dict[int, list[bytes]]:
    """``{partition: values in offset order}`` of ``topic``, read ``read_committed`` from the beginning to the
    end of each partition (partition EOF); read again (bounded) until ``expect`` values are there, as commit
    markers land just after a commit returns."""
    import confluent_kafka as ck

    deadline = time.monotonic() + timeout
    while True:
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "test-kafka-cluster-reader",
                                "isolation.level": "read_committed", "enable.auto.commit": False,
                                "enable.partition.eof": True, "log_level": 0})
        try:
            parts = cluster.admin.list_topics(topic=topic, timeout=10).topics[topic].partitions
            consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
            values: dict[int, list[bytes]] = {p: [] for p in parts}
            at_eof: set[int] = set()
            while len(at_eof) < len(parts) and time.monotonic() < deadline:
                for m in consumer.consume(10_000, 1.0):
                    if m.error() is None:
                        values[m.partition()].append(m.value())
                        at_eof.discard(m.partition())
                    elif m.error().code() == ck.KafkaError._PARTITION_EOF:
                        at_eof.add(m.partition())
                    elif not m.error().retriable():
                        raise AssertionError(f"reading {topic}: {m.error()}")
        finally:
            consumer.close()
        if sum(map(len, values.values())) >= expect or time.monotonic() >= deadline:
            return values
        time.sleep(0.5)


def check_topics(cluster: KafkaCluster) -> dict[str, dict[str, Any]]:
    """Every topic the runtime created: three replicas, min.insync.replicas=2 set on the topic, and the
    offsets and store topics compacted."""
    topics = sorted(t for t in cluster.metadata().topics if not t.startswith("__"))
    described = cluster.describe(topics)
    bad = {t: d for t, d in described.items()
           if d["replication"] != {REPLICATION} or d["min.insync.replicas"] != MIN_ISR
           or d["min_isr_source"] != "DYNAMIC_TOPIC_CONFIG"
           or (t != TOPIC and d["cleanup.policy"] != "compact")}
    assert not bad, f"topics not created with replication factor {REPLICATION} / min.insync.replicas={MIN_ISR}: {bad}"
    internal = cluster.describe(["__transaction_state", "__consumer_offsets"])
    assert all(d["replication"] == {REPLICATION} and d["min.insync.replicas"] == MIN_ISR
               for d in internal.values()), internal
    return described


def test_a_node_sigkilled_mid_run_loses_and_duplicates_nothing(kafka_cluster: KafkaCluster, tmp_path: Path) -> None:
    cluster = kafka_cluster
    seed = os.environ.get("PYCONNECT_SEED", str(time.time()))
    rng = random.Random(seed)
    began = time.monotonic()
    timings: dict[str, Any] = {"cluster start s": round(cluster.start_seconds, 1)}
    import confluent_kafka as ck

    watcher = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "test-kafka-cluster-watcher",
                           "log_level": 0})

    def high_watermarks(topic: str) -> int:
        """Records written to ``topic`` so far (committed or not): the sum of its high watermarks."""
        try:
            parts = cluster.admin.list_topics(topic=topic, timeout=2).topics[topic].partitions
            return sum(watcher.get_watermark_offsets(ck.TopicPartition(topic, p), 2, cached=False)[1]
                       for p in parts)
        except Exception:
            return 0

    # -- (a) exactly-once source run, a node killed mid-run ----------------------------------------------
    source = tmp_path / "gen.properties"
    source.write_text(
        "name=gen\nconnector.class=connect_runtime.connectors.datagen.DataGenSource\n"
        f"topic={TOPIC}\nmax.records={RECORDS}\ntasks.max={TASKS}\nbatch.size=1000\n"
        f"topic.creation.default.partitions={PARTITIONS}\npoll.idle.timeout.ms=200\n")
    tids = [f"connect-cluster-gen-{i}" for i in range(TASKS)]

    def pick_source_victim() -> int:
        coordinators = Counter(cluster.transaction_coordinator(t) for t in tids)
        leaders = cluster.leader_counts([TOPIC])
        return max((n.node_id for n in cluster.nodes), key=lambda n: (coordinators[n], leaders[n]))

    try:
        a = run_through_a_kill(cluster, source, tmp_path, "source", lambda: high_watermarks(TOPIC), RECORDS,
                               pick_source_victim, rng)
    finally:
        watcher.close()
    timings["source run s"] = a["seconds"]
    by_partition = read_committed(cluster, TOPIC, RECORDS)
    values = [v for vs in by_partition.values() for v in vs]
    ids = Counter(json.loads(v)["id"] for v in values)
    assert len(values) == RECORDS and ids == Counter(range(RECORDS)), (
        f"read_committed: {len(values)} records, {len(ids)} distinct ids; duplicates "
        f"{sum(c - 1 for c in ids.values() if c > 1)}, missing {RECORDS - len(set(ids) & set(range(RECORDS)))}")
    assert all(json.loads(v) == generate_value(0, json.loads(v)["id"]) for v in values[:: RECORDS // 1000])
    offsets = subprocess.run(pyconnect(cluster, "offsets", "get", "gen"), capture_output=True, text=True,
                             timeout=60)
    assert offsets.returncode == 0, offsets.stderr
    positions = {o["partition"]["task"]: o["offset"]["position"] for o in json.loads(offsets.stdout)["offsets"]}
    assert positions == {i: RECORDS * (i + 1) // TASKS for i in range(TASKS)}
    timings["restart a s"] = round(cluster.restart(a["node"]), 1)
    again = subprocess.run(pyconnect(cluster, "run", str(source)), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout)["records"] == 0, again.stderr

    # -- (b) FileSink run over those records, a node killed mid-run ----------------------------------------
    out = tmp_path / "out"
    sink = tmp_path / "files.properties"
    sink.write_text(
        f"name=files\nconnector.class=connect_runtime.connectors.files.FileSink\ntopics={TOPIC}\n"
        f"tasks.max={TASKS}\ndirectory={out}\nconsumer.max.poll.records=1000\noffset.flush.interval.ms=0\n")

    def written() -> int:
        return sum(len(f.read_bytes().splitlines()) for f in out.glob(f"{TOPIC}/partition=*/*.jsonl"))

    def pick_sink_victim() -> int:
        fence = cluster.transaction_coordinator("connect-cluster-files-sink-commits")
        leaders = cluster.leader_counts([TOPIC])
        return max((n.node_id for n in cluster.nodes), key=lambda n: (leaders[n], n == fence))

    b = run_through_a_kill(cluster, sink, tmp_path, "sink", written, RECORDS, pick_sink_victim, rng)
    timings["sink run s"] = b["seconds"]
    sunk: Counter[int] = Counter()
    for p in range(PARTITIONS):
        files = committed_files(out, TOPIC, p)
        lines = [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]
        # the partition's records in offset order, each once (FileSink writes values as they were produced)
        assert lines == [json.loads(v) for v in by_partition[p]], f"partition {p}: not the topic's records in order"
        sunk.update(v["id"] for v in lines)
    assert sunk == Counter(range(RECORDS)), (
        f"FileSink: {sum(sunk.values())} records, {len(sunk)} distinct; duplicates "
        f"{sum(c - 1 for c in sunk.values() if c > 1)}, missing {RECORDS - len(set(sunk) & set(range(RECORDS)))}")
    timings["restart b s"] = round(cluster.restart(b["node"]), 1)

    described = check_topics(cluster)
    timings["total s"] = round(time.monotonic() - began, 1)
    print(f"\nPYCONNECT_SEED={seed}\nsource: {json.dumps({k: v for k, v in a.items() if k != 'result'})}"
          f"\nsink: {json.dumps({k: v for k, v in b.items() if k != 'result'})}"
          f"\ntopics: {json.dumps({t: {**d, 'replication': sorted(d['replication'])} for t, d in described.items()})}"
          f"\ntimings: {json.dumps(timings)}")
