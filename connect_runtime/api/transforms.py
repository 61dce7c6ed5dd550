"""Converters, transformations and predicates: the pluggable steps between a task and a topic.

Source path: ``poll()`` → transformations (in ``transforms`` order, each optionally guarded by a
predicate) → key/value converters ``from_connect`` → topic.
Sink path: topic → converters ``to_connect`` → transformations → ``put()``.

Each plugin is created by the runtime with no arguments, then ``configure(configs)`` is called with
its own config (the ``transforms.<name>.`` prefix removed), and ``close()`` at the end of the run.
A transformation returning ``None`` filters the record out.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

from connect_runtime.api.config import ConfigDef
from connect_runtime.api.data import Schema, SchemaAndValue
from connect_runtime.api.records import ConnectRecord, Headers

R = TypeVar("R", bound=ConnectRecord)


class Converter(abc.ABC):
    """Turns a key or value into bytes for a topic, and back."""

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        """Configure for keys (``is_key``) or values."""

    @abc.abstractmethod
    def from_connect(self, topic: str, value: Any, headers: Headers | None = None) -> bytes | None:
        """Serialise ``value`` for ``topic``; raise :class:`DataError` naming what is wrong."""

    @abc.abstractmethod
    def to_connect(self, topic: str, data: bytes | None, headers: Headers | None = None) -> Any:
        """Deserialise bytes read from ``topic``; raise :class:`DataError` naming what is wrong."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        """Serialise ``value`` of ``schema`` (Kafka Connect's ``fromConnectData``). Schemaless converters ignore
        the schema (the default here); schema-aware ones (``SCHEMA_AWARE``) override this."""
        return self.from_connect(topic, value, headers)

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        """Deserialise bytes into the value and its schema (Kafka Connect's ``toConnectData``); the schema is
        ``None`` for a schemaless converter (the default here)."""
        return SchemaAndValue(None, self.to_connect(topic, data, headers))

    SCHEMA_AWARE: ClassVar[bool] = False
    """True for a converter whose :meth:`from_connect_data` / :meth:`to_connect_data` use schemas: the pipeline
    then calls those and carries ``key_schema`` / ``value_schema`` on the records. A class flag, or set on the
    instance in :meth:`configure` (JsonConverter: ``schemas.enable``); the pipeline reads it after configure."""

    def config_def(self) -> ConfigDef:
        return ConfigDef()


class Transformation(abc.ABC, Generic[R]):
    """A single message transform (SMT): record in, record (or ``None`` to drop it) out."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        """Configure from ``transforms.<name>.*`` with the prefix removed."""

    @abc.abstractmethod
    def apply(self, record: R) -> R | None:
        """The transformed record, or ``None`` to filter it out."""

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        """Release resources at the end of the run."""


class Predicate(abc.ABC, Generic[R]):
    """A condition that guards a transformation (``transforms.<name>.predicate``)."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        """Configure from ``predicates.<name>.*`` with the prefix removed."""

    @abc.abstractmethod
    def test(self, record: R) -> bool:
        """Whether the guarded transformation applies to ``record``."""

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        """Release resources at the end of the run."""


__all__ = ["Converter", "Predicate", "Transformation"]
