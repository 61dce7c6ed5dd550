"""A sink run's config: the fields the run owns (:data:`SINK_RUN_CONFIG`, on top of
:data:`~connect_runtime.runtime.config.SINK_CONFIG`) and validation, which names every bad field in one
:class:`ConfigError`. Exactly one of ``topics`` / ``topics.regex`` is required."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Range, Type
from connect_runtime.api.connector import SinkConnector
from connect_runtime.api.errors import ConfigError
from connect_runtime.runtime.config import SINK_CONFIG
from connect_runtime.runtime.pipeline import SinkPipeline
from connect_runtime.runtime.worker import check_config, connector_props

SINK_RUN_CONFIG = (
    ConfigDef()
    .define("task.shutdown.graceful.timeout.ms", Type.LONG, default=30000, validator=Range.at_least(1),
            doc="Bound on the wait for tasks to make their last commit and stop once the run stopped.")
)
"""Sink-run fields owned by this module (on top of ``SINK_CONFIG``), the same as a source run's."""


def validate(config: Mapping[str, Any]) -> tuple[dict[str, Any], SinkConnector, SinkPipeline]:
    """Typed runtime values, the connector (not yet initialised) and the first task's pipeline;
    one ConfigError naming every bad field (the worker core checks what source and sink runs share)."""
    if not isinstance(config, Mapping):
        raise ConfigError(errors={"config": f"expected a mapping of config fields, got {type(config).__name__}"})
    values, connector, errors = check_config(connector_props(config), SINK_CONFIG.merge(SINK_RUN_CONFIG),
                                             SinkConnector, kind="sink")
    if "topics" not in errors and "topics.regex" not in errors:
        has_list = bool(values.get("topics"))
        has_regex = bool(values.get("topics.regex"))
        if has_list == has_regex:
            why = (
                "exactly one of 'topics' and 'topics.regex' is required, got "
                + ("both" if has_list else "neither")
            )
            errors["topics"] = why
            errors["topics.regex"] = why
    pipeline: SinkPipeline | None = None
    if not errors:
        try:
            pipeline = SinkPipeline.from_config(config, task_id=0)
        except ConfigError as exc:
            errors.update(exc.errors or {"transforms": str(exc)})
    if errors:
        name = config.get("name")
        prefix = f"invalid configuration of sink connector {name!r}: " if name else "invalid configuration: "
        raise ConfigError(prefix + "; ".join(f"{k}: {v}" for k, v in errors.items()), errors)
    assert connector is not None and pipeline is not None
    return values, connector, pipeline


def validate_sink_config(config: Mapping[str, Any]) -> None:
    """Check a sink connector config as a run does before it starts (the runtime's fields, the connector's
    own, ``topics``/``topics.regex``, transforms and converters); nothing is started.

    :raises ConfigError: one error naming every invalid field.
    """
    _, _, pipeline = validate(config)
    pipeline.close()


__all__ = ["SINK_RUN_CONFIG", "validate", "validate_sink_config"]
