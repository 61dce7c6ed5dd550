"""A real Schema Registry (Apicurio Registry's Confluent-compatible API, tests/support/schema_registry.py) driven by
confluent-kafka's own client, AvroSerializer and AvroDeserializer: what the schema converters rely on, against a
server rather than ``mock://``, and the fixture's own promises (fail in CI, skip elsewhere, a failed start named)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import socket
import struct
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support import schema_registry as registry_support
from tests.support.schema_registry import HOME_ENV, ApicurioRegistry

USER_V1 = {"type": "record", "name": "User", "namespace": "pyconnect.test", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "balance", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "joined", "type": {"type": "long", "logicalType": "timestamp-millis"}},
]}
# BACKWARD-compatible: a new optional field with a default (a v2 reader reads v1 data)
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}
# not BACKWARD-compatible with v2: a new field with no default (a v3 reader cannot read v1 or v2 data)
USER_V3 = {**USER_V2, "fields": [*USER_V2["fields"], {"name": "age", "type": "int"}]}

ALICE = {"id": 7, "name": "Alice", "balance": decimal.Decimal("1234.50"),
         "joined": dt.datetime(2026, 11, 26, 9, 30, 15, 123000, tzinfo=dt.UTC)}


def _avro(schema: dict[str, object]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def _topic() -> str:
    return f"users-{uuid.uuid4().hex[:10]}"


def _value(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


@pytest.mark.schema_registry
def test_the_client_registers_reads_lists_and_tests_compatibility(schema_registry_url: str) -> None:
    client = SchemaRegistryClient({"url": schema_registry_url})
    subject = f"{_topic()}-value"
    schema_id = client.register_schema(subject, _avro(USER_V1))

    fresh = SchemaRegistryClient({"url": schema_registry_url})  # no cache: every answer comes from the server
    assert fresh.get_schema(schema_id).schema_str == json.dumps(USER_V1), "not stored as sent (canonicalised?)"
    assert fresh.get_schema(schema_id).schema_type == "AVRO"
    assert fresh.get_versions(subject) == [1]
    assert fresh.get_version(subject, 1).schema_id == schema_id
    assert fresh.get_latest_version(subject).version == 1
    assert fresh.lookup_schema(subject, _avro(USER_V1)).schema_id == schema_id
    assert subject in fresh.get_subjects()

    assert fresh.get_compatibility() == "NONE"  # Apicurio's default; Confluent's is BACKWARD
    fresh.set_compatibility(subject, "BACKWARD")
    assert fresh.get_compatibility(subject) == "BACKWARD"
    assert fresh.test_compatibility(subject, _avro(USER_V2)) is True
    assert fresh.test_compatibility(subject, _avro(USER_V3)) is False  # age: a new field with no default
    assert fresh.get_versions(subject) == [1], "testing compatibility registered something"

    again = fresh.register_schema(f"{_topic()}-value", _avro(USER_V1))
    assert again == schema_id, "the same schema under another subject has another id"


@pytest.mark.schema_registry
def test_avro_serializer_and_deserializer_round_trip_through_the_registry(schema_registry_url: str) -> None:
    topic = _topic()
    serializer = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), json.dumps(USER_V1))
    data = serializer(ALICE, _value(topic))
    assert data is not None

    registered = SchemaRegistryClient({"url": schema_registry_url}).get_latest_version(f"{topic}-value")
    assert registered.version == 1
    assert json.loads(registered.schema.schema_str) == USER_V1
    magic, schema_id = struct.unpack(">bI", data[:5])
    assert (magic, schema_id) == (0, registered.schema_id), "not Confluent's wire format with the registered id"

    # another process's view: a deserializer with a client of its own finds the writer schema by the id alone
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": schema_registry_url}))
    assert deserializer(data, _value(topic)) == ALICE


@pytest.mark.schema_registry
def test_backward_compatibility_a_compatible_change_registers_version_2(schema_registry_url: str) -> None:
    topic = _topic()
    subject = f"{topic}-value"
    client = SchemaRegistryClient({"url": schema_registry_url})
    v1_bytes = AvroSerializer(client, json.dumps(USER_V1))(ALICE, _value(topic))
    client.set_compatibility(subject, "BACKWARD")

    bob = {**ALICE, "id": 8, "name": "Bob", "email": "bob@example.com"}
    v2_bytes = AvroSerializer(client, json.dumps(USER_V2))(bob, _value(topic))
    assert v1_bytes is not None and v2_bytes is not None

    fresh = SchemaRegistryClient({"url": schema_registry_url})
    assert fresh.get_versions(subject) == [1, 2]
    v2 = fresh.get_version(subject, 2)
    assert json.loads(v2.schema.schema_str) == USER_V2
    assert struct.unpack(">bI", v2_bytes[:5]) == (0, v2.schema_id)
    assert v2.schema_id != fresh.get_version(subject, 1).schema_id

    # each record read with its writer's schema; with the v2 reader schema, v1 data gets the new field's default
    assert AvroDeserializer(fresh)(v1_bytes, _value(topic)) == ALICE
    assert AvroDeserializer(fresh)(v2_bytes, _value(topic)) == bob
    reader = AvroDeserializer(fresh, json.dumps(USER_V2))
    assert reader(v1_bytes, _value(topic)) == {**ALICE, "email": None}


@pytest.mark.schema_registry
def test_backward_compatibility_an_incompatible_change_is_refused_naming_the_subject_and_the_field(
        schema_registry_url: str) -> None:
    topic = _topic()
    subject = f"{topic}-value"
    client = SchemaRegistryClient({"url": schema_registry_url})
    AvroSerializer(client, json.dumps(USER_V1))(ALICE, _value(topic))
    client.set_compatibility(subject, "BACKWARD")
    AvroSerializer(client, json.dumps(USER_V2))({**ALICE, "email": None}, _value(topic))

    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(client, json.dumps(USER_V3))({**ALICE, "email": None, "age": 40}, _value(topic))
    error = refused.value
    assert (error.http_status_code, error.error_code) == (409, 409), error
    assert subject in error.error_message, error.error_message
    # Apicurio names the field and its path in the new schema (not the rule; see the fixture's docstring)
    assert "age at /fields/5" in error.error_message, error.error_message
    assert "Incompatible" in error.error_message, error.error_message

    fresh = SchemaRegistryClient({"url": schema_registry_url})
    assert fresh.get_versions(subject) == [1, 2], "the refused schema was registered"
    assert fresh.test_compatibility(subject, _avro(USER_V3)) is False
    # the same change is accepted where no rule asks otherwise: the refusal comes from BACKWARD
    other = f"{_topic()}-value"
    fresh.register_schema(other, _avro(USER_V2))
    fresh.register_schema(other, _avro(USER_V3))
    assert fresh.get_versions(other) == [1, 2]


def test_without_the_fetched_registry_the_fixture_fails_in_ci_and_skips_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "nothing-here"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        registry_support._java_and_runner()
    assert "bash scripts/fetch_schema_registry.sh" in str(failed.value)
    assert str(tmp_path / "nothing-here") in str(failed.value)

    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception) as skipped:
        registry_support._java_and_runner()
    assert "bash scripts/fetch_schema_registry.sh" in str(skipped.value)


def test_a_registry_that_does_not_start_fails_naming_what_was_awaited_and_showing_its_log(tmp_path: Path) -> None:
    java, _runner = registry_support._java_and_runner()
    not_a_jar = tmp_path / registry_support.RUNNER
    not_a_jar.write_bytes(b"not a jar")
    registry = ApicurioRegistry(tmp_path, java, not_a_jar)
    with pytest.raises(pytest.fail.Exception) as failed:
        registry.start()
    message = str(failed.value)
    assert f"did not answer GET http://127.0.0.1:{registry.port}/apis/ccompat/v7/subjects with 200" in message
    assert "the JVM exited with code 1" in message
    assert str(registry.log_path) in message
    assert "Invalid or corrupt jarfile" in message, message  # the log's end, as the JVM wrote it
    assert registry.proc is None


@pytest.mark.schema_registry
def test_a_registry_answers_on_loopback_only_and_stop_ends_its_jvm(tmp_path: Path) -> None:
    java, runner = registry_support._java_and_runner()
    registry = ApicurioRegistry(tmp_path, java, runner).start()
    proc = registry.proc
    try:
        assert proc is not None
        with urllib.request.urlopen(f"{registry.url}/subjects", timeout=5) as response:
            assert (response.status, json.loads(response.read())) == (200, [])  # its own, empty, storage
        listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
        ours = [line.split()[3] for line in listening.splitlines() if f"pid={proc.pid}," in line]
        # one listening socket, its port, on loopback (127.0.0.1 or its IPv4-mapped form)
        assert ours in ([f"127.0.0.1:{registry.port}"], [f"[::ffff:127.0.0.1]:{registry.port}"]), ours
    finally:
        registry.stop()
    assert proc.poll() is not None, "the JVM outlived stop()"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", registry.port), timeout=1).close()
