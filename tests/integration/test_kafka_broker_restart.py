"""No run hangs on a lost broker (issue 32): one Apache Kafka 4.4.0 node SIGKILLed in the middle of a
``DirectorySource`` run and started again on the same ports and data.

Each run is ``python -m tests.support.source_run`` (``run_source`` with a ledger key, as the Airflow operator
calls it) over two files of JSON lines, two tasks, ``errors.retry.timeout`` set. The broker is killed once the
topic has grown past a point drawn at random (on observed progress, never on a clock), stays down for a drawn
moment and is started again. The run must end within its bound (the ride-out plus the broker's restart plus
the run's own work): it completes, or it fails with one error naming the broker and what it was doing. Either
way a rerun (the broker up) completes, and then the topic read ``read_committed`` holds every line exactly once
(exactly-once; at least once for at-least-once), the ranges record covers exactly those records and the source
offsets say every file is done.

``test_a_broker_that_stays_down_fails_the_run_in_its_bound``: killed and never restarted, the run fails within
``errors.retry.timeout`` (plus the client's own bounds) with one error naming the bootstrap servers.

The slow loop kills and restarts at random instants ``slow_iterations(1, 20)`` times per path
(``PYCONNECT_SLOW_ITERATIONS`` scales it; CI runs the bounded count: one round per path, which with the bounded
test's own round of each path makes two kills at random instants per path in every CI run). ``PYCONNECT_SEED``
replays one.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import ranges as ranges_mod
from connect_runtime.backends import open_backend
from connect_runtime.runtime.source import interval_ranges
from tests.support import PYTHON, REPO, slow_iterations
from tests.support.kafka_broker import ApacheKafkaBroker
from tests.support.kafka_cluster import MIN_ISR, REPLICATION, KafkaCluster

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(1500)]

LINES = 200_000
"""Lines per run (two files): enough that a kill lands mid-run on a fast machine; the kill waits for progress."""
RETRY_TIMEOUT_MS = 60_000
RUN_BOUND_S = 240.0
"""Bound on one run through a kill: its own work, the broker's restart (a JVM start) and the ride-out."""
DOWN_BOUND_S = 90.0
"""Bound on a run whose broker stays down: errors.retry.timeout (10 s here) plus the clients' own bounds."""


def write_input(directory: Path, lines: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("a", "b"):
        with open(directory / f"{name}.jsonl", "w") as f:
            f.writelines(json.dumps({"f": name, "i": i}) + "\n" for i in range(lines // 2))


def spec(broker: Broker, name: str, directory: Path, exactly_once: bool, retry_ms: int) -> str:
    return json.dumps({
        "config": {"name": name, "connector.class": "connect_runtime.connectors.files.DirectorySource",
                   "directory": str(directory), "topic": name, "tasks.max": 2,
                   "errors.retry.timeout": retry_ms},
        "backend": broker.url,
        "kwargs": {"exactly_once": exactly_once, "ledger_key": {"dag_id": "d", "interval": name},
                   "backend_settings": getattr(broker, "settings", {})},
    })


class PartitionLeader:
    """A three-node cluster seen as one broker by the rounds: ``kill`` SIGKILLs the node leading partition 0 of
    the topic being written (where the run's records go), ``restart`` starts it again on its data and waits
    until every partition is back in sync."""

    settings = {"offset.storage.replication.factor": REPLICATION, "topic.creation.default.replication.factor":
                REPLICATION, "topic.creation.default.min.insync.replicas": MIN_ISR}

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.topic = ""
        self.victim: int | None = None

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def url(self) -> str:
        return self.cluster.url

    def kill(self) -> None:
        self.victim = self.cluster.leaders(self.topic)[0]
        self.cluster.kill(self.victim)

    def restart(self) -> float:
        assert self.victim is not None
        return self.cluster.restart(self.victim)


Broker = ApacheKafkaBroker | PartitionLeader


class SourceRun:
    """One run in a subprocess; the result JSON (or ``{"error", "message"}``) on stdout, logs in a file."""

    def __init__(self, argument: str, log: Path) -> None:
        self.log = log
        self.started = time.monotonic()
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([PYTHON, "-m", "tests.support.source_run", argument], stdout=subprocess.PIPE,
                                         stderr=err, stdin=subprocess.DEVNULL, cwd=REPO,
                                         env={**os.environ, "PYTHONPATH": str(REPO)})

    def wait(self, bound: float, what: str) -> tuple[int, dict[str, Any]]:
        """The exit code and the last JSON line, waiting at most ``bound`` s from the start: past it the run
        is a hang (killed, its log in the failure)."""
        try:
            out, _ = self.proc.communicate(timeout=max(1.0, self.started + bound - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=30)
            raise AssertionError(f"{what}: the run did not end within {bound:g} s (a hang); the end of its log:\n"
                                 f"{self.log.read_text()[-4000:]}") from None
        lines = out.decode().strip().splitlines()
        return self.proc.returncode, (json.loads(lines[-1]) if lines else {})


def topic_end(broker: Broker, topic: str) -> int:
    """The topic's high watermark (0 while it does not exist or the broker does not answer)."""
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pyconnect-test-watch",
                            "log_level": 0, "socket.connection.setup.timeout.ms": 1000})
    try:
        return int(consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=1.0)[1])
    except ck.KafkaException:
        return 0
    finally:
        consumer.close()


def kill_on_progress(broker: Broker, run: SourceRun, topic: str, at: int, down: float) -> bool:
    """SIGKILL the broker once the topic holds ``at`` offsets, keep it down ``down`` s, start it again.
    False when the run ended first (nothing killed)."""
    deadline = time.monotonic() + RUN_BOUND_S
    while run.proc.poll() is None and topic_end(broker, topic) < at:
        assert time.monotonic() < deadline, f"the topic never reached {at} offsets"
        time.sleep(0.02)
    if run.proc.poll() is not None:
        return False
    broker.kill()
    time.sleep(down)
    broker.restart()
    return True


def committed_lines(broker: Broker, topic: str) -> list[tuple[int, dict[str, Any]]]:
    """(offset, value) of every committed record of the topic, read ``read_committed`` from the beginning."""
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pyconnect-test-read",
                            "isolation.level": "read_committed", "enable.partition.eof": True,
                            "enable.auto.commit": False, "log_level": 0})
    out: list[tuple[int, dict[str, Any]]] = []
    try:
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, f"reading {topic} to its end took over 120 s"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    return out
                continue
            out.append((msg.offset(), json.loads(msg.value())))
    finally:
        consumer.close()


def check_exact(broker: Broker, name: str, lines: int, exactly_once: bool) -> None:
    records = committed_lines(broker, name)
    counts = Counter((v["f"], v["i"]) for _, v in records)
    want = {(f, i) for f in ("a", "b") for i in range(lines // 2)}
    missing = want - set(counts)
    assert not missing, f"{name}: {len(missing)} lines never committed, e.g. {sorted(missing)[:3]}"
    twice = {k: c for k, c in counts.items() if c > 1}
    if exactly_once:
        assert not twice, f"{name}: {len(twice)} lines committed more than once, e.g. {sorted(twice.items())[:3]}"
    with open_backend(broker.url, getattr(broker, "settings", {})) as backend:
        interval, ledger_records = interval_ranges(backend, name, {"dag_id": "d", "interval": name})
        store = backend.offset_store()
        try:
            offsets = [json.loads(v) for k, v in store.read_all().items() if json.loads(k)[0] == name]
        finally:
            store.close()
    assert offsets and all(o.get("done") for o in offsets), f"{name}: source offsets not all done: {offsets}"
    spans = ranges_mod.parse(interval).get(name, {}).get(0, [])
    outside = [off for off, _ in records if not any(lo <= off < hi for lo, hi in spans)]
    assert not outside, f"{name}: {len(outside)} committed records outside the ranges record, e.g. {outside[:3]}"
    if exactly_once:
        assert ledger_records == lines, f"{name}: the ranges record counts {ledger_records} records, not {lines}"


def one_round(broker: Broker, tmp_path: Path, directory: Path, name: str, exactly_once: bool,
              rng: random.Random) -> str:
    """A run through one kill and restart, then a rerun; the data checked. Returns what happened."""
    log = tmp_path / f"{name}.log"
    argument = spec(broker, name, directory, exactly_once, RETRY_TIMEOUT_MS)
    run = SourceRun(argument, log)
    if isinstance(broker, PartitionLeader):
        broker.topic = name
    at = rng.randint(1, int(LINES * 0.9))
    killed = kill_on_progress(broker, run, name, at, rng.uniform(0.0, 3.0))
    rc, result = run.wait(RUN_BOUND_S, name)
    if rc == 0:
        outcome = "completed"
    else:
        assert rc == 2 and set(result) == {"error", "message"}, (
            f"{name}: the run neither completed nor failed with one error (exit {rc}): {result}; log:\n"
            f"{log.read_text()[-4000:]}")
        assert broker.bootstrap in result["message"], f"{name}: the error does not name the broker: {result}"
        outcome = f"failed: {result['error']}: {result['message'][:160]}"
    again = SourceRun(argument, log)
    rc2, result2 = again.wait(RUN_BOUND_S, f"{name} rerun")
    assert rc2 == 0, f"{name}: the rerun failed: {result2}; log:\n{log.read_text()[-4000:]}"
    check_exact(broker, name, LINES, exactly_once)
    return f"{name}: kill at {at} offsets ({'killed' if killed else 'run ended first'}): {outcome}"


@pytest.fixture
def lines_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("restart-input")
    write_input(directory, LINES)
    return directory


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly_once", "at_least_once"])
def test_a_source_run_rides_out_a_broker_restart_or_fails_naming_it(
        fresh_kafka_broker: ApacheKafkaBroker, tmp_path: Path, lines_dir: Path, exactly_once: bool) -> None:
    seed = os.environ.get("PYCONNECT_SEED", str(time.time()))
    rng = random.Random(seed)
    print(f"\nPYCONNECT_SEED={seed}: " + one_round(fresh_kafka_broker, tmp_path, lines_dir, "restart0",
                                                   exactly_once, rng))


@pytest.mark.slow
@pytest.mark.parametrize("path", ["exactly_once", "at_least_once", "sink"])
def test_broker_restarts_at_random_instants(fresh_kafka_broker: ApacheKafkaBroker, tmp_path: Path,
                                             lines_dir: Path, path: str) -> None:
    broker = fresh_kafka_broker
    seed = os.environ.get("PYCONNECT_SEED", str(time.time()))
    rng = random.Random(seed)
    outcomes = []
    for k in range(slow_iterations(1, 20)):
        if path == "sink":
            topic = f"sloop{k}"
            rc, result = SourceRun(spec(broker, topic, lines_dir, True, RETRY_TIMEOUT_MS),
                                   tmp_path / f"{topic}.log").wait(RUN_BOUND_S, "the source run the sink reads")
            assert rc == 0, result
            outcomes.append(sink_round(broker, tmp_path, topic, rng))
        else:
            outcomes.append(one_round(broker, tmp_path, lines_dir, f"loop{k}", path == "exactly_once", rng))
    print(f"\nPYCONNECT_SEED={seed}\n  " + "\n  ".join(outcomes))


def test_a_broker_that_stays_down_fails_the_run_in_its_bound(fresh_kafka_broker: ApacheKafkaBroker,
                                                               tmp_path: Path, lines_dir: Path) -> None:
    broker = fresh_kafka_broker
    log = tmp_path / "down.log"
    run = SourceRun(spec(broker, "down", lines_dir, True, 10_000), log)
    deadline = time.monotonic() + RUN_BOUND_S
    while run.proc.poll() is None and topic_end(broker, "down") < LINES // 10:
        assert time.monotonic() < deadline, "the run wrote nothing"
        time.sleep(0.02)
    if run.proc.poll() is not None:
        pytest.fail(f"the run ended before the broker was killed: make LINES bigger ({run.proc.returncode})")
    broker.kill()
    killed = time.monotonic()
    try:
        run.started = killed
        rc, result = run.wait(DOWN_BOUND_S, "a run whose broker stays down")
    finally:
        broker.restart()  # the fixture's broker goes back to the pool running
    assert rc == 2 and set(result) == {"error", "message"}, f"exit {rc}: {result}; log:\n{log.read_text()[-4000:]}"
    message = result["message"]
    assert broker.bootstrap in message, f"the error does not name the broker: {message}"
    assert "commit_transaction" in message or "init_transactions" in message or "flush" in message, (
        f"the error does not say what the run was doing: {message}")
    print(f"\nfailed {time.monotonic() - killed:.1f} s after the kill: {result['error']}: {message}")


def sink_round(broker: ApacheKafkaBroker, tmp_path: Path, topic: str, rng: random.Random) -> str:
    """A FileSink run (``pyconnect run``) over ``topic`` through one kill and restart, then a rerun: the files
    hold every committed record of the topic once, in offset order."""
    from connect_runtime.connectors.files import committed_files

    name = f"{topic}-files"
    out = tmp_path / name
    config = tmp_path / f"{name}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in {
        "name": name, "connector.class": "connect_runtime.connectors.files.FileSink", "topics": topic,
        "tasks.max": 1, "directory": out, "consumer.max.poll.records": 1000, "offset.flush.interval.ms": 0,
        "errors.retry.timeout": RETRY_TIMEOUT_MS}.items()))
    command = [PYTHON, "-m", "connect_runtime.cli", "--backend", broker.url, "run", str(config)]
    log = tmp_path / f"{name}.log"

    def written() -> int:
        return sum(len(f.read_bytes().splitlines()) for f in out.glob(f"{topic}/partition=*/*.jsonl"))

    def start() -> subprocess.Popen[bytes]:
        with open(log, "ab") as err:
            return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO,
                                    env={**os.environ, "PYTHONPATH": str(REPO)})

    def wait(proc: subprocess.Popen[bytes], what: str) -> int:
        try:
            return proc.wait(RUN_BOUND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
            raise AssertionError(f"{what}: the sink run did not end within {RUN_BOUND_S:g} s (a hang); its log:\n"
                                 f"{log.read_text()[-4000:]}") from None

    proc = start()
    at = rng.randint(1, int(LINES * 0.9))
    deadline = time.monotonic() + RUN_BOUND_S
    while proc.poll() is None and written() < at:
        assert time.monotonic() < deadline, f"the sink never wrote {at} lines"
        time.sleep(0.02)
    killed = proc.poll() is None
    if killed:
        broker.kill()
        time.sleep(rng.uniform(0.0, 3.0))
        broker.restart()
    rc = wait(proc, name)
    errors = [line for line in log.read_text().splitlines() if line.startswith("error:")]
    if rc != 0:
        assert rc == 1 and len(errors) == 1 and broker.bootstrap in errors[0], (
            f"{name}: the sink run neither completed nor failed with one error naming the broker (exit {rc}); log:\n"
            f"{log.read_text()[-4000:]}")
    assert wait(start(), f"{name} rerun") == 0, f"{name}: the rerun failed; log:\n{log.read_text()[-4000:]}"
    lines = [json.loads(line) for f in committed_files(out, topic, 0) for line in f.read_text().splitlines()
             if line.strip()]
    assert lines == [v for _, v in committed_lines(broker, topic)], (
        f"{name}: the FileSink's files do not hold the topic's records in offset order, each once")
    return f"{name}: kill at {at} lines ({'killed' if killed else 'run ended first'}): " + (
        "completed" if rc == 0 else errors[0][:200])


def test_a_sink_run_rides_out_a_broker_restart_or_fails_naming_it(
        fresh_kafka_broker: ApacheKafkaBroker, tmp_path: Path, lines_dir: Path) -> None:
    broker = fresh_kafka_broker
    seed = os.environ.get("PYCONNECT_SEED", str(time.time()))
    rng = random.Random(seed)
    rc, result = SourceRun(spec(broker, "sunk", lines_dir, True, RETRY_TIMEOUT_MS), tmp_path / "sunk.log").wait(
        RUN_BOUND_S, "the source run the sink reads")
    assert rc == 0, result
    print(f"\nPYCONNECT_SEED={seed}: " + sink_round(broker, tmp_path, "sunk", rng))


@pytest.mark.slow
def test_a_run_rides_out_its_partition_leader_restarting_in_a_cluster(kafka_cluster: KafkaCluster, tmp_path: Path,
                                                                      lines_dir: Path) -> None:
    """Three nodes: the leader of the data partition SIGKILLed mid-run and started again; exactly-once, then
    at-least-once."""
    seed = os.environ.get("PYCONNECT_SEED", str(time.time()))
    rng = random.Random(seed)
    leader = PartitionLeader(kafka_cluster)
    outcomes = [one_round(leader, tmp_path, lines_dir, f"lead{k}", exactly_once, rng)
                for k, exactly_once in enumerate((True, False))]
    print(f"\nPYCONNECT_SEED={seed}\n  " + "\n  ".join(outcomes))
