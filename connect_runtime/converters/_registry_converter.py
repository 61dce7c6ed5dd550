"""What every Schema Registry converter does the same way, whatever its format: :class:`RegistryConverter`.

A subclass (``JsonSchemaConverter``, ``ProtobufConverter``) says how a Connect schema becomes one of
confluent-kafka's serializers (:meth:`~RegistryConverter._new_serializer`) and a Connect value its input
(:meth:`~RegistryConverter._payload`), and how a writer schema from the registry becomes a reader: a
confluent-kafka deserializer plus the Connect schema (:meth:`~RegistryConverter._new_reader`) and the deserialized
object a Connect value (:meth:`~RegistryConverter._value`). This base class holds the rest:

- ``configure``: the converter's ``ConfigDef`` (its own fields plus the registry's, see
  :mod:`connect_runtime.converters._registry`), the registry client (the shared mock of a ``mock://`` scope);
- writing: one serializer per Connect schema (at most ``schemas.cache.config``, default :data:`CACHE_SIZE`, least
  recently used dropped, as Confluent's converters), called with the topic and key/value in its ``SerializationContext``, so
  confluent-kafka registers or looks up the schema under the subject and writes the wire format;
- reading: the schema id (and Protobuf message indexes) read from the framing, or from the record's
  ``__value_schema_id`` / ``__key_schema_id`` header, by confluent-kafka's own ``dual_schema_id_deserializer``, the writer schema fetched once per id, the reader built once per id; the
  Connect schema's root version is the version of the writer schema under the record's subject (Confluent's
  converters ask the registry the same), when the registry has it there;
- errors: a value that cannot be written or bytes that cannot be read give one :class:`DataError` naming the
  converter, topic, key or value, subject, field and what was expected; a registry that cannot be reached a
  :class:`RetriableError`; a certificate or credentials the registry refused a :class:`ConfigError` naming it
  (:meth:`RegistrySettings.failure`); no secret in any (:meth:`RegistrySettings.scrub`).

``None`` is ``None`` both ways (a tombstone), also for an optional schema (Confluent's JSON Schema converter
writes a framed JSON ``null`` for a null of an optional schema; a tombstone is what Kafka Connect's sinks and
compacted topics expect).
"""

from __future__ import annotations

import abc
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import dual_schema_id_deserializer
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError

from connect_runtime.api.config import ConfigDef, Importance, Range, Type
from connect_runtime.api.data import Schema, SchemaAndValue, Struct
from connect_runtime.api.errors import ConnectError, DataError
from connect_runtime.api.records import Headers
from connect_runtime.api.tls import tls_failure
from connect_runtime.api.transforms import Converter
from connect_runtime.converters._registry import REGISTRY_CONFIG, RegistrySettings, registry_settings

CACHE_SIZE = 1000
"""Serializers (one per Connect schema) and readers (one per writer schema) kept per converter, by default
(``schemas.cache.config``, Confluent's name)."""

_CACHE_CONFIG = ConfigDef().define(
    "schemas.cache.config", Type.INT, default=CACHE_SIZE, validator=Range.at_least(1), importance=Importance.LOW,
    doc="How many schemas each direction's cache keeps (a serializer per Connect schema, a reader per writer schema).")


class Reader:
    """How the records of one writer schema are read: confluent-kafka's deserializer, the Connect schema, and
    whatever the format needs besides (``extra``)."""

    __slots__ = ("deserialize", "extra", "schema")

    def __init__(self, deserialize: Callable[[bytes, SerializationContext], Any], schema: Schema,
                 extra: Any = None) -> None:
        self.deserialize, self.schema, self.extra = deserialize, schema, extra


class RegistryConverter(Converter):
    """A converter over a Schema Registry and confluent-kafka's serializers (see the module docstring)."""

    SCHEMA_AWARE: ClassVar[bool] = True
    NAME: ClassVar[str]
    SCHEMA_TYPE: ClassVar[str]
    """confluent-kafka's schema type name (``JSON``, ``PROTOBUF``) for reading the framing."""
    FORMAT_CONFIG: ClassVar[ConfigDef] = ConfigDef()
    """The format's own fields; :meth:`config_def` adds the registry's."""

    def __init__(self) -> None:
        self.is_key = False
        self.settings: RegistrySettings | None = None
        self.client: Any = None
        self._serializers: OrderedDict[Schema, Any] = OrderedDict()
        self._readers: OrderedDict[tuple[Any, ...], Reader] = OrderedDict()
        self._lock = threading.Lock()
        self._cache_size = CACHE_SIZE

    def config_def(self) -> ConfigDef:
        return self.FORMAT_CONFIG.merge(_CACHE_CONFIG).merge(REGISTRY_CONFIG)

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        values = self.config_def().parse(configs)
        self.settings = registry_settings(values)
        self.is_key = is_key
        self._cache_size = values["schemas.cache.config"]
        self._configure_format(values)
        self.client = self.settings.client()

    def _configure_format(self, values: Mapping[str, Any]) -> None:
        """Read the format's own fields (``values`` is the parsed config)."""

    # -- what a format fills in -----------------------------------------------------------------------------
    @abc.abstractmethod
    def _new_serializer(self, schema: Schema) -> Callable[[Any, SerializationContext], bytes | None]:
        """confluent-kafka's serializer for values of ``schema`` (called once per schema, then cached)."""

    def _record_name(self, schema: Schema) -> str | None:
        """The full name the subject name strategies see for ``schema`` (the JSON Schema's title: its name)."""
        return schema.name

    @abc.abstractmethod
    def _payload(self, schema: Schema, value: Any, serializer: Any) -> Any:
        """What ``serializer`` takes for the Connect ``value`` of ``schema``; :class:`DataError` naming the field."""

    @abc.abstractmethod
    def _new_reader(self, writer: RegistrySchema, schema_id: SchemaId, topic: str,
                    version: Callable[[str | None], int | None]) -> Reader:
        """The reader of records written with ``writer``; ``version(record_name)`` is the writer schema's version
        under the record's subject (``None`` if it is not registered there)."""

    @abc.abstractmethod
    def _value(self, reader: Reader, obj: Any) -> Any:
        """The Connect value of what ``reader.deserialize`` gave; :class:`DataError` naming the field."""

    # -- the Converter API ----------------------------------------------------------------------------------
    @property
    def _kind(self) -> str:
        return "key" if self.is_key else "value"

    def _ctx(self, topic: str, headers: Headers | None = None) -> SerializationContext:
        """confluent-kafka's context: the topic, key or value, and the record's headers (where a writer may have put
        the schema id, ``__value_schema_id`` / ``__key_schema_id``, instead of the payload's prefix)."""
        return SerializationContext(topic, MessageField.KEY if self.is_key else MessageField.VALUE,
                                    headers if isinstance(headers, list) else None)

    def from_connect(self, topic: str, value: Any, headers: Headers | None = None) -> bytes | None:
        """A struct carries its schema; any other value needs :meth:`from_connect_data` with one."""
        return self.from_connect_data(topic, value.schema if isinstance(value, Struct) else None, value, headers)

    def to_connect(self, topic: str, data: bytes | None, headers: Headers | None = None) -> Any:
        return self.to_connect_data(topic, data, headers).value

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        what = f"{self.NAME} cannot write the {self._kind} of a record for topic {topic!r}"
        if value is None:
            return None
        if schema is None:
            raise DataError(f"{what}: the {self._kind} has no schema (a {type(value).__name__}); a Schema Registry "
                            "converter writes only values with a Connect schema")
        assert self.settings is not None, "configure() first"
        subject = self.settings.subject(topic, self.is_key, self._record_name(schema))
        if subject is not None:
            what += f" under subject {subject!r}"
        try:
            serializer = self._serializer(schema)
            data: bytes | None = serializer(self._payload(schema, value, serializer), self._ctx(topic))
            return data
        except DataError as exc:
            raise DataError(self.settings.scrub(f"{what}: {exc}")) from None
        except ConnectError:
            raise
        except Exception as exc:
            raise self._failure(what, exc) from None

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        what = f"{self.NAME} cannot read the {self._kind} of a record from topic {topic!r}"
        assert self.settings is not None, "configure() first"
        ctx = self._ctx(topic, headers)
        try:
            schema_id = SchemaId(self.SCHEMA_TYPE)
            dual_schema_id_deserializer(data, ctx, schema_id)
            reader = self._reader(schema_id, topic)
            obj = reader.deserialize(data, ctx)
            return SchemaAndValue(reader.schema, self._value(reader, obj))
        except DataError as exc:
            raise DataError(self.settings.scrub(f"{what}: {exc}")) from None
        except ConnectError:
            raise
        except Exception as exc:
            raise self._failure(what, exc) from None

    def _failure(self, what: str, exc: BaseException) -> ConnectError:
        assert self.settings is not None
        if isinstance(exc, (SerializationError, ValueError, TypeError, KeyError, IndexError, EOFError)) and not \
                isinstance(exc, SchemaRegistryError) and tls_failure(exc) is None:
            detail = str(exc) or type(exc).__name__
            if isinstance(exc, (IndexError, EOFError)) or "unpack" in detail or "magic byte" in detail:
                detail = f"not in the Schema Registry wire format (magic byte, schema id): {detail}"
            return DataError(self.settings.scrub(f"{what}: {detail}"))
        return self.settings.failure(what, exc)

    # -- caches ---------------------------------------------------------------------------------------------
    def _serializer(self, schema: Schema) -> Any:
        with self._lock:
            found = self._serializers.get(schema)
            if found is not None:
                self._serializers.move_to_end(schema)
                return found
        made = self._new_serializer(schema)
        with self._lock:
            self._serializers[schema] = made
            while len(self._serializers) > self._cache_size:
                self._serializers.popitem(last=False)
        return made

    def _reader(self, schema_id: SchemaId, topic: str) -> Reader:
        key = (schema_id.id, schema_id.guid, tuple(schema_id.message_indexes or ()), topic)
        with self._lock:
            found = self._readers.get(key)
            if found is not None:
                self._readers.move_to_end(key)
                return found
        if schema_id.id is not None:
            writer = self.client.get_schema(schema_id.id, None, "serialized")
        else:
            writer = self.client.get_schema_by_guid(str(schema_id.guid), "serialized")

        def version(record_name: str | None) -> int | None:
            assert self.settings is not None
            subject = self.settings.subject(topic, self.is_key, record_name)
            if subject is None:
                return None
            try:
                return int(self.client.lookup_schema(subject, writer).version)
            except SchemaRegistryError:
                return None  # registered under another subject (another strategy): no version, as Confluent

        made = self._new_reader(writer, schema_id, topic, version)
        with self._lock:
            self._readers[key] = made
            while len(self._readers) > self._cache_size:
                self._readers.popitem(last=False)
        return made


__all__ = ["CACHE_SIZE", "Reader", "RegistryConverter"]
