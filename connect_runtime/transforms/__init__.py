"""Built-in single message transforms (SMTs) and predicates, in Kafka Connect's shape.

Configured in the connector config::

    transforms=route,drop
    transforms.route.type=org.apache.kafka.connect.transforms.TimestampRouter
    transforms.route.topic.format=${topic}-${timestamp}
    transforms.drop.type=org.apache.kafka.connect.transforms.Filter
    transforms.drop.predicate=tombstones
    predicates=tombstones
    predicates.tombstones.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone

Transformations (``$Value`` / ``$Key`` variants are the classes ``...Value`` / ``...Key``):
:class:`Filter`, ``InsertField``, ``ReplaceField``, ``ExtractField``, ``HoistField``,
``MaskField``, :class:`ValueToKey`, :class:`TimestampRouter`, :class:`RegexRouter`,
:class:`InsertHeader`, :class:`DropHeaders`, ``Cast``; Debezium's :class:`ExtractNewRecordState`
(``io.debezium.transforms.ExtractNewRecordState``). Predicates: :class:`TopicNameMatches`,
:class:`HasHeaderKey`, :class:`RecordIsTombstone`. The field transforms work on schemaless (dict) keys and values
and, as Kafka Connect's, on Structs with their schemas (the record's ``key_schema`` / ``value_schema`` replaced by
the new schema, built once per input schema).

:data:`ALIASES` (read by :mod:`connect_runtime.runtime.plugins`; this package imports only the
connector API) maps each class's Kafka Connect name (``org.apache.kafka.connect.transforms.InsertField$Value``, ...) and its short
name (``InsertField$Value``, ``Filter``, ``TopicNameMatches``, ...).
"""

from __future__ import annotations

from connect_runtime.transforms.cast import CastKey, CastValue
from connect_runtime.transforms.debezium import ExtractNewRecordState
from connect_runtime.transforms.fields import (
    ExtractFieldKey,
    ExtractFieldValue,
    HoistFieldKey,
    HoistFieldValue,
    MaskFieldKey,
    MaskFieldValue,
    ValueToKey,
)
from connect_runtime.transforms.filter import Filter
from connect_runtime.transforms.headers import DropHeaders, InsertHeader
from connect_runtime.transforms.insert_field import InsertField, InsertFieldKey, InsertFieldValue
from connect_runtime.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from connect_runtime.transforms.regex_router import RegexRouter, java_replacement_to_python
from connect_runtime.transforms.replace_field import ReplaceField, ReplaceFieldKey, ReplaceFieldValue
from connect_runtime.transforms.timestamp_router import TimestampRouter, java_date_pattern_to_strftime

_KAFKA = "org.apache.kafka.connect.transforms."
_NAMES = {
    "Filter": Filter,
    "InsertField$Value": InsertFieldValue,
    "InsertField$Key": InsertFieldKey,
    "ReplaceField$Value": ReplaceFieldValue,
    "ReplaceField$Key": ReplaceFieldKey,
    "TimestampRouter": TimestampRouter,
    "RegexRouter": RegexRouter,
    "ValueToKey": ValueToKey,
    "ExtractField$Value": ExtractFieldValue,
    "ExtractField$Key": ExtractFieldKey,
    "HoistField$Value": HoistFieldValue,
    "HoistField$Key": HoistFieldKey,
    "MaskField$Value": MaskFieldValue,
    "MaskField$Key": MaskFieldKey,
    "InsertHeader": InsertHeader,
    "DropHeaders": DropHeaders,
    "Cast$Value": CastValue,
    "Cast$Key": CastKey,
    "predicates.TopicNameMatches": TopicNameMatches,
    "predicates.HasHeaderKey": HasHeaderKey,
    "predicates.RecordIsTombstone": RecordIsTombstone,
}
ALIASES: dict[str, str] = {}
"""Kafka Connect and short class names of the transforms and predicates here, mapped to their dotted paths."""
for _name, _cls in _NAMES.items():
    _target = f"{__name__}.{_cls.__name__}"
    ALIASES.setdefault(_KAFKA + _name, _target)
    ALIASES.setdefault(_name.rpartition(".")[2], _target)
ALIASES["io.debezium.transforms.ExtractNewRecordState"] = ALIASES["ExtractNewRecordState"] = (
    f"{__name__}.ExtractNewRecordState")

__all__ = [
    "ALIASES",
    "CastKey",
    "CastValue",
    "DropHeaders",
    "ExtractFieldKey",
    "ExtractFieldValue",
    "ExtractNewRecordState",
    "Filter",
    "HasHeaderKey",
    "HoistFieldKey",
    "HoistFieldValue",
    "InsertField",
    "InsertFieldKey",
    "InsertFieldValue",
    "InsertHeader",
    "MaskFieldKey",
    "MaskFieldValue",
    "RecordIsTombstone",
    "RegexRouter",
    "ReplaceField",
    "ReplaceFieldKey",
    "ReplaceFieldValue",
    "TimestampRouter",
    "TopicNameMatches",
    "ValueToKey",
    "java_date_pattern_to_strftime",
    "java_replacement_to_python",
]
