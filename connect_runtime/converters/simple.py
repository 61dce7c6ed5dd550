"""Built-in converters: the bytes on a topic and the Python values a task sees.

- :class:`JsonConverter` (default): dict, list, str, int, float, bool, None <-> compact UTF-8 JSON;
  alias ``org.apache.kafka.connect.json.JsonConverter``. Encoded with orjson, byte for byte what
  :func:`json.dumps` writes (``separators=(",", ":")``, ``ensure_ascii=False``, ``allow_nan=False``).
  With ``schemas.enable=true``, Kafka Connect's envelope ``{"schema":...,"payload":...}``
  (:mod:`.connect_json`).
- :class:`StringConverter` (default header converter): str <-> text in ``converter.encoding`` (UTF-8);
  alias ``org.apache.kafka.connect.storage.StringConverter``.
- :class:`ByteArrayConverter`: bytes <-> the same bytes;
  alias ``org.apache.kafka.connect.converters.ByteArrayConverter``.

Batches: the pipeline converts a batch's values at once where the value converter has ``encode_many``
(values -> bytes) / ``decode_many`` (bytes -> values), as the built-in ones do; each gives exactly what
``from_connect`` / ``to_connect`` give one by one and raises where they would (the pipeline then redoes the
batch record by record, naming the record). StringConverter joins a batch's texts with newlines and
encodes (decodes) once, for encodings where that splits back at the same places (UTF-8, ASCII,
Latin-1, cp1252); ByteArrayConverter checks the batch's types once.

``None`` is always ``None`` both ways (a tombstone). A value a converter cannot handle raises
:class:`~connect_runtime.api.errors.DataError` naming the topic, whether it is a key or a value,
and the offending type; the library's own exception is chained.

Converter settings come from the connector config with the prefix removed: ``value.converter.
schemas.enable=true`` reaches the value converter as ``schemas.enable``. ``schemas.enable`` defaults to
false here (plain JSON, the fast path); Kafka Connect's default is true.

The package's :data:`~connect_runtime.converters.ALIASES` maps the Kafka Connect class names to these classes.
"""

from __future__ import annotations

import codecs
import json
import json.scanner
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from connect_runtime.api.config import ConfigDef, Importance, Range, Type, ValidString
from connect_runtime.api.data import Schema, SchemaAndValue
from connect_runtime.api.errors import DataError
from connect_runtime.api.jsoncodec import json_batch, json_default, json_loads_exact
from connect_runtime.api.records import Headers
from connect_runtime.api.transforms import Converter
from connect_runtime.converters.connect_json import BASE64, NUMERIC, ConnectJson


def _kind(is_key: bool) -> str:
    return "key" if is_key else "value"


def _connect_schema_json(name: str, value: Any) -> None:
    if value:
        ConnectJson(is_key=False, schemas_enable=True).parse_schema(value)


def _valid_encoding(name: str, value: Any) -> None:
    try:
        codecs.lookup(value)
    except LookupError:
        raise ValueError(f"a Python codec name such as utf-8, got {value!r}") from None


class JsonConverter(Converter):
    """JSON, written compactly (``{"a":1}``) in UTF-8; Kafka Connect's ``JsonConverter``.

    ``schemas.enable=true``: every key or value is Kafka Connect's envelope ``{"schema":<the Connect schema as
    JSON>,"payload":<the value>}``, byte for byte what Kafka Connect's ``JsonConverter`` writes, and reading gives
    the Connect schema and value (:mod:`.connect_json`; ``decimal.format``, ``schemas.cache.size`` and
    ``replace.null.with.default`` as in Kafka Connect). The converter is then :attr:`SCHEMA_AWARE` and the
    pipeline calls :meth:`from_connect_data` / :meth:`to_connect_data` record by record.

    ``schemas.enable=false`` (the default here; Kafka Connect's default is true): plain JSON. A record that
    carries a schema is written as Kafka Connect writes it then, the payload alone (:meth:`from_connect_data`);
    a schemaless one as below, on the batch fast path.

    A value must be JSON-serialisable: dict (string keys), list, str, int, float (finite), bool or
    None. Tuples are written as lists; dict keys that are not strings become strings, as in
    :func:`json.dumps`; an ``Enum`` member is written as its value and a ``UUID`` as its string (as
    orjson does). ``None`` is written as no bytes at all (a tombstone), not ``null``.

    :meth:`encode_many` (what the pipeline uses) encodes a whole batch at once: orjson writes the
    list in one call, msgspec splits it into each value's bytes (``msgspec.Raw``), and one check over
    the batch's bytes finds values whose orjson bytes may differ from :func:`json.dumps`'s (see
    :func:`_differs`), which :mod:`json` encodes again; a batch orjson refuses (an integer beyond 64
    bits, a non-string dict key, deep nesting, a type json refuses too) is redone value by value with
    :mod:`json`. So the bytes are exactly :func:`json.dumps`'s, NaN and infinities are refused, and
    :meth:`from_connect` (the standard library's encoder, one value) agrees byte for byte. One orjson
    call per batch rather than per value also keeps clear of glibc's heap trimming, which makes
    per-value calls that allocate more than 512 bytes about 10x slower in some processes.
    """

    CONFIG = (
        ConfigDef()
        .define("schemas.enable", Type.BOOLEAN, default=False, importance=Importance.HIGH,
                doc="Write and read Kafka Connect's envelope {\"schema\":...,\"payload\":...}. Default false "
                    "here (plain JSON); Kafka Connect's default is true.")
        .define("schemas.cache.size", Type.INT, default=1000, validator=Range.at_least(1),
                doc="How many schemas each direction keeps converted (least recently used dropped first).")
        .define("decimal.format", Type.STRING, default=BASE64, validator=ValidString.in_(BASE64, NUMERIC),
                doc="How Decimal values are written: BASE64 (the unscaled bytes, Kafka Connect's default) or "
                    "NUMERIC (a JSON number). Both are read whatever the setting.")
        .define("replace.null.with.default", Type.BOOLEAN, default=True,
                doc="A null value whose schema has a default is written and read as that default.")
        .define("schema.content", Type.STRING, default=None, validator=_connect_schema_json,
                doc="With schemas.enable=true: the schema (as Kafka Connect's schema JSON) of every message read, "
                    "which is then the payload alone, without the envelope (KIP-1054). Writing is unchanged.")
    )

    SCHEMA_AWARE = False
    """Per instance after :meth:`configure`: ``schemas.enable``."""

    def __init__(self) -> None:
        self.is_key = False
        encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                                   default=json_default)
        self.encode: Callable[[Any], str] = encoder.encode
        """``value -> str``: the standard library's compact encoder (``.encode()`` its result for the
        bytes); the reference :meth:`encode_many` and :meth:`from_connect` agree with byte for byte."""
        decoder = json.JSONDecoder()
        self.decode: Callable[[str], Any] = decoder.decode
        """``str -> value`` (``.decode()`` the UTF-8 bytes first)."""
        self.scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(decoder)  # type: ignore[arg-type]
        """``(text, 0) -> (value, end)``: the decoder's scanner itself (the C one where available).
        A value is the whole text only when ``end == len(text)``; otherwise (or on StopIteration,
        e.g. for leading blanks) :attr:`decode` gives the answer or the error."""
        self.connect_json = ConnectJson(is_key=False, schemas_enable=False)
        """Kafka Connect's conversions with this converter's settings (:mod:`.connect_json`)."""

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        settings = self.CONFIG.parse(configs)
        self.is_key = is_key
        self.SCHEMA_AWARE = bool(settings["schemas.enable"])  # type: ignore[misc]
        self.connect_json = ConnectJson(
            is_key=is_key, schemas_enable=self.SCHEMA_AWARE, decimal_format=settings["decimal.format"],
            cache_size=settings["schemas.cache.size"],
            replace_null_with_default=settings["replace.null.with.default"],
            schema_content=settings["schema.content"])

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Headers | None = None) -> bytes | None:
        """Kafka Connect's ``fromConnectData``: the envelope (``schemas.enable=true``), or the payload alone as
        ``schema`` says (``false``; a schemaless value is plain JSON, as :meth:`from_connect` writes it)."""
        if schema is None and not self.SCHEMA_AWARE:
            return self.from_connect(topic, value, headers)
        return self.connect_json.write(topic, schema, value)

    def to_connect_data(self, topic: str, data: bytes | None, headers: Headers | None = None) -> SchemaAndValue:
        """Kafka Connect's ``toConnectData``: the envelope's schema and value (``schemas.enable=true``; a
        DataError naming what is missing when the JSON is not an envelope), or ``(None, plain JSON)``."""
        if not self.SCHEMA_AWARE:
            return SchemaAndValue(None, self.to_connect(topic, data, headers))
        return self.connect_json.read(topic, data)

    def encode_many(self, values: Sequence[Any]) -> list[bytes | None]:
        """Each value's bytes (``None`` for ``None``), the same as :meth:`from_connect` gives one by one,
        encoded as a batch (see the class docstring). Raises (``TypeError``, ``ValueError``, ...) if
        any value cannot be written; the caller redoes the batch value by value to name it."""
        if self.SCHEMA_AWARE:
            return [self.from_connect("", v) for v in values]
        encode = self.encode

        def redo(v: Any) -> bytes | None:
            return None if v is None else encode(v).encode("utf-8")

        try:
            parts = json_batch(values if type(values) is list else list(values), redo)
        except TypeError:  # orjson.JSONEncodeError: json decides (big ints, non-str keys) or raises
            return [redo(v) for v in values]
        return [p if p is None or type(p) is bytes else bytes(p) for p in parts]

    def from_connect(self, topic: str, value: Any, headers: Headers | None = None) -> bytes | None:
        if value is None:
            return None
        if self.SCHEMA_AWARE:  # a value without a schema: the envelope with "schema":null, as Kafka Connect
            return self.connect_json.write(topic, None, value)
        try:
            return self.encode(value).encode("utf-8")
        except (TypeError, ValueError, RecursionError, UnicodeError) as exc:
            raise DataError(
                f"JsonConverter cannot write the {_kind(self.is_key)} of a record for topic {topic!r}: "
                f"a {type(value).__name__} that is not JSON-serialisable ({exc})"
            ) from exc

    def to_connect(self, topic: str, data: bytes | None, headers: Headers | None = None) -> Any:
        if data is None:
            return None
        if self.SCHEMA_AWARE:
            return self.connect_json.read(topic, data).value
        try:
            return self.decode(data.decode("utf-8") if isinstance(data, bytes) else bytes(data).decode("utf-8"))
        except (TypeError, ValueError, RecursionError) as exc:
            raise DataError(
                f"JsonConverter cannot read the {_kind(self.is_key)} of a record from topic {topic!r}: "
                f"not valid UTF-8 JSON ({type(exc).__name__}: {exc})"
            ) from exc


class StringConverter(Converter):
    """``str`` <-> text bytes in ``converter.encoding`` (default UTF-8). Also the default header
    converter: header values that are already bytes pass through without it."""

    CONFIG = ConfigDef().define(
        "converter.encoding", Type.STRING, default="utf-8", validator=_valid_encoding,
        doc="Character encoding of the bytes (a Python codec name).",
    )

    def __init__(self) -> None:
        self.is_key = False
        self.encoding = "utf-8"
        self._lines_safe = True

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.encoding = self.CONFIG.parse(configs)["converter.encoding"]
        self.is_key = is_key
        self._lines_safe = codecs.lookup(self.encoding).name in _NEWLINE_SAFE

    def encode_many(self, values: Sequence[Any]) -> list[bytes | None]:
        """Each value's bytes, the same as :meth:`from_connect` gives one by one, as a batch: the strings
        joined with newlines, encoded once and split again (an encoding where a newline is the byte 0x0A and
        nothing else contains it). Raises on a value it cannot write (the caller redoes the batch value by
        value to name it)."""
        if self._lines_safe and values and set(map(type, values)) == _STR:
            data: list[Any] = "\n".join(values).encode(self.encoding).split(b"\n")
            if len(data) == len(values):  # else some value holds a newline itself
                return data
        return [self.from_connect("", v) for v in values]

    def decode_many(self, data: Sequence[bytes | None]) -> list[Any]:
        """Each value's text, the same as :meth:`to_connect` gives one by one, as a batch (one ``decode``;
        see :meth:`encode_many`). Raises on bytes it cannot read (the caller redoes the batch record by
        record to name it)."""
        if self._lines_safe and data and set(map(type, data)) == _BYTES:
            text = b"\n".join(data).decode(self.encoding).split("\n")  # type: ignore[arg-type]
            if len(text) == len(data):
                return text
        return [self.to_connect("", d) for d in data]

    def from_connect(self, topic: str, value: Any, headers: Headers | None = None) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise DataError(
                f"StringConverter cannot write the {_kind(self.is_key)} of a record for topic {topic!r}: "
                f"expected a str, got a {type(value).__name__}"
            )
        try:
            return value.encode(self.encoding)
        except UnicodeError as exc:
            raise DataError(
                f"StringConverter cannot write the {_kind(self.is_key)} of a record for topic {topic!r} "
                f"in {self.encoding}: {exc}"
            ) from exc

    def to_connect(self, topic: str, data: bytes | None, headers: Headers | None = None) -> Any:
        if data is None:
            return None
        try:
            return data.decode(self.encoding)
        except (UnicodeError, AttributeError) as exc:
            raise DataError(
                f"StringConverter cannot read the {_kind(self.is_key)} of a record from topic {topic!r} "
                f"as {self.encoding} text: {exc}"
            ) from exc


class ByteArrayConverter(Converter):
    """``bytes`` pass through unchanged (``bytearray`` / ``memoryview`` are copied to ``bytes``)."""

    def __init__(self) -> None:
        self.is_key = False

    def encode_many(self, values: Sequence[Any]) -> list[bytes | None]:
        """:meth:`from_connect` of each value (bytes and ``None`` as they are, with one type check per batch)."""
        if set(map(type, values)) <= _BYTES_OR_NONE:
            return list(values)
        return [self.from_connect("", v) for v in values]

    def decode_many(self, data: Sequence[bytes | None]) -> list[Any]:
        """The same bytes (:meth:`to_connect` of each)."""
        return list(data)

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.is_key = is_key

    def from_connect(self, topic: str, value: Any, headers: Headers | None = None) -> bytes | None:
        if value is None or type(value) is bytes:
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise DataError(
            f"ByteArrayConverter cannot write the {_kind(self.is_key)} of a record for topic {topic!r}: "
            f"expected bytes, got a {type(value).__name__}"
        )

    def to_connect(self, topic: str, data: bytes | None, headers: Headers | None = None) -> Any:
        return data


_STR = {str}
_BYTES = {bytes}
_BYTES_OR_NONE = {bytes, type(None)}
_NEWLINE_SAFE = frozenset({"utf-8", "ascii", "latin-1", "iso8859-1", "cp1252"})
"""Codecs (``codecs.lookup(...).name``) in which text joined with newlines splits back at the same places."""

__all__ = ["ByteArrayConverter", "JsonConverter", "StringConverter", "json_batch", "json_default",
           "json_loads_exact"]
