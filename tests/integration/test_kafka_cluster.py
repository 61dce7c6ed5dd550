"""A cluster, not one node: three Apache Kafka 4.4.0 KRaft nodes (tests/support/kafka_cluster.py), replication
factor 3 and ``min.insync.replicas=2`` for every topic, and one node SIGKILLed in the middle of

(a) an exactly-once source run (DataGenSource, 300,000 records, 3 tasks, 6 partitions, with a ledger key as
    Airflow runs it, so the registry, ranges and offsets topics are all in play), and
(b) a FileSink run over what (a) wrote (3 tasks, offsets kept in the destination; ``pyconnect run``).

Both runs point at ``kafka://h1,h2,h3`` with the backend settings docs/kafka.md names for a cluster. The node
killed in (a) is the one that coordinates the most of the run's transactional ids (the leader of their
``__transaction_state`` partitions), ties broken by the most data partitions led; in (b) the one leading the
most data partitions. It stays dead until the run has ended, then is restarted (bounded) and caught up.

Two variants:

- ``defaults``: the runtime's default bounds. A transaction or an end-of-partition query that touches the dead
  node waits up to ``offset.flush.timeout.ms`` (5 s), less than the cluster takes to notice a dead node
  (``broker.session.timeout.ms``, 9 s) and move its leaderships: the run may fail, with one clear error, and
  its retry (the node still dead) must complete.
- ``ride_through``: ``offset.flush.timeout.ms=30000``: the run must complete with no error at all; except
  for one known defect of the backend, tolerated in the sink run only and printed (:data:`KNOWN_DEFECTS`).

A run that fails before the kill fails the test, but for one known race of a fresh cluster's first run
(``KNOWN_DEFECTS["first use"]``), tolerated once and printed.

Either way the topic, read ``read_committed`` from the beginning, holds every record exactly once, the
ranges record of the ledger key covers exactly them, the connector's source offsets say every task is done,
a further source run writes nothing, and the FileSink's committed files hold each partition's records in
offset order, each once. Every topic the runtime created must have three replicas and
``min.insync.replicas=2`` set on the topic (the cluster's defaults are one replica, see the fixture).
Every wait is bounded. ``PYCONNECT_SLOW_ITERATIONS`` sets the rounds (a)+(b) per variant (CI: 1; else 2).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import ranges as ranges_mod
from connect_runtime.backends import open_backend
from connect_runtime.connectors.datagen import generate_value
from connect_runtime.connectors.files import committed_files
from connect_runtime.runtime.source import interval_ranges
from tests.support import PYTHON, REPO, slow_iterations
from tests.support.kafka_cluster import MIN_ISR, REPLICATION, KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(1200)]

PYCONNECT = str(Path(sys.executable).with_name("pyconnect"))
RECORDS = 300_000
TASKS = 3
PARTITIONS = 6
RUN_TIMEOUT_S = 240.0
"""Bound on one run (it includes the cluster noticing the dead node)."""

# what the runtime needs to create its topics right on a cluster (docs/kafka.md)
SETTINGS = {
    "offset.storage.replication.factor": REPLICATION,          # connect-offsets and every store topic
    "topic.creation.default.replication.factor": REPLICATION,  # data and dead letter topics
    "topic.creation.default.min.insync.replicas": MIN_ISR,     # every topic the backend creates
}
VARIANTS = {"defaults": {}, "ride_through": {"offset.flush.timeout.ms": 30_000}}
KNOWN_DEFECTS: dict[str, str] = {
    # none: the two defects this test found (the first-use DescribeConfigs race on connect-offsets, and the
    # watermark query that stayed on a dead leader) are fixed in connect_runtime/backends/kafka/ (admin.py, ends.py)
    "first use": r"(?!)",
}


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def pyconnect(cluster: KafkaCluster, *args: str) -> list[str]:
    """``pyconnect --backend kafka://h1,h2,h3 --setting ... ARGS``."""
    settings = [a for k, v in SETTINGS.items() for a in ("--setting", f"{k}={v}")]
    return [PYCONNECT, "--backend", cluster.url, *settings, *args]


class Run:
    """One run in a subprocess; its stdout (the result JSON) and stderr go to files.

    ``source``: ``python -m tests.support.source_run`` (``run_source`` with the backend settings and a ledger key, as
    the Airflow operator calls it): exit 0 and the result, or exit 2 and ``{"error", "message"}``.
    ``sink``: ``pyconnect ... run CONFIG``: exit 0 and the result, or exit 1 and one ``error: ...`` line."""

    def __init__(self, kind: str, command: list[str], log_dir: Path, label: str) -> None:
        self.kind = kind
        self.label = label
        self.out = log_dir / f"{label}.out"
        self.err = log_dir / f"{label}.err"
        self.started = time.monotonic()
        self.seconds = 0.0
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO,
                                         env={**os.environ, "PYTHONPATH": str(REPO)})

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

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def last_json(self) -> dict[str, Any]:
        lines = self.out.read_text().strip().splitlines()
        return dict(json.loads(lines[-1])) if lines else {}

    def clear_error(self, rc: int) -> str | None:
        """The run's one error message when it failed the way a run should (None otherwise)."""
        if self.kind == "source":
            got = self.last_json() if rc == 2 else {}
            return f"{got['error']}: {got['message']}" if "error" in got else None
        errors = [line for line in self.err.read_text().splitlines() if line.startswith("error:")]
        return errors[0] if rc == 1 and len(errors) == 1 else None


def run_through_a_kill(cluster: KafkaCluster, start: Callable[[str], Run], label: str,
                       progress: Callable[[], int], total: int, pick: Callable[[], int],
                       rng: random.Random, may_fail: Callable[[str], bool]) -> dict[str, Any]:
    """Start a run, SIGKILL node ``pick()`` once ``progress()`` passes a random 20-60 % of ``total``, and wait
    for the run to end: exit 0, or one clear error that ``may_fail`` accepts and then a retry, the node still
    dead, that exits 0. Then restart the node (bounded, every partition in sync again). Returns what
    happened."""
    target = int(total * rng.uniform(0.2, 0.6))
    before_kill: list[str] = []
    while True:
        run = start(f"{label}-{len(before_kill) + 1}")
        try:
            wait_for(f"{label} to reach {target} of {total} records",
                     lambda: run.proc.poll() is not None or progress() >= target, RUN_TIMEOUT_S)  # noqa: B023
            if run.proc.poll() is not None:  # it ended before the kill: only the known first-use race may do so
                error = run.clear_error(run.proc.returncode)
                if before_kill or error is None or not re.search(KNOWN_DEFECTS["first use"], error):
                    raise AssertionError(f"{label} ended (exit {run.proc.returncode}) before the kill: "
                                         f"{run.err.read_text()[-3000:]}")
                before_kill.append(error)
                continue
            node = pick()
            at_kill = progress()
            killed_at = time.monotonic()
            cluster.kill(node)
            rc = run.wait()
            break
        finally:
            run.stop()
    report: dict[str, Any] = {"killed node": node, "progress at kill": at_kill, "errors": [],
                              "known defect before the kill": before_kill,
                              "run s": [round(run.seconds, 1)], "kill to end s": round(time.monotonic() - killed_at, 1)}
    if rc != 0:
        error = run.clear_error(rc)
        assert error is not None and may_fail(error), (
            f"{label} failed after node {node} was killed{' (it must ride through)' if error else ''}"
            f"{'' if error else ' without one clear error'} (exit {rc}): {error or run.err.read_text()[-4000:]}")
        report["errors"].append(error)
        run = start(f"{label}-{len(before_kill) + 2}")
        try:
            rc = run.wait()
        finally:
            run.stop()
        report["run s"].append(round(run.seconds, 1))
        assert rc == 0, f"the retry of {label} (node {node} still dead) failed: {run.err.read_text()[-4000:]}"
    report["records of the last attempt"] = run.last_json()["records"]
    report["restart s"] = round(cluster.restart(node), 1)
    return report


def read_committed(cluster: KafkaCluster, topic: str, expect: int, timeout: float = 60.0,
                   ) -> dict[int, list[tuple[int, bytes]]]:
    """``{partition: [(offset, value)] in offset order}`` of ``topic``, read ``read_committed`` from the
    beginning to the end of each partition (partition EOF); read again (bounded) until ``expect`` records are
    there, as commit markers land just after a commit returns."""
    import confluent_kafka as ck

    deadline = time.monotonic() + timeout
    while True:
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "test-kafka-cluster-reader",
                                "isolation.level": "read_committed", "enable.auto.commit": False,
                                "enable.partition.eof": True, "log_level": 0})
        try:
            parts = cluster.admin.list_topics(topic=topic, timeout=10).topics[topic].partitions
            consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
            records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in parts}
            at_eof: set[int] = set()
            while len(at_eof) < len(parts) and time.monotonic() < deadline:
                for m in consumer.consume(10_000, 1.0):
                    if m.error() is None:
                        records[m.partition()].append((m.offset(), m.value()))
                        at_eof.discard(m.partition())
                    elif m.error().code() == ck.KafkaError._PARTITION_EOF:
                        at_eof.add(m.partition())
                    elif not m.error().retriable():
                        raise AssertionError(f"reading {topic}: {m.error()}")
        finally:
            consumer.close()
        if sum(map(len, records.values())) >= expect or time.monotonic() >= deadline:
            return records
        time.sleep(0.5)


def exactly_once(ids: Counter[int], total: int) -> str:
    """What is wrong with ``ids`` as ``range(total)`` each once ('' when nothing is)."""
    if ids == Counter(range(total)):
        return ""
    return (f"{sum(ids.values())} records, {len(ids)} distinct ids; {sum(c - 1 for c in ids.values() if c > 1)} "
            f"duplicates, {len(set(range(total)) - set(ids))} missing")


def check_topics(cluster: KafkaCluster, data_topics: set[str]) -> dict[str, dict[str, Any]]:
    """Every topic the runtime created: three replicas and min.insync.replicas=2 set on the topic; the offsets
    and store topics compacted. The brokers' transaction state log and group offsets topic likewise."""
    topics = sorted(t for t in cluster.metadata().topics if not t.startswith("__"))
    described = cluster.describe(topics)
    bad = {t: d for t, d in described.items()
           if d["replication"] != {REPLICATION} or d["min.insync.replicas"] != MIN_ISR
           or d["min_isr_source"] != "DYNAMIC_TOPIC_CONFIG"
           or (t not in data_topics and d["cleanup.policy"] != "compact")}
    assert not bad, f"topics not created with replication factor {REPLICATION} / min.insync.replicas={MIN_ISR}: {bad}"
    assert {"connect-offsets", "pyconnect-connectors", "pyconnect-ranges"} <= set(topics), topics
    internal = cluster.describe(["__transaction_state", "__consumer_offsets"])
    assert all(d["replication"] == {REPLICATION} and d["min.insync.replicas"] == MIN_ISR
               for d in internal.values()), internal
    return described


def one_round(cluster: KafkaCluster, tmp_path: Path, k: int, extra: dict[str, Any], ride_through: bool,
              rng: random.Random) -> dict[str, Any]:
    import confluent_kafka as ck

    topic, gen, files = f"orders{k}", f"gen{k}", f"files{k}"
    ledger_key = {"dag_id": "cluster", "task_id": "gen", "interval": f"round-{k}"}

    # -- (a) exactly-once source run, a node killed mid-run ----------------------------------------------
    source = {"name": gen, "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": topic,
              "max.records": RECORDS, "tasks.max": TASKS, "batch.size": 1000, "poll.idle.timeout.ms": 200,
              "topic.creation.default.partitions": PARTITIONS, **extra}
    spec = json.dumps({"config": source, "backend": cluster.url,
                       "kwargs": {"backend_settings": SETTINGS, "ledger_key": ledger_key}})
    watcher = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "test-kafka-cluster-watcher",
                           "log_level": 0})

    def high_watermarks() -> int:
        """Records written to the topic so far (committed or not): the sum of its high watermarks."""
        try:
            parts = cluster.admin.list_topics(topic=topic, timeout=2).topics[topic].partitions
            return sum(watcher.get_watermark_offsets(ck.TopicPartition(topic, p), 2, cached=False)[1] for p in parts)
        except Exception:
            return 0

    def pick_source_victim() -> int:
        coordinators = Counter(cluster.transaction_coordinator(f"connect-cluster-{gen}-{i}") for i in range(TASKS))
        leaders = cluster.leader_counts([topic])
        return max((n.node_id for n in cluster.nodes), key=lambda n: (coordinators[n], leaders[n]))

    try:
        a = run_through_a_kill(
            cluster, lambda label: Run("source", [PYTHON, "-m", "tests.support.source_run", spec], tmp_path, label),
            f"round {k} source", high_watermarks, RECORDS, pick_source_victim, rng,
            lambda error: not ride_through or re.search(KNOWN_DEFECTS.get("source", "^$"), error) is not None)
    finally:
        watcher.close()
    by_partition = read_committed(cluster, topic, RECORDS)
    values = [json.loads(v) for recs in by_partition.values() for _, v in recs]
    wrong = exactly_once(Counter(v["id"] for v in values), RECORDS)
    assert not wrong, f"round {k}: the topic read_committed after the source run: {wrong}"
    assert all(v == generate_value(0, v["id"]) for v in values[:: RECORDS // 1000])
    with open_backend(cluster.url, SETTINGS) as backend:
        interval, ledger_records = interval_ranges(backend, gen, ledger_key)
    spans = ranges_mod.parse(interval).get(topic, {})
    outside = [(p, off) for p, recs in by_partition.items() for off, _ in recs
               if not any(lo <= off < hi for lo, hi in spans.get(p, []))]
    assert ledger_records == RECORDS and not outside, (
        f"round {k}: the ranges record says {ledger_records} records; {len(outside)} committed records outside it")
    got = subprocess.run(pyconnect(cluster, "offsets", "get", gen), capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    positions = {o["partition"]["task"]: o["offset"]["position"] for o in json.loads(got.stdout)["offsets"]}
    assert positions == {i: RECORDS * (i + 1) // TASKS for i in range(TASKS)}
    again = Run("source", [PYTHON, "-m", "tests.support.source_run", spec], tmp_path, f"round {k} source again")
    assert again.wait(120) == 0 and again.last_json()["records"] == 0, again.err.read_text()[-3000:]

    # -- (b) FileSink run over those records, a node killed mid-run ----------------------------------------
    out = tmp_path / f"out{k}"
    sink = tmp_path / f"{files}.properties"
    sink.write_text("".join(f"{key}={value}\n" for key, value in {
        "name": files, "connector.class": "connect_runtime.connectors.files.FileSink", "topics": topic,
        "tasks.max": TASKS, "directory": out, "consumer.max.poll.records": 1000, "offset.flush.interval.ms": 0,
        **extra}.items()))

    def written() -> int:
        return sum(len(f.read_bytes().splitlines()) for f in out.glob(f"{topic}/partition=*/*.jsonl"))

    def pick_sink_victim() -> int:
        fence = cluster.transaction_coordinator(f"connect-cluster-{files}-sink-commits")
        leaders = cluster.leader_counts([topic])
        return max((n.node_id for n in cluster.nodes), key=lambda n: (leaders[n], n == fence))

    b = run_through_a_kill(
        cluster, lambda label: Run("sink", pyconnect(cluster, "run", str(sink)), tmp_path, label),
        f"round {k} sink", written, RECORDS, pick_sink_victim, rng,
        lambda error: not ride_through or re.search(KNOWN_DEFECTS.get("sink", "^$"), error) is not None)
    sunk: Counter[int] = Counter()
    for p in range(PARTITIONS):
        lines = [json.loads(line) for f in committed_files(out, topic, p)
                 for line in f.read_text().splitlines() if line.strip()]
        assert lines == [json.loads(v) for _, v in by_partition[p]], (
            f"round {k}: FileSink partition {p} does not hold the topic's records in offset order, each once")
        sunk.update(v["id"] for v in lines)
    wrong = exactly_once(sunk, RECORDS)
    assert not wrong, f"round {k}: the FileSink output: {wrong}"
    return {"source": a, "sink": b}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_node_sigkilled_mid_run_loses_and_duplicates_nothing(kafka_cluster: KafkaCluster, tmp_path: Path,
                                                               variant: str) -> None:
    cluster = kafka_cluster
    seed = os.environ.get("PYCONNECT_SEED", str(time.time()))
    rng = random.Random(seed)
    began = time.monotonic()
    rounds = [one_round(cluster, tmp_path, k, VARIANTS[variant], variant == "ride_through", rng)
              for k in range(slow_iterations(1, 2))]
    described = check_topics(cluster, {f"orders{k}" for k in range(len(rounds))})
    print(f"\n{variant} (PYCONNECT_SEED={seed}): cluster start {cluster.start_seconds:.1f} s, "
          f"rounds {time.monotonic() - began:.1f} s")
    for k, r in enumerate(rounds):
        for what, report in r.items():
            print(f"  round {k} {what}: {json.dumps(report)}")
    print(f"  topics: {json.dumps({t: {**d, 'replication': sorted(d['replication'])} for t, d in described.items()})}")
