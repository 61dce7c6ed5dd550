"""Authentication of the Kafka backend's clients: the ``oauth_cb`` token callable named by a dotted path, and the
recognition of a broker that refuses this client (wrong password, untrusted CA, refused client certificate).

``oauth_cb`` follows confluent-kafka's convention (called with the ``sasl.oauthbearer.config`` string, returns
``(token, expiry in epoch seconds)``); in the backend's settings it is a callable or, so that it can live in a
JSON connection extra, the dotted path of one (``package.module.function``), imported when the backend is opened,
in the worker: the callable itself never travels in a config, a plan or XCom. A path that does not import or names
something that is not callable is one :class:`~connect_runtime.api.errors.ConfigError` naming ``oauth_cb``. The
tokens it returns join the backend's secrets (redacted from every message).

librdkafka keeps reconnecting to a broker that refuses it and reports each refusal through the clients' error
callback only; a blocking call then ends with a bare "transport failure" after its whole bound.
:func:`refusal_cause` tells a refusal from an unreachable broker, so the backend can fail at the first one,
naming the cause.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import confluent_kafka as ck

from connect_runtime.api.errors import ConfigError

CALLABLE_SETTINGS = ("oauth_cb",)
"""Settings whose value is a callable (or the dotted path of one)."""

_SASL_CODES = frozenset({ck.KafkaError._AUTHENTICATION, ck.KafkaError.SASL_AUTHENTICATION_FAILED})
_TLS_CODES = frozenset({ck.KafkaError._SSL, ck.KafkaError._TRANSPORT})


def resolve_callable(name: str, value: Any) -> Callable[..., Any]:
    """``value`` if callable, else the callable its dotted path names; one ConfigError naming ``name`` if not."""
    if callable(value):
        return value  # type: ignore[no-any-return]
    path = value.strip() if isinstance(value, str) else ""
    module_name, _, attribute = path.replace(":", ".").rpartition(".")
    if not module_name or not attribute:
        raise ConfigError(errors={name: f"expected a callable or its dotted path (package.module.function), got "
                                        f"{type(value).__name__} {value!r}"})
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(errors={name: f"{path!r} cannot be imported: {exc}"}) from exc
    except Exception as exc:  # the module's own code failed while importing: say so, naming the path
        raise ConfigError(errors={name: f"importing {path!r} failed: {type(exc).__name__}: {exc}"}) from exc
    target = getattr(module, attribute, None)
    if target is None:
        raise ConfigError(errors={name: f"module {module_name!r} has no attribute {attribute!r} (from {path!r})"})
    if not callable(target):
        raise ConfigError(errors={name: f"{path!r} is a {type(target).__name__}, not a callable"})
    return target  # type: ignore[no-any-return]


def token_recorder(oauth_cb: Callable[..., Any], secrets: list[str],
                   failures: list[tuple[str, bool]]) -> Callable[[str], Any]:
    """``oauth_cb`` with each token it returns appended to ``secrets`` (so no message shows it), and what went
    wrong appended to ``failures`` (confluent-kafka only says "OAuth token not set" after waiting for a token):
    ``(why, False)`` when it raised (its token source may come back), ``(why, True)`` when it returned something
    else than ``(token, expiry, ...)`` (a defect of the callable: a configuration error)."""
    name = getattr(oauth_cb, "__qualname__", type(oauth_cb).__name__)

    def call(config: str) -> Any:
        try:
            result = oauth_cb(config)
        except Exception as exc:  # the client only learns that no token came: keep why for its error
            failures.append((f"oauth_cb {name} raised {type(exc).__name__}: {exc}", False))
            raise
        if not (isinstance(result, tuple) and len(result) >= 2 and isinstance(result[0], str)
                and isinstance(result[1], (int, float))):
            why = f"oauth_cb {name} returned a {type(result).__name__}, expected (token, expiry epoch seconds)"
            failures.append((why, True))
            raise TypeError(why)
        if result[0] not in secrets:
            secrets.append(result[0])
        return result

    return call


def refusal_cause(err: ck.KafkaError) -> str | None:
    """What a client error says about a broker refusing this client, or None when it is not a refusal (a broker
    down, a timeout: those pass or are bounded elsewhere)."""
    text = err.str()
    lowered = text.lower()
    if err.code() in _SASL_CODES:
        return (f"authentication failed ({text}): check sasl.mechanism, sasl.username and sasl.password, or the "
                "OAUTHBEARER token source")
    if err.code() not in _TLS_CODES:
        return None
    if "certificate verify failed" in lowered:
        return (f"the broker's certificate is not trusted ({text}): check ssl.ca.location / ssl.ca.pem and that "
                "the certificate names the host")
    if "alert" in lowered and "certificate" in lowered:
        return (f"the broker refused this client's certificate ({text}): expired, revoked, or not signed by a CA "
                "the broker trusts (ssl.certificate.*, ssl.key.*)")
    return None  # an SSL read failing while a broker shuts down ("unexpected eof") is no refusal


__all__ = ["CALLABLE_SETTINGS", "refusal_cause", "resolve_callable", "token_recorder"]
