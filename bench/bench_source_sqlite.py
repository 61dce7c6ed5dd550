"""Source run throughput on the SQLite backend, against a hand-written sqlite3 baseline.

    .venv/bin/python bench/bench_source_sqlite.py [--records 1000000] [--repeat 1] [--dir /tmp] [--metrics]

In one process, each into a fresh WAL file:

(a) baseline: the DataGen values built and ``json.dumps``-ed, ``executemany`` in 1,000-record
    transactions with one offsets upsert per transaction (what a careful hand-written script does);
(b) ours, exactly-once: ``run_source`` with ``DataGenSource``, ``batch.size=1000``,
    ``transaction.boundary=poll`` (one transaction per 1,000 records, offsets inside it);
(c) ours, at-least-once: the same run with ``exactly_once=False``;
(d) with ``--metrics``: (b) sending its metrics as an operator's run does, through Airflow's ``Stats`` to a local
    StatsD listener (``bench/_statsd.py``): what the metrics cost (target: within the noise).

Prints records/s of each and the ratios ours/baseline (target: exactly-once >= 1.0x, issue 10) and
EOS/ALOS cost (target <= 5 % slower).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _statsd import per_commit_cost, statsd_metrics

from connect_runtime import run_source
from connect_runtime.connectors.datagen import generate_value

BATCH = 1000


def baseline(path: Path, records: int, seed: int = 0) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE records (partition INTEGER, offset INTEGER, value BLOB, PRIMARY KEY (partition, offset))")
    conn.execute("CREATE TABLE offsets (key BLOB PRIMARY KEY, value BLOB)")
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    start = time.perf_counter()
    for first in range(0, records, BATCH):
        last = min(first + BATCH, records)
        rows = [(0, n, dumps(generate_value(seed, n)).encode()) for n in range(first, last)]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO records VALUES (?, ?, ?)", rows)
        conn.execute("INSERT INTO offsets VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                      (b'["bench",{"task":0}]', dumps({"position": last}).encode()))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    (count,) = conn.execute("SELECT count(*) FROM records").fetchone()
    conn.close()
    assert count == records, (count, records)
    return elapsed


def ours(path: Path, records: int, exactly_once: bool, metrics: Any = None) -> float:
    config = {"name": "bench", "connector.class": "connect_runtime.connectors.datagen.DataGenSource",
              "topic": "bench", "max.records": records, "batch.size": BATCH, "tasks.max": 1,
              "transaction.boundary": "poll", "poll.idle.timeout.ms": 0}
    start = time.perf_counter()
    result = run_source(config, f"sqlite:///{path}", exactly_once=exactly_once, metrics=metrics)
    elapsed = time.perf_counter() - start
    assert result.records == records, result.to_dict()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the three variants this many times, interleaved, and keep each one's best time "
                             "(for a noisy machine)")
    parser.add_argument("--dir", default=None, help="where the SQLite files go (default: a temp dir)")
    parser.add_argument("--metrics", action="store_true",
                        help="(d): exactly-once with its metrics through Airflow's Stats to a local StatsD listener")
    args = parser.parse_args(argv)
    n = args.records
    t_base = t_eos = t_alos = t_metrics = float("inf")
    with contextlib.ExitStack() as stack:
        metrics, received = stack.enter_context(statsd_metrics()) if args.metrics else (None, [0])
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
                d = Path(tmp)
                t_base = min(t_base, baseline(d / f"baseline-{i}.db", n))
                t_eos = min(t_eos, ours(d / f"eos-{i}.db", n, exactly_once=True))
                t_alos = min(t_alos, ours(d / f"alos-{i}.db", n, exactly_once=False))
                if metrics is not None:
                    t_metrics = min(t_metrics, ours(d / f"metrics-{i}.db", n, exactly_once=True, metrics=metrics))
    rate = {name: n / t for name, t in (("baseline", t_base), ("eos", t_eos), ("alos", t_alos))}
    print(f"records: {n:,}" + (f" (best of {args.repeat})" if args.repeat > 1 else ""))
    print(f"(a) baseline sqlite3 executemany, 1,000/txn + offsets upsert: {rate['baseline']:>10,.0f} rec/s ({t_base:.2f} s)")
    print(f"(b) run_source DataGen, exactly-once, boundary=poll:          {rate['eos']:>10,.0f} rec/s ({t_eos:.2f} s)")
    print(f"(c) run_source DataGen, at-least-once:                        {rate['alos']:>10,.0f} rec/s ({t_alos:.2f} s)")
    print(f"ours EOS / baseline: {rate['eos'] / rate['baseline']:.2f}x (target >= 1.00)")
    print(f"ours ALOS / baseline: {rate['alos'] / rate['baseline']:.2f}x")
    print(f"EOS cost over ALOS: {(t_eos / t_alos - 1) * 100:+.1f}% time (target <= +5%)")
    if args.metrics:
        print(f"(d) (b) with metrics via Airflow Stats -> StatsD:              {n / t_metrics:>10,.0f} rec/s "
              f"({t_metrics:.2f} s; {received[0]:,} StatsD packets received)")
        print(f"metrics cost over (b): {(t_metrics / t_eos - 1) * 100:+.1f}% time (whole runs: the machine's noise)")
        per_commit = per_commit_cost(metrics)
        print(f"metrics per commit point (timed over 5,000 in a row): {per_commit * 1e6:.1f} us = "
              f"{per_commit / (t_eos / (n / BATCH)) * 100:.2f}% of one {BATCH:,}-record transaction of (b); "
              f"without metrics (the runtime's default): {per_commit_cost(None) * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
