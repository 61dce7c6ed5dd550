"""Typed connector configuration in the style of Kafka Connect's ``ConfigDef``.

A connector declares its fields once::

    CONFIG = (
        ConfigDef()
        .define("topic", Type.STRING, doc="Topic to write to.")
        .define("batch.size", Type.INT, default=500, validator=Range.at_least(1), doc="Records per poll.")
        .define("password", Type.PASSWORD, default=None, doc="Secret; masked everywhere.")
    )
    values = CONFIG.parse(props)      # typed values, or one ConfigError naming every bad field

Raw configs are string-keyed mappings; values may be strings (as from a ``.properties`` file) or
already-typed JSON values. ``PASSWORD`` values are wrapped in :class:`Password`, whose ``repr`` and
``str`` are ``[hidden]``; :func:`mask` hides them in a raw config before it is logged or returned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from connect_runtime.api.errors import ConfigError

HIDDEN = "[hidden]"


class Type(Enum):
    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"
    CLASS = "class"
    PASSWORD = "password"


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Password:
    """A secret config value: prints as ``[hidden]``; ``.value`` gives the secret."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return HIDDEN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()

Validator = Callable[[str, Any], None]
"""A validator is called with ``(name, parsed_value)`` and raises ``ValueError`` saying what was expected."""


class Range:
    """Numeric bounds: ``Range.at_least(0)``, ``Range.between(1, 100)``."""

    def __init__(self, low: float | None, high: float | None) -> None:
        self.low, self.high = low, high

    @classmethod
    def at_least(cls, low: float) -> Range:
        return cls(low, None)

    @classmethod
    def between(cls, low: float, high: float) -> Range:
        return cls(low, high)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if self.low is not None and value < self.low:
            raise ValueError(f"a value of at least {self.low}, got {value!r}")
        if self.high is not None and value > self.high:
            raise ValueError(f"a value of at most {self.high}, got {value!r}")

    def __repr__(self) -> str:
        return f"[{self.low if self.low is not None else '...'}, {self.high if self.high is not None else '...'}]"


class ValidString:
    """One of a fixed set of strings: ``ValidString.in_("poll", "interval", "connector")``."""

    def __init__(self, *allowed: str, case_sensitive: bool = False) -> None:
        self.allowed = allowed
        self.case_sensitive = case_sensitive

    @classmethod
    def in_(cls, *allowed: str) -> ValidString:
        return cls(*allowed)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        ok = value in self.allowed if self.case_sensitive else str(value).lower() in {
            a.lower() for a in self.allowed
        }
        if not ok:
            raise ValueError(f"one of {', '.join(self.allowed)}, got {value!r}")

    def __repr__(self) -> str:
        return "[" + ", ".join(self.allowed) + "]"


def non_empty_string(name: str, value: Any) -> None:
    """Validator: a string with at least one non-blank character."""
    if value is not None and not str(value).strip():
        raise ValueError("a non-empty string")


def valid_regex(name: str, value: Any) -> None:
    """Validator: a Python regular expression that compiles."""
    if value is None:
        return
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"a valid regular expression ({exc})") from None


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: Type
    default: Any = NO_DEFAULT
    validator: Validator | None = None
    importance: Importance = Importance.MEDIUM
    doc: str = ""
    group: str | None = None

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT


@dataclass
class ConfigValue:
    """The result of validating one field: its parsed value and any error messages."""

    name: str
    value: Any
    errors: list[str] = field(default_factory=list)


_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def _parse(key: ConfigKey, raw: Any) -> Any:
    """Parse one raw value to the key's type, raising ValueError saying what was expected."""
    if raw is None:
        return None
    t = key.type
    if t is Type.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise ValueError(f"a boolean (true/false), got {raw!r}")
    if t in (Type.INT, Type.LONG):
        if isinstance(raw, bool):
            raise ValueError(f"an integer, got {raw!r}")
        if isinstance(raw, int):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ValueError(f"an integer, got {raw!r}") from None
    if t is Type.DOUBLE:
        if isinstance(raw, bool):
            raise ValueError(f"a number, got {raw!r}")
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"a number, got {raw!r}") from None
    if t is Type.LIST:
        if isinstance(raw, (list, tuple)):
            return [str(v).strip() for v in raw if str(v).strip()]
        return [part.strip() for part in str(raw).split(",") if part.strip()]
    if t is Type.PASSWORD:
        return raw if isinstance(raw, Password) else Password(str(raw))
    if t is Type.CLASS:
        s = str(raw).strip()
        if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", s):
            raise ValueError(f"a dotted class path like package.module.ClassName, got {raw!r}")
        return s
    if not isinstance(raw, str):
        raise ValueError(f"a string, got {type(raw).__name__} {raw!r}")
    return raw


class ConfigDef:
    """A set of typed config fields. ``define`` returns ``self`` so definitions chain."""

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self._keys: dict[str, ConfigKey] = {}
        for k in keys:
            self._keys[k.name] = k

    def define(
        self,
        name: str,
        type: Type,
        default: Any = NO_DEFAULT,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        doc: str = "",
        group: str | None = None,
    ) -> ConfigDef:
        if name in self._keys:
            raise ConfigError(f"config field {name!r} is defined twice")
        self._keys[name] = ConfigKey(name, type, default, validator, importance, doc, group)
        return self

    def merge(self, other: ConfigDef) -> ConfigDef:
        """A new ConfigDef with this one's fields and the other's (this one wins on a clash)."""
        out = ConfigDef(other._keys.values())
        out._keys.update(self._keys)
        return out

    @property
    def keys(self) -> Mapping[str, ConfigKey]:
        return self._keys

    def names(self) -> list[str]:
        return list(self._keys)

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """Parse and validate every defined field; never raises for bad values."""
        out = []
        for key in self._keys.values():
            cv = ConfigValue(key.name, None)
            raw = props.get(key.name, NO_DEFAULT)
            if raw is NO_DEFAULT:
                if key.required:
                    cv.errors.append(f"missing required field ({key.type.value}): {key.doc or 'no default'}")
                    out.append(cv)
                    continue
                raw = key.default
            try:
                cv.value = _parse(key, raw)
                if key.validator is not None:
                    key.validator(key.name, cv.value)
            except ValueError as exc:
                cv.errors.append(f"expected {exc}")
            out.append(cv)
        return out

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values of every defined field (undefined fields are ignored here).

        Raises one :class:`ConfigError` naming every invalid field and what was expected.
        """
        values = self.validate(props)
        errors = {cv.name: "; ".join(cv.errors) for cv in values if cv.errors}
        if errors:
            raise ConfigError(errors=errors)
        return {cv.name: cv.value for cv in values}

    def password_fields(self) -> set[str]:
        return {k.name for k in self._keys.values() if k.type is Type.PASSWORD}


_SECRET_NAME = re.compile(r"(password|secret|sasl\.jaas\.config|ssl\.key|token|credential|user\.info)", re.I)


def mask(props: Mapping[str, Any], config_def: ConfigDef | None = None) -> dict[str, Any]:
    """A copy of a raw config safe to log, print or return: every PASSWORD field of ``config_def``,
    every :class:`Password` value, and every field whose name looks secret (``*password*``,
    ``*secret*``, ``sasl.jaas.config``, ``ssl.key*``, ``*token*``, ``*credential*``, ``*user.info``: a Schema
    Registry's ``basic.auth.user.info``, the rule of :mod:`connect_runtime.secrets` too) becomes ``[hidden]``."""
    secret = config_def.password_fields() if config_def is not None else set()
    out: dict[str, Any] = {}
    for name, value in props.items():
        if value is not None and (
            name in secret or isinstance(value, Password) or _SECRET_NAME.search(name)
        ):
            out[name] = HIDDEN
        else:
            out[name] = value
    return out


__all__ = [
    "HIDDEN",
    "NO_DEFAULT",
    "ConfigDef",
    "ConfigKey",
    "ConfigValue",
    "Importance",
    "Password",
    "Range",
    "Type",
    "ValidString",
    "Validator",
    "mask",
    "non_empty_string",
    "valid_regex",
]
