"""Scale: one sink over 8 partitions with ``tasks.max`` 1, 2 and 4, per worker (issue 33, item 5).

Two modes. ``--celery`` (the one issue 33.5 asks for) runs the rows as Airflow tasks on the two Celery workers of
the distributed deployment (``scripts/deploy/``) and then the distributed example pipeline; without it, the rows
are worker processes started directly against one broker (what a task costs without Airflow around it).

``--celery`` (``bench/_scale_celery.py``): Redis, PostgreSQL as the metadata database, three Apache Kafka 4.4.0
KRaft brokers (RF 3, ``min.insync.replicas=2``) and Airflow 3 on the CeleryExecutor with ``worker-a`` and
``worker-b`` (concurrency 2 each, each its own ``AIRFLOW_HOME`` and hostname):

1. fill topic ``scale`` (8 partitions, RF 3) once with ``--records`` small JSON records (one idempotent
   confluent-kafka producer, ``acks=all``, lz4, partition ``i % 8`` named per record);
2. for ``tasks.max`` T in ``--tasks`` (1, 2, 4), ``--repeat`` rounds: one DAG run whose mapped task expands to T
   instances, instance k a one-task FileSink connector over the partitions ``k::T`` (``until_offsets`` names only
   those) into a directory under its worker's ``AIRFLOW_HOME``. Not one connector with ``tasks.max=T``: the
   codebase has no sink fan-out operator (``fan_out_source`` only), and two runs of one sink connector at once
   fence each other (``SinkCommitFence``), so T connectors dealt the partitions the way ``sink/planning.assign``
   deals them to T tasks stand for it; Celery places the instances (with T=2 they landed one per worker in every
   run measured, with T=4 two per worker);
3. flat memory: T=1 over the first ``--flat-records`` (0.5M) records against the 2M row;
4. the example pipeline (``dags/example_orders_distributed.py`` on ``deploy.distributed``: also moto S3 and a
   Spark master with two workers) for its three days with ``--example-records`` per day (``deploy.example``'s
   ``prepare``/``run_days``/``summary``): records/s from the first trigger to the last day's success, each task's
   duration, and the summary's checks (each record once in the topic, the lake and the warehouse; Spark's totals
   equal to totals computed from the topic).

Rate: records over the span from the first instance's ``run_sink`` start to the last one's end (stamped inside the
task processes); ``run s`` is the DAG run as the metadata database has it (scheduling included). Per worker: its
task processes' CPU seconds (``time.process_time()`` around ``run_sink``, all threads) and peak RSS (``VmHWM``), as
the tasks report them; and the worker's whole process tree (``airflow celery worker``, pool processes, task
supervisors, tasks), sampled with psutil every 0.5 s: CPU seconds over the run and peak PSS (shared pages once).
After every run each FileSink directory is read back: each record id once (count, missing, duplicates, strays, a
sum of ids as a checksum); a row that fails is printed as such and the exit status is 1.

Without ``--celery`` (one Apache Kafka 4.4.0 node, ``bench/_kafka.py``): T=1, 2, 4 as one worker process each
(``python bench_scale_workers.py --child`` runs ``run_sink`` of one connector with ``tasks.max=T``), ``2 procs``
(two processes at once, each a connector over 4 partitions with ``tasks.max=2``) and the flat-memory row; CPU and
peak RSS per process from ``/proc`` sampled every 50 ms and ``wait4``'s rusage (:class:`_kafka.ProcessWatch`).
FileSink in both modes because its cost is ours (JsonConverter, offset-named files, fsync at the commit points,
the offsets kept in the destination), not a remote destination's. No timed assertion anywhere.

MEASURED --celery with fan_out_sink (2026-11-29 06:30-06:56, --records 2000000 --repeat 3 --flat-records 500000,
2 shared cores under a load average of 20-47 from a CI run and four helpers' tests beside it, so the rates are a
quarter of a quiet machine's; medians of 3): tasks.max=1 57,749 rec/s; 2: 74,617 (1.29x); 4: 86,677 (1.50x); single
runs 46k-68k / 71k-101k / 70k-103k. Each record once in all 10 runs (id sum checked). Per task: one task over 2M
8.5-8.9 s CPU, peak RSS 386-401 MB; one per worker at 1M each 3.9-4.5 s, 303-334 MB; four (two per worker) 4.3-4.9
s per worker, 268-295 MB per task; worker tree peak PSS 567-591 MB with one task, 490-525 with one each, 598-626
with two each. Flat memory: one task 396 MB at 0.5M, 392 MB at 2M (ratio 0.99); the task process weighs 164 MB
before its first record. Under that load the extra task per worker buys CPU share from the other processes, hence
the 1.3-1.5x; on the quiet machine below the curve was flat.

MEASURED --celery, stand-in before fan_out_sink existed (T one-task connectors over partitions k::T;
2026-11-29, --records 2000000 --repeat 3, 2 shared cores, load average 2-6 from other helpers' tests; medians of 3): tasks.max=1 238,460 rec/s; 2: 246,035 (1.03x); 4: 245,086 (1.03x); the single runs
168,653..239,786 / 203,914..265,038 / 221,078..332,724 (the first run after the fill the slowest). Each record
once in all 10 runs (nine of 2M, id sum 1999999000000; one of 0.5M), and in the two single rounds before. Per worker, per run: one task over 2M records 6.5-7.2 s task
CPU, peak RSS 388-410 MB; two workers at 1M each 3.6-3.9 s and 318-385 MB each; four tasks (two per worker, 500k
each) 3.7-4.2 s per worker and 283-342 MB per task; worker process tree peak PSS 508-590 MB with one task, 505-748
MB with two, 277-349 MB idle. Flat memory: one task's peak RSS 365 MB at 0.5M, 388 MB at 2M records (ratio
1.06); an Airflow task process weighs 170 MB before its first record. The curve is flat on 2 cores: the two Celery workers, three
brokers, the scheduler and the API server share them, and one task already moves 2M records at about 3.5 s of CPU
per million.

MEASURED example (2026-11-29, --example-records 500000, load average 5-17 from other helpers' tests): 1,500,000
records in three days in 1,201 s from the first trigger to the last success, 1,249 records/s end to end; runs 451,
373, 368 s, of which Spark's ``totals`` step (spark-submit to the cluster, client mode) 338, 398, 319 s: the
bottleneck; ``ingest`` (two mapped exactly-once DataGen tasks) 28-41 s per task (12k-18k rec/s per day), ``lake``
(ParquetSink on S3) 14-26 s (20k-37k rec/s), ``warehouse`` (SqlSink into PostgreSQL) 7-16 s (32k-69k rec/s); each
record once in topic, lake and warehouse, Spark's totals exact, tasks on both workers; worker process trees 190 s /
107 s CPU, peak PSS 1,233 / 1,111 MB (Spark's driver JVM included). With 200,000 per day (load average 10-16):
600,000 records in 643 s, 932 records/s; ``totals`` 139-229 s per day, ``lake`` 13k-38k rec/s, ``warehouse``
16k-36k rec/s; peak PSS 1,009 / 1,044 MB; every check held.

MEASURED without --celery (2026-11-29, --records 2000000, one broker, one run each): tasks.max=1 249,312 rec/s
(7.1 s CPU, 239 MB peak RSS); 2: 218,424 (0.88x, 287 MB); 4: 197,198 (0.79x, 377 MB); two processes of 2 tasks
345,116 (1.38x, 163/170 MB); one task's peak RSS 222 MB at 0.5M and 239 MB at 2M; each record once.

    .venv/bin/python bench/bench_scale_workers.py --celery [--records 2000000] [--tasks 1,2,4] [--repeat 3]
        [--flat-records 500000] [--example-records 200000]
    .venv/bin/python bench/bench_scale_workers.py [--records 2000000] [--tasks 1,2,4] [--flat-records 500000]
        [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _kafka import ProcessWatch, apache_kafka  # noqa: E402

TOPIC = "scale"
PARTITIONS = 8
RUN_BOUND_S = 1800.0
"""How long one worker process may run before it is stopped and its row reported as not finished."""


def fill(bootstrap: str, n: int, replication: int = 1) -> float:
    """``n`` records ``{"id": i, ...}`` with key ``i`` into partition ``i % 8``; returns seconds."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    for fut in admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication)]).values():
        fut.result(30)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 50,
                            "batch.size": 1_000_000, "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000,
                            "acks": "all", "log_level": 4})
    errors: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    t0 = time.perf_counter()
    produce = producer.produce
    for i in range(n):
        value = b'{"id":%d,"name":"user-%d","amount":%d}' % (i, i, i % 997)
        while True:
            try:
                produce(TOPIC, value, str(i).encode(), partition=i % PARTITIONS, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    seconds = time.perf_counter() - t0
    if left or errors:
        raise SystemExit(f"filling {TOPIC!r} failed: {left} records unsent, errors {errors[:3]}")
    return seconds


def end_offsets(bootstrap: str) -> dict[int, int]:
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-ends", "log_level": 0})
    try:
        return {p: consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, p), 30)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def child(spec: dict[str, Any]) -> int:
    """One worker process: ``run_sink`` of ``spec["config"]`` up to ``spec["until"]``; prints its result."""
    from connect_runtime.runtime.sink import run_sink

    if spec.get("profile"):
        from _profile import profiled

        from connect_runtime.runtime.sink.task import SinkWorkerTask
        with profiled(SinkWorkerTask, "run", 25):
            result = run_sink(spec["config"], spec["url"], until_offsets={TOPIC: spec["until"]})
    else:
        result = run_sink(spec["config"], spec["url"], until_offsets={TOPIC: spec["until"]})
    print("RESULT " + json.dumps({"records": result.records, "seconds": result.seconds}), flush=True)
    return 0


def start_worker(spec: dict[str, Any], log: Path) -> tuple[ProcessWatch, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = open(log, "wb")  # noqa: SIM115 -- closed by the caller once the process exited
    proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(spec)], stdout=out,
                            stderr=subprocess.STDOUT, env=env, cwd=str(REPO))
    return ProcessWatch(proc), out


def verify(directories: list[Path], partitions: list[list[int]], n: int) -> dict[str, Any]:
    """Each id in ``range(n)`` once across the FileSink directories (their committed files only)."""
    from connect_runtime.connectors.files import committed_files

    seen = bytearray(n)
    count = duplicates = strays = id_sum = 0
    for directory, parts in zip(directories, partitions, strict=True):
        for p in parts:
            for path in committed_files(directory, TOPIC, p):
                with open(path, "rb") as f:
                    for line in f:
                        i = json.loads(line)["id"]
                        count += 1
                        if not 0 <= i < n or i % PARTITIONS != p:
                            strays += 1
                            continue
                        id_sum += i
                        if seen[i]:
                            duplicates += 1
                        seen[i] = 1
    missing = n - sum(seen)
    ok = count == n and not duplicates and not missing and not strays and id_sum == n * (n - 1) // 2
    return {"ok": ok, "count": count, "missing": missing, "duplicates": duplicates, "strays": strays,
            "id_sum": id_sum}


def run_config(label: str, url: str, work: Path, workers: list[tuple[int, list[int]]], ends: dict[int, int],
               n: int, profile: bool) -> dict[str, Any]:
    """Start one worker process per ``(tasks.max, partitions)``, sample them until they exit, verify."""
    watches, logs, dirs = [], [], []
    t0 = time.perf_counter()
    for k, (tasks, parts) in enumerate(workers):
        name = f"{label}-w{k}".replace(" ", "").replace(".", "")
        directory = work / name
        dirs.append(directory)
        spec = {"url": url, "profile": profile and k == 0, "until": {str(p): ends[p] for p in parts},
                "config": {"name": name, "connector.class": "connect_runtime.connectors.files.FileSink",
                           "topics": TOPIC, "directory": str(directory), "tasks.max": str(tasks),
                           "consumer.max.poll.records": "5000"}}
        watch, out = start_worker(spec, work / f"{name}.log")
        watches.append(watch)
        logs.append((out, work / f"{name}.log"))
    deadline = time.monotonic() + RUN_BOUND_S
    while any(w.alive() for w in watches) and time.monotonic() < deadline:
        for w in watches:
            w.sample()
        time.sleep(0.05)
    seconds = time.perf_counter() - t0
    for w in watches:
        w.stop()
        w.sample()
    failed = []
    for (out, path), w in zip(logs, watches, strict=True):
        out.close()
        text = path.read_text(errors="replace")
        if profile:
            print(text)
        if w.returncode != 0:
            failed.append(f"{path.name}: exit {w.returncode}: {text[-800:]}")
    check = verify(dirs, [parts for _, parts in workers], n) if not failed else {"ok": False, "count": 0}
    return {"label": label, "seconds": seconds, "cpu": [w.cpu_s for w in watches],
            "rss_mb": [w.peak_rss_kb / 1024 for w in watches], "check": check, "failed": failed}


def row(r: dict[str, Any], n: int, base_rate: float | None) -> str:
    rate = n / r["seconds"]
    ratio = f"{rate / base_rate:5.2f}x" if base_rate else "  1.00x"
    cpu = "/".join(f"{c:.1f}" for c in r["cpu"])
    rss = "/".join(f"{m:.0f}" for m in r["rss_mb"])
    c = r["check"]
    once = (f"once: {c['count']:,} records, id sum {c['id_sum']}" if c["ok"] else
            f"NOT ONCE: {c}" + (f" {r['failed']}" if r["failed"] else ""))
    return f"{r['label']:<22} {n:>10,} {rate:>11,.0f} {ratio:>7} {cpu:>14} {rss:>12}  {once}"


def celery_rows(args: argparse.Namespace, work: Path) -> int:
    """The sink rows as mapped Airflow tasks on two Celery workers, then the example pipeline (``_scale_celery``)."""
    from _scale_celery import celery_deployment, per_host, run_on_celery

    n, status = args.records, 0
    all_parts = list(range(PARTITIONS))
    results: list[dict[str, Any]] = []
    with celery_deployment(work / "deploy") as (af, boot, _settings, sampler):
        print("deployment: Airflow 3 CeleryExecutor, workers worker-a and worker-b (concurrency 2), Redis, "
              f"PostgreSQL metadata DB, three Apache Kafka 4.4.0 KRaft brokers ({boot})", flush=True)
        fill_s = fill(boot, n, replication=3)
        ends = end_offsets(boot)
        print(f"fill: {n:,} records into {PARTITIONS} partitions (RF 3, acks=all) in {fill_s:.2f} s "
              f"({n / fill_s:,.0f} rec/s)", flush=True)
        if sum(ends.values()) != n:
            raise SystemExit(f"the topic holds {sum(ends.values())} records, expected {n}")

        def one(label: str, t: int, m: int, part_ends: dict[int, int]) -> dict[str, Any]:
            stamp = time.strftime("%H%M%S")
            with sampler.window() as workers:
                figures, wall, directory = run_on_celery(af, f"t{t}_{m}_{stamp}", work, TOPIC, f"c{t}-{m}-{stamp}",
                                                         t, part_ends, RUN_BOUND_S)
            seconds = max(f["end"] for f in figures) - min(f["start"] for f in figures)
            check = verify([directory], [all_parts], m)
            r = {"label": label, "records": m, "seconds": seconds, "wall": wall, "cpu": [f["cpu"] for f in figures],
                 "rss_mb": [f["rss_kb"] / 1024 for f in figures], "check": check, "failed": [],
                 "rss_start_mb": [f["rss_start_kb"] / 1024 for f in figures], "hosts": per_host(figures),
                 "workers": workers}
            print(celery_row(r, base), flush=True)
            return r

        tasks = [int(x) for x in args.tasks.split(",")]
        for k in range(args.repeat):
            base = None
            for t in tasks:
                results.append(one(f"tasks.max={t}" + (f" #{k + 1}" if args.repeat > 1 else ""), t, n, ends))
                base = base or results[-1]
        base, small = None, None
        if args.flat_records:
            m = min(args.flat_records, n)
            small = one("flat tasks.max=1", 1, m, {p: len(range(p, m, PARTITIONS)) for p in all_parts})
    print(f"\n{'config':<18} {'records':>10} {'rec/s':>9} {'vs 1':>6} {'run s':>6}  per worker: tasks, task CPU s, "
          "task peak RSS MB; worker tree CPU s, peak PSS MB")
    for k, r in enumerate(results + ([small] if small else [])):
        print(celery_row(r, results[k - k % len(tasks)] if k % len(tasks) and r is not small else None))
        status |= 0 if r["check"]["ok"] else 1
    if args.repeat > 1:
        medians = {t: statistics.median(n / r["seconds"] for r in results[i::len(tasks)]) for i, t in enumerate(tasks)}
        print(f"\nmedians of {args.repeat}: " + ", ".join(
            f"tasks.max={t} {rate:,.0f} rec/s ({rate / medians[tasks[0]]:.2f}x)" for t, rate in medians.items()))
    if small:
        big = results[0]
        print(f"\nflat memory, one task: {small['records']:,} records peak RSS {small['rss_mb'][0]:.0f} MB, "
              f"{big['records']:,} records {big['rss_mb'][0]:.0f} MB (ratio {big['rss_mb'][0] / small['rss_mb'][0]:.2f}; "
              f"the task process weighed {big['rss_start_mb'][0]:.0f} MB before its first record)")
    if args.example_records:
        status |= example(args.example_records, work / "example")
    return status


def celery_row(r: dict[str, Any], base: dict[str, Any] | None) -> str:
    rate = r["records"] / r["seconds"]
    ratio = (f"{rate / (base['records'] / base['seconds']):5.2f}x" if base else
             " 1.00x" if r["label"].startswith("tasks.max=1") else "     -")
    c = r["check"]
    once = (f"each record once ({c['count']:,}, id sum {c['id_sum']})" if c["ok"] else f"NOT ONCE: {c}")
    lines = [f"{r['label']:<18} {r['records']:>10,} {rate:>9,.0f} {ratio:>6} {r['wall']:>6.1f}  {once}"]
    for name in sorted(r["workers"]):
        h = r["hosts"].get(name, {"tasks": 0, "cpu_s": 0.0, "rss_mb": 0.0, "records": 0})
        w = r["workers"][name]
        lines.append(f"{'':<18} {name}: {h['tasks']:.0f} task(s), {h['records']:>9,.0f} records, task CPU "
                     f"{h['cpu_s']:6.1f} s, task peak RSS {h['rss_mb']:4.0f} MB; worker tree CPU "
                     f"{w['cpu_s']:6.1f} s, peak PSS {w['peak_mb']:4.0f} MB")
    return "\n".join(lines)


def example(records_per_day: int, base: Path) -> int:
    """The distributed example for its three days; prints its row."""
    from _scale_celery import example_row

    print(f"\nexample pipeline (dags/example_orders_distributed.py on scripts/deploy's distributed deployment), "
          f"{records_per_day:,} records per day", flush=True)
    e = example_row(base, records_per_day, RUN_BOUND_S)
    print(f"example pipeline: {e['records']:,} records in {e['days']} days, {e['wall_s']:.1f} s from the first "
          f"trigger to the last success: {e['records'] / e['wall_s']:,.0f} records/s end to end "
          f"(deployment up in {e['up_s']:.0f} s); runs {', '.join(f'{s:.1f}' for s in e['runs_s'])} s")
    for task_id, secs in sorted(e["tasks_s"].items()):
        print(f"  {task_id:<12} {', '.join(f'{s:.1f}' for s in secs)} s"
              + (f"  ({records_per_day / max(secs):,.0f}..{records_per_day / min(secs):,.0f} rec/s)"
                 if task_id in ("lake", "warehouse") else ""))
    for name, w in sorted(e["workers"].items()):
        print(f"  {name}: tasks {e['hosts'].get(name, {})}; worker tree CPU {w['cpu_s']:.1f} s, peak PSS "
              f"{w['peak_mb']:.0f} MB")
    print(f"  counts {e['counts']}")
    for check, held in e["checks"].items():
        print(f"  [{'OK' if held else 'FAILED'}] {check}")
    return 0 if e["ok"] else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--tasks", default="1,2,4", help="tasks.max values, one worker process each")
    ap.add_argument("--flat-records", type=int, default=500_000,
                    help="the smaller topic of the flat-memory comparison (tasks.max=1); 0 skips it")
    ap.add_argument("--profile", action="store_true", help="cProfile of the task threads of the tasks.max=1 run")
    ap.add_argument("--celery", action="store_true",
                    help="run the rows as mapped Airflow tasks on two Celery workers and three KRaft brokers")
    ap.add_argument("--repeat", type=int, default=1, help="with --celery: rounds of the --tasks rows (medians)")
    ap.add_argument("--example-records", type=int, default=200_000,
                    help="with --celery: records per day of the distributed example's three days; 0 skips it")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(json.loads(args.child))
    if args.celery:
        with tempfile.TemporaryDirectory(prefix="bench-scale-celery-") as tmp:
            return celery_rows(args, Path(tmp))
    n = args.records
    all_parts = list(range(PARTITIONS))
    status = 0
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp, apache_kafka(Path(tmp) / "kafka") as boot:
        work = Path(tmp)
        url = f"kafka://{boot}"
        print("deployment: one Apache Kafka 4.4.0 node; worker processes started directly (--celery: Airflow "
              "tasks on two Celery workers)", flush=True)
        fill_s = fill(boot, n)
        ends = end_offsets(boot)
        print(f"fill: {n:,} records into {PARTITIONS} partitions in {fill_s:.2f} s ({n / fill_s:,.0f} rec/s, "
              f"one idempotent producer); ends {ends}", flush=True)
        if sum(ends.values()) != n:
            raise SystemExit(f"the topic holds {sum(ends.values())} records, expected {n}")
        results = []
        for t in (int(x) for x in args.tasks.split(",")):
            results.append(run_config(f"1 proc tasks.max={t}", url, work, [(t, all_parts)], ends, n,
                                      args.profile and t == 1))
            print(row(results[-1], n, n / results[0]["seconds"] if len(results) > 1 else None), flush=True)
        results.append(run_config("2 procs tasks.max=2", url, work,
                                  [(2, all_parts[0::2]), (2, all_parts[1::2])], ends, n, False))
        print(row(results[-1], n, n / results[0]["seconds"]), flush=True)
        print(f"\n{'config':<22} {'records':>10} {'rec/s':>11} {'vs 1':>7} {'CPU s/proc':>14} "
              f"{'peak MB/proc':>12}  exactly once")
        base = n / results[0]["seconds"]
        for r in results:
            print(row(r, n, base if r is not results[0] else None))
            status |= 0 if r["check"]["ok"] else 1
        if args.flat_records:
            m = min(args.flat_records, n)
            small_ends = {p: len(range(p, m, PARTITIONS)) for p in all_parts}
            small = run_config("flat tasks.max=1", url, work, [(1, all_parts)], small_ends, m, False)
            status |= 0 if small["check"]["ok"] else 1
            print(f"\nflat memory, tasks.max=1: {m:,} records peak RSS {small['rss_mb'][0]:.0f} MB "
                  f"({m / small['seconds']:,.0f} rec/s, {'once' if small['check']['ok'] else 'NOT ONCE'}); "
                  f"{n:,} records peak RSS {results[0]['rss_mb'][0]:.0f} MB "
                  f"(ratio {results[0]['rss_mb'][0] / small['rss_mb'][0]:.2f})")
    return status


if __name__ == "__main__":
    sys.exit(main())
