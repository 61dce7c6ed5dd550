"""Loading connector configs from files, the way ``connect-standalone`` takes them.

Two formats, chosen by extension (``.json``; ``.properties`` / anything else), falling back to a
look at the first character for an unknown extension:

- **JSON**: one object of field to value. Kafka Connect's REST shape ``{"name": ..., "config": {...}}``
  is accepted too. Strings stay as they are; ``true``/``false`` become ``"true"``/``"false"``;
  numbers their decimal text; a list of scalars the comma list that ``Type.LIST`` fields parse; any
  other list or object its compact JSON text. ``null`` leaves the field out (its default applies).
- **Java properties** (the subset connector configs use): ``key=value``, ``key: value`` or
  ``key value``; ``#`` and ``!`` comment lines; a line ending in an odd number of backslashes
  continues on the next (whose leading blanks are dropped); escapes ``\\t \\n \\r \\f \\uXXXX`` and a
  backslash before any other character stands for that character (``\\=``, ``\\:``, ``\\ ``, ``\\\\``).
  Files are read as UTF-8. A repeated key keeps its last value, as ``java.util.Properties`` does.

Every problem is one :class:`~connect_runtime.api.errors.ConfigError` whose message starts with
``<file>:<line>:``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from connect_runtime.api.errors import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WS = " \t\f"
_NEWLINE = re.compile(r"\r\n|\r|\n")


def load_config(path: str | os.PathLike[str]) -> dict[str, str]:
    """The connector config in a ``.json`` or ``.properties`` file, as field name to string value."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{p}:{line}: not valid UTF-8 (byte {raw[exc.start]:#04x})") from exc
    suffix = p.suffix.lower()
    if suffix == ".json" or (suffix not in (".properties", ".conf", ".cfg") and text.lstrip().startswith("{")):
        return parse_json_config(text, str(p))
    return parse_properties(text, str(p))


# --------------------------------------------------------------------------------------------- JSON


def _pairs_no_duplicates(source: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise ConfigError(f"{source}: field {k!r} appears twice in one JSON object")
            out[k] = v
        return out

    return hook


def _as_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, list) and all(isinstance(v, (str, int, float, bool)) for v in value):
        return ",".join(_as_string(v) for v in value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def parse_json_config(text: str, source: str = "<json>") -> dict[str, str]:
    """A JSON config object (see the module docstring) as field name to string value."""
    try:
        data = json.loads(text, object_pairs_hook=_pairs_no_duplicates(source))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}:{exc.lineno}: invalid JSON at column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}:1: expected a JSON object of config fields, got {type(data).__name__}")
    if isinstance(data.get("config"), dict) and set(data) <= {"name", "config", "tasks", "type"}:
        # Kafka Connect REST shape: {"name": "...", "config": {...}}
        inner = dict(data["config"])
        if "name" in data:
            inner.setdefault("name", data["name"])
        data = inner
    return {str(k): _as_string(v) for k, v in data.items() if v is not None}


# --------------------------------------------------------------------------------------- properties


def _logical_lines(text: str, source: str) -> list[tuple[int, str]]:
    """``(first line number, logical line)`` with continuations joined, comments and blanks dropped."""
    out: list[tuple[int, str]] = []
    lines = _NEWLINE.split(text)
    i = 0
    while i < len(lines):
        start = i + 1
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= len(lines):
                    break  # a continuation at end of file just ends the value (as in Java)
                line = lines[i].lstrip(_WS)
                i += 1
                continue
            parts.append(line)
            break
        out.append((start, "".join(parts)))
    return out


def _unescape(s: str, source: str, line: int) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            i += 1  # a lone trailing backslash (end of file) stands for nothing
            continue
        e = s[i + 1]
        if e == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"{source}:{line}: malformed \\uXXXX escape {s[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(e, e))
        i += 2
    return "".join(out)


def _split_key(logical: str) -> tuple[str, str]:
    """Raw (still escaped) key and value of one logical line."""
    i = 0
    n = len(logical)
    while i < n:
        c = logical[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key = logical[:i]
    j = i
    while j < n and logical[j] in _WS:
        j += 1
    if j < n and logical[j] in "=:":
        j += 1
        while j < n and logical[j] in _WS:
            j += 1
    return key, logical[j:]


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """A Java properties text (see the module docstring) as key to value."""
    out: dict[str, str] = {}
    for line_no, logical in _logical_lines(text, source):
        raw_key, raw_value = _split_key(logical)
        key = _unescape(raw_key, source, line_no)
        if not key:
            raise ConfigError(f"{source}:{line_no}: missing key before {logical[:20]!r}")
        out[key] = _unescape(raw_value, source, line_no)
    return out


__all__ = ["load_config", "parse_json_config", "parse_properties"]
