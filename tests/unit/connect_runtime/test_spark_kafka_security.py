"""connect_runtime.spark_kafka.kafka_security_options: librdkafka security settings as Spark Kafka source options.

The read on a secured broker with these options: tests/integration/test_spark_kafka_secure.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_runtime.spark_kafka import SecuritySettingsError, kafka_read_options, kafka_security_options

SCRAM = {"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
         "sasl.password": 'p"w\\d', "ssl.ca.location": "/ca.pem", "connect.timeout.ms": "15000"}


def test_scram_over_tls_becomes_the_java_clients_properties() -> None:
    assert kafka_security_options(SCRAM) == {
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="bob" password="p\\"w\\\\d";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/ca.pem"}
    plain = kafka_security_options({**SCRAM, "sasl.mechanism": "PLAIN", "ssl.ca.pem": "PEM", "sasl.password": "x"})
    assert plain["kafka.sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule ")
    assert plain["kafka.ssl.truststore.certificates"] == "PEM" and "kafka.ssl.truststore.location" not in plain
    assert kafka_security_options({}) == {} and kafka_security_options(None) == {}


def test_a_client_certificate_becomes_a_pem_keystore(tmp_path: Path) -> None:
    out = kafka_security_options({"security.protocol": "SSL", "ssl.certificate.pem": "CERT", "ssl.key.pem": "KEY",
                                  "ssl.key.password": "k", "ssl.endpoint.identification.algorithm": "none"})
    assert out == {"kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "PEM",
                   "kafka.ssl.keystore.certificate.chain": "CERT", "kafka.ssl.keystore.key": "KEY",
                   "kafka.ssl.key.password": "k", "kafka.ssl.endpoint.identification.algorithm": ""}
    (tmp_path / "c.pem").write_text("CERT")
    (tmp_path / "k.pem").write_text("KEY")
    files = kafka_security_options({"security.protocol": "SSL", "ssl.certificate.location": str(tmp_path / "c.pem"),
                                    "ssl.key.location": str(tmp_path / "k.pem")})
    assert files["kafka.ssl.keystore.certificate.chain"] == "CERT" and files["kafka.ssl.keystore.key"] == "KEY"
    with pytest.raises(SecuritySettingsError, match=r"both ssl\.certificate"):
        kafka_security_options({"security.protocol": "SSL", "ssl.certificate.pem": "CERT"})


@pytest.mark.parametrize(("settings", "named"), [
    ({**SCRAM, "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER"),
    ({**SCRAM, "oauth_cb": "my.module.token"}, "'oauth_cb'"),
    ({**SCRAM, "sasl.kerberos.keytab": "/k"}, "'sasl.kerberos.keytab'"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u"}, "sasl.password"),
    ({"security.protocol": "TLS"}, "security.protocol"),
])
def test_what_cannot_be_translated_fails_naming_the_setting_never_a_secret(settings: dict[str, str],
                                                                           named: str) -> None:
    with pytest.raises(SecuritySettingsError, match=named) as failed:
        kafka_security_options(settings)
    assert 'p"w' not in str(failed.value)


def test_the_read_options_carry_them_and_explicit_options_win() -> None:
    [read] = kafka_read_options({"t": {"0": [0, 5]}}, "h:1", settings=SCRAM,
                                options={"kafka.ssl.truststore.location": "/other.pem"})
    assert read["kafka.sasl.mechanism"] == "SCRAM-SHA-512" and read["kafka.ssl.truststore.location"] == "/other.pem"
    [unsecured] = kafka_read_options({"t": {"0": [0, 5]}}, "h:1")
    assert read["kafka.group.id"] != unsecured["kafka.group.id"]  # other consumer settings, another pool
