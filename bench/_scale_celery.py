"""``bench_scale_workers.py --celery``: the sink rows as mapped Airflow tasks on two Celery workers, and the
distributed example pipeline (issue 33, item 5).

Sink rows: the deployment is what ``scripts/deploy/`` starts for Airflow: Redis, PostgreSQL (the metadata database),
three KRaft brokers (RF 3, ``min.insync.replicas=2``) and Airflow on the CeleryExecutor with workers ``worker-a`` and
``worker-b`` (concurrency 2 each); no Spark cluster and no S3 (the sink rows need neither; on 2 cores they would only
take CPU). The DAG ``pyconnect_bench_scale`` (written to a DAGs folder of its own) fans out the FileSink connector
of its run's conf (the ``pyconnect`` connection ``pyconnect_bench`` names the cluster); each mapped instance runs
its task (its partitions, as the plan dealt them) and writes, from inside the task process, its records, wall
stamps, CPU seconds (``time.process_time()`` around the operator's ``execute``: every thread of the task process)
and peak RSS (``VmHWM``, and the same at the task's start: what the Airflow task process weighs before it moves a
record) and its worker's name to a JSON file the bench reads. The bench reads the FileSink's directory back and
checks each record id once.

``tasks.max=T`` is one FileSink connector fanned out as ``fan_out_sink`` does it (the plan task, ``T`` mapped
instances of ``PyConnectSinkTaskOperator``, the merge), spelled out in the DAG so that each mapped instance measures
itself from inside its task process. The connector's directory is one folder both workers write (they are on one
machine: ``[pyconnect] workers_share_disk`` says so to the placement check).

Per worker (:class:`WorkerSampler`): every 0.5 s, each Celery worker's whole process tree (the ``airflow celery
worker`` process, its pool processes, the task supervisors and the task processes, Spark's driver JVM in the example)
is read with psutil: the sum of its processes' PSS (shared pages counted once), its peak kept per run; and the tree's
CPU seconds (every live process's own and reaped children's time, plus the root's), its difference over the run.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DAG_ID = "pyconnect_bench_scale"
CONN_ID = "pyconnect_bench"

DAG_TEXT = '''
import json, os, time
import pendulum
from airflow.sdk import DAG
from airflow_pyconnect.operators.fanout_sink import (
    PyConnectMergeSinkResultsOperator, PyConnectPlanSinkOperator, PyConnectSinkTaskOperator)


def _hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class MeasuredSinkTask(PyConnectSinkTaskOperator):
    """The fan-out's mapped sink task, its figures written from inside the task process."""

    def execute(self, context):
        rss0 = _hwm()
        t0, w0 = time.process_time(), time.time()
        result = super().execute(context)
        out = {"records": result["records"], "start": w0, "end": time.time(), "cpu": time.process_time() - t0,
               "rss_kb": _hwm(), "rss_start_kb": rss0, "pid": os.getpid(), "index": self.task_index,
               "worker": os.environ.get("PYCONNECT_WORKER_HOSTNAME", "?")}
        with open(os.path.join(context["dag_run"].conf["out"], f"task-{self.task_index}.json"), "w") as f:
            json.dump(out, f)
        return result


with DAG(dag_id="%(dag_id)s", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
         max_active_tasks=8, render_template_as_native_obj=True):
    # fan_out_sink("sink", ...), spelled out to measure the mapped task from inside
    config, until = "{{ dag_run.conf['config'] }}", "{{ dag_run.conf['until'] }}"
    plan = PyConnectPlanSinkOperator(task_id="sink_plan", connector_config=config, pyconnect_conn_id="%(conn_id)s",
                                     until_offsets=until)
    mapped = MeasuredSinkTask.partial(task_id="sink", plan=plan.output["plan"], connector_config=config,
                                      pyconnect_conn_id="%(conn_id)s").expand(task_index=plan.output)
    PyConnectMergeSinkResultsOperator(task_id="sink_merge", results=mapped.output)
'''


class WorkerSampler:
    """Samples each Celery worker's process tree every ``interval_s`` in a thread (see the module docstring)."""

    def __init__(self, roots: Callable[[], dict[str, int]], interval_s: float = 0.5) -> None:
        self.roots = roots
        self.interval_s = interval_s
        self.peak_mb: dict[str, float] = {}
        self.cpu_s: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-sampler", daemon=True)

    @staticmethod
    def _tree(pid: int) -> tuple[float, float]:
        """(PSS MB, CPU s) of the process tree under ``pid``."""
        import psutil

        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0.0, 0.0
        pss = cpu = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                cpu += t.user + t.system + t.children_user + t.children_system
                pss += p.memory_full_info().pss / 2**20
            except psutil.Error:  # exited between the listing and the read: its time is in its parent's now
                continue
        return pss, cpu

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for name, pid in self.roots().items():
                pss, cpu = self._tree(pid)
                with self._lock:
                    self.peak_mb[name] = max(self.peak_mb.get(name, 0.0), pss)
                    self.cpu_s[name] = cpu

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    @contextlib.contextmanager
    def window(self) -> Iterator[dict[str, dict[str, float]]]:
        """Yields a dict filled on exit: per worker, ``peak_mb`` (tree PSS) and ``cpu_s`` over the window."""
        with self._lock:
            self.peak_mb = {}
            cpu0 = {name: self._tree(pid)[1] for name, pid in self.roots().items()}
        out: dict[str, dict[str, float]] = {}
        yield out
        time.sleep(self.interval_s * 2)  # one more sample after the last task ended
        with self._lock:
            for name, pid in self.roots().items():
                out[name] = {"peak_mb": self.peak_mb.get(name, 0.0), "cpu_s": self._tree(pid)[1] - cpu0[name]}


def worker_pids(af: Any) -> Callable[[], dict[str, int]]:
    return lambda: {name: w.proc.pid for name, w in af.workers.items() if w.proc is not None}


@contextlib.contextmanager
def celery_deployment(base: Path) -> Iterator[tuple[Any, str, dict[str, str], WorkerSampler]]:
    """Yields ``(airflow, kafka bootstrap, backend settings, sampler)`` of the deployment described above."""
    sys.path.insert(0, str(REPO / "scripts"))
    from deploy import BACKEND_SETTINGS, kafka_cluster
    from deploy.airflow_celery import airflow_celery
    from deploy.servers import postgres_server, redis_server

    dags = base / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    (dags / "bench_scale.py").write_text(DAG_TEXT % {"dag_id": DAG_ID, "conn_id": CONN_ID})
    with contextlib.ExitStack() as stack:
        redis_url = stack.enter_context(redis_server(base / "redis"))
        pg = stack.enter_context(postgres_server(("airflow",)))
        kafka = stack.enter_context(kafka_cluster(base / "kafka"))
        conn = {"conn_type": "pyconnect", "host": str(kafka.url), "extra": json.dumps(dict(BACKEND_SETTINGS))}
        af = stack.enter_context(airflow_celery(base, dags_folder=dags, metadata_url=f"{pg}/airflow",
                                                broker_url=redis_url, env={
                                                    "PYTHONPATH": str(REPO), f"AIRFLOW_CONN_{CONN_ID.upper()}":
                                                    json.dumps(conn),
                                                    # both workers are on this machine: the sink's folder is shared
                                                    "AIRFLOW__PYCONNECT__WORKERS_SHARE_DISK": "true"}))
        wait_parsed(af)
        af.airflow("dags", "unpause", DAG_ID)
        sampler = WorkerSampler(worker_pids(af))
        sampler.start()
        stack.callback(sampler.stop)
        yield af, str(kafka.url).removeprefix("kafka://"), dict(BACKEND_SETTINGS), sampler


def wait_parsed(af: Any, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if af.query("SELECT dag_id FROM dag WHERE dag_id = %s", DAG_ID):
            return
        time.sleep(2)
    raise TimeoutError(f"waited {timeout_s:.0f} s for the DAG processor to store {DAG_ID}\n{af.logs()}")


def run_on_celery(af: Any, run_id: str, work: Path, topic: str, name: str, tasks: int, ends: dict[int, int],
                  timeout_s: float) -> tuple[list[dict[str, Any]], float, Path]:
    """One DAG run: FileSink connector ``name`` fanned out with ``tasks.max`` ``tasks`` up to ``ends``; returns each
    mapped instance's figures, the run's wall seconds as the metadata database has them (queued by the scheduler to
    its end) and the connector's directory."""
    from deploy.airflow_celery import wait_dag_runs

    out, directory = work / name, work / name / "sink"
    out.mkdir(parents=True)
    conf = {"out": str(out), "until": {topic: {str(p): e for p, e in ends.items()}},
            "config": {"name": name, "connector.class": "connect_runtime.connectors.files.FileSink", "topics": topic,
                       "tasks.max": str(tasks), "directory": str(directory), "consumer.max.poll.records": "5000"}}
    before = len(af.query("SELECT run_id FROM dag_run WHERE dag_id = %s AND state = 'success'", DAG_ID))
    af.airflow("dags", "trigger", DAG_ID, "--run-id", run_id, "--conf", json.dumps(conf))
    wait_dag_runs(af, DAG_ID, before + 1, timeout_s)
    (wall,) = af.query("SELECT EXTRACT(EPOCH FROM end_date - start_date) FROM dag_run WHERE dag_id = %s "
                       "AND run_id = %s", DAG_ID, run_id)[0]
    figures = [json.loads(f.read_text()) for f in sorted(out.glob("task-*.json"))]
    if len(figures) != tasks:
        raise RuntimeError(f"run {run_id}: {len(figures)} of {tasks} mapped sink tasks reported their figures")
    return figures, float(wall), directory


def per_host(figures: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per worker host: its task processes' CPU seconds (summed) and peak RSS (the largest), from the tasks."""
    hosts: dict[str, dict[str, float]] = {}
    for f in figures:
        h = hosts.setdefault(f["worker"], {"tasks": 0, "cpu_s": 0.0, "rss_mb": 0.0, "records": 0})
        h["tasks"] += 1
        h["cpu_s"] += f["cpu"]
        h["rss_mb"] = max(h["rss_mb"], f["rss_kb"] / 1024)
        h["records"] += f["records"]
    return hosts


def example_row(base: Path, records_per_day: int, timeout_s: float) -> dict[str, Any]:
    """The distributed example (``scripts/deploy/example.py``) for its three days with ``records_per_day``:
    wall seconds from the first trigger to the last day's success, per-task durations and hosts, the summary's
    checks (every record once in the lake, the warehouse and the Spark totals), per-worker tree figures."""
    sys.path.insert(0, str(REPO / "scripts"))
    from deploy import distributed
    from deploy.example import DAG_ID as EXAMPLE_DAG
    from deploy.example import DAYS, prepare, run_days, summary

    t0 = time.monotonic()
    with distributed(base, dags_folder=REPO / "dags",
                     env={"AIRFLOW_VAR_PYCONNECT_DISTRIBUTED_RECORDS": str(records_per_day)}) as d:
        up_s = time.monotonic() - t0
        prepare(d)
        sampler = WorkerSampler(worker_pids(d.airflow))
        sampler.start()
        try:
            with sampler.window() as workers:
                t = time.monotonic()
                run_days(d, timeout_s)
                wall = time.monotonic() - t
        finally:
            sampler.stop()
        runs = d.airflow.query("SELECT run_id, EXTRACT(EPOCH FROM end_date - start_date) FROM dag_run "
                               "WHERE dag_id = %s ORDER BY logical_date", EXAMPLE_DAG)
        tasks = d.airflow.query("SELECT task_id, map_index, hostname, EXTRACT(EPOCH FROM end_date - start_date) "
                                "FROM task_instance WHERE dag_id = %s AND state = 'success'", EXAMPLE_DAG)
        result = summary(d, records_per_day)
    by_task: dict[str, list[float]] = {}
    hosts: dict[str, dict[str, int]] = {}
    for task_id, map_index, host, seconds in tasks:
        key = task_id if map_index < 0 else f"{task_id}[{map_index}]"
        by_task.setdefault(key, []).append(float(seconds))
        hosts.setdefault(str(host), {}).setdefault(task_id, 0)
        hosts[str(host)][task_id] += 1
    return {"records": records_per_day * len(DAYS), "days": len(DAYS), "wall_s": wall, "up_s": up_s,
            "runs_s": [float(s) for _, s in runs], "tasks_s": by_task, "hosts": hosts, "workers": workers,
            "ok": result["ok"], "checks": result["checks"], "counts": result["counts"]}


__all__ = ["DAG_ID", "WorkerSampler", "celery_deployment", "example_row", "per_host", "run_on_celery"]
