"""The Kafka backend's authentication helpers (connect_runtime/backends/kafka/_auth.py): ``oauth_cb`` by dotted path,
and which client errors are a broker refusing the client (texts as librdkafka 2.16 reports them against Apache
Kafka 4.4.0; tests/integration/test_kafka_secure_auth.py sees them for real)."""

from __future__ import annotations

import confluent_kafka as ck
import pytest

from connect_runtime.api.errors import ConfigError
from connect_runtime.backends import open_backend
from connect_runtime.backends.kafka._auth import refusal_cause, resolve_callable, token_recorder


def test_a_callable_or_its_dotted_path() -> None:
    assert resolve_callable("oauth_cb", len) is len
    assert resolve_callable("oauth_cb", "json.dumps").__name__ == "dumps"
    assert resolve_callable("oauth_cb", "json:dumps").__name__ == "dumps"


@pytest.mark.parametrize(("value", "why"), [
    ("no_such_module_x.get_token", "cannot be imported"),
    ("json.no_such_function", "has no attribute 'no_such_function'"),
    ("json.decoder.NaN", "not a callable"),
    ("token", "expected a callable or its dotted path"),
    (42, "expected a callable or its dotted path"),
])
def test_one_clear_error_naming_oauth_cb(value: object, why: str) -> None:
    with pytest.raises(ConfigError) as failed:
        resolve_callable("oauth_cb", value)
    assert list(failed.value.errors) == ["oauth_cb"] and why in failed.value.errors["oauth_cb"], failed.value.errors


def test_the_backend_resolves_oauth_cb_when_opened_and_hides_its_tokens() -> None:
    with pytest.raises(ConfigError, match="oauth_cb"):
        open_backend("kafka://127.0.0.1:9", {"oauth_cb": "no_such_module_x.get_token"})
    with pytest.raises(ConfigError) as failed:
        open_backend("kafka://127.0.0.1:9", {"producer.override.oauth_cb": "json.decoder.NaN"})
    assert list(failed.value.errors) == ["producer.override.oauth_cb"], failed.value.errors
    secrets: list[str] = []
    failures: list[tuple[str, bool]] = []
    call = token_recorder(lambda config: (f"tok-{config}", 1e10), secrets, failures)
    assert call("a") == ("tok-a", 1e10) and secrets == ["tok-a"] and failures == []

    def down(config: str) -> tuple[str, float]:
        raise RuntimeError("token service down")

    with pytest.raises(RuntimeError):
        token_recorder(down, secrets, failures)("a")
    with pytest.raises(TypeError):
        token_recorder(lambda config: "just-a-token", secrets, failures)("a")
    assert failures == [("oauth_cb test_the_backend_resolves_oauth_cb_when_opened_and_hides_its_tokens.<locals>.down "
                         "raised RuntimeError: token service down", False),
                        ("oauth_cb test_the_backend_resolves_oauth_cb_when_opened_and_hides_its_tokens.<locals>."
                         "<lambda> returned a str, expected (token, expiry epoch seconds)", True)]
    with open_backend("kafka://127.0.0.1:9", {"oauth_cb": "tests.support.kafka_secure.oauth_token"}) as backend:
        conf = backend.client_config("producer")
        token, _expiry = conf["oauth_cb"]("principal=bob")
        assert backend.redact(f"got {token}") == "got ***"


@pytest.mark.parametrize(("code", "text", "cause"), [
    (ck.KafkaError._AUTHENTICATION, "sasl_ssl://h:1/bootstrap: SASL authentication error: Authentication failed "
     "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256", "authentication failed"),
    (ck.KafkaError._SSL, "sasl_ssl://h:1/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate "
     "verify failed: broker certificate could not be verified", "the broker's certificate is not trusted"),
    (ck.KafkaError._TRANSPORT, "ssl://h:1/bootstrap: Receive failed: error:0A000416:SSL routines::ssl/tls alert "
     "certificate unknown: SSL alert number 46", "the broker refused this client's certificate"),
    (ck.KafkaError._TRANSPORT, "ssl://h:1/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad "
     "certificate: SSL alert number 42", "the broker refused this client's certificate"),
])
def test_a_refusal_names_its_cause(code: int, text: str, cause: str) -> None:
    found = refusal_cause(ck.KafkaError(code, text))
    assert found is not None and found.startswith(cause) and text in found


@pytest.mark.parametrize(("code", "text"), [
    (ck.KafkaError._TRANSPORT, "ssl://h:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"),
    (ck.KafkaError._TRANSPORT, "ssl://h:1/bootstrap: Disconnected (after 5ms in state UP)"),
    (ck.KafkaError._SSL, "ssl://h:1/bootstrap: SSL transport error: error:0A000126:SSL routines::unexpected eof "
     "while reading"),
    (ck.KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
])
def test_a_broker_down_is_no_refusal(code: int, text: str) -> None:
    assert refusal_cause(ck.KafkaError(code, text)) is None


def test_a_refusal_is_remembered_for_one_bound_only() -> None:
    """A refusal names the failures of the next ``connect.timeout.ms`` (and of an operation that saw it), not a
    later outage: an OAuth token refused once and refreshed since must not turn a broker restart into an
    "authentication failed"."""
    import time

    from connect_runtime.backends.kafka._client import _Clients

    clients = _Clients("h:1", {"connect.timeout.ms": 1000, "sasl.password": "pw-secret-123"})
    assert clients.refused() is None
    started = time.monotonic()
    clients.error_cb(ck.KafkaError(ck.KafkaError._AUTHENTICATION, "SASL authentication error: bad pw-secret-123"))
    cause = clients.refused(since=started)
    assert cause is not None and cause.startswith("authentication failed") and "pw-secret-123" not in cause
    assert clients.refused(since=time.monotonic() + 1) is None
    err = clients.translate(ck.KafkaException(ck.KafkaError(ck.KafkaError._TRANSPORT, "down")), "reading")
    assert "could not be used (reading): authentication failed" in str(err)
    clients._refused = (time.monotonic() - 5, "authentication failed (old)")  # older than the bound
    assert clients.refused() is None
    err = clients.translate(ck.KafkaException(ck.KafkaError(ck.KafkaError._TRANSPORT, "down")), "reading")
    assert "could not be reached" in str(err)
