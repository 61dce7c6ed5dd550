"""The Spark step on a Spark standalone cluster (scripts/deploy/spark_cluster.py: a master and two workers on
loopback), submitted with ``spark-submit --master spark://... --deploy-mode client``, as the distributed example
runs it (issue 33).

- The committed range read on the cluster equals the one read in local mode (the process's ``local[2]`` session),
  on the Kafka path (Spark's own Kafka source, the jars as ``--jars``; the range holds another writer's aborted
  transactions) and on the lake path (the ParquetSink's files, ``read_lake``).
- A Spark worker SIGKILLed (with its executors, as a lost machine) while tasks of the read run on it: Spark
  reschedules them on the other worker and the ids read are exactly the committed range, each once. What we rely
  on is Spark's: the master reports the worker lost, the driver removes its executors and re-runs the tasks that
  ran there, and a task lost with its executor for a reason not caused by the application does not count toward
  ``spark.task.maxFailures`` (``ExecutorLostFailure.countTowardsTaskFailures``; the driver logs "Not counting
  this failure towards the maximum number of failures").
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.backends import ProducerRecord, open_backend
from scripts.deploy.spark_cluster import SparkCluster, SparkWorker, spark_cluster
from tests.support import REPO
from tests.support.ports import free_port

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]
JOB = REPO / "tests" / "support" / "spark_cluster_job.py"
SUBMIT_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A master and two workers (1 core, 1g each) shared by the module; our package importable in the workers'
    Python (``PYTHONPATH``, as installing it on each worker machine would make it)."""
    with spark_cluster(tmp_path_factory.mktemp("spark-cluster"), env={"PYTHONPATH": str(REPO)}) as running:
        yield running


def _submit_args(cluster: SparkCluster, out: Path, app_args: list[str], *, jars: str | None,
                 ui_port: int | None = None, conf: tuple[str, ...] = ()) -> list[str]:
    ui = ["--conf", f"spark.ui.port={ui_port}"] if ui_port else ["--conf", "spark.ui.enabled=false"]
    return ["spark-submit", "--master", cluster.master_url, "--deploy-mode", "client",
            "--conf", "spark.executor.memory=512m", "--conf", "spark.driver.memory=512m",
            "--conf", "spark.port.maxRetries=0", *ui, *(["--jars", jars] if jars else []),
            *(arg for c in conf for arg in ("--conf", c)),
            str(JOB), *app_args, "--out", str(out)]


def _env() -> dict[str, str]:
    from airflow_pyconnect.spark import spark_env

    return {**os.environ, **spark_env(), "PYTHONPATH": str(REPO)}


NO_PYTHON_ON_WORKERS = ("spark.pyspark.python=/nonexistent/python-on-the-workers",
                        f"spark.pyspark.driver.python={sys.executable}")
"""The native reads run in the executors' JVMs: a Python that does not exist on the workers must not matter."""


def _run_on_cluster(cluster: SparkCluster, tmp_path: Path, app_args: list[str], *, jars: str | None = None) -> Any:
    out = tmp_path / f"out-{uuid.uuid4().hex[:6]}.json"
    proc = subprocess.run(_submit_args(cluster, out, app_args, jars=jars, conf=NO_PYTHON_ON_WORKERS), env=_env(),
                          capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def _committed_with_aborted(kafka_url: str, records: int, rounds: int = 4) -> tuple[dict[str, Any], list[int]]:
    """``records`` ids committed by writer A on 2 partitions in ``rounds`` transactions, each interleaved with
    writer B's transaction of negative ids that aborts: the ranges ``[A's first offset, end)`` per partition hold
    B's records and both writers' markers."""
    topic = f"spark-cluster-{uuid.uuid4().hex[:8]}"
    per_round = records // rounds
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    with open_backend(kafka_url) as backend:
        backend.create_topics({topic: 2})
        a = backend.transactional_producer(f"{topic}-a")
        b = backend.transactional_producer(f"{topic}-b")
        try:
            a.init_transactions(30)
            b.init_transactions(30)
            for r in range(rounds):
                ids = range(r * per_round, (r + 1) * per_round)
                a.begin_transaction()
                b.begin_transaction()
                half = len(ids) // 2
                a.send([ProducerRecord(topic, i % 2, None, json.dumps({"id": i}).encode()) for i in ids[:half]])
                written = [a.flush(30).ranges]  # a flush inside a transaction reports what it wrote since the last
                b.send([ProducerRecord(topic, i % 2, None, json.dumps({"id": -1 - i}).encode()) for i in ids[:50]])
                b.flush(30)
                a.send([ProducerRecord(topic, i % 2, None, json.dumps({"id": i}).encode()) for i in ids[half:]])
                written.append(a.flush(30).ranges)
                b.abort_transaction(30)
                a.commit_transaction([], 30)
                for (_, partition), (start, end) in (item for w in written for item in w.items()):
                    first.setdefault(partition, start)
                    last[partition] = max(end, last.get(partition, end))
        finally:
            a.close()
            b.close()
    ranges = {topic: {str(p): [first[p], _settled_end(kafka_url, (topic, p), last[p] + 1)] for p in first}}
    return ranges, list(range(rounds * per_round))


def _settled_end(kafka_url: str, tp: tuple[str, int], at_least: int) -> int:
    """The partition's high watermark once A's last commit marker landed (at or past ``at_least``)."""
    import confluent_kafka as ck

    from connect_runtime.backends import kafka_bootstrap_servers

    watcher = ck.Consumer({"bootstrap.servers": kafka_bootstrap_servers(kafka_url), "group.id": uuid.uuid4().hex})
    try:
        deadline = time.monotonic() + 30
        while (end := watcher.get_watermark_offsets(ck.TopicPartition(*tp), 5, cached=False)[1]) < at_least:
            assert time.monotonic() < deadline, f"waited 30 s for {tp}'s high watermark to reach {at_least}: {end}"
            time.sleep(0.05)
        return int(end)
    finally:
        watcher.close()


@pytest.mark.kafka
@pytest.mark.faithful_kafka
def test_the_kafka_range_read_on_the_cluster_equals_the_local_read(
        cluster: SparkCluster, spark_with_kafka: Any, spark_kafka_jars: list[str], kafka_url: str,
        tmp_path: Path) -> None:
    from connect_runtime.spark import read_kafka_range

    ranges, expected = _committed_with_aborted(kafka_url, 2000)
    local = sorted(int(r.id) for r in read_kafka_range(spark_with_kafka, kafka_url, ranges, schema="id long")
                   .collect())
    assert local == expected
    on_cluster = _run_on_cluster(cluster, tmp_path, ["--backend", kafka_url, "--ranges", json.dumps(ranges)],
                                 jars=",".join(spark_kafka_jars))
    assert on_cluster["ids"] == local
    assert on_cluster["app"].startswith("app-")  # a standalone application id (local mode's is "local-...")


def test_the_lake_range_read_on_the_cluster_equals_the_local_read(cluster: SparkCluster, spark_session: Any,
                                                                   sqlite_url: str, tmp_path: Path) -> None:
    """The lake on a directory every worker sees (on one machine, a local one; across machines, object storage
    through Spark's S3A, docs/spark.md "On a Spark cluster")."""
    from connect_runtime.runtime.sink import run_sink
    from connect_runtime.spark import read_lake

    with open_backend(sqlite_url) as backend:
        backend.create_topics({"orders": 2})
        producer = backend.producer()
        producer.send([ProducerRecord("orders", i % 2, None, json.dumps({"id": i, "amount": i * 0.5}).encode())
                       for i in range(400)])
        producer.flush(30)
        producer.close()
    lake = f"file://{tmp_path / 'lake'}"
    config = {"name": "lake", "connector.class": "connect_runtime.connectors.lake.ParquetSink", "topics": "orders",
              "path": lake, "flush.size": "25"}
    day1, day2 = {"orders": {"0": [0, 120], "1": [0, 80]}}, {"orders": {"0": [120, 200], "1": [80, 200]}}
    for day in (day1, day2):
        run_sink(config, sqlite_url, until_offsets=day, max_seconds=60)
    local = sorted(int(r.id) for r in read_lake(spark_session, lake, day2).collect())
    assert local == sorted([2 * o for o in range(120, 200)] + [2 * o + 1 for o in range(80, 200)])
    on_cluster = _run_on_cluster(cluster, tmp_path, ["--lake", lake, "--ranges", json.dumps(day2)])
    assert on_cluster["ids"] == local


def test_a_missing_jar_fails_before_the_read_naming_it(spark_session: Any) -> None:
    """What a cluster needs and this session lacks fails on the driver, before Spark plans the read, naming the jar
    and the fix: Hadoop's S3A for an ``s3a://`` lake (pyspark ships no hadoop-aws), a filesystem for ``s3://``;
    a class the driver cannot load is reported as such (the Kafka source's check, on a session without its jars)."""
    from connect_runtime.spark import SparkClasspathError, read_lake
    from connect_runtime.spark._classpath import class_loadable

    with pytest.raises(SparkClasspathError, match=r"hadoop-aws.*software.amazon.awssdk:bundle"):
        read_lake(spark_session, "s3://lake/raw", {"orders": {"0": [0, 10]}}, url_scheme="s3a")
    with pytest.raises(SparkClasspathError, match=r'url_scheme="s3a"'):
        read_lake(spark_session, "s3://lake/raw", {"orders": {"0": [0, 10]}})
    assert class_loadable(spark_session, "org.apache.spark.sql.SparkSession") is True
    assert class_loadable(spark_session, "org.example.NotThere") is False


# -- the fault: a Spark worker lost during the read ------------------------------------------------------------------


def _json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _executor_ids(worker: SparkWorker) -> set[str]:
    """The executor ids of the executors ``worker`` started (its process group's ``CoarseGrainedExecutorBackend``
    processes, by their ``--executor-id``)."""
    ids: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != worker.pid:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):  # gone meanwhile
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv and b"--executor-id" in argv:
            ids.add(argv[argv.index(b"--executor-id") + 1].decode())
    return ids


def _kill_worker_running_tasks(proc: subprocess.Popen[str], cluster: SparkCluster, ui_port: int, after_tasks: int,
                               bound_s: float = 240.0) -> SparkWorker | None:
    """Once the application completed ``after_tasks`` tasks and a worker's executor has tasks running, SIGKILL that
    worker (and its executors); None when the application ended first. Waits at most ``bound_s`` for that."""
    api = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    deadline = time.monotonic() + bound_s
    while proc.poll() is None:
        assert time.monotonic() < deadline, f"waited {bound_s:.0f} s for {after_tasks} tasks done and one running"
        try:
            apps = _json(api)
            executors = _json(f"{api}/{apps[0]['id']}/executors") if apps else []
        except (OSError, ValueError, IndexError):  # the driver's UI not up yet, or already down
            time.sleep(0.05)
            continue
        done = sum(int(e.get("completedTasks", 0)) for e in executors)
        running = {str(e["id"]) for e in executors if int(e.get("activeTasks", 0)) > 0}
        if done >= after_tasks and running:
            for worker in cluster.workers:
                if worker.alive() and _executor_ids(worker) & running:
                    worker.kill()
                    return worker
        time.sleep(0.05)
    return None


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.faithful_kafka
def test_a_worker_lost_during_the_read_spark_reschedules_and_the_ids_are_exact(
        cluster: SparkCluster, spark_kafka_jars: list[str], kafka_url: str, tmp_path: Path) -> None:
    """Runs last in the module: it leaves the cluster one worker short."""
    rng = random.Random()
    ranges, expected = _committed_with_aborted(kafka_url, 4000)
    for partitions in (16, 32, 64):  # more tasks when the application ended before the kill landed
        out, ui_port = tmp_path / f"out-{partitions}.json", free_port()
        args = ["--backend", kafka_url, "--ranges", json.dumps(ranges), "--partitions", str(partitions),
                "--slow-task-s", "0.5"]
        log = tmp_path / f"submit-{partitions}.log"
        with open(log, "w") as err:
            proc = subprocess.Popen(_submit_args(cluster, out, args, jars=",".join(spark_kafka_jars),
                                                 ui_port=ui_port),
                                    env=_env(), stdout=subprocess.DEVNULL, stderr=err, text=True, cwd=tmp_path,
                                    start_new_session=True)
        try:
            killed = _kill_worker_running_tasks(proc, cluster, ui_port, after_tasks=rng.randint(1, partitions // 4))
            proc.wait(SUBMIT_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait(30)
        assert proc.returncode == 0, log.read_text()[-4000:]
        if killed is None:
            continue
        assert json.loads(out.read_text())["ids"] == expected  # each committed id once, no aborted one
        driver_log = log.read_text()
        assert "Lost executor" in driver_log  # the driver saw the executor go (the master: "worker lost")
        # a task was running there, was re-run, and Spark did not count it toward spark.task.maxFailures
        assert "Not counting this failure towards the maximum number of failures" in driver_log
        workers = {w["id"]: w["state"] for w in cluster.status()["workers"]}
        assert sum(state == "ALIVE" for state in workers.values()) == 1, workers
        return
    raise AssertionError("the read ended before a worker could be killed with tasks running on it, three times")
