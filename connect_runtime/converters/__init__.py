"""Converters: the bytes on a topic and the Python values (and Connect schemas) a task sees.

- :mod:`.simple`: :class:`JsonConverter` (the default), :class:`StringConverter` (the default header converter),
  :class:`ByteArrayConverter`.
- :mod:`.connect_json`: Kafka Connect's JSON envelope (``schemas.enable=true``), byte for byte, which
  :class:`JsonConverter` uses.
- :mod:`.avro`: ``AvroConverter`` (Confluent's, over a Schema Registry; :mod:`._avro_data` maps Connect schemas to
  Avro).
- :mod:`.jsonschema`: ``JsonSchemaConverter`` (Connect data as JSON with a JSON Schema in a Schema Registry,
  Confluent's ``JsonSchemaData`` mapping in :mod:`._jsonschema_data`).
- :mod:`.protobuf`: ``ProtobufConverter`` (Connect data as Protobuf messages built at run time, Confluent's
  ``ProtobufData`` mapping in :mod:`._protobuf_data`).
- :mod:`._registry` (the Schema Registry settings the registry converters share) and :mod:`._registry_converter`
  (what the Avro, JSON Schema and Protobuf converters share: serializer and reader caches, the writer schema, errors).

The registry converters are not imported with the package: confluent-kafka (and protobuf, jsonschema, fastavro) load
only when a config names one (by its dotted path or alias) or code reads ``connect_runtime.converters.AvroConverter``
(a lazy attribute).

Every converter is importable from this package (``connect_runtime.converters.JsonConverter``, the path the
runtime's defaults name). :data:`ALIASES` maps the Kafka Connect class names (and the short class names) to their
dotted paths; :mod:`connect_runtime.runtime.plugins` reads it. Converters import only the connector API and their
libraries.
"""

from __future__ import annotations

import importlib
from typing import Any

from connect_runtime.api.errors import missing_extra
from connect_runtime.api.jsoncodec import json_batch, json_default, json_loads_exact
from connect_runtime.converters.simple import ByteArrayConverter, JsonConverter, StringConverter

for _cls in (ByteArrayConverter, JsonConverter, StringConverter):
    _cls.__module__ = __name__  # their public home: the name dead letter headers and logs report

ALIASES: dict[str, str] = {}
"""Kafka Connect and short class names of the converters, mapped to their dotted paths (under this package)."""
for _path, _kafka_name in (
    ("JsonConverter", "org.apache.kafka.connect.json.JsonConverter"),
    ("StringConverter", "org.apache.kafka.connect.storage.StringConverter"),
    ("ByteArrayConverter", "org.apache.kafka.connect.converters.ByteArrayConverter"),
    ("avro.AvroConverter", "io.confluent.connect.avro.AvroConverter"),
    ("jsonschema.JsonSchemaConverter", "io.confluent.connect.json.JsonSchemaConverter"),
    ("protobuf.ProtobufConverter", "io.confluent.connect.protobuf.ProtobufConverter"),
):
    ALIASES.setdefault(_kafka_name, f"{__name__}.{_path}")
    ALIASES.setdefault(_path.rsplit(".", 1)[-1], f"{__name__}.{_path}")

_LAZY = {"AvroConverter": "avro", "JsonSchemaConverter": "jsonschema", "ProtobufConverter": "protobuf"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    except ImportError as exc:
        raise missing_extra(exc, f"{name} (a Schema Registry converter)") from exc


__all__ = ["ALIASES", "AvroConverter", "ByteArrayConverter", "JsonConverter", "JsonSchemaConverter",
           "ProtobufConverter", "StringConverter", "json_batch", "json_default", "json_loads_exact"]
