"""The runtime's own connector-level config fields (Kafka Connect's names where one exists).

A connector config is the runtime's fields (below) plus the connector's own ``config_def()``.
``source_config_def()`` / ``sink_config_def()`` give the runtime's part for each kind.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from connect_runtime.api.config import (
    ConfigDef,
    Importance,
    Range,
    Type,
    ValidString,
    non_empty_string,
    valid_regex,
)

_COMMON = (
    ConfigDef()
    .define("name", Type.STRING, validator=non_empty_string, importance=Importance.HIGH,
            doc="Unique connector name; offsets, producer ids and the sink group are keyed by it.")
    .define("connector.class", Type.CLASS, importance=Importance.HIGH,
            doc="Dotted path of the connector class, e.g. connect_runtime.connectors.datagen.DataGenSource.")
    .define("tasks.max", Type.INT, default=1, validator=Range.at_least(1), importance=Importance.HIGH,
            doc="Maximum number of tasks.")
    .define("key.converter", Type.CLASS, default="connect_runtime.converters.JsonConverter",
            doc="Converter for record keys (JsonConverter, StringConverter, ByteArrayConverter).")
    .define("value.converter", Type.CLASS, default="connect_runtime.converters.JsonConverter",
            doc="Converter for record values.")
    .define("header.converter", Type.CLASS, default="connect_runtime.converters.StringConverter",
            doc="Converter for header values.")
    .define("transforms", Type.LIST, default=[], doc="Aliases of the transformations, applied in order.")
    .define("predicates", Type.LIST, default=[], doc="Aliases of the predicates.")
    .define("errors.tolerance", Type.STRING, default="none", validator=ValidString.in_("none", "all"),
            doc="none: a bad record fails the run; all: it is skipped (source) or dead-lettered (sink).")
    .define("errors.retry.timeout", Type.LONG, default=0, validator=Range.at_least(-1),
            doc="Total ms to retry a retriable failure (-1: forever, bounded by the run's bound).")
    .define("errors.retry.delay.max.ms", Type.LONG, default=60000, validator=Range.at_least(1),
            doc="Maximum ms between retries (exponential backoff up to this).")
    .define("errors.log.enable", Type.BOOLEAN, default=False, doc="Log each failed record.")
    .define("errors.log.include.messages", Type.BOOLEAN, default=False,
            doc="Include the record's key/value in those logs.")
    .define("offset.flush.interval.ms", Type.LONG, default=60000, validator=Range.at_least(0),
            doc="At-least-once source: ms between offset flushes. Sink: ms between commit points (0: after every put).")
    .define("offset.flush.timeout.ms", Type.LONG, default=5000, validator=Range.at_least(1),
            doc="Bound on one offset flush or commit.")
    .define("progress.interval.ms", Type.LONG, default=10000, validator=Range.at_least(0),
            doc="ms between two progress lines in the log of a long run (records, rate, a sink's lag); 0: none.")
)

SOURCE_CONFIG = _COMMON.merge(
    ConfigDef()
    .define("exactly.once.support", Type.STRING, default="requested",
            validator=ValidString.in_("requested", "required"),
            doc="required: fail fast unless the run is exactly-once and the connector says SUPPORTED.")
    .define("transaction.boundary", Type.STRING, default="poll",
            validator=ValidString.in_("poll", "interval", "connector"),
            doc="Where transactions end: after each poll batch, every interval, or where the connector says.")
    .define("transaction.boundary.interval.ms", Type.LONG, default=None, validator=Range.at_least(0),
            doc="With transaction.boundary=interval: ms per transaction (default offset.flush.interval.ms).")
    .define("offsets.storage.topic", Type.STRING, default=None,
            doc="This connector's own offsets store (default: the global connect-offsets).")
    .define("topic.creation.default.partitions", Type.INT, default=1, validator=Range.at_least(1),
            doc="Partitions of topics the run creates.")
    .define("topic.creation.default.replication.factor", Type.INT, default=-1, validator=Range.at_least(-1),
            doc="Replication factor of topics the run creates (-1: broker default).")
    .define("producer.max.batch.records", Type.INT, default=10000, validator=Range.at_least(1),
            doc="Records written per backend call at most.")
)

SINK_CONFIG = _COMMON.merge(
    ConfigDef()
    .define("topics", Type.LIST, default=[], doc="Topics to consume (comma list).")
    .define("topics.regex", Type.STRING, default=None, validator=valid_regex,
            doc="Consume every topic whose whole name matches this regex.")
    .define("errors.deadletterqueue.topic.name", Type.STRING, default="",
            doc="Dead letter topic for records that fail conversion or a transform (errors.tolerance=all).")
    .define("errors.deadletterqueue.context.headers.enable", Type.BOOLEAN, default=False,
            doc="Add __connect.errors.* headers (class, message, original topic/partition/offset).")
    .define("errors.deadletterqueue.topic.partitions", Type.INT, default=1, validator=Range.at_least(1),
            doc="Partitions of the dead letter topic when it is created.")
    .define("consumer.max.poll.records", Type.INT, default=500, validator=Range.at_least(1),
            doc="Records per put at most.")
    .define("pause.timeout.ms", Type.LONG, default=300000, validator=Range.at_least(1),
            doc="Bound on how long a task may keep every partition it still has to read paused; "
                "past it the run fails with a WaitTimeoutError naming the partitions.")
)


PLUGIN_PREFIXES = ("key.converter.", "value.converter.", "header.converter.")
"""Settings of the converters (``value.converter.schemas.enable``): the converter validates them."""
CLIENT_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.")
"""Kafka Connect's per-connector client overrides: the backend reads them."""
_ERRORS_NAMES = frozenset(n for n in (*_COMMON.names(), *SOURCE_CONFIG.names(), *SINK_CONFIG.names())
                          if n.startswith("errors."))


def _aliases(raw: Any) -> list[str]:
    if raw is None:
        return []
    items: Iterable[Any] = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    return [str(a).strip() for a in items if str(a).strip()]


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    names = sorted(set(candidates))
    folded = [c for c in names if c.lower() == name.lower()]
    close = folded or difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _edits(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def _norm(key: str) -> str:
    return key.lower().replace("_", ".").replace("-", ".")


def misspelling_of(key: str, candidates: Iterable[str]) -> str | None:
    """The defined key ``key`` is a misspelling of, or ``None``: the same but for case or separators
    (``_``, ``-`` for ``.``), or one edit away (two for keys of 10 characters or more; an edit is an
    insertion, deletion, substitution or swap of two neighbours) from exactly one candidate. Keys further
    off are not taken for typos: a connector may read keys it does not declare, as Kafka Connect allows."""
    names = sorted(set(candidates) - {key})
    same = [c for c in names if _norm(c) == _norm(key)]
    if same:
        return same[0]
    bound = 2 if len(key) >= 10 else 1
    close = [c for c in names if abs(len(c) - len(key)) <= bound and _edits(key, c) <= bound]
    return close[0] if len(close) == 1 else None


def unknown_keys(props: Mapping[str, Any], *config_defs: ConfigDef) -> dict[str, str]:
    """Keys of a connector config that nothing reads, each with a message (and a did-you-mean).

    Known are the names of ``config_defs`` (the runtime's and the connector's own), the prefixes
    :data:`PLUGIN_PREFIXES` and :data:`CLIENT_PREFIXES`, ``transforms.<alias>.*`` and
    ``predicates.<alias>.*`` for an alias listed in ``transforms`` / ``predicates``, and Kafka Connect's
    ``errors.*`` names (those of a sink are accepted in a source config and the other way round).
    Kafka Connect only logs such keys as unused; here a typo (``exactly.once.suport``) is named with
    the closest known key, so the caller can warn (a run) or list it (``pyconnect validate``).
    Returns ``{key: message}`` in key order; empty when every key is known.
    """
    known: set[str] = set()
    for d in config_defs:
        known.update(d.names())
    groups = {"transforms": _aliases(props.get("transforms")), "predicates": _aliases(props.get("predicates"))}
    out: dict[str, str] = {}
    for key in sorted((str(k) for k in props), key=str):
        if key in known or key in _ERRORS_NAMES:
            continue
        if any(key.startswith(p) and len(key) > len(p) for p in PLUGIN_PREFIXES + CLIENT_PREFIXES):
            continue
        group, _, rest = key.partition(".")
        if group in groups and rest:
            alias, dot, field = rest.partition(".")
            listed = groups[group]
            if alias in listed and dot and field:
                continue
            if dot and field:
                where = f"{group} lists {', '.join(repr(a) for a in listed)}" if listed else f"{group} is empty"
                out[key] = (f"unknown config key {key!r} is ignored: {alias!r} is not an alias listed in {group} "
                            f"({where}){_did_you_mean(alias, listed)}")
                continue
        hint = _did_you_mean(key, known | (_ERRORS_NAMES if key.startswith("errors.") else set()))
        out[key] = f"unknown config key {key!r} is ignored: no runtime or connector field has this name{hint}"
    return out


def misspelt_keys(props: Mapping[str, Any], *config_defs: ConfigDef) -> dict[str, str]:
    """The unknown keys (:func:`unknown_keys`) that are a misspelling of a defined one
    (:func:`misspelling_of`), each with an error message naming the key it stands for. A run refuses them
    and ``pyconnect validate`` lists them as errors: a misspelt ``table.include.list`` would otherwise read
    every table. Other unknown keys stay warnings and reach the connector, as in Kafka Connect."""
    unknown = unknown_keys(props, *config_defs)
    known: set[str] = set(_ERRORS_NAMES)
    for d in config_defs:
        known.update(d.names())
    out: dict[str, str] = {}
    for key in unknown:
        meant = misspelling_of(key, known)
        if meant is not None and meant not in props:
            out[key] = (f"unknown config key {key!r}: did you mean {meant!r}? (a key this close to a defined one is "
                        f"taken for a misspelling; fix it, or remove it)")
    return out


def source_config_def() -> ConfigDef:
    return SOURCE_CONFIG


def sink_config_def() -> ConfigDef:
    return SINK_CONFIG


__all__ = ["CLIENT_PREFIXES", "PLUGIN_PREFIXES", "SINK_CONFIG", "SOURCE_CONFIG", "misspelling_of", "misspelt_keys", "sink_config_def", "source_config_def",
           "unknown_keys"]
