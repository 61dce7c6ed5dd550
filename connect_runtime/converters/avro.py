"""``AvroConverter``: Connect data <-> Avro in the Confluent wire format, over a Schema Registry.

Alias ``io.confluent.connect.avro.AvroConverter``. Configured as Confluent's converter (the Schema Registry fields
of :mod:`._registry`, plus ``schemas.cache.config`` and ``connect.meta.data``); the schema mapping is
:mod:`._avro_data` (Confluent's ``AvroData``).

Writing (``from_connect_data``): the Connect schema becomes an Avro schema (cached), confluent-kafka's
``AvroSerializer`` registers it (or looks it up, or takes the subject's latest with ``use.latest.version``) under
the subject of the strategy, and writes the first record of each (topic, schema); later records of that (topic,
schema) are written the way that serializer writes them when no latest version and no rules are involved: fastavro's
``schemaless_writer`` after the schema id the serializer used, framed by the library's own ``SchemaId.id_to_bytes``.
With ``use.latest.version`` every record goes through the serializer.

Reading (``to_connect_data``): the library's ``dual_schema_id_deserializer`` reads the schema id (from the payload
prefix or a ``__key_schema_id`` / ``__value_schema_id`` header); the writer schema comes from the registry (cached
by the client), its Connect schema is built once per schema id (its version is the registry version unless the
schema has ``connect.version``, as Confluent's converter), and fastavro's ``schemaless_reader`` reads the payload
with it (with ``use.latest.version``, into the subject's latest schema). A writer schema with references or rules
(data contracts) is read by confluent-kafka's ``AvroDeserializer`` itself, which resolves and runs them.

Batches: :meth:`AvroConverter.from_connect_data_many` / :meth:`AvroConverter.to_connect_data_many` convert a batch
(topics, schemas and values, or topics and bytes) with the per-schema work done once.

Evolution: a changed Connect schema registers a new version (when the registry's compatibility rule allows it) and
records flow on with the new schema id. A registry refusing the schema (HTTP 409) gives a :class:`DataError` naming
the subject, the fields that changed incompatibly (added without a default, removed without one, type changed,
compared with the subject's latest version) and the registry's compatibility rule.

Errors: a value that does not fit its schema, bytes that are not Confluent-framed Avro, an unknown schema id: a
:class:`DataError` naming the converter, the topic, key or value, and the field where known. A registry that cannot be
reached (or answers 5xx / 408 / 429): :class:`RetriableError`. Secrets never appear in either (see :mod:`._registry`).
A ``None`` value is ``None`` both ways (a tombstone), as Confluent's converter.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import SchemaRegistryClient, dual_schema_id_deserializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.read import SchemaResolutionError

from connect_runtime.api.config import ConfigDef, Importance, Range, Type
from connect_runtime.api.data import Decimal, Schema, SchemaAndValue, Struct
from connect_runtime.api.errors import ConnectError, DataError
from connect_runtime.api.records import Headers
from connect_runtime.api.transforms import Converter
from connect_runtime.converters._avro_data import AvroData, AvroSchema, Convert, check_value
from connect_runtime.converters._registry import REGISTRY_CONFIG, RegistrySettings, registry_settings

AVRO = "AVRO"
_READ_ERRORS = (ValueError, TypeError, EOFError, StopIteration, IndexError, KeyError, UnicodeError, OverflowError)


@dataclass
class _Captured:
    ids: list[SchemaId] = field(default_factory=list)


@dataclass
class _Encoder:
    """What writing values of one Connect schema to one topic needs, built once."""

    avro: AvroSchema
    parsed: Any
    write: Convert
    serializer: AvroSerializer
    subject: str | None
    captured: _Captured
    raw: bool
    """A top-level ``bytes`` schema: confluent-kafka (as Confluent's Java serializer) writes the bytes themselves,
    without Avro's length prefix."""
    """The schema ids the serializer framed records with (its ``schema.id.serializer`` records them)."""
    prefix: bytes | None = None
    """The framing (magic byte and schema id) the serializer wrote, once it has written one record."""


@dataclass
class _Decoder:
    """What reading one writer schema (by id) from one topic needs, built once."""

    schema: Schema
    read: Convert
    writer: Any = None
    reader: Any = None
    fast: bool = True
    raw: bool = False
    """A top-level ``bytes`` writer schema: the payload is the bytes themselves (see :class:`_Encoder`)."""
    into_latest: str = ""
    """With ``use.latest.version`` and a writer schema other than the latest: the subject and the field changes from
    the writer's schema to the latest, for the error when the latest cannot read it."""


class AvroConverter(Converter):
    """Kafka Connect's ``io.confluent.connect.avro.AvroConverter`` (see the module docstring)."""

    SCHEMA_AWARE: ClassVar[bool] = True
    CONFIG = REGISTRY_CONFIG.merge(
        ConfigDef()
        .define("schemas.cache.config", Type.INT, default=1000, validator=Range.at_least(1),
                doc="How many schemas each direction's caches keep.")
        .define("connect.meta.data", Type.BOOLEAN, default=True, importance=Importance.LOW,
                doc="Write connect.name, connect.version, connect.doc, connect.parameters and connect.default into "
                    "the Avro schemas.")
    )

    def __init__(self) -> None:
        self.is_key = False
        self.settings: RegistrySettings | None = None
        self._client: SchemaRegistryClient | None = None
        self._data = AvroData()
        self._encoders: dict[tuple[str, Schema], _Encoder] = {}
        self._decoders: dict[tuple[Any, Any, str], _Decoder] = {}
        self._deserializer: AvroDeserializer | None = None
        self._lock = threading.Lock()
        self._cache_size = 1000

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        values = self.CONFIG.parse(configs)
        self.settings = registry_settings(values)
        self.is_key = is_key
        self._cache_size = values["schemas.cache.config"]
        self._data = AvroData(self._cache_size, values["connect.meta.data"])
        self._client = self.settings.client()
        self._field = MessageField.KEY if is_key else MessageField.VALUE

    # -- helpers -----------------------------------------------------------------------------------------------

    @property
    def _kind(self) -> str:
        return "key" if self.is_key else "value"

    def _ready(self) -> tuple[RegistrySettings, SchemaRegistryClient]:
        if self.settings is None or self._client is None:
            raise DataError("AvroConverter is not configured (configure() was not called)")
        return self.settings, self._client

    def _remember(self, cache: dict[Any, Any], key: Any, value: Any) -> Any:
        with self._lock:
            if len(cache) >= self._cache_size:
                cache.pop(next(iter(cache)))
            cache[key] = value
        return value

    # -- Connect -> bytes --------------------------------------------------------------------------------------

    def from_connect(self, topic: str, value: Any, headers: Headers | None = None) -> bytes | None:
        """A :class:`Struct` is written with its own schema; ``None`` as ``None``. Any other value needs a schema:
        use :meth:`from_connect_data`."""
        if value is None:
            return None
        if isinstance(value, Struct):
            return self.from_connect_data(topic, value.schema, value, headers)
        raise DataError(f"AvroConverter cannot write the {self._kind} of a record for topic {topic!r}: a "
                        f"{type(value).__name__} without a Connect schema (Avro needs one; give the record a "
                        f"{self._kind} schema)")

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            return self.from_connect(topic, value, headers)
        enc = self._encoder(topic, schema)
        where = f"AvroConverter cannot write the {self._kind} of a record for topic {topic!r}"
        try:
            datum = enc.write(value)
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from None
        if enc.prefix is not None and enc.raw:
            return enc.prefix + datum  # type: ignore[no-any-return]
        if enc.prefix is not None:
            out = io.BytesIO()
            try:
                schemaless_writer(out, enc.parsed, datum)
            except (ValueError, TypeError, AttributeError, OverflowError) as exc:
                raise self._bad_value(where, schema, value, exc) from None
            return enc.prefix + out.getvalue()
        return self._serialize(topic, enc, schema, value, datum, headers, where)

    def from_connect_data_many(self, topics: Sequence[str], schemas: Sequence[Schema | None],
                               values: Sequence[Any]) -> list[bytes | None]:
        """:meth:`from_connect_data` of each (topic, schema, value), as one batch: the encoder of each (topic,
        schema) is looked up once per run of equal ones. Raises where :meth:`from_connect_data` would."""
        out: list[bytes | None] = []
        append = out.append
        last: tuple[str, Schema | None] | None = None
        enc: _Encoder | None = None
        for topic, schema, value in zip(topics, schemas, values, strict=True):
            if value is None or schema is None:
                append(self.from_connect_data(topic, schema, value))
                continue
            if last is None or last[0] != topic or last[1] is not schema:
                last, enc = (topic, schema), self._encoder(topic, schema)
            assert enc is not None
            if enc.prefix is None or enc.raw:
                append(self.from_connect_data(topic, schema, value))
                continue
            try:
                datum = enc.write(value)
                buf = io.BytesIO()
                schemaless_writer(buf, enc.parsed, datum)
            except Exception:
                append(self.from_connect_data(topic, schema, value))  # raises, naming the field
                continue
            append(enc.prefix + buf.getvalue())
        return out

    def _encoder(self, topic: str, schema: Schema) -> _Encoder:
        found = self._encoders.get((topic, schema))
        if found is not None:
            return found
        settings, client = self._ready()
        where = f"AvroConverter cannot write the {self._kind} of a record for topic {topic!r}"
        try:
            avro = self._data.from_connect_schema(schema)
            parsed = parse_schema(avro)
        except (DataError, ValueError, TypeError, KeyError) as exc:
            raise DataError(f"{where}: its schema {schema!r} has no Avro form ({exc})") from None
        name = avro.get("name") if isinstance(avro, dict) else None
        if isinstance(avro, dict) and avro.get("namespace") and name:
            name = f"{avro['namespace']}.{name}"
        subject = settings.subject(topic, self.is_key, name)
        if subject is None:
            raise DataError(f"{where}: the subject name strategy "
                            f"{settings.key_strategy if self.is_key else settings.value_strategy} needs a named "
                            f"schema (a record), and {schema!r} has no name")
        captured = _Captured()

        def capture(payload: bytes, ctx: Any, schema_id: SchemaId) -> bytes:
            captured.ids.append(schema_id)
            return schema_id.id_to_bytes() + payload  # what the library's prefix_schema_id_serializer writes

        conf = {**settings.serializer_conf(self.is_key), "schema.id.serializer": capture}
        serializer = AvroSerializer(client, json.dumps(avro), conf=conf)
        raw = _is_bytes(avro)
        write = self._data.writer(schema)
        if raw and schema.name == Decimal.LOGICAL_NAME:
            def write(v: Any, s: Schema = schema) -> Any:
                return Decimal.from_logical(s, v)
        enc = _Encoder(avro, parsed, write, serializer, subject, captured, raw)
        return self._remember(self._encoders, (topic, schema), enc)  # type: ignore[no-any-return]

    def _serialize(self, topic: str, enc: _Encoder, schema: Schema, value: Any, datum: Any,
                   headers: Headers | None, where: str) -> bytes | None:
        settings, _ = self._ready()
        ctx = SerializationContext(topic, self._field, headers if isinstance(headers, list) else None)
        captured = enc.captured
        try:
            data = enc.serializer(datum, ctx)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 409:
                raise DataError(settings.scrub(self._incompatible(where, enc, exc))) from None
            raise settings.failure(f"{where} (subject {enc.subject!r})", exc) from None
        except (SerializationError, ValueError, TypeError, AttributeError, OverflowError) as exc:
            raise self._bad_value(where, schema, value, exc) from None
        except ConnectError:
            raise
        except Exception as exc:  # transport errors (httpx), anything else the client raises
            raise settings.failure(f"{where} (subject {enc.subject!r})", exc) from None
        if not settings.use_latest_version and captured.ids:
            enc.prefix = captured.ids[-1].id_to_bytes()
        return data

    def _bad_value(self, where: str, schema: Schema, value: Any, exc: BaseException) -> DataError:
        try:
            check_value(schema, value, f"the {self._kind}")
        except DataError as named:
            return DataError(f"{where}: {named}")
        return DataError(f"{where}: Avro cannot write it with its schema ({type(exc).__name__}: {exc})")

    def _incompatible(self, where: str, enc: _Encoder, exc: SchemaRegistryError) -> str:
        """The message for a registry refusing a schema as incompatible: the subject, the fields and the rule."""
        _, client = self._ready()
        subject = enc.subject or "(unknown subject)"
        rule = "its compatibility rule"
        for scope in (subject, None):
            try:
                level = client.get_compatibility(scope)
            except Exception:  # a subject without a rule of its own; a mock without any
                continue
            if level:
                rule = f"the compatibility rule {getattr(level, 'value', level)}"
                break
        changes: list[str] = []
        try:
            latest = client.get_latest_version(subject)
            if latest.schema.schema_str:
                changes = schema_changes(json.loads(latest.schema.schema_str), enc.avro)
        except Exception:  # the registry's own message still says why
            pass
        what = "; ".join(changes) if changes else "see the registry's message"
        return (f"{where}: the Schema Registry refused the new schema under subject {subject!r} by {rule} "
                f"({what}): {exc.error_message}")

    # -- bytes -> Connect --------------------------------------------------------------------------------------

    def to_connect(self, topic: str, data: bytes | None, headers: Headers | None = None) -> Any:
        return self.to_connect_data(topic, data, headers).value

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        where = f"AvroConverter cannot read the {self._kind} of a record from topic {topic!r}"
        ctx = SerializationContext(topic, self._field, headers) if isinstance(headers, list) and headers else None
        try:
            schema_id = SchemaId(AVRO)
            payload = dual_schema_id_deserializer(data, ctx, schema_id)
        except (SerializationError, *_READ_ERRORS) as exc:
            raise DataError(f"{where}: not Confluent-framed Avro ({type(exc).__name__}: {exc})") from None
        dec = self._decoders.get((schema_id.id, schema_id.guid, topic)) or self._decoder(topic, schema_id, where)
        datum: Any
        try:
            if dec.raw:
                datum = payload.read()
                if dec.schema.name == Decimal.LOGICAL_NAME:
                    datum = Decimal.to_logical(dec.schema, datum)
            elif dec.fast:
                datum = schemaless_reader(payload, dec.writer, dec.reader, True, True, "strict", True, True)
            else:
                datum = self._slow_read(topic, data, headers)
            return SchemaAndValue(dec.schema, dec.read(datum))
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from None
        except ConnectError:
            raise
        except SchemaResolutionError as exc:
            raise DataError(f"{where}: its schema (id {schema_id.id}) cannot be read into {dec.into_latest} "
                            f"({exc})") from None
        except (SerializationError, *_READ_ERRORS) as exc:
            raise DataError(f"{where}: the bytes after schema id {schema_id.id} are not Avro of that schema "
                            f"({type(exc).__name__}: {exc})") from None

    def to_connect_data_many(self, topics: Sequence[str], data: Sequence[bytes | None]) -> list[SchemaAndValue]:
        """:meth:`to_connect_data` of each (topic, bytes), as one batch. Raises where it would."""
        return [self.to_connect_data(t, d) for t, d in zip(topics, data, strict=True)]

    def _slow_read(self, topic: str, data: bytes, headers: Headers | None) -> Any:
        settings, client = self._ready()
        if self._deserializer is None:
            self._deserializer = AvroDeserializer(client, conf=settings.deserializer_conf(self.is_key))
        ctx = SerializationContext(topic, self._field, headers if isinstance(headers, list) else None)
        return self._deserializer(data, ctx)

    def _decoder(self, topic: str, schema_id: SchemaId, where: str) -> _Decoder:
        settings, client = self._ready()
        try:
            registered = (client.get_schema(schema_id.id) if schema_id.id is not None
                          else client.get_schema_by_guid(str(schema_id.guid)))
            writer_json = json.loads(registered.schema_str or "null")
            name = writer_json.get("name") if isinstance(writer_json, dict) else None
            if name and "." not in name and writer_json.get("namespace"):
                name = f"{writer_json['namespace']}.{name}"
            subject = settings.subject(topic, self.is_key, name)
            reader_json, reader_registered = writer_json, registered
            cache_key: tuple[Any, ...] = ("id", schema_id.id, schema_id.guid)
            if settings.use_latest_version and subject:
                latest = client.get_latest_version(subject)
                reader_registered = latest.schema
                reader_json = json.loads(latest.schema.schema_str or "null")
                cache_key = ("id", latest.schema_id, latest.guid)
            version = self._version(client, subject, reader_registered, reader_json)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise DataError(settings.scrub(f"{where}: the Schema Registry has no schema with id "
                                               f"{schema_id.id if schema_id.id is not None else schema_id.guid} "
                                               f"({exc.error_message})")) from None
            raise settings.failure(where, exc) from None
        except ConnectError:
            raise
        except (ValueError, TypeError) as exc:
            raise DataError(f"{where}: the registry's schema for id {schema_id.id} is not valid Avro JSON "
                            f"({exc})") from None
        except Exception as exc:  # transport errors
            raise settings.failure(where, exc) from None
        try:
            schema = self._data.to_connect_schema(reader_json, cache_key, version)
            fast = not (registered.references or registered.rule_set or reader_registered.references
                        or reader_registered.rule_set)
            dec = _Decoder(schema, self._data.reader(schema), fast=fast, raw=_is_bytes(writer_json))
            if reader_json is not writer_json:
                changes = "; ".join(schema_changes(writer_json, reader_json)) or "see below"
                dec.into_latest = (f"the latest version of subject {subject!r} (use.latest.version; the latest must "
                                   f"read older data, as the BACKWARD rule requires: {changes})")
            if fast:
                dec.writer = parse_schema(writer_json)
                dec.reader = None if reader_json is writer_json else parse_schema(reader_json)
        except DataError as exc:
            raise DataError(f"{where}: schema id {schema_id.id} has no Connect form ({exc})") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise DataError(f"{where}: the registry's schema for id {schema_id.id} is not valid Avro "
                            f"({type(exc).__name__}: {exc})") from None
        return self._remember(self._decoders, (schema_id.id, schema_id.guid, topic), dec)  # type: ignore[no-any-return]

    @staticmethod
    def _version(client: SchemaRegistryClient, subject: str | None, registered: RegistrySchema,
                 avro: AvroSchema) -> int | None:
        """The registry version of a schema under ``subject`` (``None`` when it has ``connect.version`` or the
        registry does not know it there), as Confluent's converter gives its Connect schema."""
        if subject is None or (isinstance(avro, dict) and "connect.version" in avro):
            return None
        try:
            found = client.lookup_schema(subject, registered)
        except SchemaRegistryError:
            return None
        return found.version


def _is_bytes(avro: AvroSchema) -> bool:
    return avro == "bytes" or (isinstance(avro, dict) and avro.get("type") == "bytes")


# -- evolution ---------------------------------------------------------------------------------------------------

def _type_name(node: Any) -> str:
    if isinstance(node, list):
        return "[" + ", ".join(_type_name(b) for b in node) + "]"
    if isinstance(node, dict):
        t = node.get("type")
        if t in ("record", "enum", "fixed"):
            return str(node.get("name"))
        if isinstance(node.get("logicalType"), str):
            return f"{t} ({node['logicalType']})"
        return _type_name(t) if isinstance(t, (dict, list)) else str(t)
    return str(node)


def schema_changes(old: AvroSchema, new: AvroSchema, path: str = "") -> list[str]:
    """The field changes from ``old`` to ``new`` (two Avro record schemas, JSON form) that a compatibility rule may
    refuse: a field added without a default, a field removed that had none, a field whose type changed (nested
    records compared field by field); ``[]`` when neither is a record."""
    if not (isinstance(old, dict) and isinstance(new, dict) and old.get("type") == new.get("type") == "record"):
        return []
    before = {f["name"]: f for f in old.get("fields", [])}
    after = {f["name"]: f for f in new.get("fields", [])}
    out: list[str] = []
    for name, f in after.items():
        if name not in before and "default" not in f:
            out.append(f"field {path + name!r} was added without a default")
    for name, f in before.items():
        if name not in after:
            out.append(f"field {path + name!r} was removed" + ("" if "default" in f else " and had no default"))
    for name, f in after.items():
        if name in before:
            was, now = before[name]["type"], f["type"]
            nested = schema_changes(was, now, f"{path}{name}.")
            if nested:
                out.extend(nested)
            elif _type_name(was) != _type_name(now):
                out.append(f"field {path + name!r} changed type from {_type_name(was)} to {_type_name(now)}")
    return out


__all__ = ["AvroConverter", "schema_changes"]
