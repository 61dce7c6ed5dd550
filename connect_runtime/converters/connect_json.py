"""Kafka Connect's JSON envelope (``org.apache.kafka.connect.json.JsonConverter`` with ``schemas.enable=true``).

:class:`ConnectJson` turns a Connect schema and value into the bytes Kafka Connect's ``JsonConverter`` writes, and
back: ``{"schema":<schema JSON>,"payload":<value JSON>}`` with ``schemas.enable=true``, the payload alone with
``schemas.enable=false``. The bytes are Kafka Connect's own (checked against ``connect-json`` 4.4.0 by
``tests/integration/test_connect_json_compat.py``):

- the schema JSON (``asJsonSchema``): ``type``, then ``items`` / ``keys``, ``values`` / ``fields`` (each field's
  schema with ``"field":name`` last), then ``optional``, ``name``, ``version``, ``doc``, ``parameters`` (in the
  schema's order) and ``default``;
- values (``convertToJson``): integers, Java's ``Double.toString`` / ``Float.toString`` text for ``FLOAT64`` /
  ``FLOAT32`` (``1.0E-5``, ``1.5``; the shortest digits, as Java 19+ prints them), bytes as base64, a map whose key
  schema is ``STRING`` (or, schemaless, whose keys are all strings) as an object and any other map as an array of
  ``[key, value]`` pairs, a struct as an object of its fields in schema order, strings escaped as Jackson does
  (``\\u001F``: upper-case hex);
- the logical types: ``Decimal`` as base64 of the unscaled two's complement bytes (``decimal.format=BASE64``, the
  default) or a JSON number in ``BigDecimal.toString`` form (``NUMERIC``); ``Date`` / ``Time`` as ``INT32`` days /
  milliseconds, ``Timestamp`` as ``INT64`` milliseconds;
- a null value takes its schema's default when ``replace.null.with.default`` is true (the default), is ``null``
  when the schema is optional, and is an error otherwise;
- ``schema.content`` (KIP-1054): a schema as JSON that every message read is the payload of (no envelope).

Reading (``toConnectData``) gives the Connect schema and value: a :class:`~connect_runtime.api.data.Struct` for a
struct, Python's logical values (``decimal.Decimal`` at the schema's scale, ``datetime.date`` / ``time`` /
``datetime`` in UTC), ``bytes`` for bytes; without a schema, plain JSON values. Schemas are cached both ways
(``schemas.cache.size`` entries, least recently used dropped first). Where this reader is stricter than Kafka
Connect's (which casts: a float read into an ``INT32`` field is truncated, a string read as a boolean is
``false``), it raises :class:`~connect_runtime.api.errors.DataError` naming the field and what was expected.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import decimal as _decimal
import json
import math
import re
import struct
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from connect_runtime.api.data import (
    Date,
    Decimal,
    Schema,
    SchemaAndValue,
    SchemaBuilder,
    SchemaType,
    Struct,
    Time,
    Timestamp,
)
from connect_runtime.api.errors import DataError
from connect_runtime.api.jsoncodec import json_loads_exact

BASE64 = "BASE64"
NUMERIC = "NUMERIC"


class _Raw(str):
    """JSON text written as it is (numbers in Java's format)."""

    __slots__ = ()


class _PathError(Exception):
    """A value that does not fit its schema; ``path`` grows as the error leaves each struct, array or map."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []

    def where(self) -> str:
        if not self.path:
            return "the value"
        out = ""
        for part in reversed(self.path):
            out += part if part.startswith("[") else (f".{part}" if out else part)
        return f"field {out!r}"


# -- numbers and strings as Jackson writes them ------------------------------------------------------------------

def _java_format(digits: str, exponent: int, negative: bool) -> str:
    """Java's ``Double.toString`` / ``Float.toString`` layout of the decimal ``0.<digits> x 10^exponent``
    (``digits`` without leading or trailing zeros): plain between 10^-3 and 10^7, else ``d.dddE<n>``."""
    sign = "-" if negative else ""
    if -2 <= exponent <= 7:  # 1e-3 <= |x| < 1e7
        if exponent <= 0:
            return f"{sign}0.{'0' * -exponent}{digits}"
        whole, frac = digits[:exponent], digits[exponent:]
        return f"{sign}{whole}{'0' * (exponent - len(whole))}.{frac or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent - 1}"


def _shortest(x: float, precision: Callable[[float], str]) -> str:
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    text = precision(abs(x))  # "d.ddde[+-]NN"
    mantissa, _, exp = text.partition("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    return _java_format(digits, int(exp) + 1, x < 0)


def _repr_e(a: float) -> str:
    # repr's digits are the shortest that read back as ``a``; '.{n}e' of that many digits lays them out (the
    # closest n-digit decimal, so the same digits). Java writes at least two digits (d.d) and takes the closest
    # two-digit decimal when one digit would do: 4.9E-324, not 5.0E-324.
    n = len(repr(a).split("e")[0].replace(".", "").strip("0"))
    return f"{a:.{max(n, 2) - 1}e}"


def java_double(x: float) -> str:
    """``Double.toString(x)``: the shortest digits that read back as ``x`` (as Java 19+ prints them; Java 17's
    older algorithm prints a digit more for a few values), in Java's layout."""
    return _shortest(x, _repr_e)


def java_float(x: float) -> str:
    """``Float.toString((float) x)``: the shortest digits that read back as the same 32-bit float. Raises
    ``OverflowError`` beyond the 32-bit range."""
    f32 = struct.unpack("<f", struct.pack("<f", x))[0]

    def digits(a: float) -> str:
        for p in range(1, 9):  # at least two digits, as Java (see _repr_e)
            text = f"{a:.{p}e}"
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == a:
                return text
        return f"{a:.8e}"

    return _shortest(f32, digits)


_CONTROL_ESCAPE = re.compile(r"(\\\\)|\\u00([0-9a-f]{2})")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _upper(m: re.Match[str]) -> str:
    return m.group(1) or "\\u00" + m.group(2).upper()


def _surrogates(m: re.Match[str]) -> str:
    code = ord(m.group()) - 0x10000
    return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"


def json_string(s: str) -> str:
    """A JSON string as Jackson writes it: UTF-8, the short escapes ``\\b \\t \\n \\f \\r \\" \\\\``, other
    control characters as ``\\u00XX`` and characters beyond U+FFFF as their UTF-16 surrogate pair
    (``\\uD83D\\uDE00``), hex in upper case."""
    if s.isascii() and s.isprintable():
        if '"' not in s and "\\" not in s:
            return f'"{s}"'  # nothing to escape (the common case)
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'  # only these two (JSON text in a string)
    out = json.dumps(s, ensure_ascii=False)
    if "\\u00" in out:
        out = _CONTROL_ESCAPE.sub(_upper, out)
    if not out.isascii():
        out = _ASTRAL.sub(_surrogates, out)
    return out


def _write(node: Any, out: list[str]) -> None:
    t = type(node)
    if t is str:
        out.append(json_string(node))
    elif t is _Raw:
        out.append(node)
    elif node is None:
        out.append("null")
    elif t is bool:
        out.append("true" if node else "false")
    elif t is int:
        out.append(str(node))
    elif t is list:
        out.append("[")
        for i, item in enumerate(node):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:  # dict
        out.append("{")
        for i, (k, v) in enumerate(node.items()):
            if i:
                out.append(",")
            out.append(json_string(k))
            out.append(":")
            _write(v, out)
        out.append("}")


def dumps(node: Any) -> str:
    """The compact JSON text of a tree of dicts, lists, strings, ints, bools, ``None`` and raw numbers."""
    out: list[str] = []
    _write(node, out)
    return "".join(out)


# -- the converter ---------------------------------------------------------------------------------------------

class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self._d: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self._d.get(key)
        if value is not None:
            self._d.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.size:
            self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


_split_envelope = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_loads_decimal = json.JSONDecoder(parse_float=_decimal.Decimal).decode
_JSON_TYPES = {t.value: t for t in SchemaType}
_PARSE_ERRORS = (ValueError, TypeError, RecursionError, UnicodeError, msgspec.DecodeError)


class ConnectJson:
    """Kafka Connect's ``JsonConverter`` conversions for one converter instance (its settings and caches).

    ``write(topic, schema, value)`` gives the bytes (``None`` only when both are ``None``); ``read(topic, data)``
    gives a :class:`SchemaAndValue`. Errors are :class:`DataError` naming the topic, whether it is the key or the
    value, the field and what was expected.
    """

    def __init__(self, *, is_key: bool, schemas_enable: bool, decimal_format: str = BASE64,
                 cache_size: int = 1000, replace_null_with_default: bool = True,
                 schema_content: str | None = None) -> None:
        self.kind = "key" if is_key else "value"
        self.schemas_enable = schemas_enable
        self.numeric = decimal_format.upper() == NUMERIC
        self.replace_null = replace_null_with_default
        self._to_json_cache = _LRU(cache_size)
        self._writers = _LRU(cache_size)
        self._to_connect_cache = _LRU(cache_size)
        self._last: tuple[Schema | None, Callable[[Any], str], str] = (None, str, "")
        """The previous call's schema, its writer and the envelope's text before the payload: one tuple, replaced
        whole, so a converter shared by threads never pairs one schema's writer with another's head."""
        self.fixed_schema = self.parse_schema(schema_content) if schema_content else None
        """``schema.content`` (KIP-1054): with ``schemas.enable=true``, every message read is a payload alone of
        this schema (no envelope); writing is unchanged."""

    def parse_schema(self, text: str) -> Schema:
        """A Connect schema from its JSON text; ``ValueError`` saying what is wrong."""
        try:
            return self.as_connect_schema(_loads_decimal(text))
        except _PathError as exc:
            raise ValueError(f"a Kafka Connect schema as JSON ({exc.message})") from None
        except _PARSE_ERRORS as exc:
            raise ValueError(f"a Kafka Connect schema as JSON ({exc})") from None

    # -- Connect -> JSON ---------------------------------------------------------------------------------------
    def schema_json(self, schema: Schema) -> str:
        """The schema's JSON text (``asJsonSchema``), cached."""
        text = self._to_json_cache.get(schema)
        if text is None:
            text = dumps(self._schema_node(schema))
            self._to_json_cache.put(schema, text)
        return str(text)

    def _schema_node(self, schema: Schema) -> dict[str, Any]:
        node: dict[str, Any] = {"type": schema.type.value}
        t = schema.type
        if t is SchemaType.ARRAY:
            assert schema.value_schema is not None
            node["items"] = self._schema_node(schema.value_schema)
        elif t is SchemaType.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            node["keys"] = self._schema_node(schema.key_schema)
            node["values"] = self._schema_node(schema.value_schema)
        elif t is SchemaType.STRUCT:
            node["fields"] = [{**self._schema_node(f.schema), "field": f.name} for f in schema.fields]
        node["optional"] = schema.optional
        if schema.name is not None:
            node["name"] = schema.name
        if schema.version is not None:
            node["version"] = schema.version
        if schema.doc is not None:
            node["doc"] = schema.doc
        if schema.parameters is not None:
            node["parameters"] = dict(schema.parameters)
        if schema.default is not None:
            node["default"] = self._to_json(schema, schema.default)
        return node

    def write(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        last_schema, last_writer, last_head = self._last
        if schema is not None and schema is last_schema:
            # the schema of the previous call (one topic's records in a row): its writer and the envelope's text
            # before the payload, kept for that one schema by identity, so neither cache is looked up again
            try:
                payload = last_writer(value)
            except (_PathError, RecursionError, UnicodeError):
                pass  # the general path below writes it again and names the topic, the field and what went wrong
            else:
                return (last_head + payload + "}").encode() if self.schemas_enable else payload.encode()
        if schema is None and value is None:
            return None
        if schema is None and isinstance(value, Struct):
            schema = value.schema  # Kafka Connect raises "Mismatching schema"; the struct names its own
        try:
            payload = self._writer(schema)(value) if schema is not None else dumps(self._schemaless(value))
        except _PathError as exc:
            raise DataError(f"JsonConverter cannot write the {self.kind} of a record for topic {topic!r}: "
                            f"{exc.where()} {exc.message}") from None
        except (RecursionError, UnicodeError) as exc:
            raise DataError(f"JsonConverter cannot write the {self.kind} of a record for topic {topic!r}: "
                            f"{type(exc).__name__}: {exc}") from exc
        if schema is not None:
            self._last = (schema, self._writer(schema),
                          f'{{"schema":{self.schema_json(schema)},"payload":' if self.schemas_enable else "")
        if not self.schemas_enable:
            return payload.encode()
        head = "null" if schema is None else self.schema_json(schema)
        return f'{{"schema":{head},"payload":{payload}}}'.encode()

    def _to_json(self, schema: Schema | None, value: Any) -> Any:
        """``value`` as a JSON tree node (schemaless) or raw JSON text (with a schema: its compiled writer)."""
        if schema is None:
            return None if value is None else self._schemaless(value)
        return _Raw(self._writer(schema)(value))

    def _writer(self, schema: Schema) -> Callable[[Any], str]:
        """The function writing a value of ``schema`` as JSON text (``convertToJson``), made once per schema and
        kept while the schema is cached. Raises ``_PathError`` for a value that does not fit."""
        cached = self._writers.get(schema)
        if cached is None:
            cached = self._with_nulls(schema, self._compile(schema))
            self._writers.put(schema, cached)
        return cached  # type: ignore[no-any-return]

    def _with_nulls(self, schema: Schema, write: Callable[[Any], str]) -> Callable[[Any], str]:
        if schema.default is not None and self.replace_null:
            default_text = write(schema.default)

            def null_is_default(value: Any) -> str:
                return default_text if value is None else write(value)
            return null_is_default
        if schema.optional:
            def null_is_null(value: Any) -> str:
                return "null" if value is None else write(value)
            return null_is_null
        why = (f"is null, its schema is required, and replace.null.with.default=false keeps its default out "
               f"(expected {schema.type.name})" if schema.default is not None else
               f"is null but its schema is required and has no default (expected {schema.type.name})")

        def null_is_an_error(value: Any) -> str:
            if value is None:
                raise _PathError(why)
            return write(value)
        return null_is_an_error

    def _compile(self, schema: Schema) -> Callable[[Any], str]:
        t = schema.type
        name = schema.name
        logical = _TO_WIRE.get(name) if name is not None else None
        if logical is _decimal_to_wire and not self.numeric:
            return _base64_decimal_writer(schema)
        if logical is not None:
            conv = self

            def write_logical(value: Any) -> str:
                return logical(conv, schema, value)
            return write_logical
        if t is SchemaType.STRING:
            def write_string(value: Any) -> str:
                if type(value) is not str:
                    raise _expected(value, "a str (STRING)")
                return json_string(value)
            return write_string
        if t in _INTS:
            low, high = _INTS[t]

            def write_int(value: Any) -> str:
                if type(value) is not int:
                    if not isinstance(value, int) or isinstance(value, bool):
                        raise _expected(value, f"an int ({t.name})")
                    value = int(value)
                if not low <= value <= high:
                    raise _PathError(f"is {value}, out of the range of {t.name} ({low} to {high})")
                return str(value)
            return write_int
        if t is SchemaType.FLOAT64 or t is SchemaType.FLOAT32:
            text = java_double if t is SchemaType.FLOAT64 else java_float

            def write_float(value: Any) -> str:
                if not isinstance(value, (float, int)) or isinstance(value, bool):
                    raise _expected(value, f"a float ({t.name})")
                f = float(value)
                if not math.isfinite(f):
                    raise _PathError(f"is {f}: JSON has no NaN or infinity")
                try:
                    return text(f)
                except OverflowError:
                    raise _PathError(f"is {f}, out of the range of FLOAT32") from None
            return write_float
        if t is SchemaType.BOOLEAN:
            def write_bool(value: Any) -> str:
                if type(value) is not bool:
                    raise _expected(value, "a bool (BOOLEAN)")
                return "true" if value else "false"
            return write_bool
        if t is SchemaType.BYTES:
            def write_bytes(value: Any) -> str:
                if not isinstance(value, (bytes, bytearray, memoryview)):
                    raise _expected(value, "bytes (BYTES)")
                return f'"{base64.b64encode(value).decode("ascii")}"'
            return write_bytes
        if t is SchemaType.STRUCT:
            return self._compile_struct(schema)
        if t is SchemaType.ARRAY:
            assert schema.value_schema is not None
            item = self._writer(schema.value_schema)

            def write_array(value: Any) -> str:
                if not isinstance(value, (list, tuple)):
                    raise _expected(value, "a list (ARRAY)")
                i = 0
                try:
                    parts = []
                    for i, x in enumerate(value):  # noqa: B007 - i names the element on error
                        parts.append(item(x))
                except _PathError as exc:
                    exc.path.append(f"[{i}]")
                    raise
                return f"[{','.join(parts)}]"
            return write_array
        return self._compile_map(schema)

    def _compile_struct(self, schema: Schema) -> Callable[[Any], str]:
        fields = [(f.name, f'{json_string(f.name)}:', self._writer(f.schema)) for f in schema.fields]
        # per field: the writer without the null check, the whole text of the field when it is null (None: the
        # null is an error, raised by the writer with the check) and that writer
        fast = [(prefix, self._compile(f.schema), self._null_text(f.schema, prefix, write), write)
                for f, (_, prefix, write) in zip(schema.fields, fields, strict=True)]
        n = len(fields)

        def write_struct(value: Any) -> str:
            if not isinstance(value, Struct):
                raise _expected(value, f"a Struct of schema {schema.name or repr(schema)}")
            if value.schema is not schema and value.schema != schema:
                raise _PathError(f"is a Struct of another schema ({value.schema!r}; expected {schema!r})")
            values = value._values  # without defaults
            if len(values) == n:
                try:
                    return "{" + ",".join([prefix + write(x) if x is not None else null if null is not None
                                           else checked(x)
                                           for (prefix, write, null, checked), x in zip(fast, values, strict=True)]) + "}"
                except _PathError:
                    pass  # written again field by field below, to name the field
            parts = []
            for (name, prefix, write), item in zip(fields, values, strict=True):
                try:
                    parts.append(prefix + write(item))
                except _PathError as exc:
                    exc.path.append(name)
                    raise
            return f"{{{','.join(parts)}}}"
        return write_struct

    def _null_text(self, schema: Schema, prefix: str, write: Callable[[Any], str]) -> str | None:
        """A struct field's text when its value is null (what ``write``, from :meth:`_with_nulls`, gives for it),
        or None when a null is an error."""
        if (schema.default is not None and self.replace_null) or schema.optional:
            return prefix + write(None)
        return None

    def _compile_map(self, schema: Schema) -> Callable[[Any], str]:
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        write_key, write_value = self._writer(ks), self._writer(vs)
        object_mode = ks.type is SchemaType.STRING

        def write_map(value: Any) -> str:
            if not isinstance(value, Mapping):
                raise _expected(value, "a dict (MAP)")
            parts = []
            for k, v in value.items():
                try:
                    jk = write_key(k)
                except _PathError as exc:
                    exc.path.append(f"[key {k}]")
                    raise
                try:
                    jv = write_value(v)
                except _PathError as exc:
                    exc.path.append(str(k) if object_mode else f"[{k}]")
                    raise
                if object_mode:
                    parts.append(f'{jk if jk != "null" else chr(34) + "null" + chr(34)}:{jv}')
                else:
                    parts.append(f"[{jk},{jv}]")
            return f"{{{','.join(parts)}}}" if object_mode else f"[{','.join(parts)}]"
        return write_map

    def _map(self, value: Mapping[Any, Any], ks: Schema | None, vs: Schema | None, object_mode: bool) -> Any:
        pairs = []
        for k, v in value.items():
            try:
                jk = self._to_json(ks, k)
            except _PathError as exc:
                exc.path.append(f"[key {k}]")
                raise
            try:
                jv = self._to_json(vs, v)
            except _PathError as exc:
                exc.path.append(str(k) if object_mode else f"[{k}]")
                raise
            pairs.append((jk, jv))
        if object_mode:  # schemaless with string keys only
            return dict(pairs)
        return [[k, v] for k, v in pairs]

    def _schemaless(self, value: Any) -> Any:
        t = type(value)
        if t is str or t is bool or t is int:
            return value
        if t is float:
            if not math.isfinite(value):
                raise _PathError(f"is {value}: JSON has no NaN or infinity")
            return _Raw(java_double(value))
        if isinstance(value, Struct):
            return self._to_json(value.schema, value)
        if isinstance(value, Mapping):
            return self._map(value, None, None, all(type(k) is str for k in value))
        if isinstance(value, (list, tuple)):
            arr = []
            for i, item in enumerate(value):
                try:
                    arr.append(self._schemaless(item) if item is not None else None)
                except _PathError as exc:
                    exc.path.append(f"[{i}]")
                    raise
            return arr
        if isinstance(value, (bytes, bytearray, memoryview)):
            return base64.b64encode(value).decode("ascii")
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
        raise _PathError(f"is a {type(value).__name__}, which has no Connect type without a schema (give the "
                         f"record a schema for decimals, dates and times)")

    # -- JSON -> Connect ---------------------------------------------------------------------------------------
    def read(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        raw = data if isinstance(data, bytes) else bytes(data)
        if not self.schemas_enable:
            return SchemaAndValue(None, self._loads_plain(topic, raw))
        if self.fixed_schema is not None:
            return self._payload(topic, self.fixed_schema, raw)
        try:
            envelope = _split_envelope(raw)
        except _PARSE_ERRORS as exc:
            if isinstance(exc, msgspec.ValidationError):  # valid JSON, but not an object
                self._not_envelope(topic, raw)
            raise self._error(topic, f"not valid UTF-8 JSON ({exc})") from exc
        if len(envelope) != 2 or "schema" not in envelope or "payload" not in envelope:
            self._not_envelope(topic, raw)
        schema_raw = bytes(envelope["schema"])
        payload_raw = bytes(envelope["payload"])
        if schema_raw == b"null":
            return SchemaAndValue(None, self._loads_plain(topic, payload_raw))
        schema = self._to_connect_cache.get(schema_raw)
        if schema is None:
            try:
                node = _loads_decimal(schema_raw.decode())
            except _PARSE_ERRORS as exc:
                raise self._error(topic, f"its \"schema\" is not valid JSON ({exc})") from exc
            try:
                schema = self.as_connect_schema(node)
            except _PathError as exc:
                raise self._error(topic, f"its \"schema\" is not a Kafka Connect schema: {exc.message}") from None
            self._to_connect_cache.put(schema_raw, schema)
        return self._payload(topic, schema, payload_raw)

    def _payload(self, topic: str, schema: Schema, payload_raw: bytes) -> SchemaAndValue:
        try:
            payload = _loads_decimal(payload_raw.decode())
        except _PARSE_ERRORS as exc:
            raise self._error(topic, f"its \"payload\" is not valid JSON ({exc})") from exc
        try:
            return SchemaAndValue(schema, self._to_connect(schema, payload))
        except _PathError as exc:
            where = f"payload's {exc.where()}" if exc.path else "payload"
            raise self._error(topic, f"its {where} {exc.message}") from None
        except DataError as exc:
            raise self._error(topic, str(exc)) from exc

    def _loads_plain(self, topic: str, raw: bytes) -> Any:
        try:
            return json_loads_exact(raw)
        except _PARSE_ERRORS as exc:
            raise self._error(topic, f"not valid UTF-8 JSON ({type(exc).__name__}: {exc})") from exc

    def _error(self, topic: str, what: str) -> DataError:
        return DataError(f"JsonConverter cannot read the {self.kind} of a record from topic {topic!r}: {what}")

    def _not_envelope(self, topic: str, raw: bytes) -> None:
        raise self._error(topic, 'with schemas.enable=true the JSON must be an object with exactly the fields '
                                 '"schema" and "payload" (Kafka Connect\'s envelope); got '
                                 f"{raw[:80]!r}{'...' if len(raw) > 80 else ''}. If the topic holds plain JSON, "
                                 "set schemas.enable=false")

    def as_connect_schema(self, node: Any) -> Schema:
        """A Connect schema from its JSON (``asConnectSchema``); raises ``_PathError`` saying what is wrong."""
        if not isinstance(node, dict):
            raise _PathError(f"a schema must be a JSON object, got {json.dumps(node)[:60]}")
        type_name = node.get("type")
        t = _JSON_TYPES.get(type_name) if isinstance(type_name, str) else None
        if t is None:
            raise _PathError(f"unknown schema type {type_name!r}" if isinstance(type_name, str)
                             else "a schema must contain a \"type\" string")
        if t is SchemaType.ARRAY:
            items = node.get("items")
            if items is None:
                raise _PathError("an array schema must give its element type in \"items\"")
            builder = SchemaBuilder.array(self.as_connect_schema(items))
        elif t is SchemaType.MAP:
            if "keys" not in node or "values" not in node:
                raise _PathError("a map schema must give \"keys\" and \"values\"")
            builder = SchemaBuilder.map(self.as_connect_schema(node["keys"]), self.as_connect_schema(node["values"]))
        elif t is SchemaType.STRUCT:
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise _PathError("a struct schema's \"fields\" must be an array")
            builder = SchemaBuilder.struct()
            for f in fields:
                name = f.get("field") if isinstance(f, dict) else None
                if not isinstance(name, str):
                    raise _PathError("each field of a struct schema must name itself in \"field\"")
                try:
                    builder.field(name, self.as_connect_schema(f))
                except DataError as exc:
                    raise _PathError(str(exc)) from None
        else:
            builder = SchemaBuilder(t)
        if node.get("optional") is True:
            builder.optional()
        else:
            builder.required()
        if isinstance(node.get("name"), str):
            builder.name(node["name"])
        version = node.get("version")
        if type(version) is int:
            builder.version(version)
        if isinstance(node.get("doc"), str):
            builder.doc(node["doc"])
        params = node.get("parameters")
        if isinstance(params, dict):
            for k, v in params.items():
                if not isinstance(v, str):
                    raise _PathError("schema parameters must have string values")
                builder.parameter(k, v)
        if "default" in node and node["default"] is not None:
            bare = builder.build()
            try:
                builder.default_value(self._to_connect(bare, node["default"]))
            except _PathError as exc:
                raise _PathError(f"its default {exc.message}") from None
        try:
            return builder.build()
        except DataError as exc:
            raise _PathError(str(exc)) from None

    def _to_connect(self, schema: Schema, value: Any) -> Any:
        if value is None:
            if schema.default is not None and self.replace_null:
                return schema.default
            if schema.optional:
                return None
            raise _PathError(f"is null but its schema is required and has no default (expected "
                             f"{schema.type.name})")
        name = schema.name
        if name is not None and name.startswith("org.apache.kafka.connect.data."):
            logical = _FROM_WIRE.get(name)
            if logical is not None:
                return logical(schema, value)
        t = schema.type
        if t is SchemaType.STRING:
            if type(value) is not str:
                raise _found(value, "a string (STRING)")
            return value
        if t in _INTS:
            if type(value) is not int:
                raise _found(value, f"an integer ({t.name})")
            low, high = _INTS[t]
            if not low <= value <= high:
                raise _PathError(f"is {value}, out of the range of {t.name} ({low} to {high})")
            return value
        if t is SchemaType.FLOAT64 or t is SchemaType.FLOAT32:
            if type(value) not in (_decimal.Decimal, int, float):
                raise _found(value, f"a number ({t.name})")
            return float(value)
        if t is SchemaType.BOOLEAN:
            if type(value) is not bool:
                raise _found(value, "true or false (BOOLEAN)")
            return value
        if t is SchemaType.BYTES:
            if type(value) is not str:
                raise _found(value, "a base64 string (BYTES)")
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise _PathError(f"is not base64 ({value[:40]!r}); expected BYTES") from None
        if t is SchemaType.STRUCT:
            if type(value) is not dict:
                raise _found(value, "an object (STRUCT)")
            s = Struct(schema)
            values = s._values  # filled directly: each value is converted to its field's schema already
            for f in schema.fields:
                try:
                    values[f.index] = self._to_connect(f.schema, value.get(f.name))
                except _PathError as exc:
                    exc.path.append(f.name)
                    raise
            return s
        if t is SchemaType.ARRAY:
            if type(value) is not list:
                raise _found(value, "an array (ARRAY)")
            items = schema.value_schema
            assert items is not None
            out = []
            for i, item in enumerate(value):
                try:
                    out.append(self._to_connect(items, item))
                except _PathError as exc:
                    exc.path.append(f"[{i}]")
                    raise
            return out
        ks, vs = schema.key_schema, schema.value_schema
        assert ks is not None and vs is not None
        result: dict[Any, Any] = {}
        if ks.type is SchemaType.STRING:
            if type(value) is not dict:
                raise _found(value, "an object (a MAP with STRING keys)")
            for k, v in value.items():
                try:
                    result[k] = self._to_connect(vs, v)
                except _PathError as exc:
                    exc.path.append(k)
                    raise
            return result
        if type(value) is not list:
            raise _found(value, "an array of [key, value] pairs (a MAP with non-STRING keys)")
        for i, entry in enumerate(value):
            if type(entry) is not list or len(entry) != 2:
                raise _PathError(f"entry {i} is not a [key, value] pair (a MAP with non-STRING keys)")
            try:
                key = self._to_connect(ks, entry[0])
            except _PathError as exc:
                exc.path.append(f"[{i}][0]")
                raise
            try:
                result[_hashable_key(key)] = self._to_connect(vs, entry[1])
            except _PathError as exc:
                exc.path.append(f"[{key}]")
                raise
        return result


_INTS = {
    SchemaType.INT8: (-(1 << 7), (1 << 7) - 1),
    SchemaType.INT16: (-(1 << 15), (1 << 15) - 1),
    SchemaType.INT32: (-(1 << 31), (1 << 31) - 1),
    SchemaType.INT64: (-(1 << 63), (1 << 63) - 1),
}


def _hashable_key(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_hashable_key(k) for k in key)
    if isinstance(key, dict):
        raise _PathError("has a map as a map key, which Python cannot hash")
    if isinstance(key, Struct):
        raise _PathError("has a struct as a map key, which Python cannot hash")
    return key


def _kind_of(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", _decimal.Decimal: "a number"}.get(type(value), type(value).__name__)


def _found(value: Any, expected: str) -> _PathError:
    return _PathError(f"is {_kind_of(value)}; expected {expected}")


def _expected(value: Any, expected: str) -> _PathError:
    return _PathError(f"is a {type(value).__name__}; expected {expected}")


# -- the logical types ----------------------------------------------------------------------------------------

def _decimal_to_wire(conv: ConnectJson, schema: Schema, value: Any) -> str:
    if not isinstance(value, _decimal.Decimal):
        raise _expected(value, f"a decimal.Decimal (Decimal, scale {Decimal.scale(schema)})")
    try:
        raw = Decimal.from_logical(schema, value)
    except DataError as exc:
        raise _PathError(str(exc)) from None
    if conv.numeric:
        return str(Decimal.to_logical(schema, raw))  # BigDecimal.toString of the unscaled value and scale
    return '"' + base64.b64encode(raw).decode("ascii") + '"'


def _base64_decimal_writer(schema: Schema) -> Callable[[Any], str]:
    """``_decimal_to_wire`` with ``decimal.format=BASE64`` for one schema, its scale read once."""
    try:
        scale = Decimal.scale(schema)
    except (DataError, ValueError):  # a bad scale parameter: the general writer names it on every value
        return lambda value: _decimal_to_wire(_BASE64_DEFAULTS, schema, value)
    exponent = -scale
    up, down = (10 ** scale, 1) if scale >= 0 else (1, 10 ** -scale)
    b64 = base64.b64encode

    def write_decimal(value: Any) -> str:
        if type(value) is not _decimal.Decimal or value.as_tuple().exponent != exponent:
            return _decimal_to_wire(_BASE64_DEFAULTS, schema, value)  # a subclass, or its error
        numerator, denominator = value.as_integer_ratio()  # exact: value * 10**scale is an integer
        unscaled = numerator * up // (denominator * down)
        raw = unscaled.to_bytes(max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1), "big", signed=True)
        return '"' + b64(raw).decode("ascii") + '"'
    return write_decimal


def _date_to_wire(conv: ConnectJson, schema: Schema, value: Any) -> str:
    if not isinstance(value, _dt.date) or isinstance(value, _dt.datetime):
        raise _expected(value, "a datetime.date (Date)")
    return str(Date.from_logical(schema, value))


def _time_to_wire(conv: ConnectJson, schema: Schema, value: Any) -> str:
    if not isinstance(value, _dt.time):
        raise _expected(value, "a datetime.time (Time)")
    return str(Time.from_logical(schema, value))


def _timestamp_to_wire(conv: ConnectJson, schema: Schema, value: Any) -> str:
    if not isinstance(value, _dt.datetime):
        raise _expected(value, "a datetime.datetime (Timestamp)")
    return str(Timestamp.from_logical(schema, value))


_BASE64_DEFAULTS = ConnectJson(is_key=False, schemas_enable=False)
"""A converter whose only use is its ``numeric`` (false): what ``_decimal_to_wire`` reads of it."""

_TO_WIRE: dict[str, Callable[[ConnectJson, Schema, Any], str]] = {
    Decimal.LOGICAL_NAME: _decimal_to_wire, Date.LOGICAL_NAME: _date_to_wire,
    Time.LOGICAL_NAME: _time_to_wire, Timestamp.LOGICAL_NAME: _timestamp_to_wire,
}


def _decimal_from_wire(schema: Schema, value: Any) -> Any:
    scale = Decimal.scale(schema)
    if type(value) is str:
        try:
            return Decimal.to_logical(schema, base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            raise _PathError(f"is not base64 ({value[:40]!r}); expected a Decimal (base64 or a number)") from None
    if type(value) in (_decimal.Decimal, int):
        d = _decimal.Decimal(value)
        exact = d.quantize(_decimal.Decimal(1).scaleb(-scale), context=_decimal.Context(prec=max(1, len(
            d.as_tuple().digits) + scale + 2)))
        if exact != d:
            raise _PathError(f"is {value}, which has more decimal places than the Decimal schema's scale {scale}")
        return exact
    raise _found(value, "a Decimal (a base64 string or a number)")


def _int_from_wire(logical: Any, expected: str) -> Callable[[Schema, Any], Any]:
    def convert(schema: Schema, value: Any) -> Any:
        if type(value) is not int:
            raise _found(value, expected)
        try:
            return logical.to_logical(schema, value)
        except (DataError, OverflowError) as exc:
            raise _PathError(f"is {value}: {exc}") from None
    return convert


_FROM_WIRE: dict[str, Callable[[Schema, Any], Any]] = {
    Decimal.LOGICAL_NAME: _decimal_from_wire,
    Date.LOGICAL_NAME: _int_from_wire(Date, "an integer (Date: days since 1970-01-01)"),
    Time.LOGICAL_NAME: _int_from_wire(Time, "an integer (Time: milliseconds since midnight)"),
    Timestamp.LOGICAL_NAME: _int_from_wire(Timestamp, "an integer (Timestamp: milliseconds since the epoch)"),
}

__all__ = ["BASE64", "NUMERIC", "ConnectJson", "dumps", "java_double", "java_float", "json_string"]
