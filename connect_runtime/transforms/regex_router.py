"""``RegexRouter``: rename the topic when the whole topic name matches ``regex``.

- ``regex``: a regular expression the whole topic name must match (records of other topics pass
  unchanged).
- ``replacement``: the new topic name, with Java's group references: ``$1``, ``${name}``; ``\\$``
  is a literal ``$``, and a backslash makes any character literal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config import ConfigDef, Type, non_empty_string, valid_regex
from connect_runtime.api.errors import ConfigError
from connect_runtime.api.records import ConnectRecord
from connect_runtime.api.transforms import Transformation
from connect_runtime.transforms._base import replaced

_REF = re.compile(r"\\(.)|\$(\d+)|\$\{([A-Za-z][A-Za-z0-9]*)\}|(\$)|([^\\$]+)", re.S)


def java_replacement_to_python(replacement: str, pattern: re.Pattern[str]) -> str:
    """``"$1-${name}"`` -> ``"\\g<1>-\\g<name>"`` for :meth:`re.Match.expand`; ValueError naming
    what is wrong (a lone ``$``, a trailing backslash, a group the regex does not have)."""
    out: list[str] = []
    pos = 0
    for m in _REF.finditer(replacement):
        if m.start() != pos:
            break
        pos = m.end()
        escaped, number, name, lone, text = m.groups()
        if escaped is not None:
            out.append(escaped.replace("\\", "\\\\"))
        elif number is not None:
            if int(number) > pattern.groups:
                raise ValueError(f"a replacement whose group references exist in regex, got ${number} "
                                 f"but the regex has {pattern.groups} group(s)")
            out.append(f"\\g<{int(number)}>")
        elif name is not None:
            if name not in pattern.groupindex:
                raise ValueError(f"a replacement whose group references exist in regex, got ${{{name}}}")
            out.append(f"\\g<{name}>")
        elif lone is not None:
            raise ValueError(f"a replacement with $ only in $<n>, ${{name}} or escaped as \\$, got {replacement!r}")
        else:
            out.append(text.replace("\\", "\\\\"))
    if pos != len(replacement):
        raise ValueError(f"a replacement without a trailing backslash, got {replacement!r}")
    return "".join(out)


def _regex(name: str, value: Any) -> None:
    non_empty_string(name, value)
    valid_regex(name, value)


class RegexRouter(Transformation[ConnectRecord]):
    """Renames matching topics; see the module docstring."""

    CONFIG = (
        ConfigDef()
        .define("regex", Type.STRING, validator=_regex, doc="Regular expression the whole topic must match.")
        .define("replacement", Type.STRING, doc="New topic name; $1 / ${name} refer to groups of regex.")
    )

    def config_def(self) -> ConfigDef:
        return self.CONFIG

    def configure(self, configs: Mapping[str, Any]) -> None:
        values = self.CONFIG.parse(configs)
        self.regex = re.compile(values["regex"])
        try:
            self.template = java_replacement_to_python(values["replacement"], self.regex)
        except ValueError as exc:
            raise ConfigError(errors={"replacement": f"expected {exc}"}) from None

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        m = self.regex.fullmatch(record.topic)
        if m is None:
            return record
        return replaced(record, "topic", m.expand(self.template))  # type: ignore[no-any-return]
