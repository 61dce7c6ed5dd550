"""SqlSource rides out a blink of its database and reports one that stays down (issue 32), as SqlSink does
(``tests/integration/test_sql_sink_faults.py``).

A real PostgreSQL cluster of the test's own (``own_postgres``) is restarted (``pg_ctl -m fast restart``: the
source's connection gets ``AdminShutdown``), or the source's own connection is ended by the server
(``pg_terminate_backend``), while a SqlSource run reads a table, once the run's first records are in the topic
(observed progress, not timing). The run cannot end before the fault: it is bounded by ``max_records`` and the
last rows of the table are inserted only after the fault, so it must reconnect to finish. Every row must be in
the topic exactly once, in order, at offsets ``0..N-1``, and the committed offset is the last row's. A cluster
that is stopped (before the run, or under it) fails the run within ``connection.attempts`` x
(``connection.backoff.ms`` + ``connection.timeout.ms``) with one error naming host and port; the password
inside the connection URL (a recognisable marker) is never in the error or the logs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from connect_runtime import ConfigError, ConnectError, run_source
from connect_runtime.backends import open_backend
from connect_runtime.connectors.sql import SqlSource, SqlSourceTask
from connect_runtime.runtime.offsets import StoreOffsetReader
from connect_runtime.runtime.source.contexts import TaskContext
from tests.support.postgres import OwnCluster
from tests.support.source_connectors import committed_offset, read_topic

FIRST = 60_000
"""Rows in the table when the run starts; the fault comes while (or after) they are read."""
LATER = 2_000
"""Rows inserted only after the fault: the run needs them to reach ``max_records``."""
N = FIRST + LATER
MARKER = "pw-MARKER-5e7a1c"
"""The password inside the connection URL (trust auth ignores it): never in an error or a log line."""
TOPIC = "pg-blink_rows"
PARTITION = {"protocol": "1", "table": "blink_rows"}


def _url(cluster: OwnCluster) -> str:
    return f"postgresql+psycopg://postgres:{MARKER}@127.0.0.1:{cluster.port}/postgres"


def _sql(cluster: OwnCluster, statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres", autocommit=True,
                         connect_timeout=5) as c:
        cur = c.execute(statement)
        return list(cur.fetchall()) if cur.description else []


def _insert(cluster: OwnCluster, first: int, n: int, per_ts: int) -> None:
    """Rows ``first..first+n-1``; ``per_ts`` consecutive ids share a timestamp (a group, mode ``timestamp``): ids
    ``1..per_ts`` the first, so rows inserted later (from a multiple of ``per_ts`` plus one) start a new group
    (a row inserted later into a group already read is what ``timestamp.delay.interval.ms`` is for)."""
    _sql(cluster, "CREATE TABLE IF NOT EXISTS blink_rows (id BIGINT PRIMARY KEY, ts TIMESTAMP NOT NULL, v TEXT)")
    _sql(cluster, f"INSERT INTO blink_rows SELECT g, timestamp '2025-01-01' + ((g - 1) / {per_ts}) * interval '1 second', "
                  f"'row-' || g FROM generate_series({first}, {first + n - 1}) g")


def _config(cluster: OwnCluster, mode: str, **extra: Any) -> dict[str, Any]:
    columns = {"incrementing": {"incrementing.column.name": "id"}, "timestamp": {"timestamp.column.name": "ts"},
               "bulk": {}}
    return {"name": f"src-{mode}", "connector.class": "connect_runtime.connectors.sql.SqlSource",
            "connection.url": _url(cluster), "table.include.list": "blink_rows", "topic.prefix": "pg-",
            "mode": mode, **columns[mode], "batch.max.rows": "7", "poll.interval.ms": "200",
            "poll.idle.timeout.ms": "600000",  # the run ends at max_records, never because it idled
            "connection.attempts": "20", "connection.backoff.ms": "300", "connection.timeout.ms": "2000", **extra}


def _in_topic(store: str) -> int:
    """Records committed to the topic so far (0 before it exists)."""
    with open_backend(store) as be:
        if TOPIC not in be.list_topics():
            return 0
        consumer = be.consumer(None)
        try:
            parts = consumer.partitions([TOPIC])
            return sum(consumer.end_offsets(parts, 10.0).values())
        finally:
            consumer.close()


def _wait(what: str, cond: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.02)


def _source_backends(cluster: OwnCluster) -> list[int]:
    """The server processes of the source's connections: once the run reads, the only client of this cluster
    besides the test's own (the connector's discovery connection is closed by then; the test connects only
    here and to insert the later rows, after the fault)."""
    return [int(pid) for (pid,) in _sql(cluster, "SELECT pid FROM pg_stat_activity WHERE backend_type = "
                                                 "'client backend' AND pid <> pg_backend_pid()")]


def _fault_on_progress(store: str, fault: Callable[[], None]) -> tuple[threading.Thread, dict[str, Any],
                                                                        threading.Event]:
    """A thread that runs ``fault`` once the run's first records are in the topic; what it saw (``at``: when
    the fault was done, ``error``), and an event set when it failed (to stop the run, which waits for rows)."""
    seen: dict[str, Any] = {}
    give_up = threading.Event()

    def run() -> None:
        try:
            _wait("the source's first records in the topic", lambda: _in_topic(store) > 0)
            fault()
            seen["at"] = time.monotonic()
        except BaseException as exc:  # reported by the test, which asserts "at"
            seen["error"] = exc
            give_up.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, seen, give_up


def _run_with_fault(cluster: OwnCluster, store: str, mode: str, per_ts: int, fault: Callable[[], None]) -> Any:
    """A run of ``FIRST`` rows; ``fault`` on progress, then the ``LATER`` rows the run needs to end."""
    _insert(cluster, 1, FIRST, per_ts)

    def fault_then_insert() -> None:
        fault()
        _insert(cluster, FIRST + 1, LATER, per_ts)

    t, seen, give_up = _fault_on_progress(store, fault_then_insert)
    result = run_source(_config(cluster, mode), store, max_records=N, max_seconds=300, stop=give_up)
    t.join(120)
    assert "at" in seen, f"the fault did not happen: {seen.get('error')!r}"
    return result


def _assert_exactly_once(store: str, mode: str, per_ts: int, result: Any) -> None:
    assert result.records == N, f"{result.records} records, expected {N}"
    ids = [v["id"] for v in read_topic(store, TOPIC)]
    assert len(ids) == N and len(set(ids)) == N and set(ids) == set(range(1, N + 1)), (
        f"{len(ids)} records, {len(set(ids))} distinct: rows lost or twice")
    if mode == "incrementing":
        assert ids == list(range(1, N + 1)), "records out of order: the topic offsets are not the rows' order"
        assert committed_offset(store, f"src-{mode}", PARTITION) == {"incrementing": N}
    else:  # ordered by timestamp; rows of one timestamp in any order
        groups = [(i - 1) // per_ts for i in ids]
        assert groups == sorted(groups), "records out of timestamp order"
        offset = committed_offset(store, f"src-{mode}", PARTITION)
        assert offset is not None and offset["timestamp"] == 1735689600000 + ((N - 1) // per_ts) * 1000, offset


def _assert_reconnected(cluster: OwnCluster, caplog: pytest.LogCaptureFixture) -> None:
    lost = [r.getMessage() for r in caplog.records if "reconnecting" in r.getMessage()
            and r.getMessage().startswith("SqlSource")]
    assert lost, "no reconnect was logged"
    print("lost:", lost[0])  # querying (between passes) or reading (inside a pass)
    assert f"127.0.0.1:{cluster.port}" in lost[0] and "connection.attempts" in lost[0], lost[0]
    assert MARKER not in caplog.text


def test_a_restart_under_a_sql_source_run_is_ridden_out_exactly_once(
        own_postgres: OwnCluster, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    result = _run_with_fault(own_postgres, sqlite_url, "incrementing", 1, own_postgres.restart)
    _assert_exactly_once(sqlite_url, "incrementing", 1, result)
    _assert_reconnected(own_postgres, caplog)


def test_the_source_connection_terminated_by_the_server_is_ridden_out_exactly_once(
        own_postgres: OwnCluster, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Mode ``timestamp``, 10 rows per timestamp and 7 rows per poll: every group spans two polls, so the
    connection is often lost inside a group, whose handed rows the pass opened again must skip."""
    caplog.set_level(logging.INFO)
    killed: list[int] = []

    def terminate() -> None:
        _wait("the source's connection", lambda: bool(_source_backends(own_postgres)))
        killed.extend(_source_backends(own_postgres))
        for pid in killed:
            _sql(own_postgres, f"SELECT pg_terminate_backend({pid})")

    result = _run_with_fault(own_postgres, sqlite_url, "timestamp", 10, terminate)
    assert len(killed) == 1, killed
    _assert_exactly_once(sqlite_url, "timestamp", 10, result)
    _assert_reconnected(own_postgres, caplog)


@contextmanager
def _task_by_hand(cluster: OwnCluster, store_url: str, mode: str, **extra: Any) -> Iterator[SqlSourceTask]:
    """A started SqlSource task of one table, with a real offsets store, driven by the test; stopped after."""
    connector = SqlSource()
    connector.start(_config(cluster, mode, **extra))
    task = SqlSourceTask()
    with open_backend(store_url) as be:
        store = be.offset_store(None)
        try:
            task.initialize(TaskContext({}, StoreOffsetReader(store, f"src-{mode}"), None))
            task.start(connector.task_configs(1)[0])
            yield task
        finally:
            task.stop()
            store.close()


def test_a_connection_lost_inside_a_timestamp_group_skips_exactly_the_rows_of_it_already_handed(
        own_postgres: OwnCluster, sqlite_url: str) -> None:
    """The task driven by hand (a real PostgreSQL, a real offsets store): the source's connection is ended by
    the server right after a poll handed a batch inside an unfinished timestamp group, until a lost connection
    lands there (the pass opened again re-reads the group and must skip exactly what was handed); every row is
    polled exactly once, in timestamp order."""
    rows, per_ts = 3_000, 10
    _insert(own_postgres, 1, rows, per_ts)
    with _task_by_hand(own_postgres, sqlite_url, "timestamp") as task:
        reader = task.readers[0]
        ids: list[int] = []
        into_group = 0
        for _ in range(20 * rows):  # bounded: every poll either hands rows or reconnects
            if len(ids) >= rows or into_group >= 3:
                break
            records = task.poll()
            if records is None and reader.skip:
                into_group += 1  # rewound into an unfinished group: the next pass skips what was handed
            ids.extend(r.value["id"] for r in records or [])
            if records and reader.open_group and reader.result is not None:
                for pid in _source_backends(own_postgres):
                    _sql(own_postgres, f"SELECT pg_terminate_backend({pid})")
        for _ in range(20 * rows):
            if len(ids) >= rows:
                break
            ids.extend(r.value["id"] for r in task.poll() or [])
    assert into_group, "no connection was lost inside a timestamp group"
    assert sorted(ids) == list(range(1, rows + 1)), (
        f"{len(ids)} polled, {len(set(ids))} distinct: rows lost or twice")
    groups = [(i - 1) // per_ts for i in ids]
    assert groups == sorted(groups), "records out of timestamp order"


def test_a_connection_lost_inside_a_bulk_pass_fails_clearly(own_postgres: OwnCluster, sqlite_url: str) -> None:
    """Bulk keeps no position: once a pass handed rows, a lost connection cannot resume without repeating them."""
    _insert(own_postgres, 1, 3_000, 1)
    with _task_by_hand(own_postgres, sqlite_url, "bulk") as task, pytest.raises(ConnectError) as info:
        assert task.poll(), "the first poll handed nothing"
        for pid in _source_backends(own_postgres):
            _sql(own_postgres, f"SELECT pg_terminate_backend({pid})")
        for _ in range(3_000):  # bounded: the loss surfaces at the next fetch from the server
            task.poll()
    text = str(info.value)
    assert "mode=bulk" in text and "rerun" in text and f"127.0.0.1:{own_postgres.port}" in text, text
    assert MARKER not in text


def _assert_one_clear_error(err: BaseException, cluster: OwnCluster, caplog: pytest.LogCaptureFixture) -> str:
    text = str(err)
    assert f"127.0.0.1:{cluster.port}" in text and "connection.attempts" in text, text
    assert MARKER not in text and MARKER not in caplog.text
    assert len(text) < 2000, "not one clear error"
    return text


DOWN = {"connection.attempts": "3", "connection.backoff.ms": "500", "connection.timeout.ms": "1000"}
BOUND = 3 * (0.5 + 1.0) + 15
"""connection.attempts x (backoff + one attempt's timeout), plus the run's own stop and slack."""


def test_a_database_down_at_the_start_fails_the_run_in_its_bound(
        own_postgres: OwnCluster, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    _insert(own_postgres, 1, 10, 1)
    own_postgres.stop()
    t0 = time.monotonic()
    with pytest.raises(ConnectError) as info:
        run_source(_config(own_postgres, "incrementing", **DOWN), sqlite_url, max_seconds=120)
    took = time.monotonic() - t0
    print(f"down at the start: failed after {took:.1f} s")
    assert took < BOUND, f"failed after {took:.1f} s (bound {BOUND:g} s)"
    text = _assert_one_clear_error(info.value, own_postgres, caplog)
    assert "3 attempts" in text, text


def test_a_database_that_goes_down_under_a_run_fails_it_in_its_bound_and_a_rerun_reads_the_rest(
        own_postgres: OwnCluster, sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    _insert(own_postgres, 1, FIRST, 1)
    config = _config(own_postgres, "incrementing", **DOWN)
    t, stopped, give_up = _fault_on_progress(sqlite_url, own_postgres.stop)
    with pytest.raises(ConnectError) as info:
        run_source(config, sqlite_url, max_records=N, max_seconds=300, stop=give_up)
    ended = time.monotonic()
    t.join(30)
    assert "at" in stopped, f"the cluster was not stopped: {stopped.get('error')!r}"
    print(f"down under the run: failed {ended - stopped['at']:.1f} s after the stop")
    assert ended - stopped["at"] < BOUND, f"failed {ended - stopped['at']:.1f} s after the stop (bound {BOUND:g} s)"
    text = _assert_one_clear_error(info.value, own_postgres, caplog)
    assert "again after the connection was lost" in text, text
    own_postgres.start()
    _insert(own_postgres, FIRST + 1, LATER, 1)
    rerun = run_source({**config, "poll.idle.timeout.ms": "1000"}, sqlite_url, max_seconds=300)  # ends idle
    assert rerun.records < N, "the first run committed nothing before the stop"
    ids = [v["id"] for v in read_topic(sqlite_url, TOPIC)]
    assert ids == list(range(1, N + 1)), "a row is missing or twice after the rerun"


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("connection.attempts", "0", "at least 1"),
    ("connection.attempts", "three", "an integer"),
    ("connection.backoff.ms", "-1", "at least 0"),
    ("connection.backoff.ms", "ten", "an integer"),
])
def test_bad_connection_bounds_are_named(key: str, value: str, expected: str, sqlite_url: str) -> None:
    props = {"name": "src", "connector.class": "connect_runtime.connectors.sql.SqlSource",
             "connection.url": "sqlite:///unused.db", key: value}
    errors = {cv.name: cv.errors for cv in SqlSource().validate(props) if cv.errors}
    assert set(errors) == {key} and expected in " ".join(errors[key]).lower(), errors
    with pytest.raises(ConfigError) as info:
        run_source(props, sqlite_url)
    assert key in info.value.errors and expected in info.value.errors[key].lower(), info.value.errors


def test_the_bounds_default_to_kafka_connect_jdbcs() -> None:
    keys = {k: SqlSource().config_def().keys[k] for k in ("connection.attempts", "connection.backoff.ms")}
    assert {k: v.default for k, v in keys.items()} == {"connection.attempts": 3, "connection.backoff.ms": 10000}
    assert all("Kafka Connect JDBC" in v.doc for v in keys.values())
