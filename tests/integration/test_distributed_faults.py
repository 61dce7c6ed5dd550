"""The distributed deployment (issue 33) and faults across machines (issue 33.2) under a real Airflow: the example
pipeline on Celery workers, each record once in every sink; a Kafka broker SIGKILLed mid-run; a task's supervisor
SIGKILLed, leaving a zombie task process that the next try must fence; a Celery worker lost while it runs a
connector task, its try handed to the other worker.

One deployment for the module (``tests/support/distributed.py``, module-scoped: starting it takes minutes, so the
example and the faults share it): ``scripts/deploy/`` with three Apache Kafka 4.4.0 KRaft nodes
(``tests/support/kafka_cluster.py``: replication factor 3, ``min.insync.replicas=2``) as the ``pyconnect``
backend, Airflow on the CeleryExecutor (PostgreSQL, Redis, two workers of one slot), moto S3 and a Spark cluster.
The example runs first, on a deployment no fault touched yet. The broker kill and the zombie also run under
``airflow standalone`` (scheduler, DAG processor, API server, LocalExecutor) on the same Kafka cluster, with
``[scheduler] task_instance_heartbeat_timeout`` at 20 s (Airflow's default is 300 s), as on the Celery workers.

- **The example on the deployment** (``example_orders_distributed``, three days triggered with their logical dates,
  ``airflow dags trigger``): tasks on two Celery workers that share no disk, Kafka on three brokers, the lake on
  S3, the Spark step on the standalone cluster. Checked from the data: every record of the topic is once in the
  lake and once in PostgreSQL, Spark's totals equal totals computed from the topic, tasks ran on both workers'
  hostnames, and the Spark applications ran on the cluster's master.

- **A broker SIGKILLed mid-run, then restarted** (DAG ``faults_broker_kill``: an exactly-once DataGen source with
  two tasks over six partitions, then a FileSink with two tasks over what it committed, ``until_offsets``; one
  Airflow retry each). Once the source's committed offsets (read from the store) pass a random 20-60 % of its
  records, one node is SIGKILLed, chosen at random between the node that leads the most of the topic's partitions
  (ties: the transaction coordinator of task 0's transactional id) and the leader of the offsets topic's partition
  that holds the source's offsets. The run must end within its bound: every task succeeds, or a try fails with an
  error that names the brokers and Airflow's retry completes. The node is restarted (bounded, every partition in
  sync again); a rerun of the DAG run (cleared) completes and moves nothing; the topic, read ``read_committed``, and
  the FileSink's committed files hold every record exactly once.
- **A zombie task fenced by the next try** (DAG ``faults_zombie``): see the test's docstring. What Airflow 3 does
  when the process supervising a task dies: nothing at once. No process adopts the task (adoption is for the tasks
  of a dead *scheduler*; a Celery worker's prefork children die with it, ``PR_SET_PDEATHSIG``, and with them the
  supervisors, but the task process, in its own process group, lives on); the task instance stays ``running``
  until the scheduler finds it without heartbeat for ``task_instance_heartbeat_timeout``, fails it and runs the
  next try (``up_for_retry``). With CeleryExecutor's ``task_acks_late`` the unacknowledged message would only be
  redelivered after Redis' ``visibility_timeout`` (86,400 s by default), and the execution API refuses to start a
  try that is no longer queued. The zombie itself ends at its next write to the dead supervisor (a broken pipe).
- **A Celery worker lost mid-run** (DAG ``faults_worker_lost`` on the deployment's Airflow,
  ``scripts/deploy/airflow_celery.py``: CeleryExecutor, Redis, PostgreSQL, two workers of one slot with their own
  hostnames): the worker running the source and its task process are SIGKILLed; the scheduler fails the try after
  ``task_instance_heartbeat_timeout`` and the retry runs on the other worker; its generation fences the lost one.
  Every record once; the Connectors view's Runs show try 1 on the lost worker and try 2 on the other, by hostname.
- **A Celery worker lost under a fanned-out sink** (DAG ``faults_worker_lost_sink``, same deployment: a source, then
  ``fan_out_sink`` with two mapped tasks, one per worker): the worker of one mapped task is lost; that mapped
  instance's retry runs on the other worker after its sibling, rewinds to what the destination holds and completes
  it; each record once; the run's ``workers`` (registry and Connectors view) show the lost try and the retry.

The broker kill is not repeated on Celery: it does not depend on the executor (the backend is the same cluster).
Every wait is bounded and names what it waited for.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.airflow_env import AirflowEnv, stop_group
from tests.support.distributed import (  # noqa: F401 (deployment: the module's fixture)
    HEARTBEAT_TIMEOUT_S,
    RECORDS_PER_DAY,
    deploy_module,
    deployment,
)
from tests.support.kafka_cluster import MIN_ISR, REPLICATION, KafkaCluster
from tests.support.ports import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(1800)]

DAG_ID = "faults_broker_kill"
CONN_ID = "pyconnect_cluster"
RECORDS = 60_000
TASKS = 2
PARTITIONS = 6
START_S = 240.0
"""Bound on Airflow's start (the DAG processor storing the DAG)."""
RUN_S = 420.0
"""Bound on one DAG run: the kill, the cluster noticing the dead node (``broker.session.timeout.ms``), an Airflow
retry and the sink."""
OFFSETS_TOPIC = "connect-offsets"
SETTINGS = {
    "offset.storage.replication.factor": REPLICATION,
    "topic.creation.default.replication.factor": REPLICATION,
    "topic.creation.default.min.insync.replicas": MIN_ISR,
}
"""What the runtime needs to create its topics right on a cluster (docs/kafka.md), as the connection's extra."""

DAG = '''
from datetime import datetime, timedelta

from airflow.sdk import DAG
from airflow_pyconnect.operators.sink import PyConnectSinkOperator
from airflow_pyconnect.operators.source import PyConnectSourceOperator

RETRY = {{"retries": 1, "retry_delay": timedelta(seconds=1)}}

with DAG("{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1) as dag:
    produce = PyConnectSourceOperator(
        task_id="produce", pyconnect_conn_id="{conn_id}", max_seconds=300, **RETRY,
        connector_config={{"name": "{name}-src", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                          "topic": "{topic}", "max.records": {records}, "tasks.max": {tasks}, "batch.size": 200,
                          "poll.delay.ms": 20, "topic.creation.default.partitions": {partitions}}},
    )
    land = PyConnectSinkOperator(
        task_id="land", pyconnect_conn_id="{conn_id}", max_seconds=300, until_offsets=produce.output, **RETRY,
        connector_config={{"name": "{name}-sink", "connector.class": "connect_runtime.connectors.files.FileSink",
                          "topics": "{topic}", "tasks.max": {tasks}, "directory": "{out}"}},
    )
    produce >> land
'''


ZOMBIE_DAG_ID = "faults_zombie"
ZOMBIE_RECORDS = 240_000

ZOMBIE_DAG = '''
from datetime import datetime, timedelta

from airflow.sdk import DAG
from airflow_pyconnect.operators.source import PyConnectSourceOperator

with DAG("{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1) as dag:
    PyConnectSourceOperator(
        task_id="produce", pyconnect_conn_id="{conn_id}", max_seconds=600, retries=1, retry_delay=timedelta(seconds=1),
        connector_config={{"name": "{name}", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                          "topic": "{topic}", "max.records": {records}, "tasks.max": {tasks}, "batch.size": 200,
                          "poll.delay.ms": 100, "topic.creation.default.partitions": {partitions}}},
    )
'''


def wait_for(what: str, check: Callable[[], bool], timeout: float, step: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


class Airflow:
    """A started ``airflow standalone`` (LocalExecutor) on its own home; its metadata DB read directly."""

    def __init__(self, af: AirflowEnv, env: dict[str, str], proc: subprocess.Popen[bytes], log: Path,
                 out: Path) -> None:
        self.af, self.env, self.proc, self.log = af, env, proc, log
        self.out = out
        """The FileSink's directory."""

    def query(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(f"file:{self.af.home / 'airflow.db'}?mode=ro", uri=True, timeout=10)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    def alive(self) -> None:
        assert self.proc.poll() is None, "airflow standalone exited:\n" + self.log.read_text(errors="replace")[-3000:]

    def cli(self, *args: str) -> str:
        return self.af.airflow(*args, extra_env=self.env, timeout=120).stdout

    def run_state(self, run_id: str, dag_id: str = DAG_ID) -> str | None:
        rows = self.query("SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", dag_id, run_id)
        return str(rows[0][0]) if rows else None

    def tries(self, run_id: str, dag_id: str = DAG_ID) -> list[tuple[str, int, str | None, str | None]]:
        """``(task_id, try_number, state, hostname)`` of every try of the run (history and current)."""
        current = self.query("SELECT task_id, try_number, state, hostname FROM task_instance WHERE dag_id = ? "
                             "AND run_id = ?", dag_id, run_id)
        past = self.query("SELECT task_id, try_number, state, hostname FROM task_instance_history WHERE dag_id = ? "
                          "AND run_id = ?", dag_id, run_id)
        return sorted({(str(t), int(n), s, h) for t, n, s, h in [*past, *current]})

    def task_log(self, run_id: str, task_id: str, try_number: int) -> str:
        found = list((self.af.home / "logs").glob(f"dag_id={DAG_ID}/run_id={run_id}/task_id={task_id}/"
                                                   f"attempt={try_number}.log"))
        return found[0].read_text(errors="replace") if found else ""


@pytest.fixture(scope="module")
def cluster(deployment: Any) -> KafkaCluster:  # noqa: F811
    """The deployment's three Kafka nodes: the backend of both Airflows of the module."""
    kafka: KafkaCluster = deployment.kafka
    return kafka


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory, cluster: KafkaCluster) -> Iterator[Airflow]:
    tmp = tmp_path_factory.mktemp("faults-airflow")
    home = tmp / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / f"{DAG_ID}.py").write_text(DAG.format(
        dag_id=DAG_ID, conn_id=CONN_ID, name="faults", topic="faults-orders", records=RECORDS, tasks=TASKS,
        partitions=PARTITIONS, out=tmp / "out"))
    (home / "dags" / f"{ZOMBIE_DAG_ID}.py").write_text(ZOMBIE_DAG.format(
        dag_id=ZOMBIE_DAG_ID, conn_id=CONN_ID, name="zombie-src", topic="zombie-orders", records=ZOMBIE_RECORDS,
        tasks=TASKS, partitions=PARTITIONS))
    af = AirflowEnv(home)
    port = free_port()
    env = {
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps({"conn_type": "pyconnect", "host": cluster.url,
                                                        "extra": json.dumps(SETTINGS)}),
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    }
    af.airflow("db", "migrate", extra_env=env, timeout=180)
    log = tmp / "standalone.log"
    proc = af.popen("standalone", extra_env=env, log=log, new_session=True)
    try:
        deployed = Airflow(af, env, proc, log, tmp / "out")

        def stored() -> bool:
            deployed.alive()
            return (home / "airflow.db").exists() and deployed.query(
                "SELECT count(*) FROM dag WHERE dag_id IN (?, ?)", DAG_ID, ZOMBIE_DAG_ID) == [(2,)]

        wait_for(f"the DAG processor to store {DAG_ID} and {ZOMBIE_DAG_ID}", stored, START_S, step=1.0)
        deployed.cli("dags", "unpause", DAG_ID)
        deployed.cli("dags", "unpause", ZOMBIE_DAG_ID)
        yield deployed
    finally:
        stop_group(proc, grace=10, settle=3)


def committed_records(url: str, name: str, total: int = RECORDS) -> int:
    """Records the source committed so far, from its committed offsets in the store (DataGen's ``position`` is the
    next id of a task, whose ids start at ``index * total // TASKS``)."""
    from connect_runtime import admin, open_backend

    try:
        with open_backend(url, SETTINGS) as be:
            offsets = admin.get_offsets(be, name)["offsets"]
    except Exception:  # the store not created yet, or a node just died: no progress seen this time
        return 0
    return sum(int(o["offset"]["position"]) - int(o["partition"]["task"]) * total // TASKS for o in offsets)


def read_topic(cluster: KafkaCluster, topic: str, expect: int, timeout: float = 120.0) -> dict[int, list[bytes]]:
    """``{partition: [value] in offset order}`` of ``topic``, ``read_committed`` from the beginning to each
    partition's end; read again (bounded) until ``expect`` records are there."""
    import confluent_kafka as ck

    deadline = time.monotonic() + timeout
    while True:
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "test-faults-reader",
                                "isolation.level": "read_committed", "enable.auto.commit": False,
                                "enable.partition.eof": True, "log_level": 0})
        try:
            parts = cluster.admin.list_topics(topic=topic, timeout=10).topics[topic].partitions
            consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in parts])
            records: dict[int, list[bytes]] = {p: [] for p in parts}
            at_eof: set[int] = set()
            while len(at_eof) < len(parts) and time.monotonic() < deadline:
                for m in consumer.consume(10_000, 1.0):
                    if m.error() is None:
                        records[m.partition()].append(m.value())
                        at_eof.discard(m.partition())
                    elif m.error().code() == ck.KafkaError._PARTITION_EOF:
                        at_eof.add(m.partition())
        finally:
            consumer.close()
        if sum(map(len, records.values())) >= expect or time.monotonic() >= deadline:
            return records
        time.sleep(0.5)


def offsets_partition(cluster: KafkaCluster, name: str, timeout: float = 60.0) -> int:
    """The partition of the offsets topic that holds ``name``'s source offsets (its keys start ``["<name>",``),
    found by reading the topic (bounded)."""
    import confluent_kafka as ck

    prefix = json.dumps([name])[:-1].encode()
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "test-faults-offsets",
                            "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0})
    try:
        parts = cluster.admin.list_topics(topic=OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC].partitions
        consumer.assign([ck.TopicPartition(OFFSETS_TOPIC, p, ck.OFFSET_BEGINNING) for p in parts])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in consumer.consume(1000, 1.0):
                if m.error() is None and (m.key() or b"").startswith(prefix):
                    return int(m.partition())
    finally:
        consumer.close()
    raise AssertionError(f"no offsets of {name} in {OFFSETS_TOPIC} within {timeout:.0f} s")


def once(ids: Counter[int], total: int) -> str:
    """What is wrong with ``ids`` as ``range(total)`` each once ('' when nothing is)."""
    if ids == Counter(range(total)):
        return ""
    return (f"{sum(ids.values())} records, {len(ids)} distinct ids; {sum(c - 1 for c in ids.values() if c > 1)} "
            f"duplicates, {len(set(range(total)) - set(ids))} missing")


def finished(airflow: Airflow, run_id: str, dag_id: str = DAG_ID) -> Callable[[], bool]:
    def check() -> bool:
        airflow.alive()
        return airflow.run_state(run_id, dag_id) in ("success", "failed")

    return check


def test_distributed_example_each_record_once_in_every_sink(deployment: Any) -> None:  # noqa: F811
    for worker in deployment.airflow.workers.values():  # both machines up (a no-op unless a test lost one)
        worker.restart()
    example = deploy_module("deploy.example")
    example.prepare(deployment)
    example.run_days(deployment, timeout_s=1500)
    result = example.summary(deployment, RECORDS_PER_DAY)
    out = io.StringIO()
    example.print_summary(result, out)
    assert result["ok"], out.getvalue()
    counts = result["counts"]
    assert counts["expected"] == 3 * RECORDS_PER_DAY
    assert counts["topic"] == counts["lake"] == counts["warehouse"] == counts["expected"], out.getvalue()
    hosts = {t["host"] for t in result["tasks"] if t["state"] == "success"}
    assert {"worker-a", "worker-b"} <= hosts, out.getvalue()
    assert len(result["spark_apps"]) >= len(example.DAYS), out.getvalue()
    assert all(t["state"] == "success" for t in result["tasks"]), out.getvalue()


def test_a_broker_sigkilled_mid_run_then_restarted(airflow: Airflow, cluster: KafkaCluster) -> None:
    from connect_runtime.connectors.files import committed_files

    rng = random.Random(os.environ.get("PYCONNECT_SEED", str(time.time())))
    topic, source = "faults-orders", "faults-src"
    run_id = f"broker_kill_{int(time.time())}"
    airflow.cli("dags", "trigger", DAG_ID, "--run-id", run_id)
    target = int(RECORDS * rng.uniform(0.2, 0.6))
    wait_for(f"the source to commit {target} of {RECORDS} records (or the run to end first)",
             lambda: finished(airflow, run_id)() or committed_records(cluster.url, source) >= target, RUN_S, 0.5)
    assert airflow.run_state(run_id) not in ("success", "failed"), (
        f"the run ended before {target} records were committed: {airflow.tries(run_id)}")
    kind = rng.choice(["data", "offsets"])
    if kind == "data":  # the node leading the most of the topic's partitions (ties: task 0's coordinator)
        leaders = cluster.leader_counts([topic])
        coordinator = cluster.transaction_coordinator(f"connect-cluster-{source}-0")
        victim = max((n.node_id for n in cluster.nodes), key=lambda n: (leaders[n], n == coordinator))
    else:  # the leader of the offsets topic's partition that holds the source's offsets
        victim = cluster.leaders(OFFSETS_TOPIC)[offsets_partition(cluster, source)]
    at_kill = committed_records(cluster.url, source)
    killed = time.monotonic()
    cluster.kill(victim)
    try:
        wait_for(f"the DAG run {run_id} to end after node {victim} was killed", finished(airflow, run_id), RUN_S, 1.0)
        ended_s = time.monotonic() - killed
    finally:
        restart_s = cluster.restart(victim)
    tries = airflow.tries(run_id)
    assert airflow.run_state(run_id) == "success", f"the run did not complete after the kill: {tries}"
    brokers = cluster.bootstrap.split(",")
    for task_id, number, state, _host in tries:
        if state == "failed":  # a try that failed on the dead node: one clear error naming the cluster
            text = airflow.task_log(run_id, task_id, number)
            assert any(b in text for b in brokers), f"{task_id} try {number} failed without naming the brokers"

    # a rerun of the same DAG run (cleared) completes and moves nothing
    airflow.cli("tasks", "clear", DAG_ID, "-y")
    wait_for(f"the cleared run {run_id} to end", lambda: finished(airflow, run_id)() and max(
        n for t, n, _s, _h in airflow.tries(run_id) if t == "land") > max(n for t, n, _s, _h in tries if t == "land"),
        RUN_S, 1.0)
    assert airflow.run_state(run_id) == "success", airflow.tries(run_id)

    by_partition = read_topic(cluster, topic, RECORDS)
    wrong = once(Counter(json.loads(v)["id"] for vs in by_partition.values() for v in vs), RECORDS)
    assert not wrong, f"the topic read_committed: {wrong}"
    out = airflow.out
    sunk: Counter[int] = Counter()
    for p, values in by_partition.items():
        lines = [line for f in committed_files(out, topic, p) for line in f.read_bytes().splitlines() if line.strip()]
        assert [json.loads(x) for x in lines] == [json.loads(v) for v in values], (
            f"FileSink partition {p} does not hold the topic's records in offset order, each once")
        sunk.update(json.loads(x)["id"] for x in lines)
    assert not once(sunk, RECORDS), f"the FileSink output: {once(sunk, RECORDS)}"
    print(json.dumps({"killed node": victim, "leader of": kind, "committed at kill": at_kill, "kill to end s": round(ended_s, 1),
                      "restart s": round(restart_s, 1), "tries": tries}))


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (an exited process not yet reaped counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])


def test_a_zombie_task_left_by_its_sigkilled_supervisor_is_fenced_by_the_next_try(airflow: Airflow,
                                                                                   cluster: KafkaCluster) -> None:
    """The worker's process that supervises the task (Airflow 3's task SDK supervisor: it heart-beats the task
    instance to the API server and relays the task's logs and requests) is SIGKILLed while the connector runs. The
    task process is in a process group of its own (the supervisor's ``setpgid``) and lives on, unsupervised: a
    zombie in Airflow's sense, invisible to Airflow, whose next log line or request to the dead supervisor fails
    (a broken pipe; with this operator's progress line every 5 s it ends within seconds). So that the zombie lives
    past the next try's start, as one that logs nothing, or a paused machine, would, it is SIGSTOPped right after
    the kill (frozen mid-transaction). The task instance stops heart-beating; the scheduler fails it after
    ``task_instance_heartbeat_timeout`` and runs the next try, whose generation fences the zombie. Then the zombie
    is resumed (SIGCONT): whatever it tries, it commits nothing (a commit after the retry read its offsets would
    write ids twice), and it ends. Every record is in the topic exactly once, and the Runs show try 1 fenced and
    try 2 stopped, each with the host Airflow ran it on."""
    from connect_runtime import admin, open_backend

    rng = random.Random(os.environ.get("PYCONNECT_SEED", str(time.time())))
    topic, source = "zombie-orders", "zombie-src"
    run_id = f"zombie_{int(time.time())}"
    airflow.cli("dags", "trigger", ZOMBIE_DAG_ID, "--run-id", run_id)
    target = int(ZOMBIE_RECORDS * rng.uniform(0.1, 0.3))
    wait_for(f"the source to commit {target} of {ZOMBIE_RECORDS} records (or the run to end first)",
             lambda: finished(airflow, run_id, ZOMBIE_DAG_ID)() or committed_records(
                 cluster.url, source, ZOMBIE_RECORDS) >= target, RUN_S, 0.5)
    assert airflow.run_state(run_id, ZOMBIE_DAG_ID) not in ("success", "failed"), (
        f"the run ended before {target} records were committed: {airflow.tries(run_id, ZOMBIE_DAG_ID)}")
    [(pid, host)] = airflow.query("SELECT pid, hostname FROM task_instance WHERE dag_id = ? AND run_id = ?",
                                  ZOMBIE_DAG_ID, run_id)
    task_pid = int(pid)
    supervisor = parent(task_pid)
    # the supervisor first, and gone, before the zombie stops: a process group that becomes orphaned with a stopped
    # member gets SIGHUP (POSIX), which would end the zombie; orphaned while it ran, it stays stopped
    os.kill(supervisor, signal.SIGKILL)
    wait_for("the supervisor to be gone (the task process reparented)", lambda: parent(task_pid) != supervisor,
             30.0, 0.001)
    os.kill(task_pid, signal.SIGSTOP)
    at_kill = committed_records(cluster.url, source, ZOMBIE_RECORDS)
    killed = time.monotonic()
    try:
        def next_generation() -> bool:
            with open_backend(cluster.url, SETTINGS) as be:
                return any(a["generation"] >= 1 for a in admin.run_attempts(be, source))

        wait_for("the next try to begin a new generation (heartbeat timeout, then the retry)", next_generation,
                 RUN_S, 1.0)
        retried_s = time.monotonic() - killed
        assert alive(task_pid), "the frozen zombie is gone"
        os.kill(task_pid, signal.SIGCONT)
        wait_for("the resumed zombie to end", lambda: not alive(task_pid), 120.0, 0.5)
        wait_for(f"the DAG run {run_id} to end", finished(airflow, run_id, ZOMBIE_DAG_ID), RUN_S, 1.0)
    finally:
        if alive(task_pid):
            os.kill(task_pid, signal.SIGKILL)
    tries = airflow.tries(run_id, ZOMBIE_DAG_ID)
    assert airflow.run_state(run_id, ZOMBIE_DAG_ID) == "success", tries
    assert [(n, state) for _t, n, state, _h in tries] == [(1, "failed"), (2, "success")], tries

    by_partition = read_topic(cluster, topic, ZOMBIE_RECORDS)
    wrong = once(Counter(json.loads(v)["id"] for vs in by_partition.values() for v in vs), ZOMBIE_RECORDS)
    assert not wrong, f"the topic read_committed (the zombie must not have committed after the retry began): {wrong}"
    with open_backend(cluster.url, SETTINGS) as be:
        attempts = admin.run_attempts(be, source)
    got = sorted(((a["context"] or {}).get("try_number"), a["state"], a.get("host")) for a in attempts)
    assert got == [("1", "fenced", host), ("2", "stopped", host)], got
    print(json.dumps({"committed at kill": at_kill, "kill to next try s": round(retried_s, 1), "tries": tries,
                      "attempts": [(a["generation"], a["state"], a.get("host"), a["error"]) for a in attempts]}))

# -- on Celery workers (scripts/deploy/airflow_celery.py) --------------------------------------------------------

CELERY_CONN_ID = "pyconnect_default"
"""The deployment's connection to its Kafka cluster (``deploy.BACKEND_SETTINGS``: the same settings as
:data:`SETTINGS`)."""
CELERY_DAG_ID = "faults_worker_lost"
CELERY_SOURCE = "lost-src"
LOST_RECORDS = 120_000
"""The lost worker's source: at 4,000 records/s at most (two tasks of 200 records every 100 ms), long enough to be
killed at 10-30 % of it, short enough that the retry ends soon after."""

SINK_DAG_ID = "faults_worker_lost_sink"
SINK_CONNECTOR = "lost-sink"
SINK_RECORDS = 36_000
"""The fanned-out sink's records: two mapped tasks of 100 records every 100 ms (``put.sleep.ms``), about 18 s each
(keyed by ``id``, so they spread evenly over the partitions; without a key DataGen's batches land on few)."""

SINK_DAG = '''
from datetime import datetime, timedelta

from airflow.sdk import DAG
from airflow_pyconnect.operators.fanout_sink import fan_out_sink
from airflow_pyconnect.operators.source import PyConnectSourceOperator

with DAG("{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, max_active_runs=1) as dag:
    produce = PyConnectSourceOperator(
        task_id="produce", pyconnect_conn_id="{conn_id}", max_seconds=300,
        connector_config={{"name": "{name}-src", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
                          "topic": "{topic}", "max.records": {records}, "tasks.max": 2, "batch.size": 1000,
                          "topic.creation.default.partitions": {partitions}, "transforms": "key",
                          "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
                          "transforms.key.fields": "id"}},
    )
    fan_out_sink(
        "land",
        {{"name": "{name}", "connector.class": "tests.support.sink_helpers.LedgerSinkConnector", "topics": "{topic}",
         "tasks.max": "2", "ledger.path": "{ledger}", "put.sleep.ms": "100", "consumer.max.poll.records": "100"}},
        pyconnect_conn_id="{conn_id}", until_offsets=produce.output, max_seconds=600, retries=1,
        retry_delay=timedelta(seconds=1),
    )
'''
"""A source, then a sink fanned out over two mapped tasks (``fan_out_sink``) that keeps its offsets in its
destination (``LedgerSinkConnector``: a ledger file per partition, rewound on open), the Celery worker of one mapped
task lost mid-run."""


@pytest.fixture(scope="module")
def celery_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Celery faults' directory: the fanned-out sink's ledger files under ``ledger/``."""
    base = tmp_path_factory.mktemp("faults-celery")
    (base / "ledger").mkdir()
    return base


@pytest.fixture(scope="module")
def deployment_dags(celery_base: Path) -> dict[str, str]:
    """The Celery faults' DAGs, in the deployment's DAGs folder from its start: ``faults_worker_lost`` (the zombie
    test's source: one Airflow retry, 1 s apart) and ``faults_worker_lost_sink``."""
    return {
        CELERY_DAG_ID: ZOMBIE_DAG.format(
            dag_id=CELERY_DAG_ID, conn_id=CELERY_CONN_ID, name=CELERY_SOURCE, topic="lost-orders",
            records=LOST_RECORDS, tasks=TASKS, partitions=PARTITIONS),
        SINK_DAG_ID: SINK_DAG.format(
            dag_id=SINK_DAG_ID, conn_id=CELERY_CONN_ID, name=SINK_CONNECTOR, topic="lost-sink-orders",
            records=SINK_RECORDS, partitions=PARTITIONS, ledger=celery_base / "ledger" / SINK_CONNECTOR),
    }


@pytest.fixture(scope="module")
def celery(celery_base: Path, deployment: Any) -> Iterator[Any]:  # noqa: F811
    """Airflow on the CeleryExecutor of the module's deployment (``scripts/deploy/``: PostgreSQL as the metadata DB,
    Redis as Celery's broker, an API server, scheduler, DAG processor and triggerer) with two workers of one task
    slot each and their own hostnames (``worker-a``, ``worker-b``: Airflow's ``hostname_callable``), on the
    deployment's Kafka cluster (connection ``pyconnect_default``), with ``task_instance_heartbeat_timeout`` at
    :data:`HEARTBEAT_TIMEOUT_S`; the DAGs of :func:`deployment_dags` stored and unpaused."""
    af = deployment.airflow

    def stored() -> bool:
        af.check_alive()
        return af.query("SELECT count(*) FROM dag WHERE dag_id IN (%s, %s)", CELERY_DAG_ID, SINK_DAG_ID) == [(2,)]

    wait_for(f"the DAG processor to store {CELERY_DAG_ID} and {SINK_DAG_ID}", stored, START_S, 1.0)
    af.airflow("dags", "unpause", CELERY_DAG_ID)
    af.airflow("dags", "unpause", SINK_DAG_ID)
    af.ledger = celery_base / "ledger" / SINK_CONNECTOR
    yield af


def connectors_view_runs(api_url: str, connector: str) -> list[dict[str, Any]]:
    """The Runs of ``connector`` as the Connectors view shows them (its JSON API on the API server; the
    deployment's simple auth manager makes every caller an admin)."""
    import urllib.request

    with urllib.request.urlopen(f"{api_url}/pyconnect/api/connections/{CELERY_CONN_ID}/runs?connector={connector}",
                                timeout=60) as resp:
        return list(json.loads(resp.read())["runs"])


def lost_message_unacked(celery: Any, run_id: str) -> bool:
    """Whether try 1's Celery message (its task id: the try's ``external_executor_id``) is still in kombu's
    ``unacked`` hash in Redis: never acknowledged and not redelivered, which Redis' transport does only after
    ``visibility_timeout``. A figure for the report, not the guarantee (a redelivered try would be refused)."""
    import redis

    [(task_id,)] = celery.query("SELECT external_executor_id FROM task_instance_history WHERE dag_id = %s AND "
                                "run_id = %s AND try_number = 1", CELERY_DAG_ID, run_id)
    client = redis.Redis.from_url(celery.env["AIRFLOW__CELERY__BROKER_URL"])
    return any(json.loads(v)[0]["headers"]["id"] == task_id for v in client.hvals("unacked"))


def test_a_celery_worker_lost_mid_run_its_try_runs_on_the_other_worker(celery: Any, cluster: KafkaCluster) -> None:
    """The machine of the Celery worker running the source (``worker-a`` or ``worker-b``, as Celery handed it) is
    lost mid-run: the task process is frozen (SIGSTOP to its process group: the task SDK's supervisor puts it in
    a group of its own, so the worker's group alone would not take it), the worker's process group (the worker,
    its prefork child, the task's supervisor) is SIGKILLed, then the task's. Nothing tells Airflow: the task
    instance stays ``running`` until the scheduler finds it without heartbeat for ``task_instance_heartbeat_timeout``
    and fails the try with a retry left (``up_for_retry``); the next try is queued and only the other worker is
    there to take it. Celery does not hand the lost message to the other worker itself (``task_acks_late`` keeps
    it unacknowledged, but Redis redelivers it only after ``visibility_timeout``, 86,400 s by default). The new
    try's generation fences the lost one; every record is in the topic exactly once, and the connector's Runs in
    the Connectors view show try 1 on the lost worker and try 2 on the other, each with its hostname."""
    from connect_runtime import admin, open_backend

    rng = random.Random(os.environ.get("PYCONNECT_SEED", str(time.time())))
    topic, source = "lost-orders", CELERY_SOURCE
    run_id = f"lost_{int(time.time())}"
    celery.airflow("dags", "trigger", CELERY_DAG_ID, "--run-id", run_id)

    def state() -> str | None:
        celery.check_alive()
        rows = celery.query("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", CELERY_DAG_ID, run_id)
        return str(rows[0][0]) if rows else None

    def tries() -> list[tuple[int, str | None, str | None]]:
        """``(try_number, state, hostname)`` of every try of the source (history and current)."""
        return sorted(set(celery.query(
            "SELECT try_number, state, hostname FROM task_instance_history WHERE dag_id = %s AND run_id = %s "
            "UNION SELECT try_number, state, hostname FROM task_instance WHERE dag_id = %s AND run_id = %s",
            CELERY_DAG_ID, run_id, CELERY_DAG_ID, run_id)))

    target = int(LOST_RECORDS * rng.uniform(0.1, 0.3))
    wait_for(f"the source to commit {target} of {LOST_RECORDS} records (or the run to end first)",
             lambda: state() in ("success", "failed") or committed_records(cluster.url, source, LOST_RECORDS)
             >= target, RUN_S, 0.5)
    assert state() not in ("success", "failed"), f"the run ended before {target} records were committed: {tries()}"
    [(pid, host, try_number)] = celery.query("SELECT pid, hostname, try_number FROM task_instance WHERE dag_id = %s "
                                             "AND run_id = %s", CELERY_DAG_ID, run_id)
    assert try_number == 1 and host in celery.workers and pid, (pid, host, try_number)
    task_pid = int(pid)
    other = next(name for name in celery.workers if name != host)
    worker = celery.workers[host]
    assert os.getpgid(task_pid) == task_pid != os.getpgid(worker.proc.pid), "the task is not in a group of its own"
    os.killpg(task_pid, signal.SIGSTOP)  # frozen first: its supervisor must not see it end and report it
    at_kill = committed_records(cluster.url, source, LOST_RECORDS)
    killed = time.monotonic()
    try:
        worker.kill()
    finally:  # also when the worker's end is not seen: no frozen task left behind
        os.killpg(task_pid, signal.SIGKILL)
    wait_for(f"the task process {task_pid} of the lost worker to be gone", lambda: not alive(task_pid), 30.0, 0.1)

    def retried() -> bool:
        return any(n >= 2 for n, _s, _h in tries()) or state() in ("success", "failed")

    wait_for(f"Airflow to retry the source after {host} was lost (heartbeat timeout {HEARTBEAT_TIMEOUT_S} s)",
             retried, RUN_S, 1.0)
    retried_s = time.monotonic() - killed
    wait_for(f"the DAG run {run_id} to end after {host} was lost", lambda: state() in ("success", "failed"), RUN_S,
             1.0)
    ended_s = time.monotonic() - killed
    got_tries = tries()
    assert state() == "success", f"{got_tries}\n{celery.logs()}"
    assert got_tries == [(1, "failed", host), (2, "success", other)], got_tries

    by_partition = read_topic(cluster, topic, LOST_RECORDS)
    wrong = once(Counter(json.loads(v)["id"] for vs in by_partition.values() for v in vs), LOST_RECORDS)
    assert not wrong, f"the topic read_committed: {wrong}"
    with open_backend(cluster.url, SETTINGS) as be:
        attempts = admin.run_attempts(be, source)
    got = sorted(((a["context"] or {}).get("try_number"), a["generation"], a["state"], a.get("host"))
                 for a in attempts)
    assert [(t, h) for t, _g, _s, h in got] == [("1", host), ("2", other)], got
    assert got[0][2] in ("died", "fenced") and got[1][2] == "stopped" and got[1][1] > got[0][1], got
    view = sorted((r.get("try_number"), r.get("state"), r.get("host")) for r in connectors_view_runs(
        celery.api_url, source) if r.get("try_number"))
    assert view == [("1", got[0][2], host), ("2", "stopped", other)], view
    print(json.dumps({"lost": host, "retried on": other, "committed at kill": at_kill,
                      "try 1's Celery message still unacknowledged": lost_message_unacked(celery, run_id),
                      "kill to retry s": round(retried_s, 1), "kill to end s": round(ended_s, 1),
                      "tries": got_tries, "attempts": got, "view": view}))


def test_a_celery_worker_lost_under_a_fanned_out_sink_task_its_retry_runs_on_the_other_worker(
        celery: Any, cluster: KafkaCluster) -> None:
    """A sink fanned out (``fan_out_sink``: a plan, two mapped task instances, one per worker, a merge); the machine
    of the worker running one mapped task is lost mid-run, as in the source's test above. The scheduler fails that
    mapped instance's try after ``task_instance_heartbeat_timeout``; its retry (the same ``map_index``, the same
    plan and partitions) runs on the other worker once that worker's own mapped task is done, and rewinds to what
    the destination holds. The sibling runs once, untouched. Every record of the topic is in the destination once;
    the fanned-out run's ``workers`` in the registry and the Connectors view show the lost try on the lost worker
    and the retry on the other, by hostname."""
    from connect_runtime import admin, open_backend
    from tests.support.sink_helpers import read_ledger

    for worker in celery.workers.values():  # the source's test above lost one: the machine is back
        worker.restart()
    rng = random.Random(os.environ.get("PYCONNECT_SEED", str(time.time())))
    run_id = f"lost_sink_{int(time.time())}"
    celery.airflow("dags", "trigger", SINK_DAG_ID, "--run-id", run_id)

    def state() -> str | None:
        celery.check_alive()
        rows = celery.query("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", SINK_DAG_ID, run_id)
        return str(rows[0][0]) if rows else None

    def tries(map_index: int) -> list[tuple[int, str | None, str | None]]:
        """``(try_number, state, hostname)`` of every try of mapped task ``land[map_index]``."""
        return sorted(set(celery.query(
            "SELECT try_number, state, hostname FROM task_instance_history WHERE dag_id = %s AND run_id = %s AND "
            "task_id = 'land' AND map_index = %s UNION SELECT try_number, state, hostname FROM task_instance WHERE "
            "dag_id = %s AND run_id = %s AND task_id = 'land' AND map_index = %s",
            SINK_DAG_ID, run_id, map_index, SINK_DAG_ID, run_id, map_index)))

    def running() -> dict[int, tuple[int, str]]:
        """``{map_index: (pid, hostname)}`` of the mapped tasks running now."""
        return {int(m): (int(pid), str(host)) for m, pid, host in celery.query(
            "SELECT map_index, pid, hostname FROM task_instance WHERE dag_id = %s AND run_id = %s AND task_id = "
            "'land' AND state = 'running' AND pid IS NOT NULL", SINK_DAG_ID, run_id)}

    target = int(SINK_RECORDS * rng.uniform(0.1, 0.3))
    wait_for(f"both mapped sink tasks running and {target} of {SINK_RECORDS} records in the destination (or the "
             "run to end first)", lambda: state() in ("success", "failed") or (
                 len(running()) == 2 and len(read_ledger(celery.ledger)) >= target), RUN_S, 0.5)
    now = running()
    assert state() not in ("success", "failed") and len(now) == 2, f"the run ended first: {tries(0)} {tries(1)}"
    victim = rng.choice(sorted(now))
    task_pid, host = now[victim]
    sibling_host = now[1 - victim][1]
    assert host in celery.workers and sibling_host != host, now
    os.killpg(task_pid, signal.SIGSTOP)
    at_kill = len(read_ledger(celery.ledger))
    killed = time.monotonic()
    try:
        celery.workers[host].kill()
    finally:
        os.killpg(task_pid, signal.SIGKILL)
    wait_for(f"the task process {task_pid} of the lost worker to be gone", lambda: not alive(task_pid), 30.0, 0.1)
    wait_for(f"Airflow to retry land[{victim}] after {host} was lost", lambda: any(
        n >= 2 for n, _s, _h in tries(victim)) or state() in ("success", "failed"), RUN_S, 1.0)
    retried_s = time.monotonic() - killed
    wait_for(f"the DAG run {run_id} to end after {host} was lost", lambda: state() in ("success", "failed"), RUN_S,
             1.0)
    ended_s = time.monotonic() - killed
    assert state() == "success", f"{tries(victim)} {tries(1 - victim)}\n{celery.logs()}"
    assert tries(victim) == [(1, "failed", host), (2, "success", sibling_host)], tries(victim)
    assert tries(1 - victim) == [(1, "success", sibling_host)], tries(1 - victim)

    lines = read_ledger(celery.ledger)
    wrong = once(Counter(json.loads(v)["id"] for _t, _p, _o, v in lines), SINK_RECORDS)
    assert not wrong, f"the destination: {wrong}"
    by_partition: dict[int, list[int]] = {}
    for _t, p, o, _v in lines:
        by_partition.setdefault(int(p), []).append(int(o))
    assert all(offs == sorted(set(offs)) for offs in by_partition.values()), "each offset once, in order (the " \
        "transactions' markers leave gaps)"

    with open_backend(cluster.url, SETTINGS) as be:
        [attempt] = [a for a in admin.run_attempts(be, SINK_CONNECTOR) if a.get("workers")]
    workers = sorted((int(w["task"]), int(w["try_number"]), w["host"]) for w in attempt["workers"])
    assert workers == sorted([(victim, 1, host), (victim, 2, sibling_host), (1 - victim, 1, sibling_host)]), workers
    [view] = [r for r in connectors_view_runs(celery.api_url, SINK_CONNECTOR) if r.get("workers")]
    assert sorted((int(w["task"]), int(w["try_number"]), w["host"]) for w in view["workers"]) == workers, view
    print(json.dumps({"lost": host, "mapped task": victim, "retried on": sibling_host, "ledger lines at kill": at_kill,
                      "kill to retry s": round(retried_s, 1), "kill to end s": round(ended_s, 1),
                      "workers": workers, "attempt": attempt["state"]}))
