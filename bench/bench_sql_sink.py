"""SqlSink throughput into PostgreSQL against a hand-written psycopg 3 ``COPY`` loop.

In one process, with a throwaway PostgreSQL 15 cluster (bench/_pg.py) and the embedded SQLite store:

1. fill topic ``bench`` (one partition) with ``--records`` JSON records of six fields: ``id`` (int),
   ``name`` (text), ``amount`` (a numeric as its exact decimal string), ``ts`` (ISO 8601 timestamp with
   offset), ``score`` (double), ``flag`` (bool);
2. baseline: read the same records with ``backend.read_range``, ``json.loads`` each value and
   ``copy.write_row`` it into table ``bench_base_<i>`` with one ``COPY ... FROM STDIN``, in ONE
   transaction;
3. ours: ``run_sink`` with ``connect_runtime.connectors.sql.SqlSink`` (``insert.mode=insert``,
   ``pk.mode=none``, offsets stored in the destination in the same transaction as the rows) into
   table ``bench_ours_<i>``.

Both tables are checked to hold the same rows (count and sums of every column). Prints records/s of
both, the ratio ours/baseline (target >= 0.7x), best and median of ``--repeat`` runs. ``--profile``
prints a cProfile of the sink task thread of the first run of (3).

    .venv/bin/python bench/bench_sql_sink.py [--records 300000] [--repeat 3] [--poll-records 5000]
        [--batch-size N] [--profile]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import psycopg  # noqa: E402
import sqlalchemy.dialects.postgresql.psycopg  # noqa: E402, F401 - imported before timing, as psycopg is for the baseline
from _pg import pg_cluster, psycopg_url  # noqa: E402
from _profile import profiled  # noqa: E402

from connect_runtime.api import TopicPartition  # noqa: E402
from connect_runtime.backends import ProducerRecord, open_backend  # noqa: E402
from connect_runtime.runtime.sink import run_sink  # noqa: E402
from connect_runtime.runtime.sink.task import SinkWorkerTask  # noqa: E402

TOPIC = "bench"
COLUMNS = ("id", "name", "amount", "ts", "score", "flag")
DDL = ("CREATE TABLE {table} (id bigint, name text, amount numeric(14, 2), ts timestamptz, "
       "score double precision, flag boolean)")
CHECK = ("SELECT count(*), sum(id), sum(length(name)), sum(amount), sum(extract(epoch FROM ts)), sum(score), "
         "count(*) FILTER (WHERE flag) FROM {table}")
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
T0 = datetime(2026, 1, 2, tzinfo=UTC)


def value(i: int) -> dict[str, object]:
    return {"id": i, "name": f"user-{i}", "amount": f"{i % 100_000}.{i % 100:02d}",
            "ts": (T0 + timedelta(seconds=i, microseconds=i % 1_000_000)).isoformat(),
            "score": i * 0.5 + 0.25, "flag": i % 3 == 0}


def fill(store: str, n: int) -> float:
    t0 = time.perf_counter()
    with open_backend(store) as backend:
        backend.create_topics({TOPIC: 1})
        producer = backend.producer()
        try:
            for start in range(0, n, 10_000):
                producer.send([ProducerRecord(TOPIC, 0, None, _dumps(value(i)).encode())
                               for i in range(start, min(n, start + 10_000))])
                producer.flush(60)
        finally:
            producer.close()
    return time.perf_counter() - t0


def create_table(pg: str, table: str) -> None:
    with psycopg.connect(psycopg_url(pg), autocommit=True) as conn:
        conn.execute(DDL.format(table=table))


def baseline(store: str, pg: str, n: int, table: str) -> float:
    create_table(pg, table)
    t0 = time.perf_counter()
    loads = json.loads
    with open_backend(store) as backend, psycopg.connect(psycopg_url(pg)) as conn:
        with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            write = copy.write_row
            for rec in backend.read_range(TopicPartition(TOPIC, 0), 0, n):
                v = loads(rec.value)
                write((v["id"], v["name"], v["amount"], v["ts"], v["score"], v["flag"]))
        conn.commit()
    return time.perf_counter() - t0


def ours(store: str, pg: str, n: int, table: str, poll_records: int, profile: bool,
         batch_size: int | None = None) -> float:
    create_table(pg, table)
    config = {
        "name": f"bench-sql-sink-{table}",  # a fresh consumer group and offsets rows per repetition
        "connector.class": "connect_runtime.connectors.sql.SqlSink",
        "topics": TOPIC,
        "connection.url": pg,
        "table.name.format": table,
        "insert.mode": "insert",
        "pk.mode": "none",
        "consumer.max.poll.records": str(poll_records),
    }
    if batch_size is not None:
        config["batch.size"] = str(batch_size)
    with profiled(SinkWorkerTask, "run", 25, enabled=profile):
        t0 = time.perf_counter()
        result = run_sink(config, store)
        seconds = time.perf_counter() - t0
    if result.records != n:
        raise SystemExit(f"run_sink delivered {result.records} records, expected {n}")
    return seconds


def check(pg: str, table: str) -> tuple[object, ...]:
    with psycopg.connect(psycopg_url(pg)) as conn:
        row = conn.execute(CHECK.format(table=table)).fetchone()
        assert row is not None
        return tuple(row)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--poll-records", type=int, default=5000, help="consumer.max.poll.records of the sink run")
    ap.add_argument("--batch-size", type=int, default=None, help="batch.size of the sink (default: the connector's)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="run baseline and ours this many times, alternating (the machine is shared)")
    ap.add_argument("--profile", action="store_true", help="profile the sink task thread (cProfile) of the first run")
    ap.add_argument("--dir", help="work directory for the SQLite store (default: a temporary one)")
    args = ap.parse_args()
    n = args.records
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, pg_cluster() as pg:
        store = f"sqlite:///{Path(tmp) / 'bench.db'}"
        fill_s = fill(store, n)
        print(f"fill: {n:,} records in {fill_s:.2f} s ({n / fill_s:,.0f} rec/s)")
        base_runs: list[float] = []
        our_runs: list[float] = []
        ok = True
        for i in range(max(1, args.repeat)):
            c0 = time.process_time()
            base_runs.append(baseline(store, pg, n, f"bench_base_{i}"))
            c1 = time.process_time()
            our_runs.append(ours(store, pg, n, f"bench_ours_{i}", args.poll_records, args.profile and i == 0,
                                 args.batch_size))
            c2 = time.process_time()
            expected, got = check(pg, f"bench_base_{i}"), check(pg, f"bench_ours_{i}")
            same = expected == got and expected[0] == n
            ok = ok and same
            print(f"  run {i + 1}: baseline {n / base_runs[-1]:,.0f} rec/s (cpu {c1 - c0:.2f} s), "
                  f"ours {n / our_runs[-1]:,.0f} rec/s (cpu {c2 - c1:.2f} s), "
                  f"ratio {base_runs[-1] / our_runs[-1]:.2f}x, same rows: {same}" + ("" if same else f" {expected} != {got}"))
        best_b, best_o = min(base_runs), min(our_runs)
        med_b, med_o = statistics.median(base_runs), statistics.median(our_runs)
        k = len(base_runs)
        print(f"records: {n:,}, repeats: {k}")
        print(f"baseline (read_range + json.loads + psycopg COPY, one txn): best {n / best_b:,.0f} rec/s, "
              f"median {n / med_b:,.0f} rec/s")
        print(f"ours (run_sink -> SqlSink insert, offsets in PostgreSQL):  best {n / best_o:,.0f} rec/s, "
              f"median {n / med_o:,.0f} rec/s")
        print(f"ratio ours/baseline: best {best_b / best_o:.2f}x, median {med_b / med_o:.2f}x (target >= 0.7x)")
        print(f"tables hold the same rows (count + sums): {ok}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
