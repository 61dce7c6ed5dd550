"""Connect schemas and values <-> Avro schemas and the values fastavro reads and writes (Confluent's ``AvroData``).

:class:`AvroData` holds the one mapping, with caches for both directions. Avro schemas are their JSON form as Python
(dicts, lists, strings), as the registry stores them and fastavro parses them.

Connect -> Avro (:meth:`AvroData.from_connect_schema`), as Confluent's ``AvroData.fromConnectSchema`` with
``connect.meta.data=true``:

- INT8 / INT16 -> ``int`` with ``"connect.type": "int8"`` / ``"int16"``; INT32 ``int``, INT64 ``long``, FLOAT32
  ``float``, FLOAT64 ``double``, BOOLEAN ``boolean``, STRING ``string``, BYTES ``bytes``.
- STRUCT -> ``record`` named after the schema (namespace and name split at the last dot), or
  ``io.confluent.connect.avro.ConnectDefault`` when unnamed; a field's default becomes the Avro field default, an
  optional field without one defaults to null.
- optional -> a union with ``"null"`` first (default null); an optional schema with a non-null default puts
  ``"null"`` second, so the default can be the value's (as Avro requires of the first branch).
- ARRAY -> ``array``; MAP with (required) string keys -> ``map``; any other MAP -> an ``array`` of
  ``io.confluent.connect.avro.MapEntry`` records with ``key`` and ``value`` fields.
- Decimal -> ``bytes`` with ``"logicalType": "decimal"``, ``scale`` and ``precision`` (from the
  ``connect.decimal.precision`` parameter, else 64 as Confluent); Date -> ``int``/``date``; Time ->
  ``int``/``time-millis``; Timestamp -> ``long``/``timestamp-millis``.
- every non-union schema carries its metadata: ``connect.name``, ``connect.version``, ``connect.doc``,
  ``connect.parameters``, ``connect.default`` (the default in Avro's JSON encoding of the type).

Avro -> Connect (:meth:`AvroData.to_connect_schema`) reverses that and reads schemas written by others as Confluent
does: ``connect.*`` properties win; a record, enum or fixed is named by its full name (``ConnectDefault`` names mean
unnamed); a union of null and one type is an optional schema; any other union is a STRUCT named
``io.confluent.connect.avro.Union`` with one optional field per branch (named by the branch's simple name, or its
type otherwise); an ``enum`` is a STRING with parameters ``io.confluent.connect.avro.Enum`` (the enum's full name)
and ``io.confluent.connect.avro.Enum.<symbol>``; a ``fixed`` is plain BYTES (a ``decimal`` on a fixed is a Decimal);
an array of ``MapEntry`` records is a MAP; ``decimal`` gives a Decimal (with ``connect.decimal.precision`` when the
precision is not 64); ``date``, ``time-millis``, ``timestamp-millis`` the Connect logical types. Other logical types
keep their underlying type (``timestamp-micros`` an INT64 of microseconds, ``uuid`` a STRING). A field default becomes
the Connect field schema's default (flagged with the parameter ``io.confluent.connect.avro.field.default``, so that
writing it back does not add ``connect.default``); a record's doc and its fields' docs become the parameters
``io.confluent.connect.avro.record.doc`` and ``io.confluent.connect.avro.field.doc.<field>`` (and go back to the
Avro docs on the way out); Avro properties named ``avro*`` become parameters of the same name and back.

Values: fastavro itself turns ``decimal``, ``date``, ``time-millis`` and ``timestamp-millis`` into
``decimal.Decimal``, ``datetime.date``, ``datetime.time`` and UTC ``datetime.datetime``, the Python values of the
Connect logical types, so those pass through both ways. :meth:`AvroData.writer` gives, per Connect schema, a function
from a Connect value to the datum fastavro writes (a :class:`Struct` to a dict, non-string-key maps to entry
lists); :meth:`AvroData.reader` the reverse, from what fastavro read with ``return_record_name`` /
``return_named_type`` (with their ``_override``: a ``(name, value)`` pair only in unions of several named types).
Both are built once per schema and cached (``schemas.cache.config`` entries, least recently used dropped).

Where this differs from Confluent: two different unnamed structs nested in one schema are named ``ConnectDefault``,
``ConnectDefault2``, ... (the same name twice would make one silently stand for the other); Connect schemas
cannot be recursive here (a recursive Avro record is refused with a :class:`DataError`; Confluent wraps the
cycle).
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import json
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any

from connect_runtime.api.data import (
    LOGICAL_TYPES,
    Date,
    Decimal,
    Field,
    Schema,
    SchemaBuilder,
    SchemaType,
    Struct,
    Time,
    Timestamp,
    _struct_from,
    validate_value,
)
from connect_runtime.api.errors import DataError

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_SCHEMA_NAME = "ConnectDefault"
DEFAULT_SCHEMA_FULL_NAME = f"{NAMESPACE}.{DEFAULT_SCHEMA_NAME}"
MAP_ENTRY_TYPE_NAME = "MapEntry"
UNION_NAME = f"{NAMESPACE}.Union"
ENUM_PARAM = f"{NAMESPACE}.Enum"
CONNECT_NAME = "connect.name"
CONNECT_DOC = "connect.doc"
CONNECT_VERSION = "connect.version"
CONNECT_DEFAULT = "connect.default"
CONNECT_PARAMETERS = "connect.parameters"
CONNECT_TYPE = "connect.type"
CONNECT_INTERNAL_TYPE = "connect.internal.type"
RECORD_DOC = f"{NAMESPACE}.record.doc"
FIELD_DOC_PREFIX = f"{NAMESPACE}.field.doc."
ENUM_DOC_PREFIX = f"{NAMESPACE}.enum.doc."
ENUM_DEFAULT_PREFIX = f"{NAMESPACE}.enum.default."
FIELD_DEFAULT_FLAG = f"{NAMESPACE}.field.default"
PRECISION_PARAM = "connect.decimal.precision"
PRECISION_DEFAULT = 64

AvroSchema = Any
"""An Avro schema in its JSON form: a type name, a dict, or a list (a union)."""
Convert = Callable[[Any], Any]

_PRIMITIVE_AVRO = {
    SchemaType.INT8: "int", SchemaType.INT16: "int", SchemaType.INT32: "int", SchemaType.INT64: "long",
    SchemaType.FLOAT32: "float", SchemaType.FLOAT64: "double", SchemaType.BOOLEAN: "boolean",
    SchemaType.STRING: "string", SchemaType.BYTES: "bytes",
}
_PRIMITIVE_CONNECT = {
    "int": SchemaType.INT32, "long": SchemaType.INT64, "float": SchemaType.FLOAT32, "double": SchemaType.FLOAT64,
    "boolean": SchemaType.BOOLEAN, "string": SchemaType.STRING, "bytes": SchemaType.BYTES,
}
_LOGICAL_AVRO = {
    Date.LOGICAL_NAME: "date", Time.LOGICAL_NAME: "time-millis", Timestamp.LOGICAL_NAME: "timestamp-millis",
}
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)


def _identity(v: Any) -> Any:
    return v


def split_name(full: str) -> tuple[str | None, str]:
    """``("shop", "Order")`` for ``shop.Order``; ``(None, "Order")`` for ``Order``."""
    ns, _, name = full.rpartition(".")
    return (ns or None), name


class _Lru(OrderedDict[Any, Any]):
    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def put(self, key: Any, value: Any) -> Any:
        self[key] = value
        if len(self) > self.capacity:
            self.popitem(last=False)
        return value


class _FromConnect:
    """One Connect -> Avro conversion: the records already defined (a second use refers to them by name)."""

    def __init__(self, meta: bool) -> None:
        self.meta = meta
        self.defined: dict[Schema, str] = {}
        self.unnamed = 0

    def schema(self, s: Schema, in_union: bool = False) -> AvroSchema:
        base = self.base(s)
        if s.optional and not in_union:
            return [base, "null"] if s.default is not None else ["null", base]
        return base

    def base(self, s: Schema) -> AvroSchema:
        if s.type is SchemaType.STRUCT and s.name == UNION_NAME:
            branches = ["null"] if s.optional else []
            return branches + [self.base(f.schema) for f in s.fields]
        required = _required(s)
        if s.type is SchemaType.STRUCT and required in self.defined:
            return self.defined[required]
        out: dict[str, Any]
        t = s.type
        if t is SchemaType.STRUCT:
            if s.name:
                ns, name = split_name(s.name)
            else:
                self.unnamed += 1
                ns, name = NAMESPACE, DEFAULT_SCHEMA_NAME + (str(self.unnamed) if self.unnamed > 1 else "")
            full = f"{ns}.{name}" if ns else name
            self.defined[required] = full
            out = {"type": "record", "name": name}
            if ns:
                out["namespace"] = ns
            params = s.parameters or {}
            if params.get(RECORD_DOC) is not None:
                out["doc"] = params[RECORD_DOC]
            out["fields"] = [self.field(f.name, f.schema, params.get(FIELD_DOC_PREFIX + f.name)) for f in s.fields]
        elif t is SchemaType.ARRAY:
            assert s.value_schema is not None
            out = {"type": "array", "items": self.schema(s.value_schema)}
        elif t is SchemaType.MAP:
            assert s.key_schema is not None and s.value_schema is not None
            if s.key_schema.type is SchemaType.STRING and not s.key_schema.optional:
                out = {"type": "map", "values": self.schema(s.value_schema)}
            else:
                entry: dict[str, Any] = {"type": "record", "name": MAP_ENTRY_TYPE_NAME, "namespace": NAMESPACE}
                if s.name:
                    ns, name = split_name(s.name)
                    entry = {"type": "record", "name": name, **({"namespace": ns} if ns else {}),
                             CONNECT_INTERNAL_TYPE: MAP_ENTRY_TYPE_NAME}
                entry["fields"] = [self.field("key", s.key_schema, None), self.field("value", s.value_schema, None)]
                out = {"type": "array", "items": entry}
        else:
            out = {"type": _PRIMITIVE_AVRO[t]}
            if t is SchemaType.BYTES and s.name == Decimal.LOGICAL_NAME:
                params = s.parameters or {}
                out["logicalType"] = "decimal"
                out["precision"] = int(params.get(PRECISION_PARAM, PRECISION_DEFAULT))
                out["scale"] = Decimal.scale(s)
            elif s.name in _LOGICAL_AVRO:
                out["logicalType"] = _LOGICAL_AVRO[s.name]
            elif t is SchemaType.INT8:
                out[CONNECT_TYPE] = "int8"
            elif t is SchemaType.INT16:
                out[CONNECT_TYPE] = "int16"
        if self.meta:
            if s.doc is not None:
                out[CONNECT_DOC] = s.doc
            if s.version is not None:
                out[CONNECT_VERSION] = s.version
            params = {k: v for k, v in (s.parameters or {}).items() if k != FIELD_DEFAULT_FLAG}
            if params:
                out[CONNECT_PARAMETERS] = params
            if s.default is not None and FIELD_DEFAULT_FLAG not in (s.parameters or {}):
                out[CONNECT_DEFAULT] = default_to_avro(s, s.default)
            if s.name is not None:
                out[CONNECT_NAME] = s.name
        for k, v in (s.parameters or {}).items():
            if k.startswith("avro"):
                out[k] = v
        if len(out) == 1:
            return out["type"]
        return out

    def field(self, name: str, s: Schema, doc: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "type": self.schema(s)}
        if doc is not None:
            out["doc"] = doc
        if s.default is not None:
            out["default"] = default_to_avro(s, s.default)
        elif s.optional:
            out["default"] = None
        return out


def _required(s: Schema) -> Schema:
    return s if not s.optional and s.default is None else replace(s, optional=False, default=None)


_UNSET: Any = object()


def replace(s: Schema, *, optional: bool = _UNSET, default: Any = _UNSET, name: str | None = _UNSET,
            version: int | None = _UNSET, doc: str | None = _UNSET, parameters: Mapping[str, str] | None = _UNSET,
            ) -> Schema:
    """``s`` with the given properties changed (its type and nested schemas kept)."""
    return Schema(s.type, s.optional if optional is _UNSET else optional, s.default if default is _UNSET else default,
                  s.name if name is _UNSET else name, s.version if version is _UNSET else version,
                  s.doc if doc is _UNSET else doc, s.parameters if parameters is _UNSET else parameters, s.fields,
                  s.key_schema, s.value_schema)


def default_to_avro(s: Schema, value: Any) -> Any:
    """A Connect default in Avro's JSON encoding of the schema's type (bytes as ISO-8859-1 text, as Avro)."""
    if value is None:
        return None
    logical = LOGICAL_TYPES.get(s.name) if s.name else None
    if logical is not None:  # Decimal's bytes as ISO-8859-1 text; the time types' ints as they are
        out = logical.from_logical(s, value)
        return out.decode("iso-8859-1") if isinstance(out, bytes) else out
    t = s.type
    if t is SchemaType.BYTES:
        return bytes(value).decode("iso-8859-1")
    if t is SchemaType.ARRAY:
        assert s.value_schema is not None
        return [default_to_avro(s.value_schema, v) for v in value]
    if t is SchemaType.MAP:
        assert s.key_schema is not None and s.value_schema is not None
        if s.key_schema.type is SchemaType.STRING and not s.key_schema.optional:
            return {k: default_to_avro(s.value_schema, v) for k, v in value.items()}
        return [{"key": default_to_avro(s.key_schema, k), "value": default_to_avro(s.value_schema, v)}
                for k, v in value.items()]
    if t is SchemaType.STRUCT:
        return {f.name: default_to_avro(f.schema, value[f.name]) for f in s.fields}
    if t in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return float(value)
    return value


class _ToConnect:
    """One Avro -> Connect conversion: named types seen so far (by full name), the enclosing namespace."""

    def __init__(self) -> None:
        self.named: dict[str, Any] = {}
        self.building: set[str] = set()

    def full_name(self, node: Mapping[str, Any], ns: str | None) -> tuple[str, str | None]:
        name = node["name"]
        if "." in name:
            return name, name.rpartition(".")[0]
        space = node.get("namespace", ns) or None
        return (f"{space}.{name}" if space else name), space

    def schema(self, node: AvroSchema, ns: str | None, optional: bool = False, default: Any = None,
               has_default: bool = False) -> Schema:
        if isinstance(node, list):
            return self.union(node, ns, optional, default, has_default)
        if isinstance(node, str):
            if node in _PRIMITIVE_CONNECT:
                node = {"type": node}
            elif node == "null":
                raise DataError("an Avro \"null\" schema outside a union has no Connect type")
            else:
                full = node if "." in node or ns is None else f"{ns}.{node}"
                if full not in self.named and node in self.named:
                    full = node
                if full in self.building:
                    raise DataError(f"the Avro schema {full} refers to itself; Connect schemas cannot be recursive")
                if full not in self.named:
                    raise DataError(f"the Avro schema refers to {node!r}, which it does not define")
                node, ns = self.named[full]
        base = self.base(node, ns)
        props = node if isinstance(node, dict) else {}
        params = dict(base.parameters or {})
        for k, v in (props.get(CONNECT_PARAMETERS) or {}).items():
            params[k] = str(v)
        for k, v in props.items():
            if k.startswith("avro"):
                params[k] = v if isinstance(v, str) else json.dumps(v)
        connect_default = props.get(CONNECT_DEFAULT)
        if has_default and default is not None and connect_default is None:
            params[FIELD_DEFAULT_FLAG] = "true"
        shell = replace(base, optional=optional or base.optional, name=props.get(CONNECT_NAME, base.name),
                        version=int(props[CONNECT_VERSION]) if CONNECT_VERSION in props else base.version,
                        doc=props.get(CONNECT_DOC, base.doc), parameters=params or None)
        if has_default and default is not None:
            return replace(shell, default=default_to_connect(shell, default))
        if connect_default is not None:
            return replace(shell, default=default_to_connect(shell, connect_default))
        return shell

    def union(self, branches: list[Any], ns: str | None, optional: bool, default: Any, has_default: bool) -> Schema:
        others = [b for b in branches if b != "null"]
        nullable = len(others) < len(branches)
        if nullable and len(others) == 1:
            return self.schema(others[0], ns, True, default, has_default)
        builder = SchemaBuilder.struct().name(UNION_NAME)
        for b in others:
            builder.field(self.branch_name(b, ns), self.schema(b, ns, optional=True))
        if nullable or optional:
            builder.optional()
        union = builder.build()
        if has_default and default is not None:  # an Avro union's default is of its first branch
            return replace(union, default=default_to_connect(union, default))
        return union

    def branch_name(self, b: AvroSchema, ns: str | None) -> str:
        """Confluent's field name of a union branch: a record's or enum's simple name, else the Avro type."""
        resolved = self.resolve(b, ns) if isinstance(b, str) else None
        node = resolved[0] if resolved is not None else b
        if isinstance(node, dict):
            if node.get("type") in ("record", "enum"):
                return split_name(node["name"])[1]
            return str(node["type"])
        return str(node)

    def base(self, node: dict[str, Any], ns: str | None) -> Schema:
        t = node["type"]
        if isinstance(t, (list, dict)):  # {"type": {...}} wrapping
            return self.schema(t, ns)
        logical = node.get("logicalType")
        if t in ("record", "enum", "fixed"):
            full, space = self.full_name(node, ns)
            unnamed = full.startswith(DEFAULT_SCHEMA_FULL_NAME)
            if t == "record":
                self.named[full] = (node, space)
                if self.is_map_entry(node, full):
                    return self.map_entry(node, space).build()
                self.building.add(full)
                b = SchemaBuilder.struct()
                if node.get("doc") is not None:
                    b.parameter(RECORD_DOC, node["doc"])
                for f in node["fields"]:
                    if f.get("doc") is not None:
                        b.parameter(FIELD_DOC_PREFIX + f["name"], f["doc"])
                    b.field(f["name"], self.schema(f["type"], space, default=f.get("default"),
                                                   has_default="default" in f))
                self.building.discard(full)
            elif t == "enum":
                self.named[full] = (node, space)
                b = SchemaBuilder.string()
                simple = split_name(full)[1]
                if node.get("doc") is not None:
                    b.parameter(ENUM_DOC_PREFIX + simple, node["doc"])
                if node.get("default") is not None:
                    b.parameter(ENUM_DEFAULT_PREFIX + simple, node["default"])
                b.parameter(ENUM_PARAM, full)
                for symbol in node["symbols"]:
                    b.parameter(f"{ENUM_PARAM}.{symbol}", symbol)
            else:  # fixed: bytes (Confluent keeps neither its name nor its size)
                self.named[full] = (node, space)
                if logical == "decimal":
                    return self.decimal(node).build()
                return Schema(SchemaType.BYTES)
            if not unnamed:
                b.name(full)
            return b.build()
        if t == "array":
            items = node["items"]
            entry = self.resolve(items, ns)
            if entry is not None and entry[0].get("type") == "record" and \
                    self.is_map_entry(entry[0], self.full_name(entry[0], entry[1])[0]):
                return self.schema(items, ns)
            return SchemaBuilder.array(self.schema(items, ns)).build()
        if t == "map":
            return SchemaBuilder.map(Schema.STRING_SCHEMA, self.schema(node["values"], ns)).build()
        if logical == "decimal" and t == "bytes":
            return self.decimal(node).build()
        if logical == "date" and t == "int":
            return Date.schema()
        if logical == "time-millis" and t == "int":
            return Time.schema()
        if logical == "timestamp-millis" and t == "long":
            return Timestamp.schema()
        if t not in _PRIMITIVE_CONNECT:  # {"type": "shop.Order"}: a reference to a named type
            return self.schema(t, ns)
        st = _PRIMITIVE_CONNECT[t]
        connect_type = node.get(CONNECT_TYPE)
        if st is SchemaType.INT32 and connect_type == "int8":
            st = SchemaType.INT8
        elif st is SchemaType.INT32 and connect_type == "int16":
            st = SchemaType.INT16
        return Schema(st)

    def resolve(self, node: AvroSchema, ns: str | None) -> tuple[dict[str, Any], str | None] | None:
        if isinstance(node, dict):
            return node, ns
        if isinstance(node, str) and node not in _PRIMITIVE_CONNECT:
            full = node if "." in node or ns is None else f"{ns}.{node}"
            return self.named.get(full) or self.named.get(node)
        return None

    @staticmethod
    def is_map_entry(node: Mapping[str, Any], full: str) -> bool:
        return full == f"{NAMESPACE}.{MAP_ENTRY_TYPE_NAME}" or node.get(CONNECT_INTERNAL_TYPE) == MAP_ENTRY_TYPE_NAME

    def map_entry(self, node: Mapping[str, Any], ns: str | None) -> SchemaBuilder:
        fields = {f["name"]: f for f in node["fields"]}
        if set(fields) != {"key", "value"}:
            raise DataError(f"a {MAP_ENTRY_TYPE_NAME} record has the fields key and value, not {sorted(fields)}")
        key = self.schema(fields["key"]["type"], ns)
        value = self.schema(fields["value"]["type"], ns)
        return SchemaBuilder.map(key, value)

    @staticmethod
    def decimal(node: Mapping[str, Any]) -> SchemaBuilder:
        if not isinstance(node.get("scale"), int):
            raise DataError("an Avro decimal needs an integer scale")
        b = Decimal.builder(node["scale"])
        precision = node.get("precision")
        if precision is not None and int(precision) != PRECISION_DEFAULT:  # as Confluent: only when not 64
            b.parameter(PRECISION_PARAM, str(int(precision)))
        return b


def default_to_connect(s: Schema, value: Any) -> Any:
    """A default in Avro's JSON encoding, as a Connect value of ``s``."""
    if value is None:
        return None
    logical = LOGICAL_TYPES.get(s.name) if s.name else None
    if logical is not None:
        return logical.to_logical(s, value.encode("iso-8859-1") if isinstance(value, str) else value)
    t = s.type
    if t is SchemaType.BYTES:
        return value.encode("iso-8859-1")
    if t is SchemaType.ARRAY:
        assert s.value_schema is not None
        return [default_to_connect(s.value_schema, v) for v in value]
    if t is SchemaType.MAP:
        assert s.key_schema is not None and s.value_schema is not None
        if isinstance(value, list):
            return {default_to_connect(s.key_schema, e["key"]): default_to_connect(s.value_schema, e["value"])
                    for e in value}
        return {k: default_to_connect(s.value_schema, v) for k, v in value.items()}
    if t is SchemaType.STRUCT:
        if s.name == UNION_NAME:  # an Avro union's default is of its first branch
            first = s.fields[0]
            return Struct(s).put(first.name, default_to_connect(first.schema, value))
        out = Struct(s)
        for f in s.fields:
            if f.name in value:
                out.put(f.name, default_to_connect(f.schema, value[f.name]))
        return out
    if t in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return float(value)
    return value


class AvroData:
    """The Connect <-> Avro mapping (see the module docstring), with caches for schemas and value converters."""

    def __init__(self, cache_size: int = 1000, connect_meta_data: bool = True) -> None:
        self.connect_meta_data = connect_meta_data
        self._to_avro = _Lru(cache_size)
        self._to_connect = _Lru(cache_size)
        self._writers = _Lru(cache_size)
        self._readers = _Lru(cache_size)

    def from_connect_schema(self, schema: Schema) -> AvroSchema:
        """The Avro schema (JSON form) of a Connect schema; cached."""
        found = self._to_avro.get(schema)
        if found is None:
            found = self._to_avro.put(schema, _FromConnect(self.connect_meta_data).schema(schema))
        return found

    def to_connect_schema(self, avro: AvroSchema, key: Any = None, version: int | None = None) -> Schema:
        """The Connect schema of an Avro schema (JSON form); cached under ``key`` (e.g. the registry's schema id)
        when given. ``version`` (the registry version) becomes the schema's version unless ``connect.version``
        says otherwise, as Confluent's converter does."""
        if key is not None:
            found = self._to_connect.get(key)
            if found is not None:
                return found  # type: ignore[no-any-return]
        schema = _ToConnect().schema(avro, None)
        if version is not None and schema.version is None:
            schema = replace(schema, version=version)
        if key is not None:
            self._to_connect.put(key, schema)
        return schema

    def writer(self, schema: Schema) -> Convert:
        """Connect value of ``schema`` -> the datum fastavro writes for :meth:`from_connect_schema`; cached."""
        found = self._writers.get(schema)
        if found is None:
            found = self._writers.put(schema, _writer(schema))
        return found  # type: ignore[no-any-return]

    def reader(self, schema: Schema, avro: AvroSchema = None) -> Convert:
        """What fastavro read with the Avro schema ``avro`` (JSON form; see the module docstring) -> the Connect
        value of ``schema``, its :meth:`to_connect_schema`; cached. Without ``avro`` every INT32 / INT64 / STRING
        value is checked for a datetime, time or UUID fastavro may have made of it."""
        key = (schema, None if avro is None else json.dumps(avro, sort_keys=True))
        found = self._readers.get(key)
        if found is None:
            found = self._readers.put(key, _reader(schema, avro, None if avro is None else _Nodes(avro)))
        return found  # type: ignore[no-any-return]


# -- value converters, built once per schema ---------------------------------------------------------------------

def _needs_no_change(s: Schema) -> bool:
    t = s.type
    if t is SchemaType.STRUCT:
        return False
    if t is SchemaType.ARRAY:
        assert s.value_schema is not None
        return _needs_no_change(s.value_schema)
    if t is SchemaType.MAP:
        assert s.key_schema is not None and s.value_schema is not None
        return s.key_schema.type is SchemaType.STRING and not s.key_schema.optional and \
            _needs_no_change(s.value_schema)
    return t is not SchemaType.BYTES or s.name == Decimal.LOGICAL_NAME


def _bytes_out(v: Any) -> Any:
    return v if v is None or type(v) is bytes else bytes(v)


def _writer(s: Schema) -> Convert:
    if _needs_no_change(s):
        return _identity
    t = s.type
    if t is SchemaType.BYTES:
        return _bytes_out
    if t is SchemaType.ARRAY:
        assert s.value_schema is not None
        item = _writer(s.value_schema)
        return lambda v: None if v is None else [item(x) for x in v]
    if t is SchemaType.MAP:
        assert s.key_schema is not None and s.value_schema is not None
        value = _writer(s.value_schema)
        if s.key_schema.type is SchemaType.STRING and not s.key_schema.optional:
            return lambda v: None if v is None else {k: value(x) for k, x in v.items()}
        key = _writer(s.key_schema)
        return lambda v: None if v is None else [{"key": key(k), "value": value(x)} for k, x in v.items()]
    if s.name == UNION_NAME:
        return _union_writer(s)
    return _struct_writer(s)


def _struct_writer(s: Schema) -> Convert:
    fields = s.fields
    field_names = tuple(f.name for f in fields)
    defaults = tuple(f.schema.default for f in fields)
    has_defaults = any(d is not None for d in defaults)
    converters = tuple(_writer(f.schema) for f in fields)
    plain = all(c is _identity for c in converters)

    def check(v: Any) -> None:
        if not isinstance(v, Struct):
            raise DataError(f"expected a Struct of schema {s.name or '(unnamed)'}, got a {type(v).__name__}")
        if v.schema is not s and v.schema != s:
            raise DataError(f"the Struct's schema {v.schema!r} is not its field's or record's schema {s!r}")

    if plain and not has_defaults:
        def write(v: Any) -> Any:
            if v is None:
                return None
            if type(v) is not Struct or (v.schema is not s and v.schema != s):
                check(v)
            return dict(zip(field_names, v._values, strict=True))
        return write

    def write_full(v: Any) -> Any:
        if v is None:
            return None
        if type(v) is not Struct or (v.schema is not s and v.schema != s):
            check(v)
        return {n: c(d if x is None else x)
                for n, c, d, x in zip(field_names, converters, defaults, v._values, strict=True)}
    return write_full


def _union_writer(s: Schema) -> Convert:
    branches = []
    for f in s.fields:
        avro = _FromConnect(False).base(f.schema)
        named = None
        if isinstance(avro, dict) and avro.get("type") in ("record", "enum", "fixed"):
            named = f"{avro['namespace']}.{avro['name']}" if avro.get("namespace") else avro["name"]
        branches.append((f.name, _writer(f.schema), named))

    def write(v: Any) -> Any:
        if v is None:
            return None
        for name, conv, named in branches:
            x = v.get(name)
            if x is not None:
                return (named, conv(x)) if named else conv(x)
        return None
    return write


_TIME_LOGICALS = frozenset({"timestamp-micros", "local-timestamp-millis", "local-timestamp-micros", "time-micros"})
"""Logical types fastavro turns into datetimes or times that Connect has no logical type for (INT64 / INT32)."""


def _named_types(node: AvroSchema, ns: str | None, out: dict[str, tuple[Any, str | None]]) -> None:
    """Every named type defined in ``node`` by full name, with the namespace its own references resolve in."""
    if isinstance(node, list):
        for branch in node:
            _named_types(branch, ns, out)
        return
    if not isinstance(node, dict):
        return
    t = node.get("type")
    if t in ("record", "enum", "fixed") and isinstance(node.get("name"), str):
        name = node["name"]
        space = name.rpartition(".")[0] if "." in name else (node.get("namespace", ns) or None)
        full = name if "." in name else (f"{space}.{name}" if space else name)
        out[full] = (node, space)
        for f in node.get("fields", []) if t == "record" else []:
            _named_types(f["type"], space, out)
        return
    if isinstance(t, (dict, list)):
        _named_types(t, ns, out)
    elif t == "array":
        _named_types(node.get("items"), ns, out)
    elif t == "map":
        _named_types(node.get("values"), ns, out)


class _Nodes:
    """Resolves the Avro node (JSON form) under a Connect schema while the reader is built alongside it."""

    def __init__(self, avro: AvroSchema) -> None:
        self.names: dict[str, tuple[Any, str | None]] = {}
        _named_types(avro, None, self.names)

    def resolve(self, node: AvroSchema, ns: str | None) -> tuple[Any, str | None]:
        while True:
            if isinstance(node, list):
                others = [b for b in node if b != "null"]
                if len(others) == 1 and len(node) == 2:
                    node = others[0]
                    continue
                return node, ns
            if isinstance(node, str):
                if node in _PRIMITIVE_CONNECT or node == "null":
                    return {"type": node}, ns
                full = node if "." in node or ns is None else f"{ns}.{node}"
                found = self.names.get(full) or self.names.get(node)
                if found is None:
                    return None, ns
                node, ns = found
                continue
            if isinstance(node, dict) and not isinstance(node.get("type"), str):
                node = node.get("type")
                continue
            if isinstance(node, dict) and node.get("type") not in _COMPLEX_AVRO and node.get("type") not in \
                    _PRIMITIVE_CONNECT:
                node = node.get("type")  # {"type": "shop.Order"}: a reference
                continue
            if isinstance(node, dict) and node.get("type") in ("record", "enum", "fixed"):
                name = node["name"]
                ns = name.rpartition(".")[0] if "." in name else (node.get("namespace", ns) or None)
            return node, ns


_COMPLEX_AVRO = frozenset({"record", "enum", "fixed", "array", "map"})


def _reader(s: Schema, node: AvroSchema, nodes: _Nodes | None, ns: str | None = None) -> Convert:
    """The converter from what fastavro read for ``node`` to the Connect value of ``s`` (``nodes`` None: the Avro
    schema is unknown, and every INT64 / STRING is checked for what fastavro may have turned it into)."""
    if nodes is not None:
        node, ns = nodes.resolve(node, ns)
    t = s.type
    name = s.name
    if t is SchemaType.STRUCT:
        if name == UNION_NAME:
            return _union_reader(s, node if isinstance(node, list) else None, nodes, ns)
        fields = s.fields
        avro_fields = {f["name"]: f["type"] for f in node.get("fields", [])} if isinstance(node, dict) else {}
        getter = itemgetter(*(f.name for f in fields)) if fields else (lambda d: ())
        converters = tuple(_reader(f.schema, avro_fields.get(f.name), nodes if f.name in avro_fields else None, ns)
                           for f in fields)
        if all(c is _identity for c in converters):
            if len(fields) == 1:
                return lambda d: None if d is None else _struct_from(s, [getter(d)])
            return lambda d: None if d is None else _struct_from(s, list(getter(d)))
        if len(fields) == 1:
            only = converters[0]
            return lambda d: None if d is None else _struct_from(s, [only(getter(d))])
        return lambda d: None if d is None else _struct_from(s, [c(x) for c, x in zip(converters, getter(d),
                                                                                        strict=True)])
    if t is SchemaType.ARRAY:
        assert s.value_schema is not None
        is_entries = isinstance(node, dict) and node.get("type") == "array"
        item = _reader(s.value_schema, node["items"] if is_entries else None, nodes if is_entries else None, ns)
        if item is _identity:
            return _identity
        return lambda v: None if v is None else [item(x) for x in v]
    if t is SchemaType.MAP:
        assert s.key_schema is not None and s.value_schema is not None
        if s.key_schema.type is SchemaType.STRING and not s.key_schema.optional and \
                not (isinstance(node, dict) and node.get("type") == "array"):
            known = isinstance(node, dict) and node.get("type") == "map"
            value = _reader(s.value_schema, node["values"] if known else None, nodes if known else None, ns)
            if value is _identity:
                return _identity
            return lambda v: None if v is None else {k: value(x) for k, x in v.items()}
        entry = nodes.resolve(node["items"], ns)[0] if nodes is not None and isinstance(node, dict) and \
            node.get("type") == "array" else None
        entry_fields = {f["name"]: f["type"] for f in entry.get("fields", [])} if isinstance(entry, dict) else {}
        key = _reader(s.key_schema, entry_fields.get("key"), nodes if entry_fields else None, ns)
        value = _reader(s.value_schema, entry_fields.get("value"), nodes if entry_fields else None, ns)
        return lambda v: None if v is None else {key(e["key"]): value(e["value"]) for e in v}
    if name is not None:
        return _identity
    logical = node.get("logicalType") if isinstance(node, dict) else None
    if nodes is None:  # unknown Avro: check every value
        return _int_of_time if t in (SchemaType.INT64, SchemaType.INT32) else _str_of if t is SchemaType.STRING \
            else _identity
    if logical in _TIME_LOGICALS:
        return _int_of_time
    if logical == "uuid":
        return _str_of
    return _identity


def _int_of_time(v: Any) -> Any:
    """A ``long`` read under a logical type Connect has no type for (``timestamp-micros``, ``local-timestamp-*``,
    ``time-micros`` on a long): fastavro gave a datetime or time; Connect's INT64 holds the number again."""
    if v is None or type(v) is int:
        return v
    if isinstance(v, _dt.datetime):
        delta = v - (_EPOCH if v.tzinfo is not None else _EPOCH_NAIVE)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(v, _dt.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return v


def _str_of(v: Any) -> Any:
    return str(v) if isinstance(v, uuid.UUID) else v


_PY_FOR_BRANCH: dict[SchemaType, tuple[type, ...]] = {
    SchemaType.INT8: (int,), SchemaType.INT16: (int,), SchemaType.INT32: (int,), SchemaType.INT64: (int,),
    SchemaType.FLOAT32: (float,), SchemaType.FLOAT64: (float,), SchemaType.BOOLEAN: (bool,),
    SchemaType.STRING: (str,), SchemaType.BYTES: (bytes,), SchemaType.ARRAY: (list,), SchemaType.MAP: (dict, list),
    SchemaType.STRUCT: (dict,),
}


def _union_reader(s: Schema, branches_json: list[Any] | None, nodes: _Nodes | None, ns: str | None) -> Convert:
    by_name: dict[str, tuple[Field, Convert]] = {}
    order: list[tuple[Field, Convert, tuple[type, ...]]] = []
    others = [b for b in branches_json if b != "null"] if branches_json is not None else []
    for i, f in enumerate(s.fields):
        branch = others[i] if len(others) == len(s.fields) else None
        conv = _reader(f.schema, branch, nodes if branch is not None else None, ns)
        full = f.schema.name or ""
        by_name[full] = by_name[f.name] = (f, conv)
        types = _logical_python(f.schema) or _PY_FOR_BRANCH[f.schema.type]
        order.append((f, conv, types))

    def read(v: Any) -> Any:
        if v is None:
            return None
        if type(v) is tuple and len(v) == 2 and isinstance(v[0], str):  # (name, value) of a named branch
            f, conv = by_name.get(v[0]) or by_name[split_name(v[0])[1]]
            return Struct(s).put(f.name, conv(v[1]))
        for f, conv, types in order:
            if isinstance(v, types) and (type(v) is not bool or bool in types):
                return Struct(s).put(f.name, conv(v))
        raise DataError(f"an Avro union value of type {type(v).__name__} matches no branch of {s!r}")
    return read


def _logical_python(s: Schema) -> tuple[type, ...] | None:
    return {Decimal.LOGICAL_NAME: (_decimal.Decimal,), Date.LOGICAL_NAME: (_dt.date,),
            Time.LOGICAL_NAME: (_dt.time,), Timestamp.LOGICAL_NAME: (_dt.datetime,)}.get(s.name or "")


def check_value(schema: Schema, value: Any, where: str) -> None:
    """Raise the :class:`DataError` naming the field when ``value`` does not fit ``schema`` (the slow path after
    fastavro refused a datum: structs are checked field by field)."""
    if isinstance(value, Struct):
        value.validate()
        for f in value.schema.fields:
            inner = value.get_without_default(f.name)
            if inner is not None:
                check_value(f.schema, inner, f"field {f.name!r}")
        return
    validate_value(schema, value, where)


__all__ = ["NAMESPACE", "AvroData", "check_value", "default_to_avro", "default_to_connect", "split_name"]
