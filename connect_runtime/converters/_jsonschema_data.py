"""Connect schemas and values <-> JSON Schema documents and JSON values: Confluent's ``JsonSchemaData``.

The mapping is Confluent's (``io.confluent.connect.json.JsonSchemaData``, its defaults):

- ``INT8``..``INT64``: ``{"type": "integer", "connect.type": "int8"}`` (``int16``, ``int32``, ``int64``);
  ``FLOAT32`` / ``FLOAT64``: ``{"type": "number", "connect.type": "float32"}`` (``float64``); ``BOOLEAN``:
  ``{"type": "boolean"}``; ``STRING``: ``{"type": "string"}`` (a string with Confluent's enum parameters:
  ``{"enum": [...]}``); ``BYTES``: ``{"type": "string", "connect.type": "bytes"}``, the value base64 text.
- ``ARRAY``: ``{"type": "array", "items": ...}``. ``MAP`` with required string keys: ``{"type": "object",
  "additionalProperties": ..., "connect.type": "map"}``; any other ``MAP``: an array of ``{"key", "value"}``
  objects with ``"connect.type": "map"``.
- ``STRUCT``: ``{"type": "object", "title": <name>, "properties": {...}}``, each property with
  ``"connect.index"`` (its position). Confluent's ``io.confluent.connect.json.OneOf`` structs are ``oneOf``.
- Every schema: ``title`` (the name), ``description`` (the doc), ``connect.version``, ``connect.parameters``
  (parameters outside Confluent's own namespace), ``default``. An optional schema is ``{"oneOf": [{"type":
  "null"}, <the schema>]}``, with ``connect.index`` on the ``oneOf``.
- Logical types keep their Connect name as the ``title``, ``connect.version`` 1 and their parameters:
  ``Decimal`` is ``{"type": "string", "connect.type": "bytes", "title": "org.apache.kafka.connect.data.Decimal",
  "connect.parameters": {"scale": "2"}}`` with the unscaled bytes in base64 (``decimal.format=BASE64``, the
  default) or ``{"type": "number", "connect.type": "bytes", ...}`` with a JSON number (``NUMERIC``); ``Date``,
  ``Time``, ``Timestamp`` are integers (``int32`` days, ``int32`` milliseconds of the day, ``int64``
  milliseconds since the epoch).

Reading (``json_schema_to_connect``) takes any JSON Schema a producer registered, as Confluent does: no
``connect.type`` means ``integer`` -> ``INT64`` and ``number`` -> ``FLOAT64``; ``oneOf`` / ``anyOf`` of
``null`` and one schema (or ``"type": [t, "null"]``) is that schema, optional; other unions become
Confluent's ``OneOf`` struct; ``enum`` / ``const`` become strings with the enum parameters; local ``$ref``\\ s
are followed; properties are ordered by ``connect.index``; the root schema's version is the registry's
version when it has no ``connect.version``. Not supported (a :class:`DataError` says so): ``allOf``, schemas
without a type (Confluent's ``Variant``), recursive ``$ref``\\ s and references to other registry subjects.

Where this differs from Confluent, and why: a required property missing from the JSON (or ``null``) with no
default is a :class:`DataError` naming it (Confluent leaves the struct field unset, which fails later, far from
the record); a number read for an integer type must be integral (Confluent truncates ``1.5`` to ``1``); an enum
value outside its symbols is refused when written, naming the field (confluent-kafka's validator would refuse it
too, without the field).
"""

from __future__ import annotations

import base64
import binascii
import decimal as _decimal
import json
from collections.abc import Mapping
from typing import Any

import msgspec

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

NAMESPACE = "io.confluent.connect.json"
CONNECT_TYPE = "connect.type"
CONNECT_VERSION = "connect.version"
CONNECT_PARAMETERS = "connect.parameters"
CONNECT_INDEX = "connect.index"
JSON_TYPE_ENUM = NAMESPACE + ".Enum"
JSON_TYPE_ONE_OF = NAMESPACE + ".OneOf"
KEY_FIELD, VALUE_FIELD = "key", "value"

_INT_NAMES = {SchemaType.INT8: "int8", SchemaType.INT16: "int16", SchemaType.INT32: "int32",
              SchemaType.INT64: "int64"}
_FLOAT_NAMES = {SchemaType.FLOAT32: "float32", SchemaType.FLOAT64: "float64"}
_NUMBER_TYPES = {"int8": SchemaType.INT8, "int16": SchemaType.INT16, "int32": SchemaType.INT32,
                 "int64": SchemaType.INT64, "float32": SchemaType.FLOAT32, "float64": SchemaType.FLOAT64,
                 "bytes": SchemaType.BYTES}
_NULL = {"type": "null"}
_TIME_TYPES: dict[str, Any] = {Date.LOGICAL_NAME: Date, Time.LOGICAL_NAME: Time, Timestamp.LOGICAL_NAME: Timestamp}


def _non_optional(schema: Schema) -> Schema:
    return Schema(schema.type, False, schema.default, schema.name, schema.version, schema.doc, schema.parameters,
                  schema.fields, schema.key_schema, schema.value_schema)


# -- Connect schema -> JSON Schema --------------------------------------------------------------------------------

def connect_to_json_schema(schema: Schema, numeric_decimals: bool = False) -> dict[str, Any]:
    """The JSON Schema document of a Connect schema (Confluent's ``fromConnectSchema``)."""
    return _to_json_schema(schema, None, False, numeric_decimals)


def _to_json_schema(schema: Schema, index: int | None, ignore_optional: bool, numeric: bool) -> dict[str, Any]:
    t = schema.type
    doc: dict[str, Any]
    combined = False
    if t in _INT_NAMES:
        doc = {"type": "integer", CONNECT_TYPE: _INT_NAMES[t]}
    elif t in _FLOAT_NAMES:
        doc = {"type": "number", CONNECT_TYPE: _FLOAT_NAMES[t]}
    elif t is SchemaType.BOOLEAN:
        doc = {"type": "boolean"}
    elif t is SchemaType.STRING:
        params = schema.parameters or {}
        if JSON_TYPE_ENUM in params:
            doc = {"enum": [v for k, v in params.items() if k.startswith(JSON_TYPE_ENUM + ".")]}
        else:
            doc = {"type": "string"}
    elif t is SchemaType.BYTES:
        numeric_decimal = numeric and schema.name == Decimal.LOGICAL_NAME
        doc = {"type": "number" if numeric_decimal else "string", CONNECT_TYPE: "bytes"}
    elif t is SchemaType.ARRAY:
        assert schema.value_schema is not None
        doc = {"type": "array", "items": _to_json_schema(schema.value_schema, None, False, numeric)}
    elif t is SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type is SchemaType.STRING and not schema.key_schema.optional:
            doc = {"type": "object", "additionalProperties": _to_json_schema(schema.value_schema, None, False,
                                                                             numeric), CONNECT_TYPE: "map"}
        else:
            entry = {"type": "object", "properties": {
                KEY_FIELD: _to_json_schema(schema.key_schema, 0, False, numeric),
                VALUE_FIELD: _to_json_schema(schema.value_schema, 1, False, numeric)}}
            doc = {"type": "array", "items": entry, CONNECT_TYPE: "map"}
    elif schema.name == JSON_TYPE_ONE_OF:
        combined = True
        subs = [_NULL] if schema.optional else []
        subs += [_to_json_schema(_non_optional(f.schema), f.index, True, numeric) for f in schema.fields]
        doc = {"oneOf": subs}
    elif schema.optional:
        combined = True
        doc = {"oneOf": [_NULL, _to_json_schema(_non_optional(schema), None, False, numeric)]}
    else:
        doc = {"type": "object", "properties": {
            f.name: _to_json_schema(f.schema, f.index, False, numeric) for f in schema.fields}}
    if not combined:
        if schema.name is not None:
            doc["title"] = schema.name
        if schema.version is not None:
            doc[CONNECT_VERSION] = schema.version
        if schema.doc is not None:
            doc["description"] = schema.doc
        params = {k: v for k, v in (schema.parameters or {}).items() if not k.startswith(NAMESPACE)}
        if params:
            doc[CONNECT_PARAMETERS] = params
        if schema.default is not None:
            doc["default"] = connect_to_json_value(schema, schema.default, "the default value", numeric)
        if schema.optional and not ignore_optional:
            doc = {"oneOf": [_NULL, doc]}
    if index is not None:
        doc[CONNECT_INDEX] = index
    return doc


# -- Connect value -> JSON value ---------------------------------------------------------------------------------

def connect_to_json_value(schema: Schema, value: Any, where: str = "the value", numeric: bool = False) -> Any:
    """A Connect value as the JSON value Confluent writes for it (``fromConnectData``): plain Python JSON types,
    plus ``decimal.Decimal`` for a NUMERIC decimal (written as a JSON number)."""
    if value is None:
        if schema.default is not None:
            return connect_to_json_value(schema, schema.default, where, numeric)
        if schema.optional:
            return None
        raise DataError(f"{where} is null but its schema is not optional and has no default")
    name = schema.name
    try:
        if name == Decimal.LOGICAL_NAME:
            if not isinstance(value, _decimal.Decimal):
                raise DataError(f"{where} is a {type(value).__name__}; expected decimal.Decimal (Decimal)")
            raw = Decimal.from_logical(schema, value)
            return value if numeric else base64.b64encode(raw).decode("ascii")
        if name == Date.LOGICAL_NAME:
            return Date.from_logical(schema, value)
        if name == Time.LOGICAL_NAME:
            return Time.from_logical(schema, value)
        if name == Timestamp.LOGICAL_NAME:
            return Timestamp.from_logical(schema, value)
    except (AttributeError, TypeError) as exc:
        raise DataError(f"{where} is a {type(value).__name__}; expected {(name or '').rsplit('.', 1)[-1]}") from exc
    t = schema.type
    if t is SchemaType.STRUCT:
        if not isinstance(value, Struct):
            raise DataError(f"{where} is a {type(value).__name__}; expected a Struct")
        if value.schema != schema:
            raise DataError(f"{where} is a Struct of another schema ({value.schema!r}; expected {schema!r})")
        if schema.name == JSON_TYPE_ONE_OF:
            for f in schema.fields:
                member = value.get(f.name)
                if member is not None:
                    return connect_to_json_value(f.schema, member, where, numeric)
            return connect_to_json_value(schema, None, where, numeric)
        return {f.name: connect_to_json_value(f.schema, value.get(f.name), field_path(where, f.name), numeric)
                for f in schema.fields}
    if t is SchemaType.ARRAY:
        if not isinstance(value, (list, tuple)):
            raise DataError(f"{where} is a {type(value).__name__}; expected ARRAY (a list)")
        assert schema.value_schema is not None
        return [connect_to_json_value(schema.value_schema, v, item_path(where, i), numeric) for i, v in enumerate(value)]
    if t is SchemaType.MAP:
        if not isinstance(value, Mapping):
            raise DataError(f"{where} is a {type(value).__name__}; expected MAP (a dict)")
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        if ks.type is SchemaType.STRING and not ks.optional:
            out: dict[str, Any] = {}
            for k, v in value.items():
                if not isinstance(k, str):
                    raise DataError(f"a key of {where} is a {type(k).__name__}; expected STRING")
                out[k] = connect_to_json_value(vs, v, item_path(where, repr(k)), numeric)
            return out
        return [{KEY_FIELD: connect_to_json_value(ks, k, f"a key of {where}", numeric),
                 VALUE_FIELD: connect_to_json_value(vs, v, item_path(where, repr(k)), numeric)} for k, v in value.items()]
    if t is SchemaType.BYTES:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataError(f"{where} is a {type(value).__name__}; expected BYTES")
        return base64.b64encode(bytes(value)).decode("ascii")
    validate_value(_non_optional(schema), value, where)
    params = schema.parameters or {}
    if t is SchemaType.STRING and JSON_TYPE_ENUM in params:
        symbols = [v for k, v in params.items() if k.startswith(JSON_TYPE_ENUM + ".")]
        if value not in symbols:
            raise DataError(f"{where} is {value!r}, not one of the enum's symbols ({', '.join(symbols)})")
    return float(value) if t in _FLOAT_NAMES else value



# -- JSON Schema -> Connect schema -------------------------------------------------------------------------------

def json_schema_to_connect(document: Any, version: int | None = None, optional_for_nonrequired: bool = False
                           ) -> Schema:
    """The Connect schema of a JSON Schema document (Confluent's ``toConnectSchema``); ``version`` (the registry
    version) is the root's version unless it carries ``connect.version``."""
    return _Reader(document, optional_for_nonrequired).schema(document, version, False)


class _Reader:
    def __init__(self, root: Any, optional_for_nonrequired: bool) -> None:
        self.root = root
        self.optional_for_nonrequired = optional_for_nonrequired
        self.resolving: list[str] = []

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise DataError(f"the JSON Schema refers to {ref!r}; only references inside the schema (#/...) are "
                            "supported")
        node = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise DataError(f"the JSON Schema reference {ref!r} points at nothing")
        return node

    def schema(self, doc: Any, version: int | None, force_optional: bool) -> Schema:
        if doc is True or doc == {} or not isinstance(doc, dict):
            raise DataError(f"a JSON Schema without a type ({doc!r}) has no Connect schema (Confluent reads it "
                            "as its Variant type, which is not supported here)")
        if "$ref" in doc:
            ref = doc["$ref"]
            if ref in self.resolving:
                raise DataError(f"the JSON Schema reference {ref!r} is recursive; a Connect schema cannot be")
            self.resolving.append(ref)
            try:
                return self.schema(self.resolve(ref), version, force_optional)
            finally:
                self.resolving.pop()
        if "allOf" in doc:
            raise DataError("JSON Schema 'allOf' is not supported by this converter")
        subs = doc.get("oneOf", doc.get("anyOf"))
        if subs is None and isinstance(doc.get("type"), list):
            base = {k: v for k, v in doc.items() if k != "type"}
            subs = [{"type": "null"} if t == "null" else {**base, "type": t} for t in doc["type"]]
            if len(subs) == 1:
                return self.schema(subs[0], version, force_optional)
        if subs is not None:
            return self.union(doc, subs, version, force_optional)
        builder = self.builder(doc)
        if doc.get("title") is not None and builder._name is None:
            builder.name(str(doc["title"]))
        connect_version = doc.get(CONNECT_VERSION)
        if connect_version is not None:
            builder.version(int(connect_version))
        elif version is not None:
            builder.version(version)
        if doc.get("description") is not None:
            builder.doc(str(doc["description"]))
        params = doc.get(CONNECT_PARAMETERS)
        if isinstance(params, dict):
            builder.parameters({str(k): str(v) for k, v in params.items()})
        if force_optional:
            builder.optional()
        if "default" in doc and doc["default"] is not None:
            plain = builder.build()
            builder.default_value(json_to_connect_value(plain, doc["default"], "the schema's default"))
        return builder.build()

    def union(self, doc: dict[str, Any], subs: Any, version: int | None, force_optional: bool) -> Schema:
        if not isinstance(subs, list) or not subs:
            raise DataError(f"a JSON Schema oneOf/anyOf needs a list of schemas, got {subs!r}")
        if len(subs) == 1:
            return self.schema(subs[0], version, force_optional)
        non_null = [s for s in subs if not _is_null(s)]
        if len(subs) == 2 and len(non_null) == 1:
            return self.schema(non_null[0], version, True)
        builder = SchemaBuilder.struct().name(JSON_TYPE_ONE_OF)
        for i, sub in enumerate(non_null):
            builder.field(f"{JSON_TYPE_ONE_OF}.field.{i}", self.schema(sub, None, True))
        if len(non_null) < len(subs) or force_optional:
            builder.optional()
        return builder.build()

    def builder(self, doc: dict[str, Any]) -> SchemaBuilder:
        if "enum" in doc or "const" in doc:
            symbols = doc["enum"] if "enum" in doc else [doc["const"]]
            b = SchemaBuilder.string().parameter(JSON_TYPE_ENUM, "")
            for s in symbols:
                text = "<NULL>" if s is None else (s if isinstance(s, str) else _json_text(s))
                b.parameter(f"{JSON_TYPE_ENUM}.{text}", text)
            return b
        jtype = doc.get("type")
        connect_type = doc.get(CONNECT_TYPE)
        if jtype == "boolean":
            return SchemaBuilder.bool()
        if jtype in ("integer", "number"):
            if connect_type is None:
                return SchemaBuilder(SchemaType.INT64 if jtype == "integer" else SchemaType.FLOAT64)
            if connect_type not in _NUMBER_TYPES:
                raise DataError(f"unsupported connect.type {connect_type!r} for a JSON {jtype}")
            return SchemaBuilder(_NUMBER_TYPES[connect_type])
        if jtype == "string":
            return SchemaBuilder.bytes() if connect_type == "bytes" else SchemaBuilder.string()
        if jtype == "array":
            items = doc.get("items")
            if not isinstance(items, dict):
                raise DataError("a JSON Schema array without a single 'items' schema has no Connect schema")
            if connect_type == "map":
                item = self.deref(items)
                props = item.get("properties", {}) if item.get("type") == "object" else {}
                if KEY_FIELD in props and VALUE_FIELD in props:
                    return SchemaBuilder.map(self.schema(props[KEY_FIELD], None, False),
                                             self.schema(props[VALUE_FIELD], None, False))
            return SchemaBuilder.array(self.schema(items, None, False))
        if jtype == "object":
            if connect_type == "map":
                values = doc.get("additionalProperties")
                if not isinstance(values, dict):
                    raise DataError("a JSON Schema map (connect.type map) needs an additionalProperties schema")
                return SchemaBuilder.map(Schema.STRING_SCHEMA, self.schema(values, None, False))
            b = SchemaBuilder.struct()
            props = doc.get("properties") or {}
            required = set(doc.get("required") or ())
            order = sorted(enumerate(props.items()), key=lambda p: (_index(p[1][1], p[0]), p[0]))
            for _, (name, sub) in order:
                optional = self.optional_for_nonrequired and name not in required
                b.field(name, self.schema(sub, None, optional))
            return b
        raise DataError(f"unsupported JSON Schema type {jtype!r}")

    def deref(self, doc: Any) -> Any:
        while isinstance(doc, dict) and "$ref" in doc:
            doc = self.resolve(doc["$ref"])
        return doc


def _is_null(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("type") == "null"


def _index(doc: Any, position: int) -> int:
    index = doc.get(CONNECT_INDEX) if isinstance(doc, dict) else None
    return index if isinstance(index, int) else position


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# -- JSON value -> Connect value ---------------------------------------------------------------------------------

class ExactFloat(float):
    """A JSON number with a fraction or exponent, as a ``float`` (what JSON Schema validators expect) that keeps its
    text, so a ``Decimal`` read from it has every digit the writer wrote."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> ExactFloat:
        number = super().__new__(cls, text)
        number.text = text
        return number


_DECODER = msgspec.json.Decoder(float_hook=ExactFloat)


def decode_json(data: bytes | str) -> Any:
    """JSON text as Python values, numbers with a fraction as :class:`ExactFloat`; :class:`DataError` if it is
    not JSON."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise DataError(f"not valid JSON ({exc})") from exc


_MISSING: Any = object()


def json_to_connect_value(schema: Schema, value: Any, where: str = "the value") -> Any:
    """A JSON value (as decoded, numbers possibly ``decimal.Decimal``) as the Connect value of ``schema``
    (Confluent's ``toConnectData``); raises :class:`DataError` naming ``where`` and what was expected."""
    if value is None or value is _MISSING:
        if schema.default is not None:
            return schema.default
        if schema.optional:
            return None
        state = "missing" if value is _MISSING else "null"
        raise DataError(f"{where} is {state} but its schema is not optional and has no default (expected "
                        f"{schema.name or schema.type.name})")
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        return _read_decimal(schema, value, where)
    if name in (Date.LOGICAL_NAME, Time.LOGICAL_NAME, Timestamp.LOGICAL_NAME):
        n = _integral(value, where, name.rsplit(".", 1)[-1])
        try:
            return _TIME_TYPES[name].to_logical(schema, n)
        except (OverflowError, ValueError) as exc:
            raise DataError(f"{where} is {n}, out of the range of {name.rsplit('.', 1)[-1]}") from exc
    t = schema.type
    if t is SchemaType.BOOLEAN:
        if not isinstance(value, bool):
            raise DataError(f"{where} is {_kind(value)}; expected BOOLEAN")
        return value
    if t in _INT_NAMES:
        n = _integral(value, where, t.name)
        validate_value(_non_optional(schema), n, where)
        return n
    if t in _FLOAT_NAMES:
        if isinstance(value, bool) or not isinstance(value, (int, float, _decimal.Decimal)):
            raise DataError(f"{where} is {_kind(value)}; expected {t.name}")
        return float(value)
    if t is SchemaType.STRING:
        if not isinstance(value, str):
            raise DataError(f"{where} is {_kind(value)}; expected STRING")
        return value
    if t is SchemaType.BYTES:
        return _base64(value, where)
    if t is SchemaType.ARRAY:
        if not isinstance(value, list):
            raise DataError(f"{where} is {_kind(value)}; expected ARRAY (a JSON array)")
        assert schema.value_schema is not None
        return [json_to_connect_value(schema.value_schema, v, item_path(where, i)) for i, v in enumerate(value)]
    if t is SchemaType.MAP:
        return _read_map(schema, value, where)
    return _read_struct(schema, value, where)


def _read_map(schema: Schema, value: Any, where: str) -> dict[Any, Any]:
    ks, vs = schema.key_schema, schema.value_schema
    assert ks is not None and vs is not None
    if ks.type is SchemaType.STRING and not ks.optional:
        if not isinstance(value, dict):
            raise DataError(f"{where} is {_kind(value)}; expected a map with string keys (a JSON object)")
        return {k: json_to_connect_value(vs, v, item_path(where, repr(k))) for k, v in value.items()}
    if not isinstance(value, list):
        raise DataError(f"{where} is {_kind(value)}; expected a map (a JSON array of key/value objects)")
    out: dict[Any, Any] = {}
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or len(entry) != 2 or KEY_FIELD not in entry or VALUE_FIELD not in entry:
            raise DataError(f"{item_path(where, i)} is not a map entry (expected an object of 'key' and 'value')")
        key = json_to_connect_value(ks, entry[KEY_FIELD], f"a key of {where}")
        out[key] = json_to_connect_value(vs, entry[VALUE_FIELD], item_path(where, repr(key)))
    return out


def _read_struct(schema: Schema, value: Any, where: str) -> Struct:
    if schema.name == JSON_TYPE_ONE_OF:
        best: tuple[int, Any] | None = None
        for f in schema.fields:
            if _simple_match(f.schema, value):
                return Struct(schema).put(f.name, json_to_connect_value(f.schema, value, where))
            score = _struct_match(f.schema, value)
            if score and (best is None or score > best[0]):
                best = (score, f)
        if best is None:
            raise DataError(f"{where} matches none of the schemas of its oneOf")
        f = best[1]
        return Struct(schema).put(f.name, json_to_connect_value(f.schema, value, where))
    if not isinstance(value, dict):
        raise DataError(f"{where} is {_kind(value)}; expected a struct (a JSON object)")
    struct = Struct(schema)
    for f in schema.fields:
        v = json_to_connect_value(f.schema, value.get(f.name, _MISSING), field_path(where, f.name))
        if v is not None:
            struct.put(f.name, v)
    return struct


def _simple_match(schema: Schema, value: Any) -> bool:
    t = schema.type
    if t in _INT_NAMES:
        return _is_integral(value)
    if t in _FLOAT_NAMES:
        return isinstance(value, (int, float, _decimal.Decimal)) and not isinstance(value, bool)
    if t is SchemaType.BOOLEAN:
        return isinstance(value, bool)
    if t is SchemaType.STRING:
        return isinstance(value, str)
    if t is SchemaType.BYTES:
        return isinstance(value, _decimal.Decimal)
    if t is SchemaType.ARRAY:
        return isinstance(value, list)
    if t is SchemaType.MAP:
        return isinstance(value, (dict, list))
    return False


def _struct_match(schema: Schema, value: Any) -> int:
    if schema.type is not SchemaType.STRUCT or not isinstance(value, dict):
        return 0
    common = [f for f in schema.fields if f.name in value]
    return len(common) + sum(_struct_match(f.schema, value[f.name]) for f in common)


def _is_integral(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, _decimal.Decimal) and value == value.to_integral_value()
                                      and "." not in str(value))


def _integral(value: Any, where: str, expected: str) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(_decimal.Decimal(getattr(value, "text", None) or repr(value)))  # 1.0, 1e3: "integer" in JSON Schema
    if not _is_integral(value):
        raise DataError(f"{where} is {_kind(value)}; expected an integer ({expected})")
    return int(value)


def _read_decimal(schema: Schema, value: Any, where: str) -> _decimal.Decimal:
    scale = Decimal.scale(schema)
    if isinstance(value, str):
        return Decimal.to_logical(schema, _base64(value, where))
    if isinstance(value, bool) or not isinstance(value, (int, float, _decimal.Decimal)):
        raise DataError(f"{where} is {_kind(value)}; expected a Decimal (a number or base64 bytes)")
    number = _decimal.Decimal(getattr(value, "text", None) or repr(value)) if isinstance(value, float) else \
        _decimal.Decimal(value)
    exact = number.quantize(_decimal.Decimal(1).scaleb(-scale), context=_decimal.Context(prec=1000))
    if exact != number:
        raise DataError(f"{where} is {value}, which does not fit the Decimal's scale {scale} without rounding")
    return exact


def _base64(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise DataError(f"{where} is {_kind(value)}; expected BYTES (base64 text)")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DataError(f"{where} is not valid base64 text (expected BYTES)") from exc


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float, _decimal.Decimal)):
        return f"the number {value}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


__all__ = ["ExactFloat", "connect_to_json_schema", "connect_to_json_value", "decode_json", "json_schema_to_connect",
           "json_to_connect_value"]
