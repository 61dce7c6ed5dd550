"""Authorization failures of the Kafka backend: a client error that is a refused permission (``*_AUTHORIZATION_FAILED``)
becomes ONE :class:`~connect_runtime.api.errors.AuthorizationError` naming the operation, the resource (type and
name), the principal when the settings tell it, and the ``kafka-acls.sh`` command that grants it. Never retried:
librdkafka does not flag these retriable, and every caller translates them before its own retry or ride-out rules.

Which operation a refusal means depends on the call, not on the error code (a ``TOPIC_AUTHORIZATION_FAILED`` is a
missing ``Write`` when producing, ``Read`` when fetching, ``DescribeConfigs`` when describing the topic): each call
site says what it needs with :class:`Need` values, and :func:`denied` picks the one of the refused resource type.

The ACLs each role needs, and why: :mod:`connect_runtime.kafka_acls` (docs/kafka.md, "Access control (ACLs)").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import confluent_kafka as ck

from connect_runtime.api.errors import AuthorizationError

RESOURCE_TYPES = {
    ck.KafkaError.TOPIC_AUTHORIZATION_FAILED: "Topic",
    ck.KafkaError.GROUP_AUTHORIZATION_FAILED: "Group",
    ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED: "Cluster",
    ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalId",
}
"""librdkafka's authorization error codes and the resource type each refuses."""

_OPTION = {"Topic": "--topic", "Group": "--group", "TransactionalId": "--transactional-id", "Cluster": "--cluster"}
_TASK_SUFFIX = re.compile(r"-(\d+|[0-9a-f]{16})$")


@dataclass(frozen=True)
class Need:
    """What a call needs on one resource: ``operation`` (Kafka's name) on ``resource_type`` ``name``, granted as
    ``pattern`` (``literal`` or ``prefixed``, ``name`` then being the prefix); ``also`` is said beside it (e.g. the
    Create that lets a run make a missing topic)."""

    operation: str
    resource_type: str
    name: str = "kafka-cluster"
    pattern: str = "literal"
    also: str = ""


def transactional_id_need(transactional_id: str) -> Need:
    """Write on a transactional id, granted on its prefix (the id without its task number or entry hash): one
    prefixed ACL covers every task of a connector, or every writer of a store's entries."""
    prefix = _TASK_SUFFIX.sub("-", transactional_id)
    if prefix == transactional_id:  # a sink's commit fence: <cluster>-<connector>-sink-commits covers its -<k>
        return Need("Write", "TransactionalId", transactional_id, "prefixed")
    return Need("Write", "TransactionalId", prefix, "prefixed")


def auth_error_code(exc: BaseException | ck.KafkaError | None) -> int | None:
    """The authorization error code of a client error (``None`` when it is not one)."""
    err = exc if isinstance(exc, ck.KafkaError) else None
    if isinstance(exc, ck.KafkaException) and exc.args and isinstance(exc.args[0], ck.KafkaError):
        err = exc.args[0]
    if err is not None and err.code() in RESOURCE_TYPES:
        return int(err.code())
    return None


def principal(settings: Mapping[str, Any]) -> str | None:
    """The principal the broker sees for these client settings, when they tell it: ``User:<sasl.username>`` for
    PLAIN and SCRAM, ``User:<certificate subject DN>`` for mTLS (Kafka's default principal builder), the
    ``principal`` of an unsecured OAUTHBEARER config; ``None`` otherwise (an OIDC token's subject)."""
    protocol = str(settings.get("security.protocol", "")).upper()
    mechanism = str(settings.get("sasl.mechanism", settings.get("sasl.mechanisms", ""))).upper()
    if protocol.startswith("SASL"):
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and settings.get("sasl.username"):
            return f"User:{settings['sasl.username']}"
        if mechanism == "OAUTHBEARER":
            m = re.search(r"(?:^|\s)principal=(\S+)", str(settings.get("sasl.oauthbearer.config", "")))
            return f"User:{m.group(1)}" if m else None
        return None
    if protocol == "SSL":
        return _certificate_principal(settings)
    return None


def _certificate_principal(settings: Mapping[str, Any]) -> str | None:
    pem = settings.get("ssl.certificate.pem")
    try:
        if not pem and settings.get("ssl.certificate.location"):
            with open(str(settings["ssl.certificate.location"]), "rb") as f:
                pem = f.read()
        if not pem:
            return None
        from cryptography import x509  # optional: only to name the principal

        cert = x509.load_pem_x509_certificate(pem.encode() if isinstance(pem, str) else pem)
        return f"User:{cert.subject.rfc4514_string()}"
    except (ImportError, OSError, ValueError):
        return None


def acl_command(bootstrap: str, need: Need, who: str | None) -> str:
    """The ``kafka-acls.sh`` command that grants ``need`` to ``who``."""
    resource = "--cluster" if need.resource_type == "Cluster" else f"{_OPTION[need.resource_type]} {need.name}"
    pattern = " --resource-pattern-type prefixed" if need.pattern == "prefixed" else ""
    return (f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties --add "
            f"--allow-principal {who or '<principal>'} --operation {need.operation} {resource}{pattern}")


def denied(exc: BaseException | ck.KafkaError, *, bootstrap: str, settings: Mapping[str, Any], doing: str,
           needs: Iterable[Need], redact: Any = str) -> AuthorizationError | None:
    """``exc`` as one :class:`AuthorizationError` when it is an authorization failure, else ``None``. ``needs``: what
    the call needs, per resource type (the first of the refused type is named)."""
    code = auth_error_code(exc)
    if code is None:
        return None
    kind = RESOURCE_TYPES[code]
    need = next((n for n in needs if n.resource_type == kind), None)
    if need is None:  # a call that did not say (should not happen): the type is still right
        need = Need("<the operation of this call>", kind, "<the resource named by the error>")
    who = principal(settings)
    command = acl_command(bootstrap, need, who)
    err = exc if isinstance(exc, ck.KafkaError) else exc.args[0]
    pattern = " (prefixed)" if need.pattern == "prefixed" else ""
    target = "the cluster" if kind == "Cluster" else f"{kind} {need.name!r}{pattern}"
    also = f" ({need.also})" if need.also else ""
    message = (f"Kafka at {bootstrap} refused {doing}: principal {who or '(not known to the client)'} is not "
               f"allowed {need.operation} on {target}{also} ({err.name()}: {redact(err.str())}). An authorization "
               f"failure is not retried; what was committed before stays. Grant it, then run again: {command} "
               f"(every ACL of each role: docs/kafka.md, \"Access control (ACLs)\")")
    return AuthorizationError(message, operation=need.operation, resource_type=kind, resource_name=need.name,
                              pattern_type=need.pattern, principal=who, command=command)


def abortable_cause(producer: Any, exc: BaseException) -> BaseException:
    """The error that doomed a transaction, behind a record purged for it: librdkafka answers ``begin_transaction``
    in an abortable state with that error (and refuses it in a transaction, or on a producer without transactions,
    changing nothing); ``exc`` itself when that is no authorization failure."""
    err = exc.args[0] if isinstance(exc, ck.KafkaException) and exc.args else None
    if isinstance(err, ck.KafkaError) and err.code() in (ck.KafkaError._PURGE_QUEUE, ck.KafkaError._PURGE_INFLIGHT):
        try:
            producer.begin_transaction()
        except ck.KafkaException as probed:
            if auth_error_code(probed) is not None:
                return probed
        except Exception:  # the diagnosis is a courtesy: the error stands without it
            return exc
    return exc


def group_refusal(admin: Any, group: str, timeout: float) -> ck.KafkaError | None:
    """The GROUP_AUTHORIZATION_FAILED error when the principal may not even describe consumer group ``group``, else
    ``None``: librdkafka's group calls (``committed``) wait out their timeout when the coordinator lookup is refused,
    the refusal reaching only the consumer's event queue; this asks the question directly (DescribeGroups)."""
    try:
        future = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
        future.result(timeout + 1)
    except ck.KafkaException as exc:
        if auth_error_code(exc) == ck.KafkaError.GROUP_AUTHORIZATION_FAILED:
            return exc.args[0]  # type: ignore[no-any-return]
    except Exception:  # a timeout, a client gone: the diagnosis is a courtesy, the error stands without it
        return None
    return None


def unwritable_topics(admin: Any, topics: Iterable[str], timeout: float) -> list[str]:
    """Of ``topics``, those the principal may not write (asked with DescribeTopics' authorized operations, KIP-430;
    a topic it may not even describe counts): a transaction refused on one of several topics names the right one.
    Empty when the question itself fails."""
    from confluent_kafka.admin import AclOperation  # type: ignore[attr-defined]

    names = sorted(set(topics))
    if not names:
        return []
    try:
        futures = admin.describe_topics(ck.TopicCollection(names), include_authorized_operations=True,
                                        request_timeout=timeout)
    except (ck.KafkaException, TypeError, ValueError):
        return []
    refused = []
    for name, future in futures.items():
        try:
            ops = future.result(timeout + 1).authorized_operations or []
        except ck.KafkaException:
            refused.append(name)
            continue
        except Exception:  # a timeout, a client gone: the diagnosis is a courtesy, the error stands without it
            continue
        if AclOperation.WRITE not in ops and AclOperation.ALL not in ops:
            refused.append(name)
    return refused


__all__ = ["RESOURCE_TYPES", "Need", "abortable_cause", "acl_command", "auth_error_code", "denied", "group_refusal", "principal", "transactional_id_need",
           "unwritable_topics"]
