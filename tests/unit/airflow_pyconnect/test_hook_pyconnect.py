"""PyConnectHook: connection → backend URL and settings, the embedded default, secrets masked.

Connections come from ``AIRFLOW_CONN_*`` variables: Airflow's own environment secrets backend.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_pyconnect.hooks import pyconnect as hook_module
from airflow_pyconnect.hooks.pyconnect import PyConnectHook, backend_url_from_host


@pytest.mark.parametrize(("host", "port", "url"), [
    ("sqlite:////var/x.db", None, "sqlite:////var/x.db"),
    ("kafka://b1:9092,b2:9092", None, "kafka://b1:9092,b2:9092"),
    ("b1:9092, b2:9092", None, "kafka://b1:9092,b2:9092"),
    ("broker", 9093, "kafka://broker:9093"),
    ("/var/pyconnect.db", None, "sqlite:////var/pyconnect.db"),
])
def test_backend_url_from_host(host: str, port: int | None, url: str) -> None:
    assert backend_url_from_host(host, port) == url


@pytest.mark.parametrize("host", ["", "http://x:1"])
def test_backend_url_from_host_rejects(host: str) -> None:
    with pytest.raises(ValueError, match=r"expected sqlite:///path/file\.db"):
        backend_url_from_host(host)


def _conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "pyconnect", **fields}))


def test_kafka_connection_with_sasl_and_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _conn(monkeypatch, "pc_kafka", host="b1:9092,b2:9092", login="svc", password="pw-very-secret-1",
          extra={"sasl.jaas.config": "jaas-very-secret-2", "ssl.ca.location": "/ca.pem",
                 "security_protocol": "SASL_PLAINTEXT"})
    hook = PyConnectHook("pc_kafka")
    url, settings = hook.backend_config()
    assert url == "kafka://b1:9092,b2:9092"
    assert settings == {"sasl.jaas.config": "jaas-very-secret-2", "ssl.ca.location": "/ca.pem",
                        "security.protocol": "SASL_PLAINTEXT", "sasl.username": "svc",
                        "sasl.password": "pw-very-secret-1", "sasl.mechanism": "PLAIN"}
    described = hook.describe()
    assert described["settings"]["sasl.password"] == "[hidden]"
    assert described["settings"]["sasl.jaas.config"] == "[hidden]"
    assert described["settings"]["ssl.ca.location"] == "/ca.pem"
    # registered with Airflow's secret masker: redact() hides them wherever they are logged
    from airflow.sdk._shared.secrets_masker import redact

    text = redact(f"login with pw-very-secret-1 and jaas-very-secret-2 via {url}")
    assert "pw-very-secret-1" not in text and "jaas-very-secret-2" not in text and url in text


def test_kafka_connection_with_each_authentication_hides_its_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """mTLS with an encrypted key inline (each line of the PEM key masked on its own too), OIDC with the OAuth
    client in login/password, oauth_cb as a dotted path (text; the backend imports it in the worker)."""
    from airflow.sdk._shared.secrets_masker import redact

    key = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAh1\nAgIIADAMBggqhkiG9w0CCQUA\n" \
          "-----END ENCRYPTED PRIVATE KEY-----\n"
    _conn(monkeypatch, "pc_mtls", host="b1:9094", extra={"security_protocol": "SSL", "ssl.key.pem": key,
                                                        "ssl.key.password": "key-pw-secret-3",
                                                        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----\nAAA\n"})
    _, settings = PyConnectHook("pc_mtls").backend_config()
    assert settings["ssl.key.pem"] == key and settings["security.protocol"] == "SSL"
    described = PyConnectHook("pc_mtls").describe()["settings"]
    assert described["ssl.key.pem"] == described["ssl.key.password"] == "[hidden]"
    assert described["ssl.certificate.pem"].startswith("-----BEGIN CERTIFICATE-----")
    text = redact("a line of it: MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAh1; and key-pw-secret-3")
    assert "MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAh1" not in text and "key-pw-secret-3" not in text

    _conn(monkeypatch, "pc_oidc", host="b1:9095", login="client-7", password="client-secret-4",
          extra={"sasl_mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc"})
    _, settings = PyConnectHook("pc_oidc").backend_config()
    assert settings == {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                        "sasl.oauthbearer.client.id": "client-7", "sasl.oauthbearer.client.secret": "client-secret-4",
                        "security.protocol": "SASL_SSL"}
    assert "client-secret-4" not in redact("secret client-secret-4")

    _conn(monkeypatch, "pc_cb", host="b1:9095", extra={"sasl.mechanism": "OAUTHBEARER", "oauth_cb": "my.tokens.get"})
    assert PyConnectHook("pc_cb").describe()["settings"]["oauth_cb"] == "my.tokens.get"


def test_sqlite_connection_opens_and_tests(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _conn(monkeypatch, "pc_sqlite", host=f"sqlite:///{tmp_path / 'h.db'}", extra={"busy.timeout.ms": 2000})
    hook = PyConnectHook("pc_sqlite")
    with hook.get_backend() as be:
        be.create_topics({"t1": 2})
    ok, message = hook.test_connection()
    assert ok, message
    assert message == f"Connected to sqlite:///{tmp_path / 'h.db'}: 1 topic(s)"


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def test_test_connection_opens_the_store_read_only_and_creates_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The UI's Test button (run in the API server): a SQLite path naming no file fails the test naming the
    path, and creates no directory and no file; an existing store is read, not written (no file added or
    changed); the embedded default creates no directory either."""
    missing = tmp_path / "not" / "yet" / "p.db"
    _conn(monkeypatch, "pc_missing", host=f"sqlite:///{missing}")
    ok, message = PyConnectHook("pc_missing").test_connection()
    assert not ok and str(missing) in message and "no such file" in message, message
    assert list(tmp_path.iterdir()) == []

    store = tmp_path / "store"
    store.mkdir()
    _conn(monkeypatch, "pc_store", host=f"sqlite:///{store / 'p.db'}")
    with PyConnectHook("pc_store").get_backend() as be:
        be.create_topics({"t1": 2, "t2": 1})
    before = _tree(store)
    assert PyConnectHook("pc_store").test_connection() == (True, f"Connected to sqlite:///{store / 'p.db'}: 2 topic(s)")
    after = _tree(store)
    assert after["p.db"] == before["p.db"], "the database file is not written"
    # a WAL reader's coordination files (an empty log, the shared-memory index) are SQLite's, as any reader
    # beside a writer makes them; nothing else appears
    assert set(after) - set(before) <= {"p.db-wal", "p.db-shm"} and after.get("p.db-wal", (0, 0))[0] == 0, after

    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AIRFLOW_CONN_PYCONNECT_DEFAULT", raising=False)
    ok, message = PyConnectHook().test_connection()
    assert not ok and str(tmp_path / "home" / "pyconnect" / "pyconnect.db") in message, message
    assert not (tmp_path / "home").exists()


def test_test_connection_reports_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    _conn(monkeypatch, "pc_bad", host="sqlite:///")
    ok, message = PyConnectHook("pc_bad").test_connection()
    assert not ok and message


def test_undefined_default_uses_the_embedded_backend_and_says_so_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AIRFLOW_CONN_PYCONNECT_DEFAULT", raising=False)
    monkeypatch.setattr(hook_module, "_default_logged", type(hook_module._default_logged)())
    urls = [PyConnectHook().backend_config()[0] for _ in range(3)]
    assert urls == [f"sqlite:///{tmp_path / 'home' / 'pyconnect' / 'pyconnect.db'}"] * 3
    assert (tmp_path / "home" / "pyconnect").is_dir()
    # Airflow's structlog setup writes task-side logs to stdout
    captured = capsys.readouterr()
    assert (captured.out + captured.err).count("is not defined: using the embedded backend") == 1


def test_any_other_undefined_connection_is_an_error_naming_it() -> None:
    from airflow.sdk.exceptions import AirflowNotFoundException

    with pytest.raises(AirflowNotFoundException, match="'no_such_pyconnect' is not defined"):
        PyConnectHook("no_such_pyconnect").backend_config()


def test_extra_must_be_an_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_PC_LIST", json.dumps({"conn_type": "pyconnect", "host": "b:1", "extra": "[1, 2]"}))
    with pytest.raises(ValueError, match="must be a JSON object"):
        PyConnectHook("pc_list").backend_config()


def test_form_fields_map_to_librdkafka_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    _conn(monkeypatch, "pc_form", host="kafka://b:9092",
          extra={"extra__pyconnect__sasl_mechanism": "SCRAM-SHA-512", "security_protocol": "SSL",
                 "sasl_mechanism_unused": ""})
    url, settings = PyConnectHook("pc_form").backend_config()
    assert url == "kafka://b:9092"
    assert settings == {"sasl.mechanism": "SCRAM-SHA-512", "security.protocol": "SSL"}
