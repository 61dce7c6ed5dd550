"""A separate process using a backend through the interface only (what the contract tests start and SIGKILL).

``python -m tests.support.contract_worker <command> '<json spec>'``; every command prints JSON lines on stdout.

- ``txn-loop``: a transactional producer (``spec["tid"]``, offsets store ``spec["store"]``) resumes after the
  transaction its committed offset names and commits transactions ``k = next, next + 1, ...`` forever: each
  sends ``spec["per_txn"]`` records ``{"txn": k, "i": i}`` round-robin over ``spec["partitions"]`` partitions of
  ``spec["topic"]`` and commits, in the same transaction, the offset ``{"txn": k}`` under ``spec["key"]`` and an
  ``extra`` entry of store ``spec["extra_store"]`` holding ``{"txn": k, "ranges": <what the commit wrote>}``;
  prints ``{"committed": k}`` after each commit.
- ``commit-and-die``: a transactional producer for store ``spec["store"]`` commits one transaction of
  ``spec["entries"]`` offsets plus ``spec["key"]`` -> ``{"n":1}``; a thread of this process SIGKILLs it the moment
  that key reads back from ``spec["store"]`` (the commit is visible there), whatever the commit is still doing.
- ``put``: ``put`` the entries ``spec["entries"]`` (``[[key, value or null], ...]``, strings) into store
  ``spec["store"]``, print ``{"put": true}``, then wait (to be killed).
- ``update``: ``spec["times"]`` read-modify-writes of ``spec["key"]`` in ``spec["store"]`` through
  ``update_entry``, each adding one to the integer held there; prints ``{"done": true}``.
- ``read``: read partition ``spec["partition"]`` of ``spec["topic"]`` from 0 to ``spec["end"]`` with
  ``read_range`` or ``read_range_batches`` (``spec["how"]``), ``timeout=spec["timeout"]``; prints
  ``{"records": n, "seconds": s}`` (run in a process of its own, so a read that does not end can be killed).
- ``held-update``: after one heartbeat (with a new topic, so it writes) of the generation the registry holds for
  connector ``spec["name"]``, one more registry change (``spec["op"]``: another such ``heartbeat``, or ``begin`` of a
  new generation) whose ``update_entry`` stops between its read and its write: prints
  ``{"read": <generation read>}`` there and goes on once a line arrives on stdin (the test's barrier); then prints
  ``{"applied": bool}`` (heartbeat) or ``{"generation": g}`` (begin).
- ``source-task``: ``run_source_task(spec["config"], spec["url"], spec["plan"], spec["index"])``; with ``spec["gate"]``
  the task's ``start()`` (after its producer's ``init_transactions`` and the generation check) prints
  ``{"waiting": true}`` and waits for a line on stdin (the test's barrier); prints ``{"records": n}`` or
  ``{"error": "<class>", "message": "..."}``.
- ``hold``: (SQLite only: how the suite makes a file unreachable) hold the write lock of the database file
  ``spec["path"]`` until a line arrives on stdin; prints ``{"held": true}`` once it holds it.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def _say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def _ranges(written: Any) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {}
    for tp, (first, nxt) in written.ranges.items():
        out.setdefault(tp.topic, {})[str(tp.partition)] = [first, nxt]
    return out


def txn_loop(spec: dict[str, Any]) -> None:
    from connect_runtime.backends import ProducerRecord, open_backend

    be = open_backend(spec["url"])
    key = spec["key"].encode()
    store = be.offset_store(spec.get("store"))
    held = store.get([key]).get(key)
    store.close()
    k = 0 if held is None else int(json.loads(held)["txn"]) + 1
    producer = be.transactional_producer(spec["tid"], spec.get("store"))
    producer.init_transactions(30)
    parts, per = int(spec["partitions"]), int(spec["per_txn"])
    while True:
        producer.begin_transaction()
        producer.send([ProducerRecord(spec["topic"], i % parts, None, json.dumps({"txn": k, "i": i}).encode())
                       for i in range(per)])

        def extra(written: Any, k: int = k) -> dict[str, list[tuple[bytes, bytes]]]:
            value = json.dumps({"txn": k, "ranges": _ranges(written)}).encode()
            return {spec["extra_store"]: [(key, value)]}

        producer.commit_transaction([(key, json.dumps({"txn": k}).encode())], 30, extra)
        _say({"committed": k})
        k += 1


def commit_and_die(spec: dict[str, Any]) -> None:
    import os
    import signal
    import threading

    from connect_runtime.backends import open_backend

    be, watcher = open_backend(spec["url"]), open_backend(spec["url"])
    key = spec["key"].encode()
    producer = be.transactional_producer(spec["tid"], spec["store"])
    producer.init_transactions(30)
    store = watcher.offset_store(spec["store"])
    store.get([key])  # the store exists and is read up to now before the commit begins

    def watch() -> None:
        while True:
            if store.get([key]):
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.001)

    threading.Thread(target=watch, daemon=True).start()
    producer.begin_transaction()
    entries = [(json.dumps([spec["key"], {"filler": i}]).encode(), b'{"n":1}') for i in range(int(spec["entries"]))]
    producer.commit_transaction([*entries, (key, b'{"n":1}')], 30)
    _say({"committed": True})
    time.sleep(60)  # the watcher kills this process


def put(spec: dict[str, Any]) -> None:
    from connect_runtime.backends import open_backend

    be = open_backend(spec["url"])
    store = be.offset_store(spec.get("store"))
    store.put([(k.encode(), None if v is None else v.encode()) for k, v in spec["entries"]], 30)
    _say({"put": True})
    time.sleep(600)


def update(spec: dict[str, Any]) -> None:
    from connect_runtime.backends import open_backend

    be = open_backend(spec["url"])
    for _ in range(int(spec["times"])):
        be.update_entry(spec["store"], spec["key"].encode(),
                        lambda old: str(int(old or b"0") + 1).encode(), 60)
    be.close()
    _say({"done": True})


def read(spec: dict[str, Any]) -> None:
    from connect_runtime.api.records import TopicPartition
    from connect_runtime.backends import open_backend

    be = open_backend(spec["url"])
    tp = TopicPartition(spec["topic"], int(spec["partition"]))
    started = time.monotonic()
    if spec["how"] == "read_range":
        n = sum(1 for _ in be.read_range(tp, 0, int(spec["end"]), timeout=float(spec["timeout"])))
    else:
        n = sum(len(b[0]) for b in be.read_range_batches(tp, 0, int(spec["end"]), timeout=float(spec["timeout"])))
    _say({"records": n, "seconds": time.monotonic() - started})
    be.close()


def hold(spec: dict[str, Any]) -> None:
    import sqlite3

    conn = sqlite3.connect(spec["path"], isolation_level=None, timeout=30)
    conn.execute("BEGIN EXCLUSIVE")
    _say({"held": True})
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    conn.close()
    _say({"released": True})


class _HeldBackend:
    """A backend whose first ``update_entry`` stops between its read and its write until stdin gives a line."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.held = True  # armed by held_update once the process holds the entry's writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    def update_entry(self, store: str, key: bytes, update: Any, timeout: float = 30.0) -> bytes | None:
        def between(current: bytes | None) -> bytes | None:
            new = update(current)
            if not self.held:
                self.held = True
                _say({"read": None if current is None else json.loads(current)["generation"]})
                sys.stdin.readline()
            return new  # type: ignore[no-any-return]

        return self.backend.update_entry(store, key, between, timeout)  # type: ignore[no-any-return]


def held_update(spec: dict[str, Any]) -> None:
    from connect_runtime.backends import open_backend
    from connect_runtime.runtime.registry import Registry

    be = open_backend(spec["url"])
    held = _HeldBackend(be)
    registry = Registry(held)  # type: ignore[arg-type]
    record = registry.get(spec["name"])
    assert record is not None
    # a first change, not held: where a backend claims an entry to write it (Kafka), this process now holds the claim
    # (its writer), so the held change below reads with the claim held and must lose it to the newer begin
    assert registry.heartbeat(record, ["claimed"])
    held.held = False
    if spec["op"] == "heartbeat":
        _say({"applied": registry.heartbeat(record, ["held"])})
    else:
        record, _previous = registry.begin(spec["name"], kind="source", connector_class="x.Y")
        _say({"generation": record.generation})
    be.close()


def source_task(spec: dict[str, Any]) -> None:
    import tests.support.source_connectors as connectors
    from connect_runtime import run_source_task

    if spec.get("gate"):
        def gate() -> None:
            _say({"waiting": True})
            sys.stdin.readline()

        connectors.TASK_GATE[0] = gate
    try:
        result = run_source_task(spec["config"], spec["url"], spec["plan"], int(spec["index"]), max_seconds=60)
    except Exception as exc:
        _say({"error": type(exc).__name__, "message": str(exc)})
    else:
        _say({"records": result.records})


def main(argv: list[str]) -> int:
    command, spec = argv[1], json.loads(argv[2])
    {"txn-loop": txn_loop, "commit-and-die": commit_and_die, "put": put, "update": update, "read": read, "hold": hold,
     "held-update": held_update, "source-task": source_task}[command](spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
