"""The Kafka backend without a broker: URL and settings handling, forced consumer properties, secret
masking, offset key canonicalisation, and that confluent_kafka stays out of other imports."""

from __future__ import annotations

import json

import pytest

from connect_runtime.api.errors import ConfigError
from connect_runtime.backends import open_backend
from connect_runtime.backends.kafka import KafkaBackend, canonical_offset_key
from connect_runtime.runtime.offsets import canonical_key, offset_key

UNREACHABLE = "kafka://127.0.0.1:9"


@pytest.mark.parametrize("url,bootstrap", [
    ("kafka://broker:9092", "broker:9092"),
    ("kafka://a:9092,b:9093", "a:9092,b:9093"),
    ("kafka://a:9092, b:9093/", "a:9092,b:9093"),
    ("kafka://[::1]:9092", "[::1]:9092"),
])
def test_urls_name_the_bootstrap_servers(url, bootstrap):
    be = open_backend(url)
    assert isinstance(be, KafkaBackend) and be.bootstrap == bootstrap and be.url == url


@pytest.mark.parametrize("url", ["kafka://", "kafka://host", "kafka://host:port", "kafka://a:1,,b"])
def test_bad_urls_are_config_errors(url):
    with pytest.raises(ConfigError, match="kafka://host:port"):
        open_backend(url)


def test_backend_settings_are_validated_and_all_named():
    with pytest.raises(ConfigError) as err:
        open_backend(UNREACHABLE, {"connect.timeout.ms": "soon", "offset.storage.partitions": 0})
    assert set(err.value.errors) == {"connect.timeout.ms", "offset.storage.partitions"}


@pytest.mark.parametrize("value,atomic", [(None, True), ("true", True), (True, True), ("False", False),
                                          (False, False)])
def test_group_offsets_in_transactions_is_on_unless_the_setting_turns_it_off(value, atomic):
    settings = {} if value is None else {"group.offsets.in.transactions": value}
    be = open_backend(UNREACHABLE, settings)
    assert be.capabilities.group_offsets_in_transactions is atomic
    assert KafkaBackend.capabilities.group_offsets_in_transactions, "one backend's setting changed every backend's"


def test_a_bad_group_offsets_in_transactions_is_a_config_error_naming_it():
    with pytest.raises(ConfigError) as err:
        open_backend(UNREACHABLE, {"group.offsets.in.transactions": "sometimes"})
    assert err.value.errors == {"group.offsets.in.transactions": "expected true or false, got 'sometimes'"}


def test_cluster_id_defaults_to_connect_cluster_and_is_configurable():
    assert open_backend(UNREACHABLE).cluster_id == "connect-cluster"
    assert open_backend(UNREACHABLE, {"cluster.id": "etl"}).cluster_id == "etl"
    assert open_backend(UNREACHABLE, {"cluster.id": ""}).cluster_id is None


def test_consumers_are_read_committed_without_auto_commit_whatever_the_settings_say():
    be = open_backend(UNREACHABLE, {"enable.auto.commit": True, "isolation.level": "read_uncommitted",
                                    "consumer.override.enable.auto.commit": "true",
                                    "consumer.override.fetch.queue.backoff.ms": 50})
    c = be.consumer("connect-x")
    try:
        conf = c.effective_config
        assert conf["enable.auto.commit"] is False
        assert conf["isolation.level"] == "read_committed"
        assert conf["group.id"] == "connect-x"
        assert conf["fetch.queue.backoff.ms"] == 50  # a default, so a setting may change it
    finally:
        c.close()
    c = open_backend(UNREACHABLE).consumer(None)
    try:
        assert c.effective_config["fetch.queue.backoff.ms"] == 10
        assert c.group_id is None
    finally:
        c.close()


def test_secrets_are_masked():
    be = open_backend(UNREACHABLE, {"sasl.password": "hunter2-secret", "sasl.username": "me",
                                    "ssl.key.password": "k-secret", "ssl.ca.location": "/etc/ca.pem"})
    assert be.redact("auth failed for hunter2-secret and k-secret") == "auth failed for *** and ***"
    c = be.consumer(None)
    try:
        assert c.effective_config["sasl.password"] == "***"
        assert c.effective_config["ssl.ca.location"] == "/etc/ca.pem"
        assert "hunter2-secret" not in repr(c.effective_config)
    finally:
        c.close()


def test_an_unknown_property_is_a_config_error_naming_it_without_its_secret_value():
    be = open_backend(UNREACHABLE, {"sasl.password": "s3cr3t-pw", "consumer.override.not.a.property": "x"})
    with pytest.raises(ConfigError) as err:
        be.consumer(None)
    assert "not.a.property" in str(err.value)
    assert "s3cr3t-pw" not in str(err.value)


@pytest.mark.parametrize("key", [
    b'["conn",{"b":1,"a":[1,2],"c":{"y":2,"x":1}}]',
    b'["conn", {"file": "a.txt"}]',
    b'["c\\u00e9",{"k":"\\u00fc"}]',
    b"not json",
    b'{"a":1}',
])
def test_offset_keys_are_canonicalised_like_the_runtime_does(key):
    assert canonical_offset_key(key) == canonical_key(key)
    parsed = json.loads(key) if key != b"not json" else None
    if isinstance(parsed, list):
        assert canonical_offset_key(key) == offset_key(parsed[0], parsed[1])


