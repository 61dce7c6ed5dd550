"""``TimestampRouter``: route a record to a topic named from its topic and timestamp.

- ``topic.format`` (default ``${topic}-${timestamp}``): the new topic name; ``${topic}`` is the
  record's topic, ``${timestamp}`` its timestamp formatted with ``timestamp.format``.
- ``timestamp.format`` (default ``yyyyMMdd``): a Java ``SimpleDateFormat`` pattern, in UTC, of the
  subset ``yyyy MM dd HH mm ss``; any other non-letter character is literal, and text in single
  quotes is literal (``''`` is a quote), as in Java.

A record without timestamp raises DataError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, non_empty_string
from connect_runtime.api.errors import DataError
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import describe, replaced

_JAVA_TO_STRFTIME = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_TOKEN = re.compile(r"'(?:[^']|'')*'|''|[A-Za-z]+|[^A-Za-z']+|'")
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


def java_date_pattern_to_strftime(pattern: str) -> str:
    """``yyyyMMdd'T'HH`` -> ``%Y%m%dT%H``; ValueError naming what is not supported."""
    out = []
    for m in _TOKEN.finditer(pattern):
        tok = m.group(0)
        if tok == "'":
            raise ValueError(f"a date pattern with balanced quotes, got {pattern!r}")
        if tok.startswith("'"):
            literal = "'" if tok == "''" else tok[1:-1].replace("''", "'")
            out.append(literal.replace("%", "%%"))
        elif tok[0].isalpha():
            pos = 0
            while pos < len(tok):
                for java, fmt in _JAVA_TO_STRFTIME.items():
                    if tok.startswith(java, pos):
                        out.append(fmt)
                        pos += len(java)
                        break
                else:
                    raise ValueError(
                        f"a date pattern of yyyy, MM, dd, HH, mm, ss and literal characters, got {pattern!r} "
                        f"(unsupported {tok[pos:]!r})"
                    )
        else:
            out.append(tok.replace("%", "%%"))
    return "".join(out)


def _timestamp_format(name: str, value: Any) -> None:
    non_empty_string(name, value)
    java_date_pattern_to_strftime(value)


def _topic_format(name: str, value: Any) -> None:
    non_empty_string(name, value)
    unknown = [p for p in _PLACEHOLDER.findall(value) if p not in ("topic", "timestamp")]
    if unknown:
        raise ValueError(
            f"a topic name using only the placeholders ${{topic}} and ${{timestamp}}, got {value!r}"
        )


class TimestampRouter(Transformation[ConnectRecord]):
    """Sets the topic from ``topic.format``; see the module docstring."""

    CONFIG = (
        ConfigDef()
        .define("topic.format", Type.STRING, default="${topic}-${timestamp}", validator=_topic_format,
                doc="New topic name with ${topic} and ${timestamp}.")
        .define("timestamp.format", Type.STRING, default="yyyyMMdd", validator=_timestamp_format,
                doc="Java date pattern (yyyy MM dd HH mm ss) for ${timestamp}, in UTC.")
    )

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.CONFIG.parse(configs)
        self.topic_format: str = values["topic.format"]
        self.strftime = java_date_pattern_to_strftime(values["timestamp.format"])
        self._cache: dict[int, str] = {}

    def _format(self, timestamp: int) -> str:
        # Records of one batch mostly share a second: cache per second, bounded.
        second = timestamp // 1000
        text = self._cache.get(second)
        if text is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            text = datetime.fromtimestamp(second, UTC).strftime(self.strftime)
            self._cache[second] = text
        return text

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        ts = record.timestamp
        if ts is None:
            raise DataError(f"TimestampRouter needs a record timestamp; the record of {describe(record)} has none")
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", self._format(ts))
        return replaced(record, "topic", topic)  # type: ignore[no-any-return]
