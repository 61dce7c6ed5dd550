"""Schema Registry settings shared by the Avro, JSON Schema and Protobuf converters (format-independent).

Config names are Kafka Connect's / Confluent's (a converter sees them with its ``key.converter.`` /
``value.converter.`` prefix removed):

- ``schema.registry.url`` (list, required): the registry's base URLs, tried in turn. ``mock://<scope>`` gives
  confluent-kafka's in-memory :class:`MockSchemaRegistryClient` (what ``SchemaRegistryClient.new_client`` does for a
  ``mock://`` URL). confluent-kafka gives each mock client a registry of its own; here, as in Confluent's Java
  ``MockSchemaRegistry.getClientForScope``, every converter naming the same scope in this process shares one mock
  registry (the key and the value converter, a source run and the sink run reading its topic). :func:`drop_mock_scope`
  forgets one (tests).
- ``basic.auth.credentials.source``: ``URL`` (default: the user-info of the URL, ``http://user:pw@host``) or
  ``USER_INFO`` (``basic.auth.user.info``). ``SASL_INHERIT`` is not supported (confluent-kafka cannot).
- ``basic.auth.user.info`` (PASSWORD): ``user:password``. Neither it nor a password inside a URL ever reaches a log
  line or an error: :meth:`RegistrySettings.scrub` hides them in any text (a converter passes every message through it).
- ``auto.register.schemas`` (default true), ``use.latest.version`` (default false), ``normalize.schemas``
  (default false): passed to confluent-kafka's serializers. Confluent's Java serializer lets ``auto.register.schemas``
  win silently when both it and ``use.latest.version`` are true; confluent-kafka refuses the pair, and so does this
  module, with a config error naming both (``use.latest.version=true`` needs ``auto.register.schemas=false``).
- ``key.subject.name.strategy`` / ``value.subject.name.strategy``: ``TopicNameStrategy`` (default,
  ``<topic>-key`` / ``<topic>-value``), ``RecordNameStrategy`` (the record's full name),
  ``TopicRecordNameStrategy`` (``<topic>-<full name>``); short names or Confluent's class names
  (``io.confluent.kafka.serializers.subject.TopicNameStrategy``).
- ``http.read.timeout.ms`` (Confluent's client name, default 60000 as there): the bound on each registry request,
  connecting included (confluent-kafka's client takes one timeout, and its own default is none at all; Confluent's
  separate ``http.connect.timeout.ms`` has no equivalent). confluent-kafka retries a request that failed in transport
  or with 408 / 429 / 5xx up to 3 times with backoff, so a registry that does not answer fails a call in bounded time.
- ``schema.registry.ssl.ca.location``, ``schema.registry.ssl.certificate.location``,
  ``schema.registry.ssl.key.location``, ``schema.registry.ssl.key.password`` (PASSWORD): PEM files for TLS, as
  confluent-kafka takes them (Java's JKS trust stores have no equivalent here). The registry's certificate is
  checked against that CA (the system's CAs when unset) and must name the URL's host, as Confluent's client does.
  A certificate failure is not retried (confluent-kafka retries every transport error, for seconds): the first
  request fails with a :class:`ConfigError` naming the registry and what was wrong with which certificate; so
  does a registry that refuses the credentials (HTTP 401 / 403), which Confluent's serializers also turn into a
  configuration error (``InvalidConfigurationException``), not a bad record.

:func:`registry_settings` parses a converter's config into a :class:`RegistrySettings`, which builds the client
(:meth:`~RegistrySettings.client`), the serializer and deserializer configs
(:meth:`~RegistrySettings.serializer_conf`, :meth:`~RegistrySettings.deserializer_conf`), names the subject a
record's schema goes under (:meth:`~RegistrySettings.subject`) and turns a registry failure into the runtime's error
(:meth:`~RegistrySettings.failure`: :class:`ConfigError` for a certificate or the credentials refused,
:class:`RetriableError` for a registry that cannot be reached or answers 5xx / 408 / 429, :class:`DataError`
otherwise; the registry's URL named, secrets hidden).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)

# the httpx (or httpx2) the registry client uses, for telling a transport failure from a registry answer
from confluent_kafka.schema_registry.common._httpx_compat import httpx
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from connect_runtime.api.config import HIDDEN, ConfigDef, Importance, Password, Range, Type, ValidString
from connect_runtime.api.errors import ConfigError, ConnectError, DataError, RetriableError
from connect_runtime.api.tls import tls_failure

_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
SubjectStrategy = Callable[[SerializationContext | None, str | None], str | None]
STRATEGIES: dict[str, SubjectStrategy] = {
    "TopicNameStrategy": topic_subject_name_strategy,
    "RecordNameStrategy": record_subject_name_strategy,
    "TopicRecordNameStrategy": topic_record_subject_name_strategy,
}
"""Subject name strategies by short name (Confluent's class names are these under ``io.confluent.kafka.serializers.
subject.``)."""


def _strategy_name(value: str) -> str:
    short = value.strip()
    if short.startswith(_STRATEGY_PACKAGE):
        short = short[len(_STRATEGY_PACKAGE):]
    return short


def _valid_strategy(name: str, value: Any) -> None:
    if value is not None and _strategy_name(str(value)) not in STRATEGIES:
        raise ValueError(
            f"one of {', '.join(STRATEGIES)} (or {_STRATEGY_PACKAGE}<name>), got {value!r}")


def _valid_urls(name: str, value: Any) -> None:
    if not value:
        raise ValueError("at least one URL (http://host:8081, https://..., or mock://<scope>)")
    mocks = [u for u in value if u.startswith("mock://")]
    for url in value:
        if not url.startswith(("http://", "https://", "mock://")):
            raise ValueError(f"http://, https:// or mock:// URLs, got {_mask_url(url)!r}")
    if mocks and len(value) > 1:
        raise ValueError("a single mock://<scope> URL, not mixed with others")


def _mask_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(parts.password, HIDDEN, 1)
    return url


REGISTRY_CONFIG = (
    ConfigDef()
    .define("schema.registry.url", Type.LIST, validator=_valid_urls, importance=Importance.HIGH,
            doc="Schema Registry base URLs, comma separated; mock://<scope> for an in-memory registry shared by "
                "every converter naming the same scope in this process.")
    .define("basic.auth.credentials.source", Type.STRING, default="URL",
            validator=ValidString("URL", "USER_INFO", case_sensitive=True),
            doc="Where the registry's basic auth credentials come from: URL (the URL's user-info) or USER_INFO "
                "(basic.auth.user.info).")
    .define("basic.auth.user.info", Type.PASSWORD, default=None,
            doc="user:password for the registry, with basic.auth.credentials.source=USER_INFO. Never logged.")
    .define("auto.register.schemas", Type.BOOLEAN, default=True,
            doc="Register a record's schema under its subject when it is not there yet.")
    .define("use.latest.version", Type.BOOLEAN, default=False,
            doc="Write with (and read into) the subject's latest registered schema; needs "
                "auto.register.schemas=false.")
    .define("normalize.schemas", Type.BOOLEAN, default=False,
            doc="Normalize schemas before registering or looking them up.")
    .define("key.subject.name.strategy", Type.STRING, default="TopicNameStrategy", validator=_valid_strategy,
            doc="Subject of key schemas: TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy.")
    .define("value.subject.name.strategy", Type.STRING, default="TopicNameStrategy", validator=_valid_strategy,
            doc="Subject of value schemas: TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy.")
    .define("http.read.timeout.ms", Type.INT, default=60000, validator=Range.at_least(1),
            doc="Bound on each Schema Registry request, connecting included.")
    .define("schema.registry.ssl.ca.location", Type.STRING, default=None, doc="CA certificates (PEM) to trust.")
    .define("schema.registry.ssl.certificate.location", Type.STRING, default=None,
            doc="Client certificate (PEM) for mutual TLS.")
    .define("schema.registry.ssl.key.location", Type.STRING, default=None, doc="Client key (PEM) for mutual TLS.")
    .define("schema.registry.ssl.key.password", Type.PASSWORD, default=None, doc="Password of the client key.")
)
"""The Schema Registry fields every registry converter declares (merge into the converter's own ``ConfigDef``)."""

_SSL_FIELDS = {
    "schema.registry.ssl.ca.location": "ssl.ca.location",
    "schema.registry.ssl.certificate.location": "ssl.certificate.location",
    "schema.registry.ssl.key.location": "ssl.key.location",
}

_MOCKS: dict[str, SchemaRegistryClient] = {}
_MOCKS_LOCK = threading.Lock()


def drop_mock_scope(scope: str) -> None:
    """Forget the mock registry of ``scope`` (``mock://<scope>``); the next converter naming it starts empty."""
    with _MOCKS_LOCK:
        _MOCKS.pop(scope, None)


def _secrets(urls: list[str], user_info: Password | None, key_password: Password | None) -> tuple[str, ...]:
    out: list[str] = []
    for url in urls:
        pw = urlsplit(url).password
        if pw:
            out += [pw, unquote(pw)]
    for secret in (user_info, key_password):
        if secret is not None and secret.value:
            out.append(secret.value)
            if ":" in secret.value:
                out.append(secret.value.split(":", 1)[1])
    # longest first, so a secret containing another is hidden whole
    return tuple(sorted({s for s in out if s}, key=len, reverse=True))


@dataclass(frozen=True)
class RegistrySettings:
    """A converter's parsed Schema Registry settings (see the module docstring). ``repr`` shows no secret."""

    urls: tuple[str, ...] = field(repr=False)
    credentials_source: str
    user_info: Password | None = field(repr=False)
    auto_register: bool
    use_latest_version: bool
    normalize: bool
    key_strategy: str
    value_strategy: str
    timeout_ms: int
    ssl: Mapping[str, Any] = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False)

    def __repr__(self) -> str:
        return (f"RegistrySettings(urls={[_mask_url(u) for u in self.urls]}, credentials_source="
                f"{self.credentials_source!r}, auto_register={self.auto_register}, use_latest_version="
                f"{self.use_latest_version}, key_strategy={self.key_strategy!r}, value_strategy={self.value_strategy!r})")

    @property
    def is_mock(self) -> bool:
        return self.urls[0].startswith("mock://")

    def strategy(self, is_key: bool) -> SubjectStrategy:
        """confluent-kafka's subject name function for keys or values."""
        return STRATEGIES[self.key_strategy if is_key else self.value_strategy]

    def subject(self, topic: str, is_key: bool, record_name: str | None) -> str | None:
        """The subject a schema named ``record_name`` (full name; ``None`` for an unnamed one) goes under for
        ``topic``; ``None`` when the strategy needs a name and there is none."""
        ctx = SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)
        return self.strategy(is_key)(ctx, record_name)

    def client_conf(self) -> dict[str, Any]:
        """The ``SchemaRegistryClient`` config (holds secrets: never log it)."""
        conf: dict[str, Any] = {"url": ",".join(self.urls), **self.ssl}
        if self.credentials_source == "USER_INFO" and self.user_info is not None:
            conf["basic.auth.user.info"] = self.user_info.value
        if not self.is_mock:
            conf["timeout"] = self.timeout_ms / 1000
        return conf

    def client(self) -> SchemaRegistryClient:
        """A registry client: the shared mock of a ``mock://`` scope, else a new HTTP client."""
        if self.is_mock:
            scope = self.urls[0][len("mock://"):]
            with _MOCKS_LOCK:
                found = _MOCKS.get(scope)
                if found is None:
                    found = _MOCKS[scope] = SchemaRegistryClient.new_client({"url": self.urls[0]})
                return found
        try:
            client = SchemaRegistryClient(self.client_conf())
        except (ValueError, TypeError, OSError) as exc:
            raise ConfigError(f"cannot build the Schema Registry client: {self.scrub(str(exc))}") from None
        _fail_fast_on_tls(client)
        return client

    def serializer_conf(self, is_key: bool) -> dict[str, Any]:
        """The config of confluent-kafka's ``AvroSerializer`` / ``JSONSerializer`` / ``ProtobufSerializer``."""
        return {
            "auto.register.schemas": self.auto_register,
            "use.latest.version": self.use_latest_version,
            "normalize.schemas": self.normalize,
            "subject.name.strategy": self.strategy(is_key),
        }

    def deserializer_conf(self, is_key: bool) -> dict[str, Any]:
        """The config of confluent-kafka's deserializers (``use.latest.version``: read into the latest schema)."""
        return {"use.latest.version": self.use_latest_version, "subject.name.strategy": self.strategy(is_key)}

    def scrub(self, text: str) -> str:
        """``text`` with every secret of these settings (the user-info, its password, URL passwords, the key
        password) replaced by ``[hidden]``."""
        return _scrub(text, self.secrets)

    @property
    def where(self) -> str:
        """The registry's URLs as shown in messages (a URL's password hidden)."""
        return ", ".join(map(_mask_url, self.urls))

    def failure(self, what: str, exc: BaseException) -> ConnectError:
        """The runtime's error for a registry call that failed: ``what`` says what was being done (the converter,
        topic, key/value, subject); the message names the registry's URL and the cause.

        - A TLS handshake that failed for a certificate (the registry's not trusted, expired or for another host;
          this client's refused or missing under mutual TLS) or credentials the registry refused (HTTP 401 / 403)
          give a :class:`ConfigError`: the connection's settings are wrong, not the record, so no
          ``errors.tolerance`` skips it and no retry mends it.
        - A registry that could not be reached otherwise, or answered 5xx / 408 / 429, gives a
          :class:`RetriableError`; any other answer a :class:`DataError`.

        Secrets are scrubbed; the caller chains nothing (``from None``) so no unscrubbed text travels with it."""
        error: type[ConnectError]
        tls = tls_failure(exc)
        if tls is not None:
            text, error = (f"{what}: the TLS handshake with the Schema Registry at {self.where} failed: {tls}; "
                           f"{_TLS_HINT}"), ConfigError
        elif isinstance(exc, SchemaRegistryError) and exc.http_status_code in (401, 403):
            status = exc.http_status_code
            text, error = (f"{what}: the Schema Registry at {self.where} refused the credentials (HTTP {status} "
                           f"{exc.error_message}): {_AUTH_HINT[status]}"), ConfigError
        elif isinstance(exc, SchemaRegistryError):
            status = exc.http_status_code
            text = (f"{what}: the Schema Registry at {self.where} answered {exc.error_message} (HTTP {status}, code "
                    f"{exc.error_code})")
            error = RetriableError if status >= 500 or status in (408, 429) else DataError
        elif isinstance(exc, (httpx.HTTPError, OSError)):
            text, error = (f"{what}: the Schema Registry at {self.where} could not be reached "
                           f"({type(exc).__name__}: {exc})"), RetriableError
        else:
            text, error = f"{what}: {type(exc).__name__}: {exc}", DataError
        return error(self.scrub(text))


_TLS_HINT = ("check schema.registry.ssl.ca.location (the CA that signed the registry's certificate; the system's CAs "
             "when unset) and, for mutual TLS, schema.registry.ssl.certificate.location / key.location")
_AUTH_HINT = {401: "check basic.auth.user.info (with basic.auth.credentials.source=USER_INFO) or the user-info of "
                   "schema.registry.url",
              403: "the user is known but may not do this: check its permissions on the registry"}


class _TlsRefused(Exception):
    """A TLS handshake that no retry mends (see :func:`~connect_runtime.api.tls.tls_failure`), raised out of
    confluent-kafka's retry loop, which retries every transport error (3 times, with up to 7 s of backoff)."""


def _fail_fast_on_tls(client: SchemaRegistryClient) -> None:
    """Make ``client`` raise a certificate failure at once instead of retrying it: its httpx session's ``request``
    re-raises such a failure as :class:`_TlsRefused` (not an ``httpx.TransportError``, the only thing the retry
    loop retries), chained to the original. The session is confluent-kafka's private attribute
    (``_rest_client.session``, confluent-kafka 2.16): without it the client keeps its retries, slower, still correct."""
    session: Any = getattr(getattr(client, "_rest_client", None), "session", None)
    request = getattr(session, "request", None)
    if session is None or request is None:
        return

    def request_failing_fast(*args: Any, **kwargs: Any) -> Any:
        try:
            return request(*args, **kwargs)
        except httpx.TransportError as exc:
            text = tls_failure(exc)
            if text is not None:
                raise _TlsRefused(text) from exc
            raise

    session.request = request_failing_fast


def registry_settings(values: Mapping[str, Any]) -> RegistrySettings:
    """:class:`RegistrySettings` from a converter's parsed config (``REGISTRY_CONFIG.parse`` or a ``ConfigDef``
    merged with it); raises one :class:`ConfigError` naming each inconsistent field."""
    urls = [u.rstrip("/") for u in values["schema.registry.url"]]
    source = values["basic.auth.credentials.source"]
    user_info: Password | None = values["basic.auth.user.info"]
    errors: dict[str, str] = {}
    url_has_user = any(urlsplit(u).username or urlsplit(u).password for u in urls)
    if source == "USER_INFO":
        if user_info is None or ":" not in user_info.value:
            errors["basic.auth.user.info"] = "user:password (basic.auth.credentials.source is USER_INFO)"
        if url_has_user:
            errors["schema.registry.url"] = ("no user-info in the URL when basic.auth.credentials.source is "
                                             "USER_INFO (the credentials would be given twice)")
    elif user_info is not None:
        errors["basic.auth.credentials.source"] = ("USER_INFO when basic.auth.user.info is set (the default, URL, "
                                                   "ignores basic.auth.user.info)")
    if values["use.latest.version"] and values["auto.register.schemas"]:
        errors["use.latest.version"] = "auto.register.schemas=false too (the two cannot both be true)"
    cert = values["schema.registry.ssl.certificate.location"]
    if (values["schema.registry.ssl.key.location"] or values["schema.registry.ssl.key.password"]) and not cert:
        errors["schema.registry.ssl.certificate.location"] = "a client certificate when a client key is given"
    secrets = _secrets(urls, user_info, values["schema.registry.ssl.key.password"])
    if errors:
        raise ConfigError(errors={k: _scrub(v, secrets) for k, v in errors.items()})
    ssl: dict[str, Any] = {conf: values[name] for name, conf in _SSL_FIELDS.items() if values[name]}
    key_password: Password | None = values["schema.registry.ssl.key.password"]
    if key_password is not None:
        ssl["ssl.key.password"] = key_password.value
    return RegistrySettings(
        urls=tuple(urls), credentials_source=source, user_info=user_info,
        auto_register=values["auto.register.schemas"], use_latest_version=values["use.latest.version"],
        normalize=values["normalize.schemas"],
        key_strategy=_strategy_name(values["key.subject.name.strategy"]),
        value_strategy=_strategy_name(values["value.subject.name.strategy"]),
        timeout_ms=values["http.read.timeout.ms"],
        ssl=ssl, secrets=secrets,
    )


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, HIDDEN)
    return text


__all__ = ["REGISTRY_CONFIG", "STRATEGIES", "RegistrySettings", "drop_mock_scope", "registry_settings"]
