"""Progress lines in the log of a long run: one line every ``progress.interval.ms`` (default 10 s), never more
than one per interval and none in a run shorter than one interval. The line says the records so far, the rate
since the run started and, for a sink, how many records are left to read up to the run's targets::

    progress: source connector 'orders': 120000 records in 10.0 s (12,000 records/s); 118000 committed
    progress: sink connector 'archive': 90000 records in 10.0 s (9,000 records/s); 30000 records left to the target

They are logged (logger ``connect_runtime.runtime.progress``, level INFO), so the Airflow task log and the
``pyconnect run`` CLI show them alike. The run's supervisor (:func:`~connect_runtime.runtime.supervisor.supervise`)
calls :meth:`ProgressLog.tick` from its loop; the counts are read without locks (a line is a snapshot).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_KEY = "progress.interval.ms"
DEFAULT_PROGRESS_INTERVAL_MS = 10000


class ProgressLog:
    """The progress lines of one run. ``records()`` gives the records so far, ``detail()`` the line's tail
    (committed records, the lag to the target) or ``""``; ``interval_s`` 0 logs nothing."""

    def __init__(self, kind: str, name: str, interval_s: float, records: Callable[[], int],
                 detail: Callable[[], str] = lambda: "", started: float | None = None) -> None:
        self.kind = kind
        self.name = name
        self.interval_s = interval_s
        self.records = records
        self.detail = detail
        self.started = time.monotonic() if started is None else started
        self.next_at = self.started + interval_s
        self.lines = 0

    def tick(self, now: float | None = None) -> None:
        """Log a line if an interval passed since the last one (or since the start)."""
        if self.interval_s <= 0:
            return
        now = time.monotonic() if now is None else now
        if now < self.next_at:
            return
        self.next_at = now + self.interval_s  # the next line one whole interval after this one
        self.lines += 1
        seconds = now - self.started
        records = self.records()
        rate = records / seconds if seconds > 0 else 0.0
        detail = self.detail()
        log.info("progress: %s connector %r: %d records in %.1f s (%s records/s)%s", self.kind, self.name, records,
                 seconds, f"{rate:,.0f}", f"; {detail}" if detail else "")


__all__ = ["DEFAULT_PROGRESS_INTERVAL_MS", "PROGRESS_INTERVAL_KEY", "ProgressLog"]
