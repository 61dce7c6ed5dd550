"""The Schema Registry settings the registry converters share (connect_runtime.converters._registry)."""

from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.error import SchemaRegistryError

from connect_runtime.api.errors import ConfigError, DataError, RetriableError
from connect_runtime.converters._registry import REGISTRY_CONFIG, drop_mock_scope, registry_settings


def settings(**props: object):  # type: ignore[no-untyped-def]
    return registry_settings(REGISTRY_CONFIG.parse({k.replace("_", "."): v for k, v in props.items()}))


def test_defaults_are_kafka_connects() -> None:
    s = settings(schema_registry_url="http://sr:8081/")
    assert s.urls == ("http://sr:8081",)
    assert (s.auto_register, s.use_latest_version, s.credentials_source) == (True, False, "URL")
    assert s.subject("orders", False, "shop.Order") == "orders-value"
    assert s.subject("orders", True, "shop.Key") == "orders-key"
    assert s.serializer_conf(False)["auto.register.schemas"] is True


@pytest.mark.parametrize("name", ["RecordNameStrategy", "io.confluent.kafka.serializers.subject.RecordNameStrategy"])
def test_record_name_strategy_by_short_or_class_name(name: str) -> None:
    s = registry_settings(REGISTRY_CONFIG.parse({"schema.registry.url": "mock://x", "value.subject.name.strategy": name,
                                                  "key.subject.name.strategy": "TopicRecordNameStrategy"}))
    assert s.subject("orders", False, "shop.Order") == "shop.Order"
    assert s.subject("orders", True, "shop.Key") == "orders-shop.Key"


def test_an_unknown_strategy_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        settings(schema_registry_url="mock://x", value_subject_name_strategy="io.confluent.Nope")
    assert "value.subject.name.strategy" in err.value.errors
    assert "TopicNameStrategy" in err.value.errors["value.subject.name.strategy"]


@pytest.mark.parametrize("props, field", [
    ({}, "schema.registry.url"),
    ({"schema.registry.url": "ftp://sr"}, "schema.registry.url"),
    ({"schema.registry.url": "mock://a,http://sr"}, "schema.registry.url"),
    ({"schema.registry.url": "http://sr", "basic.auth.credentials.source": "SASL_INHERIT"},
     "basic.auth.credentials.source"),
])
def test_bad_fields_are_named(props: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        registry_settings(REGISTRY_CONFIG.parse(props))
    assert field in err.value.errors


def test_latest_version_needs_auto_register_off() -> None:
    with pytest.raises(ConfigError) as err:
        settings(schema_registry_url="mock://x", use_latest_version="true")
    assert "auto.register.schemas=false" in err.value.errors["use.latest.version"]
    s = settings(schema_registry_url="mock://x", use_latest_version="true", auto_register_schemas="false")
    assert s.serializer_conf(True)["use.latest.version"] is True
    assert s.deserializer_conf(True)["use.latest.version"] is True


def test_user_info_needs_its_source_and_never_shows() -> None:
    with pytest.raises(ConfigError) as err:
        registry_settings(REGISTRY_CONFIG.parse({"schema.registry.url": "http://sr",
                                                  "basic.auth.user.info": "bob:s3cr3t-pw"}))
    assert "USER_INFO" in err.value.errors["basic.auth.credentials.source"]
    assert "s3cr3t-pw" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        registry_settings(REGISTRY_CONFIG.parse({"schema.registry.url": "http://alice:urlpw99@sr",
                                                  "basic.auth.credentials.source": "USER_INFO",
                                                  "basic.auth.user.info": "bob:s3cr3t-pw"}))
    assert "s3cr3t-pw" not in str(err.value) and "urlpw99" not in str(err.value)
    s = registry_settings(REGISTRY_CONFIG.parse({"schema.registry.url": "http://sr",
                                                  "basic.auth.credentials.source": "USER_INFO",
                                                  "basic.auth.user.info": "bob:s3cr3t-pw"}))
    assert s.client_conf()["basic.auth.user.info"] == "bob:s3cr3t-pw"
    assert "s3cr3t-pw" not in repr(s) and "s3cr3t-pw" not in str(s)
    assert s.scrub("denied for bob:s3cr3t-pw and s3cr3t-pw") == "denied for [hidden] and [hidden]"
    assert "basic.auth.user.info" in REGISTRY_CONFIG.password_fields()


def test_a_password_in_the_url_is_hidden_as_written_and_decoded() -> None:
    s = settings(schema_registry_url="http://alice:p%40ss-word@sr:8081")
    assert "p%40ss-word" not in repr(s) and "p@ss-word" not in repr(s)
    assert s.scrub("GET http://alice:p%40ss-word@sr:8081 as p@ss-word") == \
        "GET http://alice:[hidden]@sr:8081 as [hidden]"


def test_a_mock_scope_is_shared_like_confluents_and_can_be_dropped() -> None:
    a = settings(schema_registry_url="mock://shared-scope").client()
    b = settings(schema_registry_url="mock://shared-scope").client()
    other = settings(schema_registry_url="mock://another-scope").client()
    assert a is b and a is not other
    assert type(a).__name__ == "MockSchemaRegistryClient"
    a.register_schema("t-value", Schema('"string"', "AVRO"))
    assert b.get_subjects() == ["t-value"] and other.get_subjects() == []
    drop_mock_scope("shared-scope")
    assert settings(schema_registry_url="mock://shared-scope").client().get_subjects() == []


def test_registry_answers_become_data_errors_and_outages_retriable() -> None:
    s = settings(schema_registry_url="http://alice:pw-in-url@sr")
    bad = s.failure("AvroConverter writing x", SchemaRegistryError(409, 409, "incompatible for alice:pw-in-url"))
    assert type(bad) is DataError and "HTTP 409" in str(bad) and "pw-in-url" not in str(bad)
    assert type(s.failure("w", SchemaRegistryError(503, 50003, "down"))) is RetriableError
    assert type(s.failure("w", SchemaRegistryError(429, 429, "slow down"))) is RetriableError


def test_an_unreachable_registry_fails_in_bounded_time_without_secrets() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = settings(schema_registry_url=f"http://alice:hush-hush@127.0.0.1:{port}", http_read_timeout_ms="500")
    client = s.client()
    client._rest_client.retries_wait_ms = client._rest_client.retries_max_wait_ms = 1  # keep the unit test fast
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        client.get_subjects()
    assert time.monotonic() - started < 10
    err = s.failure("AvroConverter reading topic 't'", raised.value)
    assert type(err) is RetriableError and "could not be reached" in str(err)
    assert "hush-hush" not in str(err) and "alice:[hidden]@127.0.0.1" in str(err)
