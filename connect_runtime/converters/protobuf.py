"""``ProtobufConverter``: Connect data as Protobuf messages whose schemas live in a Schema Registry, in Confluent's
wire format; alias ``io.confluent.connect.protobuf.ProtobufConverter``.

Writing: the record's Connect schema becomes, at run time, the ``proto3`` file Confluent's ``ProtobufData`` writes
(see :mod:`connect_runtime.converters._protobuf_data`), built into a descriptor pool of its own; the message class
the message factory gives for it goes to confluent-kafka's ``ProtobufSerializer``, which registers (or looks up) the
file under the subject and frames the message (magic byte, schema id, message indexes). Reading: the writer's file
is fetched from the registry (with the files it imports), the message type found by the message indexes of the
framing, and confluent-kafka's ``ProtobufDeserializer`` for that type parses the message; the message type gives
the Connect schema and the message the Connect value. Messages any Protobuf producer wrote (generated classes,
confluent-kafka's own ``ProtobufSerializer``, Confluent's converter) are read so.

Settings: the Schema Registry's (:mod:`connect_runtime.converters._registry`) and Confluent's
``optional.for.nullables`` (write optional Connect fields with the proto3 ``optional`` label and read only such
fields as optional; default false: every field read is optional, as in Confluent) and
``enhanced.protobuf.schema.support`` (Connect struct and enum names are the full Protobuf names; default false:
the short names).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import dual_schema_id_deserializer
from confluent_kafka.schema_registry._sync.protobuf import _resolve_named_schema  # the sync client's
from confluent_kafka.schema_registry.common.protobuf import _init_pool, _str_to_proto
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import SerializationContext
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from connect_runtime.api.config import ConfigDef, Importance, Type
from connect_runtime.api.data import Schema
from connect_runtime.api.errors import DataError
from connect_runtime.converters._protobuf_data import (
    ProtobufDataConfig,
    connect_to_file,
    connect_to_message,
    descriptor_to_connect,
    message_class,
    message_to_connect,
    root_message_name,
)
from connect_runtime.converters._registry_converter import Reader, RegistryConverter


def _is_well_known(writer: RegistrySchema) -> bool:
    """Whether the writer's file is one of protobuf's well-known files (a root wrapper such as Int32Value)."""
    return bool(_str_to_proto("default", writer.schema_str or "").package == "google.protobuf")


def _parse_well_known(cls: type[Message], data: bytes, ctx: SerializationContext) -> Message:
    """A message of a well-known type (confluent-kafka's ``ProtobufDeserializer`` cannot read one: it adds the
    writer's file to a pool that holds it already, "duplicate symbol"): the framing read by confluent-kafka's own
    ``dual_schema_id_deserializer``, the rest parsed by protobuf."""
    payload = dual_schema_id_deserializer(data, ctx, SchemaId("PROTOBUF"))
    message = cls()
    message.ParseFromString(payload.read())
    return message


class _Writer:
    """confluent-kafka's serializer of one message class, and the class (what values are put into)."""

    __slots__ = ("cls", "serialize")

    def __init__(self, cls: type[Message], serialize: Callable[[Message, SerializationContext], bytes | None]) -> None:
        self.cls, self.serialize = cls, serialize

    def __call__(self, message: Message, ctx: SerializationContext) -> bytes | None:
        return self.serialize(message, ctx)


class ProtobufConverter(RegistryConverter):
    """Confluent's ``ProtobufConverter`` over confluent-kafka's ``ProtobufSerializer`` / ``ProtobufDeserializer``."""

    NAME: ClassVar[str] = "ProtobufConverter"
    SCHEMA_TYPE: ClassVar[str] = "PROTOBUF"
    FORMAT_CONFIG: ClassVar[ConfigDef] = (
        ConfigDef()
        .define("optional.for.nullables", Type.BOOLEAN, default=False, importance=Importance.LOW,
                doc="Write optional fields with the proto3 'optional' label (a null stays null) and read only "
                    "fields with that label as optional.")
        .define("enhanced.protobuf.schema.support", Type.BOOLEAN, default=False, importance=Importance.LOW,
                doc="Name Connect structs and enums after the full Protobuf names (package included).")
    )

    def __init__(self) -> None:
        super().__init__()
        self.data_config = ProtobufDataConfig()

    def _configure_format(self, values: Mapping[str, Any]) -> None:
        self.data_config = ProtobufDataConfig(values["optional.for.nullables"],
                                              values["enhanced.protobuf.schema.support"])

    def message_class(self, schema: Schema) -> type[Message]:
        """The message class written for ``schema`` (built at run time; cached with its serializer)."""
        return message_class(*connect_to_file(schema, self.data_config.optional_for_nullables))

    def _record_name(self, schema: Schema) -> str | None:
        """The root message's full name (``ConnectDefault1`` for an unnamed struct, the wrapper for a primitive)."""
        return root_message_name(schema)

    def _new_serializer(self, schema: Schema) -> Callable[[Any, SerializationContext], bytes | None]:
        assert self.settings is not None
        cls = self.message_class(schema)
        return _Writer(cls, ProtobufSerializer(cls, self.client, conf=self.settings.serializer_conf(self.is_key)))

    def _payload(self, schema: Schema, value: Any, serializer: Any) -> Any:
        return connect_to_message(schema, value, serializer.cls)

    def _new_reader(self, writer: RegistrySchema, schema_id: SchemaId, topic: str,
                    version: Callable[[str | None], int | None]) -> Reader:
        assert self.settings is not None
        descriptor = self._writer_descriptor(writer, schema_id.message_indexes or [0])
        schema = descriptor_to_connect(descriptor, version(descriptor.full_name), self.data_config)
        cls = GetMessageClass(descriptor)
        if _is_well_known(writer):
            return Reader(functools.partial(_parse_well_known, cls), schema)
        deserializer = ProtobufDeserializer(cls, conf=self.settings.deserializer_conf(self.is_key),
                                            schema_registry_client=self.client)
        return Reader(deserializer, schema)

    def _writer_descriptor(self, writer: RegistrySchema, indexes: list[int]) -> Descriptor:
        """The message type the record names: its message indexes walked down the writer's file (a file of
        well-known types, e.g. a root wrapper, is the pool's own copy)."""
        fdp = _str_to_proto("default", writer.schema_str or "")
        names: list[str] = [fdp.package] if fdp.package else []
        messages = list(fdp.message_type)
        for depth, index in enumerate(indexes):
            if not 0 <= index < len(messages):
                raise DataError(f"the message indexes {indexes} of the record point outside the writer's schema "
                                f"(level {depth} has {len(messages)} message types)")
            names.append(messages[index].name)
            messages = list(messages[index].nested_type)
        if len(names) == (1 if fdp.package else 0):
            raise DataError("the record names no message type of the writer's schema (empty message indexes)")
        full_name = ".".join(names)
        pool = DescriptorPool()
        _init_pool(pool)
        try:
            return pool.FindMessageTypeByName(full_name)
        except KeyError:
            _resolve_named_schema(writer, self.client, pool)
            _ = pool.Add(fdp)
            return pool.FindMessageTypeByName(full_name)

    def _value(self, reader: Reader, obj: Any) -> Any:
        return message_to_connect(reader.schema, obj)


__all__ = ["ProtobufConverter"]
