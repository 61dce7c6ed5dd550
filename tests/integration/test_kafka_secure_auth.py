"""Every authentication a Kafka user brings, through the runtime's Kafka backend, on the secured Apache Kafka 4.4.0
node (tests/support/kafka_secure.py): SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN over TLS; mTLS with the PEM inline,
as paths, and with an encrypted key; OAUTHBEARER through librdkafka's OIDC method (a token endpoint on loopback)
and through ``oauth_cb`` named by its dotted path. Each moves data exactly-once: an exactly-once source run, a
sink run up to its ranges, each record once in the sink and in the topic read ``read_committed``, a rerun that
writes nothing; no secret in any log line.

A broker refusing the client (a wrong password, a CA that is not the broker's, an expired client certificate)
fails the run at once with one error naming the bootstrap server and the cause, never the secret: the bound is set
to two minutes, and the cause in the message is what only the refusal path says (an unreachable cluster's error
names neither authentication nor certificates)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_runtime.api.errors import BackendUnavailableError, ConfigError
from connect_runtime.backends import open_backend
from connect_runtime.runtime.sink import run_sink
from connect_runtime.runtime.source import run_source
from tests.support.kafka_secure import OAUTH_CB, SecuredKafka, TokenEndpoint, committed_ids, sunk_ids

pytestmark = pytest.mark.kafka

RECORDS = 300
WAYS = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS inline", "mTLS paths", "mTLS encrypted key",
        "OAUTHBEARER oidc", "OAUTHBEARER oauth_cb"]


@pytest.fixture(scope="module")
def token_endpoint() -> Iterator[TokenEndpoint]:
    with TokenEndpoint() as endpoint:
        yield endpoint


def connection(broker: SecuredKafka, way: str, endpoint: TokenEndpoint) -> tuple[str, dict[str, Any], list[str]]:
    """``(backend URL, backend settings, the secrets in them)`` of the admin principal logging in ``way``."""
    if way.startswith(("SCRAM", "PLAIN")):
        settings: dict[str, Any] = broker.sasl_settings("admin", way)
        secrets = [settings["sasl.password"]]
    elif way.startswith("mTLS"):
        cert = broker.issue("admin", key_password=f"kp-{uuid.uuid4().hex[:8]}" if "encrypted" in way else None)
        settings = broker.certificate_settings(cert, inline=way == "mTLS inline")
        secrets = [cert.key_pem.strip().splitlines()[1]] + ([settings["ssl.key.password"]] if cert.key_password
                                                            else [])
    elif way == "OAUTHBEARER oidc":
        settings = {**broker.oauth_settings(), **endpoint.settings()}
        secrets = [endpoint.client_secret]
    else:
        settings = {**broker.oauth_settings(), "oauth_cb": OAUTH_CB, "sasl.oauthbearer.config": "principal=admin"}
        secrets = []
    url = f"kafka://{settings.pop('bootstrap.servers')}"
    return url, settings, secrets


def _source(name: str, topic: str) -> dict[str, Any]:
    return {"name": name, "connector.class": "connect_runtime.connectors.datagen.DataGenSource", "topic": topic,
            "max.records": RECORDS, "batch.size": 100, "tasks.max": 1, "topic.creation.default.partitions": 2,
            "poll.idle.timeout.ms": 200}


def _sink(name: str, topic: str, directory: Path) -> dict[str, Any]:
    return {"name": name, "connector.class": "connect_runtime.connectors.files.FileSink", "topics": topic,
            "directory": str(directory), "format": "jsonl"}


@pytest.mark.parametrize("way", WAYS)
def test_exactly_once_through_every_authentication(kafka_secure: SecuredKafka, token_endpoint: TokenEndpoint,
                                                   way: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    url, settings, secrets = connection(kafka_secure, way, token_endpoint)
    suffix = uuid.uuid4().hex[:8]
    topic, out = f"auth-{suffix}", tmp_path / "out"
    tokens_before = len(token_endpoint.issued)

    first = run_source(_source(f"gen-{suffix}", topic), url, backend_settings=settings)
    assert first.records == RECORDS
    sunk = run_sink(_sink(f"files-{suffix}", topic, out), url, backend_settings=settings, until_offsets=first)
    assert sunk.records == RECORDS
    assert sunk_ids(out, topic) == list(range(RECORDS)), "records lost or written twice by the sink"
    assert committed_ids(kafka_secure, topic, 2) == list(range(RECORDS)), "records lost or written twice"
    assert run_source(_source(f"gen-{suffix}", topic), url, backend_settings=settings).records == 0

    if way == "OAUTHBEARER oidc":
        assert len(token_endpoint.issued) > tokens_before, "the token endpoint was never asked"
        secrets += token_endpoint.issued[tokens_before:]
    for secret in secrets:
        assert secret not in caplog.text, f"a secret of {way} reached the logs"


REFUSALS = {
    "wrong password": "authentication failed",
    "untrusted CA": "the broker's certificate is not trusted",
    "expired client certificate": "the broker refused this client's certificate",
    "wrong OAuth client secret": "authentication failed",
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refused_client_fails_at_once_naming_the_server_and_the_cause(
        kafka_secure: SecuredKafka, token_endpoint: TokenEndpoint, case: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    if case == "wrong OAuth client secret":
        settings: dict[str, Any] = {**kafka_secure.oauth_settings(), **token_endpoint.settings(),
                                    "sasl.oauthbearer.client.secret": f"not-it-{uuid.uuid4().hex}"}
        secret = settings["sasl.oauthbearer.client.secret"]
    elif case == "wrong password":
        settings = kafka_secure.sasl_settings("admin", "SCRAM-SHA-512", password="pw-" + uuid.uuid4().hex)
        secret = settings["sasl.password"]
    elif case == "untrusted CA":
        settings = {**kafka_secure.sasl_settings("admin"), "ssl.ca.pem": kafka_secure.foreign_ca.pem}
        del settings["ssl.ca.location"]
        secret = settings["sasl.password"]
    else:
        cert = kafka_secure.issue(f"old-{uuid.uuid4().hex[:6]}", expired=True)
        settings = kafka_secure.certificate_settings(cert, inline=True)
        secret = cert.key_pem.strip().splitlines()[1]
    bootstrap = settings.pop("bootstrap.servers")
    settings["connect.timeout.ms"] = 120_000  # a refusal must not wait for the bound
    suffix = uuid.uuid4().hex[:8]
    with pytest.raises(BackendUnavailableError) as failed:
        run_source(_source(f"refused-{suffix}", f"refused-{suffix}"), f"kafka://{bootstrap}", backend_settings=settings)
    message = str(failed.value)
    assert bootstrap in message and REFUSALS[case] in message, message
    assert secret not in message and secret not in caplog.text


def test_an_oauth_cb_that_raises_is_named_in_the_error(kafka_secure: SecuredKafka) -> None:
    """confluent-kafka waits 10 s for a first token when it makes the client, then says only "OAuth token not
    set": the error names the callable and what it raised (a token service down may come back: not a
    ConfigError)."""
    settings: dict[str, Any] = {**kafka_secure.oauth_settings(), "sasl.oauthbearer.config": "principal=admin",
                                "oauth_cb": "tests.support.kafka_secure.failing_oauth_token"}
    url = f"kafka://{settings.pop('bootstrap.servers')}"
    with pytest.raises(BackendUnavailableError) as failed, open_backend(url, settings) as backend:
        backend.list_topics()
    message = str(failed.value)
    assert "no OAUTHBEARER token" in message and "failing_oauth_token raised RuntimeError: the token service is " \
        "down" in message and url.removeprefix("kafka://") in message, message


def test_oauth_cb_that_does_not_resolve_is_one_config_error(kafka_secure: SecuredKafka) -> None:
    base = kafka_secure.oauth_settings()
    url = f"kafka://{base.pop('bootstrap.servers')}"
    for path, why in [("no_such_package.tokens.get", "cannot be imported"),
                      ("tests.support.kafka_secure.nothing_here", "has no attribute 'nothing_here'"),
                      ("tests.support.kafka_secure.ADMIN", "not a callable")]:
        with pytest.raises(ConfigError) as failed:
            open_backend(url, {**base, "oauth_cb": path})
        assert set(failed.value.errors) == {"oauth_cb"} and why in failed.value.errors["oauth_cb"], failed.value.errors
        assert path in str(failed.value)
