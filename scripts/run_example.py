#!/usr/bin/env python3
"""Run the example pipeline end to end: three days of orders, source → Parquet lake → Spark → archive, then a
rerun of day two that must change nothing. Real Airflow 3 (``airflow dags test``), real Spark
(local mode), the embedded SQLite backend: no server, nothing to start first.

    .venv/bin/python scripts/run_example.py          # the pipeline, ~2.5 min (spark-submit per day)
    .venv/bin/python scripts/run_example.py --ui     # then look at it: airflow standalone, same env
    .venv/bin/python scripts/run_example.py --distributed   # the same pipeline across (local) machines, ~3 min

``--distributed`` starts the deployment of ``scripts/deploy/`` under ``--home`` (Redis, PostgreSQL, three Kafka
brokers, moto S3, a Spark master with two workers, Airflow on the CeleryExecutor with two workers), runs
``dags/example_orders_distributed.py`` for three days, prints which worker ran each task and checks every sink
from the data, then stops everything (also on Ctrl-C).

Everything lives under ``var/example/`` (``--home``): ``airflow/`` (AIRFLOW_HOME: metadata DB, logs,
the embedded backend ``pyconnect/pyconnect.db``) and ``data/`` (input files, Parquet output,
archive). A run starts from scratch unless ``--keep``; ``--ui`` never deletes anything.
Assumes ``.venv`` exists (``bash scripts/bootstrap.sh``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DAG_ID = "example_orders_pipeline"
TOPIC = "orders"
DAG_TEST_TIMEOUT_S = 420
STEP_TIMEOUT_S = 300
API_START_TIMEOUT_S = 120

sys.path.insert(0, str(REPO / "scripts"))
from generate_sample_data import generate  # noqa: E402


def example_env(home: Path) -> dict[str, str]:
    """The environment every Airflow command of the example runs with."""
    venv_bin = str(Path(sys.executable).parent)
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # a busy laptop or CI machine answers the task supervisor's API calls slower than the 5 s default
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": env.get("AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT", "30"),
        # tasks run by the LocalExecutor as supervised processes, so their logs land where the UI reads them
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": env.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
        "PYCONNECT_EXAMPLE_DATA": str(home / "data"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": os.pathsep.join([venv_bin, env.get("PATH", "")]),
        "PYTHONUNBUFFERED": "1",
    })
    return env


def ui_env(port: int) -> dict[str, str]:
    """Settings for ``airflow standalone`` on ``port``: the API server listens there and task execution
    calls it there (``[core] execution_api_server_url`` defaults to port 8080 otherwise, and every
    triggered task would fail at once)."""
    base = f"http://localhost:{port}"
    return {
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def api_server(env: dict[str, str], log: Path) -> Iterator[dict[str, str]]:
    """``airflow api-server`` on a free port for the example's runs: ``airflow dags test --use-executor``
    runs each task under the LocalExecutor's supervisor, which talks to the execution API and writes the
    task's log file (``dags test`` alone runs tasks in-process and writes no log the UI could show)."""
    port = free_port()
    env = {**env, **ui_env(port)}
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "api-server", "--port", str(port)],
                                env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + API_START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/api/v2/monitor/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                    raise SystemExit(f"`airflow api-server` did not answer on port {port} within "
                                     f"{API_START_TIMEOUT_S} s; log: {log}\n{tail}") from None
                time.sleep(0.5)
        yield env
    finally:
        stop_group(proc)


def ui_logs(env: dict[str, str], home: Path) -> tuple[int, int]:
    """How many of the example's task instances show a log through the UI's REST API (the same call the
    log view makes), out of how many: logged in as the generated admin user."""
    base = env["AIRFLOW__API__BASE_URL"]
    passwords = json.loads((home / "airflow" / "simple_auth_manager_passwords.json.generated").read_text())
    user, password = next(iter(passwords.items()))
    req = urllib.request.Request(f"{base}/auth/token", method="POST",
                                 data=json.dumps({"username": user, "password": password}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        token = json.loads(resp.read())["access_token"]
    db = home / "airflow" / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tis = conn.execute("SELECT run_id, task_id, try_number FROM task_instance WHERE dag_id = ? AND try_number > 0",
                           (DAG_ID,)).fetchall()
    shown = 0
    for run_id, task_id, try_number in tis:
        url = (f"{base}/api/v2/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/"
               f"{task_id}/logs/{try_number}?full_content=true")
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                content = json.loads(resp.read()).get("content")
        except OSError:
            continue
        events = [str(e.get("event", "")) for e in content if isinstance(e, dict)] if isinstance(content, list) else []
        # the task runner's own lines (not a "log not found" placeholder); the connector tasks' summaries
        ran = any("Pre Execute" in e or "DAG bundles loaded" in e for e in events)
        wanted = {"ingest": "source connector", "archive": "sink connector"}.get(task_id)
        shown += ran and (wanted is None or any(wanted in e.lower() for e in events))
    return shown, len(tis)


def airflow(env: dict[str, str], *args: str, log: Path | None = None, timeout: float = STEP_TIMEOUT_S) -> float:
    """Run ``airflow <args>`` (bounded); output to ``log``; raises with the log's tail on failure."""
    cmd = [str(Path(sys.executable).parent / "airflow"), *args]
    t0 = time.monotonic()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    with open(log or os.devnull, "w") as out:
        try:
            proc = subprocess.run(cmd, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            raise SystemExit(f"`airflow {' '.join(args)}` did not finish within {timeout:.0f} s; log: {log}") from exc
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:] if log else []
        raise SystemExit(f"`airflow {' '.join(args)}` failed (exit {proc.returncode}); log: {log}\n" + "\n".join(tail))
    if log is not None and DAG_ID in args and "test" in args:
        text = log.read_text(errors="replace")
        if "DagRun Finished" not in text or "state=success" not in text:
            raise SystemExit(f"`airflow {' '.join(args)}` ran a failed DAG run; log: {log}")
    return seconds


# ------------------------------------------------------------------------------------ inspection


def xcoms(home: Path, day: str) -> dict[str, Any]:
    """The XCom return values of the DAG run of ``day`` (read from the metadata DB)."""
    db = home / "airflow" / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT x.task_id, x.value FROM xcom x JOIN dag_run r ON r.id = x.dag_run_id "
            "WHERE x.dag_id = ? AND x.key = 'return_value' AND date(r.logical_date) = ? "
            "ORDER BY r.id", (DAG_ID, day)).fetchall()
    out: dict[str, Any] = {}
    for task_id, value in rows:
        data = json.loads(value) if isinstance(value, (str, bytes)) else value
        out[task_id] = json.loads(data) if isinstance(data, str) and data[:1] in "{[" else data
    return out


def topic_state(home: Path) -> dict[str, Any]:
    """Records per partition of the topic, with a digest of their offsets, keys and values."""
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    url = f"sqlite:///{home / 'airflow' / 'pyconnect' / 'pyconnect.db'}"
    out = {}
    with open_backend(url) as backend:
        for p in range(backend.list_topics().get(TOPIC, 0)):
            digest = hashlib.sha256()
            n = 0
            for rec in backend.read_range(TopicPartition(TOPIC, p), 0, 1 << 62):
                digest.update(f"{rec.offset}:".encode() + (rec.key or b"") + b"|" + (rec.value or b"") + b"\n")
                n += 1
            out[str(p)] = {"records": n, "sha256": digest.hexdigest()[:16]}
    return out


def parquet_rows(path: Path) -> dict[str, list[tuple[str, int, int, str]]]:
    """Rows of the totals dataset per date: (customer, orders, items, amount)."""
    import pyarrow.parquet as pq

    out: dict[str, list[tuple[str, int, int, str]]] = {}
    if not path.exists():
        return out
    for part in sorted(path.glob("date=*")):
        table = pq.read_table(str(part))
        rows = sorted((r["customer"], r["orders"], r["items"], str(r["amount"])) for r in table.to_pylist())
        out[part.name.split("=", 1)[1]] = rows
    return out


def archive_state(path: Path) -> dict[str, Any]:
    """Archive lines, distinct order ids and a digest of the archive file(s)."""
    files = sorted(path.glob(f"{TOPIC}/partition=*/*.jsonl"))
    ids = []
    digest = hashlib.sha256()
    for f in files:
        data = f.read_bytes()
        digest.update(data)
        ids += [json.loads(line)["order_id"] for line in data.splitlines() if line.strip()]
    return {"files": [str(f) for f in files], "lines": len(ids), "distinct": len(set(ids)),
            "sha256": digest.hexdigest()[:16]}


def lake_state(path: Path) -> dict[str, Any]:
    """The lake's data files (name, size) and a digest of their bytes."""
    files = sorted(path.glob(f"topics/{TOPIC}/partition=*/*.parquet"))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return {"files": [f.name for f in files], "sha256": digest.hexdigest()[:16]}


def lake_rows(path: Path, source_result: dict[str, Any]) -> int | str:
    """Rows of the lake files holding exactly the day's ranges (what the Spark job reads), or the error."""
    import pyarrow.parquet as pq

    from connect_runtime.connectors.lake import LakeRangeError, files_for
    from connect_runtime.ranges import RangesFormatError, interval_spans

    try:
        files = files_for(str(path), interval_spans(source_result))
    except (LakeRangeError, RangesFormatError) as exc:
        return f"error: {exc}"
    return sum(pq.read_metadata(f.url.removeprefix("file://")).num_rows for f in files)


def expected_totals(data: Path, day: str) -> list[tuple[str, int, int, str]]:
    """Per-customer totals computed straight from the input files (the ground truth)."""
    acc: dict[str, list[Any]] = {}
    for f in sorted((data / "orders" / day).glob("*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                o = json.loads(line)
                a = acc.setdefault(o["customer"], [0, 0, Decimal("0.00")])
                a[0] += 1
                a[1] += o["items"]
                a[2] += Decimal(str(o["amount"])).quantize(Decimal("0.01"))
    return sorted((c, n, i, str(s)) for c, (n, i, s) in acc.items())


def snapshot(home: Path) -> dict[str, Any]:
    data = home / "data"
    return {"topic": topic_state(home), "lake": lake_state(data / "lake"),
            "parquet": parquet_rows(data / "out" / "orders_daily_totals"), "archive": archive_state(data / "archive")}


# ------------------------------------------------------------------------------------------- main


def run_ui(home: Path, env: dict[str, str]) -> int:
    if not (home / "airflow" / "airflow.db").exists():
        print(f"run_example: no example under {home}; run `.venv/bin/python scripts/run_example.py` first")
        return 1
    print(f"run_example: starting `airflow standalone` with AIRFLOW_HOME={env['AIRFLOW_HOME']} "
          f"(UI on http://localhost:{env.get('AIRFLOW__API__PORT', '8080')}, login in "
          f"{home / 'airflow' / 'simple_auth_manager_passwords.json.generated'}); Ctrl-C stops it")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "standalone"], env=env, cwd=REPO,
                            start_new_session=True)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return stop_group(proc)


def stop_group(proc: subprocess.Popen[bytes]) -> int:
    """Stop `airflow standalone` and everything it started: SIGINT to its process group, then SIGTERM,
    then SIGKILL (the scheduler and the dag processor may ignore SIGTERM for a long time)."""
    for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)  # anything of the group still alive?
            except ProcessLookupError:
                break
            proc.poll()
            time.sleep(0.5)
        else:
            continue
        break
    return proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=REPO / "var" / "example",
                        help="where AIRFLOW_HOME and the data live (default: var/example)")
    parser.add_argument("--start", type=date.fromisoformat, default=date(2026, 1, 1))
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--rerun", default="2026-01-02",
                        help="day to run again at the end, checking nothing changes ('' to skip)")
    parser.add_argument("--keep", action="store_true", help="do not start from scratch")
    parser.add_argument("--ui", action="store_true", help="start `airflow standalone` on the example's home")
    parser.add_argument("--port", type=int, default=8080, help="UI/API port of --ui (default 8080)")
    parser.add_argument("--distributed", action="store_true",
                        help="run on the distributed deployment (scripts/deploy/): Celery workers, Kafka cluster, "
                             "S3 lake, Spark cluster")
    parser.add_argument("--records", type=int, default=5000, help="records per day of --distributed")
    args = parser.parse_args(argv)
    home = args.home.resolve()
    if args.distributed:
        return run_distributed(home, args.records, keep=args.keep)
    env = example_env(home)
    ui_cmd = f"{Path(sys.executable).relative_to(REPO) if Path(sys.executable).is_relative_to(REPO) else sys.executable} scripts/run_example.py --ui" + (
        f" --home {args.home}" if args.home != REPO / "var" / "example" else "")
    if args.ui:
        env.update(ui_env(args.port))
        return run_ui(home, env)

    t_all = time.monotonic()
    if home.exists() and not args.keep:
        shutil.rmtree(home)
    (home / "airflow").mkdir(parents=True, exist_ok=True)
    os.environ.update({k: env[k] for k in ("AIRFLOW_HOME",)})
    logs = home / "logs"
    print(f"run_example: AIRFLOW_HOME={env['AIRFLOW_HOME']}  data={env['PYCONNECT_EXAMPLE_DATA']}")

    t = airflow(env, "db", "migrate", log=logs / "db-migrate.log")
    print(f"  airflow db migrate                 {t:6.1f} s")
    counts = generate(home / "data" / "orders", args.start, args.days)
    print(f"  sample data: {sum(counts.values())} orders, {args.days} days, under {home / 'data' / 'orders'}")

    days = [(args.start + timedelta(days=d)).isoformat() for d in range(args.days)]
    timings = {}
    with contextlib.ExitStack() as stack:
        t = time.monotonic()
        run_env = stack.enter_context(api_server(env, logs / "api-server.log"))
        print(f"  airflow api-server (execution API)  {time.monotonic() - t:6.1f} s")
        all_ok = run_days(args, home, run_env, days, timings, counts)
        shown, total = ui_logs(run_env, home)
        print(f"\nTask logs shown by the UI's log API: {shown} of {total} task instances")
        all_ok &= total > 0 and shown == total
    print(f"\nrun_example: {'OK' if all_ok else 'FAILED'} in {time.monotonic() - t_all:.1f} s")
    print(f"To open the Airflow UI on this example: {ui_cmd}")
    return 0 if all_ok else 1


def run_distributed(home: Path, records_per_day: int, *, keep: bool = False) -> int:
    """``--distributed``: :func:`deploy.example.main` under ``home/distributed``; 0 when every check held."""
    from deploy.example import main as distributed_main

    base = home / "distributed"
    if base.exists() and not keep:
        shutil.rmtree(base)
    print(f"run_example --distributed: everything under {base}")
    try:
        return 0 if distributed_main(base, records_per_day)["ok"] else 1
    except KeyboardInterrupt:
        print("run_example --distributed: interrupted; everything stopped", file=sys.stderr)
        return 130


def run_days(args: argparse.Namespace, home: Path, env: dict[str, str], days: list[str], timings: dict[str, float],
             counts: dict[str, int]) -> bool:
    logs = home / "logs"
    for day in days:
        timings[day] = airflow(env, "dags", "test", "--use-executor", DAG_ID, day,
                               log=logs / f"dags-test-{day}.log", timeout=DAG_TEST_TIMEOUT_S)
        print(f"  airflow dags test {DAG_ID} {day}  {timings[day]:6.1f} s")

    data = home / "data"
    parquet = parquet_rows(data / "out" / "orders_daily_totals")
    print("\nPer day (source records → lake rows → Spark totals rows → archived records):")
    print(f"  {'day':<11} {'input':>6} {'source':>7} {'ranges':<22} {'lake':>6} {'spark in':>8} {'rows':>5} "
          f"{'archived':>8}  totals ok")
    all_ok = True
    for day in days:
        x = xcoms(home, day)
        src, hand, sink = x.get("ingest", {}), x.get("handoff", {}), x.get("archive", {})
        ranges = json.dumps((src.get("ranges") or {}).get(TOPIC, {}), separators=(",", ":"))
        in_lake = lake_rows(data / "lake", src)
        ok = parquet.get(day) == expected_totals(data, day) and in_lake == counts[day]
        all_ok &= ok
        print(f"  {day:<11} {counts[day]:>6} {src.get('records', '?'):>7} {ranges:<22} {in_lake!s:>6} "
              f"{hand.get('records', '?'):>8} {len(parquet.get(day, [])):>5} {sink.get('records', '?'):>8}  "
              f"{'yes' if ok else 'NO'}")

    before = snapshot(home)
    if args.rerun:
        t = airflow(env, "dags", "test", "--use-executor", DAG_ID, args.rerun,
                    log=logs / f"dags-test-{args.rerun}-rerun.log", timeout=DAG_TEST_TIMEOUT_S)
        after = snapshot(home)
        x = xcoms(home, args.rerun)
        unchanged = before == after
        all_ok &= unchanged
        print(f"\nRerun of {args.rerun} ({t:.1f} s): source wrote {x.get('ingest', {}).get('records', '?')} new records, "
              f"Spark read {x.get('handoff', {}).get('records', '?')} (the same range), archive appended "
              f"{x.get('sink', x.get('archive', {})).get('records', '?')}, lake wrote "
              f"{x.get('lake', {}).get('records', '?')}; topic, lake, Parquet and archive "
              f"{'unchanged' if unchanged else 'CHANGED'}")

    arch = after["archive"] if args.rerun else before["archive"]
    print("\nOutputs:")
    print(f"  topic {TOPIC}: {sum(p['records'] for p in before['topic'].values())} records in "
          f"{env['AIRFLOW_HOME']}/pyconnect/pyconnect.db")
    print(f"  lake: {data / 'lake'}/topics/{TOPIC}/partition=<p>/ ({len(before['lake']['files'])} files)")
    print(f"  Parquet totals: {data / 'out' / 'orders_daily_totals'}/date=<day>/ "
          f"({sum(len(v) for v in parquet.values())} rows)")
    print(f"  archive: {', '.join(arch['files'])} ({arch['lines']} lines, {arch['distinct']} distinct orders)")
    print(f"  logs: {logs} (task logs: {env['AIRFLOW_HOME']}/logs)")
    return all_ok


if __name__ == "__main__":
    raise SystemExit(main())
