"""The runtime's admin API: what the CLI, the Airflow provider and the Connectors view ask a store.

One function per question, each taking an open :class:`~connect_runtime.backends.base.Backend`, so the
three front ends answer the same question the same way:

- :func:`list_connectors`: every connector the registry knows (kind, generation, tasks, state, topics);
  :func:`unregistered_connectors`: those known by their stored offsets alone;
- :func:`get_offsets`: committed offsets in KIP-875's shape ``{"offsets": [{"partition", "offset"}]}``;
- :func:`sink_lag`: a sink's committed group offsets against the topics' end offsets;
- :func:`run_ranges`: the ranges record (what each labelled run, e.g. a data interval, committed);
- :func:`run_attempts`: every run the registry remembers, with how it ended (``stopped``, ``failed``,
  ``fenced``, ``died``, ``running``) and why, sources and sinks alike, and the host that ran it (an orchestrator
  names its worker through the environment variable :data:`HOSTNAME_ENV`);
- :func:`alter_offsets` / :func:`reset_offsets`: KIP-875 changes, refused with
  :class:`~connect_runtime.api.errors.ConnectorRunningError` while a run holds the connector; a change
  starts a new generation, so a run that registered before it can never commit over it.

Source offsets are read from the connector's own offsets store (``offsets.storage.topic``) with the
global store as fallback for partitions it lacks (KIP-618). Sink offsets are the consumer group
``connect-<name>``'s, except for a sink that keeps its offsets in its destination (``FileSink``,
``SqlSink``: ``SinkConnector.read_offsets`` is not ``None``): given the connector's config, they are read
and altered there, through the connector (KIP-875's ``SinkConnector.alterOffsets``); without it, reading
shows what the last run recorded in the registry (``as_of``) and altering is refused, saying what to pass.
Nothing here prints or returns connection settings.

Offsets are read and changed for connectors that exist only, as Kafka Connect's REST API answers 404
"Connector X not found". The rule, in :func:`require_connector` alone: a connector exists when a run registered
it in this store (any identity), when offsets are stored under its name (source offsets in its offsets store or
the global one, or committed offsets of the group ``connect-<name>``: a Kafka Connect connector sharing the
offsets topic, say), or when the caller gives its config (``config=``; the CLI's config-file argument), which
plays the part of Kafka Connect's connector created in the ``STOPPED`` state (KIP-980) whose offsets are set
before its first run. Otherwise :func:`get_offsets`, :func:`alter_offsets` and :func:`reset_offsets` raise
:class:`ConnectorNotFound` (with a did-you-mean over every known name) and write nothing.

A config whose ``connector.class`` is not on this machine (a Kafka Connect class such as
``org.apache.kafka.connect.file.FileStreamSourceConnector``, or a Python connector installed elsewhere; see
:func:`config_kind`) is accepted: its offsets are data (the name, the partition and the offset are all a change
needs), a source's in the offsets topic and a sink's in its consumer group, as Kafka Connect keeps them. A class
whose module is here but does not import, or lacks the class, is still an error (a typo must not send a
destination-offsets sink's change to its unused group). Changes are refused only while a run of the name holds
it (:class:`~connect_runtime.api.errors.ConnectorRunningError`): this store cannot see whether a Kafka Connect
worker runs the connector, so stop it there first (KIP-875's ``STOPPED``).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from connect_runtime import ranges as ranges_mod
from connect_runtime.api.connector import DestinationOffsets, SinkConnector
from connect_runtime.api.errors import ConfigError, ConnectError
from connect_runtime.api.records import TopicPartition
from connect_runtime.backends.base import RANGES_STORE, Backend
from connect_runtime.runtime.offsets import connector_offsets, offset_key, offset_value, parse_key
from connect_runtime.runtime.registry import HOSTNAME_ENV, ConnectorRecord, Registry

TIMEOUT = 30.0


class OffsetsInDestination(ConnectError):
    """A change of a sink's offsets that live in its destination was asked without the connector's config
    (only the connector can change them there). Nothing was changed."""


class ConnectorNotFound(ConnectError, LookupError):
    """No run registered the connector in this store, no offsets are stored under its name and no config of it
    was given (Kafka Connect: 404 ``Connector X not found``). Nothing was read or changed."""

    def __init__(self, name: str, known: Sequence[str] = ()) -> None:
        close = difflib.get_close_matches(name, sorted(set(known)), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        super().__init__(f"connector {name!r} not found: no run of it is registered in this store and no offsets "
                         f"are stored under that name{hint}")
        self.name = name


def sink_group(name: str, backend: Backend | None = None) -> str:
    """The consumer group of sink connector ``name`` in ``backend``: ``<Backend.group_id_prefix><name>``, Kafka
    Connect's ``connect-<name>`` unless the backend's ``group.id.prefix`` says otherwise."""
    return f"{'connect-' if backend is None else backend.group_id_prefix}{name}"


# -- connectors ------------------------------------------------------------------------------------


def list_connectors(backend: Backend) -> list[dict[str, Any]]:
    """Every connector the registry of this store knows, one dict each (see ``ConnectorRecord.public``)."""
    return [r.public() for r in Registry(backend, TIMEOUT).list()]


def unregistered_connectors(backend: Backend) -> list[dict[str, Any]]:
    """The connectors known by their stored source offsets alone (:func:`require_connector`: no run registered
    them in this store; Kafka Connect's own connectors sharing the global offsets topic, say), sorted, in the
    shape of :func:`list_connectors` with ``"registered": False`` (a ``source``, ``stopped``, class unknown: the
    offsets do not say) and their ``"offsets"`` (as :func:`get_offsets` shows them), from one read of the global
    store. A sink known by its group's offsets alone is not listed (a backend lists no groups)."""
    registered = {r.name for r in Registry(backend, TIMEOUT).list()}
    by_name = _stored(backend, None)
    return [{**ConnectorRecord(name=n).public(), "registered": False, "offsets": _entries(by_name[n])}
            for n in sorted(by_name) if n not in registered]


def connector(backend: Backend, name: str, scope: str = "") -> ConnectorRecord | None:
    """The registry entry of ``name`` (``None`` when no run registered it)."""
    return Registry(backend, TIMEOUT).get(name, scope)


def require_connector(backend: Backend, name: str, config: Mapping[str, Any] | None = None, *,
                      offsets_store: str | None = None) -> None:
    """The existence rule of the offsets API (the module docstring): ``name`` is known when ``config`` (the
    connector's config) is given, when a run registered it in this store (any identity), or when offsets are
    stored under it (source offsets in ``offsets_store`` or the global store, or the group ``connect-<name>``'s).

    :raises ConnectorNotFound: none of these; its did-you-mean looks at every name the registry and the global
        offsets store know."""
    if config is not None:
        return
    records = Registry(backend, TIMEOUT).list()
    if any(r.name == name for r in records):
        return
    if source_offsets(backend, name, offsets_store) or sink_offsets(backend, name):
        return
    raise ConnectorNotFound(name, [r.name for r in records] + stored_names(backend))


def stored_names(backend: Backend, offsets_store: str | None = None) -> list[str]:
    """Every connector name that has source offsets in one store (the global one when ``None``), sorted: ours
    and any other writer's in Kafka Connect's format (a Kafka Connect worker sharing the offsets topic)."""
    return sorted(_stored(backend, offsets_store))


def _stored(backend: Backend, offsets_store: str | None) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """``name -> [(partition, offset)]`` of every source offset in one store, from one read; a record in Kafka
    Connect's key format whose value is not a JSON object (another writer's) is passed over."""
    store = backend.offset_store(offsets_store)
    try:
        values = store.read_all()
    finally:
        store.close()
    out: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for key, value in values.items():
        parsed = parse_key(key)
        if parsed is None or value is None:
            continue
        try:
            offset = json.loads(value)
        except ValueError:
            continue
        if isinstance(offset, dict):
            out.setdefault(parsed[0], []).append((parsed[1], offset))
    return out


def _entries(pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """``[{"partition", "offset"}]`` in partition order (the partition's canonical JSON)."""
    ordered = sorted(pairs, key=lambda po: json.dumps(po[0], sort_keys=True, separators=(",", ":")))
    return [{"partition": p, "offset": o} for p, o in ordered]


def config_kind(config: Mapping[str, Any]) -> str | None:
    """``"source"`` or ``"sink"`` by the class ``config``'s ``connector.class`` names, or ``None`` when that
    class's module is not on this machine (:func:`~connect_runtime.runtime.plugins.module_absent`): a Kafka
    Connect class, or a Python connector installed elsewhere, whose offsets are still data.

    :raises ConfigError: no ``connector.class``; a module that is here but fails to import or lacks the class;
        a class that is neither a SourceConnector nor a SinkConnector."""
    from connect_runtime.runtime.plugins import module_absent
    from connect_runtime.validation import connector_kind

    path = str(config.get("connector.class") or "").strip()
    if not path:
        raise ConfigError(errors={"connector.class": "missing required field"})
    return None if module_absent(path) else connector_kind(config)


def is_running(backend: Backend, name: str) -> bool:
    """Whether a run holds connector ``name`` (any scope) right now."""
    return any(r.running for r in Registry(backend, TIMEOUT).list() if r.name == name)


def _kind(backend: Backend, name: str, kind: str | None) -> tuple[str, ConnectorRecord | None]:
    records = [r for r in Registry(backend, TIMEOUT).list() if r.name == name]
    rec = records[0] if records else None
    if kind is not None:
        if kind not in ("source", "sink"):
            raise ConfigError(errors={"kind": f"expected 'source' or 'sink', got {kind!r}"})
        return kind, rec
    if rec is None:
        return "unknown", None
    return rec.kind, rec


# -- offsets ---------------------------------------------------------------------------------------


def store_offsets(backend: Backend, name: str, offsets_store: str | None = None) -> list[dict[str, Any]]:
    """Committed source offsets of ``name`` in one store (``offsets_store``, or the global one when ``None``),
    ``[{"partition", "offset"}]`` in partition order: what a watcher of that store sees (no fallback)."""
    store = backend.offset_store(offsets_store)
    try:
        pairs = connector_offsets(store, name)
    finally:
        store.close()
    return _entries(pairs)


def source_offsets(backend: Backend, name: str, offsets_store: str | None = None) -> list[dict[str, Any]]:
    """Committed source offsets of ``name``: its own store first, the global store for the rest (KIP-618)."""
    if offsets_store is None:
        rec = connector(backend, name)
        offsets_store = None if rec is None else rec.offsets_store
    found: dict[str, dict[str, Any]] = {}
    stores = [offsets_store, None] if offsets_store else [None]
    for store_name in stores:
        for entry in store_offsets(backend, name, store_name):
            found.setdefault(json.dumps(entry["partition"], sort_keys=True), entry)
    return [found[k] for k in sorted(found)]


def _sink_partitions(backend: Backend, name: str, topics: Sequence[str] | None) -> list[TopicPartition]:
    if topics is None:
        rec = connector(backend, name)
        topics = rec.topics if rec is not None and rec.topics else sorted(backend.list_topics())
    consumer = backend.consumer(sink_group(name, backend))
    try:
        known = set(backend.list_topics())
        wanted = [t for t in topics if t in known]
        return sorted(consumer.partitions(wanted)) if wanted else []
    finally:
        consumer.close()


def sink_offsets(backend: Backend, name: str, topics: Sequence[str] | None = None) -> dict[TopicPartition, int]:
    """The group ``connect-<name>``'s committed offsets (partitions with none are left out)."""
    parts = _sink_partitions(backend, name, topics)
    if not parts:
        return {}
    consumer = backend.consumer(sink_group(name, backend))
    try:
        committed = consumer.committed(parts, TIMEOUT)
    finally:
        consumer.close()
    return {tp: off for tp, off in sorted(committed.items()) if off is not None}


def _sink_connector(config: Mapping[str, Any] | None) -> SinkConnector | None:
    """The (not started) sink connector of ``config``, or ``None`` when no config, not a sink, or a class not on
    this machine (:func:`config_kind`)."""
    if config is None or config_kind(config) != "sink":
        return None
    from connect_runtime.runtime.plugins import load_class

    cls = load_class(str(config["connector.class"]).strip(), "connector.class")
    return cls() if issubclass(cls, SinkConnector) else None


def destination_offsets(config: Mapping[str, Any]) -> DestinationOffsets | None:
    """The offsets a sink keeps in its destination, read there through its connector (``None``: it keeps
    none there, or the config is not a sink's)."""
    connector = _sink_connector(config)
    if connector is None:
        return None
    from connect_runtime.runtime.worker import connector_props

    return connector.read_offsets(connector_props(config))


def _sink_entries(offsets: Mapping[TopicPartition, int]) -> list[dict[str, Any]]:
    return [{"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
             "offset": {"kafka_offset": off}} for tp, off in sorted(offsets.items())]


def get_offsets(backend: Backend, name: str, *, kind: str | None = None,
                offsets_store: str | None = None, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """KIP-875's ``GET /connectors/{name}/offsets`` shape: ``{"offsets": [{"partition": ..., "offset": ...}]}``.

    Source partitions and offsets are the connector's own JSON objects; a sink's are
    ``{"kafka_topic": t, "kafka_partition": p}`` / ``{"kafka_offset": n}``. ``kind`` defaults to what the
    registry says; for a connector no run registered, both kinds are looked up. For a sink that keeps its
    offsets in its destination the answer also has ``"managed_by": "destination"`` and ``"where"``: read
    there when ``config`` (the connector's config) is given, else the last run's record of them with
    ``"as_of"`` (epoch ms).

    :raises ConnectorNotFound: ``name`` is not a known connector (:func:`require_connector`).
    """
    require_connector(backend, name, config, offsets_store=offsets_store)
    k, rec = _kind(backend, name, kind)
    dest = destination_offsets(config) if config is not None else None
    if dest is not None:
        return {"offsets": _sink_entries(dest.offsets), "managed_by": "destination", "where": dest.where}
    if rec is not None and rec.kind == "sink" and rec.owns_offsets and rec.destination is not None:
        mirrored = {TopicPartition(str(t), int(p)): int(o) for t, p, o in rec.destination_offsets}
        return {"offsets": _sink_entries(mirrored), "managed_by": "destination", "where": rec.destination,
                "as_of": rec.destination_read}
    out: list[dict[str, Any]] = []
    if k in ("source", "unknown"):
        out.extend(source_offsets(backend, name, offsets_store))
    if k in ("sink", "unknown"):
        out.extend(_sink_entries(sink_offsets(backend, name)))
    return {"offsets": out}


def sink_lag(backend: Backend, name: str, topics: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per topic partition of the sink's topics: committed offset, end offset and lag (end - committed;
    the whole partition when nothing was committed). On Kafka the end includes transaction markers. For a
    sink that keeps its offsets in its destination, ``committed`` is what its last run recorded there
    (``"in": "destination"``)."""
    parts = _sink_partitions(backend, name, topics)
    if not parts:
        return []
    rec = connector(backend, name)
    mirrored = None
    if rec is not None and rec.owns_offsets and rec.destination is not None:
        mirrored = {TopicPartition(str(t), int(p)): int(o) for t, p, o in rec.destination_offsets}
    consumer = backend.consumer(sink_group(name, backend))
    try:
        committed = consumer.committed(parts, TIMEOUT) if mirrored is None else {tp: mirrored.get(tp) for tp in parts}
        ends = consumer.end_offsets(parts, TIMEOUT)
        begins = consumer.beginning_offsets(parts, TIMEOUT)
    finally:
        consumer.close()
    out = []
    for tp in parts:
        c, end = committed.get(tp), ends.get(tp, 0)
        lag = max(0, end - (begins.get(tp, 0) if c is None else c))
        entry: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition, "committed": c, "end": end, "lag": lag}
        if mirrored is not None:
            entry["in"] = "destination"
        out.append(entry)
    return out


def _check_idle(backend: Backend, name: str, rec: ConnectorRecord | None,
                create: ConnectorRecord | None = None) -> None:
    """Refuse while a run of the connector holds it under ANY identity (KIP-875: offsets change only while the
    connector is stopped); else start a new generation of every identity, fencing every older run. ``create``:
    the entry that registers a connector no run registered yet (offsets set from its config before its first
    run: from then on it exists, stopped, like Kafka Connect's connector created in the STOPPED state)."""
    registry = Registry(backend, TIMEOUT)
    if rec is None:
        if create is not None:  # nothing can be running or fenced yet
            registry.new_generation_if_idle(name, create.scope, create=create)
        return
    records = [r for r in registry.list() if r.name == name]
    running = [r for r in records if r.running]
    if running:
        r = running[0]
        from connect_runtime.api.errors import ConnectorRunningError

        ident = f" (identity {r.scope!r})" if r.scope else ""
        raise ConnectorRunningError(
            f"connector {name!r} is running{ident}, generation {r.generation}, started by {r.owner}; stop it (or "
            "wait for its run to end) before altering or resetting its offsets")
    for r in records:
        registry.new_generation_if_idle(name, r.scope)


def _whole(value: Any) -> bool:
    """A non-negative int that is not a bool (JSON's ``true`` is not an offset)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def alter_offsets(backend: Backend, name: str, offsets: Sequence[Mapping[str, Any]], *,
                  kind: str | None = None, offsets_store: str | None = None,
                  config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """KIP-875 ``PATCH /connectors/{name}/offsets``: set (or with ``"offset": None`` delete) the given offsets.

    A sink that keeps its offsets in its destination has them altered there by its connector
    (``SinkConnector.alter_offsets``), which needs ``config``; without it the change is refused with a
    :class:`ConnectError` saying so (never a silent success on the unused group offsets).

    :raises ConnectorNotFound: ``name`` is not a known connector (:func:`require_connector`; nothing written).
    :raises ConnectorRunningError: a run holds the connector.
    :raises ConfigError: an entry that is not ``{"partition": {...}, "offset": {...} | None}``, naming it.
    """
    require_connector(backend, name, config, offsets_store=offsets_store)
    k, rec = _kind(backend, name, kind)
    sink_connector = _sink_connector(config) if config is not None else None
    if sink_connector is not None and k == "unknown":
        k = "sink"
    if not isinstance(offsets, Sequence) or isinstance(offsets, (str, bytes)):
        raise ConfigError(errors={"offsets": f"expected a list of {{partition, offset}} objects, got {offsets!r}"})
    source: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    sink: dict[TopicPartition, int | None] = {}
    for i, entry in enumerate(offsets):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("partition"), Mapping) or (
                entry.get("offset") is not None and not isinstance(entry.get("offset"), Mapping)):
            raise ConfigError(errors={f"offsets[{i}]": f"expected {{\"partition\": {{...}}, \"offset\": {{...}} or null}}, "
                                                      f"got {entry!r}"})
        partition, offset = dict(entry["partition"]), entry.get("offset")
        if set(partition) == {"kafka_topic", "kafka_partition"}:
            topic, number = partition["kafka_topic"], partition["kafka_partition"]
            if not (isinstance(topic, str) and topic and _whole(number)):
                raise ConfigError(errors={f"offsets[{i}]": 'a sink partition is {"kafka_topic": "<topic>", '
                                                          f'"kafka_partition": N}} (N >= 0), got {partition!r}'})
            if offset is not None and (set(offset) != {"kafka_offset"} or not _whole(offset["kafka_offset"])):
                raise ConfigError(errors={f"offsets[{i}]": f'a sink partition takes {{"kafka_offset": N}} (N >= 0) or '
                                                          f"null, got {offset!r}"})
            sink[TopicPartition(str(partition["kafka_topic"]), int(partition["kafka_partition"]))] = (
                None if offset is None else int(offset["kafka_offset"]))
        else:
            source.append((partition, None if offset is None else dict(offset)))
    if k == "sink" and source:
        raise ConfigError(errors={"offsets": f"connector {name!r} is a sink: partitions are "
                                             f"{{\"kafka_topic\", \"kafka_partition\"}}"})
    if k == "source" and sink:
        raise ConfigError(errors={"offsets": f"connector {name!r} is a source: kafka_topic/kafka_partition "
                                             f"partitions belong to sinks"})
    if sink and (sink_connector is not None or (rec is not None and rec.owns_offsets)):
        done = _alter_in_destination(backend, name, rec, sink_connector, config, sink)
        if done is not None:
            return done
    create = None
    if rec is None and config is not None:
        create = ConnectorRecord(name=name, kind="sink" if sink_connector is not None or sink else "source",
                                 connector_class=str(config.get("connector.class", "")),
                                 offsets_store=offsets_store or config.get("offsets.storage.topic") or None,
                                 topics=sorted({tp.topic for tp in sink}))
    _check_idle(backend, name, rec, create)
    if source:
        store_name = offsets_store or (None if rec is None else rec.offsets_store)
        store = backend.offset_store(store_name)
        try:
            store.put([(offset_key(name, p), offset_value(o)) for p, o in source], TIMEOUT)
        finally:
            store.close()
        if store_name:  # the global copy too, so a fallback read never resurrects the old value
            glob = backend.offset_store(None)
            try:
                glob.put([(offset_key(name, p), offset_value(o)) for p, o in source], TIMEOUT)
            finally:
                glob.close()
    if sink:
        consumer = backend.consumer(sink_group(name, backend))
        try:
            begins = consumer.beginning_offsets([tp for tp, o in sink.items() if o is None], TIMEOUT) \
                if any(o is None for o in sink.values()) else {}
            consumer.commit({tp: (begins[tp] if o is None else o) for tp, o in sink.items()}, TIMEOUT)
        finally:
            consumer.close()
    return {"connector": name, "altered": len(source) + len(sink)}


def reset_offsets(backend: Backend, name: str, *, kind: str | None = None,
                  offsets_store: str | None = None, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """KIP-875 ``DELETE /connectors/{name}/offsets``: every source offset deleted, the sink group back to the
    beginning of each partition it committed; a sink that keeps its offsets in its destination resets them
    there (see :func:`alter_offsets`). :raises ConnectorRunningError: a run holds the connector.
    :raises ConnectorNotFound: ``name`` is not a known connector (:func:`require_connector`; nothing written)."""
    require_connector(backend, name, config, offsets_store=offsets_store)
    current = get_offsets(backend, name, kind=kind, offsets_store=offsets_store, config=config)["offsets"]
    if not current:
        _check_idle(backend, name, _kind(backend, name, kind)[1])
        return {"connector": name, "source_partitions_reset": 0, "sink_partitions_reset": 0}
    changes = [{"partition": e["partition"], "offset": None} for e in current]
    alter_offsets(backend, name, changes, kind=kind, offsets_store=offsets_store, config=config)
    n_sink = sum(1 for e in current if set(e["partition"]) == {"kafka_topic", "kafka_partition"})
    return {"connector": name, "source_partitions_reset": len(current) - n_sink, "sink_partitions_reset": n_sink}


def _alter_in_destination(backend: Backend, name: str, rec: ConnectorRecord | None,
                          sink_connector: SinkConnector | None, config: Mapping[str, Any] | None,
                          sink: Mapping[TopicPartition, int | None]) -> dict[str, Any] | None:
    """Alter a sink's offsets in its destination, as a new generation above every one recorded there (older
    runs are fenced there). ``None``: the connector keeps none there after all (alter the group's)."""
    if sink_connector is None or config is None:
        where = f" ({rec.destination})" if rec is not None and rec.destination else ""
        raise OffsetsInDestination(
            f"sink connector {name!r} keeps its offsets in its destination{where}, not in its consumer group: "
            "pass the connector's config so they can be changed there (pyconnect offsets set|reset <config file>, "
            "or config= in connect_runtime.admin); nothing was changed")
    from connect_runtime.runtime.sink import destination_mirror
    from connect_runtime.runtime.worker import connector_props

    props = connector_props(config)
    before = sink_connector.read_offsets(props)
    if before is None:
        return None
    registry = Registry(backend, TIMEOUT)
    scope = "" if rec is None else rec.scope
    create = ConnectorRecord(name=name, scope=scope, kind="sink", generation=before.generation,
                             connector_class=str(config.get("connector.class", "")), owns_offsets=True,
                             topics=sorted({tp.topic for tp in sink}))
    gen = registry.new_generation_if_idle(name, scope, floor=before.generation + 1, create=create)
    if not sink_connector.alter_offsets(props, dict(sink), gen.generation):
        return None
    after = sink_connector.read_offsets(props)
    if after is not None:
        registry.update(gen, **destination_mirror(after))
    return {"connector": name, "altered": len(sink), "in": "destination", "where": before.where}


# -- the ranges record -----------------------------------------------------------------------------


def run_ranges(backend: Backend, connector: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """The ranges record, newest first: one entry per ``(connector, label)`` merged over the label's tasks::

        {"connector", "key": {...label...}, "ranges": <ranges>, "records": int, "generation": int,
         "updated": epoch ms}
    """
    store = backend.offset_store(RANGES_STORE)
    try:
        values = store.read_all()
    finally:
        store.close()
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for key, value in values.items():
        parsed = parse_key(key)
        if parsed is None or (connector is not None and parsed[0] != connector):
            continue
        try:
            data = json.loads(value)
        except ValueError:
            continue
        label = dict(parsed[1])
        label.pop("task", None)
        ident = (parsed[0], json.dumps(label, sort_keys=True))
        have = merged.get(ident)
        if have is None:
            merged[ident] = {"connector": parsed[0], "key": label, "ranges": data.get("ranges") or {},
                             "records": int(data.get("records") or 0), "generation": data.get("generation"),
                             "updated": int(data.get("updated") or 0)}
        else:
            have["ranges"] = ranges_mod.merge(have["ranges"], data.get("ranges") or {})
            have["records"] += int(data.get("records") or 0)
            have["updated"] = max(have["updated"], int(data.get("updated") or 0))
            have["generation"] = max(have["generation"] or 0, data.get("generation") or 0)
    out = sorted(merged.values(), key=lambda e: (-e["updated"], e["connector"], json.dumps(e["key"], sort_keys=True)))
    for e in out:
        e["ranges"] = ranges_mod.dump(ranges_mod.parse(e["ranges"]))
    return out[:limit] if limit else out


def run_attempts(backend: Backend, connector: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Every run the registry remembers (the last few per connector and identity), newest first::

        {"connector", "scope", "kind", "generation", "state", "started", "finished", "error", "records",
         "context", "topics", "host", "workers"}

    ``state``: ``running``, ``stopped`` (ended normally), ``failed``, ``fenced`` (a newer generation of the
    same connector and identity started while it ran; it could commit nothing after that) or ``died`` (its
    heartbeat stopped: killed or lost). ``error``: the reason, as the run raised it (not masked here: a
    front end showing it masks the secrets it knows). ``context``: the Airflow task instance that ran it
    (``dag_id``, ``task_id``, ``run_id``, ``try_number``) or ``None``; ``records``: what a sink run delivered
    (``None`` when it failed or for sources, whose records are in the ranges record); ``host``: the worker that
    ran it (absent from attempts recorded before hosts were kept); ``workers``: where each task of a fanned-out
    generation started (``task``, ``host``, ``try_number``, ``started``)."""
    out = Registry(backend, TIMEOUT).attempts(connector)
    return out[:limit] if limit else out


def interval_ranges(backend: Backend, name: str, ledger_key: Mapping[str, Any]) -> dict[str, Any]:
    """What the ranges record holds for one ``(connector, label)``: ``{"ranges", "records"}``."""
    want = json.loads(json.dumps(dict(ledger_key), sort_keys=True))
    for e in run_ranges(backend, name, limit=0):
        if e["key"] == want:
            return {"ranges": e["ranges"], "records": e["records"]}
    return {"ranges": {}, "records": 0}


__all__ = ["HOSTNAME_ENV", "ConnectError", "ConnectorNotFound", "OffsetsInDestination", "alter_offsets", "config_kind", "connector",
           "destination_offsets", "get_offsets", "interval_ranges", "is_running", "list_connectors",
           "require_connector", "reset_offsets", "run_attempts", "run_ranges", "sink_group", "sink_lag",
           "sink_offsets", "source_offsets", "store_offsets", "stored_names", "unregistered_connectors"]
