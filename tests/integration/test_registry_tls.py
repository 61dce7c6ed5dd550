"""The Schema Registry converters against a registry behind TLS that requires HTTP basic auth (issue 34.4): the
session's Apicurio Registry behind a TLS-terminating proxy (tests/support/tls_proxy.py) with a certificate of the
test CA, checking ``Authorization: Basic`` before it forwards, as a load balancer in front of a registry does.

- Avro, JSON Schema and Protobuf records go through a source run and back through a sink run over HTTPS with
  ``basic.auth.credentials.source=USER_INFO`` (the proxy counts what reached it: nothing refused).
- Mutual TLS: a proxy that requires a client certificate of the CA accepts the converter's
  ``schema.registry.ssl.certificate.location`` / ``key.location`` and refuses a converter without one.
- A foreign CA, the registry's certificate expired, a wrong password, no client certificate under mTLS: the run
  fails with one error naming the registry's URL and the cause, never the password (nor in the logs), at the first
  record after one attempt (the proxy counts them; confluent-kafka retries transport errors for seconds), and
  nothing is committed; a sink
  under ``errors.tolerance=all`` dead-letters nothing for it; the rerun with the right settings delivers every
  record once."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from connect_runtime.api import TopicPartition
from connect_runtime.api.data import to_plain
from connect_runtime.api.errors import ConfigError
from connect_runtime.backends import open_backend
from connect_runtime.converters.avro import AvroConverter
from connect_runtime.runtime.sink import run_sink
from connect_runtime.runtime.source import run_source
from tests.support.collecting_sink import COLLECTED
from tests.support.schema_registry import CCOMPAT_PATH, ApicurioRegistry
from tests.support.tls import Issued, TestCA
from tests.support.tls_proxy import TlsProxy
from tests.support.typed_source import SHIPMENT_SCHEMAS, shipment, shipment_values

pytestmark = pytest.mark.schema_registry

USER, PASSWORD, WRONG = "svc", "Regi5try-pa55word", "wr0ng-Pa55word"
FAIL_FAST_S = 2.0
"""A refused certificate or password fails the run well within this; confluent-kafka's retry loop alone would take
up to 7 s on a TLS failure (3 retries, backoff up to 1, 2 and 4 s; measured 2.1 to 3.3 s): the check is generous for
a loaded machine, the retry loop is what it catches."""
CONVERTERS = {"avro": "io.confluent.connect.avro.AvroConverter",
              "json": "io.confluent.connect.json.JsonSchemaConverter",
              "protobuf": "io.confluent.connect.protobuf.ProtobufConverter"}


@dataclass(frozen=True)
class Registries:
    ca: TestCA
    foreign: TestCA
    client: Issued
    good: TlsProxy
    expired: TlsProxy
    mtls: TlsProxy


@pytest.fixture(scope="module")
def tls(schema_registry: ApicurioRegistry, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registries]:
    ca = TestCA.create(tmp_path_factory.mktemp("registry-ca"))
    foreign = TestCA.create(tmp_path_factory.mktemp("registry-foreign"), name="a CA nobody trusts")
    upstream, users = f"http://127.0.0.1:{schema_registry.port}", {USER: PASSWORD}
    with TlsProxy(upstream, ca.issue("registry"), users=users) as good, \
            TlsProxy(upstream, ca.issue("registry-old", expired=True), users=users) as expired, \
            TlsProxy(upstream, ca.issue("registry-mtls"), users=users, client_ca=str(ca.cert_path)) as mtls:
        yield Registries(ca, foreign, ca.issue("svc-client", client=True), good, expired, mtls)


def settings(proxy: TlsProxy, ca: TestCA, password: str = PASSWORD, client: Issued | None = None) -> dict[str, str]:
    """A registry converter's settings (unprefixed) for ``proxy``."""
    out = {"schema.registry.url": proxy.url + CCOMPAT_PATH, "basic.auth.credentials.source": "USER_INFO",
           "basic.auth.user.info": f"{USER}:{password}", "schema.registry.ssl.ca.location": str(ca.cert_path)}
    if client is not None:
        out.update({"schema.registry.ssl.certificate.location": str(client.cert),
                    "schema.registry.ssl.key.location": str(client.key)})
    return out


def prefixed(conv: dict[str, str], fmt: str = "avro") -> dict[str, str]:
    return {"value.converter": CONVERTERS[fmt], **{f"value.converter.{k}": v for k, v in conv.items()}}


def source(topic: str, conv: dict[str, str], fmt: str = "avro", count: int = 5) -> dict[str, str]:
    return {"name": f"src-{topic}", "connector.class": "tests.support.typed_source.ShipmentSource", "topic": topic,
            "schema": "v1", "first.id": "1", "count": str(count), **prefixed(conv, fmt)}


def sink(topic: str, conv: dict[str, str], **extra: str) -> dict[str, str]:
    return {"name": f"sink-{topic}", "connector.class": "tests.support.collecting_sink.CollectingSink",
            "topics": topic, **prefixed(conv), **extra}


def topic_values(url: str, topic: str) -> list[bytes | None]:
    with open_backend(url) as backend:
        return [r.value for r in backend.read_range(TopicPartition(topic, 0), 0, 1000)]


@pytest.mark.parametrize("fmt", sorted(CONVERTERS))
def test_each_format_round_trips_over_https_with_basic_auth(tls: Registries, sqlite_url: str, fmt: str) -> None:
    conv = settings(tls.good, tls.ca)
    if fmt == "protobuf":
        conv["optional.for.nullables"] = "true"
    refused, answered = tls.good.refused, tls.good.answered
    topic = f"tls-{fmt}"
    assert run_source(source(topic, conv, fmt), sqlite_url).records == 5
    COLLECTED.pop(f"sink-{topic}", None)
    sink_cfg = {**sink(topic, conv), **prefixed(conv, fmt)}
    assert run_sink(sink_cfg, sqlite_url).records == 5
    assert [v for *_, v in COLLECTED[f"sink-{topic}"]] == [to_plain(v) for v in shipment_values(1, 5)]
    assert tls.good.refused == refused and tls.good.answered > answered  # every request authenticated, over TLS


def test_mutual_tls_takes_the_client_certificate(tls: Registries) -> None:
    value = shipment(1)
    conv = AvroConverter()
    conv.configure(settings(tls.mtls, tls.ca, client=tls.client), False)
    data = conv.from_connect_data("mtls", SHIPMENT_SCHEMAS["v1"], value)
    assert to_plain(conv.to_connect_data("mtls", data).value) == to_plain(value)
    bare = AvroConverter()
    bare.configure(settings(tls.mtls, tls.ca), False)
    with pytest.raises(ConfigError, match="requires a client certificate and got none") as err:
        bare.from_connect_data("mtls", SHIPMENT_SCHEMAS["v1"], value)
    assert tls.mtls.url in str(err.value) and PASSWORD not in str(err.value)


CASES: dict[str, tuple[str, Any]] = {
    "foreign CA": ("not signed by a CA this client trusts",
                   lambda t: settings(t.good, t.foreign)),
    "expired certificate": ("the server's certificate has expired",
                            lambda t: settings(t.expired, t.ca)),
    "wrong password": ("refused the credentials (HTTP 401",
                       lambda t: settings(t.good, t.ca, password=WRONG)),
    "no client certificate": ("requires a client certificate and got none",
                              lambda t: settings(t.mtls, t.ca)),
}


def _attempts(tls: Registries) -> int:
    """What reached the proxies: TLS handshakes that failed, requests refused for their credentials."""
    return sum(p.handshake_failures + p.refused for p in (tls.good, tls.expired, tls.mtls))


def _fails_fast(run: Any, tls: Registries, conv: dict[str, str], cause: str, caplog: pytest.LogCaptureFixture) -> str:
    caplog.clear()
    before = _attempts(tls)
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        run()
    took = time.monotonic() - started
    deadline = time.monotonic() + 10  # the proxy counts a failed handshake in its own thread, just after the client
    while _attempts(tls) == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _attempts(tls) - before == 1, "the refused request was tried again (confluent-kafka's retry loop)"
    text = str(info.value)
    print(f"failed in {took:.2f} s: {text}")
    assert conv["schema.registry.url"] in text and cause in text, text
    for secret in (PASSWORD, WRONG):
        assert secret not in text and secret not in caplog.text, "a password leaked"
    assert took < FAIL_FAST_S, f"the run took {took:.1f} s to fail: {text}"
    return text


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_registry_fails_a_source_run_at_once(tls: Registries, sqlite_url: str, case: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    cause, make = CASES[case]
    caplog.set_level(logging.DEBUG)
    topic = f"refused-{case.replace(' ', '-')}"
    bad = make(tls)
    _fails_fast(lambda: run_source(source(topic, bad), sqlite_url), tls, bad, cause, caplog)
    assert topic_values(sqlite_url, topic) == []  # nothing committed: no record, no offset (the rerun starts at 1)
    assert run_source(source(topic, settings(tls.good, tls.ca)), sqlite_url).records == 5
    assert len(topic_values(sqlite_url, topic)) == 5


@pytest.mark.parametrize("case", ["wrong password", "foreign CA"])
def test_a_refused_registry_fails_a_tolerant_sink_run_dead_lettering_nothing(
        tls: Registries, sqlite_url: str, case: str, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka Connect's ``errors.tolerance=all`` tolerates any converter exception and would dead-letter every record
    for a wrong password; here a refused certificate or password is a ConfigError, which no tolerance skips."""
    cause, make = CASES[case]
    caplog.set_level(logging.DEBUG)
    topic = f"tolerant-{case.replace(' ', '-')}"
    assert run_source(source(topic, settings(tls.good, tls.ca)), sqlite_url).records == 5
    COLLECTED.pop(f"sink-{topic}", None)
    tolerant = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": f"dlq-{topic}"}
    bad = make(tls)
    _fails_fast(lambda: run_sink(sink(topic, bad, **tolerant), sqlite_url), tls, bad, cause, caplog)
    assert topic_values(sqlite_url, f"dlq-{topic}") == [] and not COLLECTED.get(f"sink-{topic}")
    again = run_sink(sink(topic, settings(tls.good, tls.ca), **tolerant), sqlite_url)
    assert again.records == 5 and again.dead_lettered == 0  # the group committed nothing: all five, once
    assert [v for *_, v in COLLECTED[f"sink-{topic}"]] == [to_plain(v) for v in shipment_values(1, 5)]
