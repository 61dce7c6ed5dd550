"""The worker core: what a bounded source run and a bounded sink run share.

Kafka Connect splits a connector's life between ``Worker`` (config, plugins, lifecycle) and
``WorkerTask`` (one task's loop); the source and sink variants differ only in their loops. This module
is that shared part, written once, so a fix lands in both directions:

- :func:`connector_props` hands connectors their config as Kafka Connect does, as strings, except that
  a ``Password`` value the caller passed stays a ``Password`` (so a connector that logs its props never
  prints a secret), the same in both directions;
- :func:`check_config` validates the runtime's fields and the connector's, bounds ``tasks.max``, loads
  the connector class, and collects every bad field in one :class:`ConfigError`; unknown keys are
  logged with a did-you-mean (:func:`warn_unknown_keys`);
- :class:`Generation` registers the run in the connector registry (a new generation fences the older
  ones), writes its heartbeat and records how it ended.

:class:`RunState`, :func:`supervise` and :class:`TasksStuck` live in :mod:`~connect_runtime.runtime.supervisor`
(re-exported here); the lifecycle both directions follow is :mod:`~connect_runtime.runtime.lifecycle`, a task
thread's is :mod:`~connect_runtime.runtime.task`.

The direction-specific parts stay in :mod:`~connect_runtime.runtime.source` (poll → transform →
produce, transaction boundaries, checkpoints of source offsets) and :mod:`~connect_runtime.runtime.sink`
(consume → put → pre_commit → group commit).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from connect_runtime.api.config import ConfigDef, Password
from connect_runtime.api.errors import BackendUnavailableError, ConfigError, WaitTimeoutError
from connect_runtime.backends.base import Backend
from connect_runtime.runtime.errors import STORE_RIDE_OUT_S, store_ride_out_s
from connect_runtime.runtime.plugins import load_class
from connect_runtime.runtime.registry import ConnectorRecord, Registry
from connect_runtime.runtime.supervisor import PROGRESS_EVERY, RunState, TasksStuck, supervise

log = logging.getLogger(__name__)

MAX_TASKS = 1024
"""Upper bound of ``tasks.max`` for one run (each task is a thread with its own clients)."""


def record_bytes(records: Sequence[Any], key: int, value: int) -> int:
    """The bytes of the keys and values of ``records`` (tuples: ``key`` and ``value`` are the indexes of the
    serialised key and value, ``None`` counting 0): what a run reports as the size it moved (the OpenLineage output
    statistics' ``size``). Paid per batch, in C loops."""
    return (sum(map(len, filter(None, map(itemgetter(key), records))))
            + sum(map(len, filter(None, map(itemgetter(value), records)))))


# -- config ----------------------------------------------------------------------------------------


def to_prop(value: Any) -> Any:
    """A typed JSON config value as the string Kafka Connect hands connectors (a ``Password`` stays one)."""
    if isinstance(value, (str, Password)):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def connector_props(config: Mapping[str, Any]) -> dict[str, Any]:
    """The raw config as connectors get it (``None`` values left out), the same for sources and sinks."""
    return {str(k): to_prop(v) for k, v in config.items() if v is not None}


CONFIG_LOGGER = "connect_runtime.config"
"""The logger of config warnings (unknown keys): the CLI shows it without ``-v``."""
config_log = logging.getLogger(CONFIG_LOGGER)


def warn_unknown_keys(name: str, props: Mapping[str, Any], defs: Iterable[ConfigDef]) -> dict[str, str]:
    """Keys nothing reads (:func:`connect_runtime.runtime.config.unknown_keys`: the ConfigDefs, plugin and
    client prefixes, listed transform/predicate aliases) that are not misspellings of a defined key (those are
    errors: :func:`check_config`): logged once each at WARNING with a did-you-mean, and returned as
    ``{key: message}`` (``validate`` lists the same)."""
    from connect_runtime.runtime.config import misspelt_keys, unknown_keys

    defs = list(defs)
    misspelt = misspelt_keys(props, *defs)
    out = {k: why for k, why in unknown_keys(props, *defs).items() if k not in misspelt}
    for why in out.values():
        config_log.warning("connector %s: %s", name or "?", why)
    return out


def check_config(props: Mapping[str, Any], runtime_def: ConfigDef, connector_base: type,
                 *, kind: str) -> tuple[dict[str, Any], Any, dict[str, str]]:
    """Validate the runtime's fields, load and create the connector, validate its own fields.

    Returns ``(typed runtime values, connector or None, errors)``; the caller adds its own checks and
    raises one :class:`ConfigError` naming every bad field.
    """
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    for cv in runtime_def.validate(props):
        if cv.errors:
            errors[cv.name] = "; ".join(cv.errors)
        values[cv.name] = cv.value
    tasks = values.get("tasks.max")
    if "tasks.max" not in errors and isinstance(tasks, int) and tasks > MAX_TASKS:
        errors["tasks.max"] = (f"expected at most {MAX_TASKS} tasks for one run (each task is a thread with its "
                               f"own {'producer' if kind == 'source' else 'consumer'}), got {tasks}")
    connector = None
    if "connector.class" not in errors:
        path = values["connector.class"]
        try:
            cls = load_class(path, "connector.class", connector_base)
            connector = cls()
        except ConfigError as exc:
            errors.update(exc.errors or {"connector.class": str(exc)})
        except Exception as exc:  # a constructor must not do I/O; report what it did
            errors["connector.class"] = f"class {path!r} could not be created: {exc!r}"
    if connector is not None:
        runtime_fields = set(runtime_def.names())
        try:
            checked = connector.validate(dict(props))
        except ConfigError as exc:
            errors.update(exc.errors or {"connector.class": str(exc)})
            checked = []
        for cv in checked:
            if cv.errors and cv.name not in runtime_fields and cv.name not in errors:
                errors[cv.name] = "; ".join(cv.errors)
        defs: list[ConfigDef] = [runtime_def]
        try:
            defs.append(connector.config_def())
        except Exception:  # validate() above already reported a broken connector
            pass
        from connect_runtime.runtime.config import misspelt_keys

        for key, why in misspelt_keys(props, *defs).items():
            errors.setdefault(key, why)
        warn_unknown_keys(str(values.get("name") or ""), props, defs)
    return values, connector, errors


# -- generations -----------------------------------------------------------------------------------


class Generation:
    """A run's entry in the connector registry: begun before any offset is read, ended once."""

    def __init__(self, backend: Backend, record: ConnectorRecord, previous: ConnectorRecord | None,
                 secrets: Sequence[str] = ()) -> None:
        self.registry = Registry(backend)
        self.record = record
        self.previous = previous
        self.secrets = list(secrets)
        """Secret values of the run's config: masked in the error text the registry keeps (and serves)."""

    @classmethod
    def begin(cls, backend: Backend, name: str, *, kind: str, connector_class: str, scope: str = "",
              offsets_store: str | None = None, floor: int = 0, secrets: Sequence[str] = (),
              transactional: bool = True) -> Generation:
        """``floor``: the lowest generation to take (a sink's destination records newer ones); ``secrets``: the
        config's secret values, masked in the error text kept in the registry; ``transactional``: whether its tasks
        may hold transactional producers (``ConnectorRecord.transactional``)."""
        record, previous = Registry(backend).begin(name, scope=scope, kind=kind, connector_class=connector_class,
                                                   offsets_store=offsets_store, floor=floor,
                                                   transactional=transactional)
        if floor and record.generation == floor and (previous is None or previous.generation + 1 < floor):
            log.warning("%s connector %s: its destination records generation %d, newer than this offsets store knows "
                        "(%s): this run is generation %d (was the store replaced?)", kind, name, floor - 1,
                        "no run" if previous is None else f"generation {previous.generation}", record.generation)
        if previous is not None and previous.running:
            log.warning("%s connector %s: generation %d (started by %s) was still running; generation %d fences it",
                        kind, name, previous.generation, previous.owner, record.generation)
        return cls(backend, record, previous, secrets)

    @property
    def number(self) -> int:
        return self.record.generation

    def update(self, **changes: Any) -> bool:
        return self.registry.update(self.record, **changes)

    def heartbeat(self, topics: Sequence[str] = ()) -> None:
        try:
            if not self.registry.heartbeat(self.record, topics):
                log.warning("connector %s: generation %d is no longer the newest: a newer run started; this run's "
                            "next commit will be fenced", self.record.name, self.record.generation)
        except Exception as exc:  # bookkeeping; the commits themselves are fenced
            log.warning("connector %s: writing the registry heartbeat failed: %r", self.record.name, exc)

    def finish(self, failed: BaseException | None, topics: Sequence[str] = (), **changes: Any) -> None:
        """Record the generation's end; not tried when the run failed because the store could not be reached (the
        registry lives there too: waiting for it again would only add its read bound to the run's failure; the
        generation stays "running" with its last heartbeat, which the next run's generation fences)."""
        if isinstance(failed, (BackendUnavailableError, WaitTimeoutError)):
            log.warning("connector %s: the end of generation %d is not recorded: the store could not be reached "
                        "(%s)", self.record.name, self.record.generation, type(failed).__name__)
            return
        try:
            if changes:
                self.registry.update(self.record, **changes)
            self.registry.finish(self.record, failed=failed, topics=topics, secrets=self.secrets)
        except Exception as err:  # bookkeeping must never hide the run's own outcome
            log.warning("connector %s: recording the end of generation %d failed: %r", self.record.name,
                        self.record.generation, err)


__all__ = [
    "CONFIG_LOGGER",
    "MAX_TASKS",
    "PROGRESS_EVERY",
    "STORE_RIDE_OUT_S",
    "Generation",
    "RunState",
    "TasksStuck",
    "check_config",
    "connector_props",
    "record_bytes",
    "store_ride_out_s",
    "supervise",
    "to_prop",
    "warn_unknown_keys",
]
