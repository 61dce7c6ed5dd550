"""Record headers as stored in the ``records.headers`` column: ``NULL`` when a record has none, else a
small versioned binary encoding (:func:`encode_headers`, :func:`decode_headers`)."""

from __future__ import annotations

import struct

from connect_runtime.api.errors import DataError
from connect_runtime.backends.base import WireHeaders

_HDR_VERSION = 1
_u8 = struct.Struct(">B")
_name_len = struct.Struct(">H")
_value_len = struct.Struct(">i")


def encode_headers(headers: WireHeaders | None) -> bytes | None:
    """Headers as stored: ``None`` when there are none, else version byte ``1`` then per header
    ``uint16`` name length, UTF-8 name, ``int32`` value length (``-1`` for a ``None`` value), value.
    A ``str`` value is stored as its UTF-8 bytes."""
    if not headers:
        return None
    parts = [_u8.pack(_HDR_VERSION)]
    try:
        for name, value in headers:
            raw_name = name.encode()
            parts.append(_name_len.pack(len(raw_name)))
            parts.append(raw_name)
            if value is None:
                parts.append(_value_len.pack(-1))
            else:
                if isinstance(value, str):
                    value = value.encode()
                elif not isinstance(value, bytes):
                    value = bytes(memoryview(value))
                parts.append(_value_len.pack(len(value)))
                parts.append(value)
    except (AttributeError, TypeError, ValueError, struct.error) as exc:
        raise DataError(
            f"headers {headers!r} cannot be stored: expected (name, value) pairs with a str name "
            f"(< 64 KiB) and a bytes, str or None value: {exc}"
        ) from exc
    return b"".join(parts)


def decode_headers(data: bytes | None) -> WireHeaders | None:
    """The inverse of :func:`encode_headers`."""
    if data is None:
        return None
    if not data or data[0] != _HDR_VERSION:
        raise DataError(f"stored headers have an unknown encoding (first byte {data[:1]!r})")
    out: WireHeaders = []
    pos, end = 1, len(data)
    while pos < end:
        (n,) = _name_len.unpack_from(data, pos)
        pos += 2
        name = data[pos:pos + n].decode()
        pos += n
        (m,) = _value_len.unpack_from(data, pos)
        pos += 4
        if m < 0:
            out.append((name, None))
        else:
            out.append((name, bytes(data[pos:pos + m])))
            pos += m
    return out
