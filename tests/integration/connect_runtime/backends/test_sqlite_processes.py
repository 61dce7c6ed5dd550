"""The SQLite backend across processes: other processes writing (tests/support/sqlite_worker.py, started with
subprocess) fence, race and interleave with this one, a SIGKILL never leaves part of a transaction, and a
backend opened before a fork works in the child."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from connect_runtime.backends import open_backend
from connect_runtime.backends.sqlite import (
    SQLiteBackend,
)
from tests.support import REPO
from tests.support.records import TP0, produce, read_all, rec, values

WORKER = REPO / "tests" / "support" / "sqlite_worker.py"


def worker(command: str, spec: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), command, json.dumps(spec)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw,
    )


def run_worker(command: str, spec: dict, timeout: float = 60) -> list[dict]:
    proc = worker(command, spec)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


def read_line(proc: subprocess.Popen, timeout: float) -> dict:
    """One JSON line from a worker, waiting at most ``timeout`` seconds."""
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    assert box and box[0], f"worker said nothing within {timeout}s; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
    return json.loads(box[0])


def test_fencing_across_two_processes(sqlite_url: str) -> None:
    a = worker("fenced", {"url": sqlite_url, "tid": "conn-0", "records": ["a1", "a2"]})
    try:
        assert read_line(a, 30) == {"state": "sent", "epoch": 0}
        lines = run_worker("commit", {"url": sqlite_url, "tid": "conn-0", "records": ["b1"],
                                      "offsets": [['["a",{}]', '{"by":"b"}']]})
        assert lines[0]["epoch"] == 1
        a.stdin.write("commit\n")
        a.stdin.flush()
        result = read_line(a, 30)
        assert result["error"] == "ProducerFencedError"
        assert "'conn-0'" in result["message"] and "epoch 0" in result["message"] and "epoch 1" in result["message"]
        assert a.wait(30) == 0
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(10)
    with open_backend(sqlite_url) as b:
        assert values(read_all(b)) == [b"b1"]  # nothing of A's
        assert b.offset_store().read_all() == {b'["a",{}]': b'{"by":"b"}'}


@pytest.mark.parametrize("plain", [False, True], ids=["transactional", "plain"])
def test_concurrent_writer_processes_get_contiguous_offsets(sqlite_url: str, tmp_path: Path, plain: bool) -> None:
    start = tmp_path / "go"
    n_proc, txns, per_txn = 4, 25, 40
    procs = [
        worker("writer", {"url": sqlite_url, "name": f"w{i}", "start_file": str(start), "plain": plain,
                          "transactions": txns, "per_txn": per_txn})
        for i in range(n_proc)
    ]
    try:
        time.sleep(0.5)
        start.touch()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            assert json.loads(out.splitlines()[-1]) == {"state": "done"}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    with open_backend(sqlite_url) as b:
        got = read_all(b)
        total = n_proc * txns * per_txn
        assert [r.offset for r in got] == list(range(total))
        by_writer: dict[str, list[int]] = {}
        for r in got:
            name, n = r.value.decode().split(":")
            by_writer.setdefault(name, []).append(int(n))
        # no loss, no duplicate, each writer's records in its own order
        assert by_writer == {f"w{i}": list(range(txns * per_txn)) for i in range(n_proc)}
        # the transactions interleaved, yet each one is contiguous
        for i in range(0, total, per_txn):
            assert len({r.value.split(b":")[0] for r in got[i:i + per_txn]}) == 1
        if not plain:
            offsets = b.offset_store().read_all()
            assert len(offsets) == n_proc and set(offsets.values()) == {str((txns - 1) * per_txn).encode()}


def test_sigkill_never_leaves_a_partial_transaction(sqlite_url: str) -> None:
    per_txn = 500
    proc = worker("loop", {"url": sqlite_url, "tid": "loop-0", "per_txn": per_txn})
    try:
        last = -1
        while last < 5:
            last = read_line(proc, 30)["committed"]
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    with open_backend(sqlite_url) as b:
        got = read_all(b)
        assert len(got) % per_txn == 0 and len(got) >= (last + 1) * per_txn
        assert [r.offset for r in got] == list(range(len(got)))
        committed_txns = len(got) // per_txn
        for t in range(committed_txns):
            assert [r.value for r in got[t * per_txn:(t + 1) * per_txn]] == [f"{t}:{i}".encode() for i in range(per_txn)]
        # the offsets were committed with exactly the records
        assert json.loads(b.offset_store().read_all()[b'["loop",{}]']) == {"txn": committed_txns - 1}
        # a successor fences the dead instance's id and continues
        p = b.transactional_producer("loop-0")
        p.init_transactions(5)
        assert p.epoch == 1


def _child_writes(url: str, b: SQLiteBackend) -> None:
    # a backend opened by the parent, used after fork: the child opens its own connections
    b.create_topics({"child": 1})
    p = b.producer()
    p.send([rec(b"from-child")])
    p.flush(10)
    os._exit(0 if b.list_topics().get("child") == 1 else 1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_backend_used_before_and_after_fork(sqlite_url: str) -> None:
    import multiprocessing

    with open_backend(sqlite_url) as b:
        produce(b, [rec(b"from-parent")])
        assert b.list_topics() == {"t": 1}  # the parent's thread connection exists before the fork
        proc = multiprocessing.get_context("fork").Process(target=_child_writes, args=(sqlite_url, b))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
        assert values(read_all(b)) == [b"from-parent", b"from-child"]
        assert b.list_topics() == {"child": 1, "t": 1}


def test_init_transactions_racing_across_processes_gives_distinct_epochs(sqlite_url: str) -> None:
    procs = [worker("commit", {"url": sqlite_url, "tid": "same", "records": [f"p{i}"]}) for i in range(4)]
    epochs, fenced = [], 0
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            if proc.returncode == 0:
                epochs.append(json.loads(out.splitlines()[-1])["epoch"])
            else:
                assert "ProducerFencedError" in err, err
                fenced += 1
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    with open_backend(sqlite_url) as b:
        committed = read_all(b)
        p = b.transactional_producer("same")
        p.init_transactions(5)
        assert p.epoch == 4  # four inits, each its own epoch
    assert len(epochs) + fenced == 4 and len(set(epochs)) == len(epochs)
    assert len(committed) == len(epochs)  # only unfenced commits are visible


def test_a_consumer_reading_while_processes_write_never_skips_an_offset(sqlite_url: str, tmp_path: Path) -> None:
    start = tmp_path / "go"
    n_proc, txns, per_txn = 3, 40, 25
    total = n_proc * txns * per_txn
    procs = [worker("writer", {"url": sqlite_url, "name": f"w{i}", "start_file": str(start),
                               "transactions": txns, "per_txn": per_txn}) for i in range(n_proc)]
    seen: list[int] = []
    try:
        with open_backend(sqlite_url) as b:
            c = b.consumer("reader")
            c.assign({TP0: 0})
            start.touch()
            deadline = time.monotonic() + 120
            while len(seen) < total and time.monotonic() < deadline:
                seen.extend(r.offset for r in c.poll(37, 0.2))
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert seen == list(range(total))
