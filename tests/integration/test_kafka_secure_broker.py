"""The secured broker fixture (tests/support/kafka_secure.py) does what it says: every listener and mechanism
authenticates (and only with the right secret), the authorizer refuses a principal without ACLs, and the
fixture's ``grant``/``revoke``/``add_user`` change what a principal may do."""

from __future__ import annotations

import uuid
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from tests.support.kafka_secure import SecuredKafka

pytestmark = pytest.mark.kafka


def _produce(settings: dict[str, Any], topic: str) -> ck.KafkaError | None:
    """Produce one record to ``topic``; the delivery error, or None once it is written (bounded: 20 s)."""
    outcome: list[ck.KafkaError | None] = []
    producer = ck.Producer({**settings, "log_level": 0, "message.timeout.ms": 15000,
                            "socket.connection.setup.timeout.ms": 5000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert outcome, f"no delivery report for {topic} within 20 s"
    return outcome[0]


def _read_one(broker: SecuredKafka, topic: str) -> bytes | None:
    consumer = ck.Consumer({**broker.client_settings(), "group.id": uuid.uuid4().hex, "log_level": 0,
                            "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        msg = consumer.poll(20)
        return None if msg is None or msg.error() else msg.value()
    finally:
        consumer.close()


@pytest.mark.parametrize("way", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS paths", "mTLS inline",
                                 "mTLS encrypted key", "OAUTHBEARER"])
def test_every_listener_authenticates_the_admin(kafka_secure: SecuredKafka, way: str) -> None:
    if way.startswith("SCRAM") or way == "PLAIN":
        settings = kafka_secure.sasl_settings("admin", way)
    elif way == "OAUTHBEARER":
        settings = kafka_secure.oauth_settings("admin")
    else:
        cert = kafka_secure.issue("admin", key_password="k3y" if "encrypted" in way else None)
        settings = kafka_secure.certificate_settings(cert, inline=way == "mTLS inline")
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    assert _produce(settings, topic) is None
    assert _read_one(kafka_secure, topic) == b"v"


def _refusal(settings: dict[str, Any]) -> list[ck.KafkaError]:
    """The errors librdkafka reports (``error_cb``) while it fails to get metadata with ``settings``."""
    errors: list[ck.KafkaError] = []
    admin = AdminClient({**settings, "log_level": 0, "socket.connection.setup.timeout.ms": 5000,
                         "error_cb": errors.append})
    with pytest.raises(ck.KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(0)
    return errors


def test_a_wrong_password_and_an_untrusted_certificate_are_refused(kafka_secure: SecuredKafka) -> None:
    wrong = _refusal(kafka_secure.sasl_settings("alice", "SCRAM-SHA-512", password="not-it"))
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in wrong), wrong
    stranger = kafka_secure.foreign_ca.issue("admin", client=True)
    foreign = _refusal({**kafka_secure.certificate_settings(stranger), "ssl.ca.location": str(kafka_secure.ca.cert_path)})
    assert any(e.code() in (ck.KafkaError._SSL, ck.KafkaError._TRANSPORT) for e in foreign), foreign


def test_no_acl_means_no_access_until_granted(kafka_secure: SecuredKafka) -> None:
    """alice (SCRAM and PLAIN from the start), a user added later and a certificate's principal are refused
    until an ACL lets them; revoking it refuses them again."""
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    assert _produce(kafka_secure.client_settings(), topic) is None  # the admin creates the topic
    later = f"user-{uuid.uuid4().hex[:6]}"
    kafka_secure.add_user(later)
    cert = kafka_secure.issue(f"cert-{uuid.uuid4().hex[:6]}")
    principals = {
        "alice": kafka_secure.sasl_settings("alice", "PLAIN"),
        later: kafka_secure.sasl_settings(later, "SCRAM-SHA-256"),
        cert.name: kafka_secure.certificate_settings(cert, inline=True),
    }
    for principal, settings in principals.items():
        err = _produce(settings, topic)
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, (principal, err)
        kafka_secure.grant(principal, "topic", topic[:4], "write", pattern="prefixed")
        assert _produce(settings, topic) is None, principal
        kafka_secure.revoke(principal, "topic", topic[:4], "write", pattern="prefixed")
        err = _produce(settings, topic)
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, (principal, err)
    assert kafka_secure.acls("alice") == []
