"""A source run's config: the runtime's fields (``SOURCE_CONFIG`` plus :data:`RUN_CONFIG`), the connector's own,
the exactly-once checks (KIP-618's ``exactly.once.support`` and ``transaction.boundary=connector``) and the
pipeline, checked together so that one :class:`ConfigError` names every bad field; the result is a
:class:`SourcePlan`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connect_runtime.api.config import ConfigDef, Range, Type
from connect_runtime.api.connector import ConnectorTransactionBoundaries, ExactlyOnceSupport, SourceConnector
from connect_runtime.api.errors import ConfigError, ConnectError
from connect_runtime.api.source import SourceTask
from connect_runtime.runtime.config import SOURCE_CONFIG
from connect_runtime.runtime.fencing import transactional_id
from connect_runtime.runtime.pipeline import SourcePipeline
from connect_runtime.runtime.registry import ConnectorRecord
from connect_runtime.runtime.worker import check_config, connector_props

RUN_CONFIG = (
    ConfigDef()
    .define("poll.idle.timeout.ms", Type.LONG, default=500, validator=Range.at_least(0),
            doc="A task is idle once poll() returned nothing for this long; the run ends when every task is idle.")
    .define("task.shutdown.graceful.timeout.ms", Type.LONG, default=30000, validator=Range.at_least(1),
            doc="Bound on the wait for tasks to commit their last boundary and stop once the run stops.")
)
"""Source-run fields owned by this package (on top of ``SOURCE_CONFIG``)."""


@dataclass
class SourcePlan:
    """A validated run: the connector (not started yet) and the typed runtime values."""

    name: str
    props: dict[str, Any]
    values: dict[str, Any]
    connector: SourceConnector
    boundary: str
    task_class: type[SourceTask] | None = None
    """Set from ``connector.task_class()`` once the connector started."""
    scope: str = ""
    """Task identity scope (``identity``): generations and transactional ids are per (connector, scope)."""
    record: ConnectorRecord | None = None
    """This run's registry entry (its generation), once registered."""
    ledger_key: dict[str, Any] | None = None
    """Label under which committed ranges are recorded (the ranges record), e.g. a data interval."""

    def transactional_id(self, index: int, cluster_id: str | None) -> str:
        return transactional_id(self.name, self.scope, index, cluster_id)

    def load_task_class(self) -> type[SourceTask]:
        """``connector.task_class()``, checked, kept in :attr:`task_class`."""
        tc = self.connector.task_class()
        if not (isinstance(tc, type) and issubclass(tc, SourceTask)):
            raise ConfigError(errors={"connector.class": (
                f"{type(self.connector).__name__}.task_class() returned {tc!r}, which is not a SourceTask subclass")})
        self.task_class = tc
        return tc

    def task_configs(self) -> list[dict[str, str]]:
        """``connector.task_configs(tasks.max)``: never more than ``tasks.max``."""
        configs = self.connector.task_configs(self.values["tasks.max"])
        if len(configs) > self.values["tasks.max"]:
            raise ConnectError(f"connector {self.name!r}: task_configs({self.values['tasks.max']}) returned "
                               f"{len(configs)} task configs (more than tasks.max)")
        return [dict(c) for c in configs]


def prepare(config: Mapping[str, Any], exactly_once: bool) -> SourcePlan:
    """Validate ``config`` for a run (``exactly_once`` or at-least-once); one :class:`ConfigError` names every
    bad field."""
    if not isinstance(config, Mapping):
        raise ConfigError(errors={"config": f"expected a mapping of config fields, got {type(config).__name__}"})
    props = connector_props(config)
    values, connector, errors = check_config(props, SOURCE_CONFIG.merge(RUN_CONFIG), SourceConnector,
                                             kind="source")
    if connector is not None:
        if "exactly.once.support" not in errors and values["exactly.once.support"] == "required":
            if not exactly_once:
                errors["exactly.once.support"] = "required, but this run is at-least-once (exactly_once=False)"
            else:
                support = connector.exactly_once_support(props)
                if support is not ExactlyOnceSupport.SUPPORTED:
                    errors["exactly.once.support"] = (
                        f"required, but {type(connector).__name__}.exactly_once_support() returned {support!r}"
                    )
        if exactly_once and values["transaction.boundary"] == "connector" and "transaction.boundary" not in errors:
            can = connector.can_define_transaction_boundaries(props)
            if can is not ConnectorTransactionBoundaries.SUPPORTED:
                errors["transaction.boundary"] = (
                    f"connector, but {type(connector).__name__}.can_define_transaction_boundaries() "
                    f"returned {can!r}"
                )
    try:
        SourcePipeline.from_config(props).close()
    except ConfigError as exc:
        for name, why in (exc.errors or {"transforms": str(exc)}).items():
            errors.setdefault(name, why)
    if errors:
        raise ConfigError(errors=errors)
    assert connector is not None
    boundary = str(values["transaction.boundary"]).lower() if exactly_once else "none"
    return SourcePlan(values["name"], props, values, connector, boundary)


def validate_source_config(config: Mapping[str, Any], exactly_once: bool = True) -> None:
    """Check a source connector config as a run would before it starts (runtime fields, the connector's own
    fields, transforms and converters): :class:`ConfigError` naming every invalid field, else nothing."""
    prepare(config, exactly_once)


def check_bounds(max_records: int | None, max_seconds: float | None) -> None:
    if max_records is not None and max_records < 0:
        raise ConfigError(errors={"max_records": f"expected a value of at least 0, got {max_records!r}"})
    if max_seconds is not None and max_seconds < 0:
        raise ConfigError(errors={"max_seconds": f"expected a value of at least 0, got {max_seconds!r}"})


def parse_scope(identity: Any) -> str:
    """The task identity scope of a run (``identity``): ``""`` when none."""
    if identity is None or identity == "":
        return ""
    if not isinstance(identity, str):
        raise ConfigError(errors={"identity": f"expected a string (e.g. the data interval), got {identity!r}"})
    return identity


def parse_ledger_key(ledger_key: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ranges record's label (``ledger_key``) as canonical JSON values, or None."""
    if ledger_key is None:
        return None
    if not isinstance(ledger_key, Mapping) or not ledger_key:
        raise ConfigError(errors={"ledger_key": f"expected a non-empty mapping of JSON values, got {ledger_key!r}"})
    try:
        return dict(json.loads(json.dumps(dict(ledger_key), sort_keys=True)))
    except (TypeError, ValueError) as exc:
        raise ConfigError(errors={"ledger_key": f"expected JSON values, got {ledger_key!r} ({exc})"}) from None


__all__ = ["RUN_CONFIG", "SourcePlan", "check_bounds", "parse_ledger_key", "parse_scope", "prepare",
           "validate_source_config"]
