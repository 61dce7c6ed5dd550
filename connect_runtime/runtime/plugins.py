"""Loading plugin classes (connectors, converters, transforms, predicates) by dotted path."""

from __future__ import annotations

import importlib
from typing import Any

from connect_runtime import converters, transforms
from connect_runtime.api.errors import ConfigError, missing_extra

ALIASES: dict[str, str] = {**converters.ALIASES, **transforms.ALIASES}
"""Short or Kafka Connect class names mapped to this runtime's classes (e.g.
``org.apache.kafka.connect.transforms.Filter``): the tables the built-in converters and transforms
declare, gathered here so that they import nothing but the connector API."""


def load_class(path: str, field: str, base: type | None = None) -> type[Any]:
    """Import ``package.module.Class`` named by config field ``field``; one clear ConfigError if the
    module or class is missing, or the class is not a subclass of ``base``."""
    target = ALIASES.get(path, path)
    module_name, _, class_name = target.rpartition(".")
    if not module_name:
        raise ConfigError(errors={field: f"expected a dotted class path like package.module.ClassName, got {path!r}"})
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(errors={field: f"class {path!r} cannot be imported: {missing_extra(exc, path)}"}) from exc
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ConfigError(errors={field: f"module {module_name!r} has no class {class_name!r} (from {path!r})"})
    if base is not None and not issubclass(cls, base):
        raise ConfigError(errors={field: f"class {path!r} is not a {base.__name__}"})
    return cls


def instantiate(path: str, field: str, base: type | None = None) -> Any:
    cls = load_class(path, field, base)
    try:
        return cls()
    except Exception as exc:  # a plugin's constructor must not do I/O; report what it did
        raise ConfigError(errors={field: f"class {path!r} could not be created: {exc}"}) from exc


__all__ = ["ALIASES", "instantiate", "load_class"]
