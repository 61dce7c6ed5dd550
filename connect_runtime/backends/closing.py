"""Closing a client that must never be destroyed under a call in flight.

Destroying a Kafka client while another thread is inside a call on it is a use after free in librdkafka. A run can
end while a thread it abandoned (a task named by ``TasksStuck``) is still inside such a call, so whatever closes
the client at the run's end must leave it to that call: :class:`CloseWhenIdle`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class CloseWhenIdle:
    """One call at a time into a client; :meth:`close` releases the client at once when no call is inside, else
    the call inside releases it when it returns.

    ``release`` must be idempotent: it may run again after a call made once closing had begun (which the owner may
    refuse by checking :attr:`closing` inside the call). The flag is set before :meth:`close` tries the lock and
    read by a call after it left the lock, so one of the two always releases the client."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._release = release
        self.closing = False

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Serialise one call; after it, release the client if :meth:`close` came meanwhile."""
        try:
            with self._lock:
                yield
        finally:
            if self.closing:
                self._release_if_idle()

    def close(self) -> bool:
        """Release the client now, or leave it to the call inside; whether it was released now."""
        self.closing = True
        return self._release_if_idle()

    def _release_if_idle(self) -> bool:
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self._release()
        finally:
            self._lock.release()
        return True


__all__ = ["CloseWhenIdle"]
