"""A separate process writing to an SQLite backend (what test_sqlite.py starts with subprocess).

``python sqlite_worker.py <command> '<json spec>'``; every command prints JSON lines on stdout.

- ``fenced``: init a transactional producer, begin, send ``spec["records"]`` values, print
  ``{"state": "sent", "epoch": e}``, wait for a line on stdin, commit, print ``{"state": "committed"}``
  or ``{"error": "<class>", "message": "..."}``.
- ``commit``: init a transactional producer and commit ``spec["records"]`` values with offsets
  ``spec["offsets"]``; print ``{"state": "committed", "epoch": e, "ranges": [...]}``.
- ``writer``: wait (bounded) until ``spec["start_file"]`` exists, then write ``spec["transactions"]``
  transactions of ``spec["per_txn"]`` records ``b"<name>:<n>"`` to ``spec["topic"]`` partition 0
  (transactional producer unless ``spec["plain"]``); print ``{"state": "done"}``.
- ``loop``: commit transactions of ``spec["per_txn"]`` records ``b"<txn>:<n>"`` forever (until killed),
  printing ``{"committed": txn}`` after each commit.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def main(argv: list[str]) -> int:
    command, spec = argv[1], json.loads(argv[2])
    from connect_runtime.api.errors import ConnectError
    from connect_runtime.backends import ProducerRecord, open_backend

    backend = open_backend(spec["url"], spec.get("settings", {}))
    topic = spec.get("topic", "t")
    try:
        if command == "fenced":
            producer = backend.transactional_producer(spec["tid"])
            producer.init_transactions(10)
            producer.begin_transaction()
            producer.send([ProducerRecord(topic, None, None, v.encode()) for v in spec["records"]])
            _say({"state": "sent", "epoch": producer.epoch})
            if not sys.stdin.readline():
                return 3
            try:
                producer.commit_transaction([(b'["a",{}]', b'{"by":"fenced"}')], 10)
            except ConnectError as exc:
                _say({"error": type(exc).__name__, "message": str(exc)})
                return 0
            _say({"state": "committed"})
        elif command == "commit":
            producer = backend.transactional_producer(spec["tid"])
            producer.init_transactions(10)
            producer.begin_transaction()
            producer.send([ProducerRecord(topic, None, None, v.encode()) for v in spec["records"]])
            offsets = [(k.encode(), v.encode()) for k, v in spec.get("offsets", [])]
            written = producer.commit_transaction(offsets, 10)
            ranges = [[tp.topic, tp.partition, a, b] for tp, (a, b) in written.ranges.items()]
            _say({"state": "committed", "epoch": producer.epoch, "ranges": ranges})
        elif command == "writer":
            deadline = time.monotonic() + 30
            while not os.path.exists(spec["start_file"]):
                if time.monotonic() > deadline:
                    _say({"error": "timeout", "message": "start file never appeared"})
                    return 3
                time.sleep(0.005)
            name, per_txn = spec["name"], spec["per_txn"]
            n = 0
            if spec.get("plain"):
                plain = backend.producer()
                for _ in range(spec["transactions"]):
                    plain.send([ProducerRecord(topic, 0, None, f"{name}:{n + i}".encode()) for i in range(per_txn)])
                    plain.flush(30)
                    n += per_txn
            else:
                producer = backend.transactional_producer(f"writer-{name}")
                producer.init_transactions(30)
                for _ in range(spec["transactions"]):
                    producer.begin_transaction()
                    producer.send([ProducerRecord(topic, 0, None, f"{name}:{n + i}".encode()) for i in range(per_txn)])
                    producer.commit_transaction([(f'["w",{{"name":"{name}"}}]'.encode(), str(n).encode())], 30)
                    n += per_txn
            _say({"state": "done"})
        elif command == "loop":
            producer = backend.transactional_producer(spec["tid"])
            producer.init_transactions(10)
            per_txn, txn = spec["per_txn"], 0
            while True:
                producer.begin_transaction()
                producer.send([ProducerRecord(topic, 0, None, f"{txn}:{i}".encode()) for i in range(per_txn)])
                producer.commit_transaction([(b'["loop",{}]', json.dumps({"txn": txn}).encode())], 10)
                _say({"committed": txn})
                txn += 1
        else:
            _say({"error": "usage", "message": f"unknown command {command!r}"})
            return 2
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
