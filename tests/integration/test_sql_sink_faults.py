"""SqlSink rides out a PostgreSQL restart and reports one that stays down (issue 25, "servers that blink").

A real PostgreSQL cluster of the test's own (``own_postgres``) is restarted (``pg_ctl -m fast``: the sink's
connection gets ``AdminShutdown``) while a SqlSink run writes into it, after its first commit point. The run must
complete, every record in the table exactly once; one log line per backoff, naming the server without the
password in its URL. A cluster that stays stopped fails the run within the bound the config states
(``max.retries`` x ``retry.backoff.ms`` plus connecting), with one error naming host and port; once it is back, a
rerun delivers the rest exactly once.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from connect_runtime import run_sink
from connect_runtime.api.errors import ConnectError
from connect_runtime.backends import ProducerRecord, open_backend
from tests.support.postgres import OwnCluster

N = 300_000
PASSWORD = "not-checked-pw"


def _produce(url: str, topic: str, n: int) -> None:
    with open_backend(url) as be:
        be.create_topics({topic: 1})
        p = be.producer()
        try:
            for start in range(0, n, 50_000):
                p.send([ProducerRecord(topic, 0, None, json.dumps({"id": i, "v": f"row-{i}"}).encode())
                        for i in range(start, min(n, start + 50_000))])
            p.flush(60)
        finally:
            p.close()


def _config(cluster: OwnCluster, topic: str, **extra: Any) -> dict[str, Any]:
    return {"name": f"sink-{topic}", "connector.class": "connect_runtime.connectors.sql.SqlSink", "topics": topic,
            "connection.url": cluster.url, "auto.create": "true", "table.name.format": "rows",
            "offset.flush.interval.ms": "50", "consumer.max.poll.records": "2000", "batch.size": "2000",
            "max.retries": "10", "retry.backoff.ms": "300", **extra}


def _committed(cluster: OwnCluster) -> int:
    import psycopg

    try:
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres", connect_timeout=2) as c:
            row = c.execute("SELECT max(next_offset) FROM pyconnect_sink_offsets").fetchone()
            return int(row[0] or 0) if row else 0
    except psycopg.Error:
        return 0


def _ids(cluster: OwnCluster) -> tuple[int, int, int]:
    import psycopg

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres") as c:
        row = c.execute("SELECT count(*), count(DISTINCT id), coalesce(max(id), -1) FROM rows").fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])


def _wait(what: str, cond: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.01)


def test_a_restart_under_a_sql_sink_run_is_ridden_out_exactly_once(
        own_postgres: OwnCluster, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    _produce(sqlite_url, "blink", N)
    restarted: dict[str, float] = {}

    def restart_after_the_first_commit() -> None:
        _wait("the sink's first commit", lambda: _committed(own_postgres) > 0)
        t0 = time.monotonic()
        own_postgres.restart()
        restarted["s"] = time.monotonic() - t0
        restarted["committed_then"] = _committed(own_postgres)

    t = threading.Thread(target=restart_after_the_first_commit, daemon=True)
    t.start()
    result = run_sink(_config(own_postgres, "blink"), sqlite_url, max_seconds=240)
    t.join(60)
    assert restarted, "the cluster was not restarted"
    assert restarted["committed_then"] < N, "the run ended before the restart: nothing was ridden out"
    assert result.records >= N
    assert _ids(own_postgres) == (N, N, N - 1), "a record is missing or twice"
    retries = [r.getMessage() for r in caplog.records if "pre_commit failed" in r.getMessage()]
    assert 1 <= len(retries) <= 10, retries  # one line per backoff
    assert re.search(r"127\.0\.0\.1:\d+", retries[0]) and "max.retries" in retries[0], retries[0]
    assert PASSWORD not in caplog.text


def test_a_database_that_stays_down_fails_the_run_in_its_bound_and_a_rerun_delivers_the_rest(
        own_postgres: OwnCluster, sqlite_url: str, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.INFO)
    _produce(sqlite_url, "down", N)
    config = _config(own_postgres, "down", **{"max.retries": "3", "retry.backoff.ms": "500",
                                                "connection.attempts": "2", "connection.backoff.ms": "100",
                                                "connection.timeout.ms": "1000"})
    stopped: dict[str, float] = {}

    def stop_after_the_first_commit() -> None:
        _wait("the sink's first commit", lambda: _committed(own_postgres) > 0)
        own_postgres.stop()
        stopped["at"] = time.monotonic()

    t = threading.Thread(target=stop_after_the_first_commit, daemon=True)
    t.start()
    with pytest.raises(ConnectError) as info:
        run_sink(config, sqlite_url, max_seconds=240)
    ended = time.monotonic()
    t.join(10)
    assert stopped, "the cluster was not stopped"
    bound = 3 * (0.5 + 2 * 1.0 + 0.1) + 10  # max.retries x (backoff + connecting), plus a commit point and slack
    assert ended - stopped["at"] < bound, f"failed {ended - stopped['at']:.1f} s after the stop (bound {bound:g} s)"
    text = str(info.value)
    assert f"127.0.0.1:{own_postgres.port}" in text and "max.retries" in text, text
    assert PASSWORD not in text and PASSWORD not in caplog.text
    assert len(text) < 2000, "not one clear error"
    own_postgres.start()
    run_sink(config, sqlite_url, max_seconds=240)
    assert _ids(own_postgres) == (N, N, N - 1), "a record is missing or twice after the rerun"
