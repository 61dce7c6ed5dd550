"""Exact JSON at orjson's speed: the bytes :func:`json.dumps` writes and the values :func:`json.loads`
reads, for converters and connectors (which import only the connector API, so it lives here).

orjson and :mod:`json` differ at the edges (NaN, exponent forms, integers past 64 bits, enums); each
function below takes orjson's fast path where the two agree and :mod:`json`'s answer where they may not.
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
"""Dataclasses and datetimes are not JSON values for :mod:`json` either: orjson must refuse them too."""


def json_default(o: Any) -> Any:
    """What orjson writes natively beyond JSON's types, written the same way by :mod:`json`."""
    if isinstance(o, enum.Enum):
        return o.value
    if isinstance(o, uuid.UUID):
        return str(o)
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


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


__all__ = ["json_batch", "json_default", "json_loads_exact"]
