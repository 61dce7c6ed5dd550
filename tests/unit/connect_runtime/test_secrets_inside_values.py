"""Secrets that hide inside values that are not secret as a whole (issue 25): the password in a URL's user-info
and the credentials in an options map. They are masked wherever a PASSWORD field is: masked configs, scrubbed
error text, the run registry, and the CLI's output and log lines
(tests/integration/connect_runtime/test_cli_masks_secrets.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connect_runtime import run_source
from connect_runtime.backends import open_backend
from connect_runtime.runtime.registry import Registry
from connect_runtime.secrets import mask_config, mask_urls, scrub, secret_values, url_passwords

PW = "s3cr3t-pw"


@pytest.mark.parametrize(("text", "passwords"), [
    (f"postgresql://svc:{PW}@db:5432/orders", [PW]),
    (f"postgresql+psycopg://svc:{PW}@db/orders?sslmode=require", [PW]),  # a SQLAlchemy URL
    ("kafka://svc:p%40ss@broker:9092", ["p%40ss", "p@ss"]),  # percent-encoded: both forms
    (f"error at mysql://u:{PW}@h/db, retrying s3://bucket/key", [PW]),  # inside free text
    ("http://user@host/path", []), ("postgresql://u:@host/db", []), ("no url here: a:b@c", []),
])
def test_url_passwords_are_found_in_any_text(text: str, passwords: list[str]) -> None:
    assert url_passwords(text) == passwords
    masked = mask_urls(text)
    assert all(p not in masked for p in passwords)
    if passwords:
        assert ":[hidden]@" in masked and ("svc:" in masked or "u:" in masked)  # the user name is kept


def test_mask_config_masks_inside_urls_and_options_maps_and_keeps_the_rest() -> None:
    config = {"name": "c", "connector.class": "x.Y", "connection.url": f"postgresql://svc:{PW}@db/orders",
              "storage.options": json.dumps({"key": "AKID", "secret": "opt-secret", "client_kwargs": {
                  "aws_secret_access_key": "deep-secret", "region_name": "eu"}}),
              "client.options": {"token": "tok-123", "timeout": 5}, "topics": "a"}
    masked = mask_config(config)
    text = json.dumps(masked)
    for secret in (PW, "opt-secret", "deep-secret", "tok-123"):
        assert secret not in text
    assert masked["connection.url"] == "postgresql://svc:[hidden]@db/orders"
    options = json.loads(masked["storage.options"])
    assert options["key"] == "AKID" and options["client_kwargs"]["region_name"] == "eu"
    assert masked["client.options"] == {"token": "[hidden]", "timeout": 5} and masked["topics"] == "a"
    assert set(secret_values(config)) == {PW, "opt-secret", "deep-secret", "tok-123"}


def test_scrub_masks_given_values_and_every_url_password() -> None:
    text = f"failed: {PW} at postgresql://u:other-pw@h/db"
    assert scrub(text, [PW]) == "failed: [hidden] at postgresql://u:[hidden]@h/db"


def test_a_failed_run_keeps_its_error_in_the_registry_with_every_secret_masked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pc.db'}"
    config = {"name": "leaky", "connector.class": "tests.support.signed_connector.LeakySource",
              "topic": "t", "max.records": "5", "signing.key": "sign-key-77",
              "connection.url": f"postgresql://svc:{PW}@db.example:5432/orders",
              "storage.options": '{"secret": "opt-secret-5"}'}
    with pytest.raises(RuntimeError, match="cannot connect"):
        run_source(config, url)
    with open_backend(url) as be:
        (attempt,) = Registry(be).attempts("leaky")
    assert attempt["state"] == "failed" and "cannot connect to postgresql://svc:[hidden]@db.example" in attempt["error"]
    for secret in (PW, "sign-key-77", "opt-secret-5"):
        assert secret not in attempt["error"]




def test_schema_registry_credentials_are_secret_by_name_and_by_type() -> None:
    # by type (the Avro converter's ConfigDef declares basic.auth.user.info a PASSWORD) and by name (also when the
    # converter class cannot be imported), and the password inside the registry URL
    for converter in ("io.confluent.connect.avro.AvroConverter", "no.such.Converter"):
        config = {"name": "c", "connector.class": "connect_runtime.connectors.files.FileSink",
                  "value.converter": converter, "value.converter.basic.auth.user.info": "bob:s3cret-1",
                  "key.converter.basic.auth.user.info": "alice:s3cret-2",
                  "value.converter.schema.registry.url": "http://reg:s3cret-3@127.0.0.1:8081"}
        masked = mask_config(config)
        assert "s3cret" not in repr(masked), masked
        assert masked["value.converter.schema.registry.url"].startswith("http://reg:")
