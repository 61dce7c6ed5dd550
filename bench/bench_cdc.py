"""PostgresCdcSource against Debezium's PostgreSQL connector, same changes, same broker, and against the limit.

In one run: a throwaway PostgreSQL 15 cluster (bench/_pg.py, ``wal_level=logical``), an Apache Kafka 4.4.0 node
(bench/_kafka.py, the broker's own JVM options), a table ``bench (id bigint PRIMARY KEY, name text, qty int,
amount numeric(12,2), ts timestamptz)``, one publication and three ``pgoutput`` slots created at the same point; then
``--changes`` changes (half inserts, half updates, in transactions of ``--tx-rows`` rows each). Each reader reads
the same slot range:

- **limit**: a plain loop over ``pg_logical_slot_peek_binary_changes`` (server-side cursor, ``fetchmany``),
  counting the Insert/Update messages by their first byte: what reading the slot costs, nothing built;
- **Debezium**: 3.6.1.Final (scripts/fetch_debezium.sh) in Kafka Connect's own worker 4.3.1
  (scripts/fetch_connect_worker.sh; ``-Xms256M -Xmx2G`` G1, as Kafka's scripts run it), ``snapshot.mode=no_data``
  on its existing slot, JsonConverter with schemas;
- **ours**: ``pyconnect run`` with PostgresCdcSource (``snapshot.mode=never`` on its existing slot), exactly-once on
  the Kafka backend (one transaction per poll), JsonConverter with schemas.

Measured from outside, the same way for both connectors: a ``read_committed`` consumer counts the topic's records
(bench/_kafka.py's CommittedCounter); **from launch** = changes / (last record seen - process start; Debezium:
the worker's JVM start, the connector created over REST as soon as it answers), **after the first record** =
(changes - the first batch seen) / (last - first seen). Prints records/s of each, the ratios ours/Debezium against
the targets (after the first record >= 1x, from launch >= 2x) and ours/limit.

    .venv/bin/python bench/bench_cdc.py [--changes 200000] [--tx-rows 1000] [--timeout 900] [--profile FILE] [--no-debezium] [--batch N]

``--profile FILE`` runs ours under ``py-spy record -f raw -o FILE`` (collapsed stacks; py-spy on PATH, or ``$PY_SPY``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import psycopg  # noqa: E402
from _kafka import CommittedCounter, apache_kafka, create_topic  # noqa: E402
from _pg import pg_cluster, psycopg_url  # noqa: E402

PYCONNECT = REPO / ".venv" / "bin" / "pyconnect"
PUBLICATION = "bench_pub"
JSON = "org.apache.kafka.connect.json.JsonConverter"
WORKER_JVM = ["-Xms256M", "-Xmx2G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
              "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
              "-Djava.awt.headless=true"]


def prepare(url: str, changes: int, tx_rows: int) -> None:
    """The table, the publication, the three slots, then the changes (half inserts, half updates)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench (id bigint PRIMARY KEY, name text, qty int, amount numeric(12,2), "
                     "ts timestamptz)")
        conn.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE bench")
        for slot in ("lim", "dbz", "ours"):
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        inserts = changes // 2
        for lo in range(0, inserts, tx_rows):
            conn.execute(f"INSERT INTO bench SELECT i, 'name ' || i, i % 1000, i * 0.25, "
                         f"timestamptz '2026-01-02 00:00:00+00' + i * interval '1 second' "
                         f"FROM generate_series({lo}, {min(lo + tx_rows, inserts) - 1}) i")
        for lo in range(0, changes - inserts, tx_rows):
            conn.execute(f"UPDATE bench SET qty = qty + 1, name = name || '!' WHERE id >= {lo} "
                         f"AND id < {min(lo + tx_rows, changes - inserts)}")


def limit(url: str, changes: int) -> float:
    """Changes per second of a plain peek loop over slot ``lim``."""
    t0 = time.perf_counter()
    n = 0
    with psycopg.connect(url) as conn, conn.cursor(name="peek") as cur:
        cur.execute("SELECT data FROM pg_logical_slot_peek_binary_changes('lim', NULL, NULL, 'proto_version', '1', "
                    "'publication_names', %s)", (PUBLICATION,))
        while rows := cur.fetchmany(10_000):
            n += sum(1 for (data,) in rows if data[:1] in (b"I", b"U"))
    elapsed = time.perf_counter() - t0
    assert n == changes, f"the peek loop saw {n} changes, {changes} were made"
    return n / elapsed


def rates(counter: CommittedCounter, launched: float, changes: int) -> tuple[float, float]:
    assert counter.first_at is not None and counter.done_at is not None
    after = (changes - counter.first_count) / max(counter.done_at - counter.first_at, 1e-9)
    return changes / (counter.done_at - launched), after


def debezium(url: str, bootstrap: str, changes: int, timeout: float, work: Path) -> tuple[float, float]:
    from tests.support import kafka_connect
    from tests.support.debezium import debezium_worker, postgres_connector

    kafka_connect.JVM_OPTIONS = WORKER_JVM  # a benchmark: the JVM as Kafka's scripts run it, not the tests' quick one
    create_topic(bootstrap, "dbz.public.bench")
    counter = CommittedCounter(bootstrap, "dbz.public.bench", changes)
    try:
        launched = time.perf_counter()
        with debezium_worker(work / "worker", bootstrap, "bench-dbz") as worker:
            config = postgres_connector(url, "dbz", "dbz", PUBLICATION, "public.bench")
            config.update({"snapshot.mode": "no_data", "publication.autocreate.mode": "disabled"})
            worker.rest("PUT", "/connectors/dbz/config", config)
            if not counter.wait(timeout):
                raise SystemExit(f"Debezium wrote {counter.count} of {changes} records in {timeout} s:\n"
                                 f"{worker.tail()}")
        return rates(counter, launched, changes)
    finally:
        counter.close()


def ours(url: str, bootstrap: str, changes: int, timeout: float, work: Path, profile: str | None,
         batch: int | None = None) -> tuple[float, float]:
    config = {"name": "cdc-bench", "connector.class": "connect_runtime.connectors.cdc.PostgresCdcSource",
              "connection.url": url, "topic.prefix": "ours", "table.include.list": "bench", "slot.name": "ours",
              "publication.name": PUBLICATION, "snapshot.mode": "never", "exactly.once.support": "required",
              "key.converter": JSON, "key.converter.schemas.enable": "true",
              "value.converter": JSON, "value.converter.schemas.enable": "true"}
    if batch:
        config["batch.max.rows"] = str(batch)
    path = work / "ours.json"
    path.write_text(json.dumps(config))
    create_topic(bootstrap, "ours.public.bench")
    counter = CommittedCounter(bootstrap, "ours.public.bench", changes)
    cmd = [str(PYCONNECT), "--backend", f"kafka://{bootstrap}", "run", str(path)]
    if profile:
        cmd = [os.environ.get("PY_SPY", "py-spy"), "record", "-f", "raw", "-o", profile, "--", *cmd]
    try:
        launched = time.perf_counter()
        with open(work / "ours.log", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log,
                                    env={**os.environ, "PYTHONPATH": str(REPO)})  # this tree's code, not the venv's
        try:
            done = counter.wait(timeout)
            proc.wait(timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if not done:
            raise SystemExit(f"ours wrote {counter.count} of {changes} records in {timeout} s:\n"
                             f"{(work / 'ours.log').read_text()[-3000:]}")
        return rates(counter, launched, changes)
    finally:
        counter.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--changes", type=int, default=200_000)
    ap.add_argument("--tx-rows", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--batch", type=int, default=None, help="ours' batch.max.rows (default: the connector's)")
    ap.add_argument("--no-debezium", action="store_true", help="ours and the limit only (profiling)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cdc-") as tmp, \
            pg_cluster("-c wal_level=logical -c max_replication_slots=10 -c max_wal_senders=10") as pg, \
            apache_kafka(Path(tmp) / "kafka") as bootstrap:
        url = psycopg_url(pg)
        t0 = time.perf_counter()
        prepare(url, args.changes, args.tx_rows)
        print(f"{args.changes} changes made in {time.perf_counter() - t0:.1f} s")
        lim = limit(url, args.changes)
        print(f"limit (peek loop):           {lim:>10,.0f} changes/s")
        d_launch = d_after = float("nan")
        if not args.no_debezium:
            d_launch, d_after = debezium(pg, bootstrap, args.changes, args.timeout, Path(tmp))
            print(f"Debezium 3.6.1: from launch  {d_launch:>10,.0f} /s   after the first record {d_after:>10,.0f} /s")
        o_launch, o_after = ours(pg, bootstrap, args.changes, args.timeout, Path(tmp), args.profile, args.batch)
        print(f"ours:           from launch  {o_launch:>10,.0f} /s   after the first record {o_after:>10,.0f} /s")
        print(f"ours / Debezium: from launch {o_launch / d_launch:.2f}x (target >= 2x), after the first record "
              f"{o_after / d_after:.2f}x (target >= 1x); ours / limit {o_after / lim:.2f}x")


if __name__ == "__main__":
    main()
