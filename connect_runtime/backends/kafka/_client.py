"""What every client of one Kafka cluster shares: the backend's settings parsed, each client's librdkafka config
(``defaults`` < common settings < ``<kind>.override.*`` < forced; secret values never logged), client creation,
and the translation of confluent-kafka errors into :mod:`connect_runtime.api.errors` at the backend's edge
(an unreachable cluster is a :class:`BackendUnavailableError` naming the bootstrap servers)."""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import confluent_kafka as ck

from connect_runtime.api.errors import AuthorizationError, BackendError, BackendUnavailableError, ConfigError
from connect_runtime.backends.kafka._access import Need, denied
from connect_runtime.backends.kafka._auth import (
    CALLABLE_SETTINGS,
    refusal_cause,
    resolve_callable,
    token_recorder,
)
from connect_runtime.backends.kafka._logs import _QUIET, _librdkafka_log

log = logging.getLogger(__name__)

DEFAULT_CLUSTER_ID = "connect-cluster"
DEFAULT_OFFSETS_TOPIC = "connect-offsets"

# settings of this backend (everything else is a librdkafka property)
_OWN_SETTINGS = {
    "cluster.id": DEFAULT_CLUSTER_ID,
    "connect.timeout.ms": 10_000,
    "offset.storage.topic": DEFAULT_OFFSETS_TOPIC,
    "offset.storage.partitions": 25,
    "offset.storage.replication.factor": -1,
    "offset.storage.read.timeout.ms": 30_000,
    "group.id.prefix": "connect-",
}
_PREFIXES = ("producer.override.", "consumer.override.", "admin.override.")
_TOPIC_CREATION = "topic.creation.default."
_SECRET_WORDS = ("password", "secret", "token", "key", "jaas", "credential")

_FENCED_CODES = frozenset(
    {ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED, ck.KafkaError.INVALID_PRODUCER_EPOCH,
     ck.KafkaError.TRANSACTION_COORDINATOR_FENCED}
)
_UNREACHABLE_CODES = frozenset(
    {ck.KafkaError._TRANSPORT, ck.KafkaError._ALL_BROKERS_DOWN, ck.KafkaError._TIMED_OUT,
     ck.KafkaError._MSG_TIMED_OUT, ck.KafkaError.REQUEST_TIMED_OUT, ck.KafkaError._TIMED_OUT_QUEUE}
)
# consumer errors that pass on their own (librdkafka reconnects and refetches)
_TRANSIENT_CONSUMER_CODES = _UNREACHABLE_CODES | {ck.KafkaError._PARTITION_EOF}
# what a consumer without a group of its own (a reader: assigned partitions, explicit offsets, never a commit) leaves
# aside: confluent-kafka requires a group.id, with which librdkafka looks up the group's coordinator (FindCoordinator,
# Describe on the group); a principal without any group ACL is refused that lookup, which a reader never needs
_GROUPLESS_CONSUMER_CODES = _TRANSIENT_CONSUMER_CODES | {ck.KafkaError.GROUP_AUTHORIZATION_FAILED}

_EOF = ck.KafkaError._PARTITION_EOF
_NOT_AVAILABLE = ck.TIMESTAMP_NOT_AVAILABLE


def bounded_call(fn: Callable[[], Any], bound: float, name: str) -> tuple[threading.Thread | None, Any]:
    """``fn()`` on a daemon thread of its own, waited for ``bound`` seconds, for librdkafka calls that may not return
    in their own time: ``(None, result)``, or its exception raised here, or ``(thread, None)`` when it still runs
    (the caller leaves the client to that thread: destroying a handle under a call frees what the call uses)."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # handed to the caller's thread, which raises it
            outcome.append((False, exc))

    call = threading.Thread(target=run, name=name, daemon=True)
    call.start()
    call.join(bound)
    if call.is_alive():
        return call, None
    ok, value = outcome[0]
    if not ok:
        raise value
    return None, value


def _is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(w in lowered for w in _SECRET_WORDS) and not lowered.endswith(".location")


def _kafka_error(exc: BaseException) -> ck.KafkaError | None:
    if isinstance(exc, ck.KafkaException) and exc.args and isinstance(exc.args[0], ck.KafkaError):
        return exc.args[0]
    return None


def _unwrap(exc: BaseException) -> BaseException:
    """The KafkaException behind a SystemError (confluent-kafka raises one when a callback runs while a
    fatal client error is pending; the KafkaException is its cause)."""
    if isinstance(exc, SystemError):
        inner = exc.__cause__ or exc.__context__
        if isinstance(inner, ck.KafkaException):
            return inner
    return exc


def _describe(exc: BaseException) -> str:
    err = _kafka_error(exc)
    if err is not None:
        return f"{err.name()}: {err.str()}"
    return f"{type(exc).__name__}: {exc}"


def _consume(consumer: Any, max_messages: int, timeout: float) -> list[Any]:
    """Up to ``max_messages`` messages, returning as soon as any are there (``consume`` alone waits
    for the whole count or the whole timeout)."""
    msgs: list[Any] = consumer.consume(max_messages, 0)
    if msgs or timeout <= 0:
        return msgs
    first = consumer.poll(timeout)
    if first is None:
        return []
    if max_messages > 1:
        more: list[Any] = consumer.consume(max_messages - 1, 0)
        if more:
            more.insert(0, first)
            return more
    return [first]


def _nogroup() -> str:
    """The group.id of a reader (a consumer that never commits nor reads group offsets): a random one, which needs
    no ACL (see :data:`_GROUPLESS_CONSUMER_CODES`)."""
    return f"pyconnect-nogroup-{uuid.uuid4().hex}"


class _Clients:
    """The settings of one backend (see the package docstring) and the clients made from them."""

    def __init__(self, bootstrap: str, settings: Mapping[str, Any]) -> None:
        self.bootstrap = bootstrap
        own: dict[str, Any] = dict(_OWN_SETTINGS)
        common: dict[str, Any] = {}
        overrides: dict[str, dict[str, Any]] = {p: {} for p in _PREFIXES}
        topic_creation: dict[str, str] = {}
        for raw_name, value in settings.items():
            name = str(raw_name)
            if name in own:
                own[name] = value
            elif name.startswith(_TOPIC_CREATION):
                topic_creation[name[len(_TOPIC_CREATION):]] = str(value)
            elif name.startswith(_PREFIXES):
                prefix = next(p for p in _PREFIXES if name.startswith(p))
                overrides[prefix][name[len(prefix):]] = value
            elif name == "bootstrap.servers":
                if str(value) != bootstrap:
                    log.warning("kafka backend: setting bootstrap.servers is ignored; the URL names the servers")
            else:
                common[name] = value
        errors: dict[str, str] = {}

        def number(name: str, minimum: int) -> int:
            try:
                v = int(own[name])
            except (TypeError, ValueError):
                errors[name] = f"expected an integer, got {own[name]!r}"
                return int(str(_OWN_SETTINGS[name]))
            if v < minimum:
                errors[name] = f"expected a value of at least {minimum}, got {v}"
            return v

        self.connect_timeout = number("connect.timeout.ms", 1) / 1000
        self.offsets_partitions = number("offset.storage.partitions", 1)
        self.offsets_replication = number("offset.storage.replication.factor", -1)
        self.read_timeout = number("offset.storage.read.timeout.ms", 1) / 1000
        self.default_partitions = 1
        if "partitions" in topic_creation:
            try:
                self.default_partitions = int(topic_creation.pop("partitions"))
            except ValueError:
                errors["topic.creation.default.partitions"] = "expected an integer"
        try:
            self.topic_replication = int(topic_creation.pop("replication.factor", -1))
        except ValueError:
            errors["topic.creation.default.replication.factor"] = "expected an integer"
            self.topic_replication = -1
        self.topic_configs = topic_creation
        cid = own["cluster.id"]
        self.cluster_id: str | None = None if cid is None or str(cid) == "" else str(cid)
        self.default_offsets_topic = str(own["offset.storage.topic"] or DEFAULT_OFFSETS_TOPIC)
        self.group_id_prefix = str(own["group.id.prefix"] if own["group.id.prefix"] is not None else "connect-")
        if errors:
            raise ConfigError(errors=errors)
        self._token_failures: list[tuple[str, bool]] = []
        self._secrets = [str(v) for k, v in list(common.items()) + [
            (k, v) for o in overrides.values() for k, v in o.items()] if _is_secret(k) and str(v)]
        for prefix, conf in [("", common), *overrides.items()]:  # in the worker, never in a config or a plan
            for name in CALLABLE_SETTINGS:
                if name in conf:
                    conf[name] = token_recorder(resolve_callable(prefix + name, conf[name]), self._secrets,
                                                self._token_failures)
        self._common = common
        self._overrides = overrides
        self._refused: tuple[float, str] | None = None  # (monotonic time, cause) of the latest refusal

    def redact(self, text: str) -> str:
        """``text`` with every secret setting value replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def client_config(self, kind: str, defaults: Mapping[str, Any] | None = None,
                      forced: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """librdkafka config of one client: ``defaults`` < common settings < ``<kind>.override.*`` <
        ``forced``."""
        conf: dict[str, Any] = {
            "client.id": "pyconnect",
            "socket.connection.setup.timeout.ms": max(1000, int(self.connect_timeout * 1000)),
            "logger": _librdkafka_log,
            "error_cb": self.error_cb,
        }
        conf.update(defaults or {})
        conf.update(self._common)
        overrides = self._overrides[f"{kind}.override."]
        conf.update(overrides)
        for name, value in (forced or {}).items():
            if name in conf and name not in (defaults or {}) and str(conf[name]).lower() != str(value).lower():
                log.warning("kafka backend: %s client setting %s is ignored; it is always %s", kind, name,
                            "<set>" if _is_secret(name) else value)
            conf[name] = value
        conf["bootstrap.servers"] = self.bootstrap
        return conf

    def groupless_error_cb(self, err: ck.KafkaError) -> None:
        """:meth:`error_cb` of a reader: its group's coordinator refused to a principal without group ACLs is no
        warning (:data:`_GROUPLESS_CONSUMER_CODES`)."""
        if err.code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED:
            log.debug("kafka reader (%s): %s (a reader needs no group)", self.bootstrap, err.str())
            return
        self.error_cb(err)

    def error_cb(self, err: ck.KafkaError) -> None:
        cause = refusal_cause(err)
        if cause is not None:
            self._refused = (time.monotonic(), self.redact(cause))
        text = self.redact(err.str())
        _QUIET.emit(log, logging.WARNING, text, f"kafka client ({self.bootstrap}): {err.name()}: {text}")

    def make_client(self, factory: Callable[[dict[str, Any]], Any], conf: dict[str, Any], what: str) -> Any:
        try:
            return factory(conf)
        except (ck.KafkaException, ValueError, TypeError) as exc:
            message = self.redact(_describe(exc))
            m = re.search(r'property:?\s*"?([A-Za-z0-9_.\-]+)"?', message)
            field = m.group(1) if m else "settings"
            if self._token_failures:  # no token: the callable says why, the client only that none came
                why, defect = self._token_failures[-1]
                message = self.redact(f"{why} ({message})")
                if not defect:
                    raise BackendUnavailableError(f"Kafka cluster at {self.bootstrap}: no OAUTHBEARER token for a new "
                                                  f"{what}: {message}") from exc
                field = "oauth_cb"
            raise ConfigError(
                f"invalid Kafka {what} settings for {self.bootstrap}: {message}", errors={field: message}
            ) from exc

    def denied(self, exc: BaseException | ck.KafkaError, doing: str, *needs: Need) -> AuthorizationError | None:
        """``exc`` as one :class:`AuthorizationError` when it is a refused permission (see :mod:`._access`), naming
        the one of ``needs`` of the refused resource type; ``None`` otherwise."""
        return denied(exc, bootstrap=self.bootstrap, settings=self._common, doing=doing, needs=needs,
                      redact=self.redact)

    def refused(self, since: float | None = None) -> str | None:
        """Why a broker refused one of these clients (authentication, TLS: a setting to fix, which no retry within
        the bounds would change), if one did at or after ``since`` (monotonic; default: within the last
        ``connect.timeout.ms``, so that an OAuth token refused once and refreshed since does not name a later
        outage)."""
        if self._refused is None:
            return None
        at, cause = self._refused
        return cause if at >= (time.monotonic() - self.connect_timeout if since is None else since) else None

    def refusal(self, doing: str, since: float | None = None) -> BackendUnavailableError | None:
        """The error to raise when a broker refused these clients (see :meth:`refused`), else None."""
        cause = self.refused(since)
        if cause is None:
            return None
        return BackendUnavailableError(f"Kafka cluster at {self.bootstrap} could not be used ({doing}): {cause}")

    def translate(self, exc: BaseException, doing: str, *needs: Need) -> BackendError:
        """A BackendError (BackendUnavailableError when the cluster did not answer, or refused these clients: the
        refusal's cause then; AuthorizationError when it refused a permission: ``needs`` say what the call needs)
        for a client error."""
        refused = self.denied(exc, doing, *needs)
        if refused is not None:
            return refused
        err = _kafka_error(exc)
        refusal = self.refusal(doing)
        if refusal is not None and (err is None or err.code() in _UNREACHABLE_CODES):
            return refusal
        message = f"Kafka {doing} at {self.bootstrap} failed: {self.redact(_describe(exc))}"
        if err is not None and err.code() in _UNREACHABLE_CODES:
            return BackendUnavailableError(
                f"Kafka cluster at {self.bootstrap} could not be reached for {doing} within the bounded wait "
                f"(connect.timeout.ms={int(self.connect_timeout * 1000)}): {self.redact(_describe(exc))}")
        return BackendError(message)

    def unavailable(self, exc: BaseException, doing: str, *needs: Need) -> BackendError:
        refused = self.denied(exc, doing, *needs)
        if refused is not None:
            return refused
        err = _kafka_error(exc)
        refusal = self.refusal(doing)
        if refusal is not None and (err is None or err.code() in _UNREACHABLE_CODES):
            return refusal
        if err is None or err.code() in _UNREACHABLE_CODES:
            return BackendUnavailableError(
                f"Kafka cluster at {self.bootstrap} could not be reached for {doing} within "
                f"{self.connect_timeout:g} s (connect.timeout.ms): {self.redact(_describe(exc))}")
        return self.translate(exc, doing, *needs)

