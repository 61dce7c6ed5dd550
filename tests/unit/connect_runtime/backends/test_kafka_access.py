"""Authorization failures of the Kafka backend (backends/kafka/_access.py): one AuthorizationError naming the
operation the call needs, the resource, the principal the settings tell, and the kafka-acls.sh command."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from connect_runtime.api.errors import AuthorizationError, BackendError, BackendUnavailableError
from connect_runtime.backends.kafka._access import Need, denied, principal, transactional_id_need
from connect_runtime.backends.kafka._client import _Clients


def _refused(code: int, text: str = "Broker: authorization failed") -> ck.KafkaException:
    return ck.KafkaException(ck.KafkaError(code, text))


def test_the_call_says_the_operation_and_the_code_the_resource_type() -> None:
    clients = _Clients("b:9093", {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                  "sasl.username": "etl", "sasl.password": "s3cret-pw"})
    needs = (Need("Write", "Topic", "orders"), transactional_id_need("connect-cluster-orders-3"))
    err = clients.translate(_refused(ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, "refused with s3cret-pw"),
                            "producing", *needs)
    assert isinstance(err, AuthorizationError) and isinstance(err, BackendError)
    assert not isinstance(err, BackendUnavailableError)  # never ridden out as an unreachable cluster
    assert (err.operation, err.resource_type, err.resource_name, err.pattern_type, err.principal) == (
        "Write", "Topic", "orders", "literal", "User:etl")
    assert "s3cret-pw" not in str(err)
    assert err.command == ("kafka-acls.sh --bootstrap-server b:9093 --command-config admin.properties --add "
                           "--allow-principal User:etl --operation Write --topic orders")
    tid = clients.translate(_refused(ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "init", *needs)
    assert isinstance(tid, AuthorizationError)
    assert (tid.resource_type, tid.resource_name, tid.pattern_type) == (
        "TransactionalId", "connect-cluster-orders-", "prefixed")
    assert tid.command.endswith("--transactional-id connect-cluster-orders- --resource-pattern-type prefixed")
    other = clients.translate(_refused(ck.KafkaError.UNKNOWN_TOPIC_OR_PART), "producing", *needs)
    assert type(other) is BackendError


@pytest.mark.parametrize(("tid", "prefix"), [
    ("connect-cluster-orders-0", "connect-cluster-orders-"),
    ("connect-cluster-orders-2024-01-01-12", "connect-cluster-orders-2024-01-01-"),
    ("connect-cluster-pyconnect-connectors-0123456789abcdef", "connect-cluster-pyconnect-connectors-"),
    ("connect-cluster-lake-sink-commits", "connect-cluster-lake-sink-commits"),
    ("connect-cluster-lake-sink-commits-4", "connect-cluster-lake-sink-commits-"),
])
def test_transactional_ids_are_granted_by_their_prefix(tid: str, prefix: str) -> None:
    assert transactional_id_need(tid).name == prefix


def test_the_principal_the_settings_tell() -> None:
    assert principal({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a"}) == "User:a"
    assert principal({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                      "sasl.oauthbearer.config": "principal=svc scope=x"}) == "User:svc"
    assert principal({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                      "sasl.oauthbearer.method": "oidc"}) is None
    assert principal({"security.protocol": "SSL", "ssl.certificate.pem": "not a certificate"}) is None
    assert principal({}) is None


def test_a_refusal_without_a_need_of_its_type_still_names_the_type() -> None:
    err = denied(_refused(ck.KafkaError.GROUP_AUTHORIZATION_FAILED), bootstrap="b", settings={}, doing="reading",
                 needs=[Need("Read", "Topic", "t")])
    assert err is not None and err.resource_type == "Group" and "not known to the client" in str(err)
