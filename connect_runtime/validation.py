"""The admin API's config side, as Kafka Connect's REST API has it: what a connector plugin takes
(``GET /connector-plugins/{plugin}/config``: :func:`plugin_config`) and whether a connector config is valid
without running it (``PUT /connector-plugins/{plugin}/config/validate``: :func:`validate_config`, with
:func:`validation_errors` and :func:`validation_warnings`). Nothing here opens a backend or starts a connector.

:data:`SHIPPED_CONNECTORS` names every connector this distribution ships; ``docs/connectors-reference.md`` is
generated from their ``config_def()`` by ``scripts/connectors_reference.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, ConfigKey, Range, ValidString
from connect_runtime.api.errors import ConfigError

SHIPPED_CONNECTORS = (
    "connect_runtime.connectors.files.DirectorySource",
    "connect_runtime.connectors.files.FileSink",
    "connect_runtime.connectors.sql.SqlSource",
    "connect_runtime.connectors.sql.SqlSink",
    "connect_runtime.connectors.lake.ParquetSink",
    "connect_runtime.connectors.datagen.DataGenSource",
    "connect_runtime.connectors.cdc.PostgresCdcSource",
)
"""The connectors of this distribution, by ``connector.class``."""


def connector_kind(config: Mapping[str, Any]) -> str:
    """``source`` or ``sink`` by the class ``connector.class`` names (a :class:`ConfigError` naming the field)."""
    from connect_runtime.api.connector import SinkConnector, SourceConnector
    from connect_runtime.runtime.plugins import load_class

    path = config.get("connector.class")
    if not path:
        raise ConfigError(errors={"connector.class": "missing required field (class)"})
    cls = load_class(str(path).strip(), "connector.class")
    if issubclass(cls, SourceConnector):
        return "source"
    if issubclass(cls, SinkConnector):
        return "sink"
    raise ConfigError(errors={"connector.class": f"class {path!r} is neither a SourceConnector nor a SinkConnector"})


def runtime_config_def(kind: str) -> ConfigDef:
    """The runtime's fields every connector of ``kind`` (``source`` or ``sink``) takes besides its own."""
    from connect_runtime.runtime.config import SINK_CONFIG, SOURCE_CONFIG

    if kind == "source":
        from connect_runtime.runtime.source import RUN_CONFIG

        return SOURCE_CONFIG.merge(RUN_CONFIG)
    from connect_runtime.runtime.sink import SINK_RUN_CONFIG

    return SINK_CONFIG.merge(SINK_RUN_CONFIG)


def valid_values(key: ConfigKey) -> str:
    """The validator as Kafka Connect's docs show "Valid Values" (``[1, ...]``, ``[a, b]``), or a short phrase
    from a validator function's docstring (``Validator: a string ...``), or ``""``."""
    validator = key.validator
    if validator is None:
        return ""
    if isinstance(validator, (Range, ValidString)):
        return repr(validator)
    doc = (getattr(validator, "__doc__", None) or "").strip().splitlines()
    return doc[0].removeprefix("Validator:").strip().rstrip(".") if doc else ""


def key_info(key: ConfigKey) -> dict[str, Any]:
    """One key as Kafka Connect's ``ConfigKeyInfo`` (``name``, ``type``, ``required``, ``default_value``,
    ``importance``, ``documentation``, ``group``) plus ``valid_values``; defaults as text, ``None`` for none."""
    default = None if key.required or key.default is None else key.default
    if isinstance(default, (list, tuple)):
        default = ",".join(map(str, default))
    elif isinstance(default, bool):
        default = str(default).lower()
    return {"name": key.name, "type": key.type.value.upper(), "required": key.required,
            "default_value": None if default is None else str(default), "importance": key.importance.value.upper(),
            "documentation": key.doc, "group": key.group, "valid_values": valid_values(key)}


def plugin_config(connector_class: str) -> list[dict[str, Any]]:
    """Kafka Connect's ``GET /connector-plugins/{plugin}/config``: every key of the connector's own
    ``config_def()``, in definition order (:func:`key_info`). :class:`ConfigError` when the class cannot be
    loaded or is no connector."""
    from connect_runtime.api.connector import Connector
    from connect_runtime.runtime.plugins import instantiate

    connector = instantiate(connector_class, "connector.class", Connector)
    config_def = connector.config_def()
    if not isinstance(config_def, ConfigDef):
        raise ConfigError(errors={"connector.class": f"{connector_class}.config_def() returned "
                                                     f"{type(config_def).__name__}, not a ConfigDef"})
    return [key_info(key) for key in config_def.keys.values()]


def validation_errors(config: Mapping[str, Any]) -> dict[str, str]:
    """Every invalid field of a connector config (empty when valid), as the runtime checks it
    before a run: runtime fields, the connector's own fields, transforms and converters."""
    try:
        kind = connector_kind(config)
    except ConfigError as exc:
        return dict(exc.errors) or {"connector.class": str(exc)}
    try:
        if kind == "source":
            from connect_runtime.runtime.source import validate_source_config

            validate_source_config(config)
        else:
            from connect_runtime.runtime.sink import validate_sink_config

            validate_sink_config(config)
    except ConfigError as exc:
        return dict(exc.errors) or {"config": str(exc)}
    return {}


def validation_warnings(config: Mapping[str, Any]) -> dict[str, str]:
    """Keys of a connector config that nothing reads (``{key: message with a did-you-mean}``), checked
    against the runtime's fields for the connector's kind and the connector's own ``config_def()``.
    Empty when ``connector.class`` cannot be loaded (that is an error, not a warning)."""
    from connect_runtime.runtime.config import misspelt_keys, unknown_keys
    from connect_runtime.runtime.plugins import load_class

    try:
        kind = connector_kind(config)
        own = load_class(str(config["connector.class"]).strip(), "connector.class")().config_def()
    except Exception:  # a connector that cannot be loaded or built is an error (validation_errors), not a warning
        return {}
    checked = [d for d in (runtime_config_def(kind), own) if isinstance(d, ConfigDef)]
    misspelt = misspelt_keys(config, *checked)  # errors (validation_errors), not warnings
    return {k: why for k, why in unknown_keys(config, *checked).items() if k not in misspelt}


def validate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka Connect's ``PUT /connector-plugins/{plugin}/config/validate``, in short: ``{"name", "error_count",
    "errors": {field: why}, "warnings": {key: why}}``; nothing is run or opened."""
    errors = validation_errors(config)
    return {"name": config.get("name"), "error_count": len(errors), "errors": errors,
            "warnings": validation_warnings(config)}


__all__ = [
    "SHIPPED_CONNECTORS",
    "connector_kind",
    "key_info",
    "plugin_config",
    "runtime_config_def",
    "valid_values",
    "validate_config",
    "validation_errors",
    "validation_warnings",
]
