"""Spark's own Kafka source on a secured broker (issue 34): the backend's librdkafka settings translated
(:func:`connect_runtime.spark_kafka.kafka_security_options`) and the Spark role's ACLs proven.

Real Apache Kafka 4.4.0 with the StandardAuthorizer (:mod:`tests.support.kafka_secure`, SCRAM-SHA-512 over TLS)
and a real local SparkSession with the Kafka source's jars. The admin commits a range with an exactly-once
datagen run; a fresh SCRAM principal granted exactly the ``spark`` role's ACLs of
:mod:`connect_runtime.kafka_acls` reads it with :func:`connect_runtime.spark.read_kafka_range` given only its
librdkafka settings, each record once; with the topic's Read revoked the read fails naming the authorization,
never the password. A client certificate's principal with the same ACL reads it over the mTLS listener (the
certificate and key files as a PEM keystore). The translation's shapes and errors: tests/unit/connect_runtime/test_spark_kafka_security.py.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from connect_runtime import ranges as ranges_mod
from connect_runtime.connectors.datagen import generate_value
from connect_runtime.kafka_acls import role_acls
from tests.support.kafka_secure import WAIT_S, SecuredKafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.faithful_kafka]

RECORDS = 300


def _settings(settings: dict[str, str]) -> dict[str, str]:
    """Client settings as a backend takes them (the URL names the servers)."""
    return {k: v for k, v in settings.items() if k != "bootstrap.servers"}


@pytest.fixture(scope="module")
def spark(spark_with_kafka: Any) -> Any:
    return spark_with_kafka  # the one session of the process (tests/support/spark.py says why)


@pytest.fixture(scope="module")
def committed(kafka_secure: SecuredKafka) -> dict[str, Any]:
    """An exactly-once datagen run's result, as the admin: 2 partitions, 100 records per transaction."""
    from connect_runtime import run_source

    topic = f"spark-secure-{uuid.uuid4().hex[:10]}"
    result = run_source({"name": f"ss-{uuid.uuid4().hex[:10]}",
                         "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": topic,
                         "max.records": RECORDS, "batch.size": 100, "topic.creation.default.partitions": 2},
                        kafka_secure.url, backend_settings=_settings(kafka_secure.client_settings()),
                        max_seconds=WAIT_S * 4).to_dict()
    assert result["records"] == RECORDS and ranges_mod.count(result["ranges"]) > RECORDS  # markers inside
    return result


def _each_once(rows: list[Any]) -> None:
    values = sorted((v["id"], v) for v in (json.loads(bytes(r.value)) for r in rows))
    assert values == [(i, generate_value(0, i)) for i in range(RECORDS)]  # each record once, nothing else


def test_the_spark_roles_acls_read_a_committed_range_once_and_no_more(spark: Any, kafka_secure: SecuredKafka,
                                                                      committed: dict[str, Any]) -> None:
    from connect_runtime.spark import read_kafka_range

    user = f"spark-{uuid.uuid4().hex[:10]}"
    password = kafka_secure.add_user(user)
    [acl] = role_acls("spark", topic=next(iter(committed["ranges"])))
    kafka_secure.grant(user, acl.resource_type.lower(), acl.name, acl.operation.lower(), pattern=acl.pattern)
    settings = _settings(kafka_secure.sasl_settings(user))

    df = read_kafka_range(spark, kafka_secure.url, committed, settings=settings)
    assert password not in df._jdf.queryExecution().toString()  # the plan Spark shows in its UI and explain()
    _each_once(df.collect())

    kafka_secure.revoke(user, acl.resource_type.lower(), acl.name, acl.operation.lower(), pattern=acl.pattern)
    with pytest.raises(Exception) as failed:  # Py4J's or Spark's own exception class, by PySpark version
        read_kafka_range(spark, kafka_secure.url, committed, settings=settings).collect()
    text = str(failed.value)
    assert "TopicAuthorizationException" in text, text[:2000]  # Spark's driver listing the assigned partitions
    assert password not in text


def test_a_client_certificate_reads_over_mtls(spark: Any, kafka_secure: SecuredKafka,
                                                                    committed: dict[str, Any]) -> None:
    """The mTLS listener: the certificate and key files (the key PKCS#8, unencrypted: the JVM here, Java 17, cannot
    read a PBES2-encrypted key, "PBES2 SecretKeyFactory not available") as a PEM keystore."""
    from connect_runtime.spark import read_kafka_range

    name = f"spark-cert-{uuid.uuid4().hex[:10]}"
    cert = kafka_secure.issue(name)
    [acl] = role_acls("spark", topic=next(iter(committed["ranges"])))
    kafka_secure.grant(name, acl.resource_type.lower(), acl.name, acl.operation.lower(), pattern=acl.pattern)
    settings = _settings(kafka_secure.certificate_settings(cert))
    _each_once(read_kafka_range(spark, kafka_secure.listener("MTLS").bootstrap, committed, settings=settings).collect())
