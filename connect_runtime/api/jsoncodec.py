"""Exact JSON at orjson's speed: the bytes :func:`json.dumps` writes and the values :func:`json.loads`
reads, for converters and connectors (which import only the connector API, so it lives here); and the plain JSON
forms of Connect's typed values (:func:`typed_json_default`), shared by the sinks that write JSON.

orjson and :mod:`json` differ at the edges (NaN, exponent forms, integers past 64 bits, enums); each
function below takes orjson's fast path where the two agree and :mod:`json`'s answer where they may not.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import enum
import json
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from connect_runtime.api.data import Struct

_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
"""Dataclasses and datetimes are not JSON values for :mod:`json` either: orjson must refuse them too."""


def json_default(o: Any) -> Any:
    """What orjson writes natively beyond JSON's types, written the same way by :mod:`json`."""
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, uuid.UUID):
        return str(o)
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _iso_instant(v: _dt.datetime) -> str:
    return (v.astimezone(_dt.UTC) if v.tzinfo is not None else v).isoformat()


def _base64(v: Any) -> str:
    return base64.b64encode(bytes(v)).decode("ascii")


JSON_FORMS: dict[type, Callable[[Any], Any]] = {
    decimal.Decimal: str,
    _dt.datetime: _iso_instant,
    _dt.date: _dt.date.isoformat,
    _dt.time: _dt.time.isoformat,
    bytes: _base64,
    bytearray: _base64,
    memoryview: _base64,
}
"""The plain JSON form of each typed value a Connect schema gives (its logical types and ``BYTES``), lossless
and read back by SqlSink's column coercion: a decimal as the string of its exact digits and scale (``"12.30"``;
a JSON number would be read as a binary float by most readers), an instant as ISO 8601 in UTC with its offset
(``"2026-01-02T03:04:05.123000+00:00"``; naive: without one), a date and a time in ISO 8601 (``"2026-01-02"``,
``"03:04:05.123000"``), bytes in standard padded base64. The same forms SqlSource gives its columns."""


def plain_json(v: Any) -> Any:
    """Connect data as plain JSON values (what ``json.dumps`` takes as it is): a :class:`Struct` (nested too) the
    dict of its fields (defaults applied), lists and dicts walked, every typed value and bytes in its
    :data:`JSON_FORMS` form; anything else returned as it is."""
    if isinstance(v, Struct):
        return {k: plain_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain_json(x) for x in v]
    if isinstance(v, dict):
        return {k: plain_json(x) for k, x in v.items()}
    conv = JSON_FORMS.get(type(v))
    return v if conv is None else conv(v)


def typed_json_default(o: Any) -> Any:
    """A ``default`` for :mod:`json` / orjson writing Connect data as plain JSON: a :class:`Struct` is the object
    of its fields (:func:`plain_json`: defaults applied, ``BYTES`` fields in base64), a typed
    value is its :data:`JSON_FORMS` form; anything else as :func:`json_default`."""
    if isinstance(o, Struct):
        return plain_json(o)  # BYTES fields in base64 here: a writer's rule for top-level bytes does not apply
    conv = JSON_FORMS.get(type(o))
    if conv is None:
        conv = next((c for t, c in JSON_FORMS.items() if isinstance(o, t)), None)
    if conv is not None:
        return conv(o)
    return json_default(o)


_split_array = msgspec.json.Decoder(list[msgspec.Raw]).decode
"""A JSON array's bytes -> each element's exact bytes (zero-copy ``msgspec.Raw`` views)."""

_EXPONENT_SIGNS = bytes.maketrans(b"-23", b"111")


def _differs(data: bytes) -> bool:
    """Whether orjson's bytes may differ from :func:`json.dumps`'s (or hide an error it raises): a
    ``null`` (NaN and infinities, which json refuses, come out as ``null``), or a float in exponent
    range (json writes ``1e-05``, ``1e+16``; orjson ``0.00001``, ``1e16``: an ``e`` then ``-``, ``1``,
    ``2`` or ``3``, found with one search after mapping those to ``1``). Strings containing these
    letters make false alarms, which only cost a redo with json."""
    return b"null" in data or b"0.0000" in data or b"e1" in data.translate(_EXPONENT_SIGNS)


def json_batch(values: list[Any], redo: Callable[[Any], Any],
               default: Callable[[Any], Any] | None = None) -> list[Any]:
    """Each value's compact JSON bytes, exactly :func:`json.dumps`'s, encoded as one batch: one orjson call
    writes the list, msgspec splits it into each value's bytes (``msgspec.Raw`` views: ``bytes()`` them or
    join them), and a value whose orjson bytes may differ from json's (:func:`_differs`) is replaced by
    ``redo(value)``. Raises ``TypeError`` (orjson's encode error) for a list orjson refuses (an integer
    beyond 64 bits, a non-string dict key, deep nesting, a type json refuses too): the caller uses json."""
    blob = orjson.dumps(values, default, _ORJSON_OPTIONS)
    parts: list[Any] = _split_array(blob)
    if _differs(blob):
        for i, raw in enumerate(parts):
            if _differs(bytes(raw)):
                parts[i] = redo(values[i])
    return parts


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19


def json_loads_exact(data: bytes) -> Any:
    """One JSON text (UTF-8 bytes) -> its value, exactly what ``json.loads(data.decode())`` gives, orjson's
    speed where it agrees: a run of 19 digits anywhere (an integer past 64 bits, or a false alarm), and
    whatever orjson refuses (invalid JSON or UTF-8, NaN/Infinity, lone surrogate escapes) go to :mod:`json`,
    whose value or error counts."""
    if data.translate(_DIGITS_AS_ZERO).find(_LONG_DIGITS) == -1:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data.decode("utf-8"))


__all__ = ["JSON_FORMS", "json_batch", "json_default", "json_loads_exact", "plain_json", "typed_json_default"]
