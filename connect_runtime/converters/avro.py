"""``AvroConverter``: Connect data <-> Avro in the Confluent wire format, over a Schema Registry.

Alias ``io.confluent.connect.avro.AvroConverter``. A :class:`~connect_runtime.converters._registry_converter.
RegistryConverter` (configuration, caches, the schema id read by the library's framing reader, the registry version,
errors) whose format part is Avro: the schema mapping is :mod:`._avro_data` (Confluent's ``AvroData``); its own
setting is ``connect.meta.data`` (besides the registry's and ``schemas.cache.config``).

Writing (``from_connect_data``): the Connect schema becomes an Avro schema (cached), confluent-kafka's
``AvroSerializer`` registers it (or looks it up, or takes the subject's latest with ``use.latest.version``) under
the subject of the strategy, and writes the first record of each (topic, schema); later records of that (topic,
schema) are written the way that serializer writes them when no latest version and no rules are involved: fastavro's
``schemaless_writer`` after the framing the serializer wrote (the library's own ``SchemaId.id_to_bytes``). With
``use.latest.version`` every record goes through the serializer. A top-level ``bytes`` schema is written as the bytes
themselves, as confluent-kafka and Confluent's Java serializer do.

Reading (``to_connect_data``): the writer schema comes from the registry by the id in the framing, its Connect schema
is built once per schema id (its version is the registry version unless the schema has ``connect.version``, as
Confluent's converter), and fastavro's ``schemaless_reader`` reads the payload with it (with ``use.latest.version``,
into the subject's latest schema). A writer schema with references or rules (data contracts) is read by
confluent-kafka's ``AvroDeserializer`` itself, which resolves and runs them.

Batches: :meth:`AvroConverter.from_connect_data_many` / :meth:`AvroConverter.to_connect_data_many` convert a batch
(topics, schemas and values, or topics and bytes) with the per-schema lookups done once per run of the same schema.

Evolution: a changed Connect schema registers a new version (when the registry's compatibility rule allows it) and
records flow on with the new schema id. A registry refusing the schema (HTTP 409) gives a :class:`DataError` naming
the subject, the fields that changed incompatibly (added without a default, removed without one, type changed,
compared with the subject's latest version) and the registry's compatibility rule. With ``use.latest.version``, a
record the latest schema cannot read is a :class:`DataError` naming the subject and the fields.

Errors: as every registry converter's (a :class:`DataError` naming the converter, topic, key or value, subject and
field; :class:`RetriableError` for a registry that cannot be reached; no secrets). ``None`` is ``None`` both ways.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import dual_schema_id_deserializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import SerializationContext, SerializationError
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.read import SchemaResolutionError

from connect_runtime.api.config import ConfigDef, Importance, Type
from connect_runtime.api.data import Decimal, Schema, SchemaAndValue
from connect_runtime.api.errors import DataError
from connect_runtime.converters._avro_data import AvroData, AvroSchema, Convert, check_value
from connect_runtime.converters._registry import RegistrySettings
from connect_runtime.converters._registry_converter import Reader, RegistryConverter

AVRO = "AVRO"
_READ_ERRORS = (ValueError, TypeError, EOFError, StopIteration, IndexError, KeyError, UnicodeError, OverflowError)
_WRITE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError)


class _AvroWriter:
    """Writes the values of one Connect schema (what :meth:`AvroConverter._new_serializer` gives): confluent-kafka's
    ``AvroSerializer`` for the first record of each topic (it registers or looks up the schema under the subject),
    then fastavro after the framing that serializer wrote, unless ``use.latest.version`` needs the serializer each
    time. Called with ``(value, datum)`` (see :meth:`AvroConverter._payload`) and the serialization context."""

    def __init__(self, converter: AvroConverter, schema: Schema) -> None:
        settings = converter._settings()
        self.converter, self.schema = converter, schema
        try:
            self.avro = converter._data.from_connect_schema(schema)
            self.parsed = parse_schema(self.avro)
        except (DataError, *_WRITE_ERRORS, KeyError) as exc:
            raise DataError(f"its schema {schema!r} has no Avro form ({exc})") from None
        self.raw = _is_bytes(self.avro)
        """A top-level ``bytes`` schema: confluent-kafka (as Confluent's Java serializer) writes the bytes
        themselves, without Avro's length prefix."""
        self.write: Convert = converter._data.writer(schema)
        if self.raw and schema.name == Decimal.LOGICAL_NAME:
            def unscaled(v: Any, s: Schema = schema) -> Any:
                return Decimal.from_logical(s, v)
            self.write = unscaled
        self.fast = not settings.use_latest_version
        self.prefixes: dict[str, bytes] = {}
        """The framing (magic byte and schema id) the serializer wrote, per topic (the subject may differ)."""
        self._ids: list[SchemaId] = []

        def capture(payload: bytes, ctx: Any, schema_id: SchemaId) -> bytes:
            self._ids.append(schema_id)
            return schema_id.id_to_bytes() + payload  # what the library's prefix_schema_id_serializer writes

        conf = {**settings.serializer_conf(converter.is_key), "schema.id.serializer": capture}
        self.serializer = AvroSerializer(converter.client, json.dumps(self.avro), conf=conf)

    def encode(self, value: Any, datum: Any, prefix: bytes) -> bytes:
        """The bytes of ``datum`` after ``prefix``, as the serializer writes them; :class:`DataError` naming the field
        when fastavro refuses it."""
        if self.raw:
            return prefix + datum  # type: ignore[no-any-return]
        out = io.BytesIO()
        try:
            schemaless_writer(out, self.parsed, datum)
        except _WRITE_ERRORS as exc:
            raise self.converter._bad_value(self.schema, value, exc) from None
        return prefix + out.getvalue()

    def __call__(self, payload: tuple[Any, Any], ctx: SerializationContext) -> bytes | None:
        value, datum = payload
        prefix = self.prefixes.get(ctx.topic)
        if prefix is not None:
            return self.encode(value, datum, prefix)
        settings = self.converter._settings()
        subject = settings.subject(ctx.topic, self.converter.is_key, _full_name(self.avro))
        if subject is None:
            strategy = settings.key_strategy if self.converter.is_key else settings.value_strategy
            raise DataError(f"the subject name strategy {strategy} needs a named schema (a record), and "
                            f"{self.schema!r} has no name")
        del self._ids[:]
        try:
            data: bytes | None = self.serializer(datum, ctx)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 409:
                raise DataError(self.converter._incompatible(subject, self.avro, exc)) from None
            raise
        except (SerializationError, *_WRITE_ERRORS) as exc:
            raise self.converter._bad_value(self.schema, value, exc) from None
        if self.fast and self._ids:
            self.prefixes[ctx.topic] = self._ids[-1].id_to_bytes()
        return data


class _AvroRead:
    """Reads the records of one writer schema (what :meth:`AvroConverter._new_reader` gives ``Reader`` to call):
    fastavro with the writer's schema (and the subject's latest with ``use.latest.version``), the bytes themselves
    for a top-level ``bytes`` schema, confluent-kafka's ``AvroDeserializer`` for a schema with references or rules."""

    def __init__(self, converter: AvroConverter, schema: Schema, writer: Any, reader: Any, fast: bool, raw: bool,
                 into_latest: str) -> None:
        self.converter, self.schema = converter, schema
        self.writer, self.reader, self.fast, self.raw = writer, reader, fast, raw
        self.into_latest = into_latest

    def payload(self, payload: io.BytesIO, schema_id: SchemaId) -> Any:
        """What fastavro reads from ``payload`` (the bytes after the framing)."""
        try:
            if self.raw:
                datum = payload.read()
                return Decimal.to_logical(self.schema, datum) if self.schema.name == Decimal.LOGICAL_NAME else datum
            return schemaless_reader(payload, self.writer, self.reader, True, True, "strict", True, True)
        except SchemaResolutionError as exc:
            raise DataError(f"its schema (id {schema_id.id}) cannot be read into {self.into_latest} ({exc})") from None
        except _READ_ERRORS as exc:
            raise DataError(f"the bytes after schema id {schema_id.id} are not Avro of that schema "
                            f"({type(exc).__name__}: {exc})") from None

    def __call__(self, data: bytes, ctx: SerializationContext) -> Any:
        if not self.fast:
            return self.converter._deserializer()(data, ctx)
        schema_id = SchemaId(AVRO)
        return self.payload(dual_schema_id_deserializer(data, ctx, schema_id), schema_id)


class AvroConverter(RegistryConverter):
    """Kafka Connect's ``io.confluent.connect.avro.AvroConverter`` (see the module docstring)."""

    NAME: ClassVar[str] = "AvroConverter"
    SCHEMA_TYPE: ClassVar[str] = AVRO
    FORMAT_CONFIG: ClassVar[ConfigDef] = ConfigDef().define(
        "connect.meta.data", Type.BOOLEAN, default=True, importance=Importance.LOW,
        doc="Write connect.name, connect.version, connect.doc, connect.parameters and connect.default into the Avro "
            "schemas.")

    def __init__(self) -> None:
        super().__init__()
        self._data = AvroData()
        self._avro_deserializer: AvroDeserializer | None = None

    def _configure_format(self, values: Mapping[str, Any]) -> None:
        self._data = AvroData(values["schemas.cache.config"], values["connect.meta.data"])

    def _settings(self) -> RegistrySettings:
        if self.settings is None:
            raise DataError("AvroConverter is not configured (configure() was not called)")
        return self.settings

    def _deserializer(self) -> AvroDeserializer:
        if self._avro_deserializer is None:
            self._avro_deserializer = AvroDeserializer(
                self.client, conf=self._settings().deserializer_conf(self.is_key))
        return self._avro_deserializer

    # -- the format's part (RegistryConverter) -----------------------------------------------------------------

    def _record_name(self, schema: Schema) -> str | None:
        try:
            return _full_name(self._data.from_connect_schema(schema))
        except DataError:
            return schema.name

    def _new_serializer(self, schema: Schema) -> _AvroWriter:
        return _AvroWriter(self, schema)

    def _payload(self, schema: Schema, value: Any, serializer: Any) -> tuple[Any, Any]:
        return value, serializer.write(value)

    def _new_reader(self, writer: RegistrySchema, schema_id: SchemaId, topic: str,
                    version: Callable[[str | None], int | None]) -> Reader:
        settings = self._settings()
        try:
            writer_json = json.loads(writer.schema_str or "null")
        except ValueError as exc:
            raise DataError(f"the registry's schema for id {schema_id.id} is not Avro JSON ({exc})") from None
        name = _full_name(writer_json)
        reader_json, reader_registered, into_latest = writer_json, writer, ""
        subject = settings.subject(topic, self.is_key, name)
        registry_version: int | None
        if settings.use_latest_version and subject is not None:
            latest = self.client.get_latest_version(subject)
            reader_registered, registry_version = latest.schema, latest.version
            reader_json = json.loads(latest.schema.schema_str or "null")
            changes = "; ".join(schema_changes(writer_json, reader_json)) or "see below"
            into_latest = (f"the latest version of subject {subject!r} (use.latest.version; the latest must read "
                           f"older data, as the BACKWARD rule requires: {changes})")
        else:
            registry_version = None if isinstance(writer_json, dict) and "connect.version" in writer_json \
                else version(name)
        try:
            schema = self._data.to_connect_schema(
                reader_json, (json.dumps(reader_json, sort_keys=True), registry_version), registry_version)
            value_reader = self._data.reader(schema, reader_json)
            fast = not (writer.references or writer.rule_set or reader_registered.references
                        or reader_registered.rule_set)
            read = _AvroRead(self, schema, parse_schema(writer_json) if fast else None,
                             parse_schema(reader_json) if fast and reader_json is not writer_json else None,
                             fast, _is_bytes(writer_json), into_latest)
        except DataError as exc:
            raise DataError(f"schema id {schema_id.id} has no Connect form ({exc})") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise DataError(f"the registry's schema for id {schema_id.id} is not valid Avro "
                            f"({type(exc).__name__}: {exc})") from None
        return Reader(read, schema, value_reader)

    def _value(self, reader: Reader, obj: Any) -> Any:
        return reader.extra(obj)

    # -- batches -----------------------------------------------------------------------------------------------

    def from_connect_data_many(self, topics: Sequence[str], schemas: Sequence[Schema | None],
                               values: Sequence[Any]) -> list[bytes | None]:
        """:meth:`from_connect_data` of each (topic, schema, value), as one batch: the writer of each schema is looked
        up once per run of records with the same topic and schema, and after the first record of a (topic, schema)
        each is fastavro's bytes after the framing. Raises where :meth:`from_connect_data` would."""
        out: list[bytes | None] = []
        append = out.append
        last: tuple[str, Schema] | None = None
        writer: _AvroWriter | None = None
        for topic, schema, value in zip(topics, schemas, values, strict=True):
            if value is None or schema is None:
                append(self.from_connect_data(topic, schema, value))
                continue
            if last is None or last[0] != topic or last[1] is not schema:
                last, writer = (topic, schema), None
                try:
                    writer = self._serializer(schema)
                except Exception:
                    pass  # from_connect_data below says why
            prefix = writer.prefixes.get(topic) if writer is not None else None
            if writer is None or prefix is None:
                append(self.from_connect_data(topic, schema, value))
                continue
            try:
                append(writer.encode(value, writer.write(value), prefix))
            except Exception:
                append(self.from_connect_data(topic, schema, value))  # raises, naming the field
        return out

    def to_connect_data_many(self, topics: Sequence[str], data: Sequence[bytes | None]) -> list[SchemaAndValue]:
        """:meth:`to_connect_data` of each (topic, bytes), as one batch: the reader of each schema id is looked up
        once per batch. Raises where :meth:`to_connect_data` would."""
        out: list[SchemaAndValue] = []
        readers: dict[tuple[Any, Any, str], Reader] = {}
        for topic, raw in zip(topics, data, strict=True):
            try:
                schema_id = SchemaId(AVRO)
                payload = dual_schema_id_deserializer(raw, None, schema_id)  # type: ignore[arg-type]
                key = (schema_id.id, schema_id.guid, topic)
                reader = readers.get(key)
                if reader is None:
                    reader = readers[key] = self._reader(schema_id, topic)
                read: _AvroRead = reader.deserialize  # type: ignore[assignment]
                datum = read.payload(payload, schema_id) if read.fast else read(raw, self._ctx(topic))  # type: ignore[arg-type]
                out.append(SchemaAndValue(reader.schema, reader.extra(datum)))
            except Exception:
                out.append(self.to_connect_data(topic, raw))  # raises, naming what is wrong (or gives None's)
        return out

    # -- errors ------------------------------------------------------------------------------------------------

    def _bad_value(self, schema: Schema, value: Any, exc: BaseException) -> DataError:
        try:
            check_value(schema, value, f"the {self._kind}")
        except DataError as named:
            return named
        return DataError(f"Avro cannot write it with its schema ({type(exc).__name__}: {exc})")

    def _incompatible(self, subject: str, avro: AvroSchema, exc: SchemaRegistryError) -> str:
        """The message for a registry refusing a schema as incompatible: the fields and the rule (the caller names
        the subject)."""
        rule = "its compatibility rule"
        for scope in (subject, None):
            try:
                level = self.client.get_compatibility(scope)
            except Exception:  # a subject without a rule of its own; a mock without any
                continue
            if level:
                rule = f"the compatibility rule {getattr(level, 'value', level)}"
                break
        changes: list[str] = []
        try:
            latest = self.client.get_latest_version(subject)
            if latest.schema.schema_str:
                changes = schema_changes(json.loads(latest.schema.schema_str), avro)
        except Exception:  # the registry's own message still says why
            pass
        what = "; ".join(changes) if changes else "see the registry's message"
        return f"the Schema Registry refused the new schema by {rule} ({what}): {exc.error_message}"


def _full_name(avro: AvroSchema) -> str | None:
    """The full name of a named Avro schema (JSON form), what the subject name strategies see."""
    if not isinstance(avro, dict) or not isinstance(avro.get("name"), str):
        return None
    name: str = avro["name"]
    return name if "." in name or not avro.get("namespace") else f"{avro['namespace']}.{name}"


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
