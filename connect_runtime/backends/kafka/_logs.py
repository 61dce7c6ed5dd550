"""The log bridge of the Kafka backend: librdkafka's log lines and the clients' error callbacks, deduplicated.

A broker that is down makes every client report it every few hundred ms, twice (librdkafka's log line and
the error callback); :class:`_Quiet` logs the same event once per interval. librdkafka's own lines go to
the logger ``connect_runtime.backends.kafka.librdkafka``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

_librdkafka_logger = logging.getLogger("connect_runtime.backends.kafka.librdkafka")

_VARYING = re.compile(r"after \d+ms|, \d+ identical error\(s\) suppressed|\(\d+ identical error\(s\) suppressed\)|"
                      r"(?<=#producer)-\d+|(?<=#consumer)-\d+|(?<=#admin)-\d+")
_THREAD = re.compile(r"^\[thrd:[^\]]*\]:\s*")


class _Quiet:
    """Client errors and librdkafka log lines, each logged once per :attr:`INTERVAL` s: a broker that is down
    makes every client report it every few hundred ms, twice (librdkafka's log line and the error callback),
    which buried the one line that mattered. The same event (same text but for timings and client numbers,
    whichever of the two reported it) is logged once; the next line after the interval says how many were
    left out."""

    INTERVAL = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, list[float]] = {}  # key -> [last logged (monotonic), left out since]

    def emit(self, logger: logging.Logger, level: int, event: str, line: str) -> None:
        if not logger.isEnabledFor(level):
            return
        key = _VARYING.sub("", event)
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None and now - seen[0] < self.INTERVAL:
                seen[1] += 1
                return
            left_out = 0 if seen is None else int(seen[1])
            if len(self._seen) > 4096:
                self._seen.clear()
            self._seen[key] = [now, 0]
        if left_out:
            line = f"{line} ({left_out} more like it in the last {self.INTERVAL:g} s left out)"
        logger.log(level, "%s", line)


_QUIET = _Quiet()


class _LibrdkafkaLog:
    """The ``logger`` given to librdkafka (confluent-kafka calls ``log(level, "%s [%s] %s", facility, client,
    message)``), through :data:`_QUIET`."""

    def log(self, level: int, fmt: str, *args: Any, **_: Any) -> None:
        line = fmt % args if args else fmt
        event = _THREAD.sub("", str(args[-1])) if args else line  # the same text as the error callback's
        _QUIET.emit(_librdkafka_logger, level, event, line)


_librdkafka_log = _LibrdkafkaLog()
