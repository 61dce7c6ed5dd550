"""CommittedOffsetsTrigger: waits, in the triggerer, until a connector's committed offsets reach a target.

Each poll opens the backend of the ``pyconnect`` connection, reads what is committed (the sink
group ``connect-<name>``'s offsets, or the source connector's source offsets) and closes it again,
all in a worker thread (``asyncio.to_thread``), so the triggerer's event loop never blocks on SQLite
or Kafka. The trigger yields exactly one event:

- ``{"status": "success", "committed": ..., "target": ..., "polls": n}`` once the target is reached;
- ``{"status": "timeout", "message": ..., "committed": ..., "target": ...}`` when ``deadline`` (a UNIX
  time, so a triggerer restart does not extend the wait) passed first; the message names every
  partition still short of its target with the offset reached and the target;
- ``{"status": "unreachable", "message": ...}`` when the target can never be reached this way (a
  sink that keeps its offsets in its destination never commits to its group): the sensor fails
  without retries;
- ``{"status": "error", "message": ...}`` when reading failed for another reason than the backend
  being unreachable (which is retried until the deadline).

See :mod:`airflow_pyconnect._offsets` for the target shapes and what "reach" means.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_pyconnect._offsets import UnreachableTargetError, missing, normalise_target, read_committed


class CommittedOffsetsTrigger(BaseTrigger):
    """Polls the committed offsets of a connector until they reach ``target``.

    :param connector_name: the connector's ``name``; a sink's group is ``connect-<name>``.
    :param target: what must be committed (already normalised: ``{topic: {"<p>": offset}}`` for a
        sink, ``[{"partition", "offset"}]`` for a source; other accepted shapes are normalised too).
    :param connector_kind: ``"sink"`` (group offsets) or ``"source"`` (source offsets).
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend.
    :param offsets_storage_topic: a source connector's own offsets store (its
        ``offsets.storage.topic``); ``None`` for the default ``connect-offsets``.
    :param poll_interval: seconds between two reads.
    :param deadline: UNIX time after which the trigger reports a timeout; ``None`` waits until the
        task's own deferral timeout.
    """

    def __init__(
        self,
        connector_name: str,
        target: Any,
        connector_kind: str = "sink",
        pyconnect_conn_id: str = "pyconnect_default",
        offsets_storage_topic: str | None = None,
        poll_interval: float = 5.0,
        deadline: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # BaseTrigger.__init__ is not annotated
        self.connector_name = connector_name
        self.connector_kind = connector_kind
        self.target = normalise_target(connector_kind, target)
        self.pyconnect_conn_id = pyconnect_conn_id
        self.offsets_storage_topic = offsets_storage_topic
        self.poll_interval = float(poll_interval)
        self.deadline = None if deadline is None else float(deadline)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_pyconnect.triggers.offsets.CommittedOffsetsTrigger",
            {
                "connector_name": self.connector_name,
                "target": self.target,
                "connector_kind": self.connector_kind,
                "pyconnect_conn_id": self.pyconnect_conn_id,
                "offsets_storage_topic": self.offsets_storage_topic,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
            },
        )

    def _read(self) -> Any:
        """One blocking read of the committed offsets (runs in a worker thread)."""
        from airflow_pyconnect.hooks.pyconnect import PyConnectHook

        with PyConnectHook(self.pyconnect_conn_id).get_backend() as backend:
            return read_committed(backend, self.connector_kind, self.connector_name, self.target,
                                  self.offsets_storage_topic)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from connect_runtime.api.errors import BackendUnavailableError

        polls = 0
        seen: Any = None
        what = f"{self.connector_kind} connector {self.connector_name!r}"
        while True:
            polls += 1
            try:
                seen = await asyncio.to_thread(self._read)
            except UnreachableTargetError as exc:
                yield TriggerEvent({"status": "unreachable", "polls": polls, "message": f"{what}: {exc}"})
                return
            except BackendUnavailableError as exc:
                self.log.warning("%s: backend unavailable (%s); polling again", what, exc)
            except Exception as exc:
                yield TriggerEvent({"status": "error", "polls": polls,
                                    "message": f"reading the committed offsets of {what} failed: "
                                               f"{type(exc).__name__}: {exc}"})
                return
            else:
                short = missing(self.connector_kind, self.target, seen)
                if not short:
                    self.log.info("%s reached its target after %d poll(s): %s", what, polls, seen)
                    yield TriggerEvent({"status": "success", "committed": seen, "target": self.target,
                                        "polls": polls})
                    return
                self.log.info("%s: %d partition(s) short of the target: %s", what, len(short), "; ".join(short))
            now = time.time()
            if self.deadline is not None and now >= self.deadline:
                short = missing(self.connector_kind, self.target, seen) if seen is not None else ["nothing read"]
                yield TriggerEvent({
                    "status": "timeout", "committed": seen, "target": self.target, "polls": polls,
                    "message": f"timed out waiting for the committed offsets of {what} to reach the target "
                               f"after {polls} poll(s); short: " + "; ".join(short),
                })
                return
            wait = self.poll_interval if self.deadline is None else min(self.poll_interval, self.deadline - now)
            await asyncio.sleep(max(wait, 0.0))


__all__ = ["CommittedOffsetsTrigger"]
