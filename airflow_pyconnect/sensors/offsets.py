"""PyConnectCommittedOffsetsSensor: wait until a connector's committed offsets reach a target.

Typical uses: wait until a source connector committed given source offsets (``connector_kind=
"source"``), e.g. every input file of the day read to its end, the target coming from an upstream
task's output::

    PyConnectCommittedOffsetsSensor(
        task_id="input_complete",
        connector_name="orders-files",
        connector_kind="source",
        target_offsets=day_files_task.output,   # [{"partition": {...}, "offset": {...}}]
    )

or until a sink connector that commits to its consumer group (``connect-<name>``) consumed
everything an upstream source run wrote (``target_offsets=ingest.output``). A sink that keeps its
offsets in its destination (``FileSink``, ``SqlSink``) never commits to its group: the sensor fails at
once for it, with a message saying so, instead of waiting until its timeout. The
sensor returns (XCom ``return_value``) the committed offsets it saw when the target was reached.

Deferrable mode (default from ``[operators] default_deferrable``): the sensor checks once and, if
the target is not reached yet, defers to :class:`~airflow_pyconnect.triggers.offsets.CommittedOffsetsTrigger`,
which polls in the triggerer without holding a worker slot. Otherwise ``poke()`` polls every
``poke_interval``. Either way the wait is bounded by ``timeout`` and a timeout names every
partition short of its target, with the offset reached and the target.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.configuration import conf

from airflow_pyconnect._offsets import (
    KINDS,
    UnreachableTargetError,
    check_target_type,
    missing,
    normalise_target,
    read_committed,
)
from airflow_pyconnect.hooks.pyconnect import DEFAULT_CONN_ID, PyConnectHook

if TYPE_CHECKING:
    from airflow.sdk import Context


class PyConnectCommittedOffsetsSensor(BaseSensorOperator):
    """Waits until the committed offsets of a connector reach ``target_offsets``.

    :param connector_name: the connector's ``name`` (templated). For a sink the group is
        ``connect-<name>``.
    :param target_offsets: what must be committed (templated). For a sink: ``{topic: {partition:
        offset}}`` (next offset to read), an upstream source run's result dict (its ``ranges``' ends)
        or a sink run's result dict. For a source: ``[{"partition": {...}, "offset": {...}}]`` or a
        source run's result dict (its ``source_offsets``). An ``XComArg`` (``task.output``,
        ``task.output["key"]``) is resolved when the sensor runs; a template string is parsed as JSON.
    :param connector_kind: ``"sink"`` (default) or ``"source"``.
    :param pyconnect_conn_id: the ``pyconnect`` connection naming the backend.
    :param offsets_storage_topic: a source connector's own offsets store (``offsets.storage.topic``).
    :param deferrable: defer to the triggerer while waiting; defaults to
        ``[operators] default_deferrable``.
    """

    template_fields: Sequence[str] = ("connector_name", "target_offsets")
    template_fields_renderers = {"target_offsets": "json"}
    ui_color = "#c9e4f5"

    def __init__(
        self,
        *,
        connector_name: str,
        target_offsets: Any,
        connector_kind: str = "sink",
        pyconnect_conn_id: str = DEFAULT_CONN_ID,
        offsets_storage_topic: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if connector_kind not in KINDS:
            raise ValueError(f"connector_kind must be one of {', '.join(KINDS)}, got {connector_kind!r}")
        check_target_type(target_offsets, "target_offsets")
        self.connector_name = connector_name
        self.target_offsets = target_offsets
        self.connector_kind = connector_kind
        self.pyconnect_conn_id = pyconnect_conn_id
        self.offsets_storage_topic = offsets_storage_topic
        self.deferrable = deferrable

    @cached_property
    def hook(self) -> PyConnectHook:
        return PyConnectHook(self.pyconnect_conn_id)

    @cached_property
    def _target(self) -> Any:
        return normalise_target(self.connector_kind, self.target_offsets)

    def _what(self) -> str:
        return f"{self.connector_kind} connector {self.connector_name!r}"

    def _read(self) -> Any:
        try:
            with self.hook.get_backend() as backend:
                return read_committed(backend, self.connector_kind, self.connector_name, self._target,
                                      self.offsets_storage_topic)
        except UnreachableTargetError as exc:
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(f"{self._what()}: {exc}") from None

    def poke(self, context: Context) -> PokeReturnValue:
        seen = self._read()
        short = missing(self.connector_kind, self._target, seen)
        if short:
            self.log.info("%s: %d partition(s) short of the target: %s", self._what(), len(short), "; ".join(short))
        else:
            self.log.info("%s reached its target: %s", self._what(), seen)
        self._last_short = short
        return PokeReturnValue(is_done=not short, xcom_value=seen if not short else None)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except Exception as exc:
                from airflow.sdk.exceptions import AirflowSensorTimeout

                short = getattr(self, "_last_short", None)
                if isinstance(exc, AirflowSensorTimeout) and short:
                    raise AirflowSensorTimeout(
                        f"{exc}; the committed offsets of {self._what()} did not reach the target: "
                        + "; ".join(short)
                    ) from exc
                raise
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        from airflow_pyconnect.triggers.offsets import CommittedOffsetsTrigger

        timeout = float(self.timeout) if self.timeout is not None else None
        deadline = None if timeout is None else time.time() + timeout
        self.defer(
            trigger=CommittedOffsetsTrigger(
                connector_name=self.connector_name,
                target=self._target,
                connector_kind=self.connector_kind,
                pyconnect_conn_id=self.pyconnect_conn_id,
                offsets_storage_topic=self.offsets_storage_topic,
                poll_interval=float(self.poke_interval),
                deadline=deadline,
            ),
            method_name="execute_complete",
            # backstop only: the trigger reports the timeout itself, with the offsets reached
            timeout=None if timeout is None else timedelta(seconds=timeout + max(60.0, 2 * self.poke_interval)),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resumes the task with the trigger's event: returns the committed offsets, or fails."""
        from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, AirflowSkipException

        if not event:
            raise AirflowException(f"{self._what()}: resumed without a trigger event")
        status = event.get("status")
        if status == "success":
            self.log.info("%s reached its target after %s trigger poll(s): %s", self._what(),
                          event.get("polls"), event.get("committed"))
            return event["committed"]
        if status == "unreachable":
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(event["message"])
        if status == "timeout":
            if self.soft_fail:
                raise AirflowSkipException(event["message"])
            raise AirflowSensorTimeout(event["message"])
        raise AirflowException(event.get("message") or f"{self._what()}: unexpected trigger event {event!r}")


__all__ = ["PyConnectCommittedOffsetsSensor"]
