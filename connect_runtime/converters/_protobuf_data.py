"""Connect schemas and values <-> Protobuf descriptors and messages: Confluent's ``ProtobufData``.

Writing (:func:`connect_to_file` and :func:`connect_to_message`) builds, at run time, the ``proto3`` file
Confluent's ``ProtobufData.fromConnectSchema`` would write, as a ``FileDescriptorProto`` added to a
``DescriptorPool`` of its own; ``GetMessageClass`` gives the message class confluent-kafka's
``ProtobufSerializer`` takes. The mapping:

- a ``STRUCT`` is a message named after the schema (``shop.Order``: package ``shop``, message ``Order``;
  unnamed: ``ConnectDefault1``, ``ConnectDefault2``, ...); its fields are numbered in order (or by the
  ``io.confluent.connect.protobuf.Tag`` parameter); a nested struct is a nested message (``<Name>Message`` if
  its name equals the field's); a root primitive is the matching ``google.protobuf`` wrapper message;
- ``INT8`` / ``INT16``: ``int32`` with ``connect.type`` in the field's ``(confluent.field_meta).params``;
  ``INT32`` ``int32``, ``INT64`` ``int64`` (or the ``io.confluent.connect.protobuf.Type`` parameter's type),
  ``FLOAT32`` ``float``, ``FLOAT64`` ``double``, ``BOOLEAN`` ``bool``, ``STRING`` ``string`` (an enum with
  Confluent's enum parameters), ``BYTES`` ``bytes``;
- ``ARRAY``: a ``repeated`` field; ``MAP``: a ``repeated`` nested ``<Name>Entry`` message of ``key`` = 1 and
  ``value`` = 2 (wire-identical to a protobuf ``map``);
- ``Decimal``: ``confluent.type.Decimal`` (``scale`` / ``precision`` in the field meta), ``Date``:
  ``google.type.Date``, ``Time``: ``google.type.TimeOfDay``, ``Timestamp``: ``google.protobuf.Timestamp``;
- an optional field has no label (proto3 implicit presence: a null scalar is written as nothing and read back
  as its zero value, as Confluent's default), or the proto3 ``optional`` label with
  ``optional.for.nullables=true``.

Reading (:func:`descriptor_to_connect` and :func:`message_to_connect`) takes any message, also one written by
others, as Confluent's ``toConnectSchema`` / ``toConnectData`` do with their defaults: the struct is named after
the message (its full name with ``enhanced.protobuf.schema.support=true``), every field carries its tag in
``io.confluent.connect.protobuf.Tag`` and is optional (with ``optional.for.nullables=true`` only fields with the
``optional`` keyword are, besides messages, enums and repeated fields, which always are); ``oneof`` ``x``
is the optional struct field ``x_<index>`` named ``io.confluent.connect.protobuf.Union.x``; enums are strings
(``io.confluent.connect.protobuf.Enum`` parameters); protobuf maps are ``MAP``; unsigned and fixed types keep
their protobuf type in ``io.confluent.connect.protobuf.Type``; a root wrapper message is its primitive.
A recursive message type has no Connect schema here (Connect schemas are immutable values): a
:class:`DataError` says so.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pb2 import FieldDescriptorProto
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from connect_runtime.api.data import (
    Date,
    Decimal,
    Schema,
    SchemaBuilder,
    SchemaType,
    Struct,
    Time,
    Timestamp,
    validate_value,
)
from connect_runtime.api.errors import DataError
from connect_runtime.converters._paths import field_path, item_path

NAMESPACE = "io.confluent.connect.protobuf"
DEFAULT_SCHEMA_NAME = "ConnectDefault"
PROTOBUF_TYPE_ENUM = NAMESPACE + ".Enum"
PROTOBUF_TYPE_UNION = NAMESPACE + ".Union"
PROTOBUF_TYPE_TAG = NAMESPACE + ".Tag"
PROTOBUF_TYPE_PROP = NAMESPACE + ".Type"
CONNECT_TYPE = "connect.type"
CONNECT_PRECISION = "connect.decimal.precision"
DECIMAL_TYPE, DATE_TYPE = "confluent.type.Decimal", "google.type.Date"
TIME_TYPE, TIMESTAMP_TYPE = "google.type.TimeOfDay", "google.protobuf.Timestamp"
META_FILE = "confluent/meta.proto"
_LOGICAL_FILES = {Decimal.LOGICAL_NAME: (DECIMAL_TYPE, "confluent/type/decimal.proto"),
                  Date.LOGICAL_NAME: (DATE_TYPE, "google/type/date.proto"),
                  Time.LOGICAL_NAME: (TIME_TYPE, "google/type/timeofday.proto"),
                  Timestamp.LOGICAL_NAME: (TIMESTAMP_TYPE, "google/protobuf/timestamp.proto")}
_WRAPPERS = {SchemaType.INT8: "Int32Value", SchemaType.INT16: "Int32Value", SchemaType.INT32: "Int32Value",
             SchemaType.INT64: "Int64Value", SchemaType.FLOAT32: "FloatValue", SchemaType.FLOAT64: "DoubleValue",
             SchemaType.BOOLEAN: "BoolValue", SchemaType.STRING: "StringValue", SchemaType.BYTES: "BytesValue"}
_UNWRAPPED = {"google.protobuf.DoubleValue": SchemaType.FLOAT64, "google.protobuf.FloatValue": SchemaType.FLOAT32,
              "google.protobuf.Int64Value": SchemaType.INT64, "google.protobuf.UInt64Value": SchemaType.INT64,
              "google.protobuf.Int32Value": SchemaType.INT32, "google.protobuf.UInt32Value": SchemaType.INT64,
              "google.protobuf.BoolValue": SchemaType.BOOLEAN, "google.protobuf.StringValue": SchemaType.STRING,
              "google.protobuf.BytesValue": SchemaType.BYTES}
F = FieldDescriptorProto
_SCALARS = {SchemaType.INT8: F.TYPE_INT32, SchemaType.INT16: F.TYPE_INT32, SchemaType.INT32: F.TYPE_INT32,
            SchemaType.INT64: F.TYPE_INT64, SchemaType.FLOAT32: F.TYPE_FLOAT, SchemaType.FLOAT64: F.TYPE_DOUBLE,
            SchemaType.BOOLEAN: F.TYPE_BOOL, SchemaType.STRING: F.TYPE_STRING, SchemaType.BYTES: F.TYPE_BYTES}
_PROTO_TYPES = {"int32": F.TYPE_INT32, "sint32": F.TYPE_SINT32, "sfixed32": F.TYPE_SFIXED32,
                "int64": F.TYPE_INT64, "uint32": F.TYPE_UINT32, "fixed32": F.TYPE_FIXED32, "uint64": F.TYPE_UINT64,
                "sint64": F.TYPE_SINT64, "fixed64": F.TYPE_FIXED64, "sfixed64": F.TYPE_SFIXED64}
_TYPE_NAMES = {v: k for k, v in _PROTO_TYPES.items()}
_INT32_TYPES = {F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32}
_INT64_TYPES = {F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_FIXED32, F.TYPE_UINT64, F.TYPE_SINT64, F.TYPE_FIXED64,
                F.TYPE_SFIXED64}
_PLAIN = {t: Schema(t) for t in SchemaType if t.is_primitive}
"""Required schemas of the primitive types, for checking a scalar's value (built once)."""


@dataclass(frozen=True)
class ProtobufDataConfig:
    """Confluent's ``ProtobufDataConfig`` settings this mapping honours."""

    optional_for_nullables: bool = False
    enhanced_schema_support: bool = False


# -- Connect schema -> protobuf file ---------------------------------------------------------------------------

def connect_to_file(schema: Schema, optional_for_nullables: bool = False
                    ) -> tuple[descriptor_pb2.FileDescriptorProto, str]:
    """The ``FileDescriptorProto`` of a Connect schema and the full name of its root message (Confluent's
    ``fromConnectSchema``). A root primitive gives ``google/protobuf/wrappers.proto`` and its wrapper."""
    if schema.type in _WRAPPERS:
        from google.protobuf import wrappers_pb2
        fdp = descriptor_pb2.FileDescriptorProto()
        wrappers_pb2.DESCRIPTOR.CopyToProto(fdp)
        return fdp, f"google.protobuf.{_WRAPPERS[schema.type]}"
    if schema.type is not SchemaType.STRUCT:
        raise DataError(f"a Protobuf message cannot have a root schema of type {schema.type.name} (expected a "
                        "STRUCT or a primitive)")
    writer = _FileWriter(optional_for_nullables)
    package, name = _split(writer.name_or_default(schema.name))
    fdp = descriptor_pb2.FileDescriptorProto(name=f"{package + '.' if package else ''}{name}.proto", syntax="proto3")
    if package:
        fdp.package = package
    writer.message(fdp.message_type.add(), name, schema)
    fdp.dependency.extend(sorted(writer.dependencies))
    return fdp, f"{package}.{name}" if package else name


def root_message_name(schema: Schema) -> str:
    """The full name of the root message :func:`connect_to_file` writes for ``schema`` (without building it)."""
    if schema.type in _WRAPPERS:
        return f"google.protobuf.{_WRAPPERS[schema.type]}"
    return schema.name or f"{DEFAULT_SCHEMA_NAME}1"


def _split(full_name: str) -> tuple[str, str]:
    package, _, name = full_name.rpartition(".")
    return package, name


class _FileWriter:
    def __init__(self, optional_for_nullables: bool) -> None:
        self.optional_for_nullables = optional_for_nullables
        self.dependencies: set[str] = set()
        self.names = 0

    def name_or_default(self, name: str | None) -> str:
        if name:
            return name
        self.names += 1
        return f"{DEFAULT_SCHEMA_NAME}{self.names}"

    def unqualified(self, name: str | None) -> str:
        return self.name_or_default(name).rsplit(".", 1)[-1]

    def message(self, msg: descriptor_pb2.DescriptorProto, name: str, schema: Schema) -> None:
        msg.name = name
        next_tag = 1
        for f in schema.fields:
            raw_tag = (f.schema.parameters or {}).get(PROTOBUF_TYPE_TAG)
            if raw_tag is not None:
                tag = int(raw_tag)
            else:
                tag, next_tag = next_tag, next_tag + 1
            if f.schema.type is SchemaType.STRUCT and (f.schema.name or "").startswith(PROTOBUF_TYPE_UNION):
                self.oneof(msg, f.schema)
                continue
            field = self.field(msg, f.name, tag, f.schema)
            if (self.optional_for_nullables and f.schema.optional
                    and f.schema.type not in (SchemaType.ARRAY, SchemaType.MAP)):
                field.proto3_optional = True
                field.oneof_index = len(msg.oneof_decl)
                msg.oneof_decl.add(name=f"_{f.name}")

    def oneof(self, msg: descriptor_pb2.DescriptorProto, schema: Schema) -> None:
        index = len(msg.oneof_decl)
        msg.oneof_decl.add(name=(schema.name or "")[len(PROTOBUF_TYPE_UNION) + 1:].rsplit(".", 1)[-1])
        for f in schema.fields:
            tag = int((f.schema.parameters or {}).get(PROTOBUF_TYPE_TAG, "0"))
            self.field(msg, f.name, tag, f.schema).oneof_index = index

    def field(self, msg: descriptor_pb2.DescriptorProto, name: str, tag: int, schema: Schema) -> FieldDescriptorProto:
        field = msg.field.add(name=name, number=tag, label=F.LABEL_OPTIONAL)
        if schema.type is SchemaType.ARRAY:
            field.label = F.LABEL_REPEATED
            assert schema.value_schema is not None
            schema = schema.value_schema
            if schema.type in (SchemaType.ARRAY, SchemaType.MAP):
                raise DataError(f"field {name!r}: an array of {schema.type.name}s has no Protobuf form (a "
                                "repeated field holds neither)")
        params: dict[str, str] = {}
        logical = _LOGICAL_FILES.get(schema.name or "")
        if logical is not None:
            field.type, field.type_name = F.TYPE_MESSAGE, "." + logical[0]
            self.dependencies.add(logical[1])
            if schema.name == Decimal.LOGICAL_NAME:
                sp = schema.parameters or {}
                if CONNECT_PRECISION in sp:
                    params["precision"] = sp[CONNECT_PRECISION]
                if "scale" in sp:
                    params["scale"] = sp["scale"]
        elif schema.type is SchemaType.STRUCT:
            type_name = self.unqualified(schema.name)
            if type_name == name:
                type_name += "Message"
            field.type, field.type_name = F.TYPE_MESSAGE, type_name
            if type_name not in {m.name for m in msg.nested_type}:
                self.message(msg.nested_type.add(), type_name, schema)
        elif schema.type is SchemaType.MAP:
            entry = _to_map_entry(self.unqualified(schema.name))
            field.type, field.type_name, field.label = F.TYPE_MESSAGE, entry, F.LABEL_REPEATED
            nested = msg.nested_type.add(name=entry)
            assert schema.key_schema is not None and schema.value_schema is not None
            self.field(nested, "key", 1, schema.key_schema)
            self.field(nested, "value", 2, schema.value_schema)
        elif schema.type is SchemaType.STRING and PROTOBUF_TYPE_ENUM in (schema.parameters or {}):
            self.enum(msg, field, schema)
        else:
            field.type = _SCALARS[schema.type]
            proto_type = (schema.parameters or {}).get(PROTOBUF_TYPE_PROP)
            if proto_type in _PROTO_TYPES and schema.type in (SchemaType.INT32, SchemaType.INT64):
                field.type = _PROTO_TYPES[proto_type]
            if schema.type in (SchemaType.INT8, SchemaType.INT16):
                params[CONNECT_TYPE] = schema.type.name.lower()
        if params:
            field.options.Extensions[_field_meta_extension()].params.update(params)
            self.dependencies.add(META_FILE)
        return field

    def enum(self, msg: descriptor_pb2.DescriptorProto, field: FieldDescriptorProto, schema: Schema) -> None:
        params = schema.parameters or {}
        enum_name = params[PROTOBUF_TYPE_ENUM] or self.unqualified(schema.name)
        field.type, field.type_name = F.TYPE_ENUM, enum_name
        if enum_name in {e.name for e in msg.enum_type}:
            return
        enum = msg.enum_type.add(name=enum_name)
        prefix = PROTOBUF_TYPE_ENUM + "."
        for key, number in params.items():
            if key.startswith(prefix):
                enum.value.add(name=key[len(prefix):], number=int(number))


def _to_map_entry(name: str) -> str:
    if "_" in name:
        name = "".join(p[:1].upper() + p[1:].lower() for p in name.split("_"))
    return name + "Entry"


def _to_map_field(name: str) -> str:
    if not name.endswith("Entry"):
        return name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name[: -len("Entry")]).lower()


def message_class(fdp: descriptor_pb2.FileDescriptorProto, full_name: str) -> type[Message]:
    """The message class of ``full_name`` in a pool of its own holding ``fdp`` and the well-known types."""
    if fdp.name == "google/protobuf/wrappers.proto":
        from google.protobuf import wrappers_pb2
        return cast(type[Message], getattr(wrappers_pb2, full_name.rsplit(".", 1)[-1]))
    from confluent_kafka.schema_registry.common.protobuf import _init_pool
    pool = DescriptorPool()
    _init_pool(pool)
    try:
        pool.Add(fdp)
        return cast(type[Message], GetMessageClass(pool.FindMessageTypeByName(full_name)))
    except (TypeError, KeyError, ValueError) as exc:
        raise DataError(f"the Connect schema gives an invalid Protobuf schema: {exc}") from exc


# -- Connect value -> message ------------------------------------------------------------------------------------

def connect_to_message(schema: Schema, value: Any, cls: type[Message], where: str = "the value") -> Message:
    """The message (of ``cls``, built by :func:`message_class` from ``schema``) holding a Connect value."""
    msg = cls()
    if schema.type in _WRAPPERS:
        validate_value(schema, value, where)
        msg.value = value
        return msg
    _fill(msg, schema, value, where)
    return msg


def _fill(msg: Message, schema: Schema, value: Any, where: str) -> None:
    if not isinstance(value, Struct):
        raise DataError(f"{where} is a {type(value).__name__}; expected a Struct")
    if value.schema != schema:
        raise DataError(f"{where} is a Struct of another schema ({value.schema!r}; expected {schema!r})")
    msg.SetInParent()
    for f in schema.fields:
        v = value.get(f.name)
        if v is None:
            continue
        fs = f.schema
        if fs.type is SchemaType.STRUCT and (fs.name or "").startswith(PROTOBUF_TYPE_UNION):
            member = next((m for m in fs.fields if v.get(m.name) is not None), None)
            if member is not None:
                _set(msg, msg.DESCRIPTOR.fields_by_name[member.name], member.schema, v.get(member.name),
                     field_path(where, f.name))
            continue
        _set(msg, msg.DESCRIPTOR.fields_by_name[f.name], fs, v, field_path(where, f.name))


def _set(msg: Message, fd: FieldDescriptor, schema: Schema, value: Any, where: str) -> None:
    name = fd.name
    if schema.type is SchemaType.ARRAY:
        assert schema.value_schema is not None
        if not isinstance(value, (list, tuple)):
            raise DataError(f"{where} is a {type(value).__name__}; expected ARRAY (a list)")
        target = getattr(msg, name)
        for i, item in enumerate(value):
            if item is None:
                raise DataError(f"{item_path(where, i)} is null; a repeated Protobuf field cannot hold a null")
            if fd.type == F.TYPE_MESSAGE:
                _set_message(target.add(), schema.value_schema, item, item_path(where, i))
            else:
                _put(lambda v: target.append(v), _scalar(fd, schema.value_schema, item, item_path(where, i)), fd,
                     item_path(where, i))
        return
    if schema.type is SchemaType.MAP:
        if not isinstance(value, Mapping):
            raise DataError(f"{where} is a {type(value).__name__}; expected MAP (a dict)")
        assert schema.key_schema is not None and schema.value_schema is not None
        entries = getattr(msg, name)
        entry_desc = fd.message_type
        for k, v in value.items():
            entry = entries.add()
            if k is not None:
                _set(entry, entry_desc.fields_by_name["key"], schema.key_schema, k, f"a key of {where}")
            if v is not None:
                _set(entry, entry_desc.fields_by_name["value"], schema.value_schema, v, item_path(where, repr(k)))
        return
    if fd.type == F.TYPE_MESSAGE:
        _set_message(getattr(msg, name), schema, value, where)
    else:
        _put(lambda v: setattr(msg, name, v), _scalar(fd, schema, value, where), fd, where)


def _put(put: Any, value: Any, fd: FieldDescriptor, where: str) -> None:
    """Set a scalar, turning protobuf's refusal (a value outside ``uint32``, say) into a :class:`DataError`."""
    try:
        put(value)
    except (ValueError, TypeError) as exc:
        kind = _TYPE_NAMES.get(fd.type, "the field's type")
        raise DataError(f"{where} is {value!r}, which the Protobuf field's type ({kind}) cannot hold ({exc})") from None


def _set_message(target: Message, schema: Schema, value: Any, where: str) -> None:
    logical = schema.name
    try:
        if logical == Decimal.LOGICAL_NAME:
            raw = Decimal.from_logical(schema, value)
            digits = value.as_tuple().digits
            target.value, target.precision, target.scale = raw, len(digits) or 1, Decimal.scale(schema)
            return
        if logical == Date.LOGICAL_NAME:
            validate_value(schema, value, where)
            target.year, target.month, target.day = value.year, value.month, value.day
            return
        if logical == Time.LOGICAL_NAME:
            validate_value(schema, value, where)
            target.hours, target.minutes, target.seconds = value.hour, value.minute, value.second
            target.nanos = value.microsecond // 1000 * 1_000_000
            return
        if logical == Timestamp.LOGICAL_NAME:
            validate_value(schema, value, where)
            seconds, ms = divmod(Timestamp.from_logical(schema, value), 1000)
            target.seconds, target.nanos = seconds, ms * 1_000_000
            return
    except DataError as exc:
        if str(exc).startswith(where):
            raise
        raise DataError(f"{where}: {exc}") from None
    except (AttributeError, TypeError) as exc:
        raise DataError(f"{where} is a {type(value).__name__}; expected {logical}") from exc
    _fill(target, schema, value, where)


def _scalar(fd: FieldDescriptor, schema: Schema, value: Any, where: str) -> Any:
    if fd.type == F.TYPE_ENUM:
        if not isinstance(value, str):
            raise DataError(f"{where} is a {type(value).__name__}; expected STRING (an enum symbol)")
        number = (schema.parameters or {}).get(f"{PROTOBUF_TYPE_ENUM}.{value}")
        symbol = fd.enum_type.values_by_name.get(value)
        if number is None and symbol is None:
            raise DataError(f"{where} is {value!r}, not a symbol of the enum {fd.enum_type.name}")
        return int(number) if number is not None else symbol.number
    validate_value(_PLAIN[schema.type], value, where)
    if schema.type is SchemaType.BYTES:
        return bytes(value)
    if schema.type in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return float(value)
    return value



# -- protobuf descriptor -> Connect schema -----------------------------------------------------------------------

def descriptor_to_connect(descriptor: Descriptor, version: int | None, config: ProtobufDataConfig) -> Schema:
    """The Connect schema of a message type (Confluent's ``toConnectSchema``), ``version`` its root version."""
    unwrapped = _UNWRAPPED.get(descriptor.full_name)
    builder = SchemaBuilder(unwrapped) if unwrapped is not None else _Reader(config).struct(descriptor)
    if version is not None:
        builder.version(version)
    return builder.build()


class _Reader:
    def __init__(self, config: ProtobufDataConfig) -> None:
        self.config = config
        self.stack: list[str] = []

    def struct(self, descriptor: Descriptor) -> SchemaBuilder:
        if descriptor.full_name in self.stack:
            raise DataError(f"the Protobuf message {descriptor.full_name} is recursive; a Connect schema cannot be")
        self.stack.append(descriptor.full_name)
        try:
            b = SchemaBuilder.struct().name(descriptor.full_name if self.config.enhanced_schema_support
                                            else descriptor.name)
            for oneof in _real_oneofs(descriptor):
                union = SchemaBuilder.struct().name(f"{PROTOBUF_TYPE_UNION}.{oneof.name}").optional()
                for fd in oneof.fields:
                    union.field(fd.name, self.field(fd, oneof_member=True))
                b.field(f"{oneof.name}_{oneof.index}", union.build())
            for fd in descriptor.fields:
                if _real_oneof(fd) is None:
                    b.field(fd.name, self.field(fd, oneof_member=False))
            return b
        finally:
            self.stack.pop()

    def field(self, fd: FieldDescriptor, oneof_member: bool) -> Schema:
        b = self.base(fd)
        if fd.is_repeated and b.type is not SchemaType.MAP:
            b = SchemaBuilder.array(b.optional().build()).optional()
        if oneof_member or not self.config.optional_for_nullables or _has_optional_keyword(fd):
            b.optional()
        b.parameter(PROTOBUF_TYPE_TAG, str(fd.number))
        return b.build()

    def base(self, fd: FieldDescriptor) -> SchemaBuilder:
        t = fd.type
        meta = _field_meta(fd)
        if t in _INT32_TYPES:
            kind = meta.get(CONNECT_TYPE)
            if kind in ("int8", "int16"):
                return SchemaBuilder(SchemaType.INT8 if kind == "int8" else SchemaType.INT16)
            b = SchemaBuilder.int32()
            if t != F.TYPE_INT32:
                b.parameter(PROTOBUF_TYPE_PROP, _TYPE_NAMES[t])
            return b
        if t in _INT64_TYPES:
            b = SchemaBuilder.int64()
            if t != F.TYPE_INT64:
                b.parameter(PROTOBUF_TYPE_PROP, _TYPE_NAMES[t])
            return b
        simple = {F.TYPE_FLOAT: SchemaType.FLOAT32, F.TYPE_DOUBLE: SchemaType.FLOAT64, F.TYPE_BOOL: SchemaType.BOOLEAN,
                  F.TYPE_STRING: SchemaType.STRING, F.TYPE_BYTES: SchemaType.BYTES}.get(t)
        if simple is not None:
            return SchemaBuilder(simple)
        if t == F.TYPE_ENUM:
            enum = fd.enum_type
            b = SchemaBuilder.string().name(enum.full_name if self.config.enhanced_schema_support else enum.name)
            b.parameter(PROTOBUF_TYPE_ENUM, enum.name)
            for v in enum.values:
                b.parameter(f"{PROTOBUF_TYPE_ENUM}.{v.name}", str(v.number))
            return b.optional()
        if t != F.TYPE_MESSAGE:
            raise DataError(f"the Protobuf field {fd.full_name} has a type (groups) Connect has no schema for")
        full = fd.message_type.full_name
        if full == DECIMAL_TYPE:
            b = Decimal.builder(int(meta.get("scale", "0")))
            if "precision" in meta:
                b.parameter(CONNECT_PRECISION, meta["precision"])
        elif full == DATE_TYPE:
            b = Date.builder()
        elif full == TIME_TYPE:
            b = Time.builder()
        elif full == TIMESTAMP_TYPE:
            b = Timestamp.builder()
        elif _is_map(fd):
            key, value = fd.message_type.fields
            b = SchemaBuilder.map(self.field(key, False), self.field(value, False)).name(
                _to_map_field(fd.message_type.full_name if self.config.enhanced_schema_support
                              else fd.message_type.name))
        else:
            b = self.struct(fd.message_type)
        return b.optional()


def _field_meta_extension() -> Any:
    """Confluent's ``(confluent.field_meta)`` field option (``confluent/meta.proto``, shipped with confluent-kafka)."""
    from confluent_kafka.schema_registry.confluent import meta_pb2
    return getattr(meta_pb2, "field_meta")  # noqa: B009 - generated code mypy cannot see into


def _field_meta(fd: FieldDescriptor) -> dict[str, str]:
    options = fd.GetOptions()
    extension = _field_meta_extension()
    if not options.HasExtension(extension):
        return {}
    return dict(options.Extensions[extension].params)


def _is_map(fd: FieldDescriptor) -> bool:
    d = fd.message_type
    return (fd.is_repeated and d.name.endswith("Entry") and len(d.fields) == 2
            and d.fields[0].name == "key" and d.fields[1].name == "value"
            and not d.fields[0].is_repeated and not d.fields[1].is_repeated)


def _proto3_optional(fd: FieldDescriptor) -> bool:
    oneof = fd.containing_oneof
    return oneof is not None and len(oneof.fields) == 1 and fd.name in _proto3_optionals(fd.containing_type)


@functools.lru_cache(maxsize=4096)
def _proto3_optionals(descriptor: Descriptor) -> frozenset[str]:
    """The fields of a message type declared ``optional`` in proto3 (their oneof is synthetic)."""
    proto = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(proto)
    return frozenset(f.name for f in proto.field if f.proto3_optional)


def _real_oneof(fd: FieldDescriptor) -> Any:
    oneof = fd.containing_oneof
    return None if oneof is None or _proto3_optional(fd) else oneof


def _real_oneofs(descriptor: Descriptor) -> list[Any]:
    return [o for o in descriptor.oneofs if not (len(o.fields) == 1 and _proto3_optional(o.fields[0]))]


def _has_optional_keyword(fd: FieldDescriptor) -> bool:
    """Declared ``optional``: proto3's keyword, or a proto2 optional field (presence, outside a oneof)."""
    return _proto3_optional(fd) or (fd.has_presence and fd.containing_oneof is None and not fd.is_required)


# -- message -> Connect value ------------------------------------------------------------------------------------

def message_to_connect(schema: Schema, msg: Message, where: str = "the value") -> Any:
    """The Connect value of ``msg`` for the schema :func:`descriptor_to_connect` gave its type."""
    if schema.type is not SchemaType.STRUCT:
        return _value(schema, msg.value, where)
    return _struct(schema, msg, where)


def _struct(schema: Schema, msg: Message, where: str) -> Struct:
    struct = Struct(schema)
    descriptor = msg.DESCRIPTOR
    for oneof in _real_oneofs(descriptor):
        set_name = msg.WhichOneof(oneof.name)
        if set_name is None:
            continue
        union_field = schema.field(f"{oneof.name}_{oneof.index}")
        assert union_field is not None
        member = union_field.schema.field(set_name)
        assert member is not None
        union = Struct(union_field.schema)
        union.put(set_name, _value(member.schema, getattr(msg, set_name), field_path(where, set_name)))
        struct.put(union_field.name, union)
    for fd in descriptor.fields:
        if _real_oneof(fd) is not None:
            continue
        field = schema.field(fd.name)
        assert field is not None
        if ((fd.is_repeated or fd.type != F.TYPE_MESSAGE) and not _proto3_optional(fd)) or msg.HasField(fd.name):
            value = _value(field.schema, getattr(msg, fd.name), field_path(where, fd.name))
            if value is not None:
                struct.put(fd.name, value)
    return struct


def _value(schema: Schema, value: Any, where: str) -> Any:
    name = schema.name
    t = schema.type
    try:
        if name == Decimal.LOGICAL_NAME:
            unscaled = int.from_bytes(value.value, "big", signed=True)
            number: _decimal.Decimal = _decimal.Decimal(unscaled).scaleb(-value.scale, _EXACT)
            scale = Decimal.scale(schema)
            exact = number.quantize(_decimal.Decimal(1).scaleb(-scale, _EXACT), context=_EXACT)
            if exact != number:
                raise DataError(f"{where} is {number}, which does not fit the Decimal's scale {scale}")
            return exact
        if name == Date.LOGICAL_NAME:
            return _dt.date(value.year, value.month, value.day)
        if name == Time.LOGICAL_NAME:
            return _dt.time(value.hours, value.minutes, value.seconds, value.nanos // 1_000_000 * 1000)
        if name == Timestamp.LOGICAL_NAME:
            return Timestamp.to_logical(schema, value.seconds * 1000 + value.nanos // 1_000_000)
    except (ValueError, OverflowError) as exc:
        raise DataError(f"{where} is not a valid {(name or '').rsplit('.', 1)[-1]} ({exc})") from exc
    if t is SchemaType.ARRAY:
        assert schema.value_schema is not None
        return [_value(schema.value_schema, v, item_path(where, i)) for i, v in enumerate(value)]
    if t is SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        # a protobuf map field is a Mapping; Confluent's maps are repeated key/value messages
        items = list(value.items()) if isinstance(value, Mapping) else [(e.key, e.value) for e in value]
        return {_value(schema.key_schema, k, f"a key of {where}"): _value(schema.value_schema, v, item_path(where, repr(k)))
                for k, v in items}
    if t is SchemaType.STRUCT:
        return _struct(schema, value, where)
    if t is SchemaType.STRING and PROTOBUF_TYPE_ENUM in (schema.parameters or {}) and isinstance(value, int):
        prefix = PROTOBUF_TYPE_ENUM + "."
        for key, tag in (schema.parameters or {}).items():
            if key.startswith(prefix) and int(tag) == value:
                return key[len(prefix):]
        return str(value)
    if t in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return float(value)
    if isinstance(value, Message):  # a wrapper message read as its struct
        return _struct(schema, value, where)
    if t in _NARROWED:  # protobuf's own types hold the rest exactly (an int32 in INT32, a str in STRING, ...)
        validate_value(_PLAIN[t], value, where)
    return value


_NARROWED = frozenset({SchemaType.INT8, SchemaType.INT16, SchemaType.INT64})
"""Connect types a protobuf value may not fit: int8/int16 (an int32 with ``connect.type``), int64 (a uint64)."""


_EXACT = _decimal.Context(prec=_decimal.MAX_PREC, Emax=_decimal.MAX_EMAX, Emin=_decimal.MIN_EMIN)

__all__ = ["ProtobufDataConfig", "connect_to_file", "connect_to_message", "descriptor_to_connect", "message_class",
           "message_to_connect", "root_message_name"]
