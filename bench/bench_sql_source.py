"""SqlSource throughput from PostgreSQL against a hand-written ``SELECT`` + ``json.dumps`` loop.

In one process, with a throwaway PostgreSQL 15 cluster (bench/_pg.py) and the embedded SQLite store:

1. a table ``bench_src`` of ``--records`` rows: ``id`` (bigint primary key), ``name`` (text), ``amount``
   (numeric), ``ts`` (timestamptz), ``score`` (double), ``flag`` (bool);
2. baseline: a server-side cursor ``SELECT * ... ORDER BY id`` read with ``fetchmany(--batch)``; each row
   ``json.dumps``-ed as a dict (``default=str`` for decimals and timestamps), its key ``{"id": ...}`` too,
   and each batch produced to topic ``base-<i>`` (``producer.send([...])`` + ``flush``);
3. ours: ``run_source`` with ``connect_runtime.connectors.sql.SqlSource`` (``mode=incrementing`` on
   ``id``, ``batch.max.rows=--batch``), exactly-once on the SQLite store (one transaction per poll,
   offsets inside it), into topic ``ours-<i>-bench_src``.

Both topics are checked to hold ``--records`` records. Prints records/s of both, the ratio ours/baseline
(target >= 0.8x), best and median of ``--repeat`` runs. ``--profile`` prints a cProfile of the source
task thread of the first run of (3).

    .venv/bin/python bench/bench_sql_source.py [--records 300000] [--batch 1000] [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import psycopg  # noqa: E402
import sqlalchemy.dialects.postgresql.psycopg  # noqa: E402, F401 - imported before timing, as psycopg is for the baseline
from _pg import pg_cluster, psycopg_url  # noqa: E402
from _profile import profiled  # noqa: E402

from connect_runtime import run_source  # noqa: E402
from connect_runtime.api import TopicPartition  # noqa: E402
from connect_runtime.backends import ProducerRecord, open_backend  # noqa: E402
from connect_runtime.runtime.source import task as source_module  # noqa: E402

TABLE = "bench_src"
DDL = (f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, name text, amount numeric(14, 2), ts timestamptz, "
       "score double precision, flag boolean)")
FILL = (f"INSERT INTO {TABLE} SELECT i, 'user-' || i, ((i % 100000) || '.' || lpad((i % 100)::text, 2, '0'))::numeric, "
        "timestamptz '2026-01-02 00:00:00+00' + i * interval '1 second' + (i % 1000000) * interval '1 microsecond', "
        "i * 0.5 + 0.25, i % 3 = 0 FROM generate_series(0, %s - 1) AS i")


def fill(pg: str, n: int) -> float:
    t0 = time.perf_counter()
    with psycopg.connect(psycopg_url(pg), autocommit=True) as conn:
        conn.execute(DDL)
        conn.execute(FILL.replace("%s", str(int(n))))
        conn.execute(f"VACUUM ANALYZE {TABLE}")
    return time.perf_counter() - t0


def baseline(store: str, pg: str, topic: str, batch: int) -> float:
    t0 = time.perf_counter()
    dumps = json.dumps
    with open_backend(store) as backend, psycopg.connect(psycopg_url(pg)) as conn:
        backend.create_topics({topic: 1})
        producer = backend.producer()
        try:
            with conn.cursor(name="bench_base") as cur:  # a server-side cursor
                cur.execute(f"SELECT * FROM {TABLE} ORDER BY id")
                rows = cur.fetchmany(batch)
                assert cur.description is not None
                names = [d.name for d in cur.description]
                while rows:
                    producer.send([ProducerRecord(topic, 0, dumps({"id": r[0]}).encode(),
                                                  dumps(dict(zip(names, r, strict=True)), default=str).encode())
                                   for r in rows])
                    producer.flush(60)
                    rows = cur.fetchmany(batch)
        finally:
            producer.close()
    return time.perf_counter() - t0


def ours(store: str, pg: str, n: int, run: int, batch: int, profile: bool) -> float:
    config = {
        "name": f"bench-sql-source-{run}",  # fresh offsets per repetition
        "connector.class": "connect_runtime.connectors.sql.SqlSource",
        "connection.url": pg,
        "table.include.list": TABLE,
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": f"ours-{run}-",
        "batch.max.rows": str(batch),
        "poll.interval.ms": "60000",
        "poll.idle.timeout.ms": "0",
        "tasks.max": "1",
    }
    with profiled(source_module.SourceWorkerTask, "run", 25, enabled=profile):
        t0 = time.perf_counter()
        result = run_source(config, store, exactly_once=True)
        seconds = time.perf_counter() - t0
    if result.records != n:
        raise SystemExit(f"run_source committed {result.records} records, expected {n}")
    return seconds


def count(store: str, topic: str) -> int:
    with open_backend(store) as backend:
        consumer = backend.consumer(None)
        try:
            tp = TopicPartition(topic, 0)
            return consumer.end_offsets([tp], 30)[tp] - consumer.beginning_offsets([tp], 30)[tp]
        finally:
            consumer.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=1000, help="fetchmany size of the baseline = batch.max.rows of ours")
    ap.add_argument("--repeat", type=int, default=3,
                    help="run baseline and ours this many times, alternating (the machine is shared)")
    ap.add_argument("--profile", action="store_true", help="profile the source task thread (cProfile) of the first run")
    ap.add_argument("--dir", help="work directory for the SQLite store (default: a temporary one)")
    args = ap.parse_args()
    n = args.records
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, pg_cluster() as pg:
        store = f"sqlite:///{Path(tmp) / 'bench.db'}"
        fill_s = fill(pg, n)
        print(f"fill: {n:,} rows in {fill_s:.2f} s")
        base_runs: list[float] = []
        our_runs: list[float] = []
        ok = True
        for i in range(max(1, args.repeat)):
            c0 = time.process_time()
            base_runs.append(baseline(store, pg, f"base-{i}", args.batch))
            c1 = time.process_time()
            our_runs.append(ours(store, pg, n, i, args.batch, args.profile and i == 0))
            c2 = time.process_time()
            got_b, got_o = count(store, f"base-{i}"), count(store, f"ours-{i}-{TABLE}")
            same = got_b == got_o == n
            ok = ok and same
            print(f"  run {i + 1}: baseline {n / base_runs[-1]:,.0f} rec/s (cpu {c1 - c0:.2f} s), "
                  f"ours {n / our_runs[-1]:,.0f} rec/s (cpu {c2 - c1:.2f} s), "
                  f"ratio {base_runs[-1] / our_runs[-1]:.2f}x, counts {got_b:,} / {got_o:,}")
        best_b, best_o = min(base_runs), min(our_runs)
        med_b, med_o = statistics.median(base_runs), statistics.median(our_runs)
        print(f"records: {n:,}, batch: {args.batch}, repeats: {len(base_runs)}")
        print(f"baseline (server-side SELECT + json.dumps + produce): best {n / best_b:,.0f} rec/s, "
              f"median {n / med_b:,.0f} rec/s")
        print(f"ours (run_source SqlSource incrementing, exactly-once): best {n / best_o:,.0f} rec/s, "
              f"median {n / med_o:,.0f} rec/s")
        print(f"ratio ours/baseline: best {best_b / best_o:.2f}x, median {med_b / med_o:.2f}x (target >= 0.8x)")
        print(f"counts match: {ok}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
