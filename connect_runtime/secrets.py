"""Which fields of a connector config are secret, by type and by name: one rule for every front end.

A field is secret when

- the connector's ``ConfigDef`` (or that of a converter, transform or predicate it names) declares
  it ``Type.PASSWORD``, whatever it is called (``signing.key``, ``api.key``);
- its value is a :class:`~connect_runtime.api.config.Password`;
- its name looks secret (``*password*``, ``*secret*``, ``*token*``, ``*credential*``,
  ``sasl.jaas.config``, ``ssl.key*``, ``*user.info``: the registry converters' ``basic.auth.user.info``), the
  runtime's own name rule;
- or a caller's extra name rule says so (the Airflow provider passes Airflow's
  ``should_hide_value_for_key``, so its ``[core] sensitive_var_conn_names`` apply too).

Plugin fields are prefixed as in Kafka Connect: ``key.converter.<field>``, ``value.converter.<field>``,
``header.converter.<field>``, ``transforms.<alias>.<field>``, ``predicates.<alias>.<field>``.

:func:`config_defs` imports the plugin classes a config names (their constructors do no I/O); a class
that cannot be imported is skipped (the name rules still apply; the run itself reports the bad class).
The CLI, the Airflow provider and the UI use :func:`mask_config` / :func:`secret_keys` so that a
``Type.PASSWORD`` value never reaches a log line, a rendered template, XCom, CLI output or an error.

Secrets also hide inside values that are not secret as a whole:

- the password in a URL's user-info (``postgresql://user:pw@host/db``, a SQLAlchemy URL, ``kafka://u:pw@h``)
  and a secret-named parameter of its query (``?sslpassword=...``), in any field and in any text (:func:`mask_urls`; the percent-decoded form counts too, since drivers quote it
  decoded);
- the values under secret-looking keys of an options map (``storage.options``: ``{"secret": ...}``), given as a
  mapping or as a JSON object string, at any depth.

:func:`secret_values` returns these too (for maskers and :func:`scrub`), :func:`mask_config` masks them in
place, and :func:`scrub` masks URL passwords in any text besides the values it is given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from connect_runtime.api.config import HIDDEN, ConfigDef, Password

NameRule = Callable[[str], bool]

_SECRET_NAME = re.compile(r"(password|secret|sasl\.jaas\.config|ssl\.key|token|credential|user\.info)", re.I)
_CONVERTERS = ("key.converter", "value.converter", "header.converter")


_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:@/\s?#\[\]'\"]*:)(?P<password>[^@\s/'\"]*)@")
"""``scheme://user:password@``: the password part of a URL's user-info (a ``:`` with nothing after it is none)."""


_QUERY_SECRET = re.compile(r"(?P<head>[?&][A-Za-z0-9_.\-]*(?:password|secret|token)[A-Za-z0-9_.\-]*=)"
                           r"(?P<password>[^&#\s'\"]*)", re.I)
"""``?sslpassword=...`` / ``&token=...``: a secret-named parameter in a URL's query (libpq's ``sslpassword``)."""


def url_passwords(text: str) -> list[str]:
    """The passwords in the user-info of every URL in ``text`` and in its secret-named query parameters
    (``?sslpassword=``), as written and percent-decoded."""
    out: list[str] = []
    found = list(_URL_PASSWORD.finditer(text))
    if "://" in text:
        found += _QUERY_SECRET.finditer(text)
    for m in found:
        pw = m.group("password")
        if pw:
            out.append(pw)
            decoded = unquote(pw)
            if decoded != pw:
                out.append(decoded)
    return out


def mask_urls(text: str, hidden: str = HIDDEN) -> str:
    """``text`` with the password of every URL's user-info replaced by ``hidden`` (the user name is kept, as
    Airflow shows connection URIs)."""
    if "://" not in text:
        return text
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + (hidden if m.group("password") else "") + "@", text)
    return _QUERY_SECRET.sub(lambda m: m.group("head") + (hidden if m.group("password") else ""), text)


def _json_object(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return None


def _secret_name(key: str, name_rule: NameRule | None) -> bool:
    return looks_secret(key) or (name_rule is not None and bool(name_rule(key)))


def _nested_secrets(value: Any, name_rule: NameRule | None, out: list[str]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            if _secret_name(str(k), name_rule) and not isinstance(v, (Mapping, list, tuple)):
                if v not in (None, ""):
                    out.append(v.value if isinstance(v, Password) else str(v))
            else:
                _nested_secrets(v, name_rule, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _nested_secrets(v, name_rule, out)
    elif isinstance(value, str):
        parsed = _json_object(value)
        if parsed is not None:
            _nested_secrets(parsed, name_rule, out)
        else:
            out.extend(url_passwords(value))


def _mask_nested(value: Any, name_rule: NameRule | None, hidden: str) -> Any:
    if isinstance(value, Mapping):
        return {k: (hidden if _secret_name(str(k), name_rule) and not isinstance(v, (Mapping, list, tuple))
                    and v not in (None, "") else _mask_nested(v, name_rule, hidden)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_mask_nested(v, name_rule, hidden) for v in value)
    if isinstance(value, str):
        parsed = _json_object(value)
        if isinstance(parsed, Mapping):
            masked = _mask_nested(parsed, name_rule, hidden)
            return value if masked == parsed else json.dumps(masked, separators=(",", ":"))
        return mask_urls(value, hidden)
    return value


def _plugin_def(path: Any) -> ConfigDef | None:
    """The ``ConfigDef`` of the plugin class at ``path`` (``None`` when it cannot be loaded)."""
    if not isinstance(path, str) or not path.strip():
        return None
    from connect_runtime.runtime.plugins import load_class

    try:
        cls = load_class(path.strip(), "class")
        definition = cls().config_def()
    except Exception:  # a bad class is the run's error to report; here only the name rules apply
        return None
    return definition if isinstance(definition, ConfigDef) else None


def _aliases(value: Any) -> list[str]:
    if isinstance(value, str):
        return [a.strip() for a in value.split(",") if a.strip()]
    if isinstance(value, Iterable):
        return [str(a).strip() for a in value if str(a).strip()]
    return []


def config_defs(props: Mapping[str, Any]) -> dict[str, ConfigDef]:
    """``{field prefix: ConfigDef}`` of every plugin ``props`` names: ``""`` for the connector
    (``connector.class``), ``"key.converter."`` ..., ``"transforms.<alias>."``, ``"predicates.<alias>."``."""
    out: dict[str, ConfigDef] = {}
    found = _plugin_def(props.get("connector.class"))
    if found is not None:
        out[""] = found
    for field in _CONVERTERS:
        found = _plugin_def(props.get(field))
        if found is not None:
            out[field + "."] = found
    for group in ("transforms", "predicates"):
        for alias in _aliases(props.get(group)):
            found = _plugin_def(props.get(f"{group}.{alias}.type"))
            if found is not None:
                out[f"{group}.{alias}."] = found
    return out


def password_fields(defs: Mapping[str, ConfigDef]) -> set[str]:
    """Full config names of every ``Type.PASSWORD`` field of ``defs`` (as :func:`config_defs` returns)."""
    return {prefix + name for prefix, definition in defs.items() for name in definition.password_fields()}


def looks_secret(name: str) -> bool:
    """The runtime's name rule (``*password*``, ``*secret*``, ``*token*``, ...)."""
    return bool(_SECRET_NAME.search(name))


def secret_keys(props: Mapping[str, Any], defs: Mapping[str, ConfigDef] | None = None, *,
                name_rule: NameRule | None = None) -> set[str]:
    """The fields of ``props`` whose values are secret (see the module docstring).

    :param defs: the plugins' ``ConfigDef`` by prefix; ``None`` loads them with :func:`config_defs`.
    :param name_rule: an extra name rule (e.g. Airflow's ``should_hide_value_for_key``).
    """
    typed = password_fields(config_defs(props) if defs is None else defs)
    out = set()
    for name, value in props.items():
        if value is None:
            continue
        key = str(name)
        if (key in typed or isinstance(value, Password) or looks_secret(key)
                or (name_rule is not None and name_rule(key))):
            out.add(key)
    return out


def secret_values(props: Mapping[str, Any], defs: Mapping[str, ConfigDef] | None = None, *,
                  name_rule: NameRule | None = None) -> list[str]:
    """The secret values of ``props`` as strings (to register with a log masker)."""
    out: list[str] = []
    secret = secret_keys(props, defs, name_rule=name_rule)
    for key in sorted(secret):
        value = props[key]
        text = value.value if isinstance(value, Password) else value
        if text not in (None, ""):
            out.append(text if isinstance(text, str) else str(text))
    for key in sorted(set(map(str, props)) - secret):  # URL passwords and options maps inside other fields
        _nested_secrets(props[key], name_rule, out)
    return list(dict.fromkeys(out))


def mask_config(props: Mapping[str, Any], defs: Mapping[str, ConfigDef] | None = None, *,
                name_rule: NameRule | None = None, hidden: str = HIDDEN) -> dict[str, Any]:
    """A copy of ``props`` safe to print, log or return: every secret field's value is ``hidden``.

    :param defs: the plugins' ``ConfigDef`` by prefix; ``None`` loads them with :func:`config_defs`.
    :param name_rule: an extra name rule (e.g. Airflow's ``should_hide_value_for_key``).
    """
    secret = secret_keys(props, defs, name_rule=name_rule)
    return {str(k): (hidden if str(k) in secret else _mask_nested(v, name_rule, hidden)) for k, v in props.items()}


def mask_value(value: Any, *, name_rule: NameRule | None = None, hidden: str = HIDDEN) -> Any:
    """One value with the secrets inside it masked: URL passwords, and secret-named entries of a mapping or of
    a JSON object string (at any depth)."""
    return _mask_nested(value, name_rule, hidden)


def scrub(text: str, values: Iterable[str], hidden: str = HIDDEN) -> str:
    """``text`` with every occurrence of each secret value replaced by ``hidden``, and every URL's password
    (for error messages and anything else shown)."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, hidden)
    return mask_urls(text, hidden)


__all__ = ["config_defs", "looks_secret", "mask_config", "mask_urls", "mask_value", "password_fields", "scrub",
           "secret_keys", "secret_values", "url_passwords"]
