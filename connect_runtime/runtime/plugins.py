"""Loading plugin classes (connectors, converters, transforms, predicates) by dotted path."""

from __future__ import annotations

import importlib
import importlib.util
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


def module_absent(path: str) -> bool:
    """Whether the top-level package of class path ``path`` is not on this machine at all
    (``org.apache.kafka.connect.file.FileStreamSourceConnector``: no package ``org``; a Python connector
    installed on other machines only). A package that is here is never absent: a module missing inside it (a
    typo), a module that fails to import (a missing extra, a bug) or a missing class is what :func:`load_class`
    reports."""
    module_name = ALIASES.get(path, path).rpartition(".")[0]
    if not module_name:
        return False
    try:
        return importlib.util.find_spec(module_name.partition(".")[0]) is None
    except (ImportError, ValueError):  # found but broken: load_class names why
        return False


def instantiate(path: str, field: str, base: type | None = None) -> Any:
    cls = load_class(path, field, base)
    try:
        return cls()
    except Exception as exc:  # a plugin's constructor must not do I/O; report what it did
        raise ConfigError(errors={field: f"class {path!r} could not be created: {exc}"}) from exc


__all__ = ["ALIASES", "instantiate", "load_class", "module_absent"]
