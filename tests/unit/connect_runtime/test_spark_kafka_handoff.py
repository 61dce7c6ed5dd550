"""connect_runtime.spark_kafka's secret hand-off: :func:`handoff_settings` (in the Airflow worker: the security part of
the connection's settings, self-contained) and :func:`handed_settings` (in the Spark job: read from the environment).

Under a real ``airflow dags test`` and ``spark-submit``: tests/integration/test_spark_handoff_secure.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connect_runtime import spark_kafka
from connect_runtime.spark_kafka import SETTINGS_ENV, SecuritySettingsError, handed_settings, handoff_settings

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
         "sasl.password": "s3cret", "connect.timeout.ms": "15000", "producer.override.linger.ms": "5"}


def test_only_the_security_settings_are_handed_over_with_their_files_inline(tmp_path: Path) -> None:
    for name in ("ca", "cert", "key"):
        (tmp_path / f"{name}.pem").write_text(f"{name.upper()} PEM\n")
    assert handoff_settings({**SCRAM, "ssl.ca.location": str(tmp_path / "ca.pem")}) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
        "sasl.password": "s3cret", "ssl.ca.pem": "CA PEM\n"}
    mtls = handoff_settings({"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "ca.pem"),
                             "ssl.certificate.location": str(tmp_path / "cert.pem"),
                             "ssl.key.location": str(tmp_path / "key.pem"), "ssl.key.password": "kp"})
    assert mtls == {"security.protocol": "SSL", "ssl.ca.pem": "CA PEM\n", "ssl.certificate.pem": "CERT PEM\n",
                    "ssl.key.pem": "KEY PEM\n", "ssl.key.password": "kp"}
    # given inline, the text wins over a path
    assert handoff_settings({"security.protocol": "SSL", "ssl.ca.pem": "INLINE",
                             "ssl.ca.location": str(tmp_path / "ca.pem")})["ssl.ca.pem"] == "INLINE"


def test_a_plaintext_backend_hands_over_nothing() -> None:
    assert handoff_settings({}) == {} and handoff_settings(None) == {}
    assert handoff_settings({"connect.timeout.ms": "1000", "security.protocol": "plaintext"}) == {}


def test_what_spark_cannot_take_fails_in_the_worker_naming_the_setting() -> None:
    with pytest.raises(SecuritySettingsError, match="'oauth_cb'") as failed:
        handoff_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                          "oauth_cb": "my.tokens.fetch", "sasl.password": "s3cret"})
    assert "s3cret" not in str(failed.value)


def test_a_missing_pem_file_fails_naming_its_path(tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"nowhere\.pem"):
        handoff_settings({"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "nowhere.pem")})


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A job process that has not read its settings yet."""
    monkeypatch.setattr(spark_kafka, "_handed", None)
    monkeypatch.delenv(SETTINGS_ENV, raising=False)
    return monkeypatch


def test_the_job_reads_them_once_and_takes_them_out_of_its_environment(fresh: pytest.MonkeyPatch) -> None:
    import os

    fresh.setenv(SETTINGS_ENV, json.dumps(handoff_settings(SCRAM)))
    first = handed_settings(required=True)
    assert first["sasl.password"] == "s3cret" and SETTINGS_ENV not in os.environ
    assert handed_settings() == first  # a second read in the same job


def test_nothing_handed_is_empty_or_when_required_an_error_naming_the_operator(fresh: pytest.MonkeyPatch) -> None:
    assert handed_settings() == {}
    with pytest.raises(ValueError, match="PyConnectSparkSubmitOperator in client deploy mode"):
        handed_settings(required=True)


@pytest.mark.parametrize("raw", ['{"sasl.password": "s3cret"', '["s3cret"]', '{"sasl.password": ["s3cret"]}'])
def test_a_malformed_variable_fails_naming_it_never_its_value(fresh: pytest.MonkeyPatch, raw: str) -> None:
    fresh.setenv(SETTINGS_ENV, raw)
    with pytest.raises(ValueError, match=SETTINGS_ENV) as failed:
        handed_settings()
    assert "s3cret" not in str(failed.value) and failed.value.__cause__ is None and failed.value.__context__ is None
