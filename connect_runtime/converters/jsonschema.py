"""``JsonSchemaConverter``: Connect data as JSON validated by a JSON Schema in a Schema Registry, in Confluent's wire
format; alias ``io.confluent.connect.json.JsonSchemaConverter``.

Writing: the record's Connect schema becomes the JSON Schema Confluent's ``JsonSchemaData`` writes (see
:mod:`connect_runtime.converters._jsonschema_data`), which confluent-kafka's ``JSONSerializer`` registers (or looks
up) under the subject, validates the value against and frames (magic byte, schema id). Reading: confluent-kafka's
``JSONDeserializer`` reads the framing, fetches the writer's schema and validates the JSON against it; the writer's
JSON Schema gives the Connect schema and the JSON the Connect value. Bytes any JSON Schema producer wrote (another
client, Confluent's converter, confluent-kafka's own ``JSONSerializer`` with a schema of its own) are read so.

Settings: the Schema Registry's (:mod:`connect_runtime.converters._registry`) and Confluent's
``decimal.format`` (``BASE64``, the default: a ``Decimal`` is its unscaled bytes in base64 text; ``NUMERIC``: a
JSON number) and ``use.optional.for.nonrequired`` (read a property outside ``required`` as optional; default
false). Numbers are read exactly (a JSON number for a ``Decimal`` keeps every digit).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import msgspec
from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import dual_schema_id_deserializer
from confluent_kafka.schema_registry.common.serde import SchemaId
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import SerializationContext, SerializationError
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

from connect_runtime.api.config import ConfigDef, Importance, Type, ValidString
from connect_runtime.api.data import Schema
from connect_runtime.api.errors import DataError
from connect_runtime.converters._jsonschema_data import (
    connect_to_json_schema,
    connect_to_json_value,
    decode_json,
    json_schema_to_connect,
    json_to_connect_value,
)
from connect_runtime.converters._registry_converter import Reader, RegistryConverter

_ENCODER = msgspec.json.Encoder(decimal_format="number")


def _encode(value: Any) -> bytes:
    return _ENCODER.encode(value)


def _deserialize(deserializer: JSONDeserializer, document: Any, data: bytes, ctx: SerializationContext) -> Any:
    """confluent-kafka's deserializer; when it finds the JSON breaks the writer's schema (its error names no
    field), the JSON is validated again here to name the field."""
    try:
        return deserializer(data, ctx)
    except SerializationError as exc:
        where = _violation(document, data, ctx)
        if where is None:
            raise
        raise DataError(f"{where} breaks the writer's JSON Schema: {exc}") from None


def _violation(document: Any, data: bytes, ctx: SerializationContext) -> str | None:
    """``field 'a.b[2]'`` for the first place the record's JSON breaks ``document`` (``None`` if none is found)."""
    try:
        payload = dual_schema_id_deserializer(data, ctx, SchemaId("JSON")).read()
        error = best_match(validator_for(document)(document).iter_errors(decode_json(payload)))
    except Exception:
        return None
    if error is None or not error.absolute_path:
        return None
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    return f"field {path!r}"


class JsonSchemaConverter(RegistryConverter):
    """Confluent's ``JsonSchemaConverter`` over confluent-kafka's ``JSONSerializer`` / ``JSONDeserializer``."""

    NAME: ClassVar[str] = "JsonSchemaConverter"
    SCHEMA_TYPE: ClassVar[str] = "JSON"
    FORMAT_CONFIG: ClassVar[ConfigDef] = (
        ConfigDef()
        .define("decimal.format", Type.STRING, default="BASE64", validator=ValidString("BASE64", "NUMERIC"),
                importance=Importance.LOW,
                doc="How a Decimal is written: BASE64 (its unscaled bytes, base64) or NUMERIC (a JSON number).")
        .define("use.optional.for.nonrequired", Type.BOOLEAN, default=False, importance=Importance.LOW,
                doc="Read a JSON Schema property that is not 'required' as an optional field.")
    )

    def __init__(self) -> None:
        super().__init__()
        self.numeric_decimals = False
        self.optional_for_nonrequired = False
        self._deserializer: JSONDeserializer | None = None

    def _configure_format(self, values: Mapping[str, Any]) -> None:
        self.numeric_decimals = values["decimal.format"].upper() == "NUMERIC"
        self.optional_for_nonrequired = values["use.optional.for.nonrequired"]

    def json_schema(self, schema: Schema) -> dict[str, Any]:
        """The JSON Schema document written for ``schema`` (what is registered)."""
        return connect_to_json_schema(schema, self.numeric_decimals)

    def _new_serializer(self, schema: Schema) -> Callable[[Any, SerializationContext], bytes | None]:
        assert self.settings is not None
        text = json.dumps(self.json_schema(schema), separators=(",", ":"), ensure_ascii=False)
        return JSONSerializer(text, self.client, conf=self.settings.serializer_conf(self.is_key),  # type: ignore[no-any-return]
                              json_encode=_encode)

    def _payload(self, schema: Schema, value: Any, serializer: Any) -> Any:
        return connect_to_json_value(schema, value, "the value", self.numeric_decimals)

    def _new_reader(self, writer: RegistrySchema, schema_id: SchemaId, topic: str,
                    version: Callable[[str | None], int | None]) -> Reader:
        assert self.settings is not None
        document = decode_json(writer.schema_str or "")
        title = document.get("title") if isinstance(document, dict) else None
        schema = json_schema_to_connect(document, version(title), self.optional_for_nonrequired)
        if self._deserializer is None:
            self._deserializer = JSONDeserializer(None, schema_registry_client=self.client,
                                                  conf=self.settings.deserializer_conf(self.is_key),
                                                  json_decode=decode_json)
        return Reader(functools.partial(_deserialize, self._deserializer, document), schema)

    def _value(self, reader: Reader, obj: Any) -> Any:
        return json_to_connect_value(reader.schema, obj)


__all__ = ["JsonSchemaConverter"]
